"""The event a stream's parser frames and a surface's rewriter reads: an SSE event (thinkwire.sse)
or an NDJSON line (thinkwire.ndjson), with the bytes it came as."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Event:
    raw: bytes               # the event's bytes as received, with its terminating blank line
    event: str | None        # the value of its `event:` line, if any
    data: str | None         # its `data:` lines joined with "\n"; None when there are none
    eol: bytes = b"\n"       # line ending it used, reused when it is re-serialized
    complete: bool = True    # False: the stream ended inside it (no blank line after it)
    long: int = 0            # a piece of an event longer than the cap (data None): HEAD, or REST


HEAD, REST = 1, 2   # Event.long: the first piece of a long event (its start), a piece after it


def long_piece(raw: bytes, part: int = REST) -> Event:
    """Bytes of an event longer than the cap: they pass as they came, never parsed whole."""
    return Event(raw, None, None, long=part)
