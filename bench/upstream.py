"""The bench's model server: a lean asyncio HTTP/1.1 server, run as its own process.

`python bench/upstream.py` prints `PORT <n>` and serves until SIGTERM/SIGINT. Every POST is
answered with a stream in the shape of the surface its path names (workload.SHAPES: SSE, or NDJSON),
one HTTP chunk per event, each text delta stamped with CLOCK_MONOTONIC (ns) just before it is
written. Query parameters:
  n=2000     text deltas in the stream
  iv=0       seconds between deltas (0: as fast as the proxy takes them)
  seed=0     varies the words between streams
  n1, g1     after n1 deltas, wait until the file g1 exists before going on
  g2         after the last delta, wait until the file g2 exists before the closing events
(n1/g1/g2 hold streams open at two known lengths for the memory measurement; the bench
creates each gate file once it has read the proxy's RSS.)
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workload import SHAPES, render, tokens  # noqa: E402

_BY_PATH = {s.path: s for s in SHAPES.values()}
# What a llama-server says of its model and of the prompt its template renders (bench/ttfb.py).
_TEMPLATE = {"/props": b'{"model_path": "/models/local.gguf", "default_generation_settings": {}}',
             "/apply-template": b'{"prompt": "<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n<think>\\n"}'}
_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncache-control: no-cache\r\n"
         b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n")
_TOKENS: dict = {}


def _tokens(n: int, seed: int) -> list:
    key = (n, seed)
    t = _TOKENS.get(key)
    if t is None:
        t = _TOKENS[key] = tokens(n, seed=seed)
    return t


async def _wait_until(t: float) -> None:
    d = t - time.monotonic()
    if d > 0:
        await asyncio.sleep(d)


async def _wait_for_file(path: str) -> None:
    while not os.path.exists(path):
        await asyncio.sleep(0.02)


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        length = 0
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        if length:
            await reader.readexactly(length)
        u = urlsplit(target)
        path = u.path
        if path.startswith("/tpl"):   # a llama-server (bench/ttfb.py): /tplN/props, /tplN/apply-template
            path = "/" + path.split("/", 2)[2]
            answer = _TEMPLATE.get(path)
            if answer is not None:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                             b"connection: close\r\n\r\n%s" % (len(answer), answer))
                await writer.drain()
                return
        shape = _BY_PATH.get(path)
        if shape is None:
            writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            await writer.drain()
            return
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        n = int(q.get("n", 2000))
        iv = float(q.get("iv", 0))
        n1 = int(q.get("n1", -1))
        g1 = q.get("g1")
        g2 = q.get("g2")
        toks = _tokens(n, int(q.get("seed", 0)))
        transport = writer.transport
        write = writer.write

        def chunk(data: bytes) -> None:
            write(b"%x\r\n%s\r\n" % (len(data), data))

        st: dict = {}
        write(_HEAD % shape.content_type.encode())
        for ev in shape.head(st):
            chunk(ev)
        await writer.drain()
        texts = []
        start = time.monotonic()
        mono = time.monotonic_ns
        for k, tok in enumerate(toks):
            if k == n1 and g1:
                await writer.drain()
                await _wait_for_file(g1)
                start = time.monotonic() - k * iv   # keep the pace after the pause
            elif iv:
                await _wait_until(start + k * iv)
            t = render(tok, mono())
            texts.append(t)
            chunk(shape.delta(st, t))
            if iv or transport.get_write_buffer_size() > 65536:
                await writer.drain()
        if g2:
            await writer.drain()
            await _wait_for_file(g2)
        for ev in shape.tail(st, "".join(texts)):
            chunk(ev)
        write(b"0\r\n\r\n")
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main() -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
