"""The bench's client: many concurrent streams (SSE; Ollama's NDJSON) over raw asyncio sockets.

Each stream POSTs to the proxy, de-chunks the response, and for every complete event (line)
counts it and looks for the upstream's `@<monotonic ns>` stamps: the first time a stamp arrives,
`now - stamp` is the delay that piece of text got between the upstream writing it and the
client reading it (one machine, one CLOCK_MONOTONIC, so the clocks agree).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field

from workload import Shape

_TS = re.compile(rb"@(\d{6,20})")


class Dechunker:
    """Incremental HTTP/1.1 chunked-body decoder (trailers ignored)."""

    __slots__ = ("buf", "left", "done")

    def __init__(self) -> None:
        self.buf = b""
        self.left = 0       # >0: body bytes still due in this chunk; <0: CRLF bytes to skip
        self.done = False

    def feed(self, data: bytes) -> bytes:
        buf = self.buf + data if self.buf else data
        self.buf = b""
        out = []
        i, n = 0, len(buf)
        while i < n and not self.done:
            if self.left > 0:
                take = min(self.left, n - i)
                out.append(buf[i:i + take])
                i += take
                self.left -= take
                if self.left == 0:
                    self.left = -2
                continue
            if self.left < 0:
                skip = min(-self.left, n - i)
                i += skip
                self.left += skip
                continue
            j = buf.find(b"\r\n", i)
            if j < 0:
                self.buf = buf[i:]
                break
            size = int(buf[i:j].split(b";", 1)[0], 16)
            i = j + 2
            if size == 0:
                self.done = True
            else:
                self.left = size
        return b"".join(out)


@dataclass
class StreamResult:
    surface: str
    status: int = 0
    events: int = 0                 # events (SSE events, NDJSON lines) the client received
    bytes: int = 0                  # bytes of them (de-chunked)
    stamps: int = 0                 # distinct upstream stamps seen
    rewritten: bool = False         # reasoning showed up in the surface's native field
    tags_left: bool = False         # a literal <think> reached the client
    error: str | None = None


@dataclass
class RunResult:
    streams: list[StreamResult] = field(default_factory=list)
    delays_ns: list[int] = field(default_factory=list)
    wall: float = 0.0

    @property
    def events(self) -> int:
        return sum(s.events for s in self.streams)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.streams)

    @property
    def errors(self) -> list[str]:
        return [f"{s.surface}: {s.error}" for s in self.streams if s.error]


async def one_stream(port: int, shape: Shape, query: str, delays: list[int],
                     res: StreamResult, progress: list[int] | None = None, slot: int = 0) -> None:
    body = json.dumps(shape.request()).encode()
    head = (f"POST {shape.path}?{query} HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"content-type: application/json\r\naccept: {shape.content_type}\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode()
    writer = None
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        writer.write(head + body)
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        res.status = int(lines[0].split(" ", 2)[1])
        hdrs = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip().lower()
        dech = Dechunker() if "chunked" in hdrs.get("transfer-encoding", "") else None
        pending = b""
        seen: set[int] = set()
        mono = time.monotonic_ns
        rewritten = shape.rewritten
        end = shape.end
        while True:
            data = await reader.read(1 << 18)
            if not data:
                break
            now = mono()
            if dech is not None:
                data = dech.feed(data)
            res.bytes += len(data)
            pending = pending + data if pending else data
            cut = pending.rfind(end)
            if cut >= 0:
                done, pending = pending[:cut + len(end)], pending[cut + len(end):]
                res.events += done.count(end)
                for m in _TS.finditer(done):
                    ts = int(m.group(1))
                    if ts not in seen:
                        seen.add(ts)
                        delays.append(now - ts)
                if not res.rewritten and rewritten(done):
                    res.rewritten = True
                if not res.tags_left and b"<think>" in done:
                    res.tags_left = True
                if progress is not None:
                    progress[slot] = len(seen)
            if dech is not None and dech.done:
                break
        res.stamps = len(seen)
        if res.status != 200:
            res.error = f"HTTP {res.status}"
    except Exception as e:  # a broken stream is reported, not fatal
        res.error = f"{type(e).__name__}: {e}"
    finally:
        if writer is not None:
            writer.close()


async def run(port: int, plan: list[tuple[Shape, str]], progress: list[int] | None = None,
              on_progress=None) -> RunResult:
    """Run every (shape, query) of `plan` concurrently against the proxy at `port`."""
    out = RunResult(streams=[StreamResult(s.name) for s, _ in plan])
    t0 = time.monotonic()
    tasks = [asyncio.create_task(one_stream(port, s, q, out.delays_ns, out.streams[i], progress, i))
             for i, (s, q) in enumerate(plan)]
    if on_progress is not None:
        tasks.append(asyncio.create_task(on_progress()))
    await asyncio.gather(*tasks)
    out.wall = time.monotonic() - t0
    return out
