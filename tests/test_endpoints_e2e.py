"""The proxy's own endpoints through a real mitmdump: health and Prometheus metrics, answered in
reverse and regular mode alike, never forwarded; the metrics count what the flows did."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import Proxy, Reply, Upstream, json_reply, post, sse, sse_reply
from devtools.process import LISTENING, ToolProcess, child_env, tool
from harness import ADDON
from thinkwire import __version__
from thinkwire.endpoints import HEALTH, METRICS
from thinkwire.keys import key_id
from thinkwire.marks import Sealer
from thinkwire.rules import TagPair

pytestmark = pytest.mark.e2e

KEY = "endpoints e2e key, 32 bytes or more"
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


def chunk(delta: dict) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def message(text: str) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}


def scrape(url: str) -> dict:
    """thinkwire's samples: {(name, ((label, value), ...)): value}."""
    got = post(url + METRICS, method="GET")
    assert got.status == 200 and got.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    out = {}
    for fam in text_string_to_metric_families(got.content.decode()):
        for s in fam.samples:
            if s.name.startswith("thinkwire_"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def nonzero(samples: dict) -> dict:
    return {k: v for k, v in samples.items() if v}


@pytest.fixture(scope="module")
def keyed(proxy_factory):
    return proxy_factory(env={"THINK_SIGNING_KEY": KEY})


def test_health_answers_with_the_key_id_and_never_reaches_the_upstream(keyed, up):
    got = post(keyed.url + HEALTH, method="GET")
    assert (got.status, got.headers["content-type"]) == (200, "application/json")
    assert got.json() == {"status": "ok", "version": __version__, "key_id": key_id(KEY.encode())}
    assert post(keyed.url + HEALTH, method="HEAD").status == 200
    assert post(keyed.url + METRICS, method="POST", obj={}).status == 405
    missing = post(keyed.url + "/.well-known/thinkwire/nothing", method="GET")
    assert missing.status == 404 and missing.json() == {
        "error": f"no such endpoint: /.well-known/thinkwire/nothing; try {HEALTH} or {METRICS}"}
    assert up.requests == []


def test_health_answers_while_the_upstream_is_down_with_lazy_connections(proxy_factory):
    """With mitmproxy's default (eager) strategy a reverse proxy connects to the upstream as a
    client connects, so nothing is answered while the upstream is down; the fleet's commands set
    connection_strategy=lazy (deploy/, docs/operations.md)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"   # (closed again before the proxy starts)
    p = proxy_factory(options={"connection_strategy": "lazy"}, upstream_url=dead)
    assert post(p.url + HEALTH, method="GET").json()["status"] == "ok"
    assert post(p.url + CHAT, {"model": "m"}).status == 502


def regular_proxy(tmp_path, *args: str) -> tuple[ToolProcess, int]:
    p = ToolProcess([tool("mitmdump"), "--listen-host", "127.0.0.1", "--set", "listen_port=0",
                     "--set", f"confdir={tmp_path}", "-s", str(ADDON), *args], child_env({"THINK_SIGNING_KEY": KEY}))
    return p, int(p.wait_for(LISTENING, timeout=30).group(1))


def through(port: int, target: str, tunnel: tuple[str, int] | None = None) -> tuple[int, str]:
    """GET `target` through the forward proxy on `port` (absolute form; or, with `tunnel`, inside a
    CONNECT tunnel to that host, as a browser fetches an https:// page)."""
    if tunnel is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ssl._create_unverified_context())
        conn.set_tunnel(*tunnel)
    conn.request("GET", target)
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


def test_regular_mode_answers_for_itself_and_forwards_requests_for_other_hosts(up, tmp_path):
    """Finding 7 of issue 33: a forward proxy answered the endpoints for any host, so a page
    fetched through it read other users' traffic counts. Now only a request addressed to the
    proxy's own address is answered; one for another host goes on to that host."""
    up.route(METRICS, json_reply({"the upstream's": "metrics"}))
    p, port = regular_proxy(tmp_path)
    try:
        own = post(f"http://127.0.0.1:{port}{HEALTH}", method="GET")   # origin form: to the proxy itself
        absolute_own = through(port, f"http://127.0.0.1:{port}{METRICS}")
        by_name = through(port, f"http://localhost:{port}{HEALTH}")
        other = through(port, f"{up.url}{METRICS}")    # absolute form, for the upstream's host
    finally:
        p.stop()
    assert own.status == 200 and own.json()["key_id"] == key_id(KEY.encode())
    assert absolute_own[0] == 200 and "thinkwire_open_streams" in absolute_own[1]
    assert by_name[0] == 200 and json.loads(by_name[1])["status"] == "ok"
    assert other == (200, '{"the upstream\'s": "metrics"}')
    assert [(r.method, r.path) for r in up.requests] == [("GET", METRICS)]


def test_inside_an_intercepted_https_tunnel_the_endpoints_are_the_hosts(tmp_path):
    from test_env_e2e import HOST, self_signed
    cert, key = self_signed(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    tls_up = Upstream(HOST, ctx)
    tls_up.route(METRICS, json_reply({"the site's": "page"}))
    tls_up.route(HEALTH, json_reply({"the site's": "health"}))
    p, port = regular_proxy(tmp_path, "--set", "ssl_insecure=true")
    try:
        metrics = through(port, METRICS, tunnel=(HOST, tls_up.port))
        health = through(port, HEALTH, tunnel=(HOST, tls_up.port))
    finally:
        p.stop()
        tls_up.close()
    assert metrics == (200, '{"the site\'s": "page"}') and health == (200, '{"the site\'s": "health"}')
    assert [r.path for r in tls_up.requests] == [METRICS, HEALTH]


def test_with_a_metrics_port_metrics_are_answered_there_only(up, tmp_path):
    """A fleet exposes one port to clients (the Service, HAProxy) and lets Prometheus scrape
    another (deploy/kubernetes): think_metrics_port names it; health is answered on both."""
    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        client_port, metrics_port = a.getsockname()[1], b.getsockname()[1]
    p = Proxy(up.url, tmp_path, {"think_metrics_port": str(metrics_port)}, port=client_port,
              extra_args=["--mode", f"reverse:{up.url}@{metrics_port}"])
    try:
        clients = f"http://127.0.0.1:{client_port}"
        scrapes = f"http://127.0.0.1:{metrics_port}"
        hidden = post(clients + METRICS, method="GET")
        scraped = post(scrapes + METRICS, method="GET")
        healths = [post(u + HEALTH, method="GET").status for u in (clients, scrapes)]
    finally:
        p.stop()
    assert hidden.status == 404 and hidden.json() == {
        "error": f"no such endpoint: {METRICS}; try {HEALTH}"}
    assert scraped.status == 200 and "thinkwire_open_streams" in scraped.content.decode()
    assert healths == [200, 200] and up.requests == []


def test_metrics_count_what_each_flow_did(proxy_factory, up):
    p = proxy_factory(env={"THINK_SIGNING_KEY": KEY})
    surfaces = ("chat", "messages", "responses")
    assert nonzero(scrape(p.url)) == {("thinkwire_key_info", (("key_id", key_id(KEY.encode())), ("own", "false"),
                                                               ("previous_key_ids", ""), ("previous_keys", "0"))): 1}
    assert all(scrape(p.url)[("thinkwire_open_streams", (("surface", s),))] == 0 for s in surfaces)
    # A stream with reasoning moved; a body with none; a body that is not JSON; an encoding unknown.
    up.route(CHAT, sse_reply(sse(chunk({"role": "assistant", "content": "<think>abc"}),
                                 chunk({"content": "</think>hi"}), "[DONE]")))
    assert b'"reasoning_content":"abc"' in post(p.url + CHAT, {"model": "m", "stream": True}).content
    up.route(MESSAGES, json_reply(message("plain")))
    assert post(p.url + MESSAGES, {"model": "m", "messages": []}).json()["content"][0]["text"] == "plain"
    up.route(CHAT, Reply(200, {"content-type": "application/json"}, [b"<html>"], chunked=False))
    assert post(p.url + CHAT, {"model": "m"}).content == b"<html>"
    up.route(CHAT, sse_reply([b"data: x\n\n"], headers={"content-encoding": "compress"}))
    post(p.url + CHAT, {"model": "m", "stream": True})
    # The way back: one block sealed with this proxy's key, one with another's.
    pair = TagPair("<think>", "</think>")
    ours, theirs = Sealer(KEY.encode()).seal("mine", pair), Sealer(b"a stranger").seal("theirs", pair)
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": ours},
                                              {"type": "text", "text": "a"}]},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": theirs},
                                              {"type": "text", "text": "b"}]},
            {"role": "user", "content": "q3"}]
    up.route(MESSAGES, json_reply(message("ok")))
    post(p.url + MESSAGES, {"model": "m", "messages": msgs})
    assert json.loads(up.requests[-1].body)["messages"][1]["content"] == [{"type": "text", "text": "<think>mine</think>a"}]
    # A stream held open, then dropped by its client.
    up.route(CHAT, sse_reply(sse(*[chunk({"content": w}) for w in "abcdefghij"]), delay=0.3))
    conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
    conn.request("POST", CHAT, body=b'{"model": "m", "stream": true}', headers={"content-type": "application/json"})
    r = conn.getresponse()
    assert r.read1(65536).startswith(b"data: ")
    assert scrape(p.url)[("thinkwire_open_streams", (("surface", "chat"),))] == 1
    conn.close()
    deadline = time.monotonic() + 10
    while scrape(p.url)[("thinkwire_open_streams", (("surface", "chat"),))] and time.monotonic() < deadline:
        time.sleep(0.1)
    samples = scrape(p.url)
    assert nonzero(samples) == {
        ("thinkwire_key_info", (("key_id", key_id(KEY.encode())), ("own", "false"), ("previous_key_ids", ""),
                                ("previous_keys", "0"))): 1,
        ("thinkwire_flows_total", (("outcome", "rewritten"), ("surface", "chat"))): 1,
        ("thinkwire_flows_total", (("outcome", "fell_back"), ("surface", "chat"))): 2,
        ("thinkwire_flows_total", (("outcome", "unchanged"), ("surface", "chat"))): 1,   # the dropped stream
        ("thinkwire_flows_total", (("outcome", "unchanged"), ("surface", "messages"))): 2,
        ("thinkwire_fallbacks_total", (("reason", "invalid_body"), ("surface", "chat"))): 1,
        ("thinkwire_fallbacks_total", (("reason", "unsupported_encoding"), ("surface", "chat"))): 1,
        ("thinkwire_reasoning_blocks_total", (("surface", "chat"),)): 1,
        ("thinkwire_reasoning_chars_total", (("surface", "chat"),)): 3,
        ("thinkwire_restored_objects_total", (("surface", "messages"),)): 1,
        ("thinkwire_marks_refused_total", (("surface", "messages"),)): 1,
        ("thinkwire_streams_ended_early_total", (("surface", "chat"),)): 1,
    }
    # Every surface's series are there from the start, at zero (rate() needs them).
    assert all(("thinkwire_flows_total", (("outcome", o), ("surface", s))) in samples
               for s in surfaces for o in ("rewritten", "unchanged", "fell_back"))


