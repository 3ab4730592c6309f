"""The steady token delta, answered in C: the one compiled part (`_hot.c`), optional.

Most events of a stream are token deltas in the middle of a reasoning block or of the answer:
plain text that changes nothing in the rewriter but its state. In Python each still costs a
dozen steps per chunk, and mitmproxy calls the stream callable once per chunk. So where the
extension is built, `_hot.Hot` is that callable: armed by the driver with a *spec*, it answers
a chunk that is exactly the learned event with another text literal itself (the same bytes, or
an output template filled in), and hands every other chunk to the Python driver. An event may
have a second slot that changes from event to event: a number (Responses' `sequence_number`,
renumbered) or a string literal of a few plain bytes (Ollama's `created_at`, copied as it
came). The driver first folds in what Hot took (`Hot.take`, the surface's `settle`, `fold`
here), then asks the surface for the spec that fits its new state (the surface's `hot`), or
disarms.

The rules stay in Python. A surface arms only where the splitter is steady (`Splitter.steady`),
and Hot takes only texts of the characters `table` allows: none that any tag or marker starts
with, as a byte or as what an escape stands for, so no text Hot takes can change a rule's
decision. Hot keeps no state of the splitter: `Splitter.took` derives all of it from the texts
Hot took. What Hot knows of the rules is that table, and, in reasoning that trims, which of its
characters are whitespace: the whitespace at a text's end is held there as the splitter holds
it. What goes out for a text of whitespace alone (Ollama: a line with an empty content) waits
in Hot for the next output, C's or the driver's, and goes in front of it: mitmproxy writes each
output on its own, and a write costs it more than a whole call of Hot. The bytes are the same as
the Python paths' (tests/test_hot.py, tests/test_hot_fuzz.py).
Without a C compiler, or with THINKWIRE_HOT=0, everything runs in Python.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, NamedTuple

from .fastpath import scanstring
from .jsonio import dumps
from .rules import WS, Rules
from .splitter import REASONING, Splitter

if TYPE_CHECKING:
    from ._hot import Hot as _Hot

Hot: type[_Hot] | None   # the C callable's class, None where it is not built
try:
    from ._hot import (ALLOW_BYTE, ALLOW_ESCAPE, BYTE_WS, CAP, ESCAPE_WS, PART_BODY, PART_N, PART_N1, PART_STR,
                       SEQ_NEW, SEQ_NONE, SEQ_OWN)
    from . import _hot
    Hot = _hot.Hot
except ImportError:   # pragma: no cover - not built: Python alone
    Hot = None
    PART_N, PART_N1, PART_BODY, PART_STR, SEQ_NONE, SEQ_OWN, SEQ_NEW = 0, 1, 2, 3, 0, 1, 2
    ALLOW_BYTE, ALLOW_ESCAPE, BYTE_WS, ESCAPE_WS, CAP = 1, 2, 4, 8, 16384

__all__ = ["Hot", "PART_N", "PART_N1", "PART_BODY", "PART_STR", "SEQ_NONE", "SEQ_OWN", "SEQ_NEW", "ALLOW_BYTE",
           "ALLOW_ESCAPE", "BYTE_WS", "ESCAPE_WS", "CAP", "MAX_NUMBER", "Spec", "Took", "Arming", "available",
           "table", "spec", "template", "holding", "fold", "literal"]


Template = tuple[bytes | int, ...]   # an output template: bytes and PART_* codes


class Spec(NamedTuple):
    """What `Hot.arm` takes (C reads it by position, in this order: `spec` documents each)."""
    pre: bytes
    slot_pos: int
    mid: bytes
    post: bytes
    table: bytes
    trim: bool
    out: Template | None
    seq_mode: int
    channels: int
    pass_same: bool
    chars: bytes | None
    held: Template | None
    escapes: bytes = b""   # backslash-u escapes a text may hold as they came: 4 hex digits each (`spec`)


class Took(NamedTuple):
    """What `Hot.take` gives (C gives its own named tuple, `_hot.Took`, of these fields)."""
    hits: int                # chunks taken
    changed: int             # of them, chunks whose output is not the chunk
    literal: bytes | None    # the bodies of the text literals taken, as they came, joined
    offset: int              # the numbering (SEQ_*) now
    last: int


class Arming(NamedTuple):
    """What a surface's `hot()` gives the driver: `Hot.arm(*arming)`."""
    spec: Spec
    offset: int = 0      # the numbering, where the spec numbers
    last: int = 0
    held: bytes = b""    # the whitespace the splitter holds (escaped: `holding`)

MAX_NUMBER = (1 << 63) - 1   # the numbering Hot is armed with fits a long long (else Python numbers)


def available() -> bool:
    """Whether streams get the C callable: built, and not turned off (THINKWIRE_HOT=0)."""
    return Hot is not None and os.environ.get("THINKWIRE_HOT", "1").strip().lower() not in ("0", "off", "false", "no")


# The two-byte escapes json.dumps writes (a literal Hot takes is what json.dumps writes for its text).
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\"}


