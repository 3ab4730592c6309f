"""One declared fast path: a surface says what its token delta looks like, this module runs it.

A surface declares, as data, the token delta it learned from an event parsed in full (`Delta`:
the bytes around its slots, where the text literal is, and an optional second slot, a number
to renumber or a string copied as it came) and what goes out for a plain text of each kind
(`Lane`: the event as it came, or an output template). `Delta.compile` turns the declaration
into the structures the per-chunk work uses, once per learned shape: the byte pattern
(`fastpath.ByteShape`), and for each lane both the C callable's spec (`thinkwire.hot`) and the
Python sender that gives the same bytes (`Route`). The interpreter is `FastPath`, the mixin
that gives a rewriter its `on_chunk` (the byte path), `hot` and `settle` (the C callable's):

- `on_chunk`: a chunk that is the learned event with a plain text goes to the splitter's plain
  step (`Splitter.plain`); the piece's kind picks the route of the surface's current `Plan`,
  which sends it. Everything else the surface decides (`_decide`), with what was read.
- `hot`: where the splitter is steady, the spec of the plan's lane for that kind.
- `settle`: what C took folded into the splitter (`hot.fold`), then the plan's bookkeeping.

A surface gives `_make_plan` (its state now: the splitter, a route or a spec for each kind,
what a taken text changes there) and `_decide`; the plan is kept until the surface drops it
(`_plan = None`) where its state moved. The bytes are the full path's (tests/test_fastpath.py,
tests/test_hot*.py, the differential fuzz in devtools/sanitize.py).
"""

from __future__ import annotations

import functools
import re
from typing import Callable, NamedTuple, Protocol

from . import hot
from .hot import Arming, Took as Taken
from .fastpath import NUMBER_SLOT, ByteShape, Got, literal_body, slot_text, text_slot
from .rules import Rules
from .splitter import CONTENT, REASONING, Splitter, Text

# -- the declaration ---------------------------------------------------------------------------
TEXT = b"text"       # the text literal's slot
NUMBER = b"number"   # a number slot (renumbered: `Lane.number`)


class String(NamedTuple):
    """A string slot whose literal holds only `chars` (printable ASCII, no quote or backslash:
    no escape), copied as it came (`hot.PART_STR` in a template)."""
    chars: bytes


Slot = bytes | String   # TEXT, NUMBER or a String


class Lane(NamedTuple):
    """What goes out for a plain text of one kind. `out` None: the chunk as it came; else a
    template of bytes and `hot.PART_*` codes (PART_BODY: the text literal's body; PART_STR: the
    string slot's, as it came; PART_N, PART_N1: the numbers `number` gives). `reasoning`:
    whitespace at a text's end is held as the splitter holds it where it trims, and `held` is
    what goes out for a text of whitespace alone (`hot.spec`). `exclude`: characters C may not
    take (the surface writes them otherwise than json.dumps), and `escape` what Python writes
    for them, on the literal's body; `unicode_escaped`: those of them it writes as `\\u00xx`,
    which C may take in that form (`hot.spec`)."""
    out: tuple[bytes | int, ...] | None = None
    reasoning: bool = False
    held: tuple[bytes | int, ...] | None = None
    number: int = hot.SEQ_NONE
    channels: int = 1
    pass_same: bool = False
    exclude: str = ""
    escape: Callable[[bytes], bytes] | None = None
    unicode_escaped: str = ""


class Delta(NamedTuple):
    """A token delta as the upstream sends it: `head` (the framing before the data), then
    `consts[0]`, a slot, `consts[1]` ..., the last const, and `end` (an SSE event's blank line,
    an NDJSON line's LF). One slot is TEXT; `name` is the SSE event name."""
    head: bytes
    name: str | None
    consts: tuple[bytes, ...]
    slots: tuple[Slot, ...]
    end: bytes = b"\n\n"

    def compile(self, rules: Rules) -> Shape:
        """The shape for `rules` (kept for the process, a few at a time: a server sends the
        same bytes around every delta of a stream, and Ollama's around every stream's)."""
        return _compiled(self, rules)


def _slot_pattern(slot: Slot, rules: Rules) -> bytes:
    if slot == TEXT:
        return text_slot(rules)
    if slot == NUMBER:
        return NUMBER_SLOT
    assert isinstance(slot, String)
    return b'"([' + re.escape(slot.chars) + b']*)"'


@functools.lru_cache(maxsize=64)
def _compiled(delta: Delta, rules: Rules) -> Shape:
    return Shape(delta, rules)


