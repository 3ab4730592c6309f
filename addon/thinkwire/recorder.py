"""The response side of thinkwire.written: what one output's split wrote, as its pieces go to
the client, folded into the layout `Memory` keeps, and checked before it is kept.

A `RecordingSplitter` reads every piece its split gives (and, through the splitter's `_dropped`
hook, the markup dropped where no END piece holds it) into a `Transcript`: the reasoning and
answer hashed as the client will send them back, and the layout. At the output's end the layout
is checked: a body's by rebuilding the body's text (`checked`), a stream's, whose text is not
kept, by fingerprints (thinkwire.fingerprint) of what the model wrote and of what the layout
gives back from the texts that went by. One that fails is not kept (`over`): a miss, never a
wrong text.
"""

from __future__ import annotations

import hashlib
from bisect import insort
from collections.abc import Sequence
from typing import Any

from . import fingerprint
from .rules import WS, Rules, TagPair, Written
from .splitter import CONTENT, REASONING, Piece, Splitter, Text
from .whitespace import unput
from .written import (BLOCKS_MAX, EDITS_MAX, JOIN, LAYOUT_MAX, Block, Echoed, Layout, Memory, Scope, _cost, _digest,
                      _key, dump, rebuild)


# -- the response side: what one output's split wrote ------------------------------------------
class Transcript:
    """One output's pieces as they go to the client, folded into what `Memory` keeps: the
    reasoning and answer hashed (as the client will send them back), and the layout."""

    __slots__ = ("_r", "_a", "_alen", "_rlen", "_block", "_had", "blocks", "_markup", "over", "recorded",
                 "_edits", "_inner", "_added", "wrote", "_fa", "_fb", "_texts", "_want", "_iwant", "_cuts", "_lost",
                 "_echo", "lead")

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
        # The stream's check (thinkwire.fingerprint): what the model wrote, the answer (with its
        # prefixes at the layout's places in it), each block's text (at its edits' places).
        self.wrote = fingerprint.Running()
        self._fa = fingerprint.Running()
        self._fb = fingerprint.Running()
        self._texts: list[fingerprint.Running] = []
        self._want: list[int] = []                 # the answer's places the layout names, sorted
        self._iwant: dict[int, list[int]] = {}     # block index -> the places in its text
        # Edits of the answer made while the block before them had not ended: (the block's index,
        # the edit's, the length of what the block's END held after its text then, the line breaks
        # put in after the block by then).
        self._cuts: list[tuple[int, int, int, int]] = []
        # Edits made while a block had not ended, after line breaks put in that its END took out
        # again (the answer's end, or a block that opened next, took them): edit index -> how many.
        self._lost: dict[int, int] = {}
        self._echo: tuple[bytes, bytes] | None = None   # (`echoed`) the digests of the texts the client got
        self.lead = 0   # characters of the first block's opening markup that the template wrote, not the model

    def echoed(self, answer: str, moved: bool = False, bare: bool = False) -> None:
        """The client got `answer`, the reasoning's text, as the answer (thinkwire.again), and none
        of the split's; `moved`: a body's, which gave the client no reasoning. The layout is filed
        under the texts the client got, as `written.Echoed`: it gives back what the model wrote
        from the reasoning alone. `bare`: an answer the model wrote with no tag in a block the
        template opened, which goes back without that opening tag, as a body of it does."""
        if self._alen:
            self.over = True   # (the split's answer, whitespace, went too: not remembered)
            return
        self._echo = (_digest("") if moved else self._r.digest(), _digest(answer))
        if bare and self.lead and self.blocks:
            self.blocks[0] = self.blocks[0]._replace(open=self.blocks[0].open[self.lead:])
            self.lead = 0

    def dropped(self, reasoning: bool, after: int, at: int, markup: str, added: int) -> None:
        """The splitter dropped `markup` and put in `added` line breaks: in block `after`'s text at
        offset `at` (`reasoning`), else in the answer at `at`, after `after` blocks."""
        if added < 0:
            self._take_back(at, -added)
            return
        self._markup += len(markup)
        self._added += added
        n = len(self._edits) + sum(len(v) for v in self._inner.values())
        if n >= EDITS_MAX or self._markup > LAYOUT_MAX:
            self.over = True
        elif reasoning:
            self._inner.setdefault(after, []).append((at, markup, added))
            want = self._iwant.setdefault(after, [])
            insort(want, at)
            insort(want, at + added)
        else:
            self._edits.append((after, Block(at, 0, markup, "", added)))
            insort(self._want, at)
            insort(self._want, at + added)

    def _take_back(self, at: int, n: int) -> None:
        """The `n` line breaks put in the answer at `at` went again (before a block): the edit
        that put them in puts in fewer, and the answer's later edits move back."""
        for k in range(len(self._edits) - 1, -1, -1):
            after, b = self._edits[k]
            if b.at <= at < b.at + b.added:
                if at + n > b.at + b.added:
                    break
                self._edits[k] = (after, b._replace(added=b.added - n))
                self._edits[k + 1:] = [(x, e._replace(at=e.at - n)) for x, e in self._edits[k + 1:]]
                self._added -= n
                self._places()
                return
            if b.at < at:
                break
        self.over = True   # (not one this recorder put in: not remembered)

    def _places(self) -> None:
        """The answer's places the layout names, again (after an edit moved)."""
        self._want = sorted({x for b in self.blocks for x in (b.at, b.at + b.added)} |
                            {x for _, b in self._edits for x in (b.at, b.at + b.added)})

    def _trailing(self, gap: str, put: Sequence[int], end: int | None = None, upto: int | None = None,
                  blocks: int | None = None) -> None:
        """At the output's end, `gap` (what was to go in front of the answer's next text, with line
        breaks put in at the places `put`) went: the model's whitespace in it is markup of the
        edits at the answer's end, before each its part; the line breaks put in it are taken out
        again (those an edit holds, and those put in while a block had not ended, which none
        does: `b</think> <answer><answer>`). Before a tool call's header, it went at `end`, when
        the first `upto` edits were made and `blocks` blocks had opened."""
        end = self._alen if end is None else end
        upto = len(self._edits) if upto is None else upto
        k = next((k for k, (_, b) in enumerate(self._edits[:upto]) if b.at + b.added > end), upto)
        mine = set(put)
        cur = 0
        for x in range(k, upto):
            after, b = self._edits[x]
            p = b.at - end
            if p < cur or any(i not in mine for i in range(p, p + b.added)):
                self.over = True
                return
            wrote = unput(gap, put, cur, p)
            self._edits[x] = (after, Block(end, 0, wrote + b.open, "", 0))
            self._markup += len(wrote)
            self._added -= b.added
            cur = p + b.added
        wrote = unput(gap, put, cur)
        if wrote:
            if wrote.strip(WS) or len(self._edits) >= EDITS_MAX:
                self.over = True
                return
            self._edits.insert(upto, (len(self.blocks) if blocks is None else blocks, Block(end, 0, wrote, "", 0)))
            self._markup += len(wrote)
        if self._markup > LAYOUT_MAX:
            self.over = True   # (whitespace past the bound, at the end: not remembered)
            return
        self._places()

    def layout(self) -> Layout:
        """The blocks, with the edits in their texts and the answer's among them."""
        blocks = tuple(b for b, _ in self._walk())
        return blocks if self._echo is None else Echoed(blocks)

    def _walk(self) -> list[tuple[Block, int | None]]:
        """The layout's blocks, each with its index among the blocks (None: an edit of the answer)."""
        blocks = [b._replace(inner=tuple(self._inner[i])) if i in self._inner else b for i, b in enumerate(self.blocks)]
        out: list[tuple[Block, int | None]] = []
        k = 0
        for after, b in self._edits:
            out += [(x, i) for i, x in enumerate(blocks[k:after], k)]
            k = max(k, after)
            out.append((b, None))
        return out + [(x, i) for i, x in enumerate(blocks[k:], k)]

    def rebuilt(self) -> fingerprint.Fp | None:
        """The fingerprint of what the layout gives back of the texts that went by, as `rebuild`
        gives it (None: a place it needs went by unmarked, or the texts do not fit it)."""
        fa = self._fa
        out = fingerprint.EMPTY
        a = 0
        for b, i in self._walk():
            seg = fa.part(a, b.at)
            if seg is None:
                return None
            out = fingerprint.cat(out, seg)
            a = b.at
            text = fingerprint.EMPTY
            if i is not None:
                got = self._text(i, b)
                if got is None:
                    return None
                text = got
            out = fingerprint.cat(fingerprint.cat(fingerprint.cat(out, fingerprint.of(b.open)), text),
                                  fingerprint.of(b.close))
            if b.added:
                if fa.part(a, a + b.added) != fingerprint.of("\n" * b.added):
                    return None
                a += b.added
        seg = fa.part(a, fa.chars)
        return None if seg is None else fingerprint.cat(out, seg)

    def _text(self, i: int, b: Block) -> fingerprint.Fp | None:
        """Block i's text as the model wrote it (`_inner`), fingerprinted."""
        if i >= len(self._texts) or self._texts[i].chars != b.length:
            return None
        r = self._texts[i]
        if not b.inner:
            return r.fp
        out = fingerprint.EMPTY
        k = 0
        for at, markup, added in b.inner:
            seg, put = r.part(k, at), r.part(at, at + added)
            if seg is None or put != fingerprint.of("\n" * added):
                return None
            out = fingerprint.cat(fingerprint.cat(out, seg), fingerprint.of(markup))
            k = at + added
        seg = r.part(k, r.chars)
        return None if seg is None else fingerprint.cat(out, seg)

    def length(self) -> int:
        """The characters the layout gives back (the texts, the markup, less what was put in)."""
        markup = sum(len(b.open) + len(b.close) for b in self.blocks) + \
            sum(len(b.open) for _, b in self._edits) + sum(len(e[1]) for v in self._inner.values() for e in v)
        return self._alen + self._rlen + markup - self._added - sum(b.added for b in self.blocks)

    def note(self, pieces: Sequence[Piece]) -> None:
        for p in pieces:
            if p.kind == CONTENT:
                value = p.text
                self._a.update(value.encode("utf-8", "surrogatepass"))
                self._alen += len(value)
                if not self.over:
                    self._fa.add(value, self._want)
            elif p.kind == REASONING:
                value = p.text
                if not self._block and self._had:
                    self._r.update(JOIN.encode())
                self._r.update(value.encode("utf-8", "surrogatepass"))
                self._block += len(value)
                if not self.over:
                    self._fb.add(value, self._iwant.get(len(self.blocks), _NONE))
                self._rlen += len(value)
            else:
                self._end(p.pair)

    def _end(self, pair: TagPair) -> None:
        if self._block:
            self._had = True
        added = pair.added if isinstance(pair, Written) else 0
        self._markup += len(pair.open) + len(pair.close)
        if len(self.blocks) >= BLOCKS_MAX or self._markup > LAYOUT_MAX:
            self.over = True
        elif not self.over:
            close, added = self._split_close(pair.close, added)
            self.blocks.append(Block(self._alen, self._block, self._split_open(pair.open), close, added))
            self._texts.append(self._fb)
            insort(self._want, self._alen)
            insort(self._want, self._alen + added)
        self._fb = fingerprint.Running()
        self._block = 0

    def _split_open(self, open_: str) -> str:
        """A block's markup before its text, less the whitespace written before the edits made
        in the answer's pending whitespace that this block's opening took (`b<response>\n<response>
        <think>`: the line break was to go in front of the answer's next text, and went into the
        block's markup): each such edit stands where the answer ends, after its part of it."""
        i = len(self.blocks)
        pend = [k for k, (after, e) in enumerate(self._edits) if after == i and e.at > self._alen]
        if not pend:
            return open_
        k0 = 0
        for k in pend:
            after, e = self._edits[k]
            p = e.at - self._alen - self._lost.get(k, 0)
            if p < k0 or p > len(open_) or e.added or open_[k0:p].strip(WS):
                self.over = True
                return open_
            self._edits[k] = (after, e._replace(at=self._alen, open=open_[k0:p] + e.open))
            k0 = p
        self._places()
        return open_[k0:]

    def _split_close(self, close: str, added: int) -> tuple[str, int]:
        """A block's markup after its text, less what was written after the edits made while it
        had not ended (`_cuts`): each edit is followed by its part. Of the `added` line breaks put
        in after the block, those put in after an edit's markup are that edit's (they stand after
        the model's whitespace before it: `b</think> <answer>hi`); the block keeps the rest, and
        each edit stands after them."""
        i = len(self.blocks)
        # (Line breaks put in that the END does not count went again: at the output's end, see
        # `_trailing`; before a block, `_split_open`.)
        cuts = [(k, c, min(g, added)) for b, k, c, g in self._cuts if b == i]
        self._lost.update((k, g - added) for b, k, _, g in self._cuts if b == i and g > added)
        self._cuts = [x for x in self._cuts if x[0] > i]
        if not cuts:
            return close, added
        if any(c > len(close) for _, c, _ in cuts) or any(x[1] > y[1] or x[2] > y[2] for x, y in zip(cuts, cuts[1:])):
            self.over = True
            return close, added
        first = cuts[0][2]
        end = self._alen + first
        for j, (k, c, g) in enumerate(cuts):
            after, e = self._edits[k]
            more = (cuts[j + 1][2] if j + 1 < len(cuts) else added) - g
            self._edits[k] = (after, e._replace(at=max(e.at, end), added=e.added + more,
                                                open=e.open + close[c:cuts[j + 1][1] if j + 1 < len(cuts) else None]))
        self._added += added - first
        self._places()
        return close[:cuts[0][1]], first

    def _digests(self) -> tuple[bytes, bytes]:
        """The reasoning's and the answer's digests, as the client will send them back."""
        return self._echo or (self._r.digest(), self._a.digest())

    def key(self, client: str | None) -> bytes:
        return _key(client, *self._digests())

    def shared_key(self, binding: bytes) -> str:
        from .memory.layouts import _key as shared
        return shared(b"layout", binding, *self._digests())


