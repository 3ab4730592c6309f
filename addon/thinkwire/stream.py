"""Drive a surface's event rewriter over raw stream bytes, and fail open.

`StreamDriver` is the callable mitmproxy's `flow.response.stream` gets: bytes in, a list of
bytes out, `b""` once at the end. It decodes Content-Encoding incrementally (at most
decoding.READ_MAX bytes a read), frames events (SSE, or NDJSON lines: the parser it is given,
which holds one event up to sse.EVENT_MAX), hands them to the surface, and never raises: on an
error of the rewrite, or at an event too long to hold, it sends what the surface still held,
then the original bytes from that point on (fail open). Where the surface had moved block or
item numbers (its `translating`), those bytes are the upstream's events with the client's
numbers (its `translate`, and `translated_head` for an event too long to parse), so the
client's SDK still reads one valid message. One WARNING a flow, with a fixed reason.

A compressed stream that stops decoding part way (corrupt, cut before its end marker, or a read
that decodes past the cap) is not failed open: its Content-Encoding header is already gone, so the rest would reach the
client as compressed bytes. The client gets what decoded, rewritten as usual, then a clean end
of stream (the surface's held text flushed); the rest of the upstream's bytes are dropped.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from . import hot
from .decoding import DECODERS, READ_MAX, Decoder, TooLarge, decoder_for  # noqa: F401  (decoder_for: the addon's)
from .events import HEAD, Event
from .ndjson import NDJSONParser
from .sse import EVENT_MAX, SSEParser

if TYPE_CHECKING:
    from ._hot import Hot

Parser = SSEParser | NDJSONParser   # what frames a stream's events

log = logging.getLogger(__name__)

_TOO_LONG = f"an event longer than {EVENT_MAX >> 20} MiB"


def _raised(e: BaseException) -> str:
    """Why a rewrite failed, for the log and the flow's comment: a cap's fixed `reason`, else the
    exception's type only (its text may quote the body)."""
    reason = getattr(e, "reason", None)
    return reason if isinstance(reason, str) else f"the rewrite raised {type(e).__name__}"


class EventRewriter(Protocol):
    def on_event(self, ev: Event) -> list[bytes]: ...
    def finish(self) -> list[bytes]: ...
    def abort(self) -> list[bytes]: ...


class FastRewriter(EventRewriter, Protocol):
    """Optional, the byte fast path (thinkwire.fastpath), used only when `fast` is true:
    `on_chunk` is called with a chunk that starts where an event starts (the parser holds
    nothing). Its output as the full path would give it (one whole event; or any bytes, once the
    rewriter passes everything as it came), or None (nothing changed) for the full path to decide."""

    fast: bool

    def on_chunk(self, chunk: bytes) -> list[bytes] | None: ...


@runtime_checkable
class HotRewriter(Protocol):
    """Optional, the C callable (thinkwire.hot): `hot` gives what `Hot.arm` takes for the
    rewriter's state now, or None (disarm); `settle` folds in what Hot took (`Hot.take`)."""

    def hot(self) -> tuple[Any, ...] | None: ...
    def settle(self, got: tuple[int, int, bytes | None, int, int]) -> None: ...


@runtime_checkable
class Translator(Protocol):
    """Optional, after failing open (see the module docstring): `translating` (set by abort),
    `translate(ev)`, and `renumbered(fields)`: the fields the client has otherwise."""

    translating: bool

    def translate(self, ev: Event) -> list[bytes]: ...
    def renumbered(self, fields: dict[str, Any]) -> dict[str, Any]: ...


# -- the start of a long event, after failing open ---------------------------------------------
_OPEN = re.compile(rb"(?:event:[^\r\n]*(?:\r\n|\r|\n))?(?:data: ?)?[ \t]*\{")
_FIELD = re.compile(rb'\s*"([A-Za-z_]+)"\s*:\s*(-?[0-9]+|"[^"\\\x00-\x1f]*")\s*,')


