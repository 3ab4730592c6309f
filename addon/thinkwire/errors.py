"""Answers, in thinkwire's words, for the two likeliest first mistakes, each in the shape of the
API the client called (so an SDK shows the message): a request sent to the forward proxy as if
it were the server (a base URL pointing at the proxy in regular mode), and a reverse-mode
upstream that cannot be reached. Left to mitmproxy, the first gets "502 Bad Gateway ... Request
destination unknown" and the second an empty reply (its connection to the upstream is opened
when the client connects, and on failure the client is closed without a word). An upstream that
fails a request later is answered in the same shapes too (`upstream_failed`, thinkwire.gateway).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mitmproxy import http
from mitmproxy.connection import Client, Server
from mitmproxy.optmanager import OptManager
from mitmproxy.proxy.mode_specs import RegularMode, ReverseMode

from .surfaces import messages, ollama

ANSWERED = "thinkwire_answered"   # flow.metadata: answered here (the status); nothing else to do
MISADDRESSED = 421     # Misdirected Request: the SDKs do not retry it, and show the message
UNREACHABLE = 502
PROBE_SECONDS = 10.0   # a connect to the upstream that takes longer is taken as failed
_SELF = ("localhost", "127.0.0.1", "::1")


UNREACHABLE_CODE = "thinkwire_upstream_unreachable"
FAILED_CODE = "thinkwire_upstream_failed"   # connected, then it closed or sent no valid answer
SHAPED = "thinkwire_shaped"    # flow.metadata: an upstream's failure is answered in the API's shape
DETAIL_MAX = 200              # characters of mitmproxy's error text quoted (it may hold upstream bytes)


def body(path: str, status: int, message: str, code: str | None = None) -> tuple[bytes, str]:
    """The error document of the API `path` belongs to: Anthropic's, Ollama's, else OpenAI's
    (`code`: its `code` field; by default the one `status` says)."""
    if messages.matches(path):
        kind = "invalid_request_error" if status < 500 else "api_error"
        doc: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    elif ollama.matches(path):
        doc = {"error": message}
    else:
        kind = "invalid_request_error" if status < 500 else "server_error"
        if code is None:
            code = "thinkwire_misaddressed" if status == MISADDRESSED else UNREACHABLE_CODE
        doc = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return json.dumps(doc).encode() + b"\n", "application/json"


def response(flow: http.HTTPFlow, status: int, message: str, code: str | None = None) -> http.Response:
    content, content_type = body(flow.request.path, status, message, code)
    return http.Response.make(status, content, {"content-type": content_type, "cache-control": "no-store"})


def upstream_failed(flow: http.HTTPFlow, detail: str, connect: bool) -> tuple[str, str]:
    """(message, code) for a request the upstream failed before it answered: it could not be
    connected to (`connect`), or it closed the connection or sent no valid HTTP response.
    `detail`: mitmproxy's error text (cut: it may quote the upstream's bytes)."""
    if len(detail) > DETAIL_MAX:
        detail = detail[:DETAIL_MAX] + "..."
    mode = flow.client_conn.proxy_mode
    r = flow.request
    ours = isinstance(mode, ReverseMode) and (r.host, r.port) == tuple(mode.address)
    upstream = _url(mode) if isinstance(mode, ReverseMode) and ours else f"{r.scheme}://{r.host}:{r.port}"
    if connect and ours:
        return unreachable(upstream, detail), UNREACHABLE_CODE
    if connect:
        return f"thinkwire: the server {upstream} cannot be reached ({detail})", UNREACHABLE_CODE
    return (f"thinkwire: the upstream {upstream} closed the connection before it answered ({detail}). Check "
            f"the server's own log: it may have stopped, crashed on this request, or be restarting"), FAILED_CODE


def misaddressed(flow: http.HTTPFlow) -> str | None:
    """The message for a request to the forward proxy addressed to the proxy itself (origin-form,
    Host: the proxy's own address), which mitmproxy cannot forward; None for any other."""
    if not isinstance(flow.client_conn.proxy_mode, RegularMode):
        return None
    sockname = flow.client_conn.sockname
    r = flow.request
    if not sockname or r.port != sockname[1] or r.host not in (*_SELF, sockname[0]):
        return None
    here = f"http://{r.host}:{r.port}"
    return (f"thinkwire: {r.method} {here}{r.path.split('?', 1)[0]} was sent to the proxy itself, which runs as a "
            f"forward proxy (regular mode) and cannot tell which server to send it to. Either run thinkwire in "
            f"front of your server, `thinkwire run --mode reverse:URL` (URL: the server's base, e.g. "
            f"http://127.0.0.1:11434 or https://api.openai.com) and keep {here} as the client's base URL; or "
            f"keep this proxy, set the client's base URL back to the server's and route it through the proxy "
            f"with HTTPS_PROXY={here} (`eval \"$(thinkwire env)\"`)")


def lazy_in_reverse_mode(options: OptManager) -> None:
    """In reverse mode mitmproxy opens the upstream connection when a client connects, and on a
    failure closes the client with no reply: opened when the request has come (unless the user
    chose), a failure gets an answer."""
    specs = [str(s) for s in getattr(options, "mode", ())]
    if any(s.startswith("reverse:") for s in specs) and not options.has_changed("connection_strategy"):
        options.update(connection_strategy="lazy")


def _url(mode: ReverseMode) -> str:
    return f"{mode.scheme}://{mode.address[0]}:{mode.address[1]}"


def unreachable(upstream: str, why: str) -> str:
    return (f"thinkwire: the upstream {upstream} cannot be reached ({why}). Check that the server "
            f"runs and listens at that address (a local server: is it started, on that port?), and that "
            f"--mode reverse:URL names it")


def connect_failed(client: Client, server: Server) -> str:
    """The log line for a connection mitmproxy could not open."""
    mode = client.proxy_mode
    if isinstance(mode, ReverseMode) and server.address == mode.address:
        return unreachable(_url(mode), str(server.error))   # (f-string's None: "None" as before)
    assert server.address is not None   # (the one it failed to connect to)
    host, port = server.address
    return f"thinkwire: cannot connect to {host}:{port} ({server.error}); the client was answered 502"


async def probe(address: tuple[str, int]) -> str | None:
    """None when a TCP connection to `address` opens (it is closed at once), else why not."""
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), PROBE_SECONDS)
    except (OSError, asyncio.TimeoutError) as e:
        return str(e) or type(e).__name__
    writer.close()
    return None


class Reachability:
    """The reverse-mode upstreams seen reachable. A request on a connection that has no upstream
    connection yet, to an upstream not seen reachable (none at first; again after a failed
    connect), is preceded by a probe: a failed probe answers it here. One entry per reverse
    mode's upstream at most (the modes are fixed at start)."""

    def __init__(self) -> None:
        self.reachable: set[tuple[str, int]] = set()

    def connected(self, client: Client, server: Server) -> None:
        """mitmproxy opened a connection (`server_connected`): kept for a reverse mode's upstream."""
        mode = client.proxy_mode
        if isinstance(mode, ReverseMode) and server.address == mode.address:
            self.reachable.add(mode.address)

    def failed(self, server: Server) -> None:
        self.reachable.discard(server.address)

    async def check(self, flow: http.HTTPFlow) -> str | None:
        """The message when the reverse-mode upstream of `flow` cannot be reached; None: go on."""
        mode = flow.client_conn.proxy_mode
        if not isinstance(mode, ReverseMode) or flow.server_conn.connected:
            return None
        address = mode.address
        if address in self.reachable:
            return None
        why = await probe(address)
        if why is None:
            self.reachable.add(address)
            return None
        return unreachable(_url(mode), why)
