# The C part's interface (addon/thinkwire/_hot.c), for mypy; thinkwire.hot documents what it does.
# Checked against the built module by ./scripts/lint (mypy's stubtest).
from collections.abc import Callable
from typing import Any, final

PART_N: int
PART_N1: int
PART_BODY: int
PART_STR: int
SEQ_NONE: int
SEQ_OWN: int
SEQ_NEW: int
ALLOW_BYTE: int
ALLOW_ESCAPE: int
BYTE_WS: int
ESCAPE_WS: int
CAP: int

@final
class Took(tuple[int, int, bytes | None, int, int]):
    """What Hot took since the last take() (thinkwire.hot.Took is its Python spelling)."""
    n_fields: int
    n_sequence_fields: int
    n_unnamed_fields: int
    @property
    def hits(self) -> int: ...
    @property
    def changed(self) -> int: ...
    @property
    def literal(self) -> bytes | None: ...
    @property
    def offset(self) -> int: ...
    @property
    def last(self) -> int: ...

@final
class Hot:
    """The stream callable that answers steady token deltas in C."""
    def __init__(self, fallback: Callable[[bytes], list[bytes]]) -> None: ...
    def __call__(self, chunk: bytes, /) -> list[bytes]: ...
    @property
    def fallback(self) -> Callable[[bytes], list[bytes]]: ...
    @property
    def hits(self) -> int: ...
    @property
    def armed(self) -> tuple[Any, ...] | None: ...
    def arm(self, spec: tuple[Any, ...], offset: int = 0, last: int = 0, held: bytes = b"", /) -> None: ...
    def disarm(self) -> None: ...
    def take(self) -> Took: ...
