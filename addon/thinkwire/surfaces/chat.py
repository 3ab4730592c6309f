"""Chat Completions (`/chat/completions`): reasoning goes to `reasoning_content` (or `reasoning`).

Whole bodies: each choice's `message.content` is split. Streams: each choice index has its own
splitter; a chunk whose text holds a block boundary becomes several chunks so reasoning and
answer keep their order. Everything the rewrite does not own passes through as it came.
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple, cast

from ..jsonnum import loads
from ..context import LENGTH, OTHER, STOP, FlowContext
from ..splitter import CONTENT, Text
from . import event_object, is_done, restore
from ..again import Again
from .textruns import BLOCK_JOIN, TextRuns, kept_plan
from .. import hot
from ..jsonio import OUT, dumps
from ..fastpath import Got, canonical_head, key_pattern, learn_literal
from ..shapes import TEXT, Delta, FastPath, Lane, Plan, Shape
from ..events import Event
from ..sse import encode

NAME = "chat"
SHAPE = "'choices' list"
STREAM_TYPE = "text/event-stream"
_NATIVE = ("reasoning_content", "reasoning")
_CONTENT_KEY = key_pattern("content")
_KEY_AT_END = re.compile(r'"content"\s*:\s*$')   # the content key, where a learned `before` ends


def matches(path: str) -> bool:
    return path.split("?", 1)[0].rstrip("/").endswith("/chat/completions")


def looks_like(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("choices"), list)


def _fields(ctx: FlowContext) -> tuple[str, ...]:
    f = ctx.settings.chat_field
    return _NATIVE if f == "both" else (f,)


def _has_native(d: dict[str, Any]) -> bool:
    return any(isinstance(d.get(k), str) and d.get(k) for k in _NATIVE)


# -- whole bodies ---------------------------------------------------------------------------
def rewrite_body(data: bytes, ctx: FlowContext) -> bytes | None:
    """The rewritten body, or None when nothing changes. Raises ValueError on non-JSON."""
    obj = loads(data)
    if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
        return None
    changed = False
    for ch in obj["choices"]:
        if isinstance(ch, dict) and isinstance(ch.get("message"), dict):
            changed |= _split_message(ch["message"], ctx, obj.get("model"), finish=ended(ch))
    return dumps(obj).encode("utf-8", OUT) if changed else None


def ended(ch: dict[str, Any]) -> str | None:
    """How a choice's output ended: STOP for an answer given in full, LENGTH at the token limit,
    OTHER for the rest (`tool_calls`, `content_filter`), None while it goes on."""
    reason = ch.get("finish_reason")
    return None if reason is None else STOP if reason == "stop" else LENGTH if reason == "length" else OTHER


def _split_message(msg: dict[str, Any], ctx: FlowContext, model: object, count: bool = True,
                   finish: str | None = None) -> bool:
    content = msg.get("content")
    if not isinstance(content, str) or not content:
        return False
    if _has_native(msg):
        ctx.stats.native = True
        return False
    result = ctx.split(content, model, count, finish=finish)
    if len(result.pieces) <= 1 and not result.reasoning and result.content == content:
        return False
    msg["content"] = result.content
    reasoning = BLOCK_JOIN.join(result.reasoning)
    if reasoning:
        for f in _fields(ctx):
            msg[f] = reasoning
    return True


# -- streams --------------------------------------------------------------------------------
class StreamRewriter(FastPath):
    """One chat stream. `on_event` for each SSE event; `finish` at the end; `abort` on failure; the
    fast path (thinkwire.shapes) for a plain delta shaped like the last one parsed in full."""

    def __init__(self, ctx: FlowContext, fast: bool = True) -> None:
        self.ctx = ctx
        self.fast = fast                     # False: no shortcut, every event parsed in full
        self.fields = _fields(ctx)
        self.choices: dict[int, TextRuns] = {}
        self.template: dict[str, Any] | None = None   # top-level fields of the last chunk, for flush chunks
        self.event_name: str | None = None
        self.eol = b"\n"
        # The last plain delta parsed in full (_learn): the text around its content literal and
        # its choice (`_Learned`), and the same as bytes, the fast path's (thinkwire.shapes).
        self._learned: _Learned | None = None
        self._shape_c: Shape | None = None
        self._reasoning = Lane()               # ... and the lane of its reasoning
        self._plan: Plan | None = None
        self._plans: dict[tuple[Shape, bool], Plan] = {}   # made for a state, kept
        self._armed: tuple[Plan, int] | None = None

    # -- the fast path's plan (thinkwire.shapes) --------------------------------------------
    def _make_plan(self) -> Plan | None:
        """The learned choice's plain text: the answer as it came, reasoning in its field (a
        block's first text with its separator, thinkwire.surfaces.textruns)."""
        shape, learned = self._shape_c, self._learned
        if shape is None or learned is None:
            return None
        st = learned.st
        if st.native or st.done:
            return None
        return kept_plan(self, self._plans, st, shape, self._reasoning)

    def _decide(self, chunk: bytes, m: re.Match[bytes], got: Got | None,
                piece: Text | None) -> list[bytes] | None:
        assert piece is None and self._shape_c is not None and self._learned is not None   # (a route for each kind)
        ev = self._shape_c.event(chunk)
        if got is None:   # undecodable, or empty: on_event, without the driver's framing
            return self.on_event(ev)
        # The splitter decides (a tag's first character, text held): fed without a parse.
        return self._split(ev, self._learned, got[0])

    # -- the full path --------------------------------------------------------------------
    def on_event(self, ev: Event) -> list[bytes]:
        self._plan = None
        data = ev.data
        if data is None:
            return [ev.raw]                 # comments, keep-alives
        if is_done(data):
            return self.flush() + [ev.raw]
        obj = event_object(data, self.ctx)
        if obj is None or not isinstance(obj.get("choices"), list) or not obj["choices"]:
            return [ev.raw]                 # usage chunk (`choices: []`), errors, other shapes
        self.template = {k: v for k, v in obj.items() if k not in ("choices", "usage")}
        self.event_name, self.eol = ev.event, ev.eol
        per_choice = [self._choice(ch, obj.get("model")) for ch in obj["choices"]]
        if self.fast:   # (the same bytes around the text as the shape learned: nothing new to learn)
            shape = self._shape_c
            if shape is None or shape.match(ev.raw) is None:
                self._learn(ev, data, obj)
        if all(p is None for p in per_choice):
            return [ev.raw]
        return self._chunks(obj, ev, [[ch] if p is None else p for ch, p in zip(obj["choices"], per_choice)])

    def _chunks(self, obj: dict[str, Any], ev: Event, lists: list[list[dict[str, Any]]]) -> list[bytes]:
        """Chunk j holds the j-th dict of every choice that has one."""
        count = max(len(x) for x in lists)
        if count == 0:   # every choice's text held back: only the usage goes, as a usage chunk does
            return [] if obj.get("usage") is None else [encode(dumps(dict(obj, choices=[])), ev.event, ev.eol)]
        out = []
        for j in range(count):
            chunk = dict(obj)
            chunk["choices"] = [x[j] for x in lists if j < len(x)]
            if j < count - 1 and chunk.get("usage") is not None:
                chunk["usage"] = None
            out.append(encode(dumps(chunk), ev.event, ev.eol))
        return out

    def _split(self, ev: Event, learned: _Learned, text: str) -> list[bytes]:
        """A delta of the learned shape whose text (not empty) the splitter decides: its runs,
        spliced into the same bytes (one run) or built in full."""
        st = learned.st
        runs = st.runs(st.splitter.feed(text))
        if len(runs) > 1:  # a block boundary inside this delta: several chunks, built in full
            assert ev.data is not None
            obj = cast(dict[str, Any], loads(ev.data))   # (the learned shape: a chunk object)
            ch = obj["choices"][0]
            return self._chunks(obj, ev, [self._emit(ch, ch["delta"], runs)])
        if not runs:
            return []   # all held back: no empty answer delta (every other part of the event is the learned one's)
        run = runs[0]
        if run.kind == CONTENT:
            if run.text == text:
                return [ev.raw]             # answer text as it came: the original bytes go out
            data = learned.before + dumps(run.text) + learned.after
        else:
            r = dumps(run.text)
            data = learned.key_at + ",".join(f'"{f}":{r}' for f in self.fields) + learned.after
        return [encode(data, ev.event, ev.eol)]

    def _learn(self, ev: Event, data: str, obj: dict[str, Any]) -> None:
        """The shape of this event, where it is a plain delta framed as the full path writes
        events (thinkwire.fastpath.canonical_head), else none."""
        self._learned = self._shape_c = None
        got = _learn_shape(data, obj)
        if got is None:
            return
        before, after, idx = got
        st = self.choices.get(idx)
        head = canonical_head(ev.raw, data, ev.event, ev.eol)
        if st is None or head is None:
            return
        k = _KEY_AT_END.search(before)
        assert k is not None   # (learn_literal found the content key there)
        self._learned = _Learned(before, after, before[:k.start()], st)
        b, a = before.encode("utf-8", OUT), after.encode("utf-8", OUT)
        self._shape_c = Delta(head, ev.event, (b, a), (TEXT,)).compile(st.splitter.rules)
        self._reasoning = _lane(head, self._learned.key_at.encode("utf-8", OUT), a, self.fields)

    def _choice(self, ch: object, model: object) -> list[dict[str, Any]] | None:
        """The choice dicts this choice becomes, or None when it passes unchanged."""
        if not isinstance(ch, dict):
            return None
        idx = ch.get("index", 0)
        if not isinstance(idx, int):
            return None
        # Some servers (Perplexity) repeat the whole message so far in every chunk.
        message = ch.get("message")
        unchanged = None
        if isinstance(message, dict) and _split_message(message, self.ctx, model, count=False):
            unchanged = [ch]
        delta = ch.get("delta")
        if not isinstance(delta, dict):
            return unchanged
        st = self.choices.get(idx)
        if st is None:
            sp = self.ctx.splitter(model)
            st = self.choices[idx] = TextRuns(sp, Again(self.ctx, sp))
        if st.native or st.done:
            return unchanged
        if _has_native(delta):
            # The upstream reasons natively: from here this choice passes as it is.
            st.native = True
            self.ctx.stats.native = True
            held = [self._standalone(idx, kind, text) for kind, text in st.runs(st.splitter.finish())]
            return held + [ch] if held else unchanged
        content = delta.get("content")
        pieces = st.splitter.feed(content) if isinstance(content, str) and content else []
        finished = ch.get("finish_reason") is not None
        if finished:
            how = ended(ch)
            pieces += st.splitter.finish(how == LENGTH)
            st.done = True
            self.ctx.ended(how)
        runs = st.runs(pieces)
        if finished:
            runs += st.ended(how)   # the reasoning again, as the answer (thinkwire.again)
        if not runs and not (isinstance(content, str) and content):
            return unchanged   # (a block's end alone changes nothing a chat client sees)
        if len(runs) == 1 and runs[0] == (CONTENT, content):
            return unchanged  # answer text as it came: the original bytes go out
        return self._emit(ch, delta, runs)

    def _emit(self, ch: dict[str, Any], delta: dict[str, Any], runs: list[Text]) -> list[dict[str, Any]]:
        """The choice as one dict per run; the last keeps every other field of the original."""
        if not runs:  # all of it held back for now: no answer delta (an empty one reads as the answer starting)
            if len(delta) == 1 and all(v is None for k, v in ch.items() if k not in ("index", "delta")):
                return []
            return [dict(ch, delta=dict(delta, content=None))]
        out = [self._standalone(ch.get("index", 0), kind, text,
                                role=delta.get("role") if k == 0 else None)
               for k, (kind, text) in enumerate(runs[:-1])]
        d = dict(delta)
        if out:
            d.pop("role", None)
        out.append(dict(ch, delta=self._put(d, *runs[-1])))
        return out

    def _standalone(self, idx: int, kind: int, text: str, role: str | None = None) -> dict[str, Any]:
        delta = self._put({"role": role} if role else {}, kind, text)
        return {"index": idx, "delta": delta, "finish_reason": None}

    def _put(self, delta: dict[str, Any], kind: int, text: str) -> dict[str, Any]:
        """A run's text into a delta: as content, or as reasoning in the reasoning fields, where
        the content key stood (no `"content": null`: see _lane)."""
        if kind == CONTENT:
            delta["content"] = text
            return delta
        if "content" not in delta:
            delta.update((f, text) for f in self.fields)
            return delta
        out: dict[str, Any] = {}
        for k, v in delta.items():
            if k == "content":
                out.update((f, text) for f in self.fields)
            elif k not in self.fields:   # (a native key left empty: the text takes its name)
                out[k] = v
        return out

    def flush(self) -> list[bytes]:
        """Text still held by any choice, as chunks of its own (before [DONE] or at the end)."""
        if self.template is None:
            return []
        out = []
        for idx in sorted(self.choices):
            st = self.choices[idx]
            if st.native or st.done:
                continue
            st.done = True
            for kind, text in st.runs(st.splitter.finish()):
                chunk = dict(self.template, choices=[self._standalone(idx, kind, text)])
                out.append(encode(dumps(chunk), self.event_name, self.eol))
        return out

    finish = flush
    abort = flush


