"""thinkwire.gateway in process: which failures get the API's error shape, and how much of
mitmproxy's error text (which may quote the upstream's bytes) the answer carries."""

from __future__ import annotations

import json

from mitmproxy.test import tflow, tutils

from thinkwire import errors, gateway


def _flow(path: str = "/v1/chat/completions", shaped: bool = True):
    f = tflow.tflow(req=tutils.treq(method=b"POST", path=path.encode(), host="upstream.test", port=8000))
    f.response = None
    if shaped:
        f.metadata[errors.SHAPED] = True
    return f


def test_an_unmarked_flow_keeps_mitmproxy_s_page():
    assert gateway.answer(_flow(shaped=False), "server closed connection", False) is None


def test_a_flow_whose_response_began_keeps_mitmproxy_s_way():
    f = _flow()
    f.response = tutils.tresp()
    assert gateway.answer(f, "server closed connection", False) is None


def test_the_upstream_s_bytes_in_the_error_text_are_quoted_up_to_200_characters():
    detail = "unexpected server response: b'" + "x" * 10_000 + "'"
    response, message = gateway.answer(_flow(), detail, False)
    quoted = detail[:200] + "..."
    assert message == (f"thinkwire: the upstream http://upstream.test:8000 closed the connection before it answered "
                       f"({quoted}). Check the server's own log: it may have stopped, crashed on this request, or "
                       "be restarting")
    assert (response.status_code, response.headers["content-type"], response.headers["connection"]) == (
        502, "application/json", "close")
    assert json.loads(response.content) == {"error": {"message": message, "type": "server_error", "param": None,
                                                      "code": "thinkwire_upstream_failed"}}


def test_a_connect_failure_outside_reverse_mode_names_the_server():
    response, message = gateway.answer(_flow("/api/chat"), "[Errno 111] Connect call failed", True)
    assert message == "thinkwire: the server http://upstream.test:8000 cannot be reached ([Errno 111] Connect call failed)"
    assert json.loads(response.content) == {"error": message}


def test_install_wraps_mitmproxy_once():
    from mitmproxy.proxy.layers.http import HttpStream
    assert gateway.install() and gateway.install()
    assert HttpStream.handle_protocol_error.__wrapped__.__name__ == "handle_protocol_error"
    assert not hasattr(HttpStream.handle_protocol_error.__wrapped__, "__wrapped__")
