"""OpenAI Responses, the way back: reasoning items (and references to them) that a client sends
back in `input` become again what the upstream model wrote."""

from __future__ import annotations

from typing import Any, TypeGuard

from ...context import FlowContext
from ... import written
from ...rules import TagPair
from .. import after, inline, restore


# -- the way back -------------------------------------------------------------------------------
# Codex (and any client keeping the conversation itself, `store: false`) sends earlier output
# items back in `input`, reasoning items included, often without their ids. This proxy's
# reasoning items are recognised without any memory of earlier flows:
#   - `encrypted_content` is a mark that opens with the proxy key: ours, and the mark holds the
#     exact text and tag pair (the client may have left the visible text empty);
#   - no `encrypted_content` (absent, null or "") and an id of the shape this surface makes,
#     `rs_<base>_<position>` (see the ids above): ours, text read from the item. Real OpenAI and
#     vLLM reasoning ids are `rs_` + one run of hex, with no `_<digits>` tail, and a real
#     OpenAI upstream would answer an id it never issued with 404 anyway.
# Everything else is foreign and passes untouched: `encrypted_content` that does not open (a
# real OpenAI blob, a tampered mark, a mark under another key), or an item with neither a mark
# nor our id shape (the proxy cannot tell whose it is).
#
# inline: each item of ours attaches to the assistant turn that follows it: its text with the markup
# the model wrote around it (a mark holds it, whitespace and all; without one, `<open>text</close>`)
# is prepended to the next assistant message's first text part, or, when the next item is a tool
# call (`function_call`, `custom_tool_call`, any `*_call`), carried by an assistant message
# placed just before it. Several items before one turn join in order (with "\n" where one has no mark, which
# would hold what the model wrote between them); foreign
# reasoning items in between do not end the turn. An item with no assistant turn after it
# (a user message, a tool output, the end of input) is dropped, never attached to a later
# unrelated turn. Empty reasoning injects nothing. Text is read from `content`, else from
# `summary`, accepting part types reasoning_text, summary_text, text and output_text.
# drop: items of ours are removed. keep: the request goes as it came.
#
# References. A client that lets the upstream store the conversation (`store: true`, the Vercel
# AI SDK's default) sends earlier output as `{"type": "item_reference", "id": ...}`. The upstream
# stored the message as the model wrote it (reasoning inline), under the message's own id, and
# never issued the ids this proxy made for the pieces it split that message into. So a reference
# to one of ours becomes a reference to the upstream message it came from: `rs_<base>_<n>` ->
# `msg_<base>`, `msg_<base>_<n>` -> `msg_<base>`; once per upstream id, where the first reference
# to it stood (later ones, the client's own reference to `msg_<base>` included, are removed: the
# upstream refuses an item twice). That brings the reasoning back exactly as written. drop removes
# references to our reasoning ids instead (a stored message still holds its reasoning: drop
# cannot take that out). The proxy keeps no state, so a message whose id does not start with
# `msg_` cannot be named again: its pieces are referenced as `msg_<base>` all the same.
_PART_TYPES = frozenset({"reasoning_text", "summary_text", "text", "output_text"})
_MESSAGE_TEXT = frozenset({"output_text", "text", "input_text"})


def restore_request(data: bytes, ctx: FlowContext) -> bytes | None:
    """The request with this proxy's reasoning items restored, or None when nothing is ours."""
    return restore(data, ctx, ctx.settings.restore, "input",
                   lambda obj, items, how: _restore_input(obj, items, how, ctx))


def _restore_input(obj: dict[str, Any], items: list[Any], how: str, ctx: FlowContext) -> int:
    items, refs = _upstream_refs(items, how)
    recalled = 0
    if how == "inline":
        items, recalled = _recall_runs(items, ctx)
    ours = [_ours_item(it, ctx) for it in items]
    restored = sum(o is not None for o in ours) + refs + recalled
    if not restored:
        return 0
    out: list[Any] = []
    pending: list[str] = []     # inline reasoning waiting for its assistant turn
    last = None                 # the pair of the last of them
    sep = ""                    # between them: nothing where marks hold what the model wrote between
    for item, got in zip(items, ours):
        if got is not None:
            text, last, marked = got
            if how == "inline" and text:
                pending.append(inline(text, last))
                sep = sep if marked else "\n"
            continue
        if pending:
            joined = sep.join(pending)
            if _is_assistant_message(item):
                item = _prepend(item, joined, last)
                pending = []
            elif _is_call(item):
                out.append({"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": joined}]})
                pending = []
            elif not (isinstance(item, dict) and item.get("type") == "reasoning"):
                pending = []    # the turn ended without an answer: this reasoning is dropped
            if not pending:
                sep = ""
        out.append(item)
    obj["input"] = out
    return restored


# Where no mark holds an item (no `encrypted_content`), the output it came from may be
# remembered (thinkwire.written): a run of reasoning items without one and assistant messages,
# which is what the rewrite made of one upstream message, becomes that message again, as the
# model wrote it, whatever ids the client kept (Codex keeps none).
def _recall_runs(items: list[Any], ctx: FlowContext) -> tuple[list[Any], int]:
    """The items with each remembered run back as one assistant message, and how many went."""
    return written.recall_runs(items, lambda it: _part(it, ctx), lambda run: _recalled(run, ctx),
                               lambda it: it.get("type") == "reasoning")


