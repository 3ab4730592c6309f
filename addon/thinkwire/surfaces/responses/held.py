"""Text a Responses stream holds whole: its done events (`output_text.done`, `content_part.done`,
`output_item.done`, `response.completed`) repeat every part's text, so each part's deltas are
kept until then, about once (`HeldText`)."""

from __future__ import annotations

from json.encoder import encode_basestring


class HeldText:
    """Text that arrives in pieces, held about once: pieces are joined in groups of 64 (and
    groups of groups ...), so a long stream of small deltas costs about its characters, not a
    string object per delta. Each character is copied a few times (log64 of the count).
    `escaped`: it also keeps the text as a JSON string's body, from the escaped pieces the C
    callable took as they came (`literal`): a stream sends an item's whole text in several
    events at its end, and escaping 20 KB of text costs ~0.5M instructions."""
    __slots__ = ("tail", "levels", "esc")

    def __init__(self, escaped: bool = False) -> None:
        self.tail: list[str] = []
        self.levels: list[list[str]] = []   # levels[k]: joined groups of 64**(k+1) pieces; older first
        self.esc = HeldText() if escaped else None

    def add(self, s: str, lit: str | None = None) -> None:
        """`lit`: the body of s's JSON literal, where the caller has it."""
        tail = self.tail
        tail.append(s)
        if len(tail) >= 64:
            self._carry()
        if self.esc is not None:
            self.esc.add(encode_basestring(s)[1:-1] if lit is None else lit)

    def literal(self) -> str:
        """The text's JSON literal (a `HeldText(escaped=True)`)."""
        assert self.esc is not None
        return '"' + self.esc.value() + '"'

    def _carry(self) -> None:
        s = "".join(self.tail)
        self.tail = []
        for lvl in self.levels:
            lvl.append(s)
            if len(lvl) < 64:
                return
            s = "".join(lvl)
            lvl.clear()
        self.levels.append([s])

    def value(self) -> str:
        parts = [x for lvl in reversed(self.levels) for x in lvl]
        parts += self.tail
        text = "".join(parts)
        self.tail = [text]
        self.levels = []
        return text
