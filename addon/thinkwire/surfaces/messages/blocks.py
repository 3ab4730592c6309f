"""What the Messages surface's body and stream paths share: the events' names, how a thinking
block this proxy makes looks (`mode`, `thinking_block`), and how a message ended (`ended`)."""

from __future__ import annotations

from typing import Any

from ...context import LENGTH, OTHER, STOP, FlowContext
from ...rules import TagPair

_NATIVE = ("thinking", "redacted_thinking")
STREAM_TYPES = frozenset({
    "message_start", "content_block_start", "content_block_delta", "content_block_stop",
    "message_delta", "message_stop",
})
_START, _DELTA, _STOP = "content_block_start", "content_block_delta", "content_block_stop"


def mode(ctx: FlowContext) -> str:
    """How thinking blocks go out: signed, unsigned, off, redacted, or omitted (the request asked)."""
    if ctx.facts is not None and ctx.facts.display_omitted:
        m = "omitted"
    else:
        m = ctx.settings.signature
    if ctx.sealer is None and m in ("signed", "omitted", "redacted"):
        return "unsigned" if m == "signed" else "off"  # a mark needs the proxy key
    return m


def _seal(ctx: FlowContext, text: str, pair: TagPair) -> str:
    assert ctx.sealer is not None   # (`mode` gives a mode that seals only with a sealer)
    return ctx.sealer.seal(text, pair)


def thinking_block(text: str, pair: TagPair, m: str, ctx: FlowContext) -> dict[str, Any]:
    if m == "redacted":
        return {"type": "redacted_thinking", "data": _seal(ctx, text, pair)}
    if m == "omitted":
        return {"type": "thinking", "thinking": "", "signature": _seal(ctx, text, pair)}
    block = {"type": "thinking", "thinking": text}
    if m == "signed":
        block["signature"] = _seal(ctx, text, pair)
    elif m == "unsigned":
        block["signature"] = ""
    return block


def ended(stop_reason: object) -> str | None:
    """How the message ended: STOP for `end_turn`, LENGTH for `max_tokens`, OTHER for the rest
    (`tool_use`, `stop_sequence`, `pause_turn`, `refusal`), None when it does not say."""
    return (None if stop_reason is None else STOP if stop_reason == "end_turn"
            else LENGTH if stop_reason == "max_tokens" else OTHER)