def _part(item: object, ctx: FlowContext) -> bool:
    """A reasoning item with no `encrypted_content`, or one whose mark opens for this client (the
    answer after it may hold markup no mark carries), or an assistant message of text."""
    if not isinstance(item, dict):
        return False
    if item.get("type") == "reasoning":
        return item.get("encrypted_content") in (None, "") or _sealed_text(item, ctx) is not None
    return _is_assistant_message(item) and _message_text(item) is not None


def _sealed_text(item: dict[str, Any], ctx: FlowContext) -> str | None:
    enc = item.get("encrypted_content")
    if enc in (None, "") or ctx.sealer is None:
        return None
    opened = ctx.sealer.open(enc)   # (not counted as refused here: `_ours_item` does)
    return None if opened is None else opened.text


def _message_text(item: dict[str, Any]) -> str | None:
    content = item["content"]
    if isinstance(content, str):
        return content
    texts = [p.get("text") for p in content if isinstance(p, dict)]
    strings = [t for t in texts if isinstance(t, str)]
    return "".join(strings) if strings and len(strings) == len(texts) else None


def _recalled(run: list[dict[str, Any]], ctx: FlowContext) -> dict[str, Any] | None:
    texts = (_sealed_text(it, ctx) or _item_text(it) for it in run if it.get("type") == "reasoning")
    reasoning = "\n\n".join(t for t in texts if t)
    answer = "".join(_message_text(it) or "" for it in run if it.get("type") != "reasoning")
    got = ctx.recall.written(reasoning, answer)
    if not got:
        return None
    base = next((it for it in run if it.get("type") != "reasoning"), None)
    if base is None:
        return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": got}]}
    if _our_piece_id(base.get("id")):
        base = dict(base, id=base["id"].rpartition("_")[0])   # the upstream's own message id
    content = base["content"]
    if isinstance(content, str):
        return dict(base, content=got)
    part = content[0] if content and isinstance(content[0], dict) else {"type": "output_text"}
    return dict(base, content=[dict(part, text=got)])


def _upstream_refs(items: list[Any], how: str) -> tuple[list[Any], int]:
    """The items with references to ids this proxy made turned into references to the upstream
    messages they came from (see above), and how many were ours."""
    def target(item: object) -> tuple[str | None, bool]:   # (upstream id, was it one of ours)
        if not (isinstance(item, dict) and item.get("type") == "item_reference"):
            return None, False
        rid = item.get("id")
        if _our_id(rid):
            return (None if how == "drop" else "msg_" + rid[3:].rpartition("_")[0]), True
        if _our_piece_id(rid):
            return rid.rpartition("_")[0], True
        return (rid if isinstance(rid, str) else None), False

    found = [target(it) for it in items]
    n = sum(ours for _, ours in found)
    if not n:
        return items, 0
    mapped = {t for t, ours in found if ours and t is not None}
    out: list[Any] = []
    sent: set[str] = set()
    for item, (t, ours) in zip(items, found):
        if ours and t is None:
            continue                    # drop: a reference to our reasoning goes
        if t in mapped:
            if t in sent:
                continue
            sent.add(t)
            if ours:
                item = dict(item, id=t)
        out.append(item)
    return out, n


def _our_piece_id(rid: object) -> TypeGuard[str]:
    """`msg_<base>_<digits>`: the shape of the later message pieces this surface makes."""
    if not isinstance(rid, str) or not rid.startswith("msg_"):
        return False
    base, sep, pos = rid[4:].rpartition("_")
    return bool(base and sep and pos.isascii() and pos.isdigit())


def _ours_item(item: object, ctx: FlowContext) -> tuple[str, TagPair, bool] | None:
    """(text, pair, from a mark) when `item` is a reasoning item this proxy made, else None."""
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return None
    enc = item.get("encrypted_content")
    if enc is not None and enc != "":
        got = ctx.open_mark(enc)
        return None if got is None else (*got, True)
    rid = item.get("id")
    if _our_id(rid):
        return _item_text(item), ctx.guess_pair(), False
    return None


def _our_id(rid: object) -> TypeGuard[str]:
    """`rs_<base>_<digits>`: the shape of the reasoning ids this surface makes."""
    if not isinstance(rid, str) or not rid.startswith("rs_"):
        return False
    base, sep, pos = rid[3:].rpartition("_")
    return bool(base and sep and pos.isascii() and pos.isdigit())


def _item_text(item: dict[str, Any]) -> str:
    for key, sep in (("content", ""), ("summary", "\n\n")):
        parts = item.get(key)
        if isinstance(parts, list):
            text = sep.join(p["text"] for p in parts if isinstance(p, dict)
                            and p.get("type") in _PART_TYPES and isinstance(p.get("text"), str))
            if text:
                return text
    return ""


def _is_assistant_message(item: object) -> bool:
    return (isinstance(item, dict) and item.get("role") == "assistant"
            and item.get("type", "message") == "message"
            and isinstance(item.get("content"), (str, list)))


def _is_call(item: object) -> bool:
    t = item.get("type") if isinstance(item, dict) else None
    return isinstance(t, str) and t.endswith("_call")


def _prepend(item: dict[str, Any], text: str, pair: TagPair | None) -> dict[str, Any]:
    """The message with `text` (reasoning back inline, the last of it of `pair`) in front."""
    content = item["content"]
    if isinstance(content, str):
        return dict(item, content=text + after(pair, content))
    for i, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") in _MESSAGE_TEXT and isinstance(part.get("text"), str):
            return dict(item, content=content[:i] + [dict(part, text=text + after(pair, part["text"]))]
                        + content[i + 1:])
    return dict(item, content=[{"type": "output_text", "text": text}] + content)