def _learn_shape(data: str, obj: dict[str, Any]) -> tuple[str, str, int] | None:
    """For a one-choice chunk whose delta is plain content: the text before and after the
    content's string literal, and the choice index. Servers send the same bytes around every
    token delta of a stream, so a later event that starts and ends the same way differs only in
    its text, and can be handled without a JSON parse (thinkwire.shapes, on its bytes)."""
    choices = obj["choices"]
    if len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    ch = choices[0]
    delta, idx = ch.get("delta"), ch.get("index", 0)
    # Any native reasoning key, even null, rules the shape out: a spliced reasoning value
    # would come before it, and parsers keep the last of two equal keys.
    if (not isinstance(delta, dict) or not isinstance(delta.get("content"), str) or not isinstance(idx, int)
            or ch.get("finish_reason") is not None or "message" in ch or any(k in delta for k in _NATIVE)):
        return None
    shape = learn_literal(data, _CONTENT_KEY, delta["content"], lambda o: o["choices"][0]["delta"]["content"])
    return None if shape is None else (*shape, idx)


class _Learned(NamedTuple):
    """The last plain delta parsed in full (`_learn_shape`): the data before and after its content
    literal, `before` up to the content key (`key_at`: where a reasoning delta's fields go), and
    its choice."""
    before: str
    after: str
    key_at: str
    st: TextRuns


