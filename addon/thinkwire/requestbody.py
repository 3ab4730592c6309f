"""A request body as the addon reads it: decoded (Content-Encoding) with a hard cap on what the
decoding may make.

A client's compressed body is its own choice of amplification: ~600 bytes of brotli decode to
300 MiB. mitmproxy forwards request bodies as they came and never decodes them; thinkwire
decodes one only to read it (marks to restore, the model, switches), and stops at
DECODED_MAX: past it, the body is not read and goes upstream byte-identical.
"""

from __future__ import annotations

import zlib

from mitmproxy import http

DECODED_MAX = 32 << 20   # bytes a compressed request body may decode to (32 MiB)


class TooLarge(ValueError):
    """The body decodes past the cap."""


def read(request: http.Request, cap: int = DECODED_MAX) -> tuple[bytes | None, str | None]:
    """(the decoded body, None); or (None, why) when it is not read: it decodes past `cap`, or
    its encoding is one thinkwire does not decode or the bytes do not decode (then it goes as it
    came, as it always did)."""
    raw = request.raw_content
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if raw is None or encoding in ("", "identity"):
        return raw, None
    decode = _DECODERS.get(encoding)
    if decode is None:
        return None, f"content-encoding {_shown(encoding)} is not decoded"
    try:
        return decode(raw, cap), None
    except TooLarge:
        return None, (f"its {encoding} body decodes to more than {cap >> 20} MiB "
                      f"({len(raw)} bytes sent); it goes upstream unread")
    except Exception as e:   # truncated or not that encoding: it goes as it came
        return None, f"its {encoding} body does not decode ({type(e).__name__})"


def _shown(encoding: str) -> str:
    return repr(encoding[:40] + ("..." if len(encoding) > 40 else ""))


_STEP = 1 << 20   # bytes decoded at a time: past the cap, at most this much more was made


class _Out:
    """Decoded pieces, their total held to the cap."""

    def __init__(self, cap: int) -> None:
        self.cap, self.size = cap, 0
        self.pieces: list[bytes] = []

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size > self.cap:
            raise TooLarge
        self.pieces.append(piece)

    def room(self) -> int:
        """How many bytes the next step may decode (the cap's first byte over it included)."""
        return min(_STEP, self.cap + 1 - self.size)

    def bytes(self) -> bytes:
        return b"".join(self.pieces)


def _zlib(raw: bytes, cap: int, wbits: int, members: bool) -> bytes:
    """gzip (`members`: one after another, as `gzip.decompress` reads them) or zlib/deflate."""
    out = _Out(cap)
    data = raw
    while data:
        d = zlib.decompressobj(wbits)
        while True:
            out.add(d.decompress(data, out.room()))
            if d.eof:
                data = d.unused_data if members else b""
                break
            data = d.unconsumed_tail
            if not data:
                raise zlib.error("truncated")
    return out.bytes()


def _gzip(raw: bytes, cap: int) -> bytes:
    return _zlib(raw, cap, 16 + zlib.MAX_WBITS, True)


def _deflate(raw: bytes, cap: int) -> bytes:
    # As mitmproxy reads `deflate`: zlib-wrapped, else raw deflate (what some clients send).
    try:
        return _zlib(raw, cap, zlib.MAX_WBITS, False)
    except zlib.error:
        return _zlib(raw, cap, -zlib.MAX_WBITS, False)


def _brotli(raw: bytes, cap: int) -> bytes:
    import brotli
    d = brotli.Decompressor()
    out = _Out(cap)
    out.add(d.process(raw, output_buffer_limit=out.room()))
    while not d.is_finished() and not d.can_accept_more_data():
        out.add(d.process(b"", output_buffer_limit=out.room()))
    if not d.is_finished():
        raise ValueError("truncated")
    return out.bytes()


def _zstd(raw: bytes, cap: int) -> bytes:
    try:
        from compression import zstd  # Python 3.14
    except ImportError:  # pragma: no cover - depends on the Python version
        from backports import zstd  # what mitmproxy installs before 3.14
    out = _Out(cap)
    data = raw
    while data:   # frame after frame
        d = zstd.ZstdDecompressor()
        out.add(d.decompress(data, out.room()))
        while not d.eof and not d.needs_input:
            out.add(d.decompress(b"", out.room()))
        if not d.eof:
            raise ValueError("truncated")
        data = d.unused_data
    return out.bytes()


_DECODERS = {"gzip": _gzip, "x-gzip": _gzip, "deflate": _deflate, "br": _brotli, "zstd": _zstd}
