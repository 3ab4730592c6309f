"""Content-Encoding, decoded with a cap on what comes out: a stream incrementally, a whole body
(a response's, or a client's request) at once, by the same decoders.

A few hundred bytes of brotli decode to 100 MiB, so no decoder here ever makes much more than it
was allowed (docs/budget.md):

- a stream's decoder makes at most `READ_MAX` bytes from one upstream read (one call of the
  stream callable); past it `decompress` raises `TooLarge`, carrying the first `READ_MAX` bytes;
- a response body is decoded to at most `BODY_MAX` bytes (`decode_body`), a request body to at
  most `REQUEST_MAX` (`read_request`); past it the caller leaves the body as it came.

Decoders work in steps of at most `STEP` bytes (brotli's output buffer may reach twice that), so
past a cap at most one step more was made. A body must end where its encoding ends: one cut
short (a gzip without its trailer, a zstd frame or brotli stream without its end) is not
decoded, so a prefix is never taken for the whole.

Model servers write one event per read, a few hundred bytes decoded; a read that decodes to
8 MiB is no model's output.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, Protocol, cast

from mitmproxy import http

READ_MAX = 8 * 1024 * 1024      # bytes decoded from one upstream read of a stream
BODY_MAX = 32 * 1024 * 1024     # bytes of a whole response body, decoded (or as it came)
REQUEST_MAX = 32 * 1024 * 1024  # bytes a compressed request body may decode to
STEP = 1 << 20                  # bytes one decoding step may make (brotli's buffer: up to twice)


class BodyError(ValueError):
    """A body that cannot be decoded; its text quotes none of the body. `why`: the decoder's
    error type, or "truncated"."""

    def __init__(self, message: str, why: str = "") -> None:
        super().__init__(message)
        self.why = why


class Unsupported(BodyError):
    """An encoding thinkwire does not decode."""


class TooLarge(ValueError):
    """One call decoded to more than the cap. `head`: the first `limit` bytes it made."""

    def __init__(self, made: list[bytes], limit: int) -> None:
        super().__init__(f"one read decoded to more than {limit} bytes")
        self._made, self._limit = made, limit

    @property
    def head(self) -> bytes:
        """(Joined and cut when asked: a body's caller does not need it, and it is a copy.)"""
        return b"".join(self._made)[:self._limit]


class Decoder(Protocol):
    """An incremental decoder (`decoder_for`): `decompress` makes at most its limit a call."""

    def decompress(self, data: bytes) -> bytes: ...
    def flush(self) -> bytes: ...
    def ended(self) -> bool: ...


class _Made:
    """The pieces one call made, their total held to the limit."""

    __slots__ = ("limit", "size", "pieces")

    def __init__(self, first: bytes, limit: int) -> None:
        self.limit, self.size, self.pieces = limit, 0, [first]
        self.size = len(first)
        self._check()

    def add(self, piece: bytes) -> None:
        self.pieces.append(piece)
        self.size += len(piece)
        self._check()

    def _check(self) -> None:
        if self.size > self.limit:
            raise TooLarge(self.pieces, self.limit)

    def room(self) -> int:
        """How many bytes the next step may make (the limit's first byte over it included)."""
        return min(STEP, self.limit + 1 - self.size)

    def bytes(self) -> bytes:
        return self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)


class _Member(Protocol):
    """What `_Members` reads of one member's decompressor (zstd's, or `_ZlibObj`)."""

    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int) -> bytes: ...


