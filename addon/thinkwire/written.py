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

The response side (reading an output's pieces into its layout, and the check of the layout
before it is kept: exact for a body, by fingerprints for a stream) is thinkwire.recorder.

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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .rules import TagPair

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


class Echoed(tuple[Block, ...]):
    """The layout of an output whose reasoning was given as the answer too (thinkwire.again:
    force_nonempty_content; a tagless answer a stream sent as reasoning first), filed under the
    texts the client got. That answer is not the model's: the model's text comes back from the
    reasoning alone (a body's gave no reasoning: from the answer, which holds it)."""

    __slots__ = ()


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
    """A layout as bytes, for a store that keeps bytes (issue 36's memory stores, a fleet's); an
    `Echoed` one as {"echoed": its rows}."""
    rows = [list(b) if b.inner else list(b[:5]) for b in layout]
    return json.dumps({"echoed": rows} if isinstance(layout, Echoed) else rows, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8", "surrogatepass")


def load(data: bytes) -> Layout | None:
    """`dump`'s bytes as a layout again; None when they are not one (a store's garbage)."""
    try:
        rows = json.loads(data.decode("utf-8", "surrogatepass"))
        echoed = isinstance(rows, dict) and list(rows) == ["echoed"]
        if echoed:
            rows = rows["echoed"]
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
    if not ok or len(blocks) > BLOCKS_MAX + EDITS_MAX or sum(len(b.inner) for b in blocks) > EDITS_MAX:
        return None
    return Echoed(blocks) if echoed else blocks


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
        if isinstance(layout, Echoed):   # (the key matched: the answer is the reasoning again)
            reasoning, answer = reasoning or answer, ""
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


__all__ = ["Block", "Echoed", "Layout", "Memory", "Recall", "dump", "key", "load", "rebuild", "recall_runs"]
