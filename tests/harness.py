"""End-to-end harness: a scripted local upstream and a real mitmdump process in front of it.

The upstream speaks HTTP/1.1 on 127.0.0.1 and replies with whatever a test scripted for a path:
a status, headers and a list of body chunks written one by one (so a test chooses the chunk
boundaries the proxy sees), optionally with a pause between them. It records every request.
"""

from __future__ import annotations

import gzip
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
ADDON = ROOT / "addon" / "think.py"


@dataclass
class Reply:
    status: int = 200
    headers: dict = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    delay: float = 0.0                 # pause between chunks
    chunked: bool = True               # Transfer-Encoding: chunked, else Content-Length
    content_length: int | None = None  # override (to lie about the length)
    close_after: int | None = None     # drop the connection after this many chunks


def json_reply(obj: object, status: int = 200, gzip_it: bool = False) -> Reply:
    body = json.dumps(obj).encode()
    headers = {"content-type": "application/json"}
    if gzip_it:
        body = gzip.compress(body)
        headers["content-encoding"] = "gzip"
    return Reply(status, headers, [body], chunked=False)


def sse_reply(chunks: list[bytes] | bytes, **kw) -> Reply:
    if isinstance(chunks, bytes):
        chunks = [chunks]
    headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
    headers.update(kw.pop("headers", {}))
    return Reply(200, headers, chunks, **kw)


@dataclass
class Seen:
    method: str
    path: str
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


Handler = Callable[[Seen], Reply]


class Upstream:
    """A scripted model server. `route(path_suffix, handler_or_reply)`; `requests` records all."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, Handler]] = []
        self.requests: list[Seen] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _handle(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                seen = Seen(self.command, self.path, dict(self.headers.items()), body)
                outer.requests.append(seen)
                reply = outer._reply(seen)
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                total = b"".join(reply.chunks)
                if reply.chunked:
                    self.send_header("transfer-encoding", "chunked")
                else:
                    self.send_header("content-length", str(
                        reply.content_length if reply.content_length is not None else len(total)))
                self.end_headers()
                try:
                    for i, c in enumerate(reply.chunks):
                        if reply.close_after is not None and i >= reply.close_after:
                            self.close_connection = True
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                        if reply.chunked:
                            if c:
                                self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
                        else:
                            self.wfile.write(c)
                        self.wfile.flush()
                        if reply.delay:
                            time.sleep(reply.delay)
                    if reply.chunked:
                        self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_POST = do_GET = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def route(self, suffix: str, handler: Handler | Reply) -> None:
        h = handler if callable(handler) else (lambda _seen, r=handler: r)
        self.routes.insert(0, (suffix, h))

    def reset(self) -> None:
        self.routes.clear()
        self.requests.clear()

    def _reply(self, seen: Seen) -> Reply:
        path = seen.path.split("?", 1)[0]
        for suffix, h in self.routes:
            if path.endswith(suffix):
                return h(seen)
        return json_reply({"error": {"message": f"no route for {path}"}}, 404)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Proxy:
    """A real `mitmdump -s addon/think.py` in reverse mode in front of `upstream_url`."""

    def __init__(self, upstream_url: str, confdir: Path, options: dict[str, str] | None = None,
                 env: dict[str, str] | None = None, extra_args: list[str] | None = None) -> None:
        args = [str(Path(sys.executable).with_name("mitmdump")),
                "--mode", f"reverse:{upstream_url}", "--listen-host", "127.0.0.1",
                "--set", "listen_port=0", "--set", f"confdir={confdir}",
                "-s", str(ADDON)]
        for k, v in (options or {}).items():
            args += ["--set", f"{k}={v}"]
        args += extra_args or []
        e = {k: v for k, v in os.environ.items() if not k.startswith("THINK_")}
        e.update(env or {})
        e["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e)
        self.lines: list[str] = []
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()
        self.port = self._wait_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            self._q.put(line)
        self._q.put(None)

    def _wait_port(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError("mitmdump exited:\n" + "\n".join(self.lines))
            m = re.search(r"listening at 127\.0\.0\.1:(\d+)", line)
            if m:
                return int(m.group(1))
        self.stop()
        raise RuntimeError("mitmdump did not start:\n" + "\n".join(self.lines))

    def log(self) -> str:
        return "\n".join(self.lines)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_fails(options: dict[str, str], confdir: Path, env: dict[str, str] | None = None) -> str:
    """Start mitmdump with options expected to be refused; return its output."""
    args = [str(Path(sys.executable).with_name("mitmdump")), "--listen-host", "127.0.0.1",
            "--set", "listen_port=0", "--set", f"confdir={confdir}", "-s", str(ADDON)]
    for k, v in options.items():
        args += ["--set", f"{k}={v}"]
    e = {k: v for k, v in os.environ.items() if not k.startswith("THINK_")}
    e.update(env or {})
    p = subprocess.run(args, capture_output=True, timeout=60, env=e)
    return (p.stdout + p.stderr).decode("utf-8", "replace") + f"\n[exit {p.returncode}]"


def sse(*objs: object, event: bool = False) -> list[bytes]:
    """One SSE event per object (`event:` lines from each object's `type` when asked)."""
    out = []
    for o in objs:
        if isinstance(o, str):
            out.append(f"data: {o}\n\n".encode())
            continue
        head = f"event: {o['type']}\n" if event else ""
        out.append(f"{head}data: {json.dumps(o)}\n\n".encode())
    return out


def rechunk(data: bytes, sizes: list[int]) -> list[bytes]:
    """Cut `data` into pieces of the given sizes (cycled), for chosen chunk boundaries."""
    out, i, k = [], 0, 0
    while i < len(data):
        n = max(1, sizes[k % len(sizes)])
        out.append(data[i:i + n])
        i += n
        k += 1
    return out


@dataclass
class Got:
    status: int
    headers: dict
    content: bytes

    def json(self):
        return json.loads(self.content)


def post(url: str, obj: object = None, raw: bytes | None = None, method: str = "POST",
         headers: dict | None = None, timeout: float = 20) -> Got:
    """A plain HTTP/1.1 request with the standard library (no client-side decoding)."""
    import http.client
    from urllib.parse import urlsplit
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    body = raw if raw is not None else (json.dumps(obj).encode() if obj is not None else None)
    h = {"content-type": "application/json"}
    h.update(headers or {})
    conn.request(method, u.path + (f"?{u.query}" if u.query else ""), body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    got = Got(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    conn.close()
    return got
