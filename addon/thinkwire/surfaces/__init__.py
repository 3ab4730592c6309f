"""The API surfaces. Each module has: NAME, SHAPE, matches(path), looks_like(obj),
rewrite_body(data, ctx) -> bytes | None, StreamRewriter(ctx, fast=True), and
restore_request(data, ctx). A StreamRewriter has on_event, on_chunk (the byte fast path, see
thinkwire.fastpath), finish and abort; fast=False turns both shortcuts off (the tests' reference)."""

from __future__ import annotations

import json


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