@functools.lru_cache(maxsize=64)
def _lane(head: bytes, key_at: bytes, after: bytes, fields: tuple[str, ...]) -> Lane:
    """Reasoning on a delta of the learned shape: the same event with the reasoning fields where
    its content key stood. No `"content": null` in front of them: the wire format of the servers
    that stream reasoning (vLLM, SGLang, llama.cpp) has none, and every client reads an absent
    content as a null one (the openai SDK's accumulator, LangChain, the AI SDK). Whitespace alone
    is held, and nothing goes out."""
    out: list[bytes | int] = [head + key_at + b'"' + fields[0].encode() + b'":"']
    for f in fields[1:]:
        out += [hot.PART_BODY, b'","' + f.encode() + b'":"']
    out += [hot.PART_BODY, b'"' + after + b"\n\n"]
    return Lane(tuple(out), reasoning=True, held=())


# -- the way back ---------------------------------------------------------------------------
def restore_request(data: bytes, ctx: FlowContext) -> bytes | None:
    """Assistant messages' reasoning fields: kept (default), put back inline, or dropped.

    Chat clients send `reasoning_content` back without any mark, so the proxy cannot tell
    its own from an upstream's: nothing changes unless `think_chat_restore` asks for it.
    """
    return restore(data, ctx, ctx.settings.chat_restore, "messages",
                   lambda obj, messages, mode: _restore_messages(messages, mode, ctx))


