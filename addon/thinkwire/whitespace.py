"""The splitter's whitespace policy: what of the text around a recognised tag goes out, and how.

Recognition (thinkwire.recognition) decides where tags are and what each is; this stage gets the
text between them and makes the pieces. With trimming on (`Rules.trim`): whitespace at a block's
edges goes, and so does the whitespace after it at the answer's start; answer text that meets
across a removed block or tag with no whitespace gets a line break (no glued words); whitespace
that may turn out to sit at a block's edge waits until the next text tells. Whatever is dropped
is recorded for the way back (the END piece's TagPair holds the markup as the model wrote it,
byte for byte).

The stage is its own object (`Whitespace`, one per splitter), with its own state (the answer's
text kept between removed tags and the gaps among it, the whitespace waiting for the answer's
next text, the markup written around the open block). It runs after recognition and answers it
nothing. Recognition hands it what it found, in order, as tokens (`Token`: the text between tags,
each tag with its kind and its markup as written; strings, never positions in recognition's
buffer) through one entry, `take`, and the text at the end of what was fed through the tails
(`_block_tail`, `_answer_tail`). Where the text after a tag starts, and what is held to be read
again with the next feed (whitespace that may still be trimmed, the start of a tag), recognition
decides on its own, with the one rule both stages trim by (`trim_start`) and facts it keeps from
what it handed over (whether the block has had text, what the answer given ends in); where that
decides how the whitespace goes, the token's kind says it (AFTER or AFTER_GAP; REMOVED_KEPT,
REMOVED_AT_START or REMOVED), and this stage makes the pieces by it. A held text never reaches
this stage until it comes again. `_dropped` is the splitter's hook (thinkwire.written), called
here as there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from .lines import indent
from .modes import CONTENT, END, REASONING, End, Gap, Piece, Text, make
from .rules import WS, Rules, TagPair, Written

SEPARATOR = "\n"   # between answer pieces that meet across a removed block or tag with no whitespace
HELD_WS = " \t\r\n\f"

Kept = list[str | Gap]   # answer text between removed markers, emitted as one piece, and the gaps between

# What recognition hands this stage (`Token.kind`): in a block,
LEAD = 0        # text: what of a block's leading whitespace is trimmed; after: the rest of it (`_rsep`)
CLOSE = 1       # text: the block's last text; markup: its closing tag
MARKER = 2      # text: the block's last text, before a marker that ends reasoning and stays in the output
OWN_OPEN = 3    # text: the block's text so far; markup: the model's own opening tag (the template opened it),
                # after text of the block
# in the answer,
AFTER = 4       # text: what is trimmed of the whitespace right after a block or markup trimmed as one, where
                # the answer is empty or ends in whitespace; after: the rest (a line's indentation)
OPEN = 5        # text: the answer's text; markup: the opening tag of a block that opens after it
RESUME = 6      # text: the answer's text up to and with a marker after which reasoning resumes
START = 7       # text: the whitespace at the output's start; markup: a start pair's opening tag
TOOL_HEAD = 8   # text: the answer's text before a tool call's header (which stays, read as the call)
WRAPPER = 9     # text: the answer's text; markup: markup that opens the answer, removed
REMOVED = 10    # text: the answer's text; markup: a tag removed mid-answer where the answer does not end in
                # whitespace (trimming); after: the whitespace after it, which goes in front of the next text
REMOVED_AT_START = 11   # ... where the answer is empty or ends in whitespace at its start boundary (the output's
                        # start, right after a block): what follows it is trimmed as after a block
CALL = 12       # text: a tool call's text (answer, as written)
AFTER_GAP = 13  # text: the whitespace of AFTER where the answer ends in no whitespace: kept between its texts
REMOVED_KEPT = 14   # as REMOVED, where the answer ends in whitespace there (or not trimming): the text goes on
FIRST_OPEN = 15     # as OWN_OPEN, where the block has had no text: it is the block's written opening tag
# The text at the end of what was fed, no tag in it, comes with nearly every feed: it goes to its
# own steps (`_block_tail`, `_block_cut`, `_answer_tail`) as a string, with no token made.


def unput(gap: str, put: Sequence[int], lo: int = 0, hi: int | None = None) -> str:
    """What the model wrote of gap[lo:hi]: it less the line breaks put in at the places `put`
    (ascending, as `Whitespace._gap_put` holds them)."""
    hi = len(gap) if hi is None else hi
    parts, k = [], lo
    for at in put:
        if lo <= at < hi:
            parts.append(gap[k:at])
            k = at + 1
    parts.append(gap[k:hi])
    return "".join(parts)


def trim_start(buf: str, i: int, k: int, final: bool, nl: bool) -> tuple[int, bool]:
    """Trimming the whitespace run buf[i:k] (a block's start, the answer's after it), which
    reaches the end of what was fed where k == len(buf): where what stays of it starts, and
    whether the run so far (`nl`: its part before this feed) held a line break. Blank lines go;
    the first line's indentation (what follows the run's last line break) stays where it makes
    indented code (CommonMark: four columns, a tab), so code keeps its shape. Whitespace on the
    tag's own line goes. While only whitespace has come, what follows its last line break stays
    for now (it is held): it may be that indentation. Recognition finds where the text after a
    tag starts with it; the whitespace stage trims by it."""
    at_end = k == len(buf)
    b = max(buf.rfind("\n", i, k), buf.rfind("\r", i, k))
    nl = nl or b >= 0
    if not nl or (final and at_end):
        return k, nl
    start = b + 1 if b >= 0 else i
    if not at_end and indent(buf[start:k]) < 4:
        return k, nl   # (less than code's indentation means nothing in Markdown: it goes)
    return start, nl


class Token(NamedTuple):
    """One thing recognition found, in order: the text between tags (with the mode it is in, by
    kind), each tag with its kind and its exact markup as written. Made with
    `make(Token, (...))` (thinkwire.modes: no Python call)."""

    kind: int
    text: str
    markup: str
    after: str      # LEAD, AFTER: the rest of the whitespace run; REMOVED*: the whitespace run after the tag
    open: bool      # the whitespace run (LEAD, AFTER*, REMOVED*) reaches the end of what was fed: more may come


class Dropped(Protocol):
    """The way back's hook (thinkwire.splitter.Splitter._dropped, which says what it reports)."""

    def __call__(self, out: list[Piece], reasoning: bool, markup: str, added: int = 0, gap: int = 0,
                 kept: Kept | None = None) -> None: ...


