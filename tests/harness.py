"""End-to-end harness: a scripted local upstream and a real mitmdump process in front of it.

The upstream speaks HTTP/1.1 on 127.0.0.1 and replies with whatever a test scripted for a path:
a status, headers and a list of body chunks written one by one (so a test chooses the chunk
boundaries the proxy sees), optionally with a pause between them. It records every request.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import socket
import ssl
import subprocess
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from devtools.process import LISTENING, ToolProcess, child_env, tool

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
    # Before chunk `gate_at`, wait until `gate` is set (10 s at most); `opened`: whether it was.
    gate: threading.Event | None = None
    gate_at: int = 0
    opened: bool | None = None
    stop: threading.Event | None = None   # once set, the connection is dropped before the next chunk


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


# The endpoints thinkwire asks a server about its template and model (thinkwire.serverstart,
# capabilities): a request to one that no test routed is answered 404, as a server without it
# does, and recorded in `asks`, not `requests` (which then holds what clients sent).
ASK_PATHS = ("/props", "/v1/models", "/api/v0/models", "/get_model_info", "/apply-template", "/tokenize")


class Upstream:
    """A scripted model server. `route(path_suffix, handler_or_reply)`; `requests` records all
    (but thinkwire's unrouted asks, in `asks`). It listens on `host` (127.0.0.1), over TLS when
    given a server context."""

    def __init__(self, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        self.routes: list[tuple[str, Handler]] = []
        self.requests: list[Seen] = []
        self.asks: list[Seen] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _handle(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                seen = Seen(self.command, self.path, dict(self.headers.items()), body)
                (outer.asks if outer._unrouted_ask(seen) else outer.requests).append(seen)
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
                        if reply.gate is not None and i == reply.gate_at:
                            reply.opened = reply.gate.wait(10)
                        if reply.close_after is not None and i >= reply.close_after or \
                                reply.stop is not None and reply.stop.is_set():
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

        self.server = ThreadingHTTPServer((host, 0), H)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def route(self, suffix: str, handler: Handler | Reply) -> None:
        h = handler if callable(handler) else (lambda _seen, r=handler: r)
        self.routes.insert(0, (suffix, h))

    def reset(self) -> None:
        self.routes.clear()
        self.requests.clear()
        self.asks.clear()

    def _unrouted_ask(self, seen: Seen) -> bool:
        path = seen.path.split("?", 1)[0]
        return path.endswith(ASK_PATHS) and not any(path.endswith(suffix) for suffix, _ in self.routes)

    def _reply(self, seen: Seen) -> Reply:
        path = seen.path.split("?", 1)[0]
        for suffix, h in self.routes:
            if path.endswith(suffix):
                return h(seen)
        return json_reply({"error": {"message": f"no route for {path}"}}, 404)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Proxy(ToolProcess):
    """A real `mitmdump -s addon/think.py` in reverse mode in front of `upstream_url`, on `port`
    (0: any free one)."""

    def __init__(self, upstream_url: str, confdir: Path, options: dict[str, str] | None = None,
                 env: dict[str, str] | None = None, extra_args: list[str] | None = None, port: int = 0) -> None:
        args = [tool("mitmdump"), "--mode", f"reverse:{upstream_url}", "--listen-host", "127.0.0.1",
                "--set", f"listen_port={port}", "--set", f"confdir={confdir}", "-s", str(ADDON)]
        for k, v in (options or {}).items():
            args += ["--set", f"{k}={v}"]
        super().__init__(args + (extra_args or []), child_env(env))
        self.port = int(self.wait_for(LISTENING, timeout=30).group(1))
        self.url = f"http://127.0.0.1:{self.port}"


def start_fails(options: dict[str, str], confdir: Path, env: dict[str, str] | None = None) -> str:
    """Start mitmdump with options expected to be refused; return its output."""
    args = [tool("mitmdump"), "--listen-host", "127.0.0.1",
            "--set", "listen_port=0", "--set", f"confdir={confdir}", "-s", str(ADDON)]
    for k, v in options.items():
        args += ["--set", f"{k}={v}"]
    p = subprocess.run(args, capture_output=True, timeout=60, env=child_env(env))
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


ENCODINGS = ["gzip", "deflate", "br", "zstd"]


def compress_events(encoding: str, events: list[bytes]) -> list[bytes]:
    """A compressed stream as a server that flushes its compressor after every event sends it:
    one piece per event, then the end marker (gzip/zlib trailer, brotli's last block, zstd's
    end of frame) as the last piece."""
    if encoding in ("gzip", "deflate"):
        z = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
        return [z.compress(e) + z.flush(zlib.Z_SYNC_FLUSH) for e in events] + [z.flush()]
    if encoding == "br":
        import brotli
        b = brotli.Compressor()
        return [b.process(e) + b.flush() for e in events] + [b.finish()]
    from backports import zstd
    c = zstd.ZstdCompressor()
    return [c.compress(e, zstd.ZstdCompressor.FLUSH_BLOCK) for e in events] + [c.flush()]


def decoded_before_error(encoding: str, chunks: list[bytes]) -> bytes:
    """What a fresh decoder yields from `chunks`, read one by one, before the first it cannot
    decode: what a client of a broken compressed stream should get."""
    from thinkwire.stream import decoder_for
    d, out = decoder_for(encoding), b""
    try:
        for c in chunks:
            out += d.decompress(c)
        out += d.flush()
    except Exception:
        pass
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


# -- strict upstreams for the way back ------------------------------------------------------
# Scripted model servers that check requests the way the real APIs do on the way in: they
# accept only the reasoning objects they issued themselves, and they check that every earlier
# assistant turn reads as the model wrote it. Route one with `up.route(path, strict.handle)`.
# Each scripted turn is the raw text the model writes (with its <think> markup) plus an
# optional tool call; `native` turns come with genuine reasoning objects instead.

_WS = " \t\r\n\f\v"   # the whitespace thinkwire trims (ASCII, like its splitter)
_TAG_SPACE = re.compile(r"[ \t\r\n\f\v]*(</?think>)[ \t\r\n\f\v]*")


def as_written(text: str) -> str:
    """Text compared modulo the whitespace thinkwire trims at reasoning block edges."""
    return _TAG_SPACE.sub(r"\1", text).strip(_WS)


@dataclass
class Turn:
    text: str                               # what the model writes, markup included
    tool: tuple[str, dict] | None = None    # (name, arguments)
    native: str | None = None               # genuine reasoning text the upstream signs itself


class StrictAnthropic:
    """A Messages upstream that, like the real API, rejects a thinking block whose signature it
    did not issue and a redacted_thinking block whose data it did not issue (400, the real
    error shape), requires each tool_use to be answered by a tool_result right after, and
    checks that assistant turns read as the model wrote them (`exact`: byte for byte, as a
    server's prefix cache needs them; else modulo the whitespace trimmed at block edges)."""

    def __init__(self, turns: list[Turn], exact: bool = False) -> None:
        self.turns = turns
        self.exact = exact
        self.signatures: dict[str, str] = {}   # signature -> thinking text it signs
        self.redacted: set[str] = set()
        self.bodies: list[bytes] = []          # every request body, as received
        self.errors: list[str] = []
        self._n = 0

    def _error(self, message: str) -> Reply:
        self.errors.append(message)
        return json_reply({"type": "error", "error": {"type": "invalid_request_error", "message": message}}, 400)

    def handle(self, seen: Seen) -> Reply:
        self.bodies.append(seen.body)
        req = seen.json()
        msgs = req.get("messages", [])
        assistant = 0
        for i, m in enumerate(msgs):
            if m.get("role") != "assistant":
                continue
            blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            if not blocks:
                return self._error(f"messages.{i}: all messages must have non-empty content")
            texts, uses = [], []
            for j, b in enumerate(blocks):
                t = b.get("type")
                if t == "thinking" and self.signatures.get(b.get("signature")) != b.get("thinking"):
                    return self._error(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
                if t == "redacted_thinking" and b.get("data") not in self.redacted:
                    return self._error(f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block")
                if t == "text":
                    if not b.get("text"):
                        return self._error(f"messages.{i}.content.{j}: text content blocks must be non-empty")
                    texts.append(b["text"])
                if t == "tool_use":
                    uses.append(b["id"])
            if assistant < len(self.turns):
                want, got = self.turns[assistant].text, "".join(texts)
                if not self.exact:
                    want, got = as_written(want), as_written(got)
                if got != want:
                    return self._error(f"messages.{i}: assistant turn reads {got!r}, the model wrote {want!r}")
            if uses:
                nxt = msgs[i + 1] if i + 1 < len(msgs) else {}
                results = [b.get("tool_use_id") for b in nxt.get("content", []) if isinstance(b, dict)
                           and b.get("type") == "tool_result"] if isinstance(nxt.get("content"), list) else []
                if results[:len(uses)] != uses:
                    return self._error(f"messages.{i}: `tool_use` ids were found without `tool_result` "
                                       "blocks immediately after")
            assistant += 1
        if self._n >= len(self.turns):
            return self._error("the script has no more turns")
        turn = self.turns[self._n]
        self._n += 1
        return self._reply(turn, self._n, bool(req.get("stream")))

    def _reply(self, turn: Turn, n: int, stream: bool) -> Reply:
        blocks: list[dict] = []
        if turn.native is not None:
            sig = f"EqSig{n}{os.urandom(6).hex()}"
            self.signatures[sig] = turn.native
            data = f"EmwRed{n}{os.urandom(6).hex()}"
            self.redacted.add(data)
            blocks += [{"type": "thinking", "thinking": turn.native, "signature": sig},
                       {"type": "redacted_thinking", "data": data}]
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        if turn.tool:
            blocks.append({"type": "tool_use", "id": f"toolu_{n}", "name": turn.tool[0], "input": turn.tool[1]})
        stop = "tool_use" if turn.tool else "end_turn"
        msg = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "m", "content": blocks,
               "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 9}}
        if not stream:
            return json_reply(msg)
        evs: list[dict] = [{"type": "message_start", "message": dict(msg, content=[], stop_reason=None)}]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                evs.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
                t = b["text"]
                for k in range(0, len(t), 5):   # small deltas: tags split across events
                    evs.append({"type": "content_block_delta", "index": i,
                                "delta": {"type": "text_delta", "text": t[k:k + 5]}})
            elif b["type"] == "thinking":
                evs.append({"type": "content_block_start", "index": i,
                            "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
                evs.append({"type": "content_block_delta", "index": i,
                            "delta": {"type": "thinking_delta", "thinking": b["thinking"]}})
                evs.append({"type": "content_block_delta", "index": i,
                            "delta": {"type": "signature_delta", "signature": b["signature"]}})
            elif b["type"] == "tool_use":
                evs.append({"type": "content_block_start", "index": i,
                            "content_block": dict(b, input={})})
                evs.append({"type": "content_block_delta", "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}})
            else:
                evs.append({"type": "content_block_start", "index": i, "content_block": b})
            evs.append({"type": "content_block_stop", "index": i})
        evs.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 9}})
        evs.append({"type": "message_stop"})
        return sse_reply(sse(*evs, event=True))


class StrictResponses:
    """A Responses upstream that, like OpenAI, answers an unknown reasoning id with 404 ("Item
    with id 'rs_…' not found.") and encrypted_content it did not issue with 400
    invalid_encrypted_content, requires each function_call_output to answer a function_call
    sent before it, and checks that assistant turns (the assistant messages between two user
    or tool-output items) read as the model wrote them (`exact`: byte for byte)."""

    def __init__(self, turns: list[Turn], exact: bool = False) -> None:
        self.turns = turns
        self.exact = exact
        self.ids: set[str] = set()
        self.blobs: set[str] = set()
        self.stored: dict[str, dict] = {}      # output items of `store`d responses, by id
        self.bodies: list[bytes] = []
        self.errors: list[str] = []
        self._n = 0

    def _resolve(self, items: list) -> list | Reply:
        """`item_reference`s replaced by the items they name, as a store-backed server reads
        them; an unknown id is 404, an item given twice 400, as OpenAI answers."""
        out, seen = [], set()
        for it in items:
            if isinstance(it, dict) and it.get("type") == "item_reference":
                if it.get("id") not in self.stored:
                    return self._error(404, f"Item with id '{it.get('id')}' not found.", param="input")
                it = self.stored[it["id"]]
            iid = it.get("id") if isinstance(it, dict) else None
            if iid is not None:
                if iid in seen:
                    return self._error(400, f"Duplicate item found with id {iid}.", param="input")
                seen.add(iid)
            out.append(it)
        return out

    def _error(self, status: int, message: str, code: str | None = None, param: str | None = None) -> Reply:
        self.errors.append(message)
        return json_reply({"error": {"message": message, "type": "invalid_request_error",
                                     "param": param, "code": code}}, status)

    def handle(self, seen: Seen) -> Reply:
        self.bodies.append(seen.body)
        req = seen.json()
        items = req.get("input")
        items = self._resolve(items if isinstance(items, list) else [])
        if isinstance(items, Reply):
            return items
        calls: set[str] = set()
        turns: list[list[str]] = []
        current: list[str] | None = None
        for it in items:
            t = it.get("type", "message")
            if t == "reasoning":
                if it.get("id") is not None and it["id"] not in self.ids:
                    return self._error(404, f"Item with id '{it['id']}' not found.", param="input")
                enc = it.get("encrypted_content")
                if enc is not None and enc not in self.blobs:
                    return self._error(400, "The encrypted content for item could not be verified.",
                                       code="invalid_encrypted_content")
                continue
            if t == "message" and it.get("role") == "assistant":
                c = it.get("content")
                text = c if isinstance(c, str) else "".join(p.get("text", "") for p in c)
                if current is None:
                    current = []
                    turns.append(current)
                current.append(text)
            elif t == "function_call":
                calls.add(it["call_id"])
                if current is None:
                    current = []
                    turns.append(current)
            elif t == "function_call_output":
                if it.get("call_id") not in calls:
                    return self._error(400, f"No tool call found for function call output with call_id "
                                            f"{it.get('call_id')}.", param="input")
                current = None
            else:
                current = None
        for k, texts in enumerate(turns[:len(self.turns)]):
            want, got = self.turns[k].text, "".join(texts)
            if not self.exact:
                want, got = as_written(want), as_written(got)
            if got != want:
                return self._error(400, f"assistant turn {k} reads {got!r}, the model wrote {want!r}")
        if self._n >= len(self.turns):
            return self._error(400, "the script has no more turns")
        turn = self.turns[self._n]
        self._n += 1
        reply = self._reply(turn, self._n, bool(req.get("stream")),
                            "reasoning.encrypted_content" in (req.get("include") or []))
        if req.get("store") is not False:   # OpenAI stores by default
            self.stored.update((it["id"], it) for it in self._last_output)
        return reply

    def _reply(self, turn: Turn, n: int, stream: bool, include: bool) -> Reply:
        out: list[dict] = []
        if turn.native is not None:
            rid = f"rs_{os.urandom(8).hex()}"
            self.ids.add(rid)
            item = {"id": rid, "type": "reasoning", "summary": [{"type": "summary_text", "text": turn.native}]}
            if include:
                blob = "gAAAA" + os.urandom(12).hex()
                self.blobs.add(blob)
                item["encrypted_content"] = blob
            out.append(item)
        if turn.text:
            out.append({"id": f"msg_{n}", "type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": turn.text, "annotations": []}]})
        if turn.tool:
            out.append({"id": f"fc_{n}", "type": "function_call", "status": "completed", "call_id": f"call_{n}",
                        "name": turn.tool[0], "arguments": json.dumps(turn.tool[1])})
        self._last_output = out
        resp = {"id": f"resp_{n}", "object": "response", "created_at": 1, "model": "qwen3",
                "status": "completed", "output": out, "usage": {"input_tokens": 3, "output_tokens": 9,
                                                                "total_tokens": 12}}
        if not stream:
            return json_reply(resp)
        evs: list[dict] = []

        def e(t: str, **kw) -> None:
            evs.append({"type": t, "sequence_number": len(evs), **kw})

        start = dict(resp, status="in_progress", output=[], usage=None)
        e("response.created", response=start)
        e("response.in_progress", response=start)
        for i, it in enumerate(out):
            if it["type"] == "message":
                text = it["content"][0]["text"]
                e("response.output_item.added", output_index=i, item=dict(it, status="in_progress", content=[]))
                e("response.content_part.added", item_id=it["id"], output_index=i, content_index=0,
                  part={"type": "output_text", "text": "", "annotations": []})
                for k in range(0, len(text), 5):
                    e("response.output_text.delta", item_id=it["id"], output_index=i, content_index=0,
                      delta=text[k:k + 5])
                e("response.output_text.done", item_id=it["id"], output_index=i, content_index=0, text=text)
                e("response.content_part.done", item_id=it["id"], output_index=i, content_index=0,
                  part=it["content"][0])
            elif it["type"] == "function_call":
                e("response.output_item.added", output_index=i, item=dict(it, status="in_progress", arguments=""))
                e("response.function_call_arguments.delta", item_id=it["id"], output_index=i,
                  delta=it["arguments"])
                e("response.function_call_arguments.done", item_id=it["id"], output_index=i,
                  arguments=it["arguments"])
            else:
                e("response.output_item.added", output_index=i, item=dict(it, summary=[]))
            e("response.output_item.done", output_index=i, item=it)
        e("response.completed", response=resp)
        return sse_reply(sse(*evs, event=True))


class StrictChat:
    """A chat completions upstream that, as DeepSeek's API documents for its reasoner, answers
    400 to an input message that carries `reasoning_content` (or `reasoning`): the reasoning is the
    model's output, not something to send back. It requires each tool message to answer a tool
    call made before it, and checks that assistant turns read as the model wrote them (reasoning
    inline, as the proxy restores it under think_chat_restore=inline; `exact`: byte for byte)."""

    def __init__(self, turns: list[Turn], exact: bool = False) -> None:
        self.turns = turns
        self.exact = exact
        self.bodies: list[bytes] = []
        self.errors: list[str] = []
        self._n = 0

    def _error(self, message: str) -> Reply:
        self.errors.append(message)
        return json_reply({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                     "code": "invalid_request_error"}}, 400)

    def handle(self, seen: Seen) -> Reply:
        self.bodies.append(seen.body)
        req = seen.json()
        calls: set[str] = set()
        assistant = 0
        for i, m in enumerate(req.get("messages", [])):
            if m.get("role") == "tool":
                if m.get("tool_call_id") not in calls:
                    return self._error(f"messages[{i}]: tool message answers no tool call made before it")
                continue
            if m.get("role") != "assistant":
                continue
            for key in ("reasoning_content", "reasoning"):
                if key in m:
                    return self._error(f"messages[{i}]: `{key}` is output only; remove it from the input")
            calls.update(c["id"] for c in m.get("tool_calls") or [])
            c = m.get("content") or ""
            text = c if isinstance(c, str) else "".join(p.get("text", "") for p in c)
            if assistant < len(self.turns):
                want, got = self.turns[assistant].text, text
                if not self.exact:
                    want, got = as_written(want), as_written(got)
                if got != want:
                    return self._error(f"messages[{i}]: assistant turn reads {got!r}, the model wrote {want!r}")
            assistant += 1
        if self._n >= len(self.turns):
            return self._error("the script has no more turns")
        turn = self.turns[self._n]
        self._n += 1
        return self._reply(turn, self._n, bool(req.get("stream")))

    def _reply(self, turn: Turn, n: int, stream: bool) -> Reply:
        call = None
        if turn.tool:
            call = {"id": f"call_{n}", "type": "function",
                    "function": {"name": turn.tool[0], "arguments": json.dumps(turn.tool[1])}}
        finish = "tool_calls" if call else "stop"
        if not stream:
            msg: dict = {"role": "assistant", "content": turn.text}
            if call:
                msg["tool_calls"] = [call]
            return json_reply({"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1, "model": "m",
                               "choices": [{"index": 0, "message": msg, "finish_reason": finish}]})

        def chunk(delta: dict, finish_reason: str | None = None) -> dict:
            return {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1, "model": "m",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        evs = [chunk({"role": "assistant", "content": ""})]
        evs += [chunk({"content": turn.text[k:k + 5]}) for k in range(0, len(turn.text), 5)]   # tags split
        if call:
            evs.append(chunk({"tool_calls": [dict(call, index=0)]}))
        evs.append(chunk({}, finish))
        return sse_reply(sse(*evs, "[DONE]"))
