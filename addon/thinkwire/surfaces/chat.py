"""Chat Completions (`/chat/completions`): reasoning goes to `reasoning_content` (or `reasoning`).

Whole bodies: each choice's `message.content` is split. Streams: each choice index has its own
splitter; a chunk whose text holds a block boundary becomes several chunks so reasoning and
answer keep their order. Everything the rewrite does not own passes through as it came.
"""

from __future__ import annotations


from ..jsonnum import loads
from ..context import LENGTH, OTHER, STOP, FlowContext
from ..splitter import CONTENT, REASONING
from . import event_object, is_done, restore
from ..again import Again
from .textruns import BLOCK_JOIN, TextRuns
from .. import hot
from ..jsonio import OUT, dumps
from ..fastpath import (canonical_head, key_pattern, learn_literal, literal_body, literal_shape,
                        read_literal, slot_text)
from ..events import Event
from ..sse import encode

NAME = "chat"
SHAPE = "'choices' list"
STREAM_TYPE = "text/event-stream"
_NATIVE = ("reasoning_content", "reasoning")
_CONTENT_KEY = key_pattern("content")


def matches(path: str) -> bool:
    return path.split("?", 1)[0].rstrip("/").endswith("/chat/completions")


def looks_like(obj: dict) -> bool:
    return isinstance(obj.get("choices"), list)


def _fields(ctx: FlowContext) -> tuple[str, ...]:
    f = ctx.settings.chat_field
    return _NATIVE if f == "both" else (f,)


def _has_native(d: dict) -> bool:
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


def ended(ch: dict) -> str | None:
    """How a choice's output ended: STOP for an answer given in full, LENGTH at the token limit,
    OTHER for the rest (`tool_calls`, `content_filter`), None while it goes on."""
    reason = ch.get("finish_reason")
    return None if reason is None else STOP if reason == "stop" else LENGTH if reason == "length" else OTHER