class _Members:
    """A decompressor that starts a new one after each member (gzip) or frame (zstd): both
    formats allow several back to back. `new()` objects take `decompress(data, max_length)`."""

    def __init__(self, new: Callable[[], _Member], limit: int) -> None:
        self._new = new
        self._d = new()
        self._fed = False
        self.limit = limit
        self._first = min(STEP, limit + 1)

    def decompress(self, data: bytes) -> bytes:
        self._fed = True
        if self._d.eof:  # the last member ended exactly at a chunk boundary
            self._d = self._new()
        d = self._d
        out = d.decompress(data, self._first)
        if (not d.unused_data if d.eof else not self._more()) and len(out) <= self.limit:
            return out   # the usual read: decoded whole in one step
        made = _Made(out, self.limit)
        while True:
            if not self._d.eof:
                if not self._more():
                    return made.bytes()
                made.add(self._d.decompress(b"", made.room()))   # output left inside
                continue
            rest = self._d.unused_data
            if not rest:
                return made.bytes()
            self._d = self._new()
            made.add(self._d.decompress(rest, made.room()))

    def _more(self) -> bool:
        tail = getattr(self._d, "unconsumed_tail", None)   # zlib
        return bool(tail) if tail is not None else not cast(Any, self._d).needs_input   # zstd

    def flush(self) -> bytes:
        flush = getattr(self._d, "flush", None)  # zlib holds output back; zstd does not
        if flush is None:
            return b""
        out: bytes = flush(self.limit + 1)
        if len(out) > self.limit:
            raise TooLarge([out], self.limit)
        return out

    def ended(self) -> bool:
        """Whether the bytes so far end where a member / frame ends (or there were none)."""
        return self._d.eof or not self._fed


class _ZlibObj:
    """zlib.decompressobj with zstd's `decompress(data, max_length)` reading of the leftover:
    zlib keeps input it did not decode in `unconsumed_tail`, to be given back."""

    __slots__ = ("_d",)

    def __init__(self, wbits: int) -> None:
        self._d = zlib.decompressobj(wbits)

    def decompress(self, data: bytes, max_length: int) -> bytes:
        return self._d.decompress(self._d.unconsumed_tail + data, max_length)

    def flush(self, max_length: int) -> bytes:
        # (zlib's flush has no max_length: decode what is left in capped steps instead)
        out = b""
        while self._d.unconsumed_tail and len(out) < max_length:
            out += self._d.decompress(self._d.unconsumed_tail, min(STEP, max_length - len(out)))
        return out + (self._d.flush() if len(out) < max_length else b"")

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused_data(self) -> bytes:
        return self._d.unused_data

    @property
    def unconsumed_tail(self) -> bytes:
        return self._d.unconsumed_tail


def _zlib(wbits: int, limit: int) -> _Members:
    return _Members(lambda: _ZlibObj(wbits), limit)


class _Deflate:
    """HTTP "deflate" is zlib-wrapped, but some servers send raw deflate: decide on first bytes."""

    def __init__(self, limit: int) -> None:
        self._d: _Members | None = None
        self._head = b""
        self.limit = limit

    def decompress(self, data: bytes) -> bytes:
        if self._d is None:
            self._head += data
            if len(self._head) < 2:
                return b""
            data, self._head = self._head, b""
            wrapped = (data[0] & 0x0F) == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._d = _zlib(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS, self.limit)
        return self._d.decompress(data)

    def flush(self) -> bytes:
        if self._d is None:
            if self._head:   # one byte: no deflate stream ends there
                self._d = _zlib(zlib.MAX_WBITS, self.limit)
                return self._d.decompress(self._head)
            return b""
        return self._d.flush()

    def ended(self) -> bool:
        return self._d.ended() if self._d is not None else not self._head


class _Brotli:
    def __init__(self, limit: int) -> None:
        import brotli
        self._d = brotli.Decompressor()
        self._fed = False
        self.limit = limit
        self._first = min(STEP, limit + 1)
        self._d.process(b"", output_buffer_limit=1)   # TypeError: a brotli too old to cap (< 1.2)

    def decompress(self, data: bytes) -> bytes:
        self._fed = True
        d = self._d
        out: bytes = d.process(data, output_buffer_limit=self._first)
        if d.can_accept_more_data() and len(out) <= self.limit:
            return out   # the usual read: decoded whole in one step
        # (Past its buffer limit, brotli keeps the rest for calls with no input.)
        made = _Made(out, self.limit)
        while not d.can_accept_more_data():
            more: bytes = d.process(b"", output_buffer_limit=made.room())
            if not more:
                break
            made.add(more)
        return made.bytes()

    def flush(self) -> bytes:
        return b""

    def ended(self) -> bool:
        return self._d.is_finished() or not self._fed


