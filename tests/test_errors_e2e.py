"""The two likeliest first mistakes, through a real mitmdump, answered in thinkwire's words in
the shape of the API the client called, so the official SDKs show the message:

- a base URL pointing at the forward proxy (regular mode): mitmproxy alone answers
  "502 Bad Gateway ... Request destination unknown";
- a reverse-mode upstream that is down: mitmproxy alone closes the client with no reply.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import urllib.error

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


def closed(upstream: str) -> str:
    return (f"thinkwire: the upstream {upstream} closed the connection before it answered (server closed "
            "connection). Check the server's own log: it may have stopped, crashed on this request, or be "
            "restarting")


def openai_error(message: str, code: str) -> dict:
    return {"message": message, "type": "server_error", "param": None, "code": code}


def what_each_sdk_sees(surface: str, url: str) -> tuple[int, object]:
    """(status, error body) the official client of `surface` raises for a request through `url`
    (no retries: the first answer is the one seen)."""
    if surface == "chat":
        with pytest.raises(openai.APIStatusError) as got:
            openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0).chat.completions.create(**CHAT)
    elif surface == "responses":
        with pytest.raises(openai.APIStatusError) as got:
            openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0).responses.create(model="m", input="hi")
    elif surface == "messages":
        with pytest.raises(anthropic.APIStatusError) as got_a:
            anthropic.Anthropic(base_url=url, api_key="x", max_retries=0).messages.create(max_tokens=10, **CHAT)
        return got_a.value.status_code, got_a.value.body
    else:
        import ollama
        with pytest.raises(ollama.ResponseError) as got_o:
            ollama.Client(host=url).chat(model="m", messages=[{"role": "user", "content": "hi"}])
        return got_o.value.status_code, got_o.value.error
    return got.value.status_code, got.value.body


def expected(surface: str, message: str, code: str) -> object:
    if surface == "messages":
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    if surface == "ollama":
        return message
    return openai_error(message, code)


SURFACES = ["chat", "responses", "messages", "ollama"]
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages",
         "ollama": "/api/chat"}


@pytest.mark.parametrize("surface", SURFACES)
def test_the_first_request_after_the_upstream_died_gets_the_api_s_error_not_mitmproxy_s_page(
        proxy_factory, surface):
    """The upstream was seen reachable (so no probe goes first), then stopped listening: the
    request that finds it gone gets thinkwire's 502 in its API's shape (mitmproxy alone: its HTML
    page), and so does the next (a probe answers it)."""
    up = Upstream()
    up.route("/v1/models", json_reply({"data": []}))
    upstream = up.url
    p = proxy_factory(upstream_url=upstream)
    try:
        assert post(p.url + "/v1/models", method="GET").status == 200   # seen reachable: no probe after
        up.close()
        why = f"[Errno 111] Connect call failed ('127.0.0.1', {up.port})"
        want = (502, expected(surface, unreachable(upstream, why), "thinkwire_upstream_unreachable"))
        assert what_each_sdk_sees(surface, p.url) == want
        p.wait_for(re.escape(f"] {unreachable(upstream, why)}"))
        p.wait_for(re.escape(f"POST {PATHS[surface]}: answered 502: {unreachable(upstream, why)[len('thinkwire: '):]}"))
        assert what_each_sdk_sees(surface, p.url) == want
    finally:
        p.stop()


def test_the_first_failing_request_answers_a_raw_client_with_json_and_closes(proxy_factory):
    up = Upstream()
    up.route("/v1/models", json_reply({"data": []}))
    p = proxy_factory(upstream_url=up.url)
    try:
        assert post(p.url + "/v1/models", method="GET").status == 200
        up.close()
        first = post(p.url + "/v1/chat/completions", CHAT)
        why = f"[Errno 111] Connect call failed ('127.0.0.1', {up.port})"
        assert (first.status, first.headers["content-type"], first.headers["connection"], first.json()) == (
            502, "application/json", "close", {"error": openai_error(unreachable(up.url, why),
                                                                     "thinkwire_upstream_unreachable")})
    finally:
        p.stop()


class Closer:
    """An upstream that accepts, reads the request, and closes without a word."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.served = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    got = conn.recv(65536)
                    if not got:
                        break
                    data += got
                if b"\r\n\r\n" in data:   # (a probe sends nothing: it is closed at once)
                    head, _, rest = data.partition(b"\r\n\r\n")
                    n = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1)) if b"ength:" in head else 0
                    while len(rest) < n:
                        got = conn.recv(65536)
                        if not got:
                            break
                        rest += got
                    self.served += 1

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def closer():
    c = Closer()
    yield c
    c.close()


def test_an_upstream_that_accepts_then_closes_gets_each_surface_the_api_s_error(proxy_factory, closer):
    p = proxy_factory(upstream_url=closer.url)
    try:
        for surface in SURFACES:
            got = what_each_sdk_sees(surface, p.url)
            assert got == (502, expected(surface, closed(closer.url), "thinkwire_upstream_failed")), surface
            p.wait_for(re.escape(f"POST {PATHS[surface]}: answered 502: {closed(closer.url)[len('thinkwire: '):]}"))
        assert closer.served >= len(SURFACES)
    finally:
        p.stop()


def test_a_path_of_no_api_through_the_forward_proxy_keeps_mitmproxy_s_page(proxy_factory, tmp_path, closer):
    """In regular mode only the API paths thinkwire knows are answered in their shape: another
    site's failure keeps mitmproxy's own page."""
    p = forward_proxy(tmp_path)
    try:
        import urllib.request
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{p.port}"}))
        with pytest.raises(urllib.error.HTTPError) as got:
            opener.open(closer.url + "/index.html", timeout=30)
        assert got.value.code == 502 and got.value.headers["content-type"] == "text/html"
        with pytest.raises(urllib.error.HTTPError) as got:
            opener.open(urllib.request.Request(closer.url + "/v1/chat/completions", data=b'{"model":"m"}',
                                               headers={"content-type": "application/json"}), timeout=30)
        assert (got.value.code, json.loads(got.value.read())) == (502, {"error": openai_error(
            f"thinkwire: the upstream {closer.url} closed the connection before it answered (server closed "
            "connection). Check the server's own log: it may have stopped, crashed on this request, or be "
            "restarting", "thinkwire_upstream_failed")})
    finally:
        p.stop()
