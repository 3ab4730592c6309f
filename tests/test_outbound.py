"""The proxy's own asks (thinkwire.outbound) against real local servers: the deadline, the caps,
no redirects, the upstream proxy (absolute form and CONNECT) and TLS verification."""

from __future__ import annotations

import asyncio
import ssl
import threading

import pytest

from harness import Reply, Upstream, json_reply
from support.tls import self_signed
from support.upstream_proxy import RecordingProxy
from thinkwire.capabilities import Capabilities
from thinkwire.outbound import Answer, Asker, Busy, Kept, Route, Server


def server_of(up: Upstream) -> Server:
    scheme, rest = up.url.split("://")
    host, port = rest.rsplit(":", 1)
    return Server(scheme, host, int(port))


@pytest.fixture
def stop():
    event = threading.Event()
    yield event
    event.set()


def test_an_answer_within_the_caps_is_read_whole_and_the_credentials_go_to_that_server(up):
    up.route("/api/show", json_reply({"capabilities": ["thinking"]}))
    got = asyncio.run(Asker().ask(server_of(up), "POST", "/api/show", b'{"model":"m"}', {"authorization": "Bearer k"}))
    assert got == Answer(200, b'{"capabilities": ["thinking"]}')
    seen = up.requests[0]
    assert (seen.method, seen.path, seen.body) == ("POST", "/api/show", b'{"model":"m"}')
    assert seen.headers["authorization"] == "Bearer k" and seen.headers["host"] == f"127.0.0.1:{up.port}"


def test_an_answer_past_the_body_cap_is_not_known(up):
    up.route("/big", Reply(200, {"content-type": "application/json"}, [b" " * 1000] * 5))
    asker = Asker(max_body=4096)
    assert asyncio.run(asker.ask(server_of(up), "GET", "/big")) is None
    assert asyncio.run(Asker(max_body=5000).ask(server_of(up), "GET", "/big")) == Answer(200, b" " * 5000)


def test_a_redirect_is_an_answer_and_is_not_followed(up):
    other = Upstream()
    try:
        up.route("/moved", Reply(307, {"location": f"{other.url}/x"}, [b"elsewhere"], chunked=False))
        got = asyncio.run(Asker().ask(server_of(up), "POST", "/moved", b"{}", {"authorization": "Bearer k"}))
        assert got == Answer(307, b"") and other.requests == []
    finally:
        other.close()


def test_the_deadline_ends_an_ask_that_trickles(up, stop):
    up.route("/slow", Reply(200, {}, [b"{"] + [b" "] * 600, delay=0.05, stop=stop))
    asker = Asker(deadline=0.3)
    assert asyncio.run(asker.ask(server_of(up), "GET", "/slow")) is None
    assert asker.pending == 0


def test_past_the_cap_on_asks_in_flight_an_ask_is_refused_at_once_and_not_kept(up, stop):
    up.route("/api/show", Reply(200, {}, [b'{"capabilities":["thinking"]}'], gate=stop, chunked=False))
    asker = Asker(deadline=30, max_pending=2)
    caps = Capabilities(asker)
    server = server_of(up)

    async def run():
        stalled = [asyncio.ensure_future(caps.native_thinking(server, "/api/chat", f"m{i}", "c", {}))
                   for i in range(2)]
        while asker.pending < 2:
            await asyncio.sleep(0.01)
        refused = await caps.native_thinking(server, "/api/chat", "m2", "c", {})
        state = (refused, asker.made, asker.refused, len(caps))
        stop.set()
        return state, await asyncio.gather(*stalled), await caps.native_thinking(server, "/api/chat", "m2", "c", {})
    state, stalled, later = asyncio.run(run())
    assert state == (None, 2, 1, 0)            # refused without an ask, and nothing kept for it
    assert stalled == [True, True] and later is True and asker.made == 3


