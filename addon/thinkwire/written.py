"""What the model wrote around its reasoning, remembered for the way back where no mark carries it.

A mark (a Messages signature, a Responses `encrypted_content`) holds the markup the model wrote
around a block, whitespace and all. Chat `reasoning_content`, Ollama `thinking`, Messages blocks
without a signature and Responses items without `encrypted_content` come back with no mark, and
the trim took that whitespace: the way back would write `<think>text</think>answer` where the
model wrote `<think>\\nplan\\n</think>\\n\\nHello`, and a server's prefix cache re-reads the whole
conversation after it on every turn. So the proxy remembers, for each output it split:

- its **layout**: for each block, where it stood in the answer, how long its text is, and the
  markup written on each side (the splitter's END piece: a TagPair, or a `rules.Written` with the
  line breaks put after it). Only markup and numbers: the texts come back from the client;
- under a **key** that the client's echoed turn gives again: a hash of the client (its credential,
  `addon.client_key`), of the reasoning as the client will send it (the blocks that have text,
  joined with a blank line, as chat and Ollama join them) and of the answer;
- and, per client, upstream and model, the markup of the **last block seen**: the best guess for
  a turn whose layout is not remembered (a restart, another replica, an evicted entry).

The store is `Memory`, in-process, bounded in entries, bytes and age (docs/budget.md). When the
reasoning memory's store is a file or a Redis (`think_memory_store`), layouts go there too
(`Memory.shared`, thinkwire.memory.layouts), as `dump` gives them, under keys of the client's
credential: a restarted proxy or another replica restores a turn it did not split as written.
The way back asks it once per request, for the turns the in-process store misses (`Recall.wanted`,
then `Recall.fetch`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .rules import Rules, TagPair, Written
from .splitter import CONTENT, END, REASONING, Piece, Splitter, Text

if TYPE_CHECKING:
    from .memory.layouts import Shared

JOIN = "\n\n"                # between blocks of one output, as chat and Ollama send them
ENTRIES = 4096               # layouts kept (least recently used goes first)
BYTES = 8 << 20              # bytes of markup kept in all, about
LIFETIME = 24 * 3600         # seconds a layout is kept
BLOCKS_MAX = 64              # blocks of one output: an output with more is not remembered
LAYOUT_MAX = 16 << 10        # characters of markup of one output: past it, not remembered
EDITS_MAX = 256              # markup dropped where no block's edge holds it, a line break put in: past it, not remembered
FETCH_MAX = 64               # turns of one request asked of a shared store (the newest), in one call
_ENTRY_COST = 200            # bytes an entry costs besides its markup (key, tuples, the dict slot)


class Block(NamedTuple):
    at: int       # characters of answer before the block
    length: int   # characters of its text
    open: str     # what the model wrote before the text (trimmed whitespace, the tag, ...)
    close: str    # ... and after it
    added: int    # line breaks thinkwire put in the answer after it (taken out again)
    # Inside its text: (offset, markup dropped there, line breaks put in there): an opening tag
    # written again after some reasoning (the splitter's `_dropped`).
    inner: tuple[tuple[int, str, int], ...] = ()

# Markup dropped from the middle of the answer (a stray closing tag, an answer wrapper's closing
# tag, the whitespace they took), and the line breaks put in for it, are blocks of no text: `at`,
# length 0, the markup as `open`, `close` "", `added`.


Layout = tuple[Block, ...]
Scope = tuple[str | None, str | None, str | None]   # client, upstream, model


def key(client: str | None, reasoning: str, answer: str) -> bytes:
    """What a layout is filed under: the client and the texts it sends back."""
    return _key(client, _digest(reasoning), _digest(answer))


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _key(client: str | None, reasoning: bytes, answer: bytes) -> bytes:
    c = (client or "").encode("utf-8", "surrogateescape")
    return hashlib.sha256(b"thinkwire written\0" + c + b"\0" + reasoning + answer).digest()


def dump(layout: Layout) -> bytes:
    """A layout as bytes, for a store that keeps bytes (issue 36's memory stores, a fleet's)."""
    return json.dumps([list(b) if b.inner else list(b[:5]) for b in layout], ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8", "surrogatepass")


def load(data: bytes) -> Layout | None:
    """`dump`'s bytes as a layout again; None when they are not one (a store's garbage)."""
    try:
        rows = json.loads(data.decode("utf-8", "surrogatepass"))
        if not isinstance(rows, list) or not rows:
            return None
        blocks = tuple(b._replace(inner=tuple((e[0], e[1], e[2]) for e in b.inner if len(e) == 3))
                       for b in (Block(*row) for row in rows))
        if any(len(b.inner) != len(row[5]) for b, row in zip(blocks, rows) if len(row) > 5):
            return None
    except (ValueError, TypeError, LookupError):
        return None
    ok = all(type(b.at) is int and type(b.length) is int and type(b.added) is int and min(b.at, b.length, b.added) >= 0
             and isinstance(b.open, str) and isinstance(b.close, str)
             and all(len(e) == 3 and type(e[0]) is int and isinstance(e[1], str) and type(e[2]) is int
                     and min(e[0], e[2]) >= 0 for e in b.inner) for b in blocks)
    return blocks if ok and len(blocks) <= BLOCKS_MAX + EDITS_MAX and sum(len(b.inner) for b in blocks) <= EDITS_MAX \
        else None


def _cost(layout: Layout) -> int:
    return _ENTRY_COST + sum(len(b.open) + len(b.close) + 40 + sum(len(e[1]) + 40 for e in b.inner) for b in layout)


class Memory:
    """Layouts by key, and the last block's markup by (client, upstream, model), both bounded:
    at most `entries` of each, `max_bytes` of markup in all, each kept `lifetime` seconds."""

    def __init__(self, entries: int = ENTRIES, max_bytes: int = BYTES, lifetime: float = LIFETIME,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.entries, self.max_bytes, self.lifetime, self._clock = entries, max_bytes, lifetime, clock
        self._layouts: OrderedDict[bytes, tuple[float, Layout, int]] = OrderedDict()
        self._last: OrderedDict[Scope, tuple[float, TagPair]] = OrderedDict()
        self.size = 0   # bytes the layouts cost (_cost)
        self.shared: Shared | None = None   # the memory's file or Redis, when it has one

    def remember(self, k: bytes, layout: Layout) -> None:
        cost = _cost(layout)
        if cost > self.max_bytes:
            return
        self.forget(k)
        self._layouts[k] = (self._clock(), layout, cost)
        self.size += cost
        while len(self._layouts) > self.entries or self.size > self.max_bytes:
            self.forget(next(iter(self._layouts)))

    def recall(self, k: bytes) -> Layout | None:
        got = self._layouts.get(k)
        if got is None:
            return None
        if self._clock() - got[0] > self.lifetime:
            self.forget(k)
            return None
        self._layouts.move_to_end(k)
        return got[1]

    def forget(self, k: bytes) -> None:
        got = self._layouts.pop(k, None)
        if got is not None:
            self.size -= got[2]

    def note_last(self, scope: Scope, pair: TagPair) -> None:
        if len(pair.open) + len(pair.close) > LAYOUT_MAX:
            return
        self._last.pop(scope, None)
        self._last[scope] = (self._clock(), TagPair(pair.open, pair.close))
        while len(self._last) > self.entries:
            self._last.popitem(last=False)

    def last(self, scope: Scope) -> TagPair | None:
        got = self._last.get(scope)
        if got is None or self._clock() - got[0] > self.lifetime:
            return None
        return got[1]

    def __len__(self) -> int:
        return len(self._layouts)


# -- the response side: what one output's split wrote ------------------------------------------
class Transcript:
    """One output's pieces as they go to the client, folded into what `Memory` keeps: the
    reasoning and answer hashed (as the client will send them back), and the layout."""

    __slots__ = ("_r", "_a", "_alen", "_rlen", "_block", "_had", "blocks", "_markup", "over", "recorded",
                 "_edits", "_inner", "_added")

    def __init__(self) -> None:
        self._r, self._a = hashlib.sha256(), hashlib.sha256()
        self._alen = self._rlen = self._block = 0
        self._had = False          # a block with text went before (the next is joined with JOIN)
        self.blocks: list[Block] = []
        self._markup = 0
        self.over = False          # too many blocks or too much markup: not remembered
        self.recorded = False      # `record` took it (once)
        self._edits: list[tuple[int, Block]] = []   # (blocks before it, a block of no text), in order
        self._inner: dict[int, list[tuple[int, str, int]]] = {}   # block index -> edits in its text
        self._added = 0            # line breaks put in, in all (for `length`)

    def dropped(self, reasoning: bool, after: int, at: int, markup: str, added: int) -> None:
        """The splitter dropped `markup` and put in `added` line breaks: in block `after`'s text at
        offset `at` (`reasoning`), else in the answer at `at`, after `after` blocks."""
        self._markup += len(markup)
        self._added += added
        n = len(self._edits) + sum(len(v) for v in self._inner.values())
        if n >= EDITS_MAX or self._markup > LAYOUT_MAX:
            self.over = True
        elif reasoning:
            self._inner.setdefault(after, []).append((at, markup, added))
        else:
            self._edits.append((after, Block(at, 0, markup, "", added)))

    def layout(self) -> Layout:
        """The blocks, with the edits in their texts and the answer's among them."""
        blocks = [b._replace(inner=tuple(self._inner[i])) if i in self._inner else b for i, b in enumerate(self.blocks)]
        out: list[Block] = []
        k = 0
        for after, b in self._edits:
            out += blocks[k:after]
            k = max(k, after)
            out.append(b)
        return tuple(out + blocks[k:])

    def length(self) -> int:
        """The characters the layout gives back (the texts, the markup, less what was put in)."""
        markup = sum(len(b.open) + len(b.close) for b in self.blocks) + \
            sum(len(b.open) for _, b in self._edits) + sum(len(e[1]) for v in self._inner.values() for e in v)
        return self._alen + self._rlen + markup - self._added - sum(b.added for b in self.blocks)

    def note(self, pieces: Sequence[Piece]) -> None:
        for p in pieces:
            if p.kind == CONTENT:
                self._a.update(p.text.encode("utf-8", "surrogatepass"))
                self._alen += len(p.text)
            elif p.kind == REASONING:
                if not self._block and self._had:
                    self._r.update(JOIN.encode())
                self._r.update(p.text.encode("utf-8", "surrogatepass"))
                self._block += len(p.text)
                self._rlen += len(p.text)
            elif p.kind == END:
                self._end(p.pair)

    def _end(self, pair: TagPair) -> None:
        if self._block:
            self._had = True
        added = pair.added if isinstance(pair, Written) else 0
        self._markup += len(pair.open) + len(pair.close)
        if len(self.blocks) >= BLOCKS_MAX or self._markup > LAYOUT_MAX:
            self.over = True
        elif not self.over:
            self.blocks.append(Block(self._alen, self._block, pair.open, pair.close, added))
        self._block = 0

    def key(self, client: str | None) -> bytes:
        return _key(client, self._r.digest(), self._a.digest())

    def shared_key(self, binding: bytes) -> str:
        from .memory.layouts import _key as shared
        return shared(b"layout", binding, self._r.digest(), self._a.digest())


