"""The streaming tag splitter: text in, reasoning and content pieces out.

Pure and I/O-free. One `Splitter` per stream and per choice; `feed(text)` returns the
pieces it can decide now, holding back only what could still become a tag (and, when
trimming, whitespace that might turn out to sit at the edge of a block); `finish()` flushes.
A whole body goes through the same object (`split_text`), so streams and bodies agree (but where
a body can look ahead: see `split_text`). Where a tag counts depends on the line and code state
(thinkwire.lines), read over reasoning and answer alike.

The stages, each its own module: the modes and their transition table (thinkwire.modes), the
recognition of tags by kind (thinkwire.recognition), the whitespace policy that makes the pieces
(thinkwire.whitespace), a stage after recognition that answers it nothing. Recognition holds what
it reads again: whitespace the policy may still trim, then what may still be a tag; the next feed
reads both again, in that order, in front of its text. This module is the face the surfaces use:
`feed`, `finish`, `resume`, and the fast path's `plain`, `steady`, `held_ws` and `took`.

Pieces are records (thinkwire.modes), read as `kind, value = piece` or by name:
  Text(REASONING, text)  reasoning text, in order
  Text(CONTENT, text)    answer text, in order
  End(END, TagPair)      a reasoning block ended (closed, or cut off by the end of output): the
                         markup as the model wrote it on each side of the block's text, for the way back
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .lines import Lines
from .modes import ANSWER, CONTENT, END, PROMPT_BLOCK, REASONING, End, Event, Mode, Piece, SplitterError, Text, make
from .placement import PAIR_ON_LINE
from .recognition import KEPT_NONE, NO_SCAN, Recognition, answer_kinds, block_kinds
from .rules import WS, Rules, TagPair
from .whitespace import HELD_WS, Whitespace

__all__ = ["CONTENT", "END", "PAIR_ON_LINE", "REASONING", "End", "Mode", "Piece", "Rules", "Split", "Splitter",
           "SplitterError", "Text", "merge", "split_text"]


class Splitter(Recognition):
    """Incremental splitter for one stream of model output text (a body is one `feed`): the
    recognition stage (thinkwire.recognition: its state is this object's) and the whitespace stage
    (thinkwire.whitespace, its own object, `_ws`). The fast path below is both stages' step for a
    plain text, written out."""

    __slots__ = (
        "rules", "_ws", "_mode", "_pair", "_bscan", "_tool", "_resume", "_ln", "_undecided", "_held", "_ws_hold", "_ws_more",
        "_boundary", "_at_start", "_lead_due", "_lead_nl", "_fresh", "_ans_ws", "_gap_due", "_kept_end",
        "_seen_tag", "_literal",
        "_cut_off", "_answer_kinds", "_block_kinds", "blocks", "stray_closes", "stray_after_text", "markup_chars",
    )

    def __init__(self, rules: Rules, starts_inside: bool | None = None) -> None:
        self.rules = rules
        inside = rules.starts_inside if starts_inside is None else starts_inside
        # Starting inside, until the block closes: an opening tag written anyway is dropped.
        self._mode = PROMPT_BLOCK if inside else ANSWER
        self._pair = None
        self._bscan = rules.scan(None, True) if inside else NO_SCAN
        self._boundary = True
        self._at_start = not inside
        self._lead_due = rules.trim and inside
        self._lead_nl = False
        self._fresh = inside
        self._ans_ws = True
        self._gap_due = False
        self._kept_end = KEPT_NONE
        self._ln = Lines()
        self._undecided = ""
        self._held = ""
        self._ws_hold = False
        self._ws_more = []
        self._ws = Whitespace(rules, inside, self._dropped, self._gone)
        self._resume = None
        self._seen_tag = inside
        self._literal = {}
        self.blocks = 1 if inside else 0
        self.stray_closes = 0
        self.stray_after_text = 0   # ... of which with text before them (what learning counts)
        self.markup_chars = 0    # characters of tags removed (for accounting: nothing else goes)
        self._tool = None
        self._cut_off = False
        self._answer_kinds = answer_kinds(rules)
        self._block_kinds = block_kinds(rules)

    @property
    def reasoning_chars(self) -> int:
        """Characters of reasoning given."""
        return self._ws.reasoning_chars

    @property
    def added_chars(self) -> int:
        """Line breaks put between answer text that would run together (trimming)."""
        return self._ws.added_chars

    # -- public API ---------------------------------------------------------------------
    def feed(self, text: str) -> list[Piece]:
        if not text:
            return []
        ws = self._ws
        if not self._held and not self._undecided and not ws._skip_ws and not ws._rsep:
            # The common case, a token in the middle of a block or of the answer: nothing held,
            # no character that could start a tag: it goes out as it is.
            if self._mode.inside:
                if (self._bscan.first.search(text) is None
                        and not (self.rules.trim and text[-1] in WS)):
                    self._ln.read(text)
                    # (A LEAD due after the model's own opening tag has nothing to do: none is.)
                    self._lead_due = self._fresh = False
                    return [ws._plain_reasoning(text)]
            elif not ws._at_start and not ws._gap and not ws._pend:
                if self.rules._plain_re.search(text) is None:
                    self._plain_answer(text)
                    return [make(Text, (CONTENT, text))]
        elif self._ws_hold and not text.strip(WS):
            self._ws_more.append(text)
            return []
        out: list[Piece] = []
        held = self._take_held()
        self._run(held + text if held else text, out, final=False)
        return out

    def _take_held(self) -> str:
        """What recognition holds, in order, taken to be read again: whitespace the whitespace
        stage may still trim, then what may still be a tag."""
        held = self._held
        if self._ws_more:
            held += "".join(self._ws_more)
            self._ws_more.clear()
        self._held = ""
        self._ws_hold = False
        if self._undecided:
            held += self._undecided
            self._undecided = ""
        return held

    def holds_tag(self) -> bool:
        """Whether what is held is more than whitespace (the start of a tag, or one undecided):
        what `finish` gives then depends on how the output ended."""
        return bool(self._undecided) or bool(self._held) and not self._ws_hold

    @property
    def mode(self) -> Mode:
        """Where the splitter stands (thinkwire.modes)."""
        return self._mode

    @property
    def inside(self) -> bool:
        """Inside a reasoning block."""
        return self._mode.inside

    def resume(self, text: str) -> None:
        """Go on from the state `text` leaves, without giving it: a prefill the request put at
        the start of the assistant's turn, which the client already has (its code state and an
        open block carry over). What it leaves undecided is dropped: a tag cut at the prefill's
        end is not completed by the output."""
        self.feed(text)
        ws = self._ws
        self._take_held()
        ws._pend = False   # (the prefill's block, which the client has)
        ws._w_open = (self._pair or self.rules.pairs[0]).open if self._mode.inside else ""
        ws._w_close = ws._lead_ws = ""
        ws.reasoning_chars = ws.added_chars = 0
        self.stray_closes = self.stray_after_text = self.markup_chars = 0

    def plain(self, text: str) -> Text | None:
        """`feed(text)` for a non-empty text with no character that could start any tag or
        marker of the rules (`Rules.may_hold_tag`; the byte fast path checks that): the one
        piece it gives, with the state `feed` leaves. None, with nothing changed, where `feed`
        must decide: text held other than trailing whitespace, whitespace being trimmed at a
        block's start or the output's, or nothing to give yet."""
        ws = self._ws
        if ws._skip_ws:
            return None
        if not self._mode.inside:
            if self._held or self._undecided or ws._at_start or ws._gap or ws._pend:
                return None
            self._plain_answer(text)
            return make(Text, (CONTENT, text))
        if self._pair in self.rules.start_pairs or ws._rsep:
            return None       # its tags are words: no character tells them apart; a line break may go first
        trim = self.rules.trim
        if self._undecided:
            return None   # a partial tag
        if self._held:
            if not self._ws_hold:
                return None   # whitespace that may start a tag
            if trim and not text.strip(WS):
                return None   # whitespace only: feed holds it and gives nothing
            text = self._take_held() + text
        if trim:
            kept = text.rstrip(WS)
            if not kept:
                return None
            if len(kept) < len(text):   # held for now: it is dropped if the block ends next
                self._held = text[len(kept):]
                self._ws_hold = not self.rules._ws_lead
                text = kept
        self._ln.read(text)
        self._lead_due = self._fresh = False   # (as feed)
        return ws._plain_reasoning(text)

    def steady(self) -> int | None:
        """CONTENT or REASONING when `plain` takes any plain text (one that holds no character a
        tag or marker starts with: `Rules.tag_starts`), whatever plain texts it took before in
        this state, and gives it as it is, with what is held in front: in reasoning, the
        whitespace `held_ws` gives, which trimming holds again at the text's end; in the answer,
        nothing. thinkwire.hot takes such texts in C; `took` folds them in. None: `feed` decides
        each text."""
        ws = self._ws
        if ws._skip_ws:
            return None
        if self._mode.inside:
            # (A start pair's tags are words: no table of characters holds them.)
            return None if self.held_ws() is None or self._pair in self.rules.start_pairs or ws._rsep else REASONING
        return None if ws._at_start or self._held or self._undecided or ws._gap or ws._pend else CONTENT

    def held_ws(self) -> str | None:
        """In a block: the whitespace held at its end so far, which goes out in front of the
        next text unless the block ends first ("" for none); None when something else is held
        (a partial tag, or more than a short run of whitespace)."""
        if self._undecided:
            return None
        held = self._held
        if not held:
            return ""
        ok = self._ws_hold and not self._ws_more and len(held) <= 32 and not held.strip(HELD_WS)
        return held if ok else None

    def took(self, kind: int, text: str) -> str:
        """Plain texts taken elsewhere (thinkwire.hot, in C) in a steady state of `kind`
        (`steady`), folded in: `text` is those texts one after the other (not empty; no character
        of `Rules.tag_starts`, which the caller checked, as for `plain`). Gives what
        `feed` gave for them, joined, and leaves the state it left. This is the one place where
        what C took becomes the splitter's state: every piece of it (the whitespace held, the
        counts, the answer's line, code spans and fences) is derived from the text by `plain`,
        the step `feed` takes for a plain text, which leaves the same state for texts joined as
        one after the other (a line reads the same wherever it was cut)."""
        piece = self.plain(text)
        if piece is None or piece.kind != kind:
            raise ValueError("took: a text the splitter must decide, or not of the steady kind")
        return piece.text

    def _plain_answer(self, text: str) -> None:
        self._ln.read(text)   # only the line and code state move
        if self._boundary and text.strip(WS):
            self._boundary = self._at_start = False
        self._ans_ws = text[-1] in WS

    def finish(self, cut_off: bool = False) -> list[Piece]:
        """The rest. `cut_off`: the output was cut at the token limit, so a tail that is only
        the start of a tag or marker (`<thi`, `work</thi`, `Partial result<|e`) is markup cut
        short, and goes (`_cut_tail`); otherwise only one that begins with a whole special token."""
        self._cut_off = cut_off
        out: list[Piece] = []
        ws = self._ws
        held = self._take_held()
        if held:
            self._run(held, out, final=True)
        ws._flush_end(out)
        if self._mode.inside:   # cut off: no closing tag was written
            out.append(End(END, TagPair(ws._w_open, ws._w_close)))
            self._go(Event.CUT_OFF)
        return out

    def _run(self, buf: str, out: list[Piece], final: bool) -> None:
        i = 0
        n = len(buf)
        while i < n:
            i = _SCANS[self._mode.index](self, buf, i, out, final)
            if i < 0:  # the rest was held back (or, at the end, written)
                break


# Each mode's scan (by `Mode.index`): from a position of the text, to where the mode changed (-1:
# all of it read).
_SCANS: tuple[Callable[[Splitter, str, int, list[Piece], bool], int], ...] = tuple(
    {Mode.ANSWER: Splitter._content, Mode.TOOL_CALL: Splitter._tool_call,
     Mode.BLOCK: Splitter._reasoning, Mode.PROMPT_BLOCK: Splitter._reasoning}[m] for m in Mode)


@dataclass(slots=True)
class Split:
    """A whole text, split: reasoning blocks and content, in order."""

    pieces: list[Piece]
    stray_closes: int = 0   # closing tags with no opening tag (the template may open the block)

    @property
    def reasoning(self) -> list[str]:
        blocks: list[str] = []
        cur: list[str] = []
        open_ = False
        for p in self.pieces:
            if p.kind == REASONING:
                cur.append(p.text)
                open_ = True
            elif p.kind == END:
                if open_:
                    blocks.append("".join(cur))
                cur, open_ = [], False
        return blocks

    @property
    def content(self) -> str:
        return "".join(p.text for p in self.pieces if p.kind == CONTENT)


def split_text(text: str, rules: Rules) -> Split:
    """Split a whole output as a stream of it is split. (A closing tag with no opening tag is
    removed, and the text before it stays answer, as a stream has already sent it: only a profile
    that starts inside makes that text reasoning here; thinkwire.context re-splits a body.)"""
    s = Splitter(rules)
    return Split(merge(s.feed(text) + s.finish()), s.stray_closes)


def merge(pieces: list[Piece]) -> list[Piece]:
    """Join adjacent pieces of the same text kind."""
    out: list[Piece] = []
    for p in pieces:
        last = out[-1] if out else None
        if p.kind != END and last is not None and last.kind != END and last.kind == p.kind:
            out[-1] = Text(p.kind, last.text + p.text)
        else:
            out.append(p)
    return out