def test_metrics_speak_openmetrics_when_asked(keyed):
    got = post(keyed.url + METRICS, method="GET", headers={"accept": "application/openmetrics-text; version=1.0.0"})
    assert got.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert got.content.endswith(b"# EOF\n") and b"\nthinkwire_open_streams{surface=\"chat\"} 0.0\n" in got.content


# -- in process: what answer() does with each request -----------------------------------------------
def to_the_proxy(f, sockname=("127.0.0.1", 8080)):
    """A test flow as a request to a forward proxy listening at `sockname`, for its own address."""
    f.client_conn.sockname = sockname
    f.request.host, f.request.port = sockname
    return f


@pytest.mark.parametrize("mode,host,port,answered", [
    ("regular", "127.0.0.1", 8080, True), ("regular", "localhost", 8080, True), ("regular", "LOCALHOST", 8080, True),
    ("regular", "127.0.0.1", 8081, False), ("regular", "127.0.0.2", 8080, False),
    ("regular", "evil.example", 8080, False),           # a name is that host's, whatever it resolves to
    ("regular", "::ffff:127.0.0.1", 8080, True), ("upstream:http://10.0.0.1:3128", "127.0.0.1", 8080, True),
    ("upstream:http://10.0.0.1:3128", "api.example", 443, False), ("socks5", "api.example", 443, False),
    ("reverse:http://model:8000", "model", 8000, True),  # reverse mode: every request is to the proxy
])
def test_which_requests_are_addressed_to_the_proxy(mode, host, port, answered):
    from mitmproxy.proxy.mode_specs import ProxyMode
    from mitmproxy.test import tflow, tutils
    from thinkwire.endpoints import answer
    f = tflow.tflow(req=tutils.treq(method=b"GET", path=HEALTH.encode(), content=b""))
    f.client_conn.proxy_mode = ProxyMode.parse(mode)
    f.client_conn.sockname = ("127.0.0.1", 8080)
    f.request.host, f.request.port = host, port
    assert answer(f, lambda: {"status": "ok"}, lambda accept: (b"", "text/plain")) is answered
    assert (f.response is not None) is answered


