"""The API surfaces: one module each (chat, messages, responses), each a `Surface`."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import TYPE_CHECKING, Callable, Protocol, runtime_checkable

from ..sse import dumps

if TYPE_CHECKING:
    from ..context import FlowContext
    from ..stream import EventRewriter


@runtime_checkable
class Surface(Protocol):
    """What a surface module provides; the engine and the views use nothing else."""

    NAME: str      # "chat", "messages", "responses"
    SHAPE: str     # what its responses hold, for messages about input that is not one

    def matches(self, path: str) -> bool:
        """A request path this surface answers (query strings and prefixes allowed)."""

    def looks_like(self, obj: dict) -> bool:
        """A response body or stream event of this surface."""

    def rewrite_body(self, data: bytes, ctx: FlowContext) -> bytes | None:
        """The rewritten response body, or None when nothing changes. ValueError: not JSON."""

    def StreamRewriter(self, ctx: FlowContext) -> EventRewriter:  # noqa: N802 (a class in the module)
        """The rewriter of one stream, event by event."""

    def restore_request(self, data: bytes, ctx: FlowContext) -> bytes | None:
        """The request with the reasoning this proxy made restored, or None when none is."""


def restore(data: bytes, ctx: FlowContext, how: str, key: str,
            fix: Callable[[dict, list, str], int]) -> bytes | None:
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
    return dumps(obj).encode()


def request_list(data: bytes, key: str, parsed: dict | None = None) -> tuple[dict, list] | None:
    """A request body as a dict (`parsed`, when the caller already has it) and its list under
    `key` (`messages`, `input`), or None when it is not JSON of that shape: such a request goes
    upstream as it came."""
    try:
        obj = parsed if parsed is not None else json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    value = obj.get(key) if isinstance(obj, dict) else None
    return (obj, value) if isinstance(value, list) else None


# -- the fast path's shape: the bytes around one text literal ---------------------------------
# Servers send the same bytes around every token delta of a stream but the text. Learned from
# an event parsed in full, the text before and after its text literal lets a later event that
# starts and ends the same way be read by decoding that literal alone, without a JSON parse.
def key_pattern(key: str) -> re.Pattern:
    """`"key": "` (inside a JSON string a quote is escaped, so this finds keys only)."""
    return re.compile(r'"%s"\s*:\s*"' % re.escape(key))


def learn_literal(data: str, key: re.Pattern, value: str, read: Callable[[object], object]) -> tuple[str, str] | None:
    """The data before and after the string literal that the parse read `value` from: the last
    `key` literal equal to `value` that is the one `read(parsed)` takes (a number put in its
    place must come back there; not another key of that name, not an earlier duplicate)."""
    for m in reversed(list(key.finditer(data))):
        found, end = scanstring(data, m.end())  # the data parsed as JSON: a key's value is a string
        if found == value:
            before, after = data[:m.end() - 1], data[end:]
            # Only one string value changed to a number: the structure `read` walks is the same.
            if read(json.loads(before + "0" + after)) == 0:
                return before, after
    return None


def read_literal(data: str, before: str, after: str) -> tuple[str, str] | None:
    """(text, literal) when what stands between `before` and `after` is one JSON string."""
    start, stop = len(before), len(data) - len(after)
    if stop - start < 2 or data[start] != '"':
        return None
    try:
        text, end = scanstring(data, start + 1)
    except ValueError:
        return None
    return (text, data[start:stop]) if end == stop else None
