"""The fast path: token deltas handled without a JSON parse, and most of them before any SSE framing.

Servers send the same bytes around every token delta of a stream but the text. Learned from an
event parsed in full, the text before and after its text literal (a *shape*) lets a later event
that starts and ends the same way be read by decoding that literal alone (`read_literal`).

One step earlier, on the chunk's bytes (`ByteShape`): model servers flush one event per HTTP
chunk, and mitmproxy calls the stream callable once per chunk. When the chunk is exactly the
learned event with another text literal, and that text holds no first character of any tag or
marker, the splitter's plain step (`Splitter.plain`) decides it, and the surface sends the
original bytes (answer text) or one concatenation (reasoning). A plain literal (no quote,
backslash, control or non-ASCII byte, backtick) is its own text; any other is decoded alone
(`slot_text`). Anything else takes the surface's `on_event`, which gives the same bytes
(tests/test_fastpath.py).

A rewriter built with `fast=False` takes neither shortcut: the tests' reference.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
from json.decoder import scanstring
from json.encoder import encode_basestring
from typing import Callable

from .jsonnum import loads as loads_kept, written
from .rules import Rules


def _make_dumps(literal: Callable[[str], str] = encode_basestring, probe: bool = True):
    """Compact JSON, non-ASCII kept as is (what model servers send), with its encoder made once:
    json.dumps builds a JSONEncoder per call, and JSONEncoder.encode a C encoder per call.
    `literal` writes each string (encode_basestring, or what does the same). `probe`: check
    that this Python's C encoder reads its arguments as we pass them (once per process is
    enough: see sharing_dumps)."""
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        c = make(None, enc.default, literal, None, ":", ",", False, False, True)  # type: ignore[misc]
        sample = {"a": [1, 2.5, None, True, "\u00e9\n"], "b": {}}
        if probe and "".join(c(sample, 0)) != enc.encode(sample):
            raise ValueError
    except Exception:  # a Python without the C encoder, or with another one
        def fallback(obj: object) -> str:
            return written(enc.encode(obj))
        fallback.fallback = True   # type: ignore[attr-defined]
        return fallback
    return lambda obj: written("".join(c(obj, 0)))


dumps = _make_dumps()
_C_ENCODER = not getattr(dumps, "fallback", False)   # it passed the probe

LONG = 1024   # characters: a string this long is written once per `sharing_dumps`


def sharing_dumps(keep: int = 8) -> Callable[[object], str]:
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
    shared.known = known   # type: ignore[attr-defined]
    return shared


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
        for k, v in (o.items() if type(o) is dict else enumerate(o)):   # type: ignore[union-attr]
            t = type(v)
            if t is str:
                if v == _MARK:
                    o[k] = value   # type: ignore[index]
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


# -- shapes in text ----------------------------------------------------------------------------
def key_pattern(key: str) -> re.Pattern:
    """`"key": "` (inside a JSON string a quote is escaped, so this finds keys only)."""
    return re.compile(r'"%s"\s*:\s*"' % re.escape(key))


# Characters: the most a learned shape holds around its slots. Shapes are the upstream's bytes,
# and their patterns are compiled and kept for the process (a few caches of 64 entries each):
# token events are a few hundred bytes around their text, and a longer one is not learned.
SHAPE_MAX = 2048


def learn_literal(data: str, key: re.Pattern, value: str, read: Callable[[object], object]) -> tuple[str, str] | None:
    """The data before and after the string literal that the parse read `value` from: the last
    `key` literal equal to `value` that is the one `read(parsed)` takes (a number put in its
    place must come back there; not another key of that name, not an earlier duplicate). None
    as well when they are longer than SHAPE_MAX together."""
    if len(data) - len(value) > SHAPE_MAX:   # (a literal is at least as long as its text)
        return None
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


# -- shapes in bytes ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def plain_bytes(rules: Rules) -> bytes:
    """A regex class of the bytes a plain text literal may hold: printable ASCII but the quote,
    the backslash, the backtick and the first character of every tag and marker (non-ASCII
    first characters are out with every non-ASCII byte)."""
    firsts = {c for c in rules.tag_starts if c < "\x7f"}
    out = "".join(re.escape(c) for c in sorted(firsts | {'"', "\\", "`"}))
    return b"[^\\x00-\\x1f\\x7f-\\xff" + out.encode() + b"]"


def canonical_head(raw: bytes, data: str, event: str | None, eol: bytes) -> bytes | None:
    """The bytes before the data of an event that `sse.encode` would frame as it came (an
    optional `event:` line, one `data:` line, LF line ends), else None: only such events are
    matched byte for byte, so what a shortcut sends is what the full path would."""
    if eol != b"\n" or "\n" in data or "\r" in data:
        return None
    head = (b"event: " + event.encode("utf-8", OUT) + b"\n" if event is not None else b"") + b"data: "
    if raw != head + data.encode("utf-8", OUT) + b"\n\n":
        return None
    return head


class ByteShape:
    """A learned event as bytes: `match(chunk)` is a match when the chunk is that event with
    other values in its slots; `groups[k]` is the first group of slot k (a text slot has two:
    `text_slot`). `head` is what `canonical_head` gave, `name` its event name; `consts` the
    bytes of the data around the slots.

    The bytes before the first slot and after the last are compared, not matched. String values
    between slots (ids) are matched as any string and compared after: so the pattern is the
    same for every stream of a server and compiled once per process, not per flow (~0.4 ms)."""

    __slots__ = ("match", "name", "head_len", "groups", "prefix", "suffix")

    def __init__(self, head: bytes, name: str | None, consts: list[bytes], slots: list[bytes]) -> None:
        self.name, self.head_len = name, len(head)
        prefix, suffix = head + consts[0], consts[-1] + b"\n\n"
        self.prefix, self.suffix = prefix, suffix   # (what thinkwire.hot compares)
        rx, groups, checks, g = b"", [], [], 1
        for slot, const in zip(slots, consts[1:-1] + [b""]):
            groups.append(g)
            g += _compiled(slot).groups
            rx += slot
            for t in _TOKEN.finditer(const):   # (a const is JSON text between two values)
                tok = t.group()
                if len(tok) > 1 and tok[0] == 34 and const[t.end():].lstrip()[:1] != b":":   # a value
                    rx += rb'("[^"\\]*")'   # (one with escapes never matches: the full path reads it)
                    checks.append((g, tok))
                    g += 1
                else:
                    rx += _escaped(tok)
        self.groups = groups
        whole = _compiled(rx).fullmatch
        start, tail = len(prefix), len(suffix)
        keys = tuple(k for k, _ in checks)
        want = tuple(v for _, v in checks) if len(checks) != 1 else checks[0][1]   # m.group(*keys)

        def match(chunk: bytes) -> re.Match | None:
            if chunk.startswith(prefix) and chunk.endswith(suffix):
                m = whole(chunk, start, len(chunk) - tail)
                if m is not None and (not keys or m.group(*keys) == want):
                    return m
            return None
        self.match = match

    def event(self, chunk: bytes):
        """A chunk `match` took, as the SSE parser frames it: the chunk is one whole event, framed
        as canonical_head requires. The surface's on_event takes it without the driver's framing."""
        from .sse import Event   # (sse imports this module for dumps)
        return Event(chunk, self.name, chunk[self.head_len:-2].decode("utf-8", "surrogateescape"))


_TOKEN = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[^"]+|"')   # a string literal, or other JSON text


@functools.lru_cache(maxsize=256)
def _escaped(tok: bytes) -> bytes:
    return re.escape(tok)   # (keys and punctuation: the same few for every stream)


@functools.lru_cache(maxsize=64)
def _compiled(slot: bytes) -> re.Pattern:
    return re.compile(slot, re.S)


# The body of any JSON string literal (valid escapes; non-ASCII bytes are checked by decoding).
_ANY_BODY = rb'[^"\\\x00-\x1f]*+(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*+)*+'


def text_slot(rules: Rules) -> bytes:
    """A string literal in two groups: its body when plain (the common case, its own text), else
    its body whatever it holds (read by `slot_text`)."""
    return b'"(?:(' + plain_bytes(rules) + b'++)|(' + _ANY_BODY + b'))"'


def slot_text(m: re.Match, group: int, rules: Rules, tags: bool = False) -> tuple[str, bool | None] | None:
    """The text of a `text_slot` whose first group is `group`, and whether its literal was plain
    (then the literal is the text). None where the full path must decide: an empty text, one
    that holds the first character of a tag or marker (with `tags`: (text, None), for a caller
    that feeds the splitter itself), or bytes that do not decode (the full path keeps them as
    they came). Only a text whose second value is not None may go to `Splitter.plain`."""
    lit = m[group]
    if lit is not None:
        return lit.decode("ascii"), True
    lit = m[group + 1]
    try:
        text = lit.decode("utf-8")
        if b"\\" in lit:
            text = scanstring(text + '"', 0)[0]
    except ValueError:
        return None
    if not text:
        return None
    if rules.may_hold_tag(text):
        return (text, None) if tags else None
    return text, False


def literal_body(text: str, got: tuple[str, bool]) -> bytes:
    """The bytes of text's JSON literal without its quotes, text being what the splitter made of
    the slot text `got` (slot_text): a plain literal is its own text, and so is any start of
    it; other text (escapes, held whitespace or a separator in front) is encoded."""
    if got[1] and got[0].startswith(text):
        return text.encode()
    return dumps(text)[1:-1].encode("utf-8", OUT)


NUMBER_SLOT = b"(0|[1-9][0-9]*)"
ASCII_SLOT = b'("[^"\\\\\\x00-\\x1f\\x7f-\\xff]*")'   # a string literal without escapes, quotes kept


def literal_shape(head: bytes, name: str | None, before: str, after: str, rules: Rules) -> ByteShape:
    """The shape of an event whose one slot is a text literal between `before` and `after`."""
    return ByteShape(head, name, [before.encode("utf-8", OUT),
                                  after.encode("utf-8", OUT)], [text_slot(rules)])
