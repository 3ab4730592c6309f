"""Ollama's native API through a real mitmdump, in front of a scripted Ollama (tests/support/ollama.py)."""

from __future__ import annotations

import json
import threading

import pytest

from harness import Reply, Upstream, json_reply, post
from support.ollama import NDJSON, StrictOllama, error_reply
from support.upstream_proxy import RecordingProxy

pytestmark = pytest.mark.e2e

INLINE = "hf.co/bartowski/DeepSeek-R1-Distill-Qwen-7B-GGUF:Q4_K_M"   # writes <think> inline
NATIVE = "qwen3:8b"                                                 # Ollama splits it itself
ASKED = INLINE + "-asked"   # no other test asks the shared proxy about it: its /api/show count is this test's
TURNS = ["<think>\nThe user greets me.\n</think>\n\nHello! How can I help?",
         "<think>They want files & folders.</think>Run `ls`."]


@pytest.fixture
def ollama_up(up):
    strict = StrictOllama({INLINE: TURNS, ASKED: TURNS, NATIVE: TURNS, "plain": ["Hi."]}, native=(NATIVE,))
    for path in ("/api/chat", "/api/generate", "/api/show"):
        up.route(path, strict.handle)
    return strict


def lines(got) -> list[dict]:
    return [json.loads(x) for x in got.content.splitlines()]


def accumulated(objs: list[dict]) -> tuple[str, str]:
    holders = [o.get("message", o) for o in objs]
    return ("".join(h.get("thinking", "") for h in holders),
            "".join(h.get("content", h.get("response", "")) for h in holders))


def test_a_stream_shows_thinking_apart_and_keeps_the_final_line(proxy, ollama_up):
    got = post(f"{proxy.url}/api/chat", {"model": INLINE, "messages": [{"role": "user", "content": "hi"}]})
    assert got.status == 200 and got.headers["content-type"] == NDJSON
    objs = lines(got)
    assert accumulated(objs) == ("The user greets me.", "Hello! How can I help?")
    assert objs[-1]["done"] is True and objs[-1]["eval_count"] == 282 and objs[-1]["done_reason"] == "stop"


def test_a_body_and_a_generate_stream_too(proxy, ollama_up):
    body = post(f"{proxy.url}/api/chat", {"model": INLINE, "stream": False,
                                          "messages": [{"role": "user", "content": "hi"}]}).json()
    assert (body["message"]["thinking"], body["message"]["content"]) == ("The user greets me.", "Hello! How can I help?")
    gen = post(f"{proxy.url}/api/generate", {"model": INLINE, "prompt": "hi"})
    assert accumulated(lines(gen)) == ("The user greets me.", "Hello! How can I help?")


def test_think_true_for_a_model_without_native_thinking_gets_thinking_not_a_400(proxy, ollama_up):
    ask = {"model": ASKED, "think": True, "messages": [{"role": "user", "content": "hi"}]}
    got = post(f"{proxy.url}/api/chat", ask)
    assert got.status == 200 and accumulated(lines(got)) == ("The user greets me.", "Hello! How can I help?")
    assert "think" not in ollama_up.bodies[-1] and ollama_up.errors == []
    assert ollama_up.shows == [{"model": ASKED}]
    post(f"{proxy.url}/api/chat", dict(ask, messages=ask["messages"] + [
        {"role": "assistant", "content": "Hello! How can I help?", "thinking": "The user greets me."},
        {"role": "user", "content": "files?"}]))
    assert len(ollama_up.shows) == 1 and ollama_up.errors == []   # the answer was kept


def test_the_thinking_sent_back_reaches_the_upstream_inline_as_the_model_wrote_it(proxy, ollama_up):
    msgs = [{"role": "user", "content": "hi"}]
    first = lines(post(f"{proxy.url}/api/chat", {"model": INLINE, "messages": msgs}))
    thinking, content = accumulated(first)
    msgs += [{"role": "assistant", "content": content, "thinking": thinking}, {"role": "user", "content": "files?"}]
    second = post(f"{proxy.url}/api/chat", {"model": INLINE, "messages": msgs})
    assert accumulated(lines(second)) == ("They want files & folders.", "Run `ls`.")
    assert ollama_up.errors == []
    # Byte for byte: the proxy saw this output (thinkwire.written). The model wrote its own
    # `<think>`, so no second one goes in front for the profile's template (which opens it).
    assert ollama_up.bodies[-1]["messages"][1] == {"role": "assistant", "content": TURNS[0]}


