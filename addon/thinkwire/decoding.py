"""Content-Encoding, decoded with a cap on what comes out: a stream incrementally, a body whole.

A few hundred bytes of brotli decode to 100 MiB, so no decoder here ever makes more than it was
allowed (docs/budget.md):

- a stream's decoder makes at most `READ_MAX` bytes from one upstream read (one call of the
  stream callable); past it `decompress` raises `TooLarge`, carrying the first `READ_MAX` bytes;
- a body is decoded to at most `BODY_MAX` bytes (`decode_body`); past it the caller leaves the
  body as the upstream sent it.

Model servers write one event per read, a few hundred bytes decoded; a read that decodes to
8 MiB is no model's output.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, Protocol, cast

READ_MAX = 8 * 1024 * 1024    # bytes decoded from one upstream read of a stream
BODY_MAX = 32 * 1024 * 1024   # bytes of a whole response body, decoded (or as it came)


class BodyError(ValueError):
    """A body that cannot be decoded; its text quotes none of the body."""


class TooLarge(ValueError):
    """One read decoded to more than the cap. `head`: the first `limit` bytes it made."""

    def __init__(self, made: bytes, limit: int) -> None:
        super().__init__(f"one read decoded to more than {limit} bytes")
        self._made, self._limit = made, limit

    @property
    def head(self) -> bytes:
        """(Cut when asked: a body's caller does not need it, and it is a copy.)"""
        return self._made[:self._limit]


class Decoder(Protocol):
    """An incremental decoder (`decoder_for`): `decompress` makes at most its limit a call."""

    def decompress(self, data: bytes) -> bytes: ...
    def flush(self) -> bytes: ...
    def ended(self) -> bool: ...


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

    def decompress(self, data: bytes) -> bytes:
        self._fed = True
        if self._d.eof:  # the last member ended exactly at a chunk boundary
            self._d = self._new()
        out = self._d.decompress(data, self.limit + 1)
        while True:
            if len(out) > self.limit:
                raise TooLarge(out, self.limit)
            if not self._d.eof:
                if self._more():   # output left inside, past max_length
                    out += self._d.decompress(b"", self.limit + 1 - len(out))
                    continue
                return out
            rest = self._d.unused_data
            if not rest:
                return out
            self._d = self._new()
            out += self._d.decompress(rest, self.limit + 1 - len(out))

    def _more(self) -> bool:
        tail = getattr(self._d, "unconsumed_tail", None)   # zlib
        return bool(tail) if tail is not None else not cast(Any, self._d).needs_input   # zstd

    def flush(self) -> bytes:
        flush = getattr(self._d, "flush", None)  # zlib holds output back; zstd does not
        if flush is None:
            return b""
        out: bytes = flush(self.limit + 1)
        if len(out) > self.limit:
            raise TooLarge(out, self.limit)
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
            out += self._d.decompress(self._d.unconsumed_tail, max_length - len(out))
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
            return _zlib(zlib.MAX_WBITS, self.limit).decompress(self._head) if self._head else b""
        return self._d.flush()

    def ended(self) -> bool:
        return self._d.ended() if self._d is not None else not self._head


class _Brotli:
    def __init__(self, limit: int) -> None:
        import brotli
        self._d = brotli.Decompressor()
        self._fed = False
        self.limit = limit
        self._d.process(b"", output_buffer_limit=1)   # TypeError: a brotli too old to cap (< 1.2)

    def decompress(self, data: bytes) -> bytes:
        self._fed = True
        d, cap = self._d, self.limit + 1
        out: bytes = d.process(data, output_buffer_limit=cap)
        # (Past the limit, brotli keeps the rest for calls with no input.)
        while len(out) <= self.limit and not d.can_accept_more_data():
            more = d.process(b"", output_buffer_limit=cap - len(out))
            if not more:
                break
            out += more
        if len(out) > self.limit:
            raise TooLarge(out, self.limit)
        return out

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


def decode_body(raw: bytes, content_encoding: str | None, limit: int = BODY_MAX) -> bytes | None:
    """A whole body decoded, or None when it is (or would decode to) more than `limit` bytes.
    BodyError: an encoding we cannot decode, or bytes that do not decode."""
    enc = (content_encoding or "").strip().lower()
    if enc in ("", "identity"):
        return raw if len(raw) <= limit else None
    try:
        d = decoder_for(content_encoding, limit)
    except (KeyError, TypeError):
        raise BodyError(f"content-encoding {enc[:32]!r} is not supported") from None
    if d is None:
        return raw
    try:
        out = d.decompress(raw)
        out += d.flush()
    except TooLarge:
        return None
    except Exception as e:   # zlib.error, brotli.error, zstd errors: not valid compressed data
        raise BodyError(f"cannot decode the {enc} body ({type(e).__name__})") from None
    return None if len(out) > limit else out
