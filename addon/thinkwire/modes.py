"""The splitter's modes, its transition table, and the records its stages give.

As h11 keeps a connection's state: a few named modes, and a table of which event moves each one
where; a move the table does not hold is a bug, raised at once (`SplitterError`). What is not a
mode is named for what it says, in the stage it belongs to: the whitespace policy's bookkeeping
(thinkwire.whitespace, its own object), the line and code state (thinkwire.lines) and the counts
(thinkwire.recognition).

The stages, each a module: thinkwire.recognition finds the tags and decides what each one is
where it stands (the tag kinds as a table); thinkwire.whitespace decides what of the text around
them goes out (trimming, held whitespace, line breaks between answer text that would run
together) and makes the pieces (`Text`, `End`); thinkwire.splitter is the public face (`feed`,
`finish`, the fast path's `plain`/`steady`/`took`).
"""

from __future__ import annotations

import enum
from typing import Final, Literal, NamedTuple

from .rules import TagPair

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

# `make(Text, (kind, text))` is `Text(kind, text)` made by tuple's own constructor, without the
# Python call NamedTuple's generated __new__ is: the splitter makes one for nearly every token.
make = tuple.__new__


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