def test_a_model_that_thinks_natively_passes_byte_for_byte_and_its_thinking_goes_back_untouched(proxy, up, ollama_up):
    ask = {"model": NATIVE, "think": "high", "messages": [{"role": "user", "content": "hi"}]}
    direct = post(f"{up.url}/api/chat", ask)
    via = post(f"{proxy.url}/api/chat", ask)
    assert via.content == direct.content and accumulated(lines(via))[0] == "The user greets me."
    back = dict(ask, messages=ask["messages"] + [
        {"role": "assistant", "content": "Hello! How can I help?", "thinking": "The user greets me."},
        {"role": "user", "content": "files?"}])
    assert post(f"{proxy.url}/api/chat", back).status == 200
    assert ollama_up.bodies[-1] == back and ollama_up.errors == []


def test_a_model_the_server_does_not_know_gets_its_request_and_error_as_they_came(proxy, ollama_up):
    ask = {"model": "missing:1b", "think": True, "messages": [{"role": "user", "content": "hi"}]}
    got = post(f"{proxy.url}/api/chat", ask)
    assert got.status == 404 and got.json() == {"error": "model 'missing:1b' not found"}
    assert ollama_up.bodies[-1] == ask


def test_requests_that_need_no_capabilities_ask_once_for_where_the_output_starts(proxy, ollama_up):
    """The way back needs no capabilities here, but where the output starts reads the same
    /api/show (its model_info, thinkwire.serverstart): one ask, kept for both."""
    post(f"{proxy.url}/api/chat", {"model": "plain", "messages": [{"role": "user", "content": "hi"}]})
    post(f"{proxy.url}/api/chat", {"model": "plain", "think": False, "messages": [{"role": "user", "content": "hi"}]})
    assert ollama_up.shows == [{"model": "plain"}] and ollama_up.errors == []


@pytest.fixture(scope="module")
def forward_proxy(tmp_path_factory):
    """mitmdump as a regular (forward) proxy: clients send absolute-form requests to it."""
    from devtools.process import LISTENING, ToolProcess, child_env, tool
    from harness import ADDON
    p = ToolProcess([tool("mitmdump"), "--listen-host", "127.0.0.1", "--set", "listen_port=0",
                     "--set", f"confdir={tmp_path_factory.mktemp('confdir')}", "-s", str(ADDON)], child_env())
    p.port = int(p.wait_for(LISTENING, timeout=30).group(1))
    yield p
    p.stop()


def test_regular_proxy_mode_rewrites_and_asks_the_server_the_flow_goes_to(forward_proxy, up, ollama_up):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", forward_proxy.port, timeout=20)
    body = json.dumps({"model": ASKED, "think": True, "messages": [{"role": "user", "content": "hi"}]})
    conn.request("POST", f"{up.url}/api/chat", body=body, headers={"content-type": "application/json"})
    r = conn.getresponse()
    objs = [json.loads(x) for x in r.read().splitlines()]
    conn.close()
    assert r.status == 200 and accumulated(objs) == ("The user greets me.", "Hello! How can I help?")
    assert ollama_up.shows == [{"model": ASKED}] and "think" not in ollama_up.bodies[-1]


# -- the /api/show ask, bounded (thinkwire.outbound) ----------------------------------------------
# A server that hangs, trickles, redirects or errors on /api/show: the chat request still goes, as
# when nothing is known (the request as it came, so Ollama's own 400 for `think` reaches the
# client), within the deadline; "not known" is kept briefly, so the next request does not ask again.
def asks_think(url: str, model: str, headers: dict | None = None):
    return post(f"{url}/api/chat", {"model": model, "think": True, "messages": [{"role": "user", "content": "hi"}]},
                headers=headers)


