"""What chat and Ollama streams share: the text of a choice (a stream) as runs of reasoning and
answer, several reasoning blocks of one message joined with BLOCK_JOIN (both surfaces have one
reasoning field per message)."""

from __future__ import annotations

from typing import Any

from ..splitter import END, REASONING, Splitter

BLOCK_JOIN = "\n\n"  # between several reasoning blocks of one message


class TextRuns:
    """One text's splitter (a chat choice, an Ollama stream) and what joining its blocks needs:
    whether it passes as it is (`native`), has ended (`done`), and where its reasoning blocks
    start and end."""

    __slots__ = ("splitter", "native", "done", "had_reasoning", "block_has_text")

    def __init__(self, splitter: Splitter) -> None:
        self.splitter = splitter
        self.native = False
        self.done = False
        self.had_reasoning = False   # an earlier block put text out (join the next with a blank line)
        self.block_has_text = False

    def runs(self, pieces: list[tuple[int, Any]]) -> list[tuple[int, str]]:
        """Pieces to (kind, text) runs, joining blocks with BLOCK_JOIN."""
        runs: list[tuple[int, str]] = []
        for kind, value in pieces:
            if kind == END:
                if self.block_has_text:
                    self.had_reasoning = True
                self.block_has_text = False
                continue
            if kind == REASONING and not self.block_has_text:
                self.block_has_text = True
                if self.had_reasoning:
                    value = BLOCK_JOIN + value
            if runs and runs[-1][0] == kind:
                runs[-1] = (kind, runs[-1][1] + value)
            else:
                runs.append((kind, value))
        return runs
