"""Where a tag counts, and what is cut off at the output's end: what recognition
(thinkwire.recognition) asks of the line and code state (thinkwire.lines) and of the text around
a tag. A base of `Recognition`: it reads recognition's state and changes none of it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .lines import Lines
from .modes import Mode
from .rules import Rules, TagPair, cut_off_marker, partial_tag_len

# After a first block, an opening tag mid-line whose closing tag follows on its line within this
# many characters is a block (a stream holds that much at most, from the tag, to tell).
PAIR_ON_LINE = 2000   # the whitespace thinkwire.hot carries: its JSON escapes are short


class Placement:
    rules: Rules
    _mode: Mode
    _ln: Lines
    _boundary: bool
    _cut_off: bool

    if not TYPE_CHECKING:   # (no instance dict: the Splitter's slots hold the state)
        __slots__ = ()

    def _cut_tail(self, text: str, prefixes: frozenset[str], longest: int, first: re.Pattern[str]) -> int:
        """At the output's end: the length of the tag or marker cut off there, which goes. At the
        token limit, any start of one but a lone first character (`a <`, `[`: a comparison, a
        bracket); else one that begins with a whole special token (`cut_off_marker`)."""
        if self._cut_off:
            k = partial_tag_len(text, prefixes, longest, first)
            if k >= 2:
                return k
        return cut_off_marker(text, prefixes, longest, first)

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
        return ((self._boundary and not self._mode.inside) or ln.blank or tag in self.rules._special
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
