"""The splitter's recognition: where each tag and marker is, and what it is where it stands.

A scan finds the next tag of the mode's alternation (thinkwire.rules); the tag's kinds, in order,
come from a table built once per `Rules` (`answer_kinds`, `block_kinds`): a kind's handler either
decides (a block opens or closes, the tag is removed, the text waits for more) or passes to the
next kind; a tag no kind takes is text. Where a tag counts depends on the line and code state
(thinkwire.lines): never in code, some only at a line's start or glued to the text before them,
as a model writes markup and prose does not. What it finds goes to the whitespace stage
(thinkwire.whitespace, its own object: `_ws`) as tokens (`Token`: the text between tags, each tag
with its kind and markup as written) and tails, which the stage makes the pieces of, one at a
time as they are found, answering nothing. Recognition reads none of the stage's fields and sets
none: where it scans and what it holds, it decides alone. A fact a decision here needs is its
own, computed from what it read and what it handed over: whether the answer has had text
(`_at_start`: a start pair opens only before it; a stray closing tag after it stays as written);
where the text after a tag starts (`_lead_due`), past the whitespace trimmed there
(`trim_start`, the rule the stage trims by; a tag may start with whitespace, so the scan goes on
from there), which needs whether the block has had text (`_fresh`) and what the answer given so
far ends in (`_ans_ws`, `_gap_due`, `_kept_end`, kept by `_given` as the stage gives it); what of
the text is held to be read again (`_held`: whitespace that may still be trimmed, a block's
trailing whitespace, the answer's start while only whitespace came; `_undecided`: the start of a
tag). Where that fact decides how the whitespace goes, the token's kind carries it.

Recognition's state (the Splitter's slots, declared here): the mode (thinkwire.modes), the open
block's pair, the tool call's and resume marker's scans, the line and code state, what it holds
(`_held`, then `_undecided`, read again in that order in front of the next feed), where an
opening tag counts, whether the answer has had text and a LEAD is due, the facts above, and the
counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import re
from collections.abc import Callable
from functools import lru_cache

from .lines import Lines
from .modes import PROMPT_BLOCK, TOOL_CALL, TRANSITIONS, Event, Mode, Piece, SplitterError, make
from .rules import WS, Rules, TagPair, _Scan, partial_tag_len
from .placement import Placement
from .whitespace import (AFTER, AFTER_GAP, CALL, CLOSE, FIRST_OPEN, LEAD, MARKER, OPEN, OWN_OPEN, REMOVED,
                         REMOVED_AT_START, REMOVED_KEPT, RESUME, START, TOOL_HEAD, WRAPPER, Kept, Token, Whitespace,
                         trim_start)

# What a kind's handler decides: (verdict, position).
PASS = 0      # not this kind here: the next kind decides
TEXT = 1      # the tag is text: the scan goes on after its first character
HOLD = 2      # what follows decides: the text from the tag waits for the next feed
SKIP = 3      # the tag is text, kept as written: the scan goes on at position
RESCAN = 4    # the tag was removed: the answer's text starts again at position
RETURN = 5    # a mode changed (or all was given): the scan of this mode ends at position (-1: all given)
Verdict = tuple[int, int]

_PASS: Verdict = (PASS, 0)
_TEXT: Verdict = (TEXT, 0)
_HOLD: Verdict = (HOLD, 0)

# A kind's handler: (splitter, buf, i where the unemitted text starts, j where the tag is, the tag,
# the pieces so far, final).
Handler = Callable[["Recognition", str, int, int, str, list[Piece], bool], Verdict]

# `_kept_end`: nothing kept, text kept that ends in no whitespace, or in whitespace, or a gap kept
# after a removed tag (after text that ends in no whitespace, or none).
KEPT_NONE, KEPT_TEXT, KEPT_WS, KEPT_GAP = 0, 1, 2, 3

_WS_RUN = re.compile(f"[{re.escape(WS)}]*")


def _ws_end(buf: str, i: int) -> int:
    """Where the whitespace from buf[i] ends (what LEAD's and AFTER's text, REMOVED's `after` hold)."""
    m = _WS_RUN.match(buf, i)
    assert m is not None   # (it matches the empty string)
    return m.end()


class Recognition(Placement):
    rules: Rules
    _ws: Whitespace            # the whitespace stage
    _mode: Mode
    _pair: TagPair | None      # the pair whose block is open (None: any close)
    _bscan: _Scan              # in a block: its scan (`Rules.scan`), looked up as the block opens (`_go`)
    _tool: _Scan | None        # in a tool call: the scan for its end marker
    _resume: tuple[str, TagPair] | None   # (marker, pair): the reasoning goes on after that marker
    _ln: Lines                 # line and code state of the text read so far (afresh at each block's edge)
    _undecided: str            # what may still be (the start of) a tag: read again with the next feed
    _held: str                 # whitespace the stage may still trim, in front of _undecided: read again too
    _ws_hold: bool             # only whitespace is held, and more would be too: it goes to _ws_more, unread
    _ws_more: list[str]
    _boundary: bool            # start of output or just after a block: an opening tag counts here
    _at_start: bool            # the answer has had no text but whitespace (and the output did not start inside)
    _lead_due: bool            # the text after a tag starts here: its leading whitespace goes first (LEAD, AFTER)
    _lead_nl: bool             # ... the whitespace trimmed there so far held a line break (`trim_start`)
    # What the answer given so far ends in, as the stage will have it (recognition hands it every
    # text; these follow from them, for where the text after a tag starts: AFTER, REMOVED):
    _ans_ws: bool              # the answer given is empty or ends in whitespace
    _gap_due: bool             # whitespace waits to go in front of the answer's next text (the stage's gap)
    _kept_end: int             # the answer's text since it last went out (the stage's kept): KEPT_*
    _fresh: bool               # the open block has had no text: its leading whitespace is trimmed (else a LEAD
                               # after the model's own opening tag only tells where the text starts: `_rsep`)
    _seen_tag: bool            # a block was opened or closed: a stray closing tag no longer counts
    _literal: dict[str, int]   # closing tag -> opening tags of its pair kept as text
    _cut_off: bool             # finishing an output cut off at the token limit (`finish`)
    # The rules' tables (`answer_kinds`, `block_kinds`), looked up once per splitter.
    _answer_kinds: dict[str, tuple[Handler, ...]]
    _block_kinds: dict[str, tuple[Handler, ...]]
    # Counts.
    blocks: int
    stray_closes: int
    stray_after_text: int
    markup_chars: int

    if not TYPE_CHECKING:   # (no instance dict: the Splitter's slots hold the state; hidden from mypy,
        __slots__ = ()      # which reads an empty __slots__ as allowing no attribute)

    def _go(self, event: Event) -> None:
        """Move by the transition table."""
        to = TRANSITIONS[self._mode].get(event)
        if to is None:
            raise SplitterError(f"{event.value}: no move from {self._mode.label}")
        self._mode = to
        if to.inside:   # (the pair is set first)
            self._bscan = self.rules.scan(self._pair, to is PROMPT_BLOCK)

    def _dropped(self, out: list[Piece], reasoning: bool, markup: str, added: int = 0, gap: int = 0,
                 kept: Kept | None = None) -> None:
        """A hook (thinkwire.written records the way back's layout with it; nothing here): `markup`
        went, and `added` line breaks were put in, in the open block's text (`reasoning`) or the
        answer, after what `out` (and the pieces before it) holds, then `gap` characters and the
        texts in `kept` still to go out (gap -1: the place is not known; added < 0: that many
        line breaks put in there went again, before a block). The whitespace stage calls it as
        its own `_dropped`."""

    def _gone(self, out: list[Piece]) -> None:
        """A hook, as `_dropped`: the whitespace waiting for the answer's next text (the whitespace
        stage's `_gap`, with the line breaks put in it) goes, where a tool call's header follows
        what `out` holds; edits made in it stand where it stood."""

    def _given(self, text: str, before_block: bool = False) -> None:
        """The stage gives the answer's kept text and then `text` (`_emit_kept`): what it ends in."""
        kept, self._kept_end = self._kept_end, KEPT_NONE
        if text:
            self._ans_ws = text[-1] in WS
            self._gap_due = False
        elif kept == KEPT_GAP:   # (the text before the gap ends in no whitespace, or there is none)
            self._ans_ws = False
            self._gap_due = not before_block   # (before a block, it is trimmed)
        elif kept:
            self._ans_ws = kept == KEPT_WS
            self._gap_due = False
        if before_block:
            self._gap_due = False

    # -- inside a reasoning block ---------------------------------------------------------------
    def _reasoning(self, buf: str, i: int, out: list[Piece], final: bool) -> int:
        ws = self._ws
        if self._lead_due:   # (most scans start mid-block: no call)
            k = _ws_end(buf, i)
            if self._fresh:   # trimmed: the text starts where `trim_start` says
                p, self._lead_nl = trim_start(buf, i, k, final, self._lead_nl)
                ws.take(make(Token, (LEAD, buf[i:p], "", buf[p:k], k == len(buf))), out, final)
                self._ln.read(buf, i, p)
                if k == len(buf):   # only whitespace so far: what follows its last line break is held
                    if not final:
                        self._held = buf[p:]   # (perhaps a line's indentation: read when it comes again)
                    return -1
                self._lead_nl = False
                i = p
            else:
                ws.take(make(Token, (LEAD, "", "", buf[i:k], k == len(buf))), out, final)
            self._lead_due = False
        rules = self.rules
        scan = self._bscan
        kinds = self._block_kinds
        ln = self._ln
        pos = seen = i
        hold = -1
        n = len(buf)
        while True:
            m = scan.regex.search(buf, pos)
            if m is None:
                break
            j, tag = m.start(), m.group()
            if not final and rules.undecided(buf, j, tag):
                hold = n - j   # a tag that may still grow into a longer one: wait
                break
            ln.read(buf, seen, j)
            seen = j
            verdict, at = _PASS
            for handle in kinds.get(tag, _END_ONLY):   # (the first kind that decides; none: text)
                verdict, at = handle(self, buf, i, j, tag, out, final)
                if verdict != PASS:
                    break
            if verdict == RETURN:
                return at
            pos = j + 1   # text: keep scanning
        # No tag yet: emit all but a possible partial tag (and trailing whitespace).
        rest = buf[i:]
        if final:
            hold = self._cut_tail(rest, scan.prefixes, scan.longest, scan.first)
            if hold:
                probe = ln.copy()
                probe.read(buf, seen, n - hold)
                if probe.in_code():
                    hold = 0      # in code it is text
                self.markup_chars += hold
        elif hold < 0:
            hold = partial_tag_len(rest, scan.prefixes, scan.longest, scan.first)
        body = buf[i:n - hold]
        if final:
            ws._block_cut(body, buf[n - hold:], out)
            return -1
        if rules.trim:   # trailing whitespace is held: it goes if the block ends next
            kept = body.rstrip(WS)
            if len(kept) < len(body):
                self._held = body[len(kept):]
                self._ws_hold = not hold and not rules._ws_lead
                body = kept
        if body:
            self._fresh = False
            ws._block_tail(body, out)
        self._undecided = buf[n - hold:]
        ln.read(buf, seen, max(seen, n - hold - len(self._held)))   # (what is held is read when it goes out)
        return -1

    def _close(self, buf: str, i: int, j: int, tag: str, out: list[Piece], final: bool) -> Verdict:
        """The open block's closing tag: in code it is text; in a fence the block still closes at a
        line's start."""
        close = self._pair.close if self._pair is not None else tag
        if tag != close:
            return _PASS
        if not self._ln.close_counts():
            return _TEXT
        self._end_block(make(Token, (CLOSE, buf[i:j], tag, "", False)), out, Event.CLOSE)
        self.markup_chars += len(tag)
        return RETURN, j + len(tag)

    def _own_open(self, buf: str, i: int, j: int, tag: str, out: list[Piece], final: bool) -> Verdict:
        """The template opened the block, and the model wrote the tag anyway: it is dropped."""
        if self._mode is not PROMPT_BLOCK:
            return _PASS
        if not self._opening_counts(tag):
            return _TEXT
        self._fresh = self._fresh and i == j   # (then trimmed as at the start)
        self._ws.take(make(Token, (FIRST_OPEN if self._fresh else OWN_OPEN, buf[i:j], tag, "", False)), out, final)
        # (Trimmed as at the start if the block has no text yet, or a line break goes in front of
        # its next text: the stage knows which; a LEAD it has nothing to do for takes none.)
        self._lead_due = self.rules.trim
        self._pair = self.rules._by_open[tag]
        self._go(Event.OWN_OPEN)
        self.markup_chars += len(tag)
        return RETURN, j + len(tag)

    def _end_marker(self, buf: str, i: int, j: int, tag: str, out: list[Piece], final: bool) -> Verdict:
        """A marker that ends reasoning (a tool call, a channel header): it stays in the output.
        Only where a tool call starts (the block's start, a line's start, right after the
        reasoning's text), never in code or where prose names it (after a space or a quote). In a
        body as in a stream: a call written before the block's closing tag goes to the answer too,
        for a tool parser. (Where a resume marker follows the call, the reasoning goes on after
        it: `Rules.resumes`.)"""
        ln = self._ln
        if ln.in_code() or not (ln.blank or ln.glued()):
            return _TEXT
        pair = self._pair or self.rules.pairs[0]
        self._end_block(make(Token, (MARKER, buf[i:j], "", "", False)), out, Event.END_MARKER)
        resume = self.rules._resume_of.get(tag)
        self._resume = (resume, pair) if resume is not None else None
        return RETURN, j

    def _end_block(self, tok: Token, out: list[Piece], event: Event) -> None:
        """The open block ends (`tok`: CLOSE, at its closing tag; MARKER, before a marker that
        stays in the output)."""
        self._ws.take(tok, out, False)
        self._lead_due = self.rules.trim
        self._go(event)
        self._pair = None
        self._seen_tag = True
        self._new_line()

    # -- in the answer --------------------------------------------------------------------------
    def _content(self, buf: str, i: int, out: list[Piece], final: bool) -> int:
        rules = self.rules
        ws = self._ws
        n = len(buf)
        if self._lead_due:  # right after a block: trim whitespace, an opening tag still counts
            k = _ws_end(buf, i)
            if self._ans_ws:   # trimmed: the text starts where `trim_start` says
                p, self._lead_nl = trim_start(buf, i, k, final, self._lead_nl)
                ws.take(make(Token, (AFTER, buf[i:p], "", buf[p:k], k == n)), out, final)
            else:   # kept whole between the answer's texts (or a line break put there); held whole so far
                p = k if k < n or final else i
                ws.take(make(Token, (AFTER_GAP, buf[i:k], "", "", k == n)), out, final)
            self._ln.read(buf, i, p)
            if k == n:   # only whitespace so far: what follows its last line break is held
                if not final and p < n:
                    self._held = buf[p:]
                    self._ws_hold = not rules._ws_lead
                return -1
            self._lead_due = self._lead_nl = False
            if not self._ans_ws:
                self._gap_due = True   # (the run, or a line break, waits for the answer's next text)
            i = p
        if rules.start_pairs and self._at_start and not self._seen_tag:
            got = self._start_pair(buf, i, out, final)
            if got is not None:
                return got
        pattern = rules._content_re
        kinds = self._answer_kinds
        ln = self._ln
        # (Whitespace held at the start is read again when it goes out: the state from before it.)
        ln0 = ln.copy() if self._at_start and rules.trim and not final else None
        pos = i
        seen = i       # line and code state are up to date to here
        cut = -1       # where an undecided tag starts
        while True:
            m = pattern.search(buf, pos)
            if m is None:
                break
            j = m.start()
            tag = m.group()
            if not final and rules.undecided(buf, j, tag):
                cut = j
                break
            self._observe(buf, seen, j)  # line and code state up to the candidate
            seen = j
            verdict, at = _PASS
            for handle in kinds[tag]:   # (the first kind that decides; none: text)
                verdict, at = handle(self, buf, i, j, tag, out, final)
                if verdict != PASS:
                    break
            if verdict == RETURN:
                return at
            if verdict == RESCAN:   # (the whitespace the tag's removal went past is read as text)
                i = pos = at
                seen = j + len(tag)
                continue
            if verdict == HOLD:
                cut = j
                break
            # A tag that does not count here is answer text: keep scanning, emit it all at once
            # (emitting piece by piece would copy the growing piece each time).
            pos = at if verdict == SKIP else j + 1
        # No tag in the rest: hold back a partial tag (or one still undecided).
        rest_start = i
        if final:
            cut = n - self._cut_tail(buf[rest_start:], rules._content_prefixes, rules._longest, rules._first_re)
        elif cut < 0:
            cut = n - partial_tag_len(buf[rest_start:] if rest_start else buf, rules._content_prefixes,
                                       rules._longest, rules._first_re)
        self._observe(buf, seen, cut)
        if cut < n and ln.in_code() and not ln.indented_code():
            # In code no tag or marker counts (but a closing tag after indented code): no need to wait.
            self._observe(buf, cut, n)
            cut = n
        text = buf[rest_start:cut]
        if not final:
            self._undecided = buf[cut:]
        if ln0 is not None and self._at_start and not text.strip(WS):
            # Only whitespace at the output's start: held whole (it goes if a block opens next),
            # read again from where the scan began.
            self._held = text
            self._ws_hold = cut == n and bool(text) and not rules._ws_lead
            ln.restore(ln0)
        elif final and cut < n:
            self.markup_chars += n - cut   # a marker cut off at the end (cut_off_marker)
            ws._answer_tail(text, buf[cut:], out)
            self._given(text)
        else:
            ws._answer_tail(text, "", out)
            self._given(text)
        return -1

    def _tool_head(self, buf: str, i: int, j: int, tag: str, out: list[Piece], final: bool) -> Verdict:
        """A tool call's header: the call goes out as written, up to its end marker."""
        if not self._opening_counts(tag):
            return _PASS
        self._ws.take(make(Token, (TOOL_HEAD, buf[i:j], "", "", False)), out, final)
        self._given(buf[i:j])
        self._tool = self.rules._tool_of[tag]
        self._go(Event.TOOL_HEAD)
        return RETURN, j

    def _strip(self, buf: str, i: int, j: int, tag: str, out: list[Piece], final: bool) -> Verdict:
        """A marker that leaves the answer (outside code: in code, a marker is text)."""
        if self._ln.in_code():
            return _PASS
        self.markup_chars += len(tag)
        if self._boundary:  # a wrapper opening the answer: trim after it as after a block
            self._ws.take(make(Token, (WRAPPER, buf[i:j], tag, "", False)), out, final)
            self._given(buf[i:j])
            self._lead_due = self.rules.trim
            return RETURN, j + len(tag)
        return self._removed(buf, i, j, tag, out, final)

    def _removed(self, buf: str, i: int, j: int, tag: str, out: list[Piece], final: bool) -> Verdict:
        """A tag removed from the middle of the answer. Where the answer ends in whitespace there,
        or is not trimmed, its text goes on after the tag (REMOVED_KEPT); else what follows the tag
        is as after a block: at the start boundary, where the answer is empty or ends in
        whitespace, trimmed (REMOVED_AT_START); elsewhere, whitespace (or a line break put there)
        goes in front of the answer's next text (REMOVED). Only whitespace after it yet (trimming):
        held, and what follows is trimmed as after a block."""
        end = j + len(tag)
        k = _ws_end(buf, end)
        n = len(buf)
        text = buf[i:j]
        start = self._boundary and self._ans_ws and not self._gap_due
        if not start and text:
            self._kept_end = KEPT_WS if text[-1] in WS else KEPT_TEXT
        if not self.rules.trim or not start and (
                self._kept_end in (KEPT_WS, KEPT_GAP) if self._kept_end else self._ans_ws or self._gap_due):
            self._ws.take(make(Token, (REMOVED_KEPT, text, tag, buf[end:k], k == n)), out, final)
            return RESCAN, end   # (the whitespace after it is the answer's text)
        self._ws.take(make(Token, (REMOVED_AT_START if start else REMOVED, text, tag, buf[end:k], k == n)), out, final)
        if start:
            self._kept_end = KEPT_NONE   # (the whitespace kept before it went)
        elif k < n:
            self._kept_end = KEPT_GAP
        if k < n or final:
            return RESCAN, k
        self._lead_due = True   # only whitespace after it yet: held, then trimmed as after a block
        self._held = buf[end:]
        self._ws_hold = k > end and not self.rules._ws_lead
        self._given("")
        return RETURN, -1

    def _resumes(self, buf: str, i: int, j: int, tag: str, out: list[Piece], final: bool) -> Verdict:
        """The end of a tool block inside reasoning: the reasoning goes on after it."""
        if self._resume is None or tag != self._resume[0] or self._ln.in_code():
            return _PASS
        end = j + len(tag)
        self._at_start = False   # (the marker goes out as answer text)
        self._given(buf[i:end], True)
        self._open_block(self._resume[1], out, make(Token, (RESUME, buf[i:end], "", "", False)), Event.RESUME)
        return RETURN, end

    def _opens(self, buf: str, i: int, j: int, tag: str, out: list[Piece], final: bool) -> Verdict:
        """An opening tag in the answer: a block opens where it counts, or where a whole pair
        stands on the line after a first block; else it is text, and so is its closing tag."""
        ln = self._ln
        pair = self.rules._by_open[tag]
        whole = self._seen_tag and not ln.in_code() and self._pair_follows(buf, j + len(tag), pair, final)
        if whole is None:
            return _HOLD                 # a pair after a first block? what follows decides: wait
        if whole or self._opening_counts(tag):
            self._given(buf[i:j], True)
            self._open_block(pair, out, make(Token, (OPEN, buf[i:j], tag, "", False)), Event.OPEN)
            self.markup_chars += len(tag)
            return RETURN, j + len(tag)
        if not ln.in_code() or ln.indented_code():
            # An opening tag kept as text (mid-sentence, an example): its closing tag is text too.
            self._literal[pair.close] = self._literal.get(pair.close, 0) + 1
        return _TEXT

    def _closes(self, buf: str, i: int, j: int, tag: str, out: list[Piece], final: bool) -> Verdict:
        """A closing tag with no block open."""
        if not self._ln.close_counts(in_fence=False):
            return _PASS
        prose = False if self._tag_counts(tag) else self._prose_close(buf, j + len(tag), final)
        if self._literal.get(tag):
            self._literal[tag] -= 1          # closes a pair written as text: text
            return _TEXT
        if prose is None:
            return _HOLD                     # what follows it decides: wait
        if prose:
            return _TEXT                     # prose that names the tag: text
        if self._seen_tag:
            # A closing tag with no block open, after one: markup, removed.
            self.markup_chars += len(tag)
            return self._removed(buf, i, j, tag, out, final)
        # A closing tag with no opening tag: the block was opened in the prompt.
        self.stray_closes += 1
        self._seen_tag = True
        if not self._at_start:
            # The text before it went out as answer (a stream cannot take it back): the tag
            # stays, as written, where the reasoning ended (a body re-splits from inside:
            # thinkwire.context). Removed, the two would run together.
            self.stray_after_text += 1
            return SKIP, j + len(tag)
        self._ws.take(make(Token, (WRAPPER, buf[i:j], tag, "", False)), out, final)
        self._given(buf[i:j])
        self._lead_due = self.rules.trim
        self.markup_chars += len(tag)
        self._new_line()
        return RETURN, j + len(tag)

    def _tool_call(self, buf: str, i: int, out: list[Piece], final: bool) -> int:
        """In a tool call, from its header to its end marker (`Rules.tools`): all of it is answer
        text, as the model wrote it (strip markers, tags and code alike), for a tool parser. Where
        the scan goes on after its end marker, or -1: the rest was given (a partial end marker
        held)."""
        scan = self._tool
        assert scan is not None and self._mode is TOOL_CALL
        m = scan.regex.search(buf, i)
        if m is not None:
            end = m.end()
            self._observe(buf, i, end)
            self._ws.take(make(Token, (CALL, buf[i:end], "", "", False)), out, final)
            self._given(buf[i:end])
            self._tool = None
            self._go(Event.TOOL_END)
            self._ln.reset()   # (a backtick in the call's arguments opens no code span after it)
            return end
        n = len(buf)
        cut = n if final else n - partial_tag_len(buf[i:], scan.prefixes, scan.longest, scan.first)
        self._observe(buf, i, cut)
        self._ws.take(make(Token, (CALL, buf[i:cut], "", "", False)), out, final)
        self._given(buf[i:cut])
        self._undecided = buf[cut:]
        return -1

    def _start_pair(self, buf: str, i: int, out: list[Piece], final: bool) -> int | None:
        """At the very start of the output (after whitespace): the opening tag of a start pair
        opens its block; the start of one waits for the rest. None: neither (the answer goes on)."""
        j = i
        while j < len(buf) and buf[j] in WS:
            j += 1
        rest = buf[j:]
        if not rest:
            return None
        for pair in self.rules.start_pairs:
            if rest.startswith(pair.open):
                self._open_block(pair, out, make(Token, (START, buf[i:j], pair.open, "", False)), Event.OPEN)
                self.markup_chars += len(pair.open)
                return j + len(pair.open)
        if not final and any(p.open.startswith(rest) for p in self.rules.start_pairs):
            self._undecided = buf[i:]   # (what is held at the start is read again: linear, it is short)
            return -1
        return None

    def _open_block(self, pair: TagPair, out: list[Piece], tok: Token, event: Event) -> None:
        """A block of `pair` opens (`tok`: OPEN, after its opening tag; RESUME, after a marker
        that resumes reasoning; START, a start pair's tag at the output's start)."""
        self._ws.take(tok, out, False)
        self._lead_due = self.rules.trim
        self._pair = pair
        self._go(event)
        self._seen_tag = True
        self._literal.clear()
        self._resume = None
        self._ln.reset()
        self._fresh = True
        self.blocks += 1

    def _new_line(self) -> None:
        """After a block or a closing tag: the answer starts afresh there."""
        self._boundary = True
        self._ln.reset()

    def _observe(self, buf: str, i: int, j: int) -> None:
        """Read buf[i:j] of the answer: line and code state, and the start boundary."""
        if i >= j:
            return
        if self._boundary and buf[i:j].strip(WS):   # (at the start, the boundary is too)
            self._boundary = self._at_start = False
        self._ln.read(buf, i, j)


_END_ONLY: tuple[Handler, ...] = (Recognition._end_marker,)
# `_bscan` before any block opened (never read: a block's scan is looked up as it opens).
NO_SCAN = _Scan(re.compile("(?!)"), frozenset(), re.compile("(?!)"), 0)


@lru_cache(maxsize=256)
def answer_kinds(rules: Rules) -> dict[str, tuple[Handler, ...]]:
    """Each tag the answer's scan finds -> its kinds, in the order they decide: a tool call's
    header, a strip marker, the marker that resumes reasoning, an opening tag, a closing tag (an
    opening tag decides for itself: a tag that is both is never taken as a closing one)."""
    resumes = frozenset(r for _, r in rules.resumes)
    table: list[tuple[Callable[[str], bool], Handler]] = [
        (lambda t: t in rules._tool_of, Recognition._tool_head),
        (lambda t: t in rules._strip, Recognition._strip),
        (lambda t: t in resumes, Recognition._resumes),
        (lambda t: t in rules._by_open, Recognition._opens),
        (lambda t: t in rules._by_close and t not in rules._by_open, Recognition._closes),
    ]
    tags = set(rules._tool_of) | rules._strip | resumes | set(rules._by_open) | set(rules._by_close)
    return {t: tuple(h for applies, h in table if applies(t)) for t in tags}


@lru_cache(maxsize=256)
def block_kinds(rules: Rules) -> dict[str, tuple[Handler, ...]]:
    """Each tag a block's scan finds -> its kinds, in order: the open block's closing tag, the
    model's own opening tag in the block the template opened, a marker that ends reasoning
    (any other tag the scan finds: `Rules.ends`, `Rules.start_ends`)."""
    # (A start pair's closing tag, gpt-oss's `assistantfinal`, closes only its own block.)
    closes = set(rules._by_close) | {p.close for p in rules.start_pairs}
    table: list[tuple[Callable[[str], bool], Handler]] = [
        (lambda t: t in closes, Recognition._close),
        (lambda t: t in rules._by_open, Recognition._own_open),
        (lambda t: True, Recognition._end_marker),
    ]
    tags = closes | set(rules._by_open) | set(rules.ends) | set(rules.start_ends)
    return {t: tuple(h for applies, h in table if applies(t)) for t in tags}

