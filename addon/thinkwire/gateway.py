"""An upstream that fails a request before it answers (nothing listens any more, or it accepts
and then closes) gets the client an error in the shape of the API it called, like thinkwire's
other answers (thinkwire.errors), instead of mitmproxy's HTML "502 Bad Gateway" page, which an
SDK shows as a wall of markup or cannot parse.

mitmproxy 12 has no hook for this: `HttpStream.handle_protocol_error` runs the `error` hook and
then writes its own page (proxy/layers/http/__init__.py; _http1.make_error_response and _http2's
`format_error`), whatever the hook did. So that one method is wrapped, once: where it would send
the client that page for a flow thinkwire marked (`errors.SHAPED`, set in `requestheaders`) whose
request was read whole and whose response has not begun, the client gets thinkwire's answer as an
ordinary response instead. The
rest of what mitmproxy does there (the error hook, the flow's error, dropping the stream) is
unchanged. Mid-response failures (the upstream's headers already came) keep mitmproxy's way.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

from mitmproxy import http

from . import errors

log = logging.getLogger(__name__)

_WRAPPED = "_thinkwire_wrapped"   # set on the wrapper: installed once however often `load` runs


def answer(flow: http.HTTPFlow, detail: str, connect: bool) -> tuple[http.Response, str] | None:
    """thinkwire's response for an upstream's failure on `flow` and its message, or None to keep
    mitmproxy's page."""
    if not flow.metadata.get(errors.SHAPED) or flow.response is not None:
        return None
    message, code = errors.upstream_failed(flow, detail, connect)
    response = errors.response(flow, errors.UNREACHABLE, message, code)
    if flow.request.http_version.startswith("HTTP/1"):
        response.headers["connection"] = "close"   # as mitmproxy's page: the client starts afresh
    return response, message


def install() -> bool:
    """Wrap mitmproxy's HttpStream.handle_protocol_error (once); False when this mitmproxy's
    layer is not the one this was written for (then its own page stays)."""
    try:
        from mitmproxy.proxy.layers.http import HttpStream, SendHttp
        from mitmproxy.proxy.layers.http._events import (ErrorCode, RequestProtocolError, ResponseData,
                                                         ResponseEndOfMessage, ResponseHeaders,
                                                         ResponseProtocolError)
    except ImportError:   # pragma: no cover - another mitmproxy
        return False
    original = getattr(HttpStream, "handle_protocol_error", None)
    if original is None:   # pragma: no cover - another mitmproxy
        return False
    if getattr(original, _WRAPPED, False):
        return True
    upstream = {ErrorCode.CONNECT_FAILED: True, ErrorCode.GENERIC_SERVER_ERROR: False}

    def handle_protocol_error(self: HttpStream, event: RequestProtocolError | ResponseProtocolError
                              ) -> Generator[Any, Any, None]:
        connect = upstream.get(event.code) if isinstance(event, ResponseProtocolError) else None
        began = self.flow.response is not None
        commands = original(self, event)
        sent: Any = None
        while True:
            try:
                command = commands.send(sent)
            except StopIteration:
                return
            # (Only once the client's request was read whole: its connection then takes a response.)
            if connect is not None and not began and self.client_state == self.state_done \
                    and isinstance(command, SendHttp) and command.event is event \
                    and command.connection is self.context.client:
                got = _answer_safely(self.flow, event.message, connect)
                if got is not None:
                    self.flow.response = got
                    self.flow.metadata[errors.ANSWERED] = got.status_code
                    client = self.context.client
                    yield SendHttp(ResponseHeaders(self.stream_id, got, False), client)
                    yield SendHttp(ResponseData(self.stream_id, got.raw_content or b""), client)
                    yield SendHttp(ResponseEndOfMessage(self.stream_id), client)
                    sent = None
                    continue
            sent = yield command

    setattr(handle_protocol_error, _WRAPPED, True)
    handle_protocol_error.__wrapped__ = original   # type: ignore[attr-defined]
    HttpStream.handle_protocol_error = handle_protocol_error   # type: ignore[method-assign]
    return True


def _answer_safely(flow: http.HTTPFlow, detail: str, connect: bool) -> http.Response | None:
    """The answer, logged once; on a bug, None (mitmproxy's page: the client is still answered)."""
    try:
        got = answer(flow, detail, connect)
    except Exception as e:
        log.warning("thinkwire: the answer to a failed upstream raised %s; mitmproxy's page goes instead",
                    type(e).__name__, exc_info=log.isEnabledFor(logging.DEBUG))
        return None
    if got is None:
        return None
    response, message = got
    log.warning("%s %s: answered %d: %s", flow.request.method, flow.request.path.split("?", 1)[0],
                response.status_code, message.removeprefix("thinkwire: "))
    return response