_NONE: list[int] = []


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

    __slots__ = ("transcript", "_quiet", "finished", "fed", "_out", "_upto", "_acc", "_kept", "_kept_n", "_lead",
                 "_gap_gone")

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
        self._gap_gone: tuple[str, tuple[int, ...], int, int, int] | None = None   # `_gone`, till its pieces are read

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
        a, b, e = self._read(out)
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
        if self._ws._pend and added >= 0 and not t.over:
            # The block before it has not ended yet: what it writes after its closing tag from
            # here on was written after this markup (`_end`).
            t._cuts.append((self.blocks - 1, len(t._edits) - 1, len(self._ws._w_close), len(self._ws._gap_put)))

    def _read(self, out: list[Any]) -> tuple[int, int, int]:
        """(answer characters, block text since the last END, ENDs) in `out` (`_step`)."""
        if out is not self._out:
            self._out, self._upto, self._acc = out, 0, (0, 0, 0)
        a, b, e = self._acc
        for piece in out[self._upto:len(out) - 1]:   # (the last piece may still grow)
            a, b, e = _step(a, b, e, piece)
        self._upto = max(self._upto, len(out) - 1)
        self._acc = (a, b, e)
        if out:
            a, b, e = _step(a, b, e, out[-1])
        return a, b, e

    def _gone(self, out: list[Any]) -> None:
        """The gap waiting for the answer's next text went before a tool call's header: as at the
        output's end (`Transcript._trailing`), once the pieces up to it are read (`_noted`): the
        END of a block that had not ended, among them, first takes back what it wrote after the
        edits made in the gap (`_split_close`)."""
        t = self.transcript
        if t.over or self._quiet:
            return
        end = t._alen + self._read(out)[0]
        insort(t._want, end)   # (the header's text may go by before the gap is read: its place)
        ws = self._ws
        self._gap_gone = (ws._gap, tuple(ws._gap_put), end, len(t._edits), self.blocks)

    def _noted(self, out: list[Any]) -> None:
        self.transcript.note(out)
        if self._gap_gone is not None:
            gap, put, end, upto, blocks = self._gap_gone
            self._gap_gone = None
            if not self.transcript.over:
                self.transcript._trailing(gap, put, end, upto, blocks)

    def feed(self, text: str) -> list[Any]:
        out = super().feed(text)
        if not self._quiet:
            self.fed += len(text)
            if not self.transcript.over:
                self.transcript.wrote.add(text, _NONE)
            if out:
                self._noted(out)
        return out

    def plain(self, text: str) -> Text | None:
        piece = super().plain(text)
        if piece is not None:
            self.fed += len(text)
            if not self.transcript.over:
                self.transcript.wrote.add(text, _NONE)
            self.transcript.note((piece,))
        return piece

    def finish(self, cut_off: bool = False) -> list[Any]:
        out = super().finish(cut_off)
        if out:
            self._noted(out)
        self.finished = True
        t = self.transcript
        if self._ws._gap and not t.over:
            t._trailing(self._ws._gap, self._ws._gap_put)
        # A check of the whole: the layout gives back what the model wrote (a template's opening
        # tag, which the prompt holds, besides), as fingerprints tell (thinkwire.fingerprint: the
        # text is not kept); else it is not remembered.
        extra = t.length() - self.fed
        if extra != 0 and not (self._lead and t.blocks and 0 < extra <= len(t.blocks[0].open)):
            t.over = True
        t.lead = max(extra, 0)
        if not t.over and (t.blocks or t._edits):
            wrote = t.wrote.fp if extra == 0 else fingerprint.cat(fingerprint.of(t.blocks[0].open[:extra]), t.wrote.fp)
            if t.rebuilt() != wrote:
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
    if not transcript.blocks and not transcript._edits:
        return []   # (nothing was dropped: the texts go back as they are)
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
