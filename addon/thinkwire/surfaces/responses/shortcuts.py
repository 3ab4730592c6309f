"""OpenAI Responses streams: the hot event, `response.output_text.delta`, declared for the one fast
path (thinkwire.shapes), which StreamRewriter (stream.py) runs before its full path.

Servers send the same bytes around every token delta but for a few values that change each time
(the slots: `sequence_number`, `delta`, and `obfuscation`, OpenAI's random padding). `_learn`
reads them off an event parsed in full as a `Delta` (the key order as the server sends it), and
`Shortcuts` gives the plan for the message's state: the answer's plain text into the message's
output_text part (its own number, shifted: `SEQ_OWN`; as it came where nothing moved), reasoning
as one delta event per reasoning channel (new numbers: `SEQ_NEW`). Numbering follows
`_Sequencer.number` (stream.py), the one rule both paths and C's SEQ_* share.
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from ... import hot
from ...again import Again
from ...events import Event
from ...fastpath import SHAPE_MAX, Got, canonical_head, scanstring
from ...jsonio import OUT, dumps
from ...rules import Rules
from ...shapes import NUMBER, PLANS_MAX, TEXT, Delta, FastPath, Lane, Plan, Route, Shape, Slot, String
from ...splitter import CONTENT, REASONING, Piece, Splitter, Text
from .items import Obj, _ev, _Message, _MessagePiece, _Mode, _OutputPart, _ReasoningItem, _UpstreamPart

if TYPE_CHECKING:
    from .stream import _Sequencer

# -- the token delta, learned ---------------------------------------------------------------------
# OpenAI's obfuscation: a string of plain ASCII (no escape), copied as it came.
_OBFUSCATION = String(bytes(b for b in range(0x20, 0x7F) if b not in b'"\\'))
_SLOTS: dict[str, Slot] = {"sequence_number": NUMBER, "delta": TEXT, "obfuscation": _OBFUSCATION}
_SLOT_KEY = re.compile(r'"(sequence_number|delta|obfuscation)"\s*:\s*')  # keys only (a quote in a string is escaped)
_INT = re.compile(r"0|[1-9][0-9]*")


class Learned(NamedTuple):
    """An output_text.delta parsed in full, as the fast path reads the next ones: its shape (the
    `Delta` compiled for the parts' rules), the event (`obj`), its slots' keys in the order they
    come, and the upstream output_index it belongs to."""
    shape: Shape
    obj: Obj
    keys: tuple[str, ...]
    output_index: int

    def event_obj(self, vals: list[Any]) -> Obj:
        """The event with `vals` in its slots (in `keys` order), as json.loads would give it."""
        return dict(self.obj, **dict(zip(self.keys, vals)))

    def values(self, m: re.Match[bytes], text: str) -> list[Any]:
        """The slots' values of a chunk the shape matched, whose text is `text`."""
        s = self.shape
        return [text if slot == TEXT else int(m[_group(s.number)]) if slot == NUMBER
                else m[_group(s.string)].decode("ascii") for slot in s.delta.slots]


def _group(g: int | None) -> int:
    assert g is not None   # (a shape has a group for each slot its delta declares)
    return g


def _learn(ev: Event, obj: Obj, rules: Rules) -> Learned | None:
    """The shape of a fully parsed output_text.delta event framed as sse.encode frames (LF, one
    data line), or None when it has none we use."""
    data = ev.data
    assert data is not None
    seq, text, u = obj.get("sequence_number"), obj.get("delta"), obj.get("output_index")
    if (type(seq) is not int or seq < 0 or not isinstance(text, str) or type(u) is not int
            or any(v for v in obj.values() if isinstance(v, (dict, list)))):
        return None   # only flat events (`logprobs: []`): every key the pattern finds is top level
    head = canonical_head(ev.raw, data, ev.event, ev.eol)
    if head is None:
        return None   # (the byte path reads canonical frames only)
    spans: list[tuple[int, int, str]] = []
    for m in _SLOT_KEY.finditer(data):
        key, pos = m.group(1), m.end()
        v = obj.get(key)
        if key == "sequence_number":
            n = _INT.match(data, pos)
            if n is None or int(n.group()) != v:
                return None
            spans.append((pos, n.end(), key))
        elif isinstance(v, str) and data[pos:pos + 1] == '"':
            got, end = scanstring(data, pos + 1)
            if got != v:
                return None
            spans.append((pos, end, key))
        else:
            return None
    keys = tuple(k for _, _, k in spans)
    if keys != tuple(k for k in obj if k in _SLOTS) or "sequence_number" not in keys or "delta" not in keys:
        return None   # each slot exactly once, in the order the parsed event has its keys
    consts = [data[:spans[0][0]]]
    consts += [data[a[1]:b[0]] for a, b in zip(spans, spans[1:])]
    consts.append(data[spans[-1][1]:])
    if sum(map(len, consts)) > SHAPE_MAX:
        return None   # (its bytes would be a pattern kept for the process: see fastpath.SHAPE_MAX)
    delta = Delta(head, ev.event, tuple(c.encode("utf-8", OUT) for c in consts), tuple(_SLOTS[k] for k in keys))
    learned = Learned(delta.compile(rules), obj, keys, u)
    # The probe: the event with other values in the slots must parse as the learned one with
    # those values, and where the byte pattern reads it, read back as exactly those values. (A
    # string between the slots with escapes, an id, is never matched by the pattern: C, which
    # compares the bytes between the slots, still takes such deltas.)
    probe_vals: list[Any] = [seq + 1 if k == "sequence_number" else text + "\x01" if k == "delta"
                             else "x" * (len(obj[k]) + 1) for k in keys]
    parts = [consts[0]]
    for v, c in zip(probe_vals, consts[1:]):
        parts += (str(v) if type(v) is int else encode_basestring(v), c)
    probe = "".join(parts)
    if json.loads(probe) != learned.event_obj(probe_vals):
        return None
    s = learned.shape
    mb = s.match(head + probe.encode("utf-8", OUT) + delta.end)
    if mb is not None:
        lit: bytes = mb[s.text] if mb[s.text] is not None else mb[s.text + 1]
        try:
            back = json.loads(b'"' + lit + b'"')
        except ValueError:   # (a text the upstream sent as bytes that are not UTF-8: no shape from it)
            return None
        if learned.values(mb, back) != probe_vals:
            return None
    return learned


def _template(ev: Obj) -> tuple[bytes, ...]:
    """dumps(ev) cut where the values of its slot keys go (in its key order)."""
    out: list[str] = []
    cur = "{"
    for n, (k, v) in enumerate(ev.items()):
        cur += ("," if n else "") + encode_basestring(k) + ":"
        if k in _SLOTS:
            out.append(cur)
            cur = ""
        else:
            cur += dumps(v)
    out.append(cur + "}")
    return tuple(x.encode("utf-8", OUT) for x in out)


def _filled(cuts: tuple[bytes, ...], slots: tuple[Slot, ...], head: bytes, tail: bytes) -> tuple[bytes | int, ...]:
    """An output template (thinkwire.shapes.Lane) of an event cut at its slots: `head` and
    `tail` framing it, the number where NUMBER is (PART_N), the text literal's body, the string
    slot's as it came."""
    out: list[bytes | int] = []
    cur = head + cuts[0]   # the bytes since the last slot
    for slot, c in zip(slots, cuts[1:]):
        if slot == NUMBER:
            out += [cur, hot.PART_N]
        else:
            out += [cur + b'"', hot.PART_BODY if slot == TEXT else hot.PART_STR]
            c = b'"' + c
        cur = c
    out.append(cur + tail)
    return tuple(out)


class _State(NamedTuple):
    """A plan (thinkwire.shapes.Plan) and what `_decide` needs of the state it was made for: the
    message and part its text goes to, where that text is added, and the Python routes without
    the bookkeeping (`inner`)."""
    plan: Plan
    message: _Message
    part: _UpstreamPart
    kind: int
    add: Callable[..., None]
    inner: Route


class Shortcuts(FastPath):
    """StreamRewriter's side of the fast path (a mixin: the state is the rewriter's)."""

    # (StreamRewriter's; declared here for the plan)
    fast: bool
    passthrough: bool
    dirty: bool
    event_lines: bool
    eol: bytes
    mode: _Mode
    seq: _Sequencer
    active: dict[int, _Message]
    _again: tuple[Again, Splitter] | None
    _held: list[Event] | None
    _learned: Learned | None
    _hits: int
    _misses: int
    _same: bool
    _state: _State | None
    _plans: dict[tuple[Shape, object, object, _UpstreamPart], _State]
    _batch: list[tuple[Obj, Any]]

    def on_event(self, ev: Event) -> list[bytes]:   # pragma: no cover - StreamRewriter's
        raise NotImplementedError

    def _send(self, seq: object) -> list[bytes]:   # pragma: no cover - StreamRewriter's
        raise NotImplementedError

    def _frame(self, type_: str, data: str, lines: bool | None = None,
               eol: bytes | None = None) -> bytes:   # pragma: no cover - StreamRewriter's
        raise NotImplementedError

    # -- learning ------------------------------------------------------------------------------
    def _learn_from(self, ev: Event, obj: Obj, rules: Rules) -> None:
        """An output_text.delta the full path parsed: its shape, unless it has the one learned.
        A server whose deltas differ in more than the slots is not learned from for long."""
        shape, learned = self._shape_c, None
        if shape is not None:
            if shape.match(ev.raw) is not None:
                return
            learned = _learn(ev, obj, rules)
            if learned is not None and learned.shape is shape:
                return   # the same shape, where only C reads it (an escaped id between the slots)
            self._misses += 1
        if not (self._misses < 16 or self._misses * 4 < self._hits):
            learned = None
        elif shape is None:
            learned = _learn(ev, obj, rules)
        self._learned = learned
        self._shape_c = learned.shape if learned is not None else None

    def _matched(self, ev: Event) -> list[bytes]:
        """on_event for an event the learned shape matched (nothing to learn from it)."""
        self._hits += 1
        self._same = True
        return self.on_event(ev)

    # -- the plan (thinkwire.shapes) -----------------------------------------------------------
    def _unshaped(self, chunk: bytes) -> list[bytes] | None:
        if self.passthrough:   # (native reasoning upstream) the rest goes as it comes, unparsed
            return [chunk] if chunk else None
        return None

    def _unplanned(self, chunk: bytes, shape: Shape) -> list[bytes] | None:
        return self._matched(shape.event(chunk))   # (the message decides: on_event, unframed)

    def _make_plan(self) -> Plan | None:
        """What the fast path does for the state of the message the learned delta adds to: its
        part's plain text into the output_text part open for it (the answer), or into the
        reasoning item open (reasoning). None: on_event decides (no number sent yet, events
        held, no part being read, a message piece without its part open)."""
        learned = self._learned
        if learned is None or self._held is not None or self.seq.last is None:
            return None
        m = self.active.get(learned.output_index)
        p = m.part if m is not None else None
        if m is None or p is None or p.splitter is None:
            return None
        cur = m.cur
        if type(cur) is _MessagePiece:
            dp = cur.dpart
            if dp is None or dp.upart is not p:
                return None
        elif type(cur) is _ReasoningItem:
            dp = None
        else:
            return None
        key = (learned.shape, cur, dp, p)
        st = self._plans.get(key)
        if st is None:
            if len(self._plans) >= PLANS_MAX:
                self._plans.clear()
            st = self._plans[key] = self._new_plan(learned, m, cur, dp, p)
        self._state = st
        self._plan = st.plan
        return st.plan

    def _new_plan(self, learned: Learned, m: _Message, cur: _MessagePiece | _ReasoningItem,
                  dp: _OutputPart | None, p: _UpstreamPart) -> _State:
        shape = learned.shape
        lines = shape.delta.name is not None   # (what the fast path sees: canonical frames)
        g = shape.text
        if dp is not None:
            assert isinstance(cur, _MessagePiece)
            kind, add, lane = CONTENT, dp.text.add, self._answer_lane(learned, cur, dp, lines)
        else:
            assert isinstance(cur, _ReasoningItem)
            kind, add, lane = REASONING, cur.text.add, self._reasoning_lane(cur, lines)
        inner = shape.route(lane, None, self.seq)
        answer = kind == CONTENT
        splitter = p.splitter
        assert splitter is not None   # (a plan is made only for a part read as a stream)

        def came(mt: re.Match[bytes]) -> None:   # (before the splitter reads the text)
            p.fed = True
            lit = mt[g]
            p.came_literal((lit if lit is not None else mt[g + 1]).decode())   # what the delta brought, as it came
            self.event_lines, self.eol = lines, b"\n"
            self._hits += 1

        def route(chunk: bytes, mt: re.Match[bytes], text: str, got: Got) -> list[bytes]:
            add(text)
            if self._again is not None:   # (what goes out, for thinkwire.again)
                self._again[0].said(kind, text)
            out = inner(chunk, mt, text, got)
            if not answer or out[0] is not chunk:
                self.dirty = True
            return out

        def settled(kind: int, got: hot.Took, text: str, lit: str | None) -> None:
            p.fed = True
            self.event_lines, self.eol = lines, b"\n"
            self._hits += got.hits
            if got.changed:
                self.dirty = True
            add(text, lit)
            if self._again is not None:
                self._again[0].said(kind, text)
            p.came_literal(hot.literal(got))   # what the deltas brought, as they came

        spec = shape.spec(lane)
        plan = Plan(splitter, route if answer else None, None if answer else route,
                    spec if answer else None, None if answer else spec, settled, (CONTENT, REASONING), self.seq,
                    came)
        return _State(plan, m, p, kind, add, inner)

    def _answer_lane(self, learned: Learned, seg: _MessagePiece, dp: _OutputPart, lines: bool) -> Lane:
        """The answer's plain text as a delta of the output_text part `dp` on the message piece
        `seg`: its own number, shifted; as it came where nothing else moved."""
        ev = dict(learned.obj, output_index=seg.output_index, content_index=dp.content_index)
        if seg.id is not None and "item_id" in ev:
            ev["item_id"] = seg.id
        head, tail = self._frame("response.output_text.delta", "\0", lines, b"\n").split(b"\0")
        out = _filled(_template(ev), learned.shape.delta.slots, head, tail)
        return Lane(out, number=hot.SEQ_OWN, pass_same=ev == learned.obj)

    def _reasoning_lane(self, r: _ReasoningItem, lines: bool) -> Lane:
        """Reasoning text as the delta events of the reasoning item `r`, one per channel (summary
        first), numbered anew; whitespace alone sends nothing (the splitter holds it)."""
        out: list[bytes | int] = []
        for k, ch in enumerate(self.mode.channels):
            e = _ev(f"{ch.text_event}.delta", item_id=r.id, output_index=r.output_index, **{ch.index: 0}, delta="")
            head, tail = self._frame(e["type"], "\0", lines, b"\n").split(b"\0")
            for x in _filled(_template(e), (NUMBER, TEXT), head, tail):
                if x == hot.PART_N and k:
                    x = hot.PART_N1   # (the second channel's event: the number after the first's)
                if isinstance(x, bytes) and out and isinstance(out[-1], bytes):
                    out[-1] += x
                else:
                    out.append(x)
        return Lane(tuple(out), reasoning=True, held=(), number=hot.SEQ_NEW, channels=len(self.mode.channels))

    def _decide(self, chunk: bytes, m: re.Match[bytes], got: Got | None,
                piece: Text | None) -> list[bytes] | None:
        """A delta of the learned shape that no route sends: undecodable or empty (on_event),
        a text the splitter decides (a tag's first character, text held: fed here without the
        parse), or a piece of a kind the state has no route for. One piece of the state's kind
        goes out by its route; anything else through the message (`_pieces`)."""
        learned, st = self._learned, self._state
        assert learned is not None and st is not None
        shape = learned.shape
        if got is None:
            return self._matched(shape.event(chunk))
        text = got[0]   # (the plan's `came` has kept its literal)
        pieces: list[Piece]
        if piece is None:
            pieces = st.plan.splitter.feed(text)
            one = pieces[0] if len(pieces) == 1 else None
            if type(one) is Text and one.kind == st.kind:
                value = one.text
                st.add(value)
                if self._again is not None:
                    self._again[0].said(st.kind, value)
                out = st.inner(chunk, m, value, got)
                if st.kind == REASONING or out[0] is not chunk:
                    self.dirty = True
                return out
        else:
            pieces = [piece]
        vals = learned.values(m, text)
        obj = learned.event_obj(vals)
        self._batch = []
        st.message.pieces(pieces, obj, (Event(chunk, shape.delta.name, None), obj))
        return self._send(vals[learned.keys.index("sequence_number")])
