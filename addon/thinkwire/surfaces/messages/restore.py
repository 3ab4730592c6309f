"""Anthropic Messages: the way back (a client sending this proxy's thinking blocks back)."""

from __future__ import annotations

from typing import Any

from ...context import FlowContext
from ... import written
from ...rules import TagPair
from .. import after, inline, restore

# A client sends an assistant turn back as it received it (Claude Code does, with its tool_use;
# so does the SDK's `messages.append({"role": "assistant", "content": msg.content})`). Blocks
# this proxy made are recognised without any memory of earlier flows:
#   - a `thinking` block whose signature is a mark that opens with the proxy key (display
#     omitted: its visible text is empty, the mark holds the text and the tag pair);
#   - a `redacted_thinking` block whose `data` is such a mark;
#   - a `thinking` block with no signature key or an empty one (policies off / unsigned): no
#     upstream accepts it, so it is restored as the proxy remembers the output it came from
#     (_recall_runs, below), else with its own text and the guessed pair (FlowContext.guess_pair).
# Anything else (a real signature, a real redacted_thinking, a mark under another key, a
# tampered mark) is not ours and is left exactly as it came.
#
# inline: each block of ours becomes `<open>text</close>` ahead of the answer text that follows
# it in the same message. It is prepended (no separator) to the text block right after it,
# which is the block the rewrite split it from, so the upstream reads one text block as the
# model wrote it (whitespace the trim removed aside). When the next block is not text
# (tool_use, a genuine thinking block, the end), it becomes its own text block in that place.
# Consecutive blocks of ours join in order. An empty reasoning text injects nothing, so no
# empty text block is ever made (strict upstreams reject those). Blocks stay in place: tool_use
# ids and their tool_result pairing do not move.
# drop: blocks of ours are removed; if that would leave an assistant message with no content at
# all (the API rejects that), the reasoning goes back inline instead.
# keep: the request goes as it came.
def restore_request(data: bytes, ctx: FlowContext) -> bytes | None:
    """The request with this proxy's thinking blocks restored, or None when nothing is ours."""
    return restore(data, ctx, ctx.settings.restore, "messages",
                   lambda obj, msgs, how: _restore_messages(msgs, how, ctx))


def _restore_messages(msgs: list[Any], how: str, ctx: FlowContext) -> int:
    restored = 0
    for m in msgs:
        if not (isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), list)):
            continue
        new, n = _restore_blocks(m["content"], how, ctx)
        if n:
            m["content"] = new
            restored += n
    return restored


def _ours(block: object, ctx: FlowContext) -> tuple[str, TagPair] | None:
    """(text, pair) when `block` is a thinking block this proxy made, else None."""
    if not isinstance(block, dict):
        return None
    t = block.get("type")
    if t == "redacted_thinking":
        return ctx.open_mark(block.get("data"))
    if t != "thinking":
        return None
    sig = block.get("signature")
    if sig is None or sig == "":
        text = block.get("thinking")
        return (text if isinstance(text, str) else "", ctx.guess_pair())
    return ctx.open_mark(sig)


def _restore_blocks(blocks: list[Any], how: str, ctx: FlowContext) -> tuple[list[Any], int]:
    """The message's blocks with ours restored (or dropped), and how many were ours."""
    recalled = 0
    if how == "inline":
        blocks, recalled = _recall_runs(blocks, ctx)
    ours = [_ours(b, ctx) for b in blocks]
    found = sum(o is not None for o in ours)
    if not found:
        return blocks, recalled
    if how == "drop":
        kept = [b for b, o in zip(blocks, ours) if o is None]
        if kept or not any(o[0] for o in ours if o is not None):
            return kept, found
        # Nothing but our reasoning: an empty assistant message is refused, so keep it inline.
    out: list[Any] = []
    pending: list[str] = []   # inline text of ours waiting for the block after it
    last = None               # the pair of the last of them
    for block, got in zip(blocks, ours):
        if got is not None:
            text, last = got
            if text:
                pending.append(inline(text, last))
            continue
        if pending and isinstance(block, dict) and block.get("type") == "text" \
                and isinstance(block.get("text"), str):
            out.append(dict(block, text="".join(pending) + after(last, block["text"])))
            pending.clear()
            continue
        if pending:
            out.append({"type": "text", "text": "".join(pending)})
            pending.clear()
        out.append(block)
    if pending:
        out.append({"type": "text", "text": "".join(pending)})
    return out, found + recalled


# Where no mark holds a block (a thinking block with no signature, or text alone), the output it
# came from may be remembered (thinkwire.written): a run of such blocks and text blocks, which is
# what the rewrite made of one upstream text block, becomes that text block again, as the model
# wrote it.
def _recall_runs(blocks: list[Any], ctx: FlowContext) -> tuple[list[Any], int]:
    """The blocks with each remembered run back as one text block, and how many blocks went."""
    return written.recall_runs(blocks, lambda b: _part(b, ctx) is not None, lambda run: _recalled(run, ctx),
                               lambda b: b["type"] in ("thinking", "redacted_thinking"))


def _part(block: object, ctx: FlowContext) -> str | None:
    """The text of a block a run may hold: a text block's, a thinking block's with no signature
    (an empty one: `unsigned`), or that of a block whose mark opens for this client (the answer
    around it may hold markup no mark carries: a stray closing tag, an answer wrapper's)."""
    if not isinstance(block, dict):
        return None
    t = block.get("type")
    if t == "text":
        text = block.get("text")
        return text if isinstance(text, str) else None
    if t == "thinking" and block.get("signature") in (None, ""):
        text = block.get("thinking")
        return text if isinstance(text, str) else None
    if t in ("thinking", "redacted_thinking") and ctx.sealer is not None:
        opened = ctx.sealer.open(block.get("data" if t == "redacted_thinking" else "signature"))
        return None if opened is None else opened.text   # (not counted as refused here: `_ours` does)
    return None


def _recalled(run: list[dict[str, Any]], ctx: FlowContext) -> dict[str, Any] | None:
    texts = [_part(b, ctx) for b in run if b["type"] != "text"]
    reasoning = "\n\n".join(t for t in texts if t)
    answer = "".join(b["text"] for b in run if b["type"] == "text")
    got = ctx.recall.written(reasoning, answer)
    if not got:
        return None
    base = next((b for b in run if b["type"] == "text"), {"type": "text"})
    return dict(base, text=got)
