"""The streaming tag splitter: text in, reasoning and content pieces out.

Pure and I/O-free. One `Splitter` per stream and per choice; `feed(text)` returns the
pieces it can decide now, holding back only what could still become a tag (and, when
trimming, whitespace that might turn out to sit at the edge of a block); `finish()` flushes.
A whole body goes through the same object (`split_text`), so streams and bodies agree (but where
a body can look ahead: see `split_text`). Where a tag counts depends on the line and code state
(thinkwire.lines), read over reasoning and answer alike.

Pieces are tuples `(kind, value)`:
  (REASONING, text)  reasoning text, in order
  (CONTENT, text)    answer text, in order
  (END, TagPair)     a reasoning block ended (closed, or cut off by the end of output): the
                     markup as the model wrote it on each side of the block's text, for the way back
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lines import Lines, indent
from .rules import WS, Rules, TagPair, Written, cut_off_marker, partial_tag_len

REASONING = 0
CONTENT = 1
END = 2

_SEPARATOR = "\n"   # between answer pieces that meet across a removed block or tag with no whitespace
_HELD_WS = " \t\r\n\f"
# After a first block, an opening tag mid-line whose closing tag follows on its line within this
# many characters is a block (a stream holds that much at most, from the tag, to tell).
PAIR_ON_LINE = 2000   # the whitespace thinkwire.hot carries: its JSON escapes are short


class Splitter:
    """Incremental splitter for one stream of model output text (a body is one `feed`)."""

    __slots__ = (
        "rules", "_held", "_pair", "_inside", "_skip_ws", "_at_start", "_boundary", "_ln", "_answer_ws", "_gap",
        "_gap_added", "added_chars", "_rsep", "_reasoning_ws", "_resume",
        "_seen_tag", "_lead_open", "_fresh", "_literal",
        "blocks", "reasoning_chars", "stray_closes", "stray_after_text", "markup_chars", "_ws_hold", "_ws_more",
        "_w_open", "_w_close", "_pend", "_lead_ws", "_ws_nl", "_tool", "_cut_off",
    )

    def __init__(self, rules: Rules, starts_inside: bool | None = None) -> None:
        self.rules = rules
        inside = rules.starts_inside if starts_inside is None else starts_inside
        self._held = ""          # undecided text, carried into the next feed
        self._inside = inside    # inside a reasoning block
        self._pair: TagPair | None = None  # the pair whose block is open (None: any close)
        self._skip_ws = rules.trim and inside  # drop leading whitespace of a block / of content after it
        self._at_start = not inside  # nothing but whitespace has been written yet
        self._boundary = True    # start of output or just after a block: an opening tag counts here
        self._ln = Lines()       # line and code state of the text read so far (afresh at each block's edge)
        self._answer_ws = True   # the answer so far is empty or ends in whitespace
        self._gap = ""           # whitespace after a block, kept for the answer's next text (no glued words)
        self._gap_added = 0      # ... of which line breaks put there (the model wrote no whitespace)
        self._reasoning_ws = True   # the reasoning so far is empty or ends in whitespace
        self._rsep = False       # a line break goes in front of the reasoning's next text, if not whitespace
        self._resume: tuple | None = None   # (marker, pair): the reasoning goes on after that marker
        self._seen_tag = inside  # a block was opened or closed: a stray closing tag no longer counts
        # Starting inside, until the block closes: an opening tag written anyway is dropped.
        self._lead_open = inside
        self._fresh = inside     # the open block has no text yet
        self._literal: dict[str, int] = {}  # closing tag -> opening tags of its pair kept as text
        self.blocks = 1 if inside else 0
        self.reasoning_chars = 0
        self.stray_closes = 0
        self.stray_after_text = 0   # ... of which with text before them (what learning counts)
        self.markup_chars = 0    # characters of tags removed (for accounting: nothing else goes)
        self.added_chars = 0     # line breaks put between answer text that would run together (trimming)
        # Only whitespace is held, and more whitespace would only be held too (trimming: at the
        # start of the output, or at the end of a reasoning block so far). More whitespace then
        # goes to _ws_more without re-reading what is held: linear in a long whitespace run.
        self._ws_hold = False
        self._ws_more: list[str] = []
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
        self._ws_nl = False   # the whitespace being trimmed held a line break (see `_trim_end`)
        self._tool = None     # in a tool call (`Rules.tools`): the scan for its end marker
        self._cut_off = False   # finishing an output cut off at the token limit (`finish`)

    # -- public API ---------------------------------------------------------------------
    def feed(self, text: str) -> list:
        if not text:
            return []
        if not self._held and not self._skip_ws and not self._rsep:
            # The common case, a token in the middle of a block or of the answer: nothing held,
            # no character that could start a tag: it goes out as it is.
            if self._inside:
                if (self.rules.scan(self._pair, self._lead_open).first.search(text) is None
                        and not (self.rules.trim and text[-1] in WS)):
                    self._ln.read(text)
                    return [self._plain_reasoning(text)]
            elif not self._at_start and not self._gap and not self._pend:
                if self.rules._plain_re.search(text) is None:
                    self._plain_answer(text)
                    return [(CONTENT, text)]
        elif self._ws_hold and not text.strip(WS):
            self._ws_more.append(text)
            return []
        out: list = []
        held = self._take_held()
        self._run(held + text if held else text, out, final=False)
        return out

    def holds_tag(self) -> bool:
        """Whether what is held is more than whitespace (the start of a tag, or one undecided):
        what `finish` gives then depends on how the output ended."""
        return bool(self._held) and not self._ws_hold

    @property
    def inside(self) -> bool:
        """Inside a reasoning block."""
        return self._inside

    def resume(self, text: str) -> None:
        """Go on from the state `text` leaves, without giving it: a prefill the request put at
        the start of the assistant's turn, which the client already has (its code state and an
        open block carry over). What it leaves undecided is dropped: a tag cut at the prefill's
        end is not completed by the output."""
        self.feed(text)
        self._take_held()
        self._pend = False   # (the prefill's block, which the client has)
        self._w_open = (self._pair or self.rules.pairs[0]).open if self._inside else ""
        self._w_close = self._lead_ws = ""
        self.reasoning_chars = self.stray_closes = self.stray_after_text = self.markup_chars = self.added_chars = 0

    def plain(self, text: str) -> tuple[int, str] | None:
        """`feed(text)` for a non-empty text with no character that could start any tag or
        marker of the rules (`Rules.may_hold_tag`; the byte fast path checks that): the one
        piece it gives, with the state `feed` leaves. None, with nothing changed, where `feed`
        must decide: text held other than trailing whitespace, whitespace being trimmed at a
        block's start or the output's, or nothing to give yet."""
        if self._skip_ws:
            return None
        if not self._inside:
            if self._held or self._at_start or self._gap or self._pend:
                return None
            self._plain_answer(text)
            return (CONTENT, text)
        if self._pair in self.rules.start_pairs or self._rsep:
            return None       # its tags are words: no character tells them apart; a line break may go first
        trim = self.rules.trim
        if self._held:
            if not self._ws_hold:
                return None   # a partial tag
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
        return self._plain_reasoning(text)

    def steady(self) -> int | None:
        """CONTENT or REASONING when `plain` takes any plain text (one that holds no character a
        tag or marker starts with: `Rules.tag_starts`), whatever plain texts it took before in
        this state, and gives it as it is, with what is held in front: in reasoning, the
        whitespace `held_ws` gives, which trimming holds again at the text's end; in the answer,
        nothing. thinkwire.hot takes such texts in C; `took` folds them in. None: `feed` decides
        each text."""
        if self._skip_ws:
            return None
        if self._inside:
            # (A start pair's tags are words: no table of characters holds them.)
            return None if self.held_ws() is None or self._pair in self.rules.start_pairs or self._rsep else REASONING
        return None if self._at_start or self._held or self._gap or self._pend else CONTENT

    def held_ws(self) -> str | None:
        """In a block: the whitespace held at its end so far, which goes out in front of the
        next text unless the block ends first ("" for none); None when something else is held
        (a partial tag, or more than a short run of whitespace)."""
        if not self._held:
            return ""
        ok = self._ws_hold and not self._ws_more and len(self._held) <= 32 and not self._held.strip(_HELD_WS)
        return self._held if ok else None

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
        if piece is None or piece[0] != kind:
            raise ValueError("took: a text the splitter must decide, or not of the steady kind")
        return piece[1]

    def _plain_reasoning(self, text: str) -> tuple[int, str]:
        self.reasoning_chars += len(text)
        self._fresh = False
        self._reasoning_ws = text[-1] in WS
        return (REASONING, text)

    def _plain_answer(self, text: str) -> None:
        self._ln.read(text)   # only the line and code state move
        if self._boundary and text.strip(WS):
            self._boundary = False
        self._answer_ws = text[-1] in WS

    def finish(self, cut_off: bool = False) -> list:
        """The rest. `cut_off`: the output was cut at the token limit, so a tail that is only
        the start of a tag or marker (`<thi`, `work</thi`, `Partial result<|e`) is markup cut
        short, and goes (`_cut_tail`); otherwise only one that begins with a whole special token."""
        self._cut_off = cut_off
        out: list = []
        held = self._take_held()
        if held:
            self._run(held, out, final=True)
        self._flush_end(out)
        if self._inside:   # cut off: no closing tag was written
            out.append((END, TagPair(self._w_open, self._w_close)))
            self._inside = False
        return out

    def _run(self, buf: str, out: list, final: bool) -> None:
        i = 0
        n = len(buf)
        while i < n:
            i = self._reasoning(buf, i, out, final) if self._inside else self._content(buf, i, out, final)
            if i < 0:  # the rest was held back (or, at the end, written)
                break

    def _take_held(self) -> str:
        held = self._held
        if self._ws_more:
            held += "".join(self._ws_more)
            self._ws_more.clear()
        self._held = ""
        self._ws_hold = False
        return held

    # -- inside a reasoning block -------------------------------------------------------
    def _reasoning(self, buf: str, i: int, out: list, final: bool) -> int:
        rules = self.rules
        n = len(buf)
        if self._skip_ws:
            j, keep = self._trim_end(buf, i, final)
            self._ln.read(buf, i, keep)   # (trimmed, but it still ends a line: "\r~~~" is no fence)
            self._w_open += buf[i:keep]
            if j == n:
                self._held = "" if final else buf[keep:]   # (perhaps the first line's indentation)
                return -1  # all whitespace so far: dropped
            i = keep
            self._skip_ws = self._ws_nl = False
        if self._rsep:   # (see the opening tag dropped below)
            self._rsep = False
            if buf[i] not in WS:
                self._dropped(out, True, "", len(_SEPARATOR))
                self._emit_reasoning(_SEPARATOR, out)
                self.added_chars += len(_SEPARATOR)
        scan = rules.scan(self._pair, self._lead_open)
        ln = self._ln
        pos = seen = i
        hold = -1
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
            close = self._pair.close if self._pair is not None else (tag if tag in rules._by_close else None)
            if tag == close:
                # In code it is text; in a fence the block still closes at a line's start.
                if ln.close_counts():
                    self._end_block(buf[i:j], out, tag)
                    self.markup_chars += len(tag)
                    return j + len(tag)
            elif self._lead_open and tag in rules._by_open:
                if self._opening_counts(tag):
                    # The template opened the block, and the model wrote the tag anyway: drop it.
                    self._emit_reasoning(buf[i:j], out)
                    self._skip_ws = rules.trim and self._fresh   # nothing written yet: trim as at the start
                    if self._fresh:
                        # The model's own tag goes back in place of the one the prompt was taken
                        # to hold: where a model writes it, its template most often did not (Ollama's).
                        t = rules.pairs[0].open
                        self._w_open = (self._w_open[len(t):] if self._w_open.startswith(t) else self._w_open) + tag
                    # Reasoning on both sides with no whitespace between gets a line break.
                    self._rsep = rules.trim and not self._fresh and not self._reasoning_ws
                    if not self._fresh:
                        self._dropped(out, True, tag)
                    self._pair = rules._by_open[tag]
                    self._lead_open = False
                    self.markup_chars += len(tag)
                    return j + len(tag)
            elif self._ends_here(buf, j, tag):
                # A marker that ends reasoning (a tool call, a channel header): it stays in the output.
                pair = self._pair or rules.pairs[0]
                self._end_block(buf[i:j], out)
                resume = rules._resume_of.get(tag)
                self._resume = (resume, pair) if resume is not None else None
                return j
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
        body = rest[: len(rest) - hold]
        if final:
            self._w_close = rest[len(body.rstrip(WS) if rules.trim else body):]   # what the end drops
        if rules.trim:
            kept = body.rstrip(WS)
            self._held = "" if final else body[len(kept):] + rest[len(body):]
            self._ws_hold = not hold and bool(self._held) and not rules._ws_lead
            body = kept
        else:
            self._held = "" if final else rest[len(body):]
        ln.read(buf, seen, max(seen, i + len(body)))   # (what is held is read when it goes out)
        self._emit_reasoning(body, out)
        return -1

    def _ends_here(self, buf: str, j: int, tag: str) -> bool:
        """Whether a marker that ends reasoning does so at buf[j]: only where a tool call starts
        (the block's start, a line's start, right after the reasoning's text), never in code or
        where prose names it (after a space or a quote). In a body as in a stream: a call written
        before the block's closing tag goes to the answer too, for a tool parser."""
        ln = self._ln
        if ln.in_code() or not (ln.blank or ln.glued()):
            return False
        # (Where a resume marker follows the call, the reasoning goes on after it: `Rules.resumes`.)
        return True

    def _end_block(self, text: str, out: list, tag: str = "") -> None:
        """The open block ends before `tag` (its closing tag; "" for a marker that stays in the
        output), `text` its last text."""
        kept = text.rstrip(WS) if self.rules.trim else text
        self._emit_reasoning(kept, out)
        self._w_close = text[len(kept):] + tag
        self._pend = True
        if not self.rules.trim:
            self._flush_end(out)   # nothing after it is trimmed
        self._inside = False
        self._pair = None
        self._lead_open = False
        self._seen_tag = True
        self._new_line()
        self._skip_ws = self.rules.trim

    def _flush_end(self, out: list, added: int = 0) -> None:
        """The END of the block that closed, once what it dropped after its closing tag is known
        (`added`: the characters put in front of the answer's text that follows)."""
        if self._pend:
            self._pend = False
            out.append((END, Written(self._w_open, self._w_close, added) if added
                        else TagPair(self._w_open, self._w_close)))

    def _emit_reasoning(self, text: str, out: list) -> None:
        if text:
            self._fresh = False
            self._reasoning_ws = text[-1] in WS
            self.reasoning_chars += len(text)
            if out and out[-1][0] == REASONING:
                out[-1] = (REASONING, out[-1][1] + text)
            else:
                out.append((REASONING, text))

    # -- in the answer ------------------------------------------------------------------
    def _content(self, buf: str, i: int, out: list, final: bool) -> int:
        rules = self.rules
        n = len(buf)
        if self._tool is not None:
            i = self._tool_call(buf, i, out, final)
            if i < 0 or i == n:
                return -1
        if self._skip_ws:  # right after a block: trim whitespace, an opening tag still counts
            j, keep = self._trim_end(buf, i, final)
            if not self._answer_ws:
                keep = j   # (kept whole, between answer texts)
            if self._answer_ws or (final and j == n):
                if not self._pend and keep > i:
                    self._dropped(out, False, buf[i:keep], 0, len(self._gap))
                self._w_close += buf[i:keep]   # trimmed after the block (kept between answer texts)
            if j == n and not self._answer_ws and not final:
                # The answer may go on, after text that does not end in whitespace: this
                # whitespace then stays (no words glued together). (Held: it is read when it goes.)
                self._held = buf[i:]
                self._ws_hold = not rules._ws_lead
                return -1
            self._ln.read(buf, i, keep)   # (what is held is read when it goes out)
            if j == n:
                if not final and keep < n:
                    self._held = buf[keep:]   # perhaps the first line's indentation
                    self._ws_hold = not rules._ws_lead
                return -1
            if self._answer_ws:
                j = keep   # the first line's indentation stays
            if not self._answer_ws:
                # It goes out in front of the answer's next text, if any; where the model wrote no
                # whitespace on either side, a line break does (words never run together).
                if j > i:
                    self._gap += buf[i:j]
                else:
                    if not self._pend:
                        self._dropped(out, False, "", len(_SEPARATOR), len(self._gap))
                    self._gap += _SEPARATOR
                    self._gap_added += len(_SEPARATOR)
            i = j
            self._skip_ws = self._ws_nl = False
        if rules.start_pairs and self._at_start and not self._seen_tag:
            got = self._start_pair(buf, i, out, final)
            if got is not None:
                return got
        pattern = rules._content_re
        ln = self._ln
        # (Whitespace held at the start is read again when it goes out: the state from before it.)
        ln0 = ln.copy() if self._at_start and rules.trim and not final else None
        pos = i
        seen = i       # line and code state are up to date to here
        kept: list[str] = []  # answer text between removed markers, emitted as one piece
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
            tool = rules._tool_of.get(tag)
            if tool is not None and self._opening_counts(tag):
                # A tool call's header: the call goes out as written, up to its end marker.
                if kept and isinstance(kept[-1], tuple) and kept[-1][1]:
                    kept.pop()   # (no line break put before it: a header is no word to keep apart)
                self._emit_kept(kept, out, buf[i:j])
                if self._gap_added:
                    self._gap, self._gap_added = "", 0
                self._tool = tool
                return j
            if tag in rules._strip and not ln.in_code():   # (in code, a marker is text)
                self.markup_chars += len(tag)
                if self._boundary:  # a wrapper opening the answer: trim after it as after a block
                    self._emit_kept(kept, out, buf[i:j])
                    if self._pend:
                        self._w_close += tag   # (written after the block: the way back has it)
                    self._skip_ws = rules.trim
                    return j + len(tag)
                i = pos = seen = self._remove(buf, i, j, tag, kept, final, out)
                if i < 0:
                    self._emit_kept(kept, out)
                    return -1
                continue
            if self._resume is not None and tag == self._resume[0] and not ln.in_code():
                # The end of a tool block inside reasoning: the reasoning goes on after it.
                end = j + len(tag)
                self._emit_kept(kept, out, buf[i:end], before_block=True)
                self._open_block(self._resume[1], out, "")
                return end
            pair = rules._by_open.get(tag)
            if pair is not None:
                whole = self._seen_tag and not ln.in_code() and self._pair_follows(buf, j + len(tag), pair, final)
                if whole is None:
                    cut = j                  # a pair after a first block? what follows decides: wait
                    break
                if whole or self._opening_counts(tag):
                    self._emit_kept(kept, out, buf[i:j], before_block=True)
                    self._open_block(pair, out, tag)
                    self.markup_chars += len(tag)
                    return j + len(tag)
                if not ln.in_code() or ln.indented_code():
                    # An opening tag kept as text (mid-sentence, an example): its closing tag is text too.
                    self._literal[pair.close] = self._literal.get(pair.close, 0) + 1
            elif tag in rules._by_close and ln.close_counts(in_fence=False):
                prose = False if self._tag_counts(tag) else self._prose_close(buf, j + len(tag), final)
                if self._literal.get(tag):
                    self._literal[tag] -= 1          # closes a pair written as text: text
                elif prose is None:
                    cut = j                          # what follows it decides: wait
                    break
                elif prose:
                    pass                             # prose that names the tag: text
                elif not self._seen_tag:
                    # A closing tag with no opening tag: the block was opened in the prompt.
                    self.stray_closes += 1
                    self._seen_tag = True
                    if not self._at_start or buf[i:j].strip(WS) or any(
                            isinstance(p, str) and p.strip(WS) for p in kept):
                        # The text before it went out as answer (a stream cannot take it back):
                        # the tag stays, as written, where the reasoning ended (a body re-splits
                        # from inside: thinkwire.context). Removed, the two would run together.
                        self.stray_after_text += 1
                        pos = j + len(tag)
                        continue
                    self._emit_kept(kept, out, buf[i:j])
                    self.markup_chars += len(tag)
                    self._new_line()
                    self._skip_ws = rules.trim
                    return j + len(tag)
                else:
                    # A closing tag with no block open, after one: markup, removed.
                    self.markup_chars += len(tag)
                    i = pos = seen = self._remove(buf, i, j, tag, kept, final, out)
                    if i < 0:
                        self._emit_kept(kept, out)
                        return -1
                    continue
            # A tag that does not count here is answer text: keep scanning, emit it all at once
            # (emitting piece by piece would copy the growing piece each time).
            pos = j + 1
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
        if not final and self._at_start and rules.trim and buf[rest_start:cut].strip(WS) == "" and not any(
                p.strip(WS) for p in kept):   # (at the start no gap is kept: the answer is empty)
            # Only whitespace so far: wait, it is dropped if a block opens next.
            self._ln = ln0
            self._held = "".join(kept) + buf[rest_start:]
            self._ws_hold = cut == n and bool(self._held) and not rules._ws_lead
            return -1
        self._emit_kept(kept, out, buf[rest_start:cut])
        if final:
            self.markup_chars += n - cut   # a marker cut off at the end (cut_off_marker)
        else:
            self._held = buf[cut:]
        return -1

    def _cut_tail(self, text: str, prefixes: frozenset[str], longest: int, first: re.Pattern[str]) -> int:
        """At the output's end: the length of the tag or marker cut off there, which goes. At the
        token limit, any start of one but a lone first character (`a <`, `[`: a comparison, a
        bracket); else one that begins with a whole special token (`cut_off_marker`)."""
        if self._cut_off:
            k = partial_tag_len(text, prefixes, longest, first)
            if k >= 2:
                return k
        return cut_off_marker(text, prefixes, longest, first)

    def _tool_call(self, buf: str, i: int, out: list, final: bool) -> int:
        """In a tool call, from its header to its end marker (`Rules.tools`): all of it is answer
        text, as the model wrote it (strip markers, tags and code alike), for a tool parser. Where
        the scan goes on after its end marker, or -1: the rest was given (a partial end marker
        held)."""
        scan = self._tool
        m = scan.regex.search(buf, i)
        if m is not None:
            end = m.end()
            self._observe(buf, i, end)
            self._emit_content(buf[i:end], out, False)
            self._tool = None
            self._ln.reset()   # (a backtick in the call's arguments opens no code span after it)
            return end
        n = len(buf)
        cut = n if final else n - partial_tag_len(buf[i:], scan.prefixes, scan.longest, scan.first)
        self._observe(buf, i, cut)
        self._emit_content(buf[i:cut], out, False)
        self._held = buf[cut:]
        return -1

    def _trim_end(self, buf: str, i: int, final: bool) -> tuple[int, int]:
        """Trimming the whitespace at buf[i:] (a block's start, the answer's after it): (where it
        ends, where what stays of it starts). Blank lines go; the first line's indentation (what
        follows the run's last line break) stays where it makes indented code (CommonMark: four
        columns, a tab), so code keeps its shape. Whitespace on the tag's own line goes.
        While only whitespace has come, what follows its last line break is kept for now (the
        caller holds it): it may be that indentation."""
        n = len(buf)
        j = i
        while j < n and buf[j] in WS:
            j += 1
        nl = max(buf.rfind("\n", i, j), buf.rfind("\r", i, j))
        if nl >= 0:
            self._ws_nl = True
        if not self._ws_nl or (final and j == n):
            return j, j
        start = nl + 1 if nl >= 0 else i
        if j < n and indent(buf[start:j]) < 4:
            return j, j   # (less than code's indentation means nothing in Markdown: it goes)
        return j, start

    def _start_pair(self, buf: str, i: int, out: list, final: bool) -> int | None:
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
                self._lead_ws = buf[i:j]
                self._open_block(pair, out, pair.open)
                self.markup_chars += len(pair.open)
                return j + len(pair.open)
        if not final and any(p.open.startswith(rest) for p in self.rules.start_pairs):
            self._held = buf[i:]   # (what is held at the start is read again: linear, it is short)
            return -1
        return None

    def _remove(self, buf: str, i: int, j: int, tag: str, kept: list, final: bool, out: list) -> int:
        """A tag removed from the middle of the answer at buf[j], the text since i kept. Where the
        answer does not end in whitespace there (trimming), what follows the tag is as after a
        block: whitespace, or a line break where there is none, goes in front of the answer's
        next text (a gap in `kept`), and is trimmed before a block or at the end. Returns where
        the scan goes on, or -1: only whitespace follows yet, held for the next feed."""
        if j > i:
            kept.append(buf[i:j])
        end = j + len(tag)
        gap = len(self._gap)   # (what goes, for the way back: `_dropped`)
        if not self.rules.trim:
            self._dropped(out, False, tag, 0, gap, kept)
            return end
        # Right after a block, where the answer so far is empty or ends in whitespace: trimmed as
        # after the block itself (only whitespace was kept since).
        at_start = self._boundary and self._answer_ws and not self._gap
        if at_start:
            if self._pend:   # right after a block: what is dropped here is written after it
                self._w_close += "".join(p if isinstance(p, str) else p[0] for p in kept) + tag
            else:
                self._dropped(out, False, tag, 0, -1)
            kept.clear()
        elif isinstance(kept[-1], tuple) or kept[-1][-1] in WS if kept else self._answer_ws or self._gap:
            self._dropped(out, False, tag, 0, gap, kept)
            return end
        n = len(buf)
        k = end
        while k < n and buf[k] in WS:
            k += 1
        if at_start and self._pend and (k < n or final):
            self._w_close += buf[end:k]
        if not at_start:
            self._dropped(out, False, tag + (buf[end:k] if k == n and final else ""),
                          len(_SEPARATOR) if k == end < n else 0, gap, kept)
        if k == n:
            if final:
                self._ln.read(buf, end, k)
                return n
            self._held = buf[end:]   # (read when it goes out)
            self._ws_hold = bool(self._held) and not self.rules._ws_lead
            self._skip_ws = True
            return -1
        self._ln.read(buf, end, k)
        if not at_start:
            kept.append((buf[end:k], 0) if k > end else (_SEPARATOR, len(_SEPARATOR)))
        return k

    def _dropped(self, out: list, reasoning: bool, markup: str, added: int = 0, gap: int = 0,
                 kept: list | None = None) -> None:
        """A hook (thinkwire.written records the way back's layout with it; nothing here): `markup`
        went, and `added` line breaks were put in, in the open block's text (`reasoning`) or the
        answer, after what `out` (and the pieces before it) holds, then `gap` characters and the
        texts in `kept` still to go out (gap -1: the place is not known)."""

    def _open_block(self, pair: TagPair, out: list, tag: str) -> None:
        """A block of `pair` opens after `tag`, as written ("": a marker that resumes reasoning)."""
        self._flush_end(out)
        # (Whitespace between two blocks is trimmed: the model's part of it, not a line break put there.)
        self._w_open = self._lead_ws + ("" if self._gap_added else self._gap) + tag
        self._w_close = self._lead_ws = ""
        self._inside = True
        self._pair = pair
        self._fresh = True
        self._seen_tag = True
        self._literal.clear()
        self._skip_ws = self.rules.trim
        self._gap, self._gap_added = "", 0   # whitespace between two blocks: trimmed
        self._resume = None
        self._ln.reset()
        self.blocks += 1

    def _opening_counts(self, tag: str) -> bool:
        """Where a model writes an opening tag: at the start (or right after a block), at a
        line's start, right after its text on the line ("Sure.<think>"), and a special token
        (`<|...|>`) anywhere; never in code. Prose names a tag after a space or a quote ("what
        does <think> do?"): that stays text."""
        return not self._ln.in_code() and self._tag_counts(tag)

    def _tag_counts(self, tag: str) -> bool:
        """Outside code, where a model writes a tag in the answer (an opening tag, a closing tag
        with no block open): at the start or right after a block, at a line's start, right after
        its text on the line ("Reasoning.</think>"), a special token anywhere. After a space or a
        quote in the middle of a line, prose names it ("ends with </think> and"): text."""
        if self.rules.anywhere:
            return True
        ln = self._ln
        return ((self._boundary and not self._inside) or ln.blank or tag in self.rules._special
                or ln.glued())

    @staticmethod
    def _pair_follows(buf: str, start: int, pair: TagPair, final: bool) -> bool | None:
        """After a first block, an opening tag where prose would name it ("V1 <reasoning>"):
        whether its closing tag follows on the same line, within PAIR_ON_LINE characters (a
        whole pair is markup: a second block, not prose). None: the text so far cannot tell."""
        end = min(len(buf), start + PAIR_ON_LINE)
        close = buf.find(pair.close, start, end)
        line = buf.find("\n", start, end)
        if close >= 0 and (line < 0 or close < line):
            return True
        if line >= 0 or end < len(buf) or final or end == start + PAIR_ON_LINE:
            return False
        return None

    @staticmethod
    def _prose_close(buf: str, end: int, final: bool) -> bool | None:
        """A closing tag with no block open, after a space or a quote mid-line, ending at `end`:
        prose names it ("ends with </think> and", '"</think>"'), unless the text after it is
        glued to it, as markup is ("part1 </think>part2"). None: nothing follows it yet."""
        if end == len(buf):
            return None if not final else True
        return not buf[end].isalnum()

    def _new_line(self) -> None:
        """After a block or a closing tag: the answer starts afresh there."""
        self._boundary = True
        self._ln.reset()

    def _observe(self, buf: str, i: int, j: int) -> None:
        """Read buf[i:j] of the answer: line and code state, and the start boundary."""
        if i >= j:
            return
        if self._boundary and buf[i:j].strip(WS):
            self._boundary = False
        self._ln.read(buf, i, j)

    def _emit_kept(self, kept: list, out: list, rest: str = "", before_block: bool = False) -> None:
        """The answer's text kept since the last emission and `rest`, with the gaps `_remove`
        left: a gap at the end goes in front of the answer's next text, or is trimmed before a
        block."""
        if rest:
            kept.append(rest)
        if not kept:
            return
        gap = kept.pop() if isinstance(kept[-1], tuple) else None
        self.added_chars += sum(p[1] for p in kept if isinstance(p, tuple))
        text = "".join(p if isinstance(p, str) else p[0] for p in kept)
        kept.clear()
        self._emit_content(text, out, before_block)
        if gap is not None and not before_block:
            self._gap += gap[0]
            self._gap_added += gap[1]

    def _emit_content(self, text: str, out: list, before_block: bool) -> None:
        if not text:
            return
        self._flush_end(out, self._gap_added)
        if self._at_start:
            if before_block and self.rules.trim and text.strip(WS) == "":
                self._lead_ws += text
                return  # whitespace ahead of the first block is trimmed
            if text.strip(WS):
                self._at_start = False
        if self._gap:
            text = self._gap + text
            self.added_chars += self._gap_added
            self._gap, self._gap_added = "", 0
        self._answer_ws = text[-1] in WS
        if out and out[-1][0] == CONTENT:
            out[-1] = (CONTENT, out[-1][1] + text)
        else:
            out.append((CONTENT, text))


@dataclass(slots=True)
class Split:
    """A whole text, split: reasoning blocks and content, in order."""

    pieces: list
    stray_closes: int = 0   # closing tags with no opening tag (the template may open the block)

    @property
    def reasoning(self) -> list[str]:
        blocks, cur, open_ = [], [], False
        for kind, value in self.pieces:
            if kind == REASONING:
                cur.append(value)
                open_ = True
            elif kind == END:
                if open_:
                    blocks.append("".join(cur))
                cur, open_ = [], False
        return blocks

    @property
    def content(self) -> str:
        return "".join(v for k, v in self.pieces if k == CONTENT)


def split_text(text: str, rules: Rules) -> Split:
    """Split a whole output as a stream of it is split. (A closing tag with no opening tag is
    removed, and the text before it stays answer, as a stream has already sent it: only a profile
    that starts inside makes that text reasoning here; thinkwire.context re-splits a body.)"""
    s = Splitter(rules)
    return Split(merge(s.feed(text) + s.finish()), s.stray_closes)


def merge(pieces: list) -> list:
    """Join adjacent pieces of the same text kind."""
    out: list = []
    for p in pieces:
        if out and p[0] != END and out[-1][0] == p[0]:
            out[-1] = (p[0], out[-1][1] + p[1])
        else:
            out.append(p)
    return out