def translated_head(raw: bytes, renumbered: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    """The first piece of an event too long to parse, with the top-level numbers and ids before
    its first long value (`"type":...,"index":1,` or `..."output_index":0,"content_index":0,`)
    set to what `renumbered(those fields)` gives; the rest as it came."""
    m = _OPEN.match(raw)
    if m is None:
        return raw
    pos = m.end()
    spans: list[tuple[str, int, int]] = []
    fields: dict[str, Any] = {}
    while (f := _FIELD.match(raw, pos)) is not None:
        key = f.group(1).decode()
        fields[key] = json.loads(f.group(2))
        spans.append((key, f.start(2), f.end(2)))
        pos = f.end()
    new = renumbered(fields) if fields else {}
    if not new:
        return raw
    out: list[bytes] = []
    last = 0
    for key, a, b in spans:
        if key in new:
            out += (raw[last:a], json.dumps(new[key]).encode())
            last = b
    return b"".join(out) + raw[last:]


# -- the driver ----------------------------------------------------------------------------
class StreamDriver:
    def __init__(self, rewriter: EventRewriter, decoder: Decoder | None = None,
                 on_fail: Callable[[str], None] | None = None,
                 on_broken: Callable[[str], None] | None = None, parser: Parser | None = None) -> None:
        self.rewriter = rewriter
        self.decoder = decoder
        self.parser: Parser = parser if parser is not None else SSEParser(EVENT_MAX)
        self.passthrough = False
        self.on_fail = on_fail
        self.failure: str | None = None
        self.on_broken = on_broken
        self.broken: str | None = None   # why a compressed stream stopped decoding part way
        self.ended = False               # the client's stream has had its end
        self.translating = False         # failed open, numbers still moved (see _fail)
        # The byte fast path, while it may apply: not failed, not ended. On a chunk as it came
        # (`_on_chunk`: no Content-Encoding), and on each whole event the parser frames
        # (`_on_event_bytes`: a chunk that holds several events or part of one, decoded bytes).
        on_chunk = getattr(rewriter, "on_chunk", None) if getattr(rewriter, "fast", False) else None
        self._on_event_bytes: Callable[[bytes], list[bytes] | None] | None = on_chunk
        self._on_chunk: Callable[[bytes], list[bytes] | None] | None = on_chunk if decoder is None else None
        self._ready = False   # the byte path may take the next chunk: it has one, the parser is idle
        self.hot: Hot | None = None   # the C callable in front of this driver (`callable`), if any
        self._hot_rewriter: HotRewriter | None = None   # the rewriter, when it is
        self._translator: Translator | None = None      # the rewriter, when translating

    def callable(self) -> Callable[[bytes], list[bytes]]:
        """What mitmproxy's `flow.response.stream` gets: this driver, or in front of it the C
        callable for steady token deltas (thinkwire.hot) where it is built and can apply."""
        rw, built = self.rewriter, hot.Hot
        if self._on_chunk is None or not isinstance(rw, HotRewriter) or built is None or not hot.available():
            return self
        self._hot_rewriter = rw
        self.hot = built(self)
        return self.hot

    def __call__(self, chunk: bytes) -> list[bytes]:
        h, rw = self.hot, self._hot_rewriter
        if h is None or rw is None:
            return self._step(chunk)
        # A chunk Hot did not take: fold in what it took since the last one, take this one,
        # then arm Hot for the state this leaves (or disarm it).
        try:
            if h.hits:
                rw.settle(h.take())
        except Exception as e:
            return self._fail_before(e, chunk)
        out = self._step(chunk)
        try:
            spec = rw.hot() if self._ready else None
            if spec is None:
                h.disarm()
            else:
                h.arm(*spec)
        except Exception as e:
            self._fail(_raised(e), out, [])
            return self._join(out)
        return out

    def settle(self) -> None:
        """Fold in what the C callable took since the last chunk it passed on (for the counts at
        the end of a flow that ended without its last chunk)."""
        h, rw = self.hot, self._hot_rewriter
        if h is not None and rw is not None and h.hits and self.failure is None:
            try:
                rw.settle(h.take())
            except Exception:
                log.debug("thinkwire: settling the C callable's counts failed", exc_info=True)

    def _step(self, chunk: bytes) -> list[bytes]:
        on_chunk = self._on_chunk
        if self._ready and on_chunk is not None and len(chunk) <= EVENT_MAX:   # (a longer chunk is framed, and capped)
            try:
                got = on_chunk(chunk)
            except Exception as e:
                return self._fail_before(e, chunk)
            if got is not None:   # (the parser saw nothing: it stays idle)
                return got if len(got) == 1 else self._join(got)
            out = self._rewrite(chunk, tried=chunk)
        else:
            out = self._rewrite(chunk)
        self._ready = self._on_chunk is not None and self.parser.idle()
        return out

    def _rewrite(self, chunk: bytes, tried: bytes | None = None) -> list[bytes]:
        """The full path: decode, frame, rewrite each event (a whole event first by the byte
        path, unless it is `tried`, the chunk the byte path already declined)."""
        if self.ended:  # after a compressed stream broke off: the rest is dropped
            return []
        final = chunk == b""
        out: list[bytes] = []
        try:
            data = self._decode(chunk, final)
        except TooLarge as e:   # a decompression bomb: what the cap let through, then the end
            data, final = e.head, True
            self._break(f"one read decoded to more than {READ_MAX >> 20} MiB")
        except Exception as e:  # undecodable from here: end the client's stream where it broke
            data, final = b"", True
            self._break(f"cannot decode the compressed stream ({type(e).__name__})")
        else:
            if final and self.decoder is not None and not self.decoder.ended():
                self._break("the compressed stream ended before its end marker")
        self.ended = final
        if final:
            self._on_chunk = None
        by_bytes = self._on_event_bytes
        if self.passthrough and not self.translating:
            if data:
                out.append(data)
            return self._join(out)
        events = self.parser.feed(data) if data else []
        if final:
            events += self.parser.finish()
        late: list[bytes] = []
        for k, ev in enumerate(events):
            if self.passthrough:   # failed open, translating
                out.extend(self._translate(ev))
                continue
            if ev.long:   # an event too long to hold: from here on, the rest as it comes
                self._fail(_TOO_LONG, out, events[k:])
                break
            cut = None
            if not ev.complete:
                # The stream ended inside this event. The rewriter sees it terminated, so any
                # bytes of it that it reuses (a withheld start event) stay whole events.
                cut = ev.raw
                ev = replace(ev, raw=self.parser.terminated(cut, ev.eol), complete=True)
            try:
                got = None
                if by_bytes is not None and cut is None and ev.raw != tried:
                    got = by_bytes(ev.raw)
                if got is None:
                    got = self.rewriter.on_event(ev)
            except Exception as e:
                self._fail(_raised(e), out, [replace(ev, raw=cut)] if cut is not None else events[k:])
                break
            if cut is not None and got == [ev.raw]:
                got = [cut]
                # The stream ended inside this event and it passes as it came: it goes last, so
                # what the rewriter still holds is not glued onto its unterminated line.
                late = got
                continue
            out.extend(got)
        if final and not self.passthrough:
            try:
                out.extend(self.rewriter.finish())
            except Exception as e:
                self._fail(_raised(e), out, [])
        out.extend(late)
        return self._join(out)

    def _translate(self, ev: Event) -> list[bytes]:
        """An event after failing open, on a stream whose block or item numbers moved: the
        rewriter moves it onto the numbers the client has (thinkwire.surfaces: `translate`)."""
        try:
            tr = self._translator
            assert tr is not None   # (set with `translating`)
            if ev.long:   # its start, moved by the numbers before its first long value
                return [translated_head(ev.raw, tr.renumbered) if ev.long == HEAD else ev.raw]
            return tr.translate(ev)
        except Exception:   # even that failed: the rest as it came
            log.debug("thinkwire: translating after failing open failed", exc_info=True)
            self.translating = False
            return [ev.raw, self.parser.pending()]

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
        self._fail(_raised(e), out, [])
        out.extend(self._rewrite(chunk))
        return self._join(out)

    def _fail(self, reason: str, out: list[bytes], unsent: list[Event]) -> None:
        """Fail open: what the rewriter held, then the original bytes from here on; on a stream
        whose numbers moved, the events from here on with the client's numbers (`_translate`).
        One warning a flow, without any of the body's text (`reason` is a fixed text)."""
        self.failure = reason
        self.passthrough = True
        self._on_chunk = self._on_event_bytes = None
        self._ready = False
        if self.hot is not None:
            self.hot.disarm()
        log.warning("thinkwire: stream rewrite failed, passing the rest through unchanged: %s",
                    reason)
        if sys.exc_info()[1] is not None:
            log.debug("thinkwire: the failure", exc_info=True)
        if self.on_fail:
            self.on_fail(reason)
        try:
            out.extend(self.rewriter.abort())
        except Exception:  # the held text is lost only if even this fails
            log.debug("thinkwire: abort failed too", exc_info=True)
        rw = self.rewriter
        self._translator = rw if isinstance(rw, Translator) and rw.translating else None
        self.translating = self._translator is not None
        if self.translating:
            for ev in unsent:
                out.extend(self._translate(ev))
            return
        out.extend(ev.raw for ev in unsent)
        out.append(self.parser.pending())

    @staticmethod
    def _join(out: list[bytes]) -> list[bytes]:
        data = b"".join(out)
        return [data] if data else []