def test_kept_keeps_answers_and_failures_for_their_own_while_and_is_bounded():
    now = [0.0]
    kept: Kept = Kept(ttl=100, failure_ttl=10, size=2, clock=lambda: now[0])
    calls = []

    def asking(value):
        async def ask():
            calls.append(value)
            return value
        return ask

    async def get(key, value):
        return await kept.get(key, asking(value))
    assert asyncio.run(get("a", None)) is None and asyncio.run(get("a", 1)) is None and calls == [None]
    now[0] = 11
    assert asyncio.run(get("a", 1)) == 1 and asyncio.run(get("a", 2)) == 1 and calls == [None, 1]
    asyncio.run(get("b", 1))
    asyncio.run(get("c", 1))
    assert len(kept) == 2 and kept.peek("a") is None   # the least recently used went

    async def busy():
        raise Busy("full")
    assert asyncio.run(kept.get("d", busy)) is None and kept.peek("d") is None and len(kept) == 2


def test_through_an_upstream_proxy_an_http_ask_goes_in_absolute_form_with_its_auth(up):
    up.route("/api/show", json_reply({"capabilities": []}))
    rec = RecordingProxy()
    try:
        route = Route(proxy=Server("http", "127.0.0.1", rec.port), proxy_auth=b"Basic dTpw")
        got = asyncio.run(Asker().ask(server_of(up), "POST", "/api/show", b"{}", {"authorization": "Bearer k"}, route))
        assert got == Answer(200, b'{"capabilities": []}')
        [(method, target, headers)] = rec.seen
        assert (method, target) == ("POST", f"{up.url}/api/show")
        assert headers["proxy-authorization"] == "Basic dTpw" and headers["authorization"] == "Bearer k"
        assert "proxy-authorization" not in up.requests[0].headers   # the proxy's, not the server's
    finally:
        rec.close()


@pytest.fixture(scope="module")
def tls_up(tmp_path_factory):
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    up = Upstream(tls=context)
    up.route("/api/show", json_reply({"capabilities": ["thinking"]}))
    yield up, str(cert)
    up.close()


@pytest.mark.parametrize("through_proxy", [False, True])
def test_https_is_verified_as_mitmproxy_verifies_it(tls_up, through_proxy):
    up, cert = tls_up
    rec = RecordingProxy()
    try:
        proxy = Server("http", "127.0.0.1", rec.port) if through_proxy else None

        def ask(**tls):
            return asyncio.run(Asker().ask(server_of(up), "POST", "/api/show", b"{}", {}, Route(proxy, None, **tls)))
        want = Answer(200, b'{"capabilities": ["thinking"]}')
        assert ask() is None                  # a certificate nothing trusts: not known
        assert ask(cafile=cert) == want       # ssl_verify_upstream_trusted_ca
        assert ask(insecure=True) == want     # ssl_insecure
        assert rec.targets("CONNECT") == ([f"127.0.0.1:{up.port}"] * 3 if through_proxy else [])
    finally:
        rec.close()


# -- who a client is, for what is kept per client (addon.client_key) ------------------------------
def client_keys(*flows_headers, mode: str = "regular", upstream_auth: str | None = None, peer="10.0.0.7"):
    from typing import Optional

    from mitmproxy.proxy import mode_specs
    from mitmproxy.test import taddons, tflow
    from thinkwire.addon import ThinkWire
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.options.add_option("upstream_auth", Optional[str], upstream_auth, "")
        keys = []
        for headers in flows_headers:
            f = tflow.tflow()
            f.client_conn.peername = (peer, 50000 + len(keys))
            f.client_conn.proxy_mode = mode_specs.ProxyMode.parse(mode)
            f.request.headers.clear()
            f.request.headers.update(headers)
            keys.append(tw.client_key(f))
        return keys


def test_clients_are_told_apart_by_their_credential_else_their_address():
    a, a_again, b, x_key, none = client_keys({"authorization": "Bearer a"}, {"Authorization": "Bearer a"},
                                             {"authorization": "Bearer b"}, {"x-api-key": "a"}, {})
    assert a == a_again and len({a, b, x_key, none}) == 4
    assert a.startswith("cred:") and len(a) == len("cred:") + 32 and "Bearer" not in a
    assert none == "addr:10.0.0.7"   # (not the port: each connection has its own)


def test_in_reverse_mode_with_upstream_auth_the_authorization_header_is_the_proxys_not_the_clients():
    a, b = client_keys({"authorization": "Basic cHJveHk6cHc="}, {"authorization": "Basic cHJveHk6cHc=",
                                                                  "x-api-key": "k"},
                       mode="reverse:http://127.0.0.1:1", upstream_auth="proxy:pw")
    assert a == "addr:10.0.0.7" and b.startswith("cred:")
