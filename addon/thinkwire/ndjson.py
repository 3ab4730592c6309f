"""Newline-delimited JSON framing (`application/x-ndjson`, Ollama's streams): bytes in, lines out.

Pure. A line ends at LF (a CR before it is part of the line end, CRLF); a stream may start with a
UTF-8 BOM. Each line comes out as an `events.Event` with no event name, `data` its text without the
line end, and `raw` its bytes as received, line end included, so a line the rewrite leaves alone
goes back out exactly as it came in. A line of only whitespace has no data (it passes as it came).
"""

from __future__ import annotations

from .events import HEAD, Event, long_piece

_BOM = b"\xef\xbb\xbf"
_LF = b"\n"
_CRLF = b"\r\n"


class NDJSONParser:
    """Incremental parser with SSEParser's interface: `feed(bytes)` returns the complete lines,
    `finish()` the rest. Linear in the stream's length however it is chunked: an unterminated
    line is kept as a list of pieces and joined once its end arrives. With a `limit` (the
    proxy's is sse.EVENT_MAX) a line is held up to that many bytes: past it, what it held and
    then the rest of it, its LF included, come out as `long` pieces (`sse.long_piece`), as they
    arrive."""

    __slots__ = ("_tail", "_started", "_held", "_skip", "limit")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit if limit is not None else 1 << 62
        self._tail: list[bytes] = []   # bytes of the current line, not terminated yet
        self._started = False          # the first line (which may carry a BOM) was read
        self._held = 0                 # bytes in _tail
        self._skip = False             # inside a long line

    def feed(self, data: bytes) -> list[Event]:
        if not data:
            return []
        if self._skip:
            n = data.find(_LF) + 1
            if not n:
                return [long_piece(data)]
            self._skip = False
            return [long_piece(data[:n])] + self.feed(data[n:])
        tail = self._tail
        if _LF not in data:
            tail.append(data)
            self._held += len(data)
            if self._held > self.limit:
                self._skip = True
                return [long_piece(self.pending(), HEAD)]
            return []
        if tail:
            tail.append(data)
            data = b"".join(tail)
            self._tail = tail = []
        end = data.rfind(_LF) + 1
        lines = data[:end - 1].split(_LF)
        events = [self._line(line + _LF) if len(line) < self.limit else long_piece(line + _LF, HEAD)
                  for line in lines]
        self._held = len(data) - end
        if end < len(data):
            tail.append(data[end:])
            if self._held > self.limit:
                self._skip = True
                events.append(long_piece(self.pending(), HEAD))
        return events

    def finish(self) -> list[Event]:
        """The bytes after the last line end, as a last (unterminated) line."""
        if not self._tail:
            return []
        raw = b"".join(self._tail)
        self._tail = []
        self._held = 0
        last = self._line(raw)
        last.complete = False
        return [last]

    def idle(self) -> bool:
        """Nothing pending: the next bytes start a new line."""
        return not self._tail and self._started and not self._skip

    def pending(self) -> bytes:
        """Bytes received but not yet part of a complete line (for a fail-open hand-off)."""
        buf = b"".join(self._tail)
        self._tail = []
        self._held = 0
        return buf

    @staticmethod
    def terminated(raw: bytes, eol: bytes) -> bytes:
        """A line the stream ended inside, given its line end."""
        return raw + eol

    def _line(self, raw: bytes) -> Event:
        body = raw[:-1] if raw.endswith(_LF) else raw
        eol = _LF
        if body.endswith(b"\r"):
            body, eol = body[:-1], _CRLF
        if not self._started:
            self._started = True
            if body.startswith(_BOM):
                body = body[3:]
        text = body.decode("utf-8", "surrogateescape")
        return Event(raw, None, text if text.strip() else None, eol)