class _CSlots(NamedTuple):
    """Where C finds a shape's slots (`hot.spec`): the text literal alone (slot_pos 0), or with a
    second slot before it (1) or after it (2), `mid` between the two; `chars`: a string slot's."""
    slot_pos: int
    mid: bytes
    chars: bytes | None


SPECS_MAX = 32   # C specs a shape keeps (one per lane a plan was made for; twice PLANS_MAX)


class Shape:
    """A `Delta` compiled for `rules`: its byte pattern (`match`, `event`), the groups of its
    slots, and, where C can take it (a text slot and at most one other), where C finds them."""

    __slots__ = ("delta", "rules", "bytes", "match", "event", "text", "number", "string", "c", "_specs")

    def __init__(self, delta: Delta, rules: Rules) -> None:
        self.delta, self.rules = delta, rules
        b = self.bytes = ByteShape(delta.head, delta.name, list(delta.consts),
                                   [_slot_pattern(s, rules) for s in delta.slots], end=delta.end)
        self.match, self.event = b.match, b.event
        groups = dict(zip(delta.slots, b.groups))
        self.text = groups[TEXT]
        self.number = groups.get(NUMBER)
        strings = [g for s, g in groups.items() if isinstance(s, String)]
        self.string = strings[0] if strings else None
        # C: pre, the text literal (with a second slot before it, slot_pos 1, or after it, 2,
        # `mid` between the two), post.
        self.c: _CSlots | None = None
        slots = delta.slots
        if len(slots) == 1:
            self.c = _CSlots(0, b"", None)
        elif len(slots) == 2 and TEXT in slots:
            other = slots[1 - slots.index(TEXT)]
            self.c = _CSlots(1 if slots[1] == TEXT else 2, delta.consts[1],
                             other.chars if isinstance(other, String) else None)
        self._specs: dict[Lane, hot.Spec | None] = {}

    def spec(self, lane: Lane) -> hot.Spec | None:
        """C's spec for `lane` (kept: made once per shape and lane), or None where C cannot
        take this shape."""
        if lane in self._specs:
            return self._specs[lane]
        if len(self._specs) >= SPECS_MAX:   # (a Responses lane names its item: one per item a stream opens)
            self._specs.clear()
        c, d, rules = self.c, self.delta, self.rules
        spec = None
        if c is not None:   # (reasoning: trailing whitespace held where the splitter trims, as it holds it)
            spec = hot.spec(rules, d.head + d.consts[0], d.consts[-1] + d.end, lane.out,
                            seq_mode=lane.number, channels=lane.channels, pass_same=lane.pass_same,
                            exclude=lane.exclude, slot_pos=c.slot_pos, mid=c.mid, chars=c.chars,
                            trim=lane.reasoning and rules.trim, held=lane.held if lane.reasoning else None,
                            unicode_escaped=lane.unicode_escaped)
        self._specs[lane] = spec
        return spec

    def route(self, lane: Lane, took: Said | None = None, seq: Numbering | None = None,
              note: Callable[[str], object] | None = None) -> Route:
        """The Python sender for `lane`: `route(chunk, m, text, got)` for a chunk `match` took,
        whose text `got` (slot_text) the splitter gave as `text`. `took(text, got)`: the
        surface's bookkeeping, first; it gives the text to send (str), or its literal's body
        (bytes). `note(text)`, in place of `took`: bookkeeping that sends the text as the splitter
        gave it (one call less per chunk). `seq`: the numbering, for a lane that numbers.
        A lane that sends the chunk as it came, with neither, is `as_it_came`."""
        return _route(self, lane, took, seq, note)


class Numbering(Protocol):
    """The numbering a numbered lane follows (Responses' `sequence_number`)."""
    offset: int
    last: int | None

    def number(self, seq: int, own: bool, count: int = 1) -> int: ...


Said = Callable[[str, Got], "str | bytes"]
Route = Callable[[bytes, "re.Match[bytes]", str, Got], list[bytes]]