def not_known(got, model: str) -> bool:
    """The client got what Ollama answers to the request as it came: thinkwire knew nothing."""
    return got.status == 400 and got.json() == {"error": f'"{model}" does not support thinking'}


@pytest.fixture(scope="module")
def quick_asks(proxy_factory):
    """A proxy whose asks have a 1 s deadline."""
    return proxy_factory(options={"think_ask_timeout": "1"})


@pytest.fixture
def stop():
    """Set at the end of a test: scripted stalls drop their connection."""
    event = threading.Event()
    yield event
    event.set()


def scripted_show(strict: StrictOllama, reply: Reply, *models: str) -> None:
    for m in models:
        strict.models[m] = TURNS
    strict.show = lambda req: reply


def test_a_show_that_never_answers_is_not_known_at_the_deadline_and_not_asked_again(quick_asks, ollama_up, stop):
    scripted_show(ollama_up, Reply(200, {"content-type": "application/json"}, [b"{}"], gate=stop, chunked=False),
                  "hangs:1b")
    assert not_known(asks_think(quick_asks.url, "hangs:1b"), "hangs:1b")
    assert not_known(asks_think(quick_asks.url, "hangs:1b"), "hangs:1b")
    assert len(ollama_up.shows) == 1 and ollama_up.bodies[-1]["think"] is True


def test_a_show_that_trickles_is_not_known_at_the_deadline(quick_asks, ollama_up, stop):
    # A byte every 0.2 s for two minutes: each read is quick, the whole is not.
    trickle = Reply(200, {"content-type": "application/json"}, [b"{"] + [b" "] * 600, delay=0.2, stop=stop)
    scripted_show(ollama_up, trickle, "trickles:1b")
    assert not_known(asks_think(quick_asks.url, "trickles:1b"), "trickles:1b")
    assert not_known(asks_think(quick_asks.url, "trickles:1b"), "trickles:1b")
    assert len(ollama_up.shows) == 1


def test_a_show_that_redirects_is_not_followed_and_the_credentials_go_nowhere_else(quick_asks, up, ollama_up):
    other = Upstream()
    try:
        other.route("/api/show", json_reply({"capabilities": ["completion"]}))
        scripted_show(ollama_up, Reply(302, {"location": f"{other.url}/api/show"}, [b""], chunked=False),
                      "redirects:1b")
        secret = {"authorization": "Bearer sk-secret"}
        assert not_known(asks_think(quick_asks.url, "redirects:1b", secret), "redirects:1b")
        assert other.requests == []   # no request, so no Authorization, reached the other host
        shows = [r for r in up.requests if r.path == "/api/show"]
        assert [r.headers.get("authorization") for r in shows] == ["Bearer sk-secret"]
        assert not_known(asks_think(quick_asks.url, "redirects:1b", secret), "redirects:1b")
        assert len(ollama_up.shows) == 1 and other.requests == []
    finally:
        other.close()


def test_a_show_that_errors_is_not_known_and_not_asked_again_for_a_while(quick_asks, ollama_up):
    scripted_show(ollama_up, error_reply(500, "boom"), "errors:1b")
    assert not_known(asks_think(quick_asks.url, "errors:1b"), "errors:1b")
    assert not_known(asks_think(quick_asks.url, "errors:1b"), "errors:1b")
    assert len(ollama_up.shows) == 1


