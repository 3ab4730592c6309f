"""The proxy's own endpoints through a real mitmdump: health and Prometheus metrics, answered in
reverse and regular mode alike, never forwarded; the metrics count what the flows did."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import Reply, json_reply, post, sse, sse_reply
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
    connection_strategy=lazy (deploy/, README "Running a fleet")."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"   # (closed again before the proxy starts)
    p = proxy_factory(options={"connection_strategy": "lazy"}, upstream_url=dead)
    assert post(p.url + HEALTH, method="GET").json()["status"] == "ok"
    assert post(p.url + CHAT, {"model": "m"}).status == 502


def test_regular_mode_answers_for_itself_and_for_any_host(up, tmp_path):
    p = ToolProcess([tool("mitmdump"), "--listen-host", "127.0.0.1", "--set", "listen_port=0",
                     "--set", f"confdir={tmp_path}", "-s", str(ADDON)], child_env({"THINK_SIGNING_KEY": KEY}))
    try:
        port = int(p.wait_for(LISTENING, timeout=30).group(1))
        own = post(f"http://127.0.0.1:{port}{HEALTH}", method="GET")   # origin form: to the proxy itself
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", f"{up.url}{METRICS}")   # absolute form, through the proxy to the upstream's host
        through = conn.getresponse()
        body = through.read().decode()
        conn.close()
    finally:
        p.stop()
    assert own.status == 200 and own.json()["key_id"] == key_id(KEY.encode())
    assert through.status == 200 and "thinkwire_open_streams" in body
    assert up.requests == []


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
@pytest.mark.parametrize("method,path,status", [
    ("GET", HEALTH, 200), ("HEAD", HEALTH, 200), ("GET", METRICS + "?x=1", 200), ("DELETE", HEALTH, 405),
    ("POST", METRICS, 405), ("GET", "/.well-known/thinkwire/", 404), ("GET", "/.well-known/thinkwire/health/x", 404)])
def test_every_request_under_the_prefix_is_answered_in_process(method, path, status):
    from mitmproxy.test import taddons, tflow, tutils
    from thinkwire.addon import ThinkWire
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = tflow.tflow(req=tutils.treq(method=method.encode(), path=path.encode(), content=b""))
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
            f = tflow.tflow(req=tutils.treq(method=b"GET", path=path.encode(), content=b""))
            tw.request(f)
            assert f.response is None
