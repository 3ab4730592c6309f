"""Keeping bodies for inspection: what the client got, and what the upstream sent.

mitmproxy does not store streamed bodies (mitmweb shows "Content is missing."), and a body the
addon rewrote replaces the upstream's. For the flows thinkwire rewrites, and only when the user
asked to keep flows, this module keeps:

- the streamed body as the client got it, as the response's content (mitmproxy's own
  `store_streamed_bodies` already does that when it is on; then it is left as it is);
- the body as the upstream sent it (Content-Encoding removed), as text in
  `flow.metadata["thinkwire_upstream"]` = {"text": ..., "content_type": ...}, or
  {"same": true} when the rewrite changed nothing. The "thinkwire upstream" content view shows it.

"Asked to keep flows" means any of: the `store_streamed_bodies` option is on; flows are being
saved (`-w` / `save_stream_file`); the proxy runs under mitmweb or the mitmproxy console (they
keep every flow in memory anyway). Plain `mitmdump` keeps nothing, so a long stream costs no
memory. A stream larger than KEEP_LIMIT is not kept.
"""

from __future__ import annotations

from typing import Callable

from mitmproxy import http
from mitmproxy.optmanager import OptManager

from .decoding import BodyError, decode_body
from .record import UPSTREAM_KEY

KEEP_LIMIT = 64 * 1024 * 1024   # bytes, upstream and client copies together, per flow


def wanted(options: OptManager) -> bool:
    """Whether the user asked mitmproxy to keep flows (see the module docstring)."""
    if getattr(options, "store_streamed_bodies", False) or getattr(options, "save_stream_file", None):
        return True
    return "web_port" in options or "console_layout" in options   # mitmweb, mitmproxy console


class Recorder:
    """Wraps a stream callable and keeps what went into it and what came out."""

    __slots__ = ("inner", "content_encoding", "upstream", "sent", "over")

    def __init__(self, inner: Callable[[bytes], list[bytes]], content_encoding: str | None) -> None:
        self.inner = inner
        self.content_encoding = content_encoding
        self.upstream = bytearray()
        self.sent = bytearray()
        self.over = False

    def __call__(self, chunk: bytes) -> list[bytes]:
        out = self.inner(chunk)
        if not self.over:
            self.upstream += chunk
            for piece in out:
                self.sent += piece
            if len(self.upstream) + len(self.sent) > KEEP_LIMIT:
                self.over = True
                self.upstream = bytearray()
                self.sent = bytearray()
        return out


def settle(flow: http.HTTPFlow, stream: object) -> None:
    """After a streamed response: show the client's body, keep the upstream's."""
    if not isinstance(stream, Recorder) or flow.response is None:
        return
    if stream.over:
        flow.metadata[UPSTREAM_KEY] = {"note": f"not kept: larger than {KEEP_LIMIT} bytes"}
        return
    sent = bytes(stream.sent)
    if flow.response.raw_content is None:
        flow.response.raw_content = sent
    original = bytes(stream.upstream)
    if stream.content_encoding:
        # Decoded with the cap the two copies share (a few hundred bytes of brotli can decode to
        # gigabytes), as far as it decodes: a stream that broke off is shown as the client got it.
        try:
            decoded = decode_body(original, stream.content_encoding, KEEP_LIMIT - len(sent), partial=True)
        except BodyError:
            decoded = original   # shown as it came
        if decoded is None:
            flow.metadata[UPSTREAM_KEY] = {"note": f"not kept: larger than {KEEP_LIMIT} bytes decoded"}
            return
        original = decoded
    _keep(flow, original, sent)


def keep_upstream(flow: http.HTTPFlow, original: bytes, new: bytes | None) -> None:
    """After a whole body was rewritten (new is None when nothing changed)."""
    _keep(flow, original, original if new is None else new)


def _keep(flow: http.HTTPFlow, original: bytes, sent: bytes) -> None:
    if original == sent:
        flow.metadata[UPSTREAM_KEY] = {"same": True}
        return
    flow.metadata[UPSTREAM_KEY] = {
        "text": original.decode("utf-8", "replace"),
        "content_type": (flow.response.headers.get("content-type", "") if flow.response else "")
        .split(";", 1)[0].strip().lower(),
    }
