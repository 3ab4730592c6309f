"""The mitmproxy glue: options, which flows to touch, the stream callable, headers, fail-open."""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import inspect
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from mitmproxy import addonmanager, ctx, exceptions, http
from mitmproxy.addons.upstream_auth import parse_upstream_auth
from mitmproxy.proxy import mode_specs
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

from . import __version__, bodies, contentview, endpoints, engine, errors, gateway, keys, report, userlog, written
from .capabilities import Capabilities, refuses_thinking
from .context import FlowContext
from .request import Facts
from .decoding import BODY_MAX, BodyError, decode_body, decoder_for, read_request
from .learning import Learner
from .memory import Memory, layouts
from .memory.sides import SIDES
from .marks import CREDENTIAL_HEADERS, LazySealer, client_binding
from .metrics import Metrics
from .outbound import Route, Server
from .record import handled
from .serverstart import ServerStart, Told, shape_of
from .startasks import FlowAsks, known_pairs
from .settings import OPTIONS, Option, SettingError, Settings, env_default
from .stream import StreamDriver
from .wayback import WayBack
from .surfaces import Surface, ollama

log = logging.getLogger(__name__)


def _guarded[A](hook: Callable[[ThinkWire, A], object]) -> Callable[[ThinkWire, A], Awaitable[None] | None]:
    """A hook that never raises into mitmproxy: on a bug the flow goes on as it is, logged once.
    A hook may return an awaitable (mitmproxy awaits it): that is guarded the same way."""
    @functools.wraps(hook)
    def run(self: ThinkWire, flow: A) -> Awaitable[None] | None:
        try:
            got = hook(self, flow)
        except Exception as e:
            _hook_failed(hook.__name__, e)
            return None
        return _guarded_await(hook.__name__, got) if inspect.isawaitable(got) else None
    return run


async def _guarded_await(name: str, awaitable: Awaitable[object]) -> None:
    try:
        await awaitable
    except Exception as e:
        _hook_failed(name, e)


def _hook_failed(name: str, e: Exception) -> None:
    log.warning("thinkwire: %s hook failed (%s); the flow goes on unchanged", name,
                type(e).__name__, exc_info=log.isEnabledFor(logging.DEBUG))


