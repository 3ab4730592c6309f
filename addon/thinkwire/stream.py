"""Drive a surface's event rewriter over raw stream bytes, and fail open.

`StreamDriver` is the callable mitmproxy's `flow.response.stream` gets: bytes in, a list of
bytes out, `b""` once at the end. It decodes Content-Encoding incrementally, frames events
(SSE, or NDJSON lines: the parser it is given), hands them to the surface, and never raises: on an error of the rewrite it sends what
the surface still held, then the original bytes from that point on, unchanged (fail open).

A compressed stream that stops decoding part way (corrupt, or cut before its end marker) is
not failed open: its Content-Encoding header is already gone, so the rest would reach the
client as compressed bytes. The client gets what decoded, rewritten as usual, then a clean end
of stream (the surface's held text flushed); the rest of the upstream's bytes are dropped.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import replace
from typing import Callable, Protocol

from . import hot
from .sse import Event, SSEParser

log = logging.getLogger(__name__)


class EventRewriter(Protocol):
    def on_event(self, ev: Event) -> list[bytes]: ...
    # Optional, the byte fast path (thinkwire.fastpath): called with a chunk that starts where
    # an event starts (the parser holds nothing). Its output as the full path would give it
    # (one whole event; or any bytes, once the rewriter passes everything as it came), or None
    # (nothing changed) for the full path to decide. Used only when the rewriter's `fast` is true.
    # def on_chunk(self, chunk: bytes) -> list[bytes] | None: ...
    def finish(self) -> list[bytes]: ...
    def abort(self) -> list[bytes]: ...


# -- Content-Encoding, decoded incrementally -----------------------------------------------
class _Members:
    """A decompressor that starts a new one after each member (gzip) or frame (zstd): both
    formats allow several back to back."""

    def __init__(self, new: Callable[[], object]) -> None:
        self._new = new
        self._d = new()
        self._fed = False

    def decompress(self, data: bytes) -> bytes:
        self._fed = True
        if self._d.eof:  # the last member ended exactly at a chunk boundary
            self._d = self._new()
        out = self._d.decompress(data)
        while self._d.eof and self._d.unused_data:
            rest = self._d.unused_data
            self._d = self._new()
            out += self._d.decompress(rest)
        return out

    def flush(self) -> bytes:
        flush = getattr(self._d, "flush", None)  # zlib holds output back; zstd does not
        return flush() if flush else b""

    def ended(self) -> bool:
        """Whether the bytes so far end where a member / frame ends (or there were none)."""
        return self._d.eof or not self._fed


def _zlib(wbits: int) -> _Members:
    return _Members(lambda: zlib.decompressobj(wbits))


class _Deflate:
    """HTTP "deflate" is zlib-wrapped, but some servers send raw deflate: decide on first bytes."""

    def __init__(self) -> None:
        self._d: _Members | None = None
        self._head = b""

    def decompress(self, data: bytes) -> bytes:
        if self._d is None:
            self._head += data
            if len(self._head) < 2:
                return b""
            data, self._head = self._head, b""
            wrapped = (data[0] & 0x0F) == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._d = _zlib(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return self._d.decompress(data)

    def flush(self) -> bytes:
        if self._d is None:
            return _zlib(zlib.MAX_WBITS).decompress(self._head) if self._head else b""
        return self._d.flush()

    def ended(self) -> bool:
        return self._d.ended() if self._d is not None else not self._head


class _Brotli:
    def __init__(self) -> None:
        import brotli
        self._d = brotli.Decompressor()
        self._fed = False

    def decompress(self, data: bytes) -> bytes:
        self._fed = True
        return self._d.process(data)

    def flush(self) -> bytes:
        return b""

    def ended(self) -> bool:
        return self._d.is_finished() or not self._fed


def _zstd() -> _Members:
    try:
        from compression import zstd  # Python 3.14
    except ImportError:  # pragma: no cover - depends on the Python version
        from backports import zstd  # what mitmproxy installs before 3.14
    return _Members(zstd.ZstdDecompressor)


DECODERS: dict[str, Callable[[], object]] = {
    "gzip": lambda: _zlib(16 + zlib.MAX_WBITS),
    "x-gzip": lambda: _zlib(16 + zlib.MAX_WBITS),
    "deflate": _Deflate,
    "br": _Brotli,
    "zstd": _zstd,
}


def decoder_for(content_encoding: str | None):
    """A fresh incremental decoder, None for identity; KeyError for one we cannot decode."""
    enc = (content_encoding or "").strip().lower()
    if enc in ("", "identity"):
        return None
    return DECODERS[enc]()


# -- the driver ----------------------------------------------------------------------------
class StreamDriver:
    def __init__(self, rewriter: EventRewriter, decoder=None,
                 on_fail: Callable[[str], None] | None = None,
                 on_broken: Callable[[str], None] | None = None, parser=None) -> None:
        self.rewriter = rewriter
        self.decoder = decoder
        self.parser = parser if parser is not None else SSEParser()
        self.passthrough = False
        self.on_fail = on_fail
        self.failure: str | None = None
        self.on_broken = on_broken
        self.broken: str | None = None   # why a compressed stream stopped decoding part way
        self.ended = False               # the client's stream has had its end
        # The byte fast path, while it may apply: no Content-Encoding, not failed, not ended.
        on_chunk = getattr(rewriter, "on_chunk", None) if getattr(rewriter, "fast", False) else None
        self._on_chunk = on_chunk if decoder is None else None
        self._ready = False   # the byte path may take the next chunk: it has one, the parser is idle
        self.hot = None       # the C callable in front of this driver (`callable`), if any

    def callable(self):
        """What mitmproxy's `flow.response.stream` gets: this driver, or in front of it the C
        callable for steady token deltas (thinkwire.hot) where it is built and can apply."""
        if self._on_chunk is None or not hasattr(self.rewriter, "hot") or not hot.available():
            return self
        self.hot = hot.Hot(self)
        return self.hot

    def __call__(self, chunk: bytes) -> list[bytes]:
        h = self.hot
        if h is None:
            return self._step(chunk)
        # A chunk Hot did not take: fold in what it took since the last one, take this one,
        # then arm Hot for the state this leaves (or disarm it).
        try:
            if h.hits:
                self.rewriter.settle(h.take())   # type: ignore[attr-defined]
        except Exception as e:
            return self._fail_before(e, chunk)
        out = self._step(chunk)
        try:
            spec = self.rewriter.hot() if self._ready else None   # type: ignore[attr-defined]
            if spec is None:
                h.disarm()
            else:
                h.arm(*spec)
        except Exception as e:
            self._fail(f"{type(e).__name__}: {e}", out, [])
            return self._join(out)
        return out

    def settle(self) -> None:
        """Fold in what the C callable took since the last chunk it passed on (for the counts at
        the end of a flow that ended without its last chunk)."""
        h = self.hot
        if h is not None and h.hits and self.failure is None:
            try:
                self.rewriter.settle(h.take())   # type: ignore[attr-defined]
            except Exception:
                log.debug("thinkwire: settling the C callable's counts failed", exc_info=True)

    def _step(self, chunk: bytes) -> list[bytes]:
        if self._ready:
            try:
                got = self._on_chunk(chunk)   # type: ignore[misc]
            except Exception as e:
                return self._fail_before(e, chunk)
            if got is not None:   # (the parser saw nothing: it stays idle)
                return got if len(got) == 1 else self._join(got)
        out = self._rewrite(chunk)
        self._ready = self._on_chunk is not None and self.parser.idle()
        return out

    def _rewrite(self, chunk: bytes) -> list[bytes]:
        """The full path: decode, frame, rewrite each event."""
        if self.ended:  # after a compressed stream broke off: the rest is dropped
            return []
        final = chunk == b""
        out: list[bytes] = []
        try:
            data = self._decode(chunk, final)
        except Exception as e:  # undecodable from here: end the client's stream where it broke
            data, final = b"", True
            self._break(f"cannot decode the compressed stream ({type(e).__name__}: {e})")
        else:
            if final and self.decoder is not None and not self.decoder.ended():
                self._break("the compressed stream ended before its end marker")
        self.ended = final
        if final:
            self._on_chunk = None
        if self.passthrough:
            if data:
                out.append(data)
            return self._join(out)
        events = self.parser.feed(data) if data else []
        if final:
            events += self.parser.finish()
        late: list[bytes] = []
        for k, ev in enumerate(events):
            cut = None
            if not ev.complete:
                # The stream ended inside this event. The rewriter sees it terminated, so any
                # bytes of it that it reuses (a withheld start event) stay whole events.
                cut = ev.raw
                ev = replace(ev, raw=self.parser.terminated(cut, ev.eol), complete=True)
            try:
                got = self.rewriter.on_event(ev)
            except Exception as e:
                self._fail(f"{type(e).__name__}: {e}", out, [replace(ev, raw=cut)] if cut is not None else events[k:])
                return self._join(out)
            if cut is not None and got == [ev.raw]:
                got = [cut]
                # The stream ended inside this event and it passes as it came: it goes last, so
                # what the rewriter still holds is not glued onto its unterminated line.
                late = got
                continue
            out.extend(got)
        if final:
            try:
                out.extend(self.rewriter.finish())
            except Exception as e:
                self._fail(f"{type(e).__name__}: {e}", out, [])
            out.extend(late)
        return self._join(out)

    def _decode(self, chunk: bytes, final: bool) -> bytes:
        d = self.decoder
        if d is None:
            return chunk
        data = d.decompress(chunk) if chunk else b""
        if final:
            data += d.flush()
        return data

    def _break(self, reason: str) -> None:
        """One warning; the caller then ends the stream as if the upstream had ended there."""
        self.broken = reason
        log.warning("thinkwire: %s; the client gets what was decoded, then the end of the stream",
                    reason)
        if self.on_broken:
            self.on_broken(reason)

    def _fail_before(self, e: Exception, chunk: bytes) -> list[bytes]:
        """Fail open before any of `chunk` was taken: what the rewriter held, then the chunk."""
        out: list[bytes] = []
        self._fail(f"{type(e).__name__}: {e}", out, [])
        out.append(chunk)
        return self._join(out)

    def _fail(self, reason: str, out: list[bytes], unsent: list[Event]) -> None:
        """Fail open: what the rewriter held, then the original bytes from here on."""
        self.failure = reason
        self.passthrough = True
        self._on_chunk = None
        self._ready = False
        if self.hot is not None:
            self.hot.disarm()
        log.warning("thinkwire: stream rewrite failed, passing the rest through unchanged: %s",
                    reason, exc_info=log.isEnabledFor(logging.DEBUG))
        if self.on_fail:
            self.on_fail(reason)
        try:
            out.extend(self.rewriter.abort())
        except Exception:  # the held text is lost only if even this fails
            log.debug("thinkwire: abort failed too", exc_info=True)
        out.extend(ev.raw for ev in unsent)
        out.append(self.parser.pending())

    @staticmethod
    def _join(out: list[bytes]) -> list[bytes]:
        data = b"".join(out)
        return [data] if data else []