def _step(a: int, b: int, e: int, piece: Piece) -> tuple[int, int, int]:
    """(answer characters, block text since the last END, ENDs) after one more piece."""
    if piece.kind == CONTENT:
        return a + len(piece.text), b, e
    if piece.kind == REASONING:
        return a, b + len(piece.text), e
    return a, 0, e + 1


class RecordingSplitter(Splitter):
    """A Splitter whose pieces a Transcript reads: every piece leaves through `feed`, `plain`
    (the byte path's, and `took`'s for what C took) or `finish`. A prefill's (`resume`) is the
    client's own and is not read."""

    __slots__ = ("transcript", "_quiet", "finished", "fed", "_out", "_upto", "_acc", "_kept", "_kept_n", "_lead")

    def __init__(self, rules: Rules, starts_inside: bool | None = None) -> None:
        super().__init__(rules, starts_inside)
        self.transcript = Transcript()
        self._quiet = False
        self.finished = False   # its output is over: its transcript is whole
        self.fed = 0            # characters of the model's output read (not a prefill's)
        self._out: list[Any] | None = None   # the pieces list being filled, read up to _upto (_acc)
        self._upto = 0
        self._acc = (0, 0, 0)   # in _out[:_upto]: answer characters, block text since the last END, ENDs
        self._lead = self.inside   # started inside a block (its opening tag may be the prompt's)
        self._kept: list[Any] | None = None  # the answer texts the splitter holds to send, read up to _kept_n
        self._kept_n = (0, 0)

    def _dropped(self, out: list[Any], reasoning: bool, markup: str, added: int = 0, gap: int = 0,
                 kept: list[Any] | None = None) -> None:
        """Where the splitter drops markup no END carries: its place, as if `out` were read (each
        list read once: linear in the pieces)."""
        t = self.transcript
        if t.over:
            return
        if gap < 0:
            t.over = True   # (a place the splitter cannot say: not remembered)
            return
        if out is not self._out:
            self._out, self._upto, self._acc = out, 0, (0, 0, 0)
        a, b, e = self._acc
        for piece in out[self._upto:len(out) - 1]:   # (the last piece may still grow)
            a, b, e = _step(a, b, e, piece)
        self._upto = max(self._upto, len(out) - 1)
        self._acc = (a, b, e)
        if out:
            a, b, e = _step(a, b, e, out[-1])
        if reasoning:
            t.dropped(True, len(t.blocks) + e, t._block + b if e == 0 else b, markup, added)
            return
        if kept is not self._kept or len(kept or ()) < self._kept_n[0]:
            self._kept, self._kept_n = kept, (0, 0)
        n, chars = self._kept_n
        for p in (kept or ())[n:]:
            chars += len(p) if isinstance(p, str) else len(p.text)
        self._kept_n = (len(kept or ()), chars)
        t.dropped(False, self.blocks, t._alen + a + gap + chars, markup, added)

    def feed(self, text: str) -> list[Any]:
        out = super().feed(text)
        if not self._quiet:
            self.fed += len(text)
            if out:
                self.transcript.note(out)
        return out

    def plain(self, text: str) -> Text | None:
        piece = super().plain(text)
        if piece is not None:
            self.fed += len(text)
            self.transcript.note((piece,))
        return piece

    def finish(self, cut_off: bool = False) -> list[Any]:
        out = super().finish(cut_off)
        if out:
            self.transcript.note(out)
        self.finished = True
        t = self.transcript
        # A check of the whole: the layout gives back as many characters as the model wrote (a
        # template's opening tag, which the prompt holds, besides); else it is not remembered.
        extra = t.length() - self.fed
        if extra != 0 and not (self._lead and t.blocks and 0 < extra <= len(t.blocks[0].open)):
            t.over = True
        return out

    def resume(self, text: str) -> None:
        self._quiet = True
        try:
            super().resume(text)
        finally:
            self._quiet = False
        self._lead = True   # (a prefill's markup is in the layout, not in what the model wrote)


