"""The steady token delta, answered in C: the one compiled part (`_hot.c`), optional.

Most events of a stream are token deltas in the middle of a reasoning block or of the answer:
plain text that changes nothing in the rewriter but a count. In Python each still costs a dozen
steps per chunk, and mitmproxy calls the stream callable once per chunk. So where the extension
is built, `_hot.Hot` is that callable: armed by the driver with a *spec*, it answers a chunk
that is exactly the learned event with another plain text literal itself (the same bytes, or an
output template filled in), and hands every other chunk to the Python driver. The driver first
folds in what Hot took (`Hot.take`, the surface's `settle`), then asks the surface for the spec
that fits its new state (the surface's `hot`), or disarms.

A surface arms only where the splitter is steady (`Splitter.steady`): there any text of plain
characters (`fastpath.plain_bytes`, backticks, and the escapes json.dumps writes the same, see
`allowed`) comes out as it went in, but for what the splitter holds at a text's end, which Hot
holds as it does: whitespace at a reasoning text's end, and in the answer the start of a tag
(the `<` of `a <` may be one), out of code only, as the splitter keeps the code state (a fence,
a code span): Hot moves the state it was armed with over the texts it takes. `Splitter.took`
then gives the state. The bytes are the same as the Python paths' (tests/test_fastpath.py).
Without a C compiler, or with THINKWIRE_HOT=0, everything runs in Python.
"""

from __future__ import annotations

import functools
import os
import re

from json.decoder import scanstring

from .fastpath import dumps, plain_bytes
from .splitter import REASONING, Rules, Splitter

try:
    from ._hot import PART_BODY, PART_N, PART_N1, SEQ_NEW, SEQ_NONE, SEQ_OWN, Hot
except ImportError:   # pragma: no cover - not built: Python alone
    Hot = None
    PART_N, PART_N1, PART_BODY, SEQ_NONE, SEQ_OWN, SEQ_NEW = 0, 1, 2, 0, 1, 2

__all__ = ["Hot", "PART_N", "PART_N1", "PART_BODY", "SEQ_NONE", "SEQ_OWN", "SEQ_NEW",
           "available", "spec", "as_it_came", "template", "reasoning", "answer", "held", "unheld", "holding",
           "fold", "literal"]


def available() -> bool:
    """Whether streams get the C callable: built, and not turned off (THINKWIRE_HOT=0)."""
    return Hot is not None and os.environ.get("THINKWIRE_HOT", "1").strip().lower() not in ("0", "off", "false", "no")


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\"}


@functools.lru_cache(maxsize=64)
def allowed(rules: Rules) -> bytes:
    """What a literal Hot takes may hold, as a table of 256: bit 1, the byte as it is (the plain
    bytes of `rules`, but the backtick and the tilde: code spans and fences are the splitter's
    alone, see thinkwire.lines); bit 2, the escape of a backslash and the byte, one json.dumps writes the
    same (\\n \\t \\" ...), when the character it stands for starts no tag or marker of `rules`."""
    rx = re.compile(plain_bytes(rules))
    table = bytearray(rx.fullmatch(bytes([b])) is not None and b not in b"`~" for b in range(256))
    for letter, char in _ESCAPES.items():
        if char not in rules.tag_starts:
            table[ord(letter)] |= 2
    return bytes(table)


def template(cut: list[bytes]) -> tuple:
    """An output template with the text literal's body wherever `cut` was cut."""
    out: list = [cut[0]]
    for c in cut[1:]:
        out += [PART_BODY, c]
    return tuple(out)


def spec(rules: Rules, pre: bytes, post: bytes, out: tuple | None = None, *, trim: bool = False,
         collect: bool = False, num_pos: int = 0, mid: bytes = b"", seq_mode: int = SEQ_NONE,
         channels: int = 1, pass_same: bool = False, hold: bool = False, tags: tuple = ()) -> tuple:
    """What `Hot.arm` takes. A chunk it answers is `pre`, a plain text literal (quotes
    included), `post`; with a number slot before it (`num_pos` 1) or after it (2), `mid`
    between the two. `out` None: the chunk goes as it came; else the output template (bytes,
    PART_BODY for the literal's body, PART_N / PART_N1 for the numbers `seq_mode` gives).
    `trim`: a text ending in whitespace is the splitter's to decide, or with `hold` its
    whitespace is held as the splitter holds it (it goes out in front of the next text).
    `tags` (the answer, `answer`): a text ending in the start of one is held so too.
    `collect`: keep the texts for `Hot.take`. `pass_same`: with nothing held, and numbered as
    it came, the chunk goes as it came."""
    return (pre, num_pos, mid, post, allowed(rules), trim, out, seq_mode, channels, collect, pass_same,
            hold and trim, tags)


def as_it_came(pre: bytes, post: bytes) -> dict:
    """The output options of a spec for a chunk that goes as it came (`spec`'s pre and post):
    its own bytes as the template, for when it does not (something held goes out in front)."""
    return {"out": (pre + b'"', PART_BODY, b'"' + post), "pass_same": True}


def reasoning(rules: Rules) -> dict:
    """The trimming options of a spec for reasoning text under `rules`: trailing whitespace
    held as the splitter holds it, unless a tag may start with whitespace (it decides then)."""
    return {"trim": rules.trim, "hold": not rules._ws_lead}


def held(text: str) -> bytes:
    """Held whitespace (`Splitter.held_ws`) as the escaped JSON text `Hot.arm` takes."""
    return dumps(text)[1:-1].encode() if text else b""


def unheld(data: bytes) -> str:
    """What `held` made, back (from `Hot.take`)."""
    return scanstring(data.decode() + '"', 0)[0] if data else ""


def answer(rules: Rules) -> dict:
    """The holding option of a spec for answer text under `rules`: the start of a tag at a
    text's end held as the splitter holds it (`Rules.hot_tags`; none: the splitter decides)."""
    return {"tags": rules.hot_tags}


def holding(splitter: Splitter, kind: int) -> tuple:
    """What `splitter` holds, as `Hot.arm` takes it, and the answer's code state there
    (`Splitter.code`): a surface arms for `kind` only where `Splitter.steady` gives it, and
    what is held is then whitespace (reasoning), the start of a tag (the answer) or nothing."""
    if kind == REASONING:
        return held(splitter.held_ws() or ""), 0, b""
    code, head = splitter.code()
    # (Only a head's first three characters tell a fence: a non-ASCII one is none, whatever
    # bytes of it come.)
    return held(splitter.held_tag() or ""), code, head[:3].encode("utf-8", "replace")[:8]


def fold(splitter: Splitter, kind: int, got: tuple) -> str:
    """What Hot took (`Hot.take`) as `kind`, folded into `splitter` (`Splitter.took`): the text
    it gave, joined."""
    text = got[3].decode("ascii")
    splitter.took(kind, text, unheld(got[6]))
    return text


def literal(got: tuple) -> str:
    """The body (no quotes) of the JSON literal of the text `fold` gave: Hot keeps what it took
    as it came too, and what it takes is what json.dumps writes for that text."""
    return got[7].decode("ascii")
