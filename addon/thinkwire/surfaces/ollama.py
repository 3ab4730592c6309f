"""Ollama's native API (`/api/chat`, `/api/generate`): reasoning goes to `thinking`.

Chat responses carry the text in `message.content`, generate responses in `response`; Ollama
puts the reasoning of a model whose template reads it in `message.thinking` / `thinking`, and
leaves any other model's `<think>...</think>` inline. Bodies are one JSON object; streams are
NDJSON (`application/x-ndjson`), one object per line, the last with `"done": true` and the
timings. Each line whose text the splitter changes becomes a line per run of reasoning or
answer, in order, the last of them the original line with its text replaced (so the final line
keeps its timings and counts); every other line goes out as its original bytes. Lines this
rewrite writes are encoded as Ollama's Go server encodes JSON (`<`, `>`, `&` escaped), so a
rewritten stream reads byte for byte like one from a model Ollama splits itself.

The way back (`restore_request`, with `FlowContext.native_thinking` from the server's
/api/show, see thinkwire.capabilities): for a model whose template does not read thinking,
Ollama would drop an assistant turn's `thinking` and refuse a truthy `think` (400 "does not
support thinking"); thinkwire puts the thinking back inline, as the model wrote it, and takes
`think` out (the client still gets the thinking, from the tags). A model that thinks natively,
or one whose capabilities are not known, gets the request as it came.
"""

from __future__ import annotations

from typing import Any

import functools
import json
import re

from .. import hot
from ..jsonnum import loads
from ..context import LENGTH, OTHER, STOP, FlowContext
from ..jsonio import OUT, dumps
from ..fastpath import Got, key_pattern, learn_literal, scanstring
from ..shapes import TEXT, Delta, FastPath, Lane, Plan, Shape, String
from ..ndjson import NDJSONParser
from ..splitter import CONTENT, Text
from ..events import Event
from . import event_object
from ..again import Again
from .chat import inline_turn
from .textruns import BLOCK_JOIN, TextRuns, kept_plan

NAME = "ollama"
SHAPE = "'message' or 'response' next to a 'done' flag"
STREAM_TYPE = "application/x-ndjson"
PATHS = ("/api/chat", "/api/generate")
_THINK = "thinking"
_CREATED = key_pattern("created_at")


def matches(path: str) -> bool:
    return path.split("?", 1)[0].rstrip("/").endswith(PATHS)


def looks_like(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("done"), bool) and (isinstance(obj.get("message"), dict)
                                                  or isinstance(obj.get("response"), str))


