"""Where a text read piece by piece stands: line starts, fenced code blocks, code spans.

The splitter reads every character of a model's output once, in order, through one `Lines`
(reasoning and answer alike; it starts afresh at each block's edge). Whether a tag counts
depends on it: never in code, some only at a line start. Reading a text in one piece or in
several leaves the same state, wherever it was cut (a backtick run cut in two is one run).

Code, as CommonMark has it and as far as one line tells: a fence (```` ``` ```` or `~~~` at a
line's start, after its indent) opens a fenced block at the end of its line (its info string is
code too) until the next fence, which closes it right after its backticks (a model writes
```` ```</think> ````); a run of N backticks opens a code span that the next run of exactly N
backticks on the line closes. A span left open ends with its line, so a stray backtick cannot
hide the rest of an output. A line indented by four columns or more (a tab goes to the next
multiple of four) after a blank line, the start, or another such line is indented code.
"""

from __future__ import annotations

import re

_HSPACE = " \t"
_BLANK = " \t\r"   # what a line that is blank once it ends holds ("\r\n" ends a line)
_FENCES = ("```", "~~~")
_TICKS = re.compile("`+")
# What prose puts before a tag it names ("the <think> tag", '"<think>"', "(<think>)"); a model
# that writes markup puts it right after its text ("Sure.<think>").
_PROSE_BEFORE = frozenset(" \t\r\n\f\v\"'([{<“‘«「『（【")


_OPENING = 1   # this line opens a fence (its info string is code too); it opens at the line's end
_CLOSED = 2    # this line closed the fence: what follows the fence on it is not code


