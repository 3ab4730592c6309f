"""JSON text in and out of the proxy: the encoder every rewrite writes with (`dumps`, and
`sharing_dumps` for a stream that writes the same long text several times), `loads_known`
(a parse that skips a literal the caller already has), and `OUT`, the error handler for
writing JSON text out as bytes.

Numbers are kept as the upstream wrote them (thinkwire.jsonnum); strings are written as
json.dumps writes them, non-ASCII kept as is (what model servers send).
"""

from __future__ import annotations

import codecs
import json
from json.encoder import encode_basestring
from typing import Callable, Protocol, cast

from .jsonnum import loads as loads_kept, written


def _make_dumps(literal: Callable[[str], str] = encode_basestring, probe: bool = True) -> Callable[[object], str]:
    """Compact JSON, non-ASCII kept as is (what model servers send), with its encoder made once:
    json.dumps builds a JSONEncoder per call, and JSONEncoder.encode a C encoder per call.
    `literal` writes each string (encode_basestring, or what does the same). `probe`: check
    that this Python's C encoder reads its arguments as we pass them (once per process is
    enough: see sharing_dumps)."""
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        if make is None:
            raise ValueError
        c = make(None, enc.default, literal, None, ":", ",", False, False, True)
        sample = {"a": [1, 2.5, None, True, "\u00e9\n"], "b": {}}
        if probe and "".join(c(sample, 0)) != enc.encode(sample):
            raise ValueError
    except Exception:  # a Python without the C encoder, or with another one
        def fallback(obj: object) -> str:
            return written(enc.encode(obj))
        fallback.fallback = True   # type: ignore[attr-defined]   # (read by _C_ENCODER)
        return fallback
    return lambda obj: written("".join(c(obj, 0)))


dumps = _make_dumps()
_C_ENCODER = not getattr(dumps, "fallback", False)   # it passed the probe

LONG = 1024   # characters: a string this long is written once per `sharing_dumps`


class SharingDumps(Protocol):
    """What `sharing_dumps` makes: `dumps`, with `known(s, lit)`."""

    known: Callable[[str, str], None]

    def __call__(self, obj: object, /) -> str: ...


def sharing_dumps(keep: int = 8) -> SharingDumps:
    """`dumps` that writes each long string once and reuses its literal, for the last `keep`
    of them: a Responses stream sends the whole text of an item in several events at its end
    (text done, part done, item done, response completed), and writing 24 KB of text costs
    ~60 us each time. One per stream: what it keeps goes with the stream. Its `known(s, lit)`
    gives it a literal the caller already has."""
    memo: dict[str, str] = {}

    def known(s: str, lit: str) -> None:
        """`lit` is s's literal (the caller had it): it is not written again."""
        if len(s) >= LONG and s not in memo:
            if len(memo) >= keep:
                del memo[next(iter(memo))]
            memo[s] = lit

    def literal(s: str) -> str:
        if len(s) < LONG:
            return encode_basestring(s)
        lit = memo.get(s)   # (the same str object, mostly: its hash is computed once)
        if lit is None:
            lit = encode_basestring(s)
            known(s, lit)
        return lit
    # (The probe costs ~8 us, and this runs per stream: the C encoder passed it at import.)
    write = _make_dumps(literal, probe=not _C_ENCODER)

    def shared(obj: object) -> str:
        return write(obj)
    out = cast(SharingDumps, shared)   # (a function: calling it costs less than a method)
    out.known = known
    return out


# A string literal put in the place of a known one: its escapes make it one no text holds as is.
_MARK = "\x00thinkwire-known\x00"
_MARK_LITERAL = dumps(_MARK)


def loads_known(data: str, literal: str, value: str) -> object | None:
    """json.loads(data) for JSON that holds the string literal `literal` (quotes included; of
    `value`) as a value, without reading that literal: a Responses stream's done events carry an
    item's whole upstream text, which the deltas already brought (json.loads reads ~10
    instructions per character). Each occurrence is swapped for a short mark before parsing, and
    `value` put back where the mark stands as a whole string value; None (the caller parses in
    full) where the literal is not there, or an occurrence was not a whole value (inside another
    string, or a key)."""
    head = literal[:64]
    i = data.find(head)
    if i < 0:
        return None
    parts: list[str] = []
    pos = n = 0
    while i >= 0:
        if data.startswith(literal, i):
            parts += (data[pos:i], _MARK_LITERAL)
            pos = i + len(literal)
            n += 1
            i = data.find(head, pos)
        else:
            i = data.find(head, i + 1)
    parts.append(data[pos:])
    small = "".join(parts)
    # No mark was there before (a NUL is written \\u0000 only; counted in what is left, it is short).
    if not n or small.count("\\u") != 2 * n:
        return None
    try:
        obj = loads_kept(small)
    except (ValueError, RecursionError):
        return None
    return obj if _put_back(obj, value) == n else None


def _put_back(obj: object, value: str) -> int:
    """Put `value` where a string value is the mark; how many it put (a mark that ended up a key,
    or inside another string, is not counted)."""
    if type(obj) is not dict and type(obj) is not list:
        return 0
    n = 0
    stack = [obj]
    while stack:
        o = stack.pop()
        for k, v in (o.items() if type(o) is dict else enumerate(o)):
            t = type(v)
            if t is str:
                if v == _MARK:
                    o[k] = value
                    n += 1
            elif t is dict or t is list:
                stack.append(v)
    return n


def _out_errors(e: UnicodeError) -> tuple[bytes, int]:
    """The error handler for JSON text going out (`OUT`): a character from bytes that were not
    UTF-8 (decoded with surrogateescape) becomes its byte again, as it came; any other lone
    surrogate (an upstream's `\\ud800` escape) is written as that escape. Surrogates occur only
    inside string literals, so the escape is valid JSON. It runs only when one occurs."""
    if not isinstance(e, UnicodeEncodeError):
        raise e
    out = b""
    for ch in e.object[e.start:e.end]:
        c = ord(ch)
        out += bytes([c - 0xDC00]) if 0xDC80 <= c <= 0xDCFF else b"\\u%04x" % c
    return out, e.end


OUT = "thinkwire-json"   # str.encode("utf-8", OUT) for JSON text and the events that carry it
codecs.register_error(OUT, _out_errors)
