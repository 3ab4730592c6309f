"""The splitter's whitespace policy: what of the text around a recognised tag goes out, and how.

Recognition (thinkwire.recognition) decides where tags are and what each is; this stage gets the
text between them and makes the pieces. With trimming on (`Rules.trim`): whitespace at a block's
edges goes, and so does the whitespace after it at the answer's start; answer text that meets
across a removed block or tag with no whitespace gets a line break (no glued words); whitespace
that may turn out to sit at a block's edge is held until the next text tells. Whatever is dropped
is recorded for the way back (the END piece's TagPair holds the markup as the model wrote it,
byte for byte).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lines import Lines, indent
from .modes import CONTENT, END, REASONING, End, Fields, Gap, Piece, Text
from .rules import WS, TagPair, Written

SEPARATOR = "\n"   # between answer pieces that meet across a removed block or tag with no whitespace
HELD_WS = " \t\r\n\f"

Kept = list[str | Gap]   # answer text between removed markers, emitted as one piece, and the gaps between


class Whitespace(Fields):
    if not TYPE_CHECKING:   # (no instance dict: the Splitter's slots hold the state; hidden from mypy,
        __slots__ = ()      # which reads an empty __slots__ as allowing no attribute)

    def _take_held(self) -> str:
        held = self._held
        if self._ws_more:
            held += "".join(self._ws_more)
            self._ws_more.clear()
        self._held = ""
        self._ws_hold = False
        return held

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

    # -- inside a reasoning block -----------------------------------------------------------------
    def _block_start(self, buf: str, i: int, out: list[Piece], final: bool) -> int:
        """A block's text begins at buf[i]: its leading whitespace trimmed (`_skip_ws`), and the
        line break put where an opening tag dropped between reasoning texts (`_rsep`). Where its
        text starts, or -1: only whitespace so far."""
        if self._skip_ws:
            j, keep = self._trim_end(buf, i, final)
            self._ln.read(buf, i, keep)   # (trimmed, but it still ends a line: "\r~~~" is no fence)
            self._w_open += buf[i:keep]
            if j == len(buf):
                self._held = "" if final else buf[keep:]   # (perhaps the first line's indentation)
                return -1  # all whitespace so far: dropped
            i = keep
            self._skip_ws = self._ws_nl = False
        if self._rsep:   # (see the opening tag dropped in thinkwire.recognition)
            self._rsep = False
            if buf[i] not in WS:
                self._dropped(out, True, "", len(SEPARATOR))
                self._emit_reasoning(SEPARATOR, out)
                self.added_chars += len(SEPARATOR)
        return i

    def _block_tail(self, buf: str, i: int, seen: int, hold: int, out: list[Piece], final: bool) -> None:
        """No tag in buf[i:]: all of it goes out as reasoning but the last `hold` characters (a
        partial tag, held; at the end, markup cut off) and, trimming, the whitespace at its end
        (held: it is dropped if the block ends next). The line state is read up to `seen`."""
        rules = self.rules
        rest = buf[i:]
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
        self._ln.read(buf, seen, max(seen, i + len(body)))   # (what is held is read when it goes out)
        self._emit_reasoning(body, out)

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

    def _block_opens(self, out: list[Piece], tag: str) -> None:
        """A block opens after `tag` as written: what was trimmed ahead of it is its markup."""
        self._flush_end(out)
        # (Whitespace between two blocks is trimmed: the model's part of it, not a line break put there.)
        self._w_open = self._lead_ws + ("" if self._gap_added else self._gap) + tag
        self._w_close = self._lead_ws = ""
        self._skip_ws = self.rules.trim
        self._gap, self._gap_added = "", 0   # whitespace between two blocks: trimmed

    def _flush_end(self, out: list[Piece], added: int = 0) -> None:
        """The END of the block that closed, once what it dropped after its closing tag is known
        (`added`: the characters put in front of the answer's text that follows)."""
        if self._pend:
            self._pend = False
            out.append(End(END, Written(self._w_open, self._w_close, added) if added
                           else TagPair(self._w_open, self._w_close)))

    def _emit_reasoning(self, text: str, out: list[Piece]) -> None:
        if text:
            self._fresh = False
            self._reasoning_ws = text[-1] in WS
            self.reasoning_chars += len(text)
            last = out[-1] if out else None
            if last is not None and last.kind == REASONING:
                out[-1] = Text(REASONING, last.text + text)
            else:
                out.append(Text(REASONING, text))

    # -- in the answer ----------------------------------------------------------------------------
    def _after_block(self, buf: str, i: int, out: list[Piece], final: bool) -> int:
        """Right after a block (or markup trimmed as one: `_skip_ws`): its whitespace trimmed,
        where the answer is empty or ends in whitespace; else kept whole between the answer's
        texts, or a line break put there. Where the answer goes on, or -1: only whitespace so far
        (held, or at the end dropped)."""
        n = len(buf)
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
            self._ws_hold = not self.rules._ws_lead
            return -1
        self._ln.read(buf, i, keep)   # (what is held is read when it goes out)
        if j == n:
            if not final and keep < n:
                self._held = buf[keep:]   # perhaps the first line's indentation
                self._ws_hold = not self.rules._ws_lead
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
                    self._dropped(out, False, "", len(SEPARATOR), len(self._gap))
                self._gap += SEPARATOR
                self._gap_added += len(SEPARATOR)
        self._skip_ws = self._ws_nl = False
        return j

    def _remove(self, buf: str, i: int, j: int, tag: str, kept: Kept, final: bool, out: list[Piece]) -> int:
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
                self._w_close += "".join(p if isinstance(p, str) else p.text for p in kept) + tag
            else:
                self._dropped(out, False, tag, 0, -1)
            kept.clear()
        elif isinstance(kept[-1], Gap) or kept[-1][-1] in WS if kept else self._answer_ws or self._gap:
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
                          len(SEPARATOR) if k == end < n else 0, gap, kept)
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
            kept.append(Gap(buf[end:k], 0) if k > end else Gap(SEPARATOR, len(SEPARATOR)))
        return k

    def _dropped(self, out: list[Piece], reasoning: bool, markup: str, added: int = 0, gap: int = 0,
                 kept: Kept | None = None) -> None:
        """A hook (thinkwire.written records the way back's layout with it; nothing here): `markup`
        went, and `added` line breaks were put in, in the open block's text (`reasoning`) or the
        answer, after what `out` (and the pieces before it) holds, then `gap` characters and the
        texts in `kept` still to go out (gap -1: the place is not known)."""

    def _emit_kept(self, kept: Kept, out: list[Piece], rest: str = "", before_block: bool = False) -> None:
        """The answer's text kept since the last emission and `rest`, with the gaps `_remove`
        left: a gap at the end goes in front of the answer's next text, or is trimmed before a
        block."""
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
            self._gap += gap.text
            self._gap_added += gap.added
        elif not gap.added:
            self._gap += gap.text   # the model's whitespace before the block: its markup (`_block_opens`)

    def _emit_content(self, text: str, out: list[Piece], before_block: bool) -> None:
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
        last = out[-1] if out else None
        if last is not None and last.kind == CONTENT:
            out[-1] = Text(CONTENT, last.text + text)
        else:
            out.append(Text(CONTENT, text))

    def _answer_tail(self, buf: str, rest_start: int, cut: int, kept: Kept, out: list[Piece], final: bool,
                     before: Lines | None) -> None:
        """The answer's text up to `cut` goes out (with `kept`); what follows is held. But at the
        output's start, while only whitespace came, all of it waits (it is dropped if a block opens
        next), with the line state from before it (`before`)."""
        n = len(buf)
        if not final and self._at_start and self.rules.trim and buf[rest_start:cut].strip(WS) == "" and not any(
                p.strip(WS) for p in kept if isinstance(p, str)):   # (at the start no gap is kept: the answer is empty)
            assert before is not None   # (taken where the scan began at the start, trimming: the same test)
            self._ln = before
            self._held = "".join(p if isinstance(p, str) else p.text for p in kept) + buf[rest_start:]
            self._ws_hold = cut == n and bool(self._held) and not self.rules._ws_lead
            return
        self._emit_kept(kept, out, buf[rest_start:cut])
        if final:
            self.markup_chars += n - cut   # a marker cut off at the end (cut_off_marker)
        else:
            self._held = buf[cut:]