def checked(sp: RecordingSplitter, text: str, reasoning: str, answer: str) -> Transcript:
    """A whole body's transcript, its layout checked against the text the model wrote: one that
    does not give it back (a template's opening tag besides) is not remembered."""
    t = sp.transcript
    if not t.over and (t.blocks or t._edits):
        got = rebuild(t.layout(), reasoning, answer)
        lead = len(t.blocks[0].open) if sp._lead and t.blocks else 0
        if got is None or not got.endswith(text) or len(got) - len(text) > lead:
            t.over = True
    return t


def record(memory: Memory, transcript: Transcript, client: str | None, scope: Scope,
           binding: bytes = b"") -> list[tuple[str, bytes]]:
    """After an output: its layout remembered (when it had a block), and its markup as the guess
    for `scope` (client, upstream, model). What to write to the shared store, when there is one
    (keyed by `binding`, the client's credential hash: the same on every replica)."""
    if transcript.recorded:
        return []
    transcript.recorded = True
    if not transcript.blocks and not transcript.over:
        return []
    from .memory.layouts import dump_pair, last_key
    puts: list[tuple[str, bytes]] = []
    # The guess for later turns: the first block the model closed (a block cut off at the
    # token limit has no closing tag to guess from).
    closed = next((b for b in transcript.blocks if b.close), None)
    if closed is not None:
        pair = TagPair(closed.open, closed.close)
        memory.note_last(scope, pair)
        if memory.shared is not None and len(pair.open) + len(pair.close) <= LAYOUT_MAX:
            puts.append((last_key(binding, scope[1], scope[2]), dump_pair(pair)))
    if not transcript.over:
        layout = transcript.layout()
        memory.remember(transcript.key(client), layout)
        if memory.shared is not None and _cost(layout) <= memory.max_bytes:
            puts.append((transcript.shared_key(binding), dump(layout)))
    return puts