def _fill(out: tuple[bytes | int, ...]) -> Callable[[bytes, bytes | None, int], bytes]:
    """A template as one %-format: fill(body, string, n)."""
    fmt = b"".join(p.replace(b"%", b"%%") if isinstance(p, bytes) else
                   b"%d" if p in (hot.PART_N, hot.PART_N1) else b"%s" for p in out)
    codes = tuple(p for p in out if isinstance(p, int))
    B, S, N, N1 = hot.PART_BODY, hot.PART_STR, hot.PART_N, hot.PART_N1
    if codes == (B,):
        return lambda body, s, n: fmt % (body,)
    if codes == (B, B):
        return lambda body, s, n: fmt % (body, body)
    if codes == (S, B):
        return lambda body, s, n: fmt % (s, body)
    if codes == (N, B):
        return lambda body, s, n: fmt % (n, body)
    if codes == (B, N):
        return lambda body, s, n: fmt % (body, n)
    if codes == (N, B, N1, B):
        return lambda body, s, n: fmt % (n, body, n + 1, body)

    def fill(body: bytes, s: bytes | None, n: int) -> bytes:
        return fmt % tuple(body if c == B else s if c == S else n if c == N else n + 1 for c in codes)
    return fill


def as_it_came(chunk: bytes, m: re.Match[bytes], text: str, got: Got) -> list[bytes]:
    """The route of a lane whose chunk goes as it came, with no bookkeeping (`on_chunk` sends
    the chunk without calling it)."""
    return [chunk]


def _one_body(out: tuple[bytes | int, ...]) -> bytes | None:
    """A template whose one slot is the text's body, as a %-format; else None."""
    if tuple(p for p in out if isinstance(p, int)) != (hot.PART_BODY,):
        return None
    return b"".join(p.replace(b"%", b"%%") if isinstance(p, bytes) else b"%s" for p in out)


def _route(shape: Shape, lane: Lane, took: Said | None, seq: Numbering | None,
           note: Callable[[str], object] | None = None) -> Route:
    out, escape = lane.out, lane.escape
    if note is not None:
        assert took is None
        fmt = _one_body(out) if out is not None and lane.number == hot.SEQ_NONE and escape is None \
            and shape.string is None else None
        if out is None and lane.number == hot.SEQ_NONE:
            def same_noted(chunk: bytes, m: re.Match[bytes], text: str, got: Got) -> list[bytes]:
                note(text)
                return [chunk]
            return same_noted
        if fmt is not None:
            def send_noted(chunk: bytes, m: re.Match[bytes], text: str, got: Got) -> list[bytes]:
                note(text)
                return [fmt % (literal_body(text, got),)]
            return send_noted

        def noted(text: str, got: Got) -> str:   # (any other lane: as a took)
            note(text)
            return text
        took = noted
    if out is None and lane.number == hot.SEQ_NONE:
        if took is None:
            return as_it_came

        def same(chunk: bytes, m: re.Match[bytes], text: str, got: Got) -> list[bytes]:
            took(text, got)
            return [chunk]
        return same
    assert out is not None
    fill, sg = _fill(out), shape.string

    def body_of(text: str, got: Got) -> bytes:
        t = took(text, got) if took is not None else text
        body = t if isinstance(t, bytes) else literal_body(t, got)
        return escape(body) if escape is not None else body

    if lane.number == hot.SEQ_NONE:
        if sg is None and escape is None:
            if took is None:
                return lambda chunk, m, text, got: [fill(literal_body(text, got), None, 0)]

            one = _one_body(out)
            if one is not None:
                def send_one(chunk: bytes, m: re.Match[bytes], text: str, got: Got) -> list[bytes]:
                    t = took(text, got)
                    return [one % (t if isinstance(t, bytes) else literal_body(t, got),)]
                return send_one

            def send(chunk: bytes, m: re.Match[bytes], text: str, got: Got) -> list[bytes]:
                t = took(text, got)
                return [fill(t if isinstance(t, bytes) else literal_body(t, got), None, 0)]
            return send

        def send_str(chunk: bytes, m: re.Match[bytes], text: str, got: Got) -> list[bytes]:
            return [fill(body_of(text, got), m[sg] if sg is not None else None, 0)]
        return send_str
    assert seq is not None and shape.number is not None
    ng, own, count, pass_same = shape.number, lane.number == hot.SEQ_OWN, lane.channels, lane.pass_same

    def numbered(chunk: bytes, m: re.Match[bytes], text: str, got: Got) -> list[bytes]:
        came = int(m[ng])
        t = took(text, got) if took is not None else text
        n = seq.number(came, own, count)
        if pass_same and n == came and t == got[0]:
            return [chunk]   # as it came: the original bytes
        body = t if isinstance(t, bytes) else literal_body(t, got)
        return [fill(escape(body) if escape is not None else body, m[sg] if sg is not None else None, n)]
    return numbered


# -- the interpreter -----------------------------------------------------------------------------
PLANS_MAX = 16   # plans a rewriter keeps (one per state it was in, while its shape stays)


