"""OpenAI Responses (`/responses`): reasoning becomes native `reasoning` output items.

Whole bodies: each `message` output item whose `output_text` carries reasoning becomes, in
the order the text had them, reasoning item(s) and message item(s). Streams are rewritten event
by event, never buffered: while a message's `response.output_text.delta` events carry reasoning,
a reasoning item is streamed instead (`output_item.added`, `content_part.added` with a
`reasoning_text` part, `reasoning_text.delta` ..., the `.done` events, `output_item.done`), then
a message item for the answer. Items open lazily, on their first text, so no empty item appears.

Both paths run the same state machine (`_Message`): the body path feeds it whole texts and
keeps the items it builds, the stream path also sends the events it makes. So a stream,
accumulated, and the body rewrite of the same output agree by construction.

Stream bookkeeping (`StreamRewriter`):
- `output_index` is renumbered on every event, so items run 0, 1, 2 ... in the order they are
  added, across the items this proxy inserts.
- `sequence_number` stays strictly increasing: an event held back lends its number to the
  events sent later, and only when more events go out than came in do later numbers shift.
  An event that comes out as it came in goes out as its original bytes.
- The final `response.completed` / `incomplete` / `failed` gets an `output` array with the
  items as they were streamed (the SDK takes its final response from there).

Ids are deterministic: reasoning items are `rs_<message id without "msg_">_<position>`; the first
message piece keeps the message's id, later ones are `<message id>_<position>` (position = the
item's place among those the message became). A message without an id uses `<response id>_<index>`.

What the request asks for (`reasoning.summary` auto/concise/detailed), or the option
`think_responses_summary` (on by default: some clients read only the summary), adds the text as
a `summary_text` part, streamed as
`reasoning_summary_part.added` / `reasoning_summary_text.delta` ... `.done` / `part.done`;
`content` (`reasoning_text` parts) comes only with `think_responses_content=on` or when the
summary is off: the text goes in one place, so clients that render both (llm) show it once.
`include: ["reasoning.encrypted_content"]` puts the proxy's sealed mark in `encrypted_content`.

A response in which the upstream already sends reasoning items is native: it passes untouched.
The way back (a client sending these items, or references to them, back) is in restore.py.
"""
from __future__ import annotations

from typing import Any


from ...context import FlowContext
from ...jsonnum import loads
from ...jsonio import OUT, dumps
from .items import (  # noqa: F401  (the state machine both paths share; tests reach its parts)
    HOLD_MAX, _drive_parts, _ev, _Message, _ResponseState, _split_pieces, ended)
from .held import HeldText  # noqa: F401  (tests reach it)
from .restore import restore_request as restore_request  # (the way back)
from .shortcuts import _learn  # noqa: F401  (tests reach it)
from .stream import StreamRewriter as StreamRewriter  # (streams)

NAME = "responses"
SHAPE = "'output' item list (object 'response') or response.* events"
STREAM_TYPE = "text/event-stream"

_NOT_AN_ID = frozenset({"input_items", "cancel", "input_tokens", "compact"})


def matches(path: str) -> bool:
    """`.../responses` (create) and `.../responses/{id}` (retrieve); not input_items, cancel."""
    p = path.split("?", 1)[0].rstrip("/")
    head, _, last = p.rpartition("/")
    if last == "responses":
        return True
    return head.rpartition("/")[2] == "responses" and last not in _NOT_AN_ID


def looks_like(obj: dict[str, Any]) -> bool:
    t = obj.get("type")
    return (obj.get("object") == "response" or isinstance(obj.get("output"), list)
            or (isinstance(t, str) and t.startswith("response.")))


# -- whole bodies -------------------------------------------------------------------------------
def rewrite_body(data: bytes, ctx: FlowContext) -> bytes | None:
    """The rewritten body, or None when nothing changes. Raises ValueError on non-JSON."""
    obj = loads(data)
    if not isinstance(obj, dict) or not isinstance(obj.get("output"), list):
        return None
    output = obj["output"]
    if any(isinstance(it, dict) and it.get("type") == "reasoning" for it in output):
        ctx.stats.native = True
        return None
    owner = _ResponseState(ctx)
    owner.resp_id = obj.get("id") if isinstance(obj.get("id"), str) else None
    owner.model = obj.get("model")
    owner.ending = ended(obj)
    new: list[Any] = []
    changed = False
    for u, item in enumerate(output):
        if isinstance(item, dict) and item.get("type") == "message" and isinstance(item.get("content"), list):
            added = dict(item, content=[])
            m = _Message(owner, u, added, (_ev("response.output_item.added", output_index=u, item=added), None))
            _drive_parts(m, item, lambda text: _split_pieces(owner, text))
            if m.item_done(_ev("response.output_item.done", output_index=u, item=item), None):
                new.extend(m.built)
                changed = True
                continue
        new.append(item)
    return dumps(dict(obj, output=new)).encode("utf-8", OUT) if changed else None