def _slot(obj: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where a response object's text lives: (the dict that holds it, its key), chat or generate."""
    message = obj.get("message")
    if isinstance(message, dict):
        return message, "content"
    if isinstance(obj.get("response"), str):
        return obj, "response"
    return None


def _native(holder: dict[str, Any]) -> bool:
    value = holder.get(_THINK)
    return isinstance(value, str) and bool(value)


# -- JSON as Ollama writes it -----------------------------------------------------------------
_GO = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
_GO_ASCII = "<>&"   # (the ASCII characters of them)
_GO_BYTES = tuple((raw.encode(), esc.encode()) for raw, esc in _GO)


def go_json(obj: object) -> str:
    """Compact JSON as Go's encoding/json writes it: HTML characters and the two line separators
    escaped. (Those characters occur in JSON text only inside strings, where the escape is the
    same character.) Replaced one by one where they occur: most lines hold none, and a scan for
    each costs ~1/50 of a str.translate through a table (~4 us a line)."""
    text = dumps(obj)
    for raw, esc in _GO:
        if raw in text:
            text = text.replace(raw, esc)
    return text


def _go_body(body: bytes) -> bytes:
    """A string literal's body (bytes) with the escapes go_json writes."""
    for raw, esc in _GO_BYTES:
        if raw in body:
            body = body.replace(raw, esc)
    return body


def _with_text(holder: dict[str, Any], key: str, content: str, reasoning: str) -> dict[str, Any]:
    """The holder with `key` set to `content` and, when there is reasoning, `thinking` right after
    it (Ollama's field order: `content` / `response`, then `thinking`)."""
    out = {}
    for k, v in holder.items():
        if k == _THINK:
            continue
        out[k] = v
        if k == key:
            out[k] = content
            if reasoning:
                out[_THINK] = reasoning
    return out


def _replace(obj: dict[str, Any], holder: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    if holder is obj:
        return new
    return dict(obj, message=new)


# -- whole bodies ---------------------------------------------------------------------------
def rewrite_body(data: bytes, ctx: FlowContext) -> bytes | None:
    """The rewritten body, or None when nothing changes. Raises ValueError on non-JSON. A body
    of several NDJSON lines (a stream some servers send as `application/json`) is rewritten line
    by line, as a stream."""
    try:
        obj = loads(data)
    except ValueError:
        if not _lines_of_objects(data):
            raise
        return _rewrite_lines(data, ctx)
    if not isinstance(obj, dict):
        return None
    slot = _slot(obj)
    if slot is None:
        return None
    holder, key = slot
    text = holder.get(key)
    if not isinstance(text, str) or not text:
        return None
    if _native(holder):
        ctx.stats.native = True
        return None
    result = ctx.split(text, obj.get("model"), finish=ended(obj))
    if len(result.pieces) <= 1 and not result.reasoning and result.content == text:
        return None
    new = _with_text(holder, key, result.content, BLOCK_JOIN.join(result.reasoning))
    return go_json(_replace(obj, holder, new)).encode("utf-8", OUT)


def ended(obj: dict[str, Any]) -> str | None:
    """How an output ended: STOP for an answer given in full (`done_reason: stop`), LENGTH at the
    token limit (`length`), OTHER for the rest (a load or an unload), None while it goes on or
    where the line does not say."""
    if obj.get("done") is not True or not isinstance(obj.get("done_reason"), str):
        return None
    reason = obj["done_reason"]
    return STOP if reason == "stop" else LENGTH if reason == "length" else OTHER


def _lines_of_objects(data: bytes) -> bool:
    first = data.lstrip().split(b"\n", 1)[0]
    try:
        obj = json.loads(first)
    except ValueError:
        return False
    return isinstance(obj, dict) and looks_like(obj) and b"\n" in data.strip()


def _rewrite_lines(data: bytes, ctx: FlowContext) -> bytes | None:
    parser, rw = NDJSONParser(), StreamRewriter(ctx, fast=False)
    out: list[bytes] = []
    for ev in parser.feed(data) + parser.finish():
        out += rw.on_event(ev)
    out += rw.finish()
    new = b"".join(out)
    return None if new == data else new


# -- streams --------------------------------------------------------------------------------
class StreamRewriter(FastPath):
    """One NDJSON stream. `on_event` for each line; `finish` at the end; `abort` on failure; the
    fast path (thinkwire.shapes) for a token line shaped like the last one."""

    def __init__(self, ctx: FlowContext, fast: bool = True) -> None:
        self.ctx = ctx
        self.fast = fast
        self.state: TextRuns | None = None   # the splitter and block bookkeeping
        self.last: tuple[dict[str, Any], dict[str, Any], str] | None = None   # the last text line: (obj, holder, key)
        self.eol = b"\n"
        self._shape_c: Shape | None = None     # the token line's (thinkwire.shapes)
        self._reasoning = Lane()               # ... and its reasoning lane
        self._plan: Plan | None = None
        self._plans: dict[tuple[Shape, bool], Plan] = {}   # made for a state, kept
        self._armed: tuple[Plan, int] | None = None

    def _state(self, model: object) -> TextRuns:
        if self.state is None:
            sp = self.ctx.splitter(model)
            self.state = TextRuns(sp, Again(self.ctx, sp))
        return self.state

    # -- the full path --------------------------------------------------------------------
    def on_event(self, ev: Event) -> list[bytes]:
        self._plan = None
        if ev.data is None:
            return [ev.raw]                 # a blank line
        obj = event_object(ev.data, self.ctx)
        if obj is None:
            return [ev.raw]
        slot = _slot(obj)
        if slot is None:
            # An error line ({"error": ...}) ends a stream: what is held goes out before it.
            return (self.flush() if "error" in obj else []) + [ev.raw]
        holder, key = slot
        st = self._state(obj.get("model"))
        if st.native or st.done:
            return [ev.raw]
        if _native(holder):
            # The upstream reasons natively: from here the stream passes as it is.
            held = self.flush()
            st.native = True
            self.ctx.stats.native = True
            return held + [ev.raw]
        self.last, self.eol = (obj, holder, key), ev.eol
        text = holder.get(key)
        text = text if isinstance(text, str) else ""
        pieces = st.splitter.feed(text) if text else []
        done = obj.get("done") is True
        if done:
            how = ended(obj)
            pieces += st.splitter.finish(how == LENGTH)
            st.done = True
            self.ctx.ended(how)
        if self.fast:   # (a line the shape took and sent here keeps it: nothing new to learn)
            shape = self._shape_c
            if shape is None or shape.match(ev.raw) is None:
                self._shape_c = self._learn(ev, obj, holder, key, text)
        runs = st.runs(pieces)
        if done:
            runs += st.ended(ended(obj))   # the reasoning again, as the answer (thinkwire.again)
        if not runs:
            if not text:
                return [ev.raw]
            runs = [Text(CONTENT, "")]      # all of it held back for now
        elif len(runs) == 1 and runs[0] == Text(CONTENT, text):
            return [ev.raw]                 # answer text as it came: the original bytes go out
        out = [self._line(self._standalone(obj, holder, key, kind, t)) for kind, t in runs[:-1]]
        kind, t = runs[-1]
        new = _with_text(holder, key, t if kind == CONTENT else "", t if kind != CONTENT else "")
        out.append(self._line(_replace(obj, holder, new)))
        return out

    def _standalone(self, obj: dict[str, Any], holder: dict[str, Any], key: str, kind: int, text: str) -> dict[str, Any]:
        """A line of its own for one run: the fields before the text (model, created_at ...), the
        text, `done: false`, as Ollama writes a token line."""
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if k in ("message", "response"):
                break
            out[k] = v
        reasoning = text if kind != CONTENT else ""
        text = text if kind == CONTENT else ""
        if holder is obj:
            out.update(_with_text({key: ""}, key, text, reasoning))
        else:
            out["message"] = _with_text({"role": holder.get("role", "assistant"), key: ""}, key, text, reasoning)
        out["done"] = False
        return out

    def _line(self, obj: dict[str, Any]) -> bytes:
        return go_json(obj).encode("utf-8", OUT) + self.eol

    def flush(self) -> list[bytes]:
        """Text still held, as lines of its own (at the end, or before an error line)."""
        st = self.state
        if st is None or self.last is None or st.native or st.done:
            return []
        st.done = True
        obj, holder, key = self.last
        return [self._line(self._standalone(obj, holder, key, kind, text))
                for kind, text in st.runs(st.splitter.finish())]

    finish = flush
    abort = flush

    # -- the fast path's plan (thinkwire.shapes) --------------------------------------------
    def _make_plan(self) -> Plan | None:
        shape, st = self._shape_c, self.state
        if shape is None or st is None or st.native or st.done:
            return None
        return kept_plan(self, self._plans, st, shape, self._reasoning)

    def _decide(self, chunk: bytes, m: re.Match[bytes], got: Got | None,
                piece: Text | None) -> list[bytes] | None:
        assert piece is None   # (a route for each kind)
        return None   # (nothing was fed: the full path decides)

    def _learn(self, ev: Event, obj: dict[str, Any], holder: dict[str, Any], key: str, text: str) -> Shape | None:
        """For a plain token line (text, no thinking, not done) framed as this rewrite writes lines:
        the shape of a line that differs only in its text and its `created_at`, and the lane of
        its reasoning."""
        data, state = ev.data, self.state
        assert data is not None and state is not None   # (a parsed line, read as a stream)
        splitter = state.splitter
        # Only a line written as go_json writes it: then the byte path's output, the same bytes
        # with the text moved, is what the full path builds.
        if (not text or obj.get("done") is not False or _THINK in holder or ev.eol != b"\n"
                or ev.raw[:-1] != data.encode("utf-8", OUT) or go_json(obj) != data):
            return None
        read = (lambda o: o["message"]["content"]) if holder is not obj else (lambda o: o["response"])
        shape = learn_literal(data, key_pattern(key), text, read)
        if shape is None:
            return None
        before, after = shape
        m = _CREATED.search(before)
        if m is not None:   # created_at changes every line: any string literal there
            try:
                end = scanstring(before, m.end())[1]
            except ValueError:
                return None
            head: tuple[str, ...] = (before[:m.end() - 1], before[end:])
        else:
            head = (before,)
        rules = splitter.rules
        head_b, after_b = tuple(h.encode("utf-8", OUT) for h in head), after.encode("utf-8", OUT)
        slots = (_TIMESTAMP, TEXT) if len(head_b) == 2 else (TEXT,)
        self._reasoning = _lane(head_b, after_b)
        return Delta(b"", None, (*head_b, after_b), slots, end=b"\n").compile(rules)


_THINKING = b'","thinking":"'   # a reasoning line: the text's slot cut here (content "", thinking the text)
# created_at, RFC 3339 as Go writes it: a string literal of these bytes (no escape), copied as it came.
_TIMESTAMP = String(b"-+.:0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


@functools.lru_cache(maxsize=64)
def _lane(head: tuple[bytes, ...], after: bytes) -> Lane:
    """Reasoning on a token line of `_learn`'s shape: the same line with the text moved to
    `thinking` (content ""), the created_at literal, where there is one, as it came. Its text
    holds none of the characters Go writes escaped as they are (C leaves them to Python, which
    escapes them again), and C takes Go's escapes of `<`, `>`, `&` as they came (`\\u003e`: the
    bytes Python writes); whitespace alone is held, and the line goes with an empty content (in
    the same write as the next line: thinkwire.hot)."""
    post, tail = after + b"\n", b'"' + after + b"\n"
    if len(head) == 1:
        out: tuple[bytes | int, ...] = (head[0] + b'"' + _THINKING, hot.PART_BODY, tail)
        held: tuple[bytes | int, ...] = (head[0] + b'""' + post,)
    else:
        out = (head[0] + b'"', hot.PART_STR, b'"' + head[1] + b'"' + _THINKING, hot.PART_BODY, tail)
        held = (head[0] + b'"', hot.PART_STR, b'"' + head[1] + b'""' + post)
    return Lane(out, reasoning=True, held=held, exclude=_GO_ASCII, escape=_go_body, unicode_escaped=_GO_ASCII)


# -- the way back ---------------------------------------------------------------------------
def wants_capabilities(request: dict[str, Any] | None) -> bool:
    """Whether the way back depends on the model's capabilities: the request asks for thinking
    (`think` truthy), or sends an assistant turn back with its thinking, or with an answer alone
    (the output it came from may have had markup dropped and no block: an answer wrapper, a
    stray closing tag, which a remembered layout puts back, thinkwire.written)."""
    if not isinstance(request, dict):
        return False
    if _asks_thinking(request):
        return True
    messages = request.get("messages")
    return isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("role") == "assistant" and any(
            isinstance(m.get(k), str) and m[k] for k in (_THINK, "content")) for m in messages)


def _asks_thinking(request: dict[str, Any]) -> bool:
    think = request.get("think")
    return think is True or isinstance(think, str) and think != ""


def restore_request(data: bytes, ctx: FlowContext) -> bytes | None:
    """The request as an upstream whose model cannot think natively (`ctx.native_thinking` is
    False) takes it: `think` removed (Ollama would answer 400; thinkwire gives the thinking from
    the tags), and each assistant turn's `thinking` restored inline in front of its content
    (`think_restore`: inline, drop or keep). Any other request goes as it came (None)."""
    request = ctx.request
    if ctx.native_thinking is not False or not isinstance(request, dict):
        return None
    obj = dict(request)   # (ctx.request stays the client's: the response reads its `think`)
    changed = _asks_thinking(obj)
    if changed:
        del obj["think"]
    how = ctx.settings.restore
    messages = obj.get("messages")
    if how != "keep" and isinstance(messages, list):
        new, n = [], 0
        for m in messages:
            had = isinstance(m, dict) and m.get("role") == "assistant" and _THINK in m
            if had or how == "inline" and isinstance(m, dict) and m.get("role") == "assistant":
                m = dict(m)
                thinking = m.pop(_THINK, None)
                thinking = thinking if isinstance(thinking, str) else ""
                if how == "inline":
                    # As the model wrote it where this proxy saw the output (chat.inline_turn).
                    got = inline_turn(m, thinking, ctx, counted=False)
                    n += got
                    changed |= bool(got)
                else:
                    n += bool(thinking)
                changed |= had
            new.append(m)
        obj["messages"] = new
        ctx.stats.restored += n
    return dumps(obj).encode("utf-8", OUT) if changed else None
