"""The fast path: token deltas handled without a JSON parse, and most of them before any SSE framing.

Servers send the same bytes around every token delta of a stream but the text. Learned from an
event parsed in full (`learn_literal`), the text before and after its text literal (a *shape*)
lets a later event that starts and ends the same way be read by decoding that literal alone.

On the chunk's bytes (`ByteShape`), or on a whole event the parser framed: model servers flush
one event per HTTP chunk, and mitmproxy calls the stream callable once per chunk. When the chunk is exactly the
learned event with another text literal, and that text holds no first character of any tag or
marker, the splitter's plain step (`Splitter.plain`) decides it, and the surface sends the
original bytes (answer text) or one concatenation (reasoning). A plain literal (no quote,
backslash, control or non-ASCII byte, backtick) is its own text; any other is decoded alone
(`slot_text`). Anything else takes the surface's `on_event`, which gives the same bytes
(tests/test_fastpath.py). The interpreter that runs a surface's declared shape is thinkwire.shapes.

A rewriter built with `fast=False` takes neither shortcut: the tests' reference.
"""

from __future__ import annotations

import functools
import json
import json.decoder
import re
from typing import Any, Callable

from .events import Event
from .jsonio import OUT, dumps
from .rules import Rules

# json's own string scanner (C): the string literal starting after a quote at `end`, decoded, and
# where it ends. typeshed does not declare it; its type is written here, once (re-exported).
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.__dict__["scanstring"]


# -- shapes in text ----------------------------------------------------------------------------
def key_pattern(key: str) -> re.Pattern[str]:
    """`"key": "` (inside a JSON string a quote is escaped, so this finds keys only)."""
    return re.compile(r'"%s"\s*:\s*"' % re.escape(key))


# Characters: the most a learned shape holds around its slots. Shapes are the upstream's bytes,
# and their patterns are compiled and kept for the process (a few caches of 64 entries each):
# token events are a few hundred bytes around their text, and a longer one is not learned.
SHAPE_MAX = 2048


def learn_literal(data: str, key: re.Pattern[str], value: str, read: Callable[[Any], object]) -> tuple[str, str] | None:
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

    __slots__ = ("match", "name", "head_len", "end_len", "groups", "prefix", "suffix")

    def __init__(self, head: bytes, name: str | None, consts: list[bytes], slots: list[bytes],
                 end: bytes = b"\n\n") -> None:
        """`end`: what ends an event (an SSE event's blank line; an NDJSON line's LF)."""
        self.name, self.head_len, self.end_len = name, len(head), len(end)
        prefix, suffix = head + consts[0], consts[-1] + end
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

        def match(chunk: bytes) -> re.Match[bytes] | None:
            if chunk.startswith(prefix) and chunk.endswith(suffix):
                m = whole(chunk, start, len(chunk) - tail)
                if m is not None and (not keys or m.group(*keys) == want):
                    return m
            return None
        self.match = match

    def event(self, chunk: bytes) -> Event:
        """A chunk `match` took, as the SSE parser frames it: the chunk is one whole event, framed
        as canonical_head requires. The surface's on_event takes it without the driver's framing."""
        return Event(chunk, self.name, chunk[self.head_len:-self.end_len].decode("utf-8", "surrogateescape"))


_TOKEN = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[^"]+|"')   # a string literal, or other JSON text


@functools.lru_cache(maxsize=256)
def _escaped(tok: bytes) -> bytes:
    return re.escape(tok)   # (keys and punctuation: the same few for every stream)


@functools.lru_cache(maxsize=64)
def _compiled(slot: bytes) -> re.Pattern[bytes]:
    return re.compile(slot, re.S)


# The body of any JSON string literal (valid escapes; non-ASCII bytes are checked by decoding).
_ANY_BODY = rb'[^"\\\x00-\x1f]*+(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*+)*+'


def text_slot(rules: Rules) -> bytes:
    """A string literal in two groups: its body when plain (the common case, its own text), else
    its body whatever it holds (read by `slot_text`)."""
    return b'"(?:(' + plain_bytes(rules) + b'++)|(' + _ANY_BODY + b'))"'


# What `slot_text` gives: a slot's text, and whether its literal was plain (None: the splitter
# must decide; only a text whose second value is not None may go to `Splitter.plain`).
Got = tuple[str, bool | None]


def slot_text(m: re.Match[bytes], group: int, rules: Rules, tags: bool = False) -> Got | None:
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


def literal_body(text: str, got: Got) -> bytes:
    """The bytes of text's JSON literal without its quotes, text being what the splitter made of
    the slot text `got` (slot_text): a plain literal is its own text, and so is any start of
    it; other text (escapes, held whitespace or a separator in front) is encoded."""
    if got[1] and got[0].startswith(text):
        return text.encode()
    return dumps(text)[1:-1].encode("utf-8", OUT)


NUMBER_SLOT = b"(0|[1-9][0-9]*)"
ASCII_SLOT = b'("[^"\\\\\\x00-\\x1f\\x7f-\\xff]*")'   # a string literal without escapes, quotes kept