class Plan(NamedTuple):
    """What the fast path does in the surface's state now (`FastPath._make_plan`): the splitter
    the texts go to; for each kind (CONTENT, REASONING) the Python route and C's spec, or None
    (the surface decides); `settled(kind, got, text, literal)` folds in what C took (`text`: what
    the splitter gave for it; `literal`, for the kinds in `literal`: its JSON literal's body)."""
    splitter: Splitter
    answer: Route | None
    reasoning: Route | None
    answer_spec: hot.Spec | None
    reasoning_spec: hot.Spec | None
    settled: Callable[[int, Taken, str, str | None], None]
    literal: tuple[int, ...] = ()   # the kinds whose literal `settled` takes
    numbering: Numbering | None = None
    # What the surface keeps of each chunk the shape took with a text, first (before the splitter
    # reads it): it may raise, and then nothing was fed (Responses: the literal it holds, capped).
    came: Callable[[re.Match[bytes]], None] | None = None


class FastPath:
    """The byte path and the C callable's hooks (see the module docstring), for a rewriter whose
    `_shape` is the compiled shape of the last delta parsed in full (or None)."""

    fast: bool
    _shape_c: Shape | None   # (each surface sets it where it learns)
    _plan: Plan | None
    _armed: tuple[Plan, int] | None

    def _make_plan(self) -> Plan | None:   # pragma: no cover - each surface's
        raise NotImplementedError

    def _decide(self, chunk: bytes, m: re.Match[bytes], got: Got | None,
                piece: Text | None) -> list[bytes] | None:   # pragma: no cover
        """A chunk the shape took that no route sends: the text undecodable or empty (`got`
        None), not plain (got[1] None: the splitter decides), or `piece`, the plain step's,
        that the plan has no route for. The output, or None for the full path (only where
        nothing was fed)."""
        raise NotImplementedError

    def _unshaped(self, chunk: bytes) -> list[bytes] | None:
        """A chunk while no shape is learned (a surface passing everything: the chunk)."""
        return None

    def _unplanned(self, chunk: bytes, shape: Shape) -> list[bytes] | None:
        """A chunk the shape took while the state has no plan: None, the full path's."""
        return None

    def on_chunk(self, chunk: bytes) -> list[bytes] | None:
        shape = self._shape_c
        if shape is None:
            return self._unshaped(chunk)
        m = shape.match(chunk)
        if m is None:
            return None
        plan = self._plan or self._make_plan()
        if plan is None:
            return self._unplanned(chunk, shape)
        got = slot_text(m, shape.text, plan.splitter.rules, tags=True)
        piece = None
        if got is not None and plan.came is not None:
            plan.came(m)
        if got is not None and got[1] is not None:
            piece = plan.splitter.plain(got[0])
            if piece is not None:
                route = plan.answer if piece[0] == CONTENT else plan.reasoning
                if route is as_it_came:
                    return [chunk]
                if route is not None:
                    return route(chunk, m, piece[1], got)
        self._plan = None
        return self._decide(chunk, m, got, piece)

    def hot(self) -> Arming | None:
        """thinkwire.hot: what `Hot.arm` takes while a delta shaped like the last changes nothing
        here but what the plan's bookkeeping folds in; None when on_chunk must decide."""
        if self._shape_c is None:
            return None
        plan = self._plan or self._make_plan()
        if plan is None:
            return None
        kind = plan.splitter.steady()
        spec = plan.answer_spec if kind == CONTENT else plan.reasoning_spec if kind == REASONING else None
        if spec is None:
            return None
        seq = plan.numbering
        assert kind is not None   # (a spec only for a steady kind)
        self._plan, self._armed = plan, (plan, kind)
        held = hot.holding(plan.splitter, kind)
        if seq is None:
            return Arming(spec, held=held)
        last = seq.last
        if last is None or not (0 <= seq.offset <= hot.MAX_NUMBER and 0 <= last <= hot.MAX_NUMBER):
            return None   # (numbers that do not fit C's are counted on in Python)
        return Arming(spec, seq.offset, last, held)

    def settle(self, got: Taken) -> None:
        """What the C callable took since it was armed (`Hot.take`)."""
        armed = self._armed
        assert armed is not None
        plan, kind = armed
        seq = plan.numbering
        if seq is not None:
            seq.offset, seq.last = got.offset, got.last
        text, lit = hot.fold(plan.splitter, kind, got, kind in plan.literal)
        plan.settled(kind, got, text, lit)