@pytest.mark.parametrize("value,port", [("", None), (" 9090 ", 9090), ("1", 1), ("65535", 65535)])
def test_the_metrics_port_option(value, port):
    from thinkwire.settings import Settings
    assert Settings.from_values({"think_metrics_port": value}).metrics_port == port


@pytest.mark.parametrize("value", ["0", "65536", "http", "-1", "90 90"])
def test_a_metrics_port_that_cannot_be_one_is_refused(value):
    from thinkwire.settings import SettingError, Settings
    with pytest.raises(SettingError) as e:
        Settings.from_values({"think_metrics_port": value})
    assert str(e.value) == (f"think_metrics_port (env THINK_METRICS_PORT) is {value!r}; use a port from 1 to "
                            "65535 the proxy also listens on (e.g. --mode reverse:URL@9090), or nothing to "
                            "answer metrics on every port")

@pytest.mark.parametrize("method,path,status", [
    ("GET", HEALTH, 200), ("HEAD", HEALTH, 200), ("GET", METRICS + "?x=1", 200), ("DELETE", HEALTH, 405),
    ("POST", METRICS, 405), ("GET", "/.well-known/thinkwire/", 404), ("GET", "/.well-known/thinkwire/health/x", 404)])
def test_every_request_under_the_prefix_is_answered_in_process(method, path, status):
    from mitmproxy.test import taddons, tflow, tutils
    from thinkwire.addon import ThinkWire
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = to_the_proxy(tflow.tflow(req=tutils.treq(method=method.encode(), path=path.encode(), content=b"")))
        tw.request(f)
    assert f.response is not None and f.response.status_code == status
    assert (f.response.content == b"") == (method == "HEAD")
    if status == 405:
        assert f.response.headers["allow"] == "GET, HEAD"


def test_other_paths_are_left_to_go_on():
    from mitmproxy.test import taddons, tflow, tutils
    from thinkwire.addon import ThinkWire
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        for path in ("/v1/chat/completions", "/.well-known/other", "/well-known/thinkwire/health"):
            f = to_the_proxy(tflow.tflow(req=tutils.treq(method=b"GET", path=path.encode(), content=b"")))
            tw.request(f)
            assert f.response is None