def absolute(port: int, target: str, obj: dict, headers: dict | None = None, timeout: float = 20):
    """A request to a forward proxy at `port` for `target` (absolute form): (status, body)."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", target, body=json.dumps(obj), headers={"content-type": "application/json",
                                                                     **(headers or {})})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def mitmdump(confdir, *args: str):
    from devtools.process import LISTENING, ToolProcess, child_env, tool
    from harness import ADDON
    p = ToolProcess([tool("mitmdump"), "--listen-host", "127.0.0.1", "--set", "listen_port=0",
                     "--set", f"confdir={confdir}", *args, "-s", str(ADDON)], child_env())
    p.port = int(p.wait_for(LISTENING, timeout=30).group(1))
    return p


def test_stalled_asks_do_not_stop_new_connections_to_named_hosts(tmp_path, up, ollama_up, stop):
    """Host names are looked up on asyncio's default thread pool (6 threads on 2 cores): asks that
    held its threads while a server trickled stopped every new connection to a named host."""
    n = 8
    trickle = Reply(200, {"content-type": "application/json"}, [b"{"] + [b" "] * 600, delay=0.2, stop=stop)
    models = [f"stall-{i}:1b" for i in range(n)]
    scripted_show(ollama_up, trickle, *models)
    p = mitmdump(tmp_path, "--set", "think_ask_timeout=60")
    try:
        done: list = []
        ask = {"think": True, "messages": [{"role": "user", "content": "hi"}]}
        threads = [threading.Thread(target=lambda m=m: done.append(
            absolute(p.port, f"{up.url}/api/chat", dict(ask, model=m), timeout=120))) for m in models]
        for t in threads:
            t.start()
        for _ in range(200):
            if len(ollama_up.shows) >= n:
                break
            threading.Event().wait(0.1)
        assert len(ollama_up.shows) == n    # all asked at once (none waits for a thread)
        # Meanwhile, a new connection to a named host (looked up on that pool).
        status, body = absolute(p.port, f"http://localhost:{up.port}/api/chat",
                                {"model": "plain", "stream": False, "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200 and json.loads(body)["message"]["content"] == "Hi."
        assert done == []    # all the asks were still stalled
        stop.set()
        for t in threads:
            t.join(60)
        assert sorted(d[0] for d in done) == [400] * n   # then each went as it came
    finally:
        stop.set()
        p.stop()


def test_in_upstream_mode_the_ask_goes_through_the_upstream_proxy(tmp_path, up, ollama_up):
    rec = RecordingProxy()
    p = mitmdump(tmp_path, "--mode", f"upstream:{rec.url}")
    try:
        ask = {"model": ASKED, "think": True, "messages": [{"role": "user", "content": "hi"}]}
        status, body = absolute(p.port, f"{up.url}/api/chat", ask, {"authorization": "Bearer sk-up"})
        objs = [json.loads(x) for x in body.splitlines()]
        assert status == 200 and accumulated(objs) == ("The user greets me.", "Hello! How can I help?")
        assert rec.targets("POST") == [f"{up.url}/api/show", f"{up.url}/api/chat"]
        show = next(h for m, t, h in rec.seen if t.endswith("/api/show"))
        assert show["authorization"] == "Bearer sk-up"
        assert ollama_up.shows == [{"model": ASKED}] and "think" not in ollama_up.bodies[-1]
    finally:
        p.stop()
        rec.close()


def test_in_upstream_mode_an_https_ask_tunnels_through_the_upstream_proxy_verified_as_mitmproxy_verifies(tmp_path):
    import http.client
    import ssl
    from support.tls import self_signed
    cert, key = self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    up = Upstream(tls=server_tls)
    strict = StrictOllama({ASKED: TURNS})
    for path in ("/api/chat", "/api/show"):
        up.route(path, strict.handle)
    rec = RecordingProxy()
    p = mitmdump(tmp_path / "conf", "--mode", f"upstream:{rec.url}", "--set", f"ssl_verify_upstream_trusted_ca={cert}")
    try:
        conn = http.client.HTTPSConnection("127.0.0.1", p.port, timeout=20, context=ssl._create_unverified_context())
        conn.set_tunnel("127.0.0.1", up.port)   # (the client trusts the proxy's interception)
        conn.request("POST", "/api/chat", body=json.dumps({"model": ASKED, "think": True, "messages": [
            {"role": "user", "content": "hi"}]}), headers={"content-type": "application/json"})
        r = conn.getresponse()
        objs = [json.loads(x) for x in r.read().splitlines()]
        conn.close()
        assert r.status == 200 and accumulated(objs) == ("The user greets me.", "Hello! How can I help?")
        assert rec.targets("CONNECT") == [f"127.0.0.1:{up.port}"] * 2   # the flow's tunnel and the ask's
        assert strict.shows == [{"model": ASKED}] and "think" not in strict.bodies[-1]
    finally:
        p.stop()
        rec.close()
        up.close()