def _zstd(limit: int) -> _Members:
    try:
        from compression import zstd  # Python 3.14
    except ImportError:  # pragma: no cover - depends on the Python version
        from backports import zstd  # what mitmproxy installs before 3.14
    return _Members(zstd.ZstdDecompressor, limit)


DECODERS: dict[str, Callable[[int], Decoder]] = {
    # (32 +: a zlib header is read too, as mitmproxy's own gzip decoding does)
    "gzip": lambda limit: _zlib(32 + zlib.MAX_WBITS, limit),
    "x-gzip": lambda limit: _zlib(32 + zlib.MAX_WBITS, limit),
    "deflate": _Deflate,
    "br": _Brotli,
    "zstd": _zstd,
}


def decoder_for(content_encoding: str | None, limit: int = READ_MAX) -> Decoder | None:
    """A fresh incremental decoder that makes at most `limit` bytes a call, None for identity;
    KeyError for an encoding we cannot decode (TypeError: brotli too old to cap its output)."""
    enc = (content_encoding or "").strip().lower()
    if enc in ("", "identity"):
        return None
    return DECODERS[enc](limit)


def decode_body(raw: bytes, content_encoding: str | None, limit: int = BODY_MAX, *,
                partial: bool = False) -> bytes | None:
    """A whole body decoded, or None when it is (or would decode to) more than `limit` bytes.
    Unsupported: an encoding we cannot decode; BodyError: bytes that do not decode, or that end
    before their encoding does (truncated), unless `partial` (a stream's bytes that broke off:
    read as far as they decode, as the client got them)."""
    enc = (content_encoding or "").strip().lower()
    if enc in ("", "identity"):
        return raw if len(raw) <= limit else None
    try:
        d = DECODERS[enc](limit)
    except (KeyError, TypeError):
        raise Unsupported(f"content-encoding {enc[:32]!r} is not supported") from None
    if not raw:
        return raw   # (an empty body says nothing of its encoding: as mitmproxy reads it)
    try:
        out = d.decompress(raw)
        out += d.flush()
    except TooLarge:
        return None
    except Exception as e:   # zlib.error, brotli.error, zstd errors: not valid compressed data
        why = type(e).__name__
        raise BodyError(f"cannot decode the {enc} body ({why})", why) from None
    if not partial and not d.ended():
        raise BodyError(f"cannot decode the {enc} body (truncated: it ends before its {enc} stream does)",
                        "truncated")
    return None if len(out) > limit else out


def read_request(request: http.Request, cap: int = REQUEST_MAX) -> tuple[bytes | None, str | None]:
    """(the decoded body, None); or (None, why) when it is not read: it decodes past `cap`, or
    its encoding is one thinkwire does not decode or the bytes do not decode (then it goes as it
    came, as it always did). A client's compressed body is its own choice of amplification:
    mitmproxy forwards request bodies as they came and never decodes them, thinkwire decodes one
    only to read it (marks to restore, the model, switches)."""
    raw = request.raw_content
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if raw is None or encoding in ("", "identity"):
        return raw, None   # (as it came: not decoded, so nothing amplified)
    try:
        body = decode_body(raw, encoding, cap)
    except Unsupported:
        return None, f"content-encoding {_shown(encoding)} is not decoded"
    except BodyError as e:
        return None, f"its {encoding} body does not decode ({e.why})"
    if body is None:
        return None, (f"its {encoding} body decodes to more than {cap >> 20} MiB "
                      f"({len(raw)} bytes sent); it goes upstream unread")
    return body, None


def _shown(encoding: str) -> str:
    return repr(encoding[:40] + ("..." if len(encoding) > 40 else ""))