@functools.lru_cache(maxsize=64)
def table(rules: Rules, trim: bool, exclude: str = "") -> bytes:
    """What a literal Hot takes may hold, as a table of 256: each printable ASCII byte but the
    quote and the backslash (ALLOW_BYTE), and each escape json.dumps writes (ALLOW_ESCAPE, on its
    letter), where the character it is or stands for starts no tag or marker of `rules`, and is
    not in `exclude` (characters the surface writes otherwise than json.dumps). With `trim`,
    which of them are whitespace (BYTE_WS, ESCAPE_WS): held at a text's end."""
    starts = rules.tag_starts | frozenset(exclude)
    t = bytearray(256)
    for b in range(0x20, 0x7F):
        c = chr(b)
        if c not in '"\\' and c not in starts:
            t[b] = ALLOW_BYTE | (BYTE_WS if trim and c in WS else 0)
    for letter, char in _ESCAPES.items():
        if char not in starts:
            t[ord(letter)] |= ALLOW_ESCAPE | (ESCAPE_WS if trim and char in WS else 0)
    return bytes(t)


def template(cut: list[bytes]) -> Template:
    """An output template with the text literal's body wherever `cut` was cut."""
    out: list[bytes | int] = [cut[0]]
    for c in cut[1:]:
        out += [PART_BODY, c]
    return tuple(out)


def spec(rules: Rules, pre: bytes, post: bytes, out: Template | None = None, *, trim: bool = False,
         slot_pos: int = 0, mid: bytes = b"", seq_mode: int = SEQ_NONE, channels: int = 1,
         pass_same: bool = False, chars: bytes | None = None, exclude: str = "",
         held: Template | None = None, unicode_escaped: str = "") -> Spec:
    """What `Hot.arm` takes. A chunk it answers is `pre`, a text literal of what `table` allows
    (quotes included; `exclude`: characters it may not hold either), `post`; with a second slot
    before it (`slot_pos` 1) or after it (2), `mid` between the two. That slot is a number, read
    where `seq_mode` numbers, or else a string literal of the bytes in `chars` (printable ASCII,
    no quote or backslash: no escape). `out` None: the chunk goes as it came; else the output
    template (bytes, PART_BODY for the literal's body, PART_STR for the string slot's, as it came,
    PART_N / PART_N1 for the numbers `seq_mode` gives). `trim`: whitespace at a text's end is held
    (it goes out in front of the next text). `pass_same`: with nothing held, and numbered as it
    came, the chunk goes as it came. `held` (with `trim`): what goes out for a text of whitespace
    alone when nothing is held (the splitter holds it whole and gives nothing): a template of
    bytes and PART_STR (`()`: nothing goes out); None: such a text is Python's. Without `trim`
    nothing is held: `held` does not apply. `unicode_escaped`: characters (of `exclude`, printable
    ASCII) the surface writes as `\\u00xx`, lowercase, as Go does (Ollama's `<`, `>`, `&`): the
    text may hold that escape, as it came, where the character starts no tag or marker."""
    starts = rules.tag_starts
    escapes = b"".join(b"%04x" % ord(c) for c in sorted(unicode_escaped) if c not in starts)
    return Spec(pre, slot_pos, mid, post, table(rules, trim, exclude), trim, out, seq_mode, channels, pass_same,
                chars, held if trim else None, escapes)


def holding(splitter: Splitter, kind: int) -> bytes:
    """What `splitter` holds, as `Hot.arm` takes it (escaped): a surface arms for `kind` only
    where `Splitter.steady` gives it, and then the answer holds nothing, reasoning whitespace."""
    held = (splitter.held_ws() or "") if kind == REASONING else ""   # (steady: whitespace, not None)
    return dumps(held)[1:-1].encode() if held else b""


def fold(splitter: Splitter, kind: int, got: Took, literal: bool = False) -> tuple[str, str | None]:
    """What Hot took (`Hot.take`, with hits) as `kind`, folded into `splitter` (`Splitter.took`):
    what feed would have given for those texts, joined, and with `literal` its JSON literal's
    body (where a plan reads it, its spec names no `\\u` escape: Hot takes only the escapes
    json.dumps writes, so the literals as they came are that literal but for the whitespace held
    before and after), else None."""
    came = literal_of(got)
    text = scanstring(came + '"', 0)[0] if "\\" in came else came
    if kind == REASONING and splitter.rules.trim and not text.strip(WS):
        # Whitespace alone (`spec`'s held: nothing was held before): feed holds it whole.
        if splitter.feed(text):
            raise ValueError("fold: whitespace alone gave text")
        return "", "" if literal else None
    before = (splitter.held_ws() or "") if kind == REASONING else ""   # (steady: whitespace, not None)
    gave = splitter.took(kind, text)
    if not literal:
        return gave, None
    after = len(text) - (len(gave) - len(before))   # the characters of text held now (whitespace)
    if not before and not after:
        return gave, came
    held_after = dumps(text[len(text) - after:])[1:-1] if after else ""
    return gave, dumps(before)[1:-1] + came[:len(came) - len(held_after)]


def literal(got: Took) -> str:
    """The bodies (no quotes) of the text literals Hot took, as they came, one after the other."""
    return literal_of(got)


def literal_of(got: Took) -> str:
    lit = got.literal
    assert lit is not None   # (None only with no hits: nothing to fold)
    return lit.decode("ascii")
