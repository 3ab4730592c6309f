"""Ollama's native API through a real mitmdump, in front of a scripted Ollama (tests/support/ollama.py)."""

from __future__ import annotations

import json

import pytest

from harness import post
from support.ollama import NDJSON, StrictOllama

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
    assert ollama_up.bodies[-1]["messages"][1] == {
        "role": "assistant", "content": "<think>The user greets me.</think>Hello! How can I help?"}


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


def test_requests_that_need_no_capabilities_do_not_ask(proxy, ollama_up):
    post(f"{proxy.url}/api/chat", {"model": "plain", "messages": [{"role": "user", "content": "hi"}]})
    post(f"{proxy.url}/api/chat", {"model": "plain", "think": False, "messages": [{"role": "user", "content": "hi"}]})
    assert ollama_up.shows == [] and ollama_up.errors == []


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