class Lines:
    __slots__ = ("head", "blank", "span", "run", "run_head", "fence", "fence_line", "last", "col", "icode",
                 "code_ok", "empty")

    def __init__(self) -> None:
        self.reset()
        self.code_ok = True   # (the output's start: a line's start)

    def reset(self) -> None:
        """Afresh, at a block's edge: right after a tag, on its line (no indented code until a line
        break)."""
        self.fence = False  # in a fenced code block
        self.last = ""      # the last character read ("" at the start)
        self.code_ok = False  # an indented code line may start here (after a blank line, code, the start)
        self._new_line()

    def _new_line(self) -> None:
        self.head = ""        # the line's first characters after its indent (a fence opens there)
        self.blank = True     # only spaces and tabs on the line so far (or nothing)
        # ... or carriage returns too: a blank line, once it ends, for the code rules (as a line
        # read whole is; "\r\n" ends a line)
        self.empty = True
        self.span = 0         # the length of the backtick run that opened a code span (0: none)
        self.run = 0          # a backtick run that ends what was read: it may go on in the next text
        self.run_head = False  # ... and it began the line (three or more backticks there: a fence)
        self.fence_line = 0   # _OPENING, _CLOSED, or 0
        self.col = 0          # the line's indentation so far, in columns (while it is blank)
        self.icode = False    # this line is indented code

    def copy(self) -> Lines:
        other = Lines.__new__(Lines)
        for k in self.__slots__:
            setattr(other, k, getattr(self, k))
        return other

    def restore(self, other: Lines) -> None:
        """Back to the state `other` (a `copy`) holds."""
        for k in self.__slots__:
            setattr(self, k, getattr(other, k))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lines) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None   # type: ignore[assignment]  # (mutable; typeshed declares it so too)

    def read(self, buf: str, i: int = 0, j: int | None = None) -> None:
        """Read buf[i:j]."""
        seg = buf[i:j] if i or j is not None else buf
        if not seg:
            return
        nl = seg.find("\n")
        if nl < 0:
            self._part(seg)
        else:
            if nl:
                self._part(seg[:nl])
            if self.fence_line == _OPENING:
                self.fence = True
            self._end_line(self.empty, self.icode)
            last_nl = seg.rfind("\n")
            if last_nl > nl:
                # Whole lines: only whether each opens or closes a fence, and whether indented
                # code may start after it, matter.
                for line in seg[nl + 1:last_nl].split("\n"):
                    blank = not line.strip(" \t\r")
                    icode = not blank and not self.fence and self.code_ok and indent(line) >= 4
                    if not icode and line.lstrip(" ")[:3] in _FENCES:
                        self.fence = not self.fence
                    self._end_line(blank, icode)
            self._new_line()
            if last_nl + 1 < len(seg):
                self._part(seg[last_nl + 1:])
        self.last = seg[-1]

    def _end_line(self, blank: bool, icode: bool) -> None:
        self.code_ok = (blank and not self.fence) or icode

    def _part(self, seg: str) -> None:
        """Read a piece of one line."""
        blank = self.blank
        if blank and self.code_ok and not self.fence and not self.icode:
            self.col = indent(seg, self.col)
            if self.col >= 4 and seg.strip(_HSPACE):
                self.icode = True   # (a fence or a tag at its start is code too)
        if len(self.head) < 8:   # (the indent does not count: a line cut anywhere reads the same)
            self.head = (self.head + seg).lstrip(" ")[:8]
            if not self.fence_line and not self.icode and self.head[:3] in _FENCES:   # (indented: code)
                if self.fence:   # a closing fence: the block ends right after it
                    self.fence = False
                    self.fence_line = _CLOSED
                else:
                    self.fence_line = _OPENING
        if blank and seg.strip(_HSPACE):
            self.blank = False
        if self.empty and seg.strip(_BLANK):
            self.empty = False
        if "`" in seg:
            self._ticks(seg, blank)
        elif self.run:
            self._settle()

    def _ticks(self, seg: str, blank: bool) -> None:
        for m in _TICKS.finditer(seg):
            n = m.end() - m.start()
            if m.start() == 0 and self.run:
                n += self.run
                at_head = self.run_head
            else:
                if self.run:
                    self._settle()
                at_head = blank and not seg[:m.start()].strip(_HSPACE)
            self.run, self.run_head = 0, False
            if m.end() == len(seg):
                self.run, self.run_head = n, at_head   # it may go on
            elif not (at_head and n >= 3):
                self._span(n)

    def _settle(self) -> None:
        if not (self.run_head and self.run >= 3):   # (a fence, not a code span)
            self._span(self.run)
        self.run, self.run_head = 0, False

    def _span(self, n: int) -> None:
        if not self.span:
            self.span = n
        elif self.span == n:
            self.span = 0

    def in_code(self) -> bool:
        """In a fenced block, indented code or a code span, at a character that is not a backtick
        (a backtick run that ended what was read ends there)."""
        if self.run:
            self._settle()
        return self.fence or self.span > 0 or self.fence_line == _OPENING or self.indented_code()

    def close_counts(self, in_fence: bool = True) -> bool:
        """A closing tag here ends a block: outside code; in a fence at a line's start (a model
        closes its reasoning there; `in_fence`); on a fence's opening line glued to its marker;
        in indented code right after the code on its line (`    return x</think>`: such a line has no end marker), not at its start, where
        an example shows the tag."""
        if not self.in_code():
            return True
        if self.span:
            return False
        if self.fence:
            return in_fence and self.blank
        if self.fence_line == _OPENING:
            # A fence's opening line is no code yet: a tag glued to its marker closes
            # (`<think>~~~</think>0`: no info string names a tag).
            return in_fence and (self.blank or self.glued())
        return self.glued()

    def indented_code(self) -> bool:
        """This line is indented code, or becomes it with the next character (its indentation so
        far is four columns, where such a line may start)."""
        return self.icode or (self.blank and self.col >= 4 and self.code_ok and not self.fence)

    def glued(self) -> bool:
        """A tag here follows the text before it on its line with nothing between, as markup a
        model writes does; prose names a tag after a space, a quote or a bracket."""
        return not self.blank and self.last not in _PROSE_BEFORE


def indent(text: str, col: int = 0) -> int:
    """The indentation in columns after `text`'s leading spaces and tabs, from column `col` (a
    tab goes to the next multiple of four)."""
    for c in text:
        if c == " ":
            col += 1
        elif c == "\t":
            col += 4 - col % 4
        else:
            break
    return col
