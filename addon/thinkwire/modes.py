"""The splitter's modes, its transition table, and the state every stage of it reads.

As h11 keeps a connection's state: a few named modes, and a table of which event moves each one
where; a move the table does not hold is a bug, raised at once (`SplitterError`). What is not a
mode is named for what it says: the whitespace policy's bookkeeping (thinkwire.whitespace), the
line and code state (thinkwire.lines), counts for accounting.

The stages, each a module: thinkwire.recognition finds the tags and decides what each one is
where it stands (the tag kinds as a table); thinkwire.whitespace decides what of the text around
them goes out (trimming, held whitespace, line breaks between answer text that would run
together) and makes the pieces; thinkwire.splitter is the public face (`feed`, `finish`, the fast
path's `plain`/`steady`/`took`).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

from .lines import Lines
from .rules import Rules, TagPair, _Scan

# The kinds of piece (`Piece`), its first field: a reader tells them apart by it (mypy narrows
# `piece.kind == END` to an `End`).
REASONING: Final = 0
CONTENT: Final = 1
END: Final = 2


class Text(NamedTuple):
    """Reasoning (REASONING) or answer (CONTENT) text, in order."""

    kind: Literal[0, 1]
    text: str


class End(NamedTuple):
    """A reasoning block ended (closed, or cut off by the end of the output): the markup as the
    model wrote it on each side of the block's text, for the way back (a thinkwire.rules.Written
    where the answer after it starts with line breaks thinkwire put there)."""

    kind: Literal[2]
    pair: TagPair


# What the splitter gives: `kind, value = piece` reads either.
Piece = Text | End


class Mode(enum.Enum):
    """Where the splitter stands in the output."""

    ANSWER = (0, "answer", False)             # in the answer (before any block, between blocks, after them)
    TOOL_CALL = (1, "tool call", False)       # in a tool call in the answer, up to its end marker (`Rules.tools`)
    BLOCK = (2, "block", True)                # in a reasoning block the model opened (or a marker resumed)
    PROMPT_BLOCK = (3, "prompt block", True)  # in the block the template opened, before the model wrote its own opening tag

    def __init__(self, index: int, label: str, inside: bool) -> None:
        # (Plain attributes, not properties: `feed` reads `inside` for every token; `index` is the
        # mode's place in tables, an Enum's own hash being slow.)
        self.index = index
        self.label = label
        self.inside = inside   # in a reasoning block


class Event(enum.Enum):
    OPEN = "an opening tag that counts"
    RESUME = "a marker after which the reasoning goes on (`Rules.resumes`)"
    OWN_OPEN = "the model's own opening tag in the block the template opened (dropped)"
    CLOSE = "the open block's closing tag"
    END_MARKER = "a marker that ends reasoning and stays in the output (`Rules.ends`)"
    TOOL_HEAD = "a tool call's header"
    TOOL_END = "a tool call's end marker"
    CUT_OFF = "the output ended inside a block"


ANSWER, TOOL_CALL, BLOCK, PROMPT_BLOCK = Mode.ANSWER, Mode.TOOL_CALL, Mode.BLOCK, Mode.PROMPT_BLOCK

# mode -> {event: the mode it moves to}. (Markup that leaves no mode, a strip marker, a stray
# closing tag, is not an event here: thinkwire.recognition's tables decide it.)
TRANSITIONS: dict[Mode, dict[Event, Mode]] = {
    ANSWER: {Event.OPEN: BLOCK, Event.RESUME: BLOCK, Event.TOOL_HEAD: TOOL_CALL},
    TOOL_CALL: {Event.TOOL_END: ANSWER},
    BLOCK: {Event.CLOSE: ANSWER, Event.END_MARKER: ANSWER, Event.CUT_OFF: ANSWER},
    PROMPT_BLOCK: {Event.CLOSE: ANSWER, Event.END_MARKER: ANSWER, Event.CUT_OFF: ANSWER, Event.OWN_OPEN: BLOCK},
}


class SplitterError(RuntimeError):
    """A move the transition table does not hold: a bug in the splitter."""


class Gap(NamedTuple):
    """Whitespace kept between answer texts across a removed tag: as the model wrote it, or, where
    it wrote none, a line break thinkwire puts there (`added` characters of it)."""

    text: str
    added: int


class Fields:
    """The splitter's state, declared once for every stage (thinkwire.splitter.Splitter holds the
    slots and sets them)."""

    if not TYPE_CHECKING:   # (no instance dict: the Splitter's slots hold the state; hidden from mypy,
        __slots__ = ()      # which reads an empty __slots__ as allowing no attribute)

    rules: Rules
    _mode: Mode
    _held: str                 # undecided text, carried into the next feed
    _pair: TagPair | None      # the pair whose block is open (None: any close)
    _tool: _Scan | None        # in a tool call: the scan for its end marker
    _resume: tuple[str, TagPair] | None   # (marker, pair): the reasoning goes on after that marker
    _ln: Lines                 # line and code state of the text read so far (afresh at each block's edge)
    _boundary: bool            # start of output or just after a block: an opening tag counts here
    _at_start: bool            # nothing but whitespace has been written to the answer yet
    _seen_tag: bool            # a block was opened or closed: a stray closing tag no longer counts
    _fresh: bool               # the open block has no text yet
    _literal: dict[str, int]   # closing tag -> opening tags of its pair kept as text
    _cut_off: bool             # finishing an output cut off at the token limit (`finish`)
    # The whitespace policy's (thinkwire.whitespace).
    _skip_ws: bool
    _ws_hold: bool
    _ws_more: list[str]
    _ws_nl: bool
    _answer_ws: bool
    _reasoning_ws: bool
    _rsep: bool
    _gap: str
    _gap_added: int
    _lead_ws: str
    _w_open: str
    _w_close: str
    _pend: bool
    # Counts.
    blocks: int
    reasoning_chars: int
    stray_closes: int
    stray_after_text: int
    markup_chars: int
    added_chars: int

    def _go(self, event: Event) -> None:
        """Move by the transition table."""
        to = TRANSITIONS[self._mode].get(event)
        if to is None:
            raise SplitterError(f"{event.value}: no move from {self._mode.label}")
        self._mode = to
