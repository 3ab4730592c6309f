"""Anthropic Messages streams: each upstream text block split, on the fly, into thinking and text
blocks, every block's index renumbered (see thinkwire.surfaces.messages)."""

from __future__ import annotations

import re
from typing import Any

from ... import hot
from ...context import LENGTH, FlowContext
from ...events import Event
from ...fastpath import Got, canonical_head, key_pattern, learn_literal, literal_body
from ...jsonio import OUT, dumps
from ...shapes import PLANS_MAX, TEXT, Delta, FastPath, Lane, Plan, Shape
from ...jsonnum import loads
from ...rules import TagPair
from ...splitter import CONTENT, END, REASONING, Piece, Splitter, Text
from ...sse import encode
from ...again import Again
from .. import event_object
from .blocks import _NATIVE, _START, _DELTA, _STOP, ended, mode

_TEXT_KEY = key_pattern("text")
_THINK, _TEXT = "thinking", "text"
_TEXT_DELTA = '"text_delta","text":'             # a delta's type and text key, for _delta_event
_THINKING_DELTA = '"thinking_delta","thinking":'
_LIVE = frozenset({"signed", "unsigned", "off"})       # thinking text streams as it comes
_SEALED = frozenset({"signed", "omitted", "redacted"})  # ... is held for the mark at the block end
_ANSWER = Lane()   # the answer's plain text into the upstream's own block: as it came
HOLD_MAX = 1 << 20   # characters of reasoning one block holds for its mark (past it: unsigned)


class _TextBlock:
    """One upstream text block being split into output blocks."""

    __slots__ = ("upstream", "splitter", "template", "start_raw", "kind", "index", "reasoning",
                 "reasoning_lits", "emitted", "held", "unsealed")

    def __init__(self, upstream: int, splitter: Splitter, template: dict[str, Any],
                 start_raw: bytes | None) -> None:
        self.upstream = upstream
        self.splitter = splitter
        self.template = template          # content_block for the text blocks it becomes
        self.start_raw = start_raw        # the upstream start event, reusable while unchanged
        self.kind: str | None = None      # the output block open now
        self.index: int | None = None     # its output index (None for a pending redacted block)
        self.reasoning: list[str] = []    # reasoning text held for a mark
        self.reasoning_lits: list[str] = []   # ... and its JSON literal (bodies), not to escape it again
        self.emitted = False              # some output block was started for it
        self.held = 0                     # characters in `reasoning`
        self.unsealed = False             # its thinking block held past HOLD_MAX: it ends unsigned


def _delta_bytes(index: int, head: str, literal: str, eol: bytes) -> bytes:
    return encode(f'{{"type":"{_DELTA}","index":{index},"delta":{{"type":{head}{literal}}}}}', _DELTA, eol)