def _restore_messages(messages: list[Any], mode: str, ctx: FlowContext) -> int:
    changed = 0
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        texts = [m.pop(k) for k in _NATIVE if k in m]
        # (Both fields, under think_chat_field=both, hold the same text: it counts once.)
        reasoning = "\n\n".join(dict.fromkeys(t for t in texts if isinstance(t, str) and t))
        if mode == "inline" and (texts or isinstance(m.get("content"), str)):
            changed += inline_turn(m, reasoning, ctx, counted=bool(texts))
        elif texts:
            changed += 1
    return changed


def inline_turn(m: dict[str, Any], reasoning: str, ctx: FlowContext, counted: bool = True) -> int:
    """An assistant message's reasoning back in its `content`, as the model wrote it where this
    proxy saw the output (thinkwire.written: its whitespace, several blocks where they stood),
    else around the pair the model was last seen writing (the profile's, before any). A turn
    that had no reasoning field changes only where its output is remembered (all its blocks
    were empty). 1 when the message changed (or had a reasoning field), else 0."""
    content = m.get("content")
    answer = content if isinstance(content, str) else "" if content is None else None
    got = ctx.recall.written(reasoning, answer) if answer is not None else None
    if got is not None:
        m["content"] = got
        return 1
    if not reasoning:
        return int(counted)
    pair = ctx.guess_pair()
    text = f"{pair.open}{reasoning}{pair.close}"
    if isinstance(content, list):
        m["content"] = [{"type": "text", "text": text}] + content
    else:
        m["content"] = text + (content if isinstance(content, str) else "")
    return 1
