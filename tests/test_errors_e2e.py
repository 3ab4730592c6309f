"""The two likeliest first mistakes, through a real mitmdump, answered in thinkwire's words in
the shape of the API the client called, so the official SDKs show the message:

- a base URL pointing at the forward proxy (regular mode): mitmproxy alone answers
  "502 Bad Gateway ... Request destination unknown";
- a reverse-mode upstream that is down: mitmproxy alone closes the client with no reply.
"""

from __future__ import annotations

import re

import anthropic
import openai
import pytest

from harness import ADDON, Upstream, json_reply, post
from devtools.process import LISTENING, ToolProcess, child_env, tool

pytestmark = pytest.mark.e2e

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def forward_proxy(confdir) -> ToolProcess:
    p = ToolProcess([tool("mitmdump"), "--listen-host", "127.0.0.1", "--set", "listen_port=0",
                     "--set", f"confdir={confdir}", "-s", str(ADDON)], child_env())
    p.port = int(p.wait_for(LISTENING, timeout=30).group(1))
    return p


def misaddressed(url: str) -> str:
    return (f"thinkwire: POST {url} was sent to the proxy itself, which runs as a forward proxy (regular mode) "
            "and cannot tell which server to send it to. Either run thinkwire in front of your server, "
            "`thinkwire run --mode reverse:URL` (URL: the server's base, e.g. http://127.0.0.1:11434 or "
            "https://api.openai.com) and keep {here} as the client's base URL; or keep this proxy, set the "
            "client's base URL back to the server's and route it through the proxy with HTTPS_PROXY={here} "
            "(`eval \"$(thinkwire env)\"`)").replace("{here}", url.split("/v1")[0].split("/api")[0])


def unreachable(upstream: str, why: str) -> str:
    return (f"thinkwire: the upstream {upstream} cannot be reached ({why}). Check that the server runs and "
            "listens at that address (a local server: is it started, on that port?), and that --mode "
            "reverse:URL names it")


@pytest.fixture
def forward(tmp_path):
    p = forward_proxy(tmp_path)
    yield p
    p.stop()


def test_a_base_url_at_the_forward_proxy_gets_the_fix_in_each_sdk(forward):
    here = f"http://127.0.0.1:{forward.port}"
    with pytest.raises(openai.APIStatusError) as got:
        openai.OpenAI(base_url=here + "/v1", api_key="x", max_retries=0).chat.completions.create(**CHAT)
    assert got.value.status_code == 421
    assert got.value.body == {"message": misaddressed(here + "/v1/chat/completions"),
                              "type": "invalid_request_error", "param": None, "code": "thinkwire_misaddressed"}
    with pytest.raises(anthropic.APIStatusError) as got_a:
        anthropic.Anthropic(base_url=here, api_key="x", max_retries=0).messages.create(
            max_tokens=10, **CHAT)
    assert got_a.value.status_code == 421
    assert got_a.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                           "message": misaddressed(here + "/v1/messages")}}
    forward.stop()
    said = [line for line in forward.lines if "answered 421" in line]
    assert [re.sub(r"^\[[\d:.]+\] ", "", s) for s in said] == [
        f"POST /v1/chat/completions: answered 421: {misaddressed(here + '/v1/chat/completions')[len('thinkwire: '):]}",
        f"POST /v1/messages: answered 421: {misaddressed(here + '/v1/messages')[len('thinkwire: '):]}"]


def test_ollama_paths_get_ollama_s_error_shape_and_the_proxy_s_own_endpoints_still_answer(forward):
    here = f"http://localhost:{forward.port}"
    got = post(here + "/api/chat", {"model": "m", "messages": []})
    assert (got.status, got.json()) == (421, {"error": misaddressed(here + "/api/chat")})
    assert post(here + "/.well-known/thinkwire/health", method="GET").json()["status"] == "ok"


def test_the_forward_proxy_says_at_start_that_local_servers_bypass_it(forward):
    forward.stop()
    assert any(line.endswith(
        "thinkwire: clients that go through this proxy (HTTPS_PROXY, or `eval \"$(thinkwire env)\"`) get "
        "reasoning apart; local servers (localhost, 127.0.0.1) bypass it (NO_PROXY): in front of one, run "
        "`thinkwire run --mode reverse:http://127.0.0.1:PORT --listen-port 8081` and give clients "
        "http://127.0.0.1:8081 as their base URL") for line in forward.lines)


def _dead_port() -> int:
    up = Upstream()
    port = up.port
    up.close()
    return port


def test_an_upstream_that_is_down_gets_a_502_in_thinkwire_s_words(proxy_factory):
    port = _dead_port()
    upstream = f"http://127.0.0.1:{port}"
    p = proxy_factory(upstream_url=upstream)
    why = f"[Errno 111] Connect call failed ('127.0.0.1', {port})"
    with pytest.raises(openai.APIStatusError) as got:
        openai.OpenAI(base_url=p.url + "/v1", api_key="x", max_retries=0).chat.completions.create(**CHAT)
    assert got.value.status_code == 502
    assert got.value.body == {"message": unreachable(upstream, why), "type": "server_error", "param": None,
                              "code": "thinkwire_upstream_unreachable"}
    with pytest.raises(anthropic.APIStatusError) as got_a:
        anthropic.Anthropic(base_url=p.url, api_key="x", max_retries=0).messages.create(max_tokens=10, **CHAT)
    assert got_a.value.body == {"type": "error", "error": {"type": "api_error", "message": unreachable(upstream, why)}}
    p.wait_for(re.escape(f"POST /v1/messages: answered 502: {unreachable(upstream, why)[len('thinkwire: '):]}"))


def test_an_upstream_that_goes_down_while_running_is_said_in_the_log_then_answered(proxy_factory):
    up = Upstream()
    up.route("/v1/models", json_reply({"data": []}))
    upstream = up.url
    p = proxy_factory(upstream_url=upstream)
    assert post(p.url + "/v1/models", method="GET").status == 200   # seen reachable: no probe after
    up.close()
    why = f"[Errno 111] Connect call failed ('127.0.0.1', {up.port})"
    first = post(p.url + "/v1/chat/completions", CHAT)     # mitmproxy's own answer, and our log line
    assert first.status == 502
    p.wait_for(re.escape(f"] {unreachable(upstream, why)}"))
    then = post(p.url + "/v1/chat/completions", CHAT)
    assert (then.status, then.json()["error"]["message"]) == (502, unreachable(upstream, why))