class ThinkWire:
    def __init__(self) -> None:
        self.settings: Settings | None = None
        self._streams: dict[str, tuple[str, FlowContext, StreamDriver]] = {}
        # flow id -> what the response side reads of its request (request.Facts), until the response
        self._requests: dict[str, Facts | None] = {}
        self.sealer: LazySealer | None = None  # the proxy's keys: loaded at start when configured, else on first use
        self._keyring: keys.Keyring | None = None   # the keys, once loaded and announced
        self.capabilities = Capabilities()     # Ollama models' /api/show answers, kept a while
        # What servers say of where their output starts (their templates), kept a while; the
        # asks share the capabilities' bounds (one Asker).
        self.server_start = ServerStart(self.capabilities.asker, lambda: known_pairs(
            self.settings.tagsets if self.settings else None), ollama_show=self.capabilities.show)
        self._asks = FlowAsks()   # each flow's ask about its start, until its response
        self._option_errors: list[str] = []    # bad option values, refused by the first configure
        self._running = False                  # start-up over: a bad value is refused, the proxy runs on
        self.verbosity = userlog.Verbosity()   # how much mitmproxy itself says (think_log)
        self.reachability = errors.Reachability()   # reverse-mode upstreams seen reachable
        self.learner = Learner()               # models learned to start inside, per client (think_learn)
        self.written = written.Memory()        # the markup models wrote around reasoning, for the way back
        self._salt = os.urandom(16)            # for client_key: a client's hash means nothing outside this process
        self.metrics = Metrics(engine.SURFACES, lambda: [name for name, _, _ in self._streams.values()])
        self.memory = Memory(self.metrics)     # reasoning clients dropped, put back (think_memory)
        self.way_back = WayBack(self.written, self.memory, self.metrics)   # the request hook's restore
        self._writing: dict[str, asyncio.Task[None]] = {}   # flow id -> a body's layouts being written, until its hook ends

    # -- options ----------------------------------------------------------------------------
    def load(self, loader: addonmanager.Loader) -> None:
        self._option_errors = []   # load cannot stop mitmdump: the first configure refuses them
        options = getattr(getattr(loader, "master", None), "options", None)
        for o in OPTIONS:
            help = f"{o.help}. Env: {o.env}."
            if o.kind == "bool":
                self._read_set_value(options, o)
                loader.add_option(o.name, bool, self._bool_default(o), help)
            else:
                loader.add_option(o.name, str, env_default(o), help, choices=list(o.choices) or None)
        contentview.register()  # [inspect] the "thinkwire" and "thinkwire upstream" views
        if not gateway.install():   # an upstream's failure answered in the API's shape
            log.info("thinkwire: this mitmproxy's HTTP layer is not the one expected: an upstream that "
                     "fails gets mitmproxy's own 502 page")

    def _bool_default(self, o: Option) -> bool:
        """The switch's default: its environment variable, else the declared default."""
        try:
            return bool(o.parse(env_default(o)))
        except SettingError as e:
            self._option_errors.append(str(e))
            return bool(o.parse(o.default))

    def _read_set_value(self, options: Any, o: Option) -> None:
        """A `--set` given before this script loaded waits in mitmproxy as text, parsed for a bool
        option as true/false only; a value it cannot parse leaves the script unloaded without a
        word. So read it the way thinkwire reads switches (on/off, 1/0, yes/no ...) first, and
        keep a value that means nothing for configure to refuse with a message."""
        waiting = getattr(options, "deferred", {}).get(o.name)
        val = getattr(waiting, "val", None)
        if not (isinstance(val, list) and len(val) == 1 and isinstance(val[0], str)):
            return   # `--set name` alone (true), or not a --set: mitmproxy reads it as it is
        try:
            val[0] = "true" if o.parse(val[0]) else "false"
        except SettingError as e:
            self._option_errors.append(str(e))
            del options.deferred[o.name]

    def running(self) -> None:
        # Everything mitmproxy built at start-up lives as long as the process: move it out of
        # the cyclic collector's view, so the full collections that streaming traffic triggers
        # scan only what traffic made. (Measured: full-collection pauses of ~30 ms were the
        # proxy's worst per-event delays.)
        self._running = True
        gc.freeze()
        userlog.skip_legacy_log_event()
        for line in userlog.startup_lines(getattr(ctx.options, "mode", None)):
            log.info("%s", line)
        try:
            self._keys()   # this instance's own key, when none is configured: made now, and said
        except keys.KeySetupError as e:
            log.warning("thinkwire: %s", e)

    def configure(self, updated: set[str]) -> None:
        try:
            self._configure(updated)
        except exceptions.OptionsError as e:
            if not self._running and _a_mitmproxy_tool(ctx.master):
                _refuse_to_start(str(e))
            raise

    def _configure(self, updated: set[str]) -> None:
        if self._option_errors:
            refused, self._option_errors = self._option_errors, []
            raise exceptions.OptionsError(f"thinkwire: {refused[0]}")
        if self.sealer is None or "confdir" in updated or updated.intersection(keys.OPTIONS):
            self._load_keys()
        if self.settings is not None and not any(n.startswith("think_") for n in updated):
            return
        values = {o.name: getattr(ctx.options, o.name) for o in OPTIONS}
        try:
            self.settings = Settings.from_values(values)
        except SettingError as e:
            raise exceptions.OptionsError(f"thinkwire: {e}") from None
        self.capabilities.asker.deadline = self.settings.ask_timeout
        try:
            self.memory.configure(self.settings)
        except SettingError as e:
            raise exceptions.OptionsError(f"thinkwire: {e}") from None
        self.written.shared = self.memory.layouts   # layouts beside the memory's file or Redis
        self.verbosity.apply(ctx.options, self.settings.log)
        errors.lazy_in_reverse_mode(ctx.options)

    def done(self) -> None:
        self.verbosity.done()

    def _load_keys(self) -> None:
        """A fleet's keys (anything configured) are read and checked now: a replica that would
        seal marks the others cannot open refuses to start. With nothing configured, this
        instance's own key is made or read when first needed (at the latest, once running)."""
        try:
            cfg = keys.KeyConfig.from_values({name: getattr(ctx.options, name) for name in keys.OPTIONS})
            sealer = LazySealer(ctx.options.confdir, cfg)
            if cfg.given:
                sealer.keyring   # noqa: B018 - read and checked now: KeySetupError stops the start
        except (SettingError, keys.KeySetupError) as e:
            raise exceptions.OptionsError(f"thinkwire: {e}") from None
        self.sealer, self._keyring = sealer, None
        if cfg.given:
            self._keys()

    def _keys(self) -> keys.Keyring | None:
        """The keys (loaded now if they were not), said once in the log and in the metrics."""
        if self.sealer is None:
            return None
        if self._keyring is None:
            self._keyring = self.sealer.keyring
            log.info("thinkwire: %s", keys.describe(self._keyring))
            self.metrics.keys(self._keyring)
        return self._keyring

    def _health(self) -> dict[str, Any]:
        try:
            ring = self._keys()
        except keys.KeySetupError as e:   # the proxy runs; marks cannot be made or opened
            return {"status": "ok", "version": __version__, "key_error": str(e)}
        return {"status": "ok", "version": __version__, "key_id": ring.key_id if ring else None}

    # -- flows ------------------------------------------------------------------------------
    def _surface(self, flow: http.HTTPFlow) -> Surface | None:
        if self.settings is None or flow.response is None:
            return None
        if not 200 <= flow.response.status_code < 300:
            return None
        return engine.surface_for_path(flow.request.path, self.settings)

    def _context(self, flow: http.HTTPFlow, surface: Surface, settings: Settings) -> FlowContext:
        # What the `request` hook kept of the request (parsed once per flow: bodies of long agent
        # sessions are large); parsed here for flows that did not pass it (replays, GET).
        if flow.id in self._requests:
            kept = self._requests[flow.id]
        else:
            kept = engine.request_facts(engine.parse_request(read_request(flow.request)[0]), surface.NAME, settings)
        r = flow.request
        fctx = engine.new_context(settings, kept, self.sealer, surface=surface.NAME,
                                  learner=self.learner if settings.learn else None,
                                  upstream=f"{r.scheme}://{r.host}:{r.port}", client=self.client_key(flow),
                                  binding=client_binding(r.headers), written=self.written)
        told = self._asks.told(flow.id)
        fctx.told = told if isinstance(told, Told) else None   # (the ask's result: a Told, or None)
        return fctx

    # -- requests the proxy cannot forward (thinkwire.errors) -------------------------------------
    @_guarded
    def requestheaders(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        """A request to the forward proxy addressed to the proxy itself, or for a reverse-mode
        upstream that cannot be reached, is answered here in thinkwire's words."""
        if flow.request.path.startswith(endpoints.PREFIX):   # the proxy's own: answered in `request`
            return None
        message = errors.misaddressed(flow)
        if message is not None:
            self._refuse(flow, errors.MISADDRESSED, message)
            return None
        if self.settings is not None and (isinstance(flow.client_conn.proxy_mode, mode_specs.ReverseMode)
                                          or engine.surface_for_path(flow.request.path, self.settings)):
            flow.metadata[errors.SHAPED] = True   # an upstream's failure answered in the API's shape (gateway)
        return self._check_upstream(flow)   # mitmproxy awaits it

    async def _check_upstream(self, flow: http.HTTPFlow) -> None:
        message = await self.reachability.check(flow)
        if message is not None:
            self._refuse(flow, errors.UNREACHABLE, message)

    def _refuse(self, flow: http.HTTPFlow, status: int, message: str) -> None:
        flow.response = errors.response(flow, status, message)
        flow.metadata[errors.ANSWERED] = status
        log.warning("%s %s: answered %d: %s", flow.request.method, flow.request.path.split("?", 1)[0],
                    status, message.removeprefix("thinkwire: "))

    @_guarded
    def server_connected(self, data: ServerConnectionHookData) -> None:
        self.reachability.connected(data.client, data.server)

    @_guarded
    def server_connect_error(self, data: ServerConnectionHookData) -> None:
        """Said here (the quiet log hides mitmproxy's line), once per failed connect; the client
        gets thinkwire's 502 (thinkwire.gateway), and the next request to this upstream a probe."""
        self.reachability.failed(data.server)
        log.warning("%s", errors.connect_failed(data.client, data.server))

    @_guarded
    def request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        """The way back: reasoning this proxy made, sent back by the client, is restored. (And
        the proxy's own endpoints are answered here, never forwarded.)"""
        if errors.ANSWERED in flow.metadata or endpoints.answer(
                flow, self._health, self.metrics.exposition, self.settings.metrics_port if self.settings else None):
            return None
        if self.settings is None or flow.request.method != "POST":
            return None
        surface = engine.surface_for_path(flow.request.path, self.settings)
        if surface is None:
            return None
        body, unread = read_request(flow.request)
        if unread is not None:
            log.warning("thinkwire %s: request left unchanged (%s)", surface.NAME, unread)
        parsed = engine.parse_request(body)
        self._requests[flow.id] = kept = engine.request_facts(parsed, surface.NAME, self.settings)
        if parsed is None or body is None:   # (no body: nothing parsed)
            return None
        self._ask_start(flow, surface.NAME, parsed, kept)
        r = flow.request
        binding = client_binding(r.headers)
        fctx = engine.new_context(self.settings, parsed, self.sealer, binding=binding,
                                  upstream=f"{r.scheme}://{r.host}:{r.port}", client=self.client_key(flow),
                                  written=self.written)
        # The reasoning memory fills in what the client dropped, in its own format, before the
        # way back runs (thinkwire.memory).
        recall = self.memory.start(flow.id, surface.NAME, parsed, binding, r.host)
        ask = surface is ollama and fctx.model and ollama.wants_capabilities(parsed)
        if recall is not None or ask:
            return self._prepare_then_restore(flow, surface, body, fctx, recall, bool(ask))   # mitmproxy awaits it
        return self.way_back.restore(flow, surface, body, fctx)   # a coroutine when layouts are asked for: awaited

    def _ask_start(self, flow: http.HTTPFlow, surface: str, parsed: dict[str, Any], kept: Facts | None) -> None:
        """Ask the server what its template renders for this request (thinkwire.serverstart,
        startasks). Not where nothing it says would count: a prefill, structured output, off."""
        settings = self.settings
        if settings is None or not settings.ask_template or kept is None or kept.prefill is not None or \
                kept.structured:
            return
        model = parsed.get("model")
        shape = shape_of(parsed, surface)
        if shape is not None:
            self._asks.begin(flow.id, self.server_start.told(
                _server(flow), flow.request.path, surface, model if isinstance(model, str) and model else None,
                self.client_key(flow), shape, _credentials(flow), _route(flow)))

    def _waiting(self, flow: http.HTTPFlow) -> float | None:
        return self._asks.left(flow.id, self.settings.start_wait) if self.settings else None

    async def _after_ask(self, flow: http.HTTPFlow, left: float,
                         then: Callable[[http.HTTPFlow], Awaitable[None] | None]) -> None:
        await self._asks.wait(flow.id, left)   # past it the profile decides
        got = then(flow)
        if got is not None:   # (a body's: the memory remembering its turns)
            await got

    async def _prepare_then_restore(self, flow: http.HTTPFlow, surface: Surface, body: bytes, fctx: FlowContext,
                                    recall: Coroutine[Any, Any, int] | None, ask: bool) -> None:
        """The memory's look-up, and Ollama's capabilities (they decide its way back:
        thinkwire.capabilities), then the way back."""
        filled = await recall if recall is not None else 0
        if ask and fctx.model is not None:   # (asked for a model only)
            r = flow.request
            fctx.native_thinking = await self.capabilities.native_thinking(
                _server(flow), r.path, fctx.model, self.client_key(flow), _credentials(flow), _route(flow))
        again = self.way_back.restore(flow, surface, body, fctx, filled)
        if again is not None:
            await again

    @_guarded
    def responseheaders(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        if _recorded(flow):  # [inspect]
            return None
        surface = self._surface(flow)
        if surface is None or flow.response is None or \
                not engine.is_stream(flow.response.headers.get("content-type"), surface):
            return None
        left = self._waiting(flow)
        if left is not None:
            return self._after_ask(flow, left, self._stream)   # mitmproxy awaits it
        self._stream(flow)
        return None

    def _stream(self, flow: http.HTTPFlow) -> None:
        surface, response, settings = self._surface(flow), flow.response, self.settings
        if surface is None or response is None or settings is None:
            return
        encoding = response.headers.get("content-encoding")
        fctx = self._context(flow, surface, settings)
        try:
            decoder = decoder_for(encoding)
        except Exception:  # an encoding we cannot decode: stream it on as it comes
            response.stream = True
            self._finish(flow, surface.NAME, fctx, f"content-encoding {encoding!r} is not supported",
                         reason="unsupported_encoding")
            return
        driver = engine.stream_driver(surface, fctx, decoder)
        stream: Callable[[bytes], Any] = driver.callable()
        if bodies.wanted(ctx.options):  # [inspect] keep both bodies for mitmweb / saved flows
            stream = bodies.Recorder(stream, encoding)
        stream = self.memory.tap(flow, stream, encoding)
        shared = self.written.shared
        if shared is not None:   # layouts written as the last event goes out (thinkwire.memory.layouts)
            stream = layouts.tap(stream, lambda: shared.put_soon(fctx.record_written()), SIDES[surface.NAME].ended)
        response.stream = stream
        headers = response.headers
        headers.pop("content-length", None)
        if decoder is not None:
            headers.pop("content-encoding", None)
        if flow.request.http_version.startswith("HTTP/1"):
            headers["transfer-encoding"] = "chunked"
        self._streams[flow.id] = (surface.NAME, fctx, driver)

    @_guarded
    def response(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        left = None if flow.id in self._streams else self._waiting(flow)
        if left is not None and self._surface(flow) is not None:
            return self._after_ask(flow, left, self._respond)   # a body: mitmproxy awaits it
        return self._respond(flow)

    def _respond(self, flow: http.HTTPFlow) -> Coroutine[Any, Any, None] | None:
        try:
            self._forget_on_refusal(flow)
            self._response(flow)
        finally:
            self._requests.pop(flow.id, None)
            self._asks.forget(flow.id)
        # The turn is remembered before the hook ends (mitmproxy awaits it), so the loop's next
        # request finds it; the store's timeout bounds the wait. So are a body's layouts.
        settle = self.memory.settle(flow)
        writing = self._writing.pop(flow.id, None)
        return settle if writing is None else _both(settle, writing)

    def _forget_on_refusal(self, flow: http.HTTPFlow) -> None:
        """Ollama refused `think` for a model it was said to think for (re-created since): the
        kept answer goes, and the next request asks again."""
        r = flow.response
        if r is None or r.status_code != 400 or self.settings is None or \
                engine.surface_for_path(flow.request.path, self.settings) is not ollama:
            return
        kept = self._requests.get(flow.id)
        model = kept.model if kept is not None else None
        if model is not None and refuses_thinking(r):
            self.capabilities.forget(_server(flow), flow.request.path, model, self.client_key(flow))

    def _response(self, flow: http.HTTPFlow) -> None:
        if _recorded(flow):  # [inspect]
            return
        streamed = self._streams.pop(flow.id, None)
        if streamed is not None:
            name, fctx, driver = streamed
            driver.settle()
            fctx.tally()
            self._write_layouts(fctx)   # (a stream's went as it ended: what is left, if any)
            self._finish(flow, name, fctx, fctx.stats.fell_back)
            bodies.settle(flow, flow.response.stream if flow.response else None)  # [inspect] no-op unless a Recorder kept bodies
            return
        surface, response, settings = self._surface(flow), flow.response, self.settings
        if surface is None or response is None or settings is None or \
                engine.is_stream(response.headers.get("content-type"), surface):
            return
        fctx = self._context(flow, surface, settings)
        try:
            # Decoded here with a cap (mitmproxy's get_content decodes any size): a larger body
            # passes as the upstream sent it.
            body = decode_body(response.raw_content or b"", response.headers.get("content-encoding"))
            if body is None:
                self._finish(flow, surface.NAME, fctx, f"body left unchanged: larger than {BODY_MAX >> 20} MiB "
                             "decoded", reason="invalid_body")
                return
            new = surface.rewrite_body(body, fctx) if body else None
            self.memory.saw_body(flow.id, body, new)
        except (ValueError, RecursionError) as e:  # not JSON (or nested past the stack), or not decodable
            self._finish(flow, surface.NAME, fctx, f"body left unchanged: {_not_json(e)}", reason="invalid_body")
            return
        except Exception as e:  # a bug must not break the client: pass through, say so
            log.debug("thinkwire: body rewrite failed", exc_info=True)
            self._finish(flow, surface.NAME, fctx, f"the rewrite raised {type(e).__name__}")
            return
        if bodies.wanted(ctx.options):  # [inspect] the upstream's body, to compare
            bodies.keep_upstream(flow, body, new)
        if new is not None:
            response.content = new  # re-encodes to the response's Content-Encoding
        fctx.tally()
        writing = self._write_layouts(fctx)
        if writing is not None:
            self._writing[flow.id] = writing   # awaited in the hook: before the client has the body
        self._finish(flow, surface.NAME, fctx, None)

    def _write_layouts(self, fctx: FlowContext) -> asyncio.Task[None] | None:
        shared, puts = self.written.shared, fctx.written_puts
        fctx.written_puts = []
        return shared.put_soon(puts) if shared is not None and puts else None

    @_guarded
    def error(self, flow: http.HTTPFlow) -> None:
        self._requests.pop(flow.id, None)
        self._asks.forget(flow.id)
        self.memory.drop(flow.id)
        # A client that stops reading once it has what it needs (Codex closes right after
        # `response.completed`) ends the flow here, not in `response`: report it all the same.
        streamed = self._streams.pop(flow.id, None)
        if streamed is not None:
            name, fctx, driver = streamed
            driver.settle()
            fctx.tally()
            self._write_layouts(fctx)
            self._finish(flow, name, fctx, fctx.stats.fell_back,
                         ended=f"; the stream ended early ({flow.error.msg if flow.error else 'error'})")
            bodies.settle(flow, flow.response.stream if flow.response else None)  # [inspect] what was kept so far

    def _finish(self, flow: http.HTTPFlow, surface: str, fctx: FlowContext, fell_back: str | None,
                ended: str = "", reason: str = "rewrite_error") -> None:
        report.finish(self.metrics, flow, surface, fctx, fell_back, ended, reason)

    def client_key(self, flow: http.HTTPFlow) -> str:
        """Who sent a flow, for what is kept per client (learning, servers' answers): a hash of
        the credential it sends the server, else its address. In reverse mode with mitmproxy's
        upstream_auth the Authorization header is the proxy's own (mitmproxy set it), not the
        client's."""
        creds = _credentials(flow)
        if getattr(ctx.options, "upstream_auth", None) and isinstance(flow.client_conn.proxy_mode,
                                                                      mode_specs.ReverseMode):
            creds.pop("authorization", None)
        if creds:
            text = "\n".join(f"{k}:{v}" for k, v in sorted(creds.items()))
            return "cred:" + hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16,
                                             key=self._salt).hexdigest()
        peer = flow.client_conn.peername
        return f"addr:{peer[0] if peer else ''}"


async def _both(settle: Awaitable[None] | None, writing: asyncio.Task[None]) -> None:
    """The memory's writes (a coroutine, or None), then a body's layouts' (a task already under
    way; each store call has the store's timeout)."""
    if settle is not None:
        await settle
    await writing


def _not_json(e: BaseException) -> str:
    """Why a body was left as it came, in words that quote none of it (a JSONDecodeError's text
    is fixed, with a position; other exceptions' texts may hold body bytes)."""
    if isinstance(e, json.JSONDecodeError):
        return f"not JSON ({e.msg} at char {e.pos})"
    if isinstance(e, RecursionError):
        return "JSON nested deeper than the parser goes"
    if isinstance(e, UnicodeDecodeError):
        return "not UTF-8 text"
    return str(e) if isinstance(e, BodyError) else f"not JSON ({type(e).__name__})"


def _a_mitmproxy_tool(master: object) -> bool:
    """mitmdump, mitmweb or mitmproxy itself (not a test's or an embedding program's master)."""
    return type(master).__module__.startswith("mitmproxy.tools.")


def _refuse_to_start(message: str) -> None:
    """A bad option value at start-up: one line on stderr, and mitmproxy stops before it listens.
    (Raised as OptionsError, mitmproxy would print a traceback, listen, then exit.)"""
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(2)


def _credentials(flow: http.HTTPFlow) -> dict[str, str]:
    """The credentials the client gives the server (for the server's answers about its models,
    and to tell clients apart)."""
    h = flow.request.headers
    return {name: h[name] for name in CREDENTIAL_HEADERS if h.get(name)}


def _server(flow: http.HTTPFlow) -> Server:
    r = flow.request
    return Server(r.scheme, r.host, r.port)


def _route(flow: http.HTTPFlow) -> Route:
    """How mitmproxy reaches the flow's server, for an ask of the same server: through the
    upstream proxy of the mode the flow came in on, with mitmproxy's TLS verification."""
    o, mode = ctx.options, flow.client_conn.proxy_mode
    proxy = auth = None
    if isinstance(mode, mode_specs.UpstreamMode):
        proxy = Server(mode.scheme, *mode.address)
        if getattr(o, "upstream_auth", None):
            auth = parse_upstream_auth(o.upstream_auth)
    return Route(proxy, auth, bool(getattr(o, "ssl_insecure", False)),
                 getattr(o, "ssl_verify_upstream_trusted_ca", None), getattr(o, "ssl_verify_upstream_trusted_confdir", None))


def _recorded(flow: http.HTTPFlow) -> bool:  # [inspect]
    """A saved flow thinkwire already handled, being loaded (`mitmweb -r file`): keep it as it is.

    Loading runs every hook again; rewriting the rewritten body would wipe its tallies and the
    kept upstream body. Live flows, replays included, are always handled.
    """
    return not flow.live and handled(flow)
