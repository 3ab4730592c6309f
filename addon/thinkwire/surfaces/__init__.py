"""The API surfaces. Each module has: NAME, SHAPE, matches(path), looks_like(obj),
rewrite_body(data, ctx) -> bytes | None, StreamRewriter(ctx), and restore_request(data, ctx)."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import Callable


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
