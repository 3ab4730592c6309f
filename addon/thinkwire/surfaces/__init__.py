"""The API surfaces: one module each (chat, messages, responses, ollama), each a `Surface`.

A surface's StreamRewriter has on_event, on_chunk (the byte fast path, see thinkwire.fastpath),
finish and abort; `fast=False` turns both shortcuts off (the tests' reference)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from ..jsonio import OUT, dumps
from ..jsonnum import loads
from ..rules import TagPair, Written

if TYPE_CHECKING:
    from ..context import FlowContext
    from ..stream import EventRewriter


@runtime_checkable
class Surface(Protocol):
    """What a surface module provides; the engine and the views use nothing else."""

    NAME: str         # "chat", "messages", "responses", "ollama"
    SHAPE: str        # what its responses hold, for messages about input that is not one
    STREAM_TYPE: str  # the Content-Type of its streams: "text/event-stream", "application/x-ndjson"

    def matches(self, path: str) -> bool:
        """A request path this surface answers (query strings and prefixes allowed)."""

    def looks_like(self, obj: dict[str, Any]) -> bool:
        """A response body or stream event of this surface."""

    def rewrite_body(self, data: bytes, ctx: FlowContext) -> bytes | None:
        """The rewritten response body, or None when nothing changes. ValueError: not JSON."""

    def StreamRewriter(self, ctx: FlowContext, fast: bool = True) -> EventRewriter:  # noqa: N802
        """The rewriter of one stream (a class in the module), fed the events its stream type's
        parser frames (SSE events, NDJSON lines)."""

    def restore_request(self, data: bytes, ctx: FlowContext) -> bytes | None:
        """The request with the reasoning this proxy made restored, or None when none is."""


def restore(data: bytes, ctx: FlowContext, how: str, key: str,
            fix: Callable[[dict[str, Any], list[Any], str], int]) -> bytes | None:
    """What every surface's way back shares: under `keep` the request goes as it came; otherwise
    `fix(request, its list under key, how)` restores it in place and says how many objects were
    this proxy's. A request that holds none is never re-serialized (it goes byte-identical)."""
    if how == "keep":
        return None
    found = request_list(data, key, ctx.request)
    if found is None:
        return None
    obj, items = found
    n = fix(obj, items, how)
    if not n:
        return None
    ctx.stats.restored += n
    return dumps(obj).encode("utf-8", OUT)


def inline(text: str, pair: TagPair) -> str:
    """A block of ours back inline: the markup as the model wrote it around its text (a mark holds
    it; without one, the pair's tags, with none of the whitespace the trim took)."""
    return f"{pair.open}{text}{pair.close}"


def after(pair: TagPair | None, text: str) -> str:
    """The answer text that followed a block of ours, without the line break thinkwire put in
    front of it (a `Written` pair's `added`): as the model wrote it."""
    n = pair.added if isinstance(pair, Written) else 0
    return text[n:] if n and text[:n] == "\n" * n else text


def event_object(data: str, ctx: FlowContext) -> dict[str, Any] | None:
    """A stream event's JSON object, or None when the event passes as it came: not JSON or nested
    past the stack (counted as malformed for the flow's log line), or not an object."""
    try:
        obj = loads(data)
    except (ValueError, RecursionError):   # not JSON, or nested deeper than the stack goes
        ctx.stats.malformed_events += 1
        return None
    return obj if isinstance(obj, dict) else None


def is_done(data: str) -> bool:
    """The `data: [DONE]` sentinel that ends an OpenAI stream."""
    return len(data) < 16 and data.strip() == "[DONE]"


def request_list(data: bytes, key: str, parsed: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[Any]] | None:
    """A request body as a dict (`parsed`, when the caller already has it) and its list under
    `key` (`messages`, `input`), or None when it is not JSON of that shape: such a request goes
    upstream as it came."""
    try:
        obj = parsed if parsed is not None else loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    return (obj, value) if isinstance(value, list) else None

