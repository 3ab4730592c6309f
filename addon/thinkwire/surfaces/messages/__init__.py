"""Anthropic Messages (`/messages`): reasoning becomes native `thinking` content blocks.

Whole bodies: every `text` block is split; each reasoning piece becomes a thinking block where
it occurred (`a<think>b</think>c` -> text a, thinking b, text c). Streams: a text block is
turned, on the fly, into thinking and text blocks, and every block's `index` is renumbered so
indices run 0, 1, 2 ... in start order across the message (the SDK appends on
`content_block_start` and looks deltas up by index). Every other block and event passes as it
came, byte for byte when its index did not move. A message in which the upstream already sends
`thinking` or `redacted_thinking` blocks is native: it passes untouched.

How a thinking block this proxy makes looks (`think_signature`, and the request's
`thinking.display`):
  signed    {"type": "thinking", "thinking": x, "signature": MARK}  (the default: Anthropic's shape)
  unsigned  {"type": "thinking", "thinking": x, "signature": ""}
  off       {"type": "thinking", "thinking": x}                    (no signature key)
  redacted  {"type": "redacted_thinking", "data": MARK}
  omitted   {"type": "thinking", "thinking": "", "signature": MARK}   (request asked display: omitted)
MARK is `marks.Sealer.seal(x, pair)`: the text and its tag pair, sealed with the proxy key, so a
later request can be restored to what the model wrote. Without a sealer, signed falls back to
unsigned, redacted and omitted to off.

In streams a thinking block starts with `"signature": ""` (no key under off) and its text flows
as `thinking_delta`s as it comes (omitted and redacted hold it: they send no text); every policy
with a signature ends the block with one `signature_delta` carrying it whole, right before
`content_block_stop`, as Anthropic does (some clients take the signature only from there).

Here: the surface and whole bodies; streams in stream.py, the way back in restore.py, what both
paths share in blocks.py.
"""

from __future__ import annotations

from typing import Any

from ...context import FlowContext
from ...jsonio import OUT, dumps
from ...jsonnum import loads
from ...splitter import END, REASONING, Piece
from .blocks import _DELTA as _DELTA, _NATIVE, STREAM_TYPES, ended, mode as mode, thinking_block
from .restore import restore_request as restore_request  # (the way back)
from .stream import HOLD_MAX as HOLD_MAX, StreamRewriter as StreamRewriter  # (streams)

NAME = "messages"
SHAPE = "'content' block list (type 'message') or message_start/content_block events"
STREAM_TYPE = "text/event-stream"

def matches(path: str) -> bool:
    """`.../messages`, with or without a query string; not `/messages/count_tokens` or batches."""
    return path.split("?", 1)[0].rstrip("/").endswith("/messages")


def looks_like(obj: dict[str, Any]) -> bool:
    t = obj.get("type")
    return (t == "message" and isinstance(obj.get("content"), list)) or t in STREAM_TYPES


# -- whole bodies ---------------------------------------------------------------------------
def rewrite_body(data: bytes, ctx: FlowContext) -> bytes | None:
    """The rewritten body, or None when nothing changes. Raises ValueError on non-JSON."""
    obj = loads(data)
    if not isinstance(obj, dict) or not isinstance(obj.get("content"), list):
        return None
    content = obj["content"]
    if any(isinstance(b, dict) and b.get("type") in _NATIVE for b in content):
        ctx.stats.native = True
        return None
    m = mode(ctx)
    out: list[Any] = []
    changed = False
    first_text = True
    for block in content:
        if not (isinstance(block, dict) and block.get("type") == "text"
                and isinstance(block.get("text"), str)):
            out.append(block)
            continue
        text = block["text"]
        result = ctx.split(text, obj.get("model"), starts_inside=None if first_text else False,
                           finish=ended(obj.get("stop_reason")))
        first_text = False
        if not result.reasoning and result.content == text:
            out.append(block)
            continue
        changed = True
        out.extend(_blocks(result.pieces, block, m, ctx))
    if not changed:
        return None
    obj["content"] = out
    return dumps(obj).encode("utf-8", OUT)


def _blocks(pieces: list[Piece], template: dict[str, Any], m: str,
            ctx: FlowContext) -> list[dict[str, Any]]:
    """One split text block as thinking and text blocks (never an empty one, unless all is)."""
    out: list[dict[str, Any]] = []
    reasoning: list[str] = []
    last_text: dict[str, Any] | None = None
    for p in pieces:
        if p.kind == END:
            text = "".join(reasoning)
            reasoning = []
            if text:
                out.append(thinking_block(text, p.pair, m, ctx))
                last_text = None
        elif p.kind == REASONING:
            reasoning.append(p.text)
        elif last_text is not None:
            last_text["text"] += p.text
        else:
            last_text = dict(template, text=p.text)
            out.append(last_text)
    return out or [dict(template, text="")]

