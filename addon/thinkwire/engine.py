"""One rewrite path for the addon and the CLI: pick the surface, rewrite a body or a stream."""

from __future__ import annotations

from typing import Any, Callable

from .jsonnum import loads
from .context import FlowContext
from .decoding import Decoder
from .learning import Learner
from .request import KNOWN_SWITCHES, Facts, facts
from .marks import Bound, LazySealer, Sealer
from .settings import Settings
from .written import Memory
from .ndjson import NDJSONParser
from .sse import EVENT_MAX, SSEParser
from .stream import Parser, StreamDriver
from .surfaces import Surface, chat, messages, ollama, responses

SURFACES: dict[str, Surface] = {"chat": chat, "messages": messages, "responses": responses, "ollama": ollama}
PARSERS: dict[str, Callable[[int], Parser]] = {"text/event-stream": SSEParser, "application/x-ndjson": NDJSONParser}   # stream framings


def enabled(settings: Settings) -> list[Surface]:
    return [m for name, m in SURFACES.items() if getattr(settings, name)]


def surface_for_path(path: str, settings: Settings) -> Surface | None:
    for m in enabled(settings):
        if m.matches(path):
            return m
    return None


def parse_request(body: bytes | None) -> dict[str, Any] | None:
    if not body:
        return None
    try:
        obj = loads(body)   # numbers kept as the client wrote them, should the way back re-serialize it
    except (ValueError, UnicodeDecodeError, RecursionError):  # not JSON, or nested past the stack
        return None
    return obj if isinstance(obj, dict) else None


def request_facts(request: dict[str, Any] | None, surface: str | None, settings: Settings) -> Facts | None:
    """What the response side keeps of a parsed request (thinkwire.request.Facts)."""
    if not isinstance(request, dict):
        return None
    return facts(request, surface, tuple(dict.fromkeys(KNOWN_SWITCHES + settings.tagsets.switch_names)))


def new_context(settings: Settings, request: dict[str, Any] | Facts | None, sealer: Sealer | LazySealer | None = None,
                surface: str | None = None, learner: Learner | None = None,
                upstream: str | None = None, client: str | None = None, binding: bytes = b"",
                written: Memory | None = None) -> FlowContext:
    """A flow's context. `request`: the parsed request (the way back), or only its Facts (a
    response); `surface`: the name of the surface the request came to (a trailing assistant
    message is a prefill on Messages); `learner` and `upstream`: what was learned of models (the
    addon's, else nothing) and where this flow goes; `client`: who sent it (learning is per
    client: addon.client_key); `binding`: what its marks are bound to (marks.client_binding of
    its request); `written`: the memory of what models wrote around their reasoning
    (thinkwire.written.Memory), kept on the response side and read on the way back."""
    kept = request if isinstance(request, Facts) else request_facts(request, surface, settings)
    bound = Bound(sealer, binding, settings.mark_max_age) if sealer is not None else None
    parsed = request if isinstance(request, dict) else None
    # The way back has the whole name (Ollama's /api/show asks for it); a response, the first
    # MODEL_CHARS characters its Facts keep.
    model = parsed.get("model") if parsed is not None else (kept.model if kept else None)
    return FlowContext(settings, model=model if isinstance(model, str) and model else None, request=parsed,
                       facts=kept, sealer=bound, surface=surface, learner=learner, upstream=upstream,
                       client=client, written=written)


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_event_stream(content_type: str | None) -> bool:
    return media_type(content_type) == "text/event-stream"


def is_stream(content_type: str | None, surface: Surface | None = None) -> bool:
    """A streamed response: the stream type of `surface` (SSE, or Ollama's NDJSON), or of any
    surface when none is given."""
    got = media_type(content_type)
    return got == surface.STREAM_TYPE if surface is not None else got in PARSERS


def stream_driver(surface: Surface, ctx: FlowContext, decoder: Decoder | None = None) -> StreamDriver:
    def on_fail(reason: str) -> None:
        ctx.stats.fell_back = reason

    def on_broken(reason: str) -> None:
        ctx.stats.broken = reason
    parser = PARSERS[surface.STREAM_TYPE](EVENT_MAX)
    return StreamDriver(surface.StreamRewriter(ctx), decoder, on_fail, on_broken, parser)


def offline_sealer(confdir: str | None = None) -> LazySealer:
    """The key the proxy uses: THINK_SIGNING_KEY, else the key file in its confdir."""
    return LazySealer(confdir or "~/.mitmproxy")