class StreamRewriter(FastPath):
    """One Messages stream. `on_event` for each SSE event; `finish` at the end; `abort` on failure."""

    def __init__(self, ctx: FlowContext, fast: bool = True) -> None:
        self.ctx = ctx
        self.fast = fast                    # False: no shortcut, every event parsed in full
        self.mode = mode(ctx)
        self._live, self._sealed = self.mode in _LIVE, self.mode in _SEALED
        self.model: object = None
        self.next = 0                       # the next output block index
        self.moved: dict[int, int] = {}     # upstream index -> output index, blocks passed through
        self.texts: dict[int, _TextBlock] = {}
        self.text_blocks = 0                # text blocks seen (the first may start inside reasoning)
        self.native = False
        self.raw = False                    # native from the start: everything passes as it came
        self.changed = False                # something went out that differs from what came in
        self.translating = False            # failed open with indexes moved (abort, translate)
        # A text block's stop, held while its splitter holds the start of a tag: the stop reason
        # (`message_delta`, the next event) says whether the output was cut there (max_tokens).
        self._deferred: tuple[_TextBlock, Event] | None = None
        self.eol = b"\n"
        # The text around the text literal of the last text_delta parsed in full (_learn_shape):
        # its byte shape (`_shape_c`) is the fast path's, on a chunk or a framed event (thinkwire.stream).
        self._shape: tuple[str, str, int] | None = None
        self._shape_c: Shape | None = None   # the same as bytes (thinkwire.shapes)
        self._cuts: dict[tuple[int, str], list[bytes]] = {}   # (output index, delta head) -> that delta cut at its text
        self._lanes: dict[tuple[int, str], Lane] = {}        # ... and its lane
        self._plan: Plan | None = None
        self._plans: dict[tuple[Shape, _TextBlock, str | None, int | None], Plan] = {}   # made for a state, kept
        self._armed: tuple[Plan, int] | None = None
        self.again: tuple[Again, Splitter] | None = None      # (Again, the first text block's splitter): thinkwire.again

    # -- the fast path's plan (thinkwire.shapes) --------------------------------------------
    def _unshaped(self, chunk: bytes) -> list[bytes] | None:
        if self.raw:   # (native thinking upstream) the rest goes as it comes, unparsed
            return [chunk] if chunk else None
        return None

    def _make_plan(self) -> Plan | None:
        """The text block's plain text into the output block open for it: the answer as it
        came where that is the upstream's block, else as a text_delta of its index; live
        reasoning as a thinking_delta (held for the mark where sealed; whitespace alone is
        held, and nothing goes out)."""
        shape, learned = self._shape_c, self._shape
        if shape is None or learned is None or self._deferred is not None:
            return None   # (a stop held: on_event resolves it first)
        u = learned[2]
        st = self.texts.get(u)
        if st is None:
            return None
        key = (shape, st, st.kind, st.index)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= PLANS_MAX:
                self._plans.clear()
            plan = self._plans[key] = self._new_plan(shape, st, u)
        self._plan = plan
        return plan

    def _new_plan(self, shape: Shape, st: _TextBlock, u: int) -> Plan:
        answer = reasoning = None
        answer_route = reasoning_route = None
        index = st.index   # (set with the kind: _open)
        if st.kind == _TEXT and index is not None:
            if index == u:
                answer = _ANSWER

                def said(text: str, got: Got) -> str:
                    self.eol = b"\n"
                    again = self.again
                    if again is not None:
                        again[0].said(CONTENT, text)
                    return text
            else:
                answer = self._lane(index, _TEXT_DELTA)

                def said(text: str, got: Got) -> str:
                    self.eol = b"\n"
                    again = self.again
                    if again is not None:
                        again[0].said(CONTENT, text)
                    self.changed = True   # the answer after a thinking block: its index moved
                    return text
            answer_route = shape.route(answer, said)
        elif st.kind == _THINK and self._live and index is not None:
            reasoning = self._lane(index, _THINKING_DELTA)
            sealed = self._sealed

            def thought(text: str, got: Got) -> bytes:
                self.eol = b"\n"
                again = self.again
                if again is not None:
                    again[0].said(REASONING, text)
                lit = literal_body(text, got)
                if sealed:
                    self._hold(st, text, lit.decode())   # (live: it sends nothing)
                self.changed = True
                return lit
            reasoning_route = shape.route(reasoning, thought)

        def settled(kind: int, got: hot.Took, text: str, lit: str | None) -> None:
            self.eol = b"\n"
            if got.changed:   # (chunks that went out other than they came)
                self.changed = True
            again = self.again
            if again is not None:
                again[0].said(kind, text)
            if kind == REASONING and self._sealed:
                assert lit is not None   # (Plan.literal: the kinds `settled` gets the literal of)
                self._hold(st, text, lit)   # (live: it sends nothing)

        return Plan(st.splitter, answer_route, reasoning_route, shape.spec(answer) if answer is not None else None,
                    shape.spec(reasoning) if reasoning is not None else None, settled,
                    (REASONING,) if self._sealed else ())

    def _decide(self, chunk: bytes, m: re.Match[bytes], got: Got | None,
                piece: Text | None) -> list[bytes] | None:
        shape, learned = self._shape_c, self._shape
        assert shape is not None and learned is not None
        u = learned[2]
        if piece is None:
            ev = shape.event(chunk)
            if got is None:   # undecodable or empty: on_event, without the driver's framing
                return self.on_event(ev)
            # The splitter decides (a tag's first character, text held), without a parse: the
            # literal as it came is what dumps(text) gives where it has no escape.
            self.eol = b"\n"
            g = shape.text
            body = m[g] if m[g] is not None else m[g + 1]
            return self._text(ev, self.texts[u], u, got[0], None if b"\\" in body else f'"{body.decode()}"')
        self.eol = b"\n"
        out = self._pieces(chunk, self.texts[u], u, [piece], piece[1], None)
        return [b"".join(out)] if out else []   # (an empty chunk would end the client's body)

    def _lane(self, index: int, head: str) -> Lane:
        """The lane of a text or thinking delta into output block `index` (thinking: whitespace
        alone held, nothing sent)."""
        lane = self._lanes.get((index, head))
        if lane is None:
            out = hot.template(self._cut(index, head))
            lane = self._lanes[(index, head)] = Lane(out, True, ()) if head == _THINKING_DELTA else Lane(out)
        return lane

    def on_event(self, ev: Event) -> list[bytes]:
        self._plan = None
        if self._deferred is not None:
            return self._resolve(ev) + self.on_event(ev)
        if self.raw or ev.data is None:
            return [ev.raw]
        obj = event_object(ev.data, self.ctx)
        if obj is None:
            return [ev.raw]
        self.eol = ev.eol
        t = obj.get("type")
        if t == _START:
            return self._start(ev, obj)
        if t == _DELTA:
            return self._delta(ev, obj)
        if t == _STOP:
            return self._stop(ev, obj)
        if t == "message_start":
            msg = obj.get("message")
            if isinstance(msg, dict):
                self.model = msg.get("model")
        elif t in ("message_delta", "message_stop", "error"):
            delta = obj.get("delta")
            out = self._close_all()   # nothing held back past the end or an error
            if t == "message_delta" and isinstance(delta, dict):
                self.ctx.ended(ended(delta.get("stop_reason")))
                out += self._answer_again(ended(delta.get("stop_reason")))
            return out + [ev.raw]
        return [ev.raw]

    def _start(self, ev: Event, obj: dict[str, Any]) -> list[bytes]:
        u, block = obj.get("index"), obj.get("content_block")
        if not isinstance(u, int) or not isinstance(block, dict) or u in self.texts:
            return [ev.raw]
        btype = block.get("type")
        if btype in _NATIVE and not self.native:
            self.native = True
            self.ctx.stats.native = True
            if not self.changed and not self.texts:
                self.raw = True  # nothing rewritten yet: the whole message passes untouched
                self._shape_c = None
                return [ev.raw]
        if btype == "text" and not self.native and isinstance(block.get("text", ""), str):
            first = self.text_blocks == 0
            self.text_blocks += 1
            sp = self.ctx.splitter(self.model, None if first else False)
            if first:
                self.again = (Again(self.ctx, sp), sp)
            text = block.get("text", "")
            st = _TextBlock(u, sp, dict(block, text=""), None if text else ev.raw)
            self.texts[u] = st
            return self._emit(st, sp.feed(text)) if text else []
        return [self._pass(ev, obj, u, start=True)]

    def _delta(self, ev: Event, obj: dict[str, Any]) -> list[bytes]:
        u = obj.get("index")
        st = self.texts.get(u) if isinstance(u, int) else None
        if st is None or not isinstance(u, int) or ev.data is None:
            return [self._pass(ev, obj, u)]
        delta = obj.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
            text = delta["text"]
            self._shape = _learn_shape(ev.data, text, u)
            head = canonical_head(ev.raw, ev.data, ev.event, ev.eol) if self._shape and self.fast else None
            self._shape_c = None if head is None or self._shape is None else Delta(
                head, ev.event, (self._shape[0].encode("utf-8", OUT), self._shape[1].encode("utf-8", OUT)),
                (TEXT,)).compile(st.splitter.rules)
            return self._text(ev, st, u, text, None)
        # Any other delta (citations_delta ...) belongs to the text: put it in a text block.
        out = [] if st.kind == _TEXT else self._open(st, _TEXT)
        if st.index == u:
            out.append(ev.raw)
        else:
            out.append(self._encode(dict(obj, index=st.index), ev))
        return out

    def _text(self, ev: Event, st: _TextBlock, u: int, text: str, literal: str | None) -> list[bytes]:
        """A text_delta of the text block `st` (upstream index `u`), fed to its splitter once."""
        return self._pieces(ev.raw, st, u, st.splitter.feed(text), text, literal)

    def _pieces(self, raw: bytes, st: _TextBlock, u: int, pieces: list[Piece], text: str,
                literal: str | None) -> list[bytes]:
        """The events for the pieces of a text_delta whose bytes are `raw`."""
        if pieces == [Text(CONTENT, text)] and st.kind != _THINK:
            out = [] if st.kind == _TEXT else self._open(st, _TEXT)
            if st.index == u:   # the same text into the same block: as it came
                if self.again is not None:
                    self.again[0].said(CONTENT, text)
                return out + [raw]
            return out + self._emit(st, pieces, text, literal)
        return self._emit(st, pieces, text, literal)

    def _stop(self, ev: Event, obj: dict[str, Any]) -> list[bytes]:
        u = obj.get("index")
        st = self.texts.get(u) if isinstance(u, int) else None
        if st is None:
            return [self._pass(ev, obj, u)]
        if st.splitter.holds_tag():
            self._deferred = (st, ev)
            return []
        return self._finish_text(st, ev)

    def _resolve(self, ev: Event | None) -> list[bytes]:
        """The held stop of a text block, once the next event (or the end) came: cut off where
        that is a `message_delta` saying `max_tokens`."""
        deferred = self._deferred
        assert deferred is not None
        st, stop = deferred
        self._deferred = None
        obj = None
        if ev is not None and ev.data is not None and '"message_delta"' in ev.data:
            try:
                obj = loads(ev.data)   # (not counted as malformed here: on_event reads it next)
            except (ValueError, RecursionError):
                pass
        delta = obj.get("delta") if isinstance(obj, dict) and obj.get("type") == "message_delta" else None
        cut = isinstance(delta, dict) and ended(delta.get("stop_reason")) == LENGTH
        return self._finish_text(st, stop, cut)

    # -- one split text block -----------------------------------------------------------
    def _emit(self, st: _TextBlock, pieces: list[Piece], text: str | None = None,
              literal: str | None = None) -> list[bytes]:
        """Output events for split pieces. `literal`: the JSON literal of `text`, reused for a
        piece that is all of it."""
        out: list[bytes] = []
        for p in pieces:
            if p.kind == END:
                if st.kind == _THINK:
                    out += self._close_block(st, p.pair)
                continue
            kind, value = p
            if self.again is not None:
                self.again[0].said(kind, value)
            if kind == REASONING:
                if st.kind != _THINK:
                    out += self._open(st, _THINK)
                lit = literal if literal is not None and value == text else dumps(value)
                if self._live or st.unsealed:
                    assert st.index is not None   # (_open set it)
                    out.append(self._delta_event(st.index, _THINKING_DELTA, lit))
                if self._sealed:
                    out += self._hold(st, value, lit[1:-1])
            else:
                if st.kind != _TEXT:
                    out += self._open(st, _TEXT)
                assert st.index is not None   # (_open set it)
                out.append(self._delta_event(st.index, _TEXT_DELTA,
                                             literal if literal is not None and value == text else dumps(value)))
        return out

    def _hold(self, st: _TextBlock, text: str, lit: str) -> list[bytes]:
        """Keep reasoning for the block's mark, up to HOLD_MAX characters: past that the block
        goes out unsigned (an empty signature, as under think_signature=unsigned), and the
        text held back (omitted, redacted) goes out now as a thinking_delta, the rest as it comes."""
        if st.unsealed:
            return []
        st.reasoning.append(text)
        st.reasoning_lits.append(lit)
        st.held += len(text)
        if st.held <= HOLD_MAX:
            return []
        st.unsealed = True
        held = '"' + "".join(st.reasoning_lits) + '"'
        st.reasoning, st.reasoning_lits = [], []
        if self._live:   # (signed: its text went out already)
            return []
        out: list[bytes] = []
        if st.index is None:   # redacted: nothing of the block went out yet
            st.index = self._take_index()
            out.append(self._created(_START, {"type": _START, "index": st.index,
                                             "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
        out.append(self._delta_event(st.index, _THINKING_DELTA, held))
        return out

    def _cut(self, index: int, head: str) -> list[bytes]:
        """A delta of output block `index` with `head` (text or thinking), framed as the byte
        paths see events, cut where its text literal goes."""
        cut = self._cuts.get((index, head))
        if cut is None:
            cut = self._cuts[(index, head)] = _delta_bytes(index, head, '"\0"', b"\n").split(b"\0")
        return cut

    def _delta_event(self, index: int, head: str, literal: str) -> bytes:
        """A text or thinking delta, the bytes _created gives for its dict, without building one."""
        self.changed = True
        return _delta_bytes(index, head, literal, self.eol)

    def _open(self, st: _TextBlock, kind: str) -> list[bytes]:
        """Close the open output block, open one of `kind` (a redacted block waits for its end)."""
        out = self._close_block(st)
        st.kind = kind
        st.emitted = True
        if kind == _THINK:
            if self.mode == "redacted":
                st.index = None  # sent whole at its end, with the mark
                return out
            block: dict[str, Any] = {"type": "thinking", "thinking": ""}
            if self.mode != "off":
                block["signature"] = ""
        else:
            block = st.template
        st.index = self._take_index()
        if kind == _TEXT and st.start_raw is not None and st.index == st.upstream:
            out.append(st.start_raw)  # the upstream's own start event still says it all
        else:
            out.append(self._created(_START, {"type": _START, "index": st.index, "content_block": block}))
        st.start_raw = None
        return out

    def _close_block(self, st: _TextBlock, pair: TagPair | None = None) -> list[bytes]:
        """Close the open output block. A thinking block goes out complete here: marks need
        all of its text, so a redacted block is sent whole and a signature_delta goes last."""
        kind, idx = st.kind, st.index
        st.kind = st.index = None
        if kind == _TEXT:
            return [self._created(_STOP, {"type": _STOP, "index": idx})]
        if kind != _THINK:
            return []
        if self.again is not None:
            self.again[0].ended()
        pair = pair or self.ctx.rules().pairs[0]
        text, literal = "".join(st.reasoning), "".join(st.reasoning_lits)
        st.reasoning, st.reasoning_lits, st.held = [], [], 0
        out: list[bytes] = []
        if st.unsealed:   # held past HOLD_MAX: it ends unsigned
            st.unsealed = False
            out.append(self._created(_DELTA, {"type": _DELTA, "index": idx, "delta": {
                "type": "signature_delta", "signature": ""}}))
        elif self.mode in ("redacted", "signed", "omitted"):   # (blocks.mode: these only with a sealer)
            sealer = self.ctx.sealer
            assert sealer is not None
            sig = sealer.seal(text, pair, literal)
            if self.mode == "redacted":
                idx = self._take_index()
                out.append(self._created(_START, {"type": _START, "index": idx, "content_block": {
                    "type": "redacted_thinking", "data": sig}}))
            else:
                out.append(self._created(_DELTA, {"type": _DELTA, "index": idx, "delta": {
                    "type": "signature_delta", "signature": sig}}))
        elif self.mode == "unsigned":
            out.append(self._created(_DELTA, {"type": _DELTA, "index": idx, "delta": {
                "type": "signature_delta", "signature": ""}}))
        out.append(self._created(_STOP, {"type": _STOP, "index": idx}))
        return out

    def _finish_text(self, st: _TextBlock, ev: Event | None, cut: bool = False) -> list[bytes]:
        """Flush a text block at its stop (or at the end of the stream); `cut`: at the token limit."""
        del self.texts[st.upstream]
        out = self._emit(st, st.splitter.finish(cut))
        if not st.emitted:
            out += self._open(st, _TEXT)  # the block was empty: keep it, empty, as body rewrites do
        if ev is not None and st.kind == _TEXT and st.index == st.upstream:
            st.kind = None
            out.append(ev.raw)
        else:
            out += self._close_block(st)
        return out

    def _close_all(self) -> list[bytes]:
        out: list[bytes] = self._resolve(None) if self._deferred is not None else []
        for st in list(self.texts.values()):
            out += self._finish_text(st, None)
        return out

    # -- helpers ------------------------------------------------------------------------
    def _take_index(self) -> int:
        i = self.next
        self.next += 1
        return i

    def _pass(self, ev: Event, obj: dict[str, Any], u: object, start: bool = False) -> bytes:
        """A block this rewrite does not own: same event, index renumbered if it moved."""
        if not isinstance(u, int):
            return ev.raw
        if start:
            self.moved[u] = self._take_index()
        idx = self.moved.get(u)
        if idx is None or idx == u:
            return ev.raw
        return self._encode(dict(obj, index=idx), ev)

    def _encode(self, obj: dict[str, Any], ev: Event) -> bytes:
        self.changed = True
        return encode(dumps(obj), ev.event or obj.get("type"), ev.eol)

    def _created(self, name: str, obj: dict[str, Any]) -> bytes:
        self.changed = True
        return encode(dumps(obj), name, self.eol)

    def finish(self) -> list[bytes]:
        return self._close_all()

    def _answer_again(self, finish: str | None) -> list[bytes]:
        """The reasoning that went out, again as a text block of its own, when a body of this
        output would give it as the answer (thinkwire.again); before the message's end."""
        again, self.again = self.again, None
        text = again[0].text(again[1], finish) if again is not None else None
        if text is None:
            return []
        idx = self._take_index()
        return [self._created(_START, {"type": _START, "index": idx, "content_block": {"type": "text", "text": ""}}),
                self._delta_event(idx, _TEXT_DELTA, dumps(text)),
                self._created(_STOP, {"type": _STOP, "index": idx})]

    def abort(self) -> list[bytes]:
        """Fail open: what is still held goes out, and each text block still open stays open
        as a text block: the upstream's next events of that block land on it (`translate`)."""
        out: list[bytes] = []
        deferred, self._deferred = self._deferred, None   # (its stop goes after what it held)
        try:
            for st in list(self.texts.values()):
                out += self._emit(st, st.splitter.finish())
                if st.kind != _TEXT:
                    out += self._open(st, _TEXT)
                assert st.index is not None   # (_open set it)
                self.moved[st.upstream] = st.index
        finally:
            self.texts.clear()
        # The rest passes as it came, unless a block's index moved: then every block event
        # still needs the client's index, or a text_delta would land on a thinking block.
        self.translating = not self.raw and any(u != i for u, i in self.moved.items())
        if deferred is not None:
            out += self.translate(deferred[1]) if self.translating else [deferred[1].raw]
        return out

    def translate(self, ev: Event) -> list[bytes]:
        """An event after failing open: as it came, its block's index moved as the client has it."""
        obj = event_object(ev.data, self.ctx) if ev.data is not None else None
        new = self.renumbered(obj) if obj is not None else {}
        return [self._encode(dict(obj, **new), ev) if obj is not None and new else ev.raw]

    def renumbered(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The fields of an event after failing open that the client has otherwise: its index."""
        t, u = obj.get("type"), obj.get("index")
        if t not in (_START, _DELTA, _STOP) or type(u) is not int:
            return {}
        if t == _START:
            self.moved[u] = self._take_index()
        idx = self.moved.get(u)
        return {"index": idx} if idx is not None and idx != u else {}


def _learn_shape(data: str, text: str, u: int) -> tuple[str, str, int] | None:
    """For a text_delta event of upstream block `u` whose text is `text`: the data before and
    after the text's string literal, and `u`. Servers send the same bytes around every text
    delta of a block, so a later event that starts and ends the same way differs only in its
    text and is handled without a JSON parse (thinkwire.shapes, on its bytes). The literal found is
    checked to be the one the parse took `delta.text` from (not another `text` key, not an
    earlier duplicate): the data with a number in its place must parse to that number there."""
    shape = learn_literal(data, _TEXT_KEY, text, lambda o: o["delta"]["text"])
    return None if shape is None else (*shape, u)