class Gone(Protocol):
    """The way back's other hook (thinkwire.splitter.Splitter._gone): the waiting gap goes."""

    def __call__(self, out: list[Piece]) -> None: ...


class Whitespace:
    """The whitespace stage of one splitter: its state and its steps."""

    __slots__ = ("rules", "_dropped", "_gone", "_kept", "_skip_ws", "_at_start",
                 "_reasoning_ws", "_rsep", "_gap", "_gap_put", "_lead_ws", "_w_open",
                 "_w_close", "_pend", "reasoning_chars", "added_chars")

    def __init__(self, rules: Rules, inside: bool, dropped: Dropped, gone: Gone) -> None:
        self.rules = rules
        self._dropped = dropped
        self._gone = gone
        self._kept: Kept = []      # the answer's text kept since the last emission (afresh each scan)
        # Leading whitespace of a block, or of the answer after it, is being trimmed (a LEAD, AFTER
        # still to come): the splitter's fast path takes no text then.
        self._skip_ws = rules.trim and inside
        self._at_start = not inside   # nothing but whitespace has been written to the answer yet
        self._gap = ""             # whitespace after a block, kept for the answer's next text (no glued words)
        self._gap_put: list[int] = []   # ... the places in it of line breaks put there (the model wrote no whitespace)
        self._reasoning_ws = True  # the reasoning so far is empty or ends in whitespace
        self._rsep = False         # a line break goes in front of the reasoning's next text, if not whitespace
        self.reasoning_chars = 0
        self.added_chars = 0       # line breaks put between answer text that would run together (trimming)
        # The way back, byte for byte: what the model wrote before the open block's text that does
        # not go out (the whitespace trimmed ahead of it at the output's start, its opening tag, the
        # whitespace trimmed after it), and, once it closed, what it wrote after the text (the
        # whitespace trimmed before the closing tag, the tag, the whitespace trimmed after it). The
        # END piece carries both as a TagPair; it goes out once the answer's next text (or a block,
        # or the end) says no more whitespace is trimmed (`_pend`). A block the template opened
        # starts with the pair's opening tag, which the prompt holds.
        self._w_open = rules.pairs[0].open if inside else ""
        self._w_close = ""
        self._pend = False
        self._lead_ws = ""    # whitespace trimmed ahead of the first block, for its _w_open

    def __eq__(self, other: object) -> bool:
        """The same state (the hook and the rules aside): what a splitter's state is compared by."""
        return isinstance(other, Whitespace) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__ if k not in ("rules", "_dropped", "_gone", "_kept"))

    __hash__ = None   # type: ignore[assignment]  # (mutable; as thinkwire.lines.Lines)

    def gap_written(self) -> str:
        """What the model wrote of `_gap`: it less the line breaks put there."""
        return unput(self._gap, self._gap_put)

    def take(self, tok: Token, out: list[Piece], final: bool) -> None:
        """The step for what recognition found (`tok`), its pieces added to `out`. It answers
        nothing: recognition decides where it scans and what it holds on its own."""
        _STEPS[tok.kind](self, tok, out, final)

    # -- inside a reasoning block -----------------------------------------------------------------
    def _block_start(self, tok: Token, out: list[Piece], final: bool) -> None:
        """A block's text begins after the whitespace recognition found there (LEAD): `tok.text`
        is what of it is trimmed (`trim_start`), `tok.after` the rest, text or held; `tok.open`:
        only whitespace so far. Where an opening tag dropped between reasoning texts (`_rsep`), a
        line break goes in front of the text if it does not start with whitespace."""
        self._w_open += tok.text
        if not tok.open:
            self._skip_ws = False
        if self._rsep:   # (see the opening tag dropped in thinkwire.recognition)
            self._rsep = False
            if not tok.after:   # (its text starts with no whitespace)
                self._dropped(out, True, "", len(SEPARATOR))
                self._emit_reasoning(SEPARATOR, out)
                self.added_chars += len(SEPARATOR)

    def _block_tail(self, text: str, out: list[Piece]) -> None:
        """No tag in the block's text `text`, up to the end of what was fed (not empty): it goes
        out as reasoning. (Trimming, recognition holds the whitespace at its end: it goes if the
        block ends next.)"""
        self._emit_reasoning(text, out)

    def _block_cut(self, body: str, cut: str, out: list[Piece]) -> None:
        """The output ended in the block, after its text `body`: that goes out but, trimming, the
        whitespace at its end, which goes with `cut` (markup cut off there) as the block's
        written close."""
        kept = body.rstrip(WS) if self.rules.trim else body
        self._w_close = body[len(kept):] + cut
        self._emit_reasoning(kept, out)

    def _closed(self, tok: Token, out: list[Piece], final: bool) -> None:
        self._block_ends(tok.text, out, tok.markup)

    def _marker(self, tok: Token, out: list[Piece], final: bool) -> None:
        self._block_ends(tok.text, out, "")

    def _block_ends(self, text: str, out: list[Piece], tag: str) -> None:
        """The open block's last text, `text`, before `tag` (its closing tag; "" for a marker
        that stays in the output): its trailing whitespace trimmed, the END held until what
        follows says what more is trimmed."""
        kept = text.rstrip(WS) if self.rules.trim else text
        self._emit_reasoning(kept, out)
        self._w_close = text[len(kept):] + tag
        self._pend = True
        if not self.rules.trim:
            self._flush_end(out)   # nothing after it is trimmed
        self._skip_ws = self.rules.trim

    def _block_opens(self, out: list[Piece], tag: str, lead: str | None = None) -> None:
        """A block opens after `tag` as written: what was trimmed ahead of it is its markup
        (`lead`: the whitespace ahead of a start pair's tag at the output's start)."""
        if lead is not None:
            self._lead_ws = lead
        put = self._gap_put
        if put and not self._pend:
            self._dropped(out, False, "", -len(put), len(self._gap) - len(put))
        self._flush_end(out)
        # (Whitespace between two blocks is trimmed: the model's part of it, not the line breaks
        # put there, wherever they stand among it: `b</think> <answer><think>`.)
        self._w_open = self._lead_ws + self.gap_written() + tag
        self._w_close = self._lead_ws = ""
        self._skip_ws = self.rules.trim
        self._gap = ""   # whitespace between two blocks: trimmed
        put.clear()

    def _own_open(self, tok: Token, out: list[Piece], final: bool) -> None:
        """The model's own opening tag in the block the template opened (OWN_OPEN), dropped after
        the block's text: before any text, it is the block's written opening tag (in place of
        the one the prompt was taken to hold) and what follows it is trimmed as at the start."""
        rules = self.rules
        text, tag = tok.text, tok.markup
        fresh = tok.kind == FIRST_OPEN
        self._emit_reasoning(text, out)
        self._skip_ws = rules.trim and fresh   # nothing written yet: trim as at the start
        if fresh:
            # The model's own tag goes back in place of the one the prompt was taken
            # to hold: where a model writes it, its template most often did not (Ollama's).
            t = rules.pairs[0].open
            self._w_open = (self._w_open[len(t):] if self._w_open.startswith(t) else self._w_open) + tag
        # Reasoning on both sides with no whitespace between gets a line break.
        self._rsep = rules.trim and not fresh and not self._reasoning_ws
        if not fresh:
            self._dropped(out, True, tag)

    def _plain_reasoning(self, text: str) -> Text:
        """A plain text of the open block (not empty), as it is."""
        self.reasoning_chars += len(text)
        self._reasoning_ws = text[-1] in WS
        return make(Text, (REASONING, text))

    def _flush_end(self, out: list[Piece], added: int = 0) -> None:
        """The END of the block that closed, once what it dropped after its closing tag is known
        (`added`: the characters put in front of the answer's text that follows)."""
        if self._pend:
            self._pend = False
            out.append(End(END, Written(self._w_open, self._w_close, added) if added
                           else TagPair(self._w_open, self._w_close)))

    def _emit_reasoning(self, text: str, out: list[Piece]) -> None:
        if text:
            self._reasoning_ws = text[-1] in WS
            self.reasoning_chars += len(text)
            last = out[-1] if out else None
            if last is not None and last.kind == REASONING:
                out[-1] = make(Text, (REASONING, last.text + text))
            else:
                out.append(make(Text, (REASONING, text)))

    # -- in the answer ----------------------------------------------------------------------------
    def _after_block(self, tok: Token, out: list[Piece], final: bool) -> None:
        """Right after a block (or markup trimmed as one: `_skip_ws`), where the answer is empty
        or ends in whitespace (AFTER): the whitespace `tok.text` is trimmed (`trim_start`: what
        follows its last line break may be indentation that stays, `tok.after`); `tok.open`: only
        whitespace so far."""
        trimmed = tok.text
        if not self._pend and trimmed:
            self._dropped(out, False, trimmed, 0, len(self._gap))
        self._w_close += trimmed   # trimmed after the block (kept between answer texts)
        if not tok.open:
            self._skip_ws = False

    def _after_gap(self, tok: Token, out: list[Piece], final: bool) -> None:
        """Right after a block, where the answer before it ends in no whitespace (AFTER_GAP): the
        whitespace `tok.text` goes out in front of the answer's next text, if any; where the model
        wrote none, a line break does (words never run together). At the end it is trimmed;
        `tok.open` before the end: held, as the answer may go on."""
        run = tok.text
        if tok.open:
            if final:
                if not self._pend and run:
                    self._dropped(out, False, run, 0, len(self._gap))
                self._w_close += run
            return
        if run:
            self._gap += run
        else:
            if not self._pend:
                self._dropped(out, False, "", len(SEPARATOR), len(self._gap))
            self._gap_put.extend(range(len(self._gap), len(self._gap) + len(SEPARATOR)))
            self._gap += SEPARATOR
        self._skip_ws = False

    def _remove_kept(self, tok: Token, out: list[Piece], final: bool) -> None:
        """A tag (`tok.markup`) removed from the middle of the answer where it ends in whitespace,
        or with no trimming (REMOVED_KEPT): the text `tok.text` is kept, and the answer goes on."""
        if tok.text:
            self._kept.append(tok.text)
        self._dropped(out, False, tok.markup, 0, len(self._gap), self._kept)

    def _remove(self, tok: Token, out: list[Piece], final: bool) -> None:
        """A tag (`tok.markup`) removed from the middle of the answer where it ends in no
        whitespace (REMOVED), after the text `tok.text`, kept: what follows the tag is as after a
        block: whitespace (`tok.after`), or a line break where there is none, goes in front of the
        answer's next text (a gap in `_kept`), and is trimmed before a block or at the end.
        `tok.open`: only whitespace follows yet (recognition holds it)."""
        kept = self._kept
        after = tok.after
        if tok.text:
            kept.append(tok.text)
        at_end = tok.open
        self._dropped(out, False, tok.markup + (after if at_end and final else ""),
                      len(SEPARATOR) if not after and not at_end else 0, len(self._gap), kept)
        if at_end:
            if not final:
                self._skip_ws = True
                self._emit_kept(out)
            return
        kept.append(Gap(after, 0) if after else Gap(SEPARATOR, len(SEPARATOR)))

    def _remove_at_start(self, tok: Token, out: list[Piece], final: bool) -> None:
        """A tag removed at the answer's start boundary, where it is empty or ends in whitespace
        (REMOVED_AT_START: at the output's start, right after a block): trimmed as after the block
        itself, with the whitespace kept before it (`tok.text` too) and after it (`tok.after`)."""
        kept = self._kept
        if tok.text:
            kept.append(tok.text)
        lead = "".join(p if isinstance(p, str) else p.text for p in kept) + tok.markup
        kept.clear()
        after = tok.after if not tok.open or final else ""   # (open: held, read again)
        if self._pend:   # right after a block: what is dropped here is written after it
            self._w_close += lead + after
        else:
            self._dropped(out, False, lead + after)
        if tok.open and not final:
            self._skip_ws = True
            self._emit_kept(out)

    def _emit_kept(self, out: list[Piece], rest: str = "", before_block: bool = False) -> None:
        """The answer's text kept since the last emission and `rest`, with the gaps `_remove`
        left: a gap at the end goes in front of the answer's next text, or is trimmed before a
        block. The answer's next scan keeps its text afresh."""
        kept = self._kept
        self._kept = []   # (a new list: the way back's hook tells lists apart by identity)
        if rest:
            kept.append(rest)
        if not kept:
            return
        last = kept[-1]
        gap = None
        if isinstance(last, Gap):
            kept.pop()
            gap = last
        self.added_chars += sum(p.added for p in kept if isinstance(p, Gap))
        text = "".join(p if isinstance(p, str) else p.text for p in kept)
        kept.clear()
        self._emit_content(text, out, before_block)
        if gap is None:
            return
        if not before_block:
            self._gap_put.extend(range(len(self._gap), len(self._gap) + gap.added))   # (a put gap is all line breaks)
            self._gap += gap.text
        elif not gap.added:
            self._gap += gap.text   # the model's whitespace before the block: its markup (`_block_opens`)
        else:
            self._dropped(out, False, "", -gap.added, len(self._gap))

    def _emit_content(self, text: str, out: list[Piece], before_block: bool) -> None:
        if not text:
            return
        self._flush_end(out, len(self._gap_put))
        if self._at_start:
            if before_block and self.rules.trim and text.strip(WS) == "":
                self._lead_ws += text
                return  # whitespace ahead of the first block is trimmed
            if text.strip(WS):
                self._at_start = False
        if self._gap:
            text = self._gap + text
            self.added_chars += len(self._gap_put)
            self._gap = ""
            self._gap_put.clear()
        last = out[-1] if out else None
        if last is not None and last.kind == CONTENT:
            out[-1] = make(Text, (CONTENT, last.text + text))
        else:
            out.append(make(Text, (CONTENT, text)))

    def _answer_tail(self, text: str, cut: str, out: list[Piece]) -> None:
        """The answer's text `text`, up to the end of what was fed, goes out, with what is kept;
        at the output's end, `cut` is a marker cut off there, which goes. (Whitespace alone at the
        output's start, trimming, does not come here: recognition holds it, as it goes if a block
        opens next.)"""
        self._emit_kept(out, text)
        if cut:
            self._dropped(out, False, cut, 0, len(self._gap))   # (the way back has it)

    def _tool_head(self, tok: Token, out: list[Piece], final: bool) -> None:
        """A tool call's header follows the answer's text `tok.text` (TOOL_HEAD): what is kept goes
        out in front of it, without a line break put there."""
        kept = self._kept
        last = kept[-1] if kept else None
        if last is not None and not isinstance(last, str) and last.added:
            kept.pop()   # (no line break put before it: a header is no word to keep apart)
            self._dropped(out, False, "", -last.added, len(self._gap), kept)
        self._emit_kept(out, tok.text)
        put = self._gap_put
        if put:
            self._gone(out)   # (the way back: all of the gap goes, the model's whitespace too)
            self._gap = ""
            put.clear()

    def _wrapper(self, tok: Token, out: list[Piece], final: bool) -> None:
        """Markup that opens the answer (WRAPPER: a strip marker at its start or right after a
        block, a closing tag with no block open at the start), removed after the answer's text:
        what follows it is trimmed as after a block."""
        tag = tok.markup
        self._emit_kept(out, tok.text)
        if self._pend:
            if len(self._gap) > len(self._gap_put):   # (the model's whitespace before it, waiting for the answer's next text: its place)
                self._dropped(out, False, "", 0, len(self._gap))
            self._w_close += tag   # (written after the block: the way back has it)
        else:
            self._dropped(out, False, tag, 0, len(self._gap))
        self._skip_ws = self.rules.trim

    def _opened(self, tok: Token, out: list[Piece], final: bool) -> None:
        """A block opens after the answer's text (OPEN, RESUME: the marker is the text's end) or
        the whitespace at the output's start (START)."""
        if tok.kind == START:
            self._block_opens(out, tok.markup, tok.text)
        else:
            self._emit_kept(out, tok.text, before_block=True)
            self._block_opens(out, tok.markup)

    def _call(self, tok: Token, out: list[Piece], final: bool) -> None:
        """A tool call's text, answer as written (CALL)."""
        self._emit_content(tok.text, out, False)


_Step = Callable[[Whitespace, Token, list[Piece], bool], None]
# Each token kind's step (by `Token.kind`).
_STEPS: tuple[_Step, ...] = (
    Whitespace._block_start, Whitespace._closed, Whitespace._marker, Whitespace._own_open, Whitespace._after_block,
    Whitespace._opened, Whitespace._opened, Whitespace._opened, Whitespace._tool_head, Whitespace._wrapper,
    Whitespace._remove, Whitespace._remove_at_start, Whitespace._call, Whitespace._after_gap, Whitespace._remove_kept,
    Whitespace._own_open)
