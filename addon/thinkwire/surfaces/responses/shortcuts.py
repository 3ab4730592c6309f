"""OpenAI Responses streams: the shortcuts for the hot event, `response.output_text.delta`, that
StreamRewriter (stream.py) takes before its full path: a text shape (`_Shape`, `_fast`), a byte
shape (`on_chunk`) and the C callable's spec (`hot`, `settle`; thinkwire.hot)."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from json.encoder import encode_basestring
from typing import Any, Callable, NamedTuple

from ... import hot
from ...events import Event
from ...fastpath import ASCII_SLOT, NUMBER_SLOT, SHAPE_MAX, ByteShape, canonical_head, slot_text, text_slot
from ...jsonio import OUT, dumps
from ...splitter import CONTENT, END, REASONING, Rules, Splitter
from .items import _OutputPart, _ev, _MessagePiece, _ReasoningItem


# -- streams --------------------------------------------------------------------------------------
# The hot event, `response.output_text.delta`, is handled without a JSON parse when it is shaped
# like the last one parsed in full: servers send the same bytes around every token delta but for
# a few values that change each time (the slots: `sequence_number`, `delta`, and `obfuscation`,
# OpenAI's random padding). A shape is the text between the slots; an event that has that text
# around values of the slots' kinds is the learned event with other values (checked when learned,
# by parsing a probe). Events go out from templates: compact JSON cut at the slots.
_SEQ, _TEXT, _STR = 0, 1, 2
_SLOTS = {"sequence_number": _SEQ, "delta": _TEXT, "obfuscation": _STR}
_SLOT_KEY = re.compile(r'"(sequence_number|delta|obfuscation)"\s*:\s*')  # keys only (a quote in a string is escaped)
_INT = re.compile(r"0|[1-9][0-9]*")


class _Shape:
    __slots__ = ("event", "consts", "kinds", "keys", "obj", "output_index", "seq_i", "text_i", "str_i", "steps")

    def __init__(self, event: str | None, consts: list[str], keys: list[str], obj: dict) -> None:
        self.event = event
        self.consts = consts          # len(keys) + 1 strings around the slots
        self.keys = keys              # the slots' keys, in the order they come
        self.kinds = [_SLOTS[k] for k in keys]
        self.obj = obj                # the event it was learned from
        self.output_index = obj["output_index"]
        self.seq_i = keys.index("sequence_number")
        self.text_i = keys.index("delta")
        self.str_i = [i for i, k in enumerate(self.kinds) if k == _STR]
        self.steps = list(zip(consts, self.kinds))   # the text before each slot, and its kind

    def match(self, data: str) -> list | None:
        """The slots' values (int, decoded text, the raw literal) when `data` has this shape.
        (Read step by step: a pattern of the consts would hold the stream's ids, and compiling
        it would cost every flow.)"""
        vals: list = []
        pos = 0
        for const, kind in self.steps:
            if not data.startswith(const, pos):
                return None
            pos += len(const)
            if kind == _SEQ:
                m = _INT.match(data, pos)
                if m is None:
                    return None
                vals.append(int(m.group()))
                pos = m.end()
                continue
            if not data.startswith('"', pos):
                return None
            try:
                v, end = scanstring(data, pos + 1)
            except ValueError:
                return None
            vals.append(v if kind == _TEXT else data[pos:end])
            pos = end
        last = self.consts[-1]
        return vals if len(data) - pos == len(last) and data.endswith(last) else None

    def event_obj(self, vals: list) -> dict:
        """The event `match` read, as json.loads would give it."""
        obj = dict(self.obj)
        for key, kind, v in zip(self.keys, self.kinds, vals):
            obj[key] = json.loads(v) if kind == _STR else v
        return obj


def _learn(ev: Event, obj: dict) -> _Shape | None:
    """The shape of a fully parsed output_text.delta event, or None when it has none we use."""
    data = ev.data
    assert data is not None
    seq, text, u = obj.get("sequence_number"), obj.get("delta"), obj.get("output_index")
    if (type(seq) is not int or seq < 0 or not isinstance(text, str) or type(u) is not int
            or any(v for v in obj.values() if isinstance(v, (dict, list)))):
        return None   # only flat events (`logprobs: []`): every key the pattern finds is top level
    spans: list = []
    for m in _SLOT_KEY.finditer(data):
        key, pos = m.group(1), m.end()
        v = obj.get(key)
        if _SLOTS[key] == _SEQ:
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
    keys = [k for _, _, k in spans]
    if keys != [k for k in obj if k in _SLOTS] or "sequence_number" not in keys or "delta" not in keys:
        return None   # each slot exactly once, in the order the parsed event has its keys
    consts = [data[:spans[0][0]]]
    consts += [data[a[1]:b[0]] for a, b in zip(spans, spans[1:])]
    consts.append(data[spans[-1][1]:])
    if sum(map(len, consts)) > SHAPE_MAX:
        return None   # (its bytes would be a pattern kept for the process: see fastpath.SHAPE_MAX)
    shape = _Shape(ev.event, consts, keys, obj)
    # The probe: other values in the slots must read back as exactly those values.
    probe_vals = [seq + 1 if k == _SEQ else text + "\x01" if k == _TEXT else encode_basestring(obj[key] + "\x01")
                  for k, key in zip(shape.kinds, keys)]
    parts = [consts[0]]
    for k, v, c in zip(shape.kinds, probe_vals, consts[1:]):
        parts.append(str(v) if k == _SEQ else encode_basestring(v) if k == _TEXT else v)
        parts.append(c)
    probe = "".join(parts)
    if shape.match(probe) != probe_vals or json.loads(probe) != shape.event_obj(probe_vals):
        return None
    return shape


def _slot_values(shape: _Shape, m: re.Match, groups: list[int], text: str) -> list:
    """The slots' values of a chunk the byte shape matched, as `_Shape.match` reads them."""
    return [text if k == _TEXT else int(m[g]) if k == _SEQ else m[g].decode("ascii")
            for k, g in zip(shape.kinds, groups)]


