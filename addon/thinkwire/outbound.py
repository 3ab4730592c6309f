"""The proxy's own requests to a flow's server (Ollama's /api/show; later a server's chat template),
each bounded: an overall deadline, a cap on the answer's bytes, a cap on asks in flight.

An ask runs on the event loop (asyncio streams and h11, which mitmproxy speaks itself): never on a
thread pool, so a server that stalls or trickles holds nothing but its own socket, and mitmproxy's
host-name lookups (asyncio's default thread pool) go on for every other flow. An ask goes only to
the server the flow goes to (`Server`), the way mitmproxy sends the flow (`Route`: straight, or
through mitmproxy's upstream proxy, with TLS verified as mitmproxy verifies it). A redirect is
never followed (it is an answer like any other status: the caller reads it as "not known"), so
the client's credentials reach no other host. Anything but a complete answer within the deadline
(no connection, a bad status line, a body past the cap, the deadline) is None: "not known".

`Kept` keeps what asks said: a clear answer for a while, "not known" briefly (so a server that
does not answer is not asked again by every request), one ask per key at a time, bounded in
entries and, when given a weight for its entries, in bytes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Awaitable, Callable, Generic, Hashable, TypeVar

import h11

log = logging.getLogger(__name__)

DEADLINE = 2.0            # seconds for one ask, all of it (think_ask_timeout)
MAX_BODY = 1 << 20        # bytes of an answer's body; past it: not known
MAX_HEAD = 16 << 10       # bytes of an answer's status line and headers (h11's limit)
MAX_PENDING = 32          # asks in flight at once; past it an ask is "not known" at once
READ = 64 << 10           # bytes read from the socket at a time


@dataclass(frozen=True)
class Server:
    """The server a flow goes to: the only place an ask for that flow may go."""

    scheme: str   # "http" or "https"
    host: str
    port: int

    @property
    def hostport(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def authority(self) -> str:
        """The Host header's value (the port left out where it is the scheme's)."""
        default = 443 if self.scheme == "https" else 80
        return self.hostport if self.port != default else self.hostport.rsplit(":", 1)[0]

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.authority}{path}"


@dataclass(frozen=True)
class Route:
    """How mitmproxy reaches servers, which an ask follows: straight (`proxy` None) or through an
    HTTP(S) upstream proxy (mitmproxy's `upstream:` mode): CONNECT for an https server, the
    absolute-form request for an http one. TLS to the server is verified unless `insecure`
    (mitmproxy's ssl_insecure), against `cafile` / `capath` when given (else certifi's, as
    mitmproxy does)."""

    proxy: Server | None = None
    proxy_auth: bytes | None = None   # Proxy-Authorization value (mitmproxy's upstream_auth)
    insecure: bool = False
    cafile: str | None = None
    capath: str | None = None


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


class Asker:
    """Makes asks, within the bounds. `made`, `refused`: asks made and asks refused at the cap."""

    def __init__(self, deadline: float = DEADLINE, max_body: int = MAX_BODY,
                 max_pending: int = MAX_PENDING) -> None:
        self.deadline, self.max_body, self.max_pending = deadline, max_body, max_pending
        self.pending = 0
        self.made = 0
        self.refused = 0

    async def ask(self, server: Server, method: str, path: str, body: bytes | None = None,
                  headers: dict[str, str] | None = None, route: Route = Route()) -> Answer | None:
        """One request to `server` (`headers`: the client's credentials, which go nowhere else):
        its answer within the deadline, else None. Raises Busy at once when `max_pending` asks
        are in flight (not a fact about the server: `Kept` does not keep it)."""
        if self.pending >= self.max_pending:
            self.refused += 1
            raise Busy(f"{self.pending} asks in flight")
        self.pending += 1
        self.made += 1
        writer = None
        try:
            async with asyncio.timeout(self.deadline):
                reader, writer = await _connect(server, route)
                absolute = route.proxy is not None and server.scheme == "http"   # (https: tunnelled)
                head = [("host", server.authority), ("accept-encoding", "identity"), ("connection", "close")]
                if absolute and route.proxy_auth:
                    head.append(("proxy-authorization", route.proxy_auth.decode("latin-1")))
                head += list((headers or {}).items())
                if body is not None:
                    head += [("content-type", "application/json"), ("content-length", str(len(body)))]
                request = h11.Request(method=method, target=server.url(path) if absolute else path, headers=head)
                return await _exchange(reader, writer, request, body, self.max_body)
        except Exception as e:   # TimeoutError, OSError, ssl.SSLError, h11 errors, a body past the cap
            log.info("thinkwire: %s %s did not answer (%s)", method, server.url(path.split("?", 1)[0]),
                     type(e).__name__)
            return None
        finally:
            self.pending -= 1
            if writer is not None:
                writer.transport.abort()   # never wait for a peer to close


class Busy(Exception):
    """No ask made: as many as the cap allows are in flight."""


class TooLarge(Exception):
    """An answer past its cap."""


async def _connect(server: Server, route: Route) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    tls = _context(route.insecure, route.cafile, route.capath) if server.scheme == "https" else None
    if route.proxy is None:
        return await asyncio.open_connection(server.host, server.port, ssl=tls, limit=READ)
    proxy = route.proxy
    proxy_tls = _context(route.insecure, route.cafile, route.capath) if proxy.scheme == "https" else None
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port, ssl=proxy_tls, limit=READ)
    if tls is None:
        return reader, writer   # http: the request itself goes to the proxy, in absolute form
    try:
        head = [("host", server.authority)]
        if route.proxy_auth:
            head.append(("proxy-authorization", route.proxy_auth.decode("latin-1")))
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        writer.write(conn.send(h11.Request(method="CONNECT", target=server.hostport, headers=head)))
        await writer.drain()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(READ))
            elif isinstance(event, h11.Response):
                if not 200 <= event.status_code < 300:
                    raise ConnectionError(f"the upstream proxy answered CONNECT with {event.status_code}")
                break
            elif not isinstance(event, h11.InformationalResponse):
                raise ConnectionError("the upstream proxy closed the CONNECT")
        await writer.start_tls(tls, server_hostname=server.host)
        return reader, writer
    except BaseException:
        writer.transport.abort()
        raise


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: h11.Request,
                    body: bytes | None, max_body: int) -> Answer:
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    out = conn.send(request)
    if body:
        out += conn.send(h11.Data(data=body))
    writer.write(out + conn.send(h11.EndOfMessage()))
    await writer.drain()
    status, got = 0, bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ))   # b"" at the end: h11 says what it means
        elif isinstance(event, h11.Response):
            status = event.status_code
            if 300 <= status < 400:
                return Answer(status, b"")   # a redirect is not followed: its body is not read
        elif isinstance(event, h11.Data):
            got += event.data
            if len(got) > max_body:
                raise TooLarge(f"the answer is past {max_body} bytes")
        elif isinstance(event, h11.EndOfMessage):
            return Answer(status, bytes(got))
        elif isinstance(event, h11.ConnectionClosed):
            raise ConnectionError("closed before the answer ended")


@functools.lru_cache(maxsize=8)
def _context(insecure: bool, cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """TLS settings for a server, made once per kind (loading the trusted CAs takes a while)."""
    if insecure:
        return ssl._create_unverified_context()  # noqa: S323 (mitmproxy's ssl_insecure)
    if cafile is None and capath is None:
        import certifi
        cafile = certifi.where()
    return ssl.create_default_context(cafile=cafile, capath=capath)


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(Generic[K, V]):
    """What asks said, by key: a clear answer for `ttl` seconds, None ("not known") for
    `failure_ttl`; at most `size` keys and, with `weigh` (bytes of a key and its answer), at
    most `max_bytes` in all (the least recently used go first). A burst of requests for one key
    waits on one ask (each at most until that ask's deadline)."""

    def __init__(self, ttl: float, failure_ttl: float, size: int,
                 clock: Callable[[], float] = time.monotonic, max_bytes: int | None = None,
                 weigh: Callable[[K, V | None], int] | None = None) -> None:
        self.ttl, self.failure_ttl, self.size, self._clock = ttl, failure_ttl, size, clock
        self.max_bytes, self._weigh = max_bytes, weigh
        self.bytes = 0   # the weight of what is kept (with `weigh`)
        self._known: OrderedDict[K, tuple[float, V | None]] = OrderedDict()
        self._weights: dict[K, int] = {}
        self._asking: dict[K, asyncio.Future[V | None]] = {}

    def __len__(self) -> int:
        return len(self._known)

    async def get(self, key: K, ask: Callable[[], Awaitable[V | None]]) -> V | None:
        got = self._known.get(key)
        if got is not None:
            if self._clock() < got[0]:
                self._known.move_to_end(key)
                return got[1]
            self.forget(key)
        pending = self._asking.get(key)
        if pending is None:
            pending = self._asking[key] = asyncio.ensure_future(self._ask(key, ask))
        return await asyncio.shield(pending)

    async def _ask(self, key: K, ask: Callable[[], Awaitable[V | None]]) -> V | None:
        try:
            answer = await ask()
        except Busy:
            return None   # not known now; the next request asks again
        except Exception:   # (an ask says None; this is a bug's way out) not known
            log.debug("thinkwire: an ask failed", exc_info=True)
            answer = None
        finally:
            self._asking.pop(key, None)
        self.forget(key)
        self._known[key] = (self._clock() + (self.ttl if answer is not None else self.failure_ttl), answer)
        if self._weigh is not None:
            self._weights[key] = w = self._weigh(key, answer)
            self.bytes += w
        while self._known and (len(self._known) > self.size or
                               self.max_bytes is not None and self.bytes > self.max_bytes):
            self.forget(next(iter(self._known)))
        return answer

    def peek(self, key: K) -> V | None:
        """What is kept for `key` (expired or not), without asking."""
        got = self._known.get(key)
        return None if got is None else got[1]

    def forget(self, key: K) -> None:
        self._known.pop(key, None)
        self.bytes -= self._weights.pop(key, 0)
