"""Server-sent events framing: bytes in, events out, events back to bytes.

Pure. Lines may end in LF, CRLF or CR (the SSE spec allows all three); a stream may start with
a UTF-8 BOM. Every event keeps its original bytes, so an event the rewrite leaves alone goes
back out exactly as it came in.
"""

from __future__ import annotations

import re

from .events import HEAD, Event, long_piece
from .jsonio import OUT

_LINE_END = re.compile(rb"\r\n|\r|\n")
_LINES = re.compile("\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"
_SPLIT_MAX = 4096   # bytes: a read up to this long is framed with bytes.split, a longer one line by line
EVENT_MAX = 1024 * 1024   # bytes: an event (an NDJSON line) held longer than this passes as it comes


class SSEParser:
    """Incremental parser. `feed(bytes)` returns the complete events; `finish()` the rest.

    Linear in the stream's length however it is chunked: the unterminated line is kept as a
    list of pieces and joined only when a line end arrives, and the consumed lines of the event
    being read are kept as pieces too, joined once when it is dispatched.

    With a `limit` (the proxy's is EVENT_MAX) an event is held up to that many bytes: past it,
    what it held and then the rest of it, up to its blank line, come out as `long` pieces
    (`long_piece`), as they arrive. Without one (readers of whole bodies), any length is held.
    """

    __slots__ = ("_raw", "_tail", "_lines", "_bom_checked", "_held", "_skip", "limit")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit if limit is not None else 1 << 62
        self._raw: list[bytes] = []    # bytes of the current event's complete lines, line ends included
        self._tail: list[bytes] = []   # bytes of the current line, not terminated yet
        self._lines: list[bytes] = []  # complete lines of the event being read
        self._bom_checked = False
        self._held = 0                 # bytes in _raw and _tail
        # Inside a long event: None when not; else 0 inside a line, 1 at a line start, 2 right
        # after a CR (a line start, unless a LF follows: CRLF); 3 ended at a CR (a LF next is its).
        self._skip: int | None = None

    def feed(self, data: bytes, final: bool = False) -> list[Event]:
        if self._skip == 3 and data:   # the long event ended at a CR: a LF next is its CRLF
            self._skip = None
            if data[:1] == b"\n":
                return [long_piece(b"\n")] + (self.feed(data[1:], final) if len(data) > 1 else [])
        if self._skip is not None and data:
            n = self._skip_to_end(data)
            if n < 0:
                return [long_piece(data)]
            return [long_piece(data[:n])] + (self.feed(data[n:], final) if n < len(data) else [])
        events = self._feed(data, final)
        if self._held > self.limit:
            events.append(long_piece(self._start_skip(), HEAD))
        return events

    def _start_skip(self) -> bytes:
        buf = self.pending()
        if buf.endswith(b"\r"):
            # A CR right after a line end is an empty line: the event ended there, held only for
            # the LF that may follow (3); else the CR ended a line of the event (2).
            self._skip = 3 if buf[-2:-1] in (b"\n", b"\r") else 2
        else:
            self._skip = 1 if buf.endswith(b"\n") else 0
        return buf

    def _skip_to_end(self, data: bytes) -> int:
        """How many bytes of `data` are the rest of the long event, its blank line included;
        -1 when all of them are (it goes on)."""
        pos = 1 if self._skip == 2 and data[:1] == b"\n" else 0
        at = pos if self._skip else -1   # where the line being read started (-1: before data)
        for m in _LINE_END.finditer(data, pos):
            if m.start() == at:   # an empty line: the event's end
                self._skip = 3 if m.end() == len(data) and m.group() == b"\r" else None
                return m.end()
            at = m.end()
        self._skip = (2 if data.endswith(b"\r") else 1) if at == len(data) else 0
        return -1

    def _feed(self, data: bytes, final: bool) -> list[Event]:
        tail = self._tail
        if (not tail and not self._raw and not self._lines and self._bom_checked and not final
                and len(data) < _SPLIT_MAX and data[-2:] == b"\n\n" and b"\r" not in data):
            # The common read: whole LF-framed events and nothing pending. When no block starts
            # or ends with a line end, blank lines are exactly the "\n\n" separators: same events.
            # (bytes.split scans byte by byte: a long event, such as a Responses done event with
            # an item's whole text, is read faster by the line loop below, which uses memchr.)
            blocks = data[:-2].split(b"\n\n")
            for block in blocks:
                if not block or block[0] == 10 or block[-1] == 10:
                    break
            else:
                return [_make_event(block + b"\n\n", block.split(b"\n"), b"\n", self) for block in blocks]
        if not final and (not data or (tail and not tail[-1].endswith(b"\r")
                                       and b"\n" not in data and b"\r" not in data)):
            if data:
                tail.append(data)  # still inside one line: nothing to do until its end arrives
                self._held += len(data)
            return []
        if tail:
            buf = b"".join(tail) + data if len(tail) > 1 or data else tail[0]
            self._tail = []
        else:
            buf = data
        self._held -= len(buf) - len(data)   # the old tail is in buf now
        events: list[Event] = []
        start = 0           # start of the current event's bytes not yet in _raw
        pos = 0
        lines = self._lines
        n = len(buf)
        # Without a CR, line ends are found with bytes.find (a memchr): the line of a long event
        # that came over several reads is not scanned by a regular expression.
        cr = b"\r" in buf
        while True:
            if cr:
                m = _LINE_END.search(buf, pos)
                if m is None:
                    break
                stop, end, eol = m.start(), m.end(), m.group()
            else:
                stop = buf.find(b"\n", pos)
                if stop < 0:
                    break
                end, eol = stop + 1, b"\n"
            if eol == b"\r" and end == n and not final:
                break  # a CR at the end may be the first half of CRLF: wait
            line = buf[pos:stop]
            pos = end
            if line:
                lines.append(line)
                continue
            # Blank line: dispatch.
            raw = buf[start:end]
            if self._raw:
                self._raw.append(raw)
                raw = b"".join(self._raw)
                self._raw = []
            events.append(_make_event(raw, lines, eol, self) if len(raw) <= self.limit else long_piece(raw, HEAD))
            self._held = 0
            lines = []
            start = end
        self._lines = lines
        if pos > start:
            self._raw.append(buf[start:pos])
            self._held += pos - start
        if pos < n:
            self._tail = [buf[pos:]]
            self._held += n - pos
        return events

    def finish(self) -> list[Event]:
        """The bytes left at the end of the stream, as a last (unterminated) event."""
        events = self.feed(b"", final=True) if self._tail else []
        if not self._tail and not self._raw:
            return events
        tail = b"".join(self._tail)
        buf = b"".join(self._raw) + tail
        lines = self._lines
        if tail:
            lines.append(tail.rstrip(b"\r"))
        self._raw, self._tail, self._lines = [], [], []
        self._held = 0
        last = _make_event(buf, lines, b"\n", self)
        last.complete = False
        return events + [last]

    def idle(self) -> bool:
        """Nothing pending: the next bytes start a new event."""
        return not (self._tail or self._raw or self._lines) and self._bom_checked and self._skip is None

    def pending(self) -> bytes:
        """Bytes received but not yet part of a complete event (for a fail-open hand-off)."""
        buf = b"".join(self._raw) + b"".join(self._tail)
        self._raw, self._tail, self._lines = [], [], []
        self._held = 0
        return buf

    @staticmethod
    def terminated(raw: bytes, eol: bytes) -> bytes:
        """An event the stream ended inside, given the blank line that ends it."""
        return raw + (eol if raw.endswith((b"\n", b"\r")) else eol * 2)


def _make_event(raw: bytes, lines: list[bytes], eol: bytes, parser: SSEParser) -> Event:
    if len(lines) == 1 and parser._bom_checked and lines[0][:6] == b"data: ":  # the usual event
        return Event(raw, None, lines[0][6:].decode("utf-8", "surrogateescape"), eol)
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


def encode(data: str, event: str | None = None, eol: bytes = b"\n") -> bytes:
    """One SSE event: optional `event:` line, `data:` line(s), blank line."""
    e = eol.decode()
    head = f"event: {event}{e}" if event is not None else ""
    if "\n" in data or "\r" in data:  # SSE lines end at CR or LF only (str.splitlines knows more)
        body = "".join(f"data: {ln}{e}" for ln in _LINES.split(data))
    else:
        body = f"data: {data}{e}"
    return (head + body + e).encode("utf-8", OUT)