# -- the way back -------------------------------------------------------------------------------
def rebuild(layout: Layout, reasoning: str, answer: str) -> str | None:
    """The output as the model wrote it, from the texts the client sent and their layout; None
    when they do not fit it (the key matched, so they do: a guard)."""
    out: list[str] = []
    a = r = 0
    had = False
    for b in layout:
        if b.at < a or b.at > len(answer):
            return None
        out.append(answer[a:b.at])
        a = b.at
        if b.length:
            if had:
                if reasoning[r:r + len(JOIN)] != JOIN:
                    return None
                r += len(JOIN)
            had = True
        text = reasoning[r:r + b.length]
        if len(text) != b.length:
            return None
        r += b.length
        if b.inner:
            got = _inner(text, b.inner)
            if got is None:
                return None
            text = got
        out.append(b.open + text + b.close)
        if b.added:
            if answer[a:a + b.added] != "\n" * b.added:
                return None
            a += b.added
    if r != len(reasoning):
        return None
    out.append(answer[a:])
    return "".join(out)


def _inner(text: str, edits: tuple[tuple[int, str, int], ...]) -> str | None:
    """A block's text as the model wrote it: each edit's markup back at its offset, the line
    breaks put in there taken out."""
    out: list[str] = []
    k = 0
    for at, markup, added in edits:
        if at < k or text[at:at + added] != "\n" * added or at + added > len(text):
            return None
        out += [text[k:at], markup]
        k = at + added
    out.append(text[k:])
    return "".join(out)


