"""What chat and Ollama streams share: the text of a choice (a stream) as runs of reasoning and
answer, several reasoning blocks of one message joined with BLOCK_JOIN (both surfaces have one
reasoning field per message)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .. import hot
from ..again import Again
from ..fastpath import Got
from ..shapes import PLANS_MAX, FastPath, Lane, Plan, Shape
from ..splitter import CONTENT, END, REASONING, Piece, Splitter, Text

BLOCK_JOIN = "\n\n"  # between several reasoning blocks of one message


class TextRuns:
    """One text's splitter (a chat choice, an Ollama stream) and what joining its blocks needs:
    whether it passes as it is (`native`), has ended (`done`), and where its reasoning blocks
    start and end."""

    __slots__ = ("splitter", "native", "done", "had_reasoning", "block_has_text", "again")

    def __init__(self, splitter: Splitter, again: Again | None = None) -> None:
        self.splitter = splitter
        self.again = again   # what went out, while it may be sent again as the answer (thinkwire.again)
        self.native = False
        self.done = False
        self.had_reasoning = False   # an earlier block put text out (join the next with a blank line)
        self.block_has_text = False

    def runs(self, pieces: Sequence[Piece]) -> list[Text]:
        """Pieces to text runs (no END; adjacent texts of a kind joined), joining blocks with
        BLOCK_JOIN."""
        runs: list[Text] = []
        for p in pieces:
            if p.kind == END:
                if self.block_has_text:
                    self.had_reasoning = True
                self.block_has_text = False
                continue
            if p.kind == REASONING and not self.block_has_text:
                self.block_has_text = True
                if self.had_reasoning:
                    p = Text(REASONING, BLOCK_JOIN + p.text)
            if runs and runs[-1].kind == p.kind:
                runs[-1] = Text(p.kind, runs[-1].text + p.text)
            else:
                runs.append(p)
        if self.again is not None:
            for kind, value in runs:
                self.again.said(kind, value)
        return runs

    def ended(self, finish: str | None) -> list[Text]:
        """At the text's end (its splitter finished): the answer run to send, when the reasoning
        that went out is to be sent again as the answer (thinkwire.again)."""
        text = self.again.text(self.splitter, finish) if self.again is not None else None
        return [] if text is None else [Text(CONTENT, text)]


ANSWER = Lane()   # the answer's plain text goes as it came


def kept_plan(owner: FastPath, plans: dict[tuple[Shape, bool], Plan], st: TextRuns, shape: Shape,
              reasoning: Lane) -> Plan:
    """`plan`, kept in `plans` per state (the shape, whether the block has text yet: at most
    PLANS_MAX, then all dropped), and the owner's current plan."""
    key = (shape, st.block_has_text)
    p = plans.get(key)
    if p is None:
        if len(plans) >= PLANS_MAX:
            plans.clear()
        p = plans[key] = plan(owner, st, shape, reasoning)
    owner._plan = p
    return p


def plan(owner: FastPath, st: TextRuns, shape: Shape, reasoning: Lane) -> Plan:
    """The fast path's plan (thinkwire.shapes) for a stream of one text, chat's and Ollama's:
    the answer as it came, reasoning by the `reasoning` lane. A block's first reasoning text
    may take a separator in front (`runs`): Python's, and then the plan is made again (C takes
    the block's later texts)."""

    def took(text: str, got: Got) -> str:
        if st.block_has_text:
            if st.again is not None:
                st.again.said(REASONING, text)
            return text
        owner._plan = None
        return st.runs([Text(REASONING, text)])[0].text

    def settled(kind: int, got: hot.Took, text: str, lit: str | None) -> None:
        if st.again is not None:
            st.again.said(kind, text)

    if st.block_has_text:   # (the block's later texts go as the splitter gave them)
        again = st.again
        route = shape.route(reasoning, note=None if again is None else functools.partial(again.said, REASONING))
    else:
        route = shape.route(reasoning, took)
    p = owner._plan = Plan(st.splitter, shape.route(ANSWER), route, shape.spec(ANSWER),
                           shape.spec(reasoning) if st.block_has_text else None, settled)
    return p
