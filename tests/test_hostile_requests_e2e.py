"""Hostile requests through a real mitmdump (issue 33): what one client's request can make the
proxy spend is bounded (docs/budget.md, "Requests and clients"), counted here in the mitmdump
child's memory and CPU time, never in wall-clock time."""

from __future__ import annotations

import gzip
import threading

import brotli
import pytest

from harness import json_reply, post
from thinkwire.endpoints import HEALTH

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
MiB = 1 << 20


def _status(pid: int, field: str) -> int:
    """A /proc/PID/status figure in KiB (VmHWM: the peak resident set so far)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field}")


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used (work done, whatever the machine's load)."""
    import os
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def chat_reply(text: str = "hi") -> dict:
    return {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


@pytest.fixture(scope="module")
def hostile(proxy_factory):
    return proxy_factory()


def test_a_brotli_bomb_request_goes_upstream_unread_and_the_proxy_does_not_grow(hostile, up):
    """Finding 1: ~600 bytes of brotli that decode to 300 MiB made the proxy's RSS grow by
    ~900 MiB. A body is decoded only up to 32 MiB; past that it goes upstream byte-identical,
    unread, and the log says why."""
    body = (b'{"model":"m","messages":[{"role":"user","content":"' + b"a" * (300 * MiB) + b'"}]}')
    bomb = brotli.compress(body, quality=5)
    del body
    assert len(bomb) < 1000
    up.route(CHAT, json_reply(chat_reply()))
    before = _status(hostile.pid, "VmHWM")
    got = post(hostile.url + CHAT, raw=bomb, headers={"content-encoding": "br"})
    grown = (_status(hostile.pid, "VmHWM") - before) // 1024
    assert got.status == 200 and got.json()["choices"][0]["message"]["content"] == "hi"
    (seen,) = up.requests
    assert seen.body == bomb and seen.headers["content-encoding"] == "br"
    hostile.wait_for(r"thinkwire chat: request left unchanged \(its br body decodes to more than 32 MiB "
                     rf"\({len(bomb)} bytes sent\); it goes upstream unread\)", timeout=10)
    print(f"\nwork figure: a {len(bomb)}-byte brotli body decoding to 300 MiB: peak RSS +{grown} MiB")
    assert grown < 64, f"the proxy's peak RSS grew by {grown} MiB"


@pytest.mark.parametrize("encoding", ["gzip", "br"])
def test_a_request_body_cut_before_its_encoding_ends_goes_upstream_unread(hostile, up, encoding):
    """What decodes of a cut request body is a prefix: never read as the request (the same
    decoders and end check as a response body's); it goes upstream as the client sent it."""
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}' + b" " * 4096
    cut = {"gzip": gzip.compress, "br": brotli.compress}[encoding](body)[:-4]
    up.route(CHAT, json_reply(chat_reply()))
    got = post(hostile.url + CHAT, raw=cut, headers={"content-encoding": encoding})
    assert got.status == 200 and got.json()["choices"][0]["message"]["content"] == "hi"
    (seen,) = up.requests
    assert seen.body == cut and seen.headers["content-encoding"] == encoding
    hostile.wait_for(rf"thinkwire chat: request left unchanged \(its {encoding} body does not decode \(truncated\)\)",
                     timeout=10)


def test_a_40_kb_model_name_costs_no_time_on_the_event_loop(hostile, up):
    """Finding 2: a 20 KB model name stalled every flow ~7 s, 40 KB ~25 s (backtracking globs),
    reached from the request side too: a Messages thinking block with an empty signature goes to
    profile matching. Counted as the CPU time mitmdump spends on such flows (work, not a wait),
    while another client's flow and the health endpoint are answered."""
    name = "nemotron-nano-" * 3000   # 42,000 characters
    up.route(CHAT, json_reply(dict(chat_reply("<think>r</think>a"), model=name)))
    up.route(MESSAGES, json_reply({"id": "msg_1", "type": "message", "role": "assistant", "model": name,
                                   "content": [{"type": "text", "text": "<think>r</think>a"}],
                                   "stop_reason": "end_turn", "stop_sequence": None,
                                   "usage": {"input_tokens": 1, "output_tokens": 1}}))
    messages = {"model": name, "max_tokens": 10, "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": ""},
                                          {"type": "text", "text": "a"}]},
        {"role": "user", "content": "q2"}]}
    cpu = _cpu_seconds(hostile.pid)
    results = {}

    def hostile_flows():
        results["chat"] = post(hostile.url + CHAT, {"model": name, "messages": [{"role": "user", "content": "q"}]})
        results["messages"] = post(hostile.url + MESSAGES, messages)

    t = threading.Thread(target=hostile_flows)
    t.start()
    other = post(hostile.url + CHAT, {"model": "qwen3:8b", "messages": [{"role": "user", "content": "q"}]})
    health = post(hostile.url + HEALTH, method="GET")
    t.join(120)
    spent = _cpu_seconds(hostile.pid) - cpu
    assert other.status == 200 and health.status == 200
    assert results["chat"].json()["choices"][0]["message"]["reasoning_content"] == "r"
    assert results["messages"].json()["content"][0]["type"] == "thinking"
    print(f"\nwork figure: three flows, two with a 42,000-character model name: {spent:.2f} s of CPU")
    assert spent < 3, f"mitmdump spent {spent:.1f} s of CPU on three small flows"


def test_a_long_model_name_is_logged_by_its_first_80_characters(hostile, up):
    """Finding 12 (the request's half): model names of any length reached the log and the
    flow's comment. A name shows by its first 80 characters and its length."""
    name = "m" * 40_000
    up.route(CHAT, json_reply(dict(chat_reply("reasoning</think>answer"), model=name)))
    got = post(hostile.url + CHAT, {"model": name, "messages": [{"role": "user", "content": "q"}]})
    assert got.json()["choices"][0]["message"]["reasoning_content"] == "reasoning"
    line = hostile.wait_for(r"a closing tag with no opening tag was removed: if model .*", timeout=10).group(0)
    assert f"if model {'m' * 80!r}... (a name of more than 80 characters) opens its reasoning in the prompt" in line
    assert len(line) < 400 and "m" * 81 not in hostile.log()