class Recall:
    """A request's way back, asking one Memory for one client (never another's). With a shared
    store: what the in-process store misses is noted (`wanted`) until `fetch` has asked the
    store for it; from then on the store's answers count too."""

    def __init__(self, memory: Memory | None, client: str | None, scope: Scope, binding: bytes = b"") -> None:
        self.memory, self.client, self.scope, self.binding = memory, client, scope, binding
        self.hits = self.misses = 0
        self.wanted: dict[str, None] = {}            # shared keys missed here, in order
        self._last_key: str | None = None            # ... of them, the guess's
        self.fetched: dict[str, bytes | None] | None = None

    @property
    def shared(self) -> Shared | None:
        return self.memory.shared if self.memory is not None else None

    def written(self, reasoning: str, answer: str) -> str | None:
        """The output as the model wrote it, when this client's turn with these texts was seen."""
        if self.memory is None:
            return None
        k = key(self.client, reasoning, answer)
        layout = self.memory.recall(k)
        if layout is None and self.shared is not None:
            from .memory.layouts import layout_key
            sk = layout_key(self.binding, reasoning, answer)
            if self.fetched is None:
                self.wanted[sk] = None
            else:
                raw = self.fetched.get(sk)
                layout = load(raw) if raw is not None else None
                if layout is not None and _layout_max(layout):
                    self.memory.remember(k, layout)   # kept here too: the next turn asks no store
                else:
                    layout = None
        got = None if layout is None else rebuild(layout, reasoning, answer)
        if got is None:
            self.misses += 1
        else:
            self.hits += 1
        return got

    def guess(self, default: TagPair) -> TagPair:
        """The markup this model at this upstream was last seen writing for this client, else
        `default` (the profile's pair, as the way back always wrote it)."""
        got = self.memory.last(self.scope) if self.memory is not None else None
        if got is None and self.shared is not None:
            from .memory.layouts import last_key, load_pair
            sk = last_key(self.binding, self.scope[1], self.scope[2])
            if self.fetched is None:
                self.wanted[sk] = None
                self._last_key = sk
            else:
                got = load_pair(self.fetched.get(sk))
        return default if got is None else got

    async def fetch(self) -> None:
        """Ask the shared store, in one call, for all it was `wanted` for (a store that fails:
        nothing, the misses stay misses)."""
        last = self._last_key
        keys = [k for k in self.wanted if k != last]
        # The newest turns (as the reasoning memory looks up), and the guess when it was asked for.
        keys = keys[len(keys) - FETCH_MAX + 1:] + [last] if last in self.wanted else keys[-FETCH_MAX:]
        got = await self.shared.get_many(keys) if self.shared is not None and keys else []
        self.fetched = dict(zip(keys, got))
        self.wanted.clear()
        self.hits = self.misses = 0


def _layout_max(layout: Layout) -> bool:
    """A layout from a store within what one output may hold (a store is not trusted)."""
    return sum(len(b.open) + len(b.close) for b in layout) <= LAYOUT_MAX


def recall_runs(seq: list[Any], unmarked: Callable[[object], bool], recalled: Callable[[list[Any]], Any],
                reasoning: Callable[[dict[str, Any]], bool]) -> tuple[list[Any], int]:
    """The way back's use of remembered layouts, for a surface whose rewrite turned one upstream
    text into a run of parts (Messages blocks, Responses items): each run of `unmarked` parts
    that `recalled` rebuilds (else None) goes back as that one part. Also how many reasoning
    parts went (at least one a run)."""
    out: list[Any] = []
    run: list[Any] = []
    n = 0

    def flush() -> None:
        nonlocal n
        if run:
            got = recalled(run)
            if got is None:
                out.extend(run)
            else:
                out.append(got)
                n += max(1, sum(reasoning(p) for p in run))
            run.clear()

    for part in seq:
        if unmarked(part):
            run.append(part)
        else:
            flush()
            out.append(part)
    flush()
    return out, n
