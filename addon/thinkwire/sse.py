"""Server-sent events framing: bytes in, events out, events back to bytes.

Pure. Lines may end in LF, CRLF or CR (the SSE spec allows all three); a stream may start with
a UTF-8 BOM. Every event keeps its original bytes, so an event the rewrite leaves alone goes
back out exactly as it came in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class Event:
    raw: bytes               # the event's bytes as received, with its terminating blank line
    event: str | None        # the value of its `event:` line, if any
    data: str | None         # its `data:` lines joined with "\n"; None when there are none
    eol: bytes = b"\n"       # line ending it used, reused when it is re-serialized


class SSEParser:
    """Incremental parser. `feed(bytes)` returns the complete events; `finish()` the rest."""

    __slots__ = ("_buf", "_scan", "_lines", "_bom_checked")

    def __init__(self) -> None:
        self._buf = b""
        self._scan = 0      # where to resume looking for line ends in _buf
        self._lines: list[bytes] = []  # complete lines of the event being read
        self._bom_checked = False

    def feed(self, data: bytes, final: bool = False) -> list[Event]:
        buf = self._buf + data if self._buf else data
        events: list[Event] = []
        start = 0           # start of the current event's bytes in buf
        pos = self._scan
        lines = self._lines
        n = len(buf)
        while True:
            m = _LINE_END.search(buf, pos)
            if m is None:
                break
            end = m.end()
            if m.group() == b"\r" and end == n and not final:
                break  # a CR at the end may be the first half of CRLF: wait
            line = buf[pos:m.start()]
            pos = end
            if line:
                lines.append(line)
                continue
            # Blank line: dispatch.
            events.append(_make_event(buf[start:end], lines, m.group(), self))
            lines = []
            start = end
        self._lines = lines
        self._buf = buf[start:]
        self._scan = pos - start
        return events

    def finish(self) -> list[Event]:
        """The bytes left at the end of the stream, as a last (unterminated) event."""
        events = self.feed(b"", final=True) if self._buf else []
        if not self._buf:
            return events
        buf, self._buf = self._buf, b""
        lines = self._lines
        tail = buf[self._scan:]
        if tail:
            lines.append(tail.rstrip(b"\r"))
        self._lines, self._scan = [], 0
        return events + [_make_event(buf, lines, b"\n", self)]

    def pending(self) -> bytes:
        """Bytes received but not yet part of a complete event (for a fail-open hand-off)."""
        buf, self._buf, self._lines, self._scan = self._buf, b"", [], 0
        return buf


def _make_event(raw: bytes, lines: list[bytes], eol: bytes, parser: SSEParser) -> Event:
    name: str | None = None
    data: list[str] = []
    for line in lines:
        if not parser._bom_checked:
            parser._bom_checked = True
            if line.startswith(_BOM):
                line = line[3:]
        if line.startswith(b"data:"):
            v = line[5:]
            data.append((v[1:] if v[:1] == b" " else v).decode("utf-8", "surrogateescape"))
        elif line.startswith(b"event:"):
            v = line[6:]
            name = (v[1:] if v[:1] == b" " else v).decode("utf-8", "surrogateescape")
        # comments (":..."), id:, retry: and unknown fields only live in `raw`.
    return Event(raw, name, "\n".join(data) if data else None, eol)


def dumps(obj: object) -> str:
    """Compact JSON, non-ASCII kept as is (what model servers send)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def encode(data: str, event: str | None = None, eol: bytes = b"\n") -> bytes:
    """One SSE event: optional `event:` line, `data:` line(s), blank line."""
    e = eol.decode()
    head = f"event: {event}{e}" if event is not None else ""
    if "\n" in data or "\r" in data:
        body = "".join(f"data: {ln}{e}" for ln in data.splitlines())
    else:
        body = f"data: {data}{e}"
    return (head + body + e).encode("utf-8", "surrogateescape")