def _split_message(msg: dict, ctx: FlowContext, model: object, count: bool = True,
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
class StreamRewriter:
    """One chat stream. `on_event` for each SSE event; `finish` at the end; `abort` on failure."""

    def __init__(self, ctx: FlowContext, fast: bool = True) -> None:
        self.ctx = ctx
        self.fast = fast                     # False: no shortcut, every event parsed in full
        self.fields = _fields(ctx)
        self.choices: dict = {}
        self.template: dict | None = None   # top-level fields of the last chunk, for flush chunks
        self.event_name: str | None = None
        self.eol = b"\n"
        # The text around the content of the last plain delta (see _learn_shape).
        self._shape: tuple[str, str, int] | None = None
        # The same as bytes, for on_chunk: (ByteShape, the choice, the reasoning event cut
        # where its text goes).
        self._bytes: tuple | None = None
        self._hot: tuple | None = None     # (the _bytes they are for, C specs for answer, reasoning)
        self._armed: tuple | None = None   # (kind, choice) the C callable was last armed for

    def on_chunk(self, chunk: bytes) -> list[bytes] | None:
        """The byte fast path (see thinkwire.fastpath): a plain delta shaped like the last."""
        b = self._bytes
        if b is None:
            return None
        m = b[0].match(chunk)
        st = b[1]
        if m is None or st.native or st.done:
            return None
        got = slot_text(m, 1, st.splitter.rules, tags=True)
        if got is None:   # undecodable, or empty: on_event, without the driver's framing
            return self.on_event(b[0].event(chunk))
        if got[1] is not None:
            piece = st.splitter.plain(got[0])
            if piece is not None:
                if piece[0] == CONTENT:
                    return [chunk]              # answer text as it came
                # (runs() changes a block's first text only: skip it for the rest.)
                text = piece[1] if st.block_has_text else st.runs([piece])[0][1]
                if st.again is not None and st.block_has_text:
                    st.again.said(REASONING, text)
                return [literal_body(text, got).join(b[2])]
        # The splitter decides (a tag's first character, text held): as _fast does once it has
        # read the literal, which the match already did.
        ev = b[0].event(chunk)
        return self._split(ev, ev.data, self._shape[0], self._shape[1], st, got[0])   # type: ignore[index]

    def hot(self) -> hot.Arming | None:
        """thinkwire.hot: the arguments of `Hot.arm` while a plain delta shaped like the last
        changes nothing here but the splitter's state (`Splitter.took`); None when on_chunk
        must decide."""
        b = self._bytes
        if b is None:
            return None
        st = b[1]
        if st.native or st.done:
            return None
        kind = st.splitter.steady()
        if kind is None or (kind == REASONING and not st.block_has_text):
            return None
        specs = self._hot
        if specs is None or specs[0] is not b:
            rules, m = st.splitter.rules, b[0]
            # The answer goes as it came; reasoning in its field; whitespace alone is held, and
            # nothing goes out (as _split sends).
            specs = self._hot = (b, hot.spec(rules, m.prefix, m.suffix),
                                 hot.spec(rules, m.prefix, m.suffix, hot.template(b[2]), **hot.reasoning(rules),
                                          held=()))
        self._armed = (kind, st)
        return hot.Arming(specs[1 if kind == CONTENT else 2], held=hot.holding(st.splitter, kind))

    def settle(self, got: hot.Took) -> None:
        """What the C callable took since it was armed (`Hot.take`)."""
        kind, st = self._armed   # type: ignore[misc]
        gave = hot.fold(st.splitter, kind, got)[0]
        if st.again is not None:
            st.again.said(kind, gave)

    def on_event(self, ev: Event) -> list[bytes]:
        data = ev.data
        if data is None:
            return [ev.raw]                 # comments, keep-alives
        shape = self._shape
        if shape is not None and self.fast and data.startswith(shape[0]) and data.endswith(shape[1]):
            out = self._fast(ev, data, *shape)
            if out is not None:
                return out
        if is_done(data):
            return self.flush() + [ev.raw]
        obj = event_object(data, self.ctx)
        if obj is None or not isinstance(obj.get("choices"), list) or not obj["choices"]:
            return [ev.raw]                 # usage chunk (`choices: []`), errors, other shapes
        self.template = {k: v for k, v in obj.items() if k not in ("choices", "usage")}
        self.event_name, self.eol = ev.event, ev.eol
        self._shape = _learn_shape(data, obj)
        per_choice = [self._choice(ch, obj.get("model")) for ch in obj["choices"]]
        self._bytes = self._learn_bytes(ev) if self._shape is not None and self.fast else None
        if all(p is None for p in per_choice):
            return [ev.raw]
        return self._chunks(obj, ev, [[ch] if p is None else p for ch, p in zip(obj["choices"], per_choice)])

    def _chunks(self, obj: dict, ev: Event, lists: list[list[dict]]) -> list[bytes]:
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

    def _fast(self, ev: Event, data: str, before: str, after: str, idx: int) -> list[bytes] | None:
        """A plain content delta shaped like the last one: split its text without parsing the
        event, and splice the result into the same bytes. None: take the full path."""
        got = read_literal(data, before, after)
        st = self.choices.get(idx)
        if got is None or st is None or st.native or st.done:
            return None
        text = got[0]
        if not text:
            return [ev.raw]
        return self._split(ev, data, before, after, st, text)

    def _split(self, ev: Event, data: str, before: str, after: str, st: TextRuns, text: str) -> list[bytes]:
        """_fast's delta, its text (not empty) read: the splitter's runs, spliced into the same
        bytes (one run) or built in full."""
        runs = st.runs(st.splitter.feed(text))
        if len(runs) > 1:  # a block boundary inside this delta: several chunks, built in full
            obj = loads(data)
            ch = obj["choices"][0]
            return self._chunks(obj, ev, [self._emit(ch, ch["delta"], runs)])
        if not runs:
            return []   # all held back: no empty answer delta (every other part of the event is the learned one's)
        if runs[0][0] == CONTENT:
            if runs[0][1] == text:
                return [ev.raw]             # answer text as it came: the original bytes go out
            value = dumps(runs[0][1])
        else:
            r = dumps(runs[0][1])
            value = "null," + ",".join(f'"{f}":{r}' for f in self.fields)
        return [encode(before + value + after, ev.event, ev.eol)]

    def _learn_bytes(self, ev: Event) -> tuple | None:
        before, after, idx = self._shape   # type: ignore[misc]
        st = self.choices.get(idx)
        head = canonical_head(ev.raw, ev.data, ev.event, ev.eol)  # type: ignore[arg-type]
        if st is None or head is None:
            return None
        # What _fast sends for a reasoning run (the event framed as it came: `head`, the data, a
        # blank line), cut where the text goes: built in pieces, not cut at a mark, which the
        # upstream's bytes (its event name) could hold too.
        keys = [f'"{f}":"' for f in self.fields]
        cut = ([head + (before + "null," + keys[0]).encode("utf-8", OUT)] + [('",' + k).encode() for k in keys[1:]]
               + [('"' + after).encode("utf-8", OUT) + b"\n\n"])
        return literal_shape(head, ev.event, before, after, st.splitter.rules), st, cut

    def _choice(self, ch: object, model: object) -> list[dict] | None:
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

    def _emit(self, ch: dict, delta: dict, runs: list) -> list[dict]:
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

    def _standalone(self, idx: int, kind: int, text: str, role: str | None = None) -> dict:
        delta = self._put({"role": role} if role else {}, kind, text)
        return {"index": idx, "delta": delta, "finish_reason": None}

    def _put(self, delta: dict, kind: int, text: str) -> dict:
        """A run's text into a delta: as content, or as reasoning with content null."""
        if kind == CONTENT:
            delta["content"] = text
        else:
            delta["content"] = None
            for f in self.fields:
                delta[f] = text
        return delta

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


def _learn_shape(data: str, obj: dict) -> tuple[str, str, int] | None:
    """For a one-choice chunk whose delta is plain content: the text before and after the
    content's string literal, and the choice index. Servers send the same bytes around every
    token delta of a stream, so a later event that starts and ends the same way differs only in
    its text, and can be handled without a JSON parse (StreamRewriter._fast)."""
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


# -- the way back ---------------------------------------------------------------------------
def restore_request(data: bytes, ctx: FlowContext) -> bytes | None:
    """Assistant messages' reasoning fields: kept (default), put back inline, or dropped.

    Chat clients send `reasoning_content` back without any mark, so the proxy cannot tell
    its own from an upstream's: nothing changes unless `think_chat_restore` asks for it.
    """
    return restore(data, ctx, ctx.settings.chat_restore, "messages",
                   lambda obj, messages, mode: _restore_messages(messages, mode, ctx))


def _restore_messages(messages: list, mode: str, ctx: FlowContext) -> int:
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


def inline_turn(m: dict, reasoning: str, ctx: FlowContext, counted: bool = True) -> int:
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