def _template(ev: dict) -> tuple[str, ...]:
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
    return tuple(out)


class _Plan(NamedTuple):
    """What the byte path does for a message's current state (`Shortcuts._make_plan`)."""
    kind: int                      # the piece kind it expects: CONTENT or REASONING
    splitter: Splitter             # the part's
    add: Callable[..., None]       # where its text goes (the piece's or the item's text)
    fmt: bytes                     # the events it sends, as one %-format
    extra: Any                     # CONTENT: (the upstream's own bytes, the slots' kinds or None); REASONING: channels
    part: _OutputPart              # the upstream part it feeds
    cuts: Any        # the cut events `fmt` was made of (kept: `hot` caches its spec by them)


class Shortcuts:
    """StreamRewriter's shortcuts (a mixin: the state is the rewriter's)."""

    # -- events --------------------------------------------------------------------------------
    def on_chunk(self, chunk: bytes) -> list[bytes] | None:
        """The byte fast path (see thinkwire.fastpath): an output_text.delta shaped like the last.
        While the message it adds to stays as it is, a plan (`_make_plan`) answers it."""
        if self.passthrough:   # (native reasoning upstream) the rest goes as it comes, unparsed
            return [chunk] if chunk else None
        b = self._bytes
        if b is None or self._held is not None:   # (held events go first: on_event)
            return None
        m = b[0].match(chunk)
        if m is None:
            return None
        shape = self._shape
        assert shape is not None
        groups = b[0].groups
        got = slot_text(m, groups[shape.text_i], b[1], tags=True)
        plan = None if got is None else self._plan or self._make_plan(shape)
        if plan is None:   # the message must decide: on_event, unframed
            return self.on_event(b[0].event(chunk))
        kind, splitter, add, fmt, extra, part, _ = plan
        text = got[0]   # type: ignore[index]
        part.fed = True   # (what on_chunk feeds is never empty)
        g = groups[shape.text_i]
        part.came_literal((m[g] if m[g] is not None else m[g + 1]).decode())
        # The byte path sees only canonical frames: an event: line when the shape has one, LF.
        self.event_lines, self.eol = shape.event is not None, b"\n"
        piece = splitter.plain(text) if got[1] is not None else None   # type: ignore[index]
        self._hits += 1
        if piece is None:
            # The splitter decides (a tag's first character, text held): as _fast would, after
            # the parse it spares. One piece of the plan's kind goes on below.
            pieces = splitter.feed(text)
            piece = pieces[0] if len(pieces) == 1 else None
        if piece is None or piece.kind != kind or piece.kind == END:   # a block opened or closed: the message decides
            self._plan = None
            vals = _slot_values(shape, m, groups, text)
            return self._pieces(Event(chunk, shape.event, None), shape, vals, pieces if piece is None else [piece])
        value = piece.text
        add(value)
        if self._again is not None:   # (what goes out, for thinkwire.again)
            self._again[0].said(kind, value)
        seq = int(m[groups[shape.seq_i]])
        if kind == CONTENT:   # extra: (same bytes as upstream's, the slots' kinds; None: seq, text)
            n = self.seq.number(seq, True)
            if extra[0] and n == seq and value == text:
                return [chunk]    # as it came: the original bytes
            lit = encode_basestring(value).encode("utf-8", OUT)
            self.dirty = True
            kinds = extra[1]
            return [fmt % ((n, lit) if kinds is None else
                           tuple(n if k == _SEQ else lit if k == _TEXT else m[g] for k, g in zip(kinds, groups)))]
        n = self.seq.number(seq, False, extra)   # extra: how many events (channels) a reasoning delta becomes
        lit = encode_basestring(value).encode("utf-8", OUT)
        self.dirty = True
        return [fmt % ((n, lit) if extra == 1 else (n, lit, n + 1, lit))]

    def _make_plan(self, shape: _Shape) -> _Plan | None:
        """What the byte path does for the message's current state, worked out once: the piece
        kind it expects, its splitter, where its text goes, the events it sends as one format,
        the part it feeds and the cut events the format was made of. None: the state has no
        plan (on_event decides each event). Any event taken in full drops the plan. (It changes
        nothing: `hot` asks for it too.)"""
        m = self.active.get(shape.output_index)
        p = m.part if m is not None else None
        if p is None or p.splitter is None or self.seq.last is None:
            return None
        lines, eol = shape.event is not None, b"\n"   # (what on_chunk sees: canonical frames)
        cur = m.cur
        if type(cur) is _MessagePiece and cur.dpart is not None and cur.dpart.upart is p:
            dp = cur.dpart
            tpl = dp.delta_template
            if tpl is None or tpl[0] is not shape or tpl[3] != (lines, eol):
                tpl = dp.delta_template = self._delta_template(shape, cur, dp, lines, eol)
            cuts = [c.replace(b"%", b"%%") for c in tpl[1]]
            fmt = cuts[0] + b"".join((b"%d" if k == _SEQ else b"%s") + c for k, c in zip(shape.kinds, cuts[1:]))
            kinds = shape.kinds
            plan = _Plan(CONTENT, p.splitter, dp.text.add, fmt, (tpl[2], None if kinds == [_SEQ, _TEXT] else kinds),
                         p, tpl[1])
        elif type(cur) is _ReasoningItem:
            tpl = cur.delta_template
            if tpl is None or tpl[0] != (lines, eol):
                tpl = cur.delta_template = ((lines, eol), self._reason_templates(cur, lines, eol))
            frames = tpl[1]
            assert 1 <= len(frames) <= 2   # the summary channel, the content channel or both
            fmt = b"".join(b"%d".join([head.replace(b"%", b"%%"), mid.replace(b"%", b"%%")]) + b"%s"
                           + tail.replace(b"%", b"%%") for head, mid, tail in frames)
            plan = _Plan(REASONING, p.splitter, cur.text.add, fmt, len(frames), p, frames)
        else:
            return None
        self._plan = plan
        return plan

    def hot(self) -> hot.Arming | None:
        """thinkwire.hot: the arguments of `Hot.arm` while an output_text.delta shaped like the
        last, numbered and plain, changes nothing here but the text, the splitter's state and
        the numbering; None when on_chunk must decide."""
        shape = self._shape
        if self.passthrough or self._bytes is None or shape is None or self._held is not None:
            return None
        slot_pos = {(_SEQ, _TEXT): 1, (_TEXT, _SEQ): 2}.get(tuple(shape.kinds))
        plan = None if slot_pos is None else self._plan or self._make_plan(shape)
        if plan is None or plan.splitter.steady() != plan.kind or not (0 <= self.seq.offset <= hot.MAX_NUMBER
                                                                and 0 <= self.seq.last <= hot.MAX_NUMBER):
            return None   # (numbers that do not fit C's are counted on in Python)
        self._plan = plan
        # A plan is made again after every event taken in full; the cut events it holds are kept.
        cache = self._hot
        if cache is None or cache[0] is not plan.cuts or cache[1] is not self._bytes or cache[2] != plan.extra:
            cache = self._hot = (plan.cuts, self._bytes, plan.extra, self._hot_spec(shape, plan, slot_pos))
        self._armed = plan
        return hot.Arming(cache[3], self.seq.offset, self.seq.last, hot.holding(plan.splitter, plan.kind))

    def _hot_spec(self, shape: _Shape, plan: _Plan, slot_pos: int) -> hot.Spec:
        rules = plan.splitter.rules
        pre = self._bytes[0].prefix   # type: ignore[index]
        mid, post = shape.consts[1].encode("utf-8", OUT), shape.consts[2].encode("utf-8", OUT) + b"\n\n"
        q = b'"'
        if plan.kind == CONTENT:
            cuts = plan.cuts   # the delta event cut at its slots, in their order
            if slot_pos == 1:
                out = (cuts[0], hot.PART_N, cuts[1] + q, hot.PART_BODY, q + cuts[2])
            else:
                out = (cuts[0] + q, hot.PART_BODY, q + cuts[1], hot.PART_N, cuts[2])
            return hot.spec(rules, pre, post, out, slot_pos=slot_pos, mid=mid, seq_mode=hot.SEQ_OWN,
                            pass_same=plan.extra[0])
        parts: list = []
        for head, m, tail in plan.cuts:   # one event per channel, cut at its number and text
            parts += [head, hot.PART_N1 if parts else hot.PART_N, m + q, hot.PART_BODY, q + tail]
        out = tuple(parts)
        return hot.spec(rules, pre, post, out, slot_pos=slot_pos, mid=mid, seq_mode=hot.SEQ_NEW,
                        channels=plan.extra, **hot.reasoning(rules), held=())   # (whitespace alone: nothing)

    def settle(self, got: hot.Took) -> None:
        """What the C callable took since it was armed (`Hot.take`)."""
        hits, changed, offset, last = got.hits, got.changed, got.offset, got.last
        kind, splitter, add, _, _, part, _ = self._armed   # type: ignore[misc]
        part.fed = True
        self.event_lines, self.eol = self._shape.event is not None, b"\n"   # type: ignore[union-attr]
        self._hits += hits
        if changed:
            self.dirty = True
        self.seq.offset, self.seq.last = offset, last
        gave = hot.fold(splitter, kind, got, True)
        add(*gave)
        if self._again is not None:
            self._again[0].said(kind, gave[0])
        part.came_literal(hot.literal(got))   # what the deltas brought, as they came

    def _learn_bytes(self, ev: Event, shape: _Shape) -> tuple[ByteShape, Rules] | None:
        head = canonical_head(ev.raw, ev.data, ev.event, ev.eol)  # type: ignore[arg-type]
        if head is None:
            return None
        rules = self.ctx.rules(self.model)   # the rules the parts' splitters have
        text = text_slot(rules)
        consts = [c.encode("utf-8", OUT) for c in shape.consts]
        slots = [NUMBER_SLOT if k == _SEQ else text if k == _TEXT else ASCII_SLOT for k in shape.kinds]
        return ByteShape(head, ev.event, consts, slots), rules

    def _fast(self, ev: Event, shape: _Shape, vals: list) -> list[bytes] | None:
        """An output_text.delta shaped like the last one: `_dispatch` without the JSON parse.
        Its text is fed to the splitter once; one answer or reasoning piece goes out from a
        template (or as the original bytes, when nothing changes), anything else takes the
        full path with the pieces. None (before anything is fed): take the full path."""
        m = self.active.get(shape.output_index)
        p = m.part if m is not None else None
        if p is None or p.splitter is None or self.seq.last is None:
            return None
        seq, text = vals[shape.seq_i], vals[shape.text_i]
        if text:
            p.came(text)
        pieces = p.splitter.feed(text) if text else []
        self.event_lines = ev.event is not None
        self.eol = ev.eol
        p.fed = p.fed or bool(text)
        cur = m.cur   # type: ignore[union-attr]
        if len(pieces) == 1 and pieces[0].kind != END:
            kind, value = pieces[0]
            if kind == CONTENT and type(cur) is _MessagePiece and cur.dpart is not None and cur.dpart.upart is p:
                dp = cur.dpart
                dp.text.add(value)
                if self._again is not None:
                    self._again[0].said(CONTENT, value)
                n = self.seq.number(seq, own=True)
                tpl = dp.delta_template
                if tpl is None or tpl[0] is not shape or tpl[3] != (self.event_lines, self.eol):
                    tpl = dp.delta_template = self._delta_template(shape, cur, dp)
                if tpl[2] and n == seq and value == text:
                    return [ev.raw]    # as it came: the original bytes
                out = list(vals)
                out[shape.seq_i] = str(n)
                out[shape.text_i] = encode_basestring(value)
                for i in shape.str_i:   # a raw literal is its own dumps unless it has escapes
                    if "\\" in out[i]:
                        out[i] = encode_basestring(json.loads(out[i]))
                self.dirty = True
                cuts = tpl[1]
                parts = [cuts[0]]
                for v, c in zip(out, cuts[1:]):
                    parts.append(v.encode("utf-8", OUT))
                    parts.append(c)
                return [b"".join(parts)]
            if kind == REASONING and type(cur) is _ReasoningItem:
                cur.text.add(value)
                if self._again is not None:
                    self._again[0].said(REASONING, value)
                tpl = cur.delta_template
                if tpl is None or tpl[0] != (self.event_lines, self.eol):
                    tpl = cur.delta_template = ((self.event_lines, self.eol), self._reason_templates(cur))
                lit = encode_basestring(value).encode("utf-8", OUT)
                frames = []
                for head, mid, tail in tpl[1]:
                    n = self.seq.number(seq, own=False)
                    frames.append(b"%s%d%s%s%s" % (head, n, mid, lit, tail))
                self.dirty = True
                return frames
        return self._pieces(ev, shape, vals, pieces)

    def _delta_template(self, shape: _Shape, seg: _MessagePiece, dp: _OutputPart,
                        lines: bool | None = None, eol: bytes | None = None) -> tuple:
        """(shape, the delta event cut where the slots' values go, whether it is the upstream's,
        its framing). Framed as this stream's events are so far, or with `lines` and `eol`."""
        lines = self.event_lines if lines is None else lines
        eol = self.eol if eol is None else eol
        ev = dict(shape.obj, output_index=seg.output_index, content_index=dp.content_index)
        if seg.id is not None and "item_id" in ev:
            ev["item_id"] = seg.id
        # What _frame gives for _template(ev) filled with values, cut where the values go.
        cuts = [x.encode("utf-8", OUT) for x in _template(ev)]
        head, tail = self._frame("response.output_text.delta", "\0", lines, eol).split(b"\0")
        cuts[0], cuts[-1] = head + cuts[0], cuts[-1] + tail
        return shape, cuts, ev == shape.obj, (lines, eol)

    def _reason_templates(self, r: _ReasoningItem, lines: bool | None = None, eol: bytes | None = None) -> tuple:
        """The events `_reason_delta` sends for a piece of text, as framed bytes cut where the
        sequence number and the text literal go (framed as in `_delta_template`)."""
        evs = [_ev(f"{ch.text_event}.delta", item_id=r.id, output_index=r.output_index, **{ch.index: 0}, delta="")
               for ch in self.mode.channels]
        cuts = []
        for e in evs:
            pre, mid, post = (x.encode("utf-8", OUT) for x in _template(e))
            head, tail = self._frame(e["type"], "\0", lines, eol).split(b"\0")
            cuts.append((head + pre, mid, post + tail))
        return tuple(cuts)
