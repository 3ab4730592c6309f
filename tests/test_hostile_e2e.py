"""A hostile upstream, end to end: a real mitmdump with thinkwire in front of an upstream that sends
decompression bombs, endless lines, reasoning that never ends, and events that make the rewrite
fail after it renumbered blocks. Each case measures the mitmdump child's peak memory (VmHWM, reset
before each case) against the bound docs/budget.md writes down, checks what the client (the
official SDK where one reads the stream) got, and that the next flow still gets through.

Sizes are kept small enough for CI (a few seconds a case); the bounds hold at any size because
what the proxy holds is capped, not proportional to what the upstream sends.
"""

from __future__ import annotations

import gzip
import http.client
import json
from pathlib import Path

import anthropic
import brotli
import openai
import pytest

from harness import Reply, rechunk, sse_reply
from support.messages import sse_event, stream_objs, text
from support.responses import msg, stream_of

pytestmark = pytest.mark.e2e

MiB = 1 << 20
# What one hostile flow may add to the proxy's peak memory (docs/budget.md, "Upstream responses").
FLOW_BOUND = 64 * MiB


@pytest.fixture(scope="module")
def proxy(proxy_factory):
    return proxy_factory(env={"THINK_SIGNING_KEY": "hostile e2e key, 32 bytes or more, for the test"})


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


class Peak:
    """The proxy's peak RSS over a block, above its RSS before it (VmHWM reset first)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> "Peak":
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")   # resets VmHWM to the current RSS
        self.before = _status(self.pid, "VmRSS")
        return self

    def __exit__(self, *exc) -> None:
        self.grew = _status(self.pid, "VmHWM") - self.before
        print(f"\nhostile figure: peak RSS growth {self.grew / MiB:.1f} MiB")   # (run with -s)


def post(proxy, path: str, body: dict, timeout: float = 60) -> tuple[int, dict, bytes]:
    """POST through the proxy; (status, headers, the body bytes as they came: not decoded)."""
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json",
                                                                    "accept-encoding": "identity"})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def chat_chunk(content: str) -> bytes:
    return b"data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [
        {"index": 0, "delta": {"content": content}, "finish_reason": None}]}).encode() + b"\n\n"


CHAT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}]}


def still_serves(proxy, up) -> None:
    """Another flow, after the hostile one: rewritten as usual."""
    up.route("/chat/completions", sse_reply([chat_chunk("<think>r</think>fine"), b"data: [DONE]\n\n"]))
    status, _, got = post(proxy, "/v1/chat/completions", CHAT)
    assert status == 200 and b'"reasoning_content":"r"' in got and b'"content":"fine"' in got


def test_a_brotli_bomb_in_a_stream_costs_at_most_one_capped_read(proxy, up):
    """A few hundred bytes of brotli that decode to one 100 MiB event: the proxy decodes 8 MiB
    of it at most, then ends the client's stream cleanly; its memory stays within the bound."""
    bomb = brotli.compress(chat_chunk("a" * (100 * MiB)), quality=5)
    assert len(bomb) < 100_000
    up.route("/chat/completions", sse_reply([bomb], headers={"content-encoding": "br"}))
    with Peak(proxy.pid) as peak:
        status, headers, got = post(proxy, "/v1/chat/completions", CHAT)
    assert status == 200 and "content-encoding" not in headers
    assert got == chat_chunk("a" * (100 * MiB))[:8 * MiB]   # what the cap let through, as it came
    assert peak.grew < FLOW_BOUND, peak.grew
    still_serves(proxy, up)


def test_a_gzip_bomb_body_passes_as_the_upstream_sent_it(proxy, up):
    """A non-streamed body that decodes past 32 MiB is not decoded: it reaches the client
    untouched, its Content-Encoding kept."""
    big = json.dumps({"id": "c", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "<think>r</think>" + "a" * (40 * MiB)},
         "finish_reason": "stop"}]}).encode()
    body = gzip.compress(big, compresslevel=9)
    up.route("/chat/completions", Reply(200, {"content-type": "application/json", "content-encoding": "gzip"},
                                        [body], chunked=False))
    with Peak(proxy.pid) as peak:
        status, headers, got = post(proxy, "/v1/chat/completions", dict(CHAT, stream=False))
    assert status == 200 and headers["content-encoding"] == "gzip" and got == body
    assert peak.grew < FLOW_BOUND, peak.grew
    still_serves(proxy, up)


def _zstd(data: bytes) -> bytes:
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    return zstd.compress(data)


@pytest.mark.parametrize("encoding,cut", [("gzip", 4), ("br", 2), ("zstd", 2)])
def test_a_body_cut_before_its_encoding_ends_passes_as_the_upstream_sent_it(proxy, up, encoding, cut):
    """A gzip body without the end of its trailer, a brotli or zstd body without its last bytes:
    what decodes of it is a prefix (here one that is whole JSON: the padding after it is cut),
    never taken for the body. It reaches the client as the upstream sent it, and the log says
    why. (Before: the prefix was rewritten and sent re-encoded, the cut part lost.)"""
    whole = json.dumps({"id": "c", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "<think>r</think>a"},
         "finish_reason": "stop"}]}).encode() + b"\n" * 4096
    encode = {"gzip": gzip.compress, "br": brotli.compress, "zstd": _zstd}[encoding]
    body = encode(whole)[:-cut]
    up.route("/chat/completions", Reply(200, {"content-type": "application/json", "content-encoding": encoding},
                                        [body], chunked=False))
    status, headers, got = post(proxy, "/v1/chat/completions", dict(CHAT, stream=False))
    assert (status, headers["content-encoding"], got) == (200, encoding, body)
    proxy.wait_for(f"POST /v1/chat/completions: thinkwire chat: passed through unchanged \\(body left "
                   f"unchanged: cannot decode the {encoding} body \\(truncated: it ends before its {encoding} "
                   f"stream does\\)\\)", timeout=10)
    still_serves(proxy, up)


def test_a_20_mib_sse_line_passes_as_it_comes_without_amplification(proxy, up):
    """One 20 MiB event in 64 KiB reads: past 1 MiB the event passes as it comes (nothing held
    whole, no parse), the stream fails open there, and the rest passes as it came."""
    huge = chat_chunk("<think>" + "r" * (20 * MiB))
    after = chat_chunk("</think>tail") + b"data: [DONE]\n\n"
    up.route("/chat/completions", sse_reply(rechunk(chat_chunk("<think>x") + huge + after, [65536])))
    with Peak(proxy.pid) as peak:
        status, _, got = post(proxy, "/v1/chat/completions", CHAT)
    assert status == 200 and got.endswith(huge + after)
    assert peak.grew < FLOW_BOUND, peak.grew
    still_serves(proxy, up)


def test_a_20_mib_ndjson_line_passes_as_it_comes(proxy, up):
    line = json.dumps({"model": "m", "created_at": "2025-01-01T00:00:00Z", "message": {
        "role": "assistant", "content": "a" * (20 * MiB)}, "done": False}).encode() + b"\n"
    done = b'{"model":"m","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":""},' \
           b'"done":true,"done_reason":"stop"}\n'
    up.route("/api/chat", Reply(200, {"content-type": "application/x-ndjson"}, rechunk(line + done, [65536])))
    with Peak(proxy.pid) as peak:
        status, _, got = post(proxy, "/api/chat", {"model": "m", "messages": [{"role": "user", "content": "q"}]})
    assert status == 200 and got == line + done
    assert peak.grew < FLOW_BOUND, peak.grew
    still_serves(proxy, up)


def _messages_client(proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key="x", max_retries=0, timeout=60)


ASK = dict(model="m", max_tokens=64, messages=[{"role": "user", "content": "q"}])


def test_messages_failing_open_after_renumbering_keeps_the_answer_on_its_text_block(proxy, up):
    """The rewrite made a thinking block 0 and moved the text to block 1; then an event too long
    to hold makes it fail open. The upstream's later events of its block 0 still reach the
    client as block 1: the SDK's message has the answer text."""
    objs = stream_objs(text("<think>why</think>the ", "answer"))
    k = next(i for i, o in enumerate(objs) if o.get("delta", {}).get("text") == "answer")
    ping = {"type": "ping", "pad": "p" * (2 * MiB)}
    data = b"".join(sse_event(o) for o in objs[:k] + [ping] + objs[k:])
    up.route("/messages", sse_reply(rechunk(data, [65536])))
    with _messages_client(proxy).messages.stream(**ASK) as s:
        final = s.get_final_message().to_dict()
    assert [b["type"] for b in final["content"]] == ["thinking", "text"]
    assert final["content"][0]["thinking"] == "why"
    assert final["content"][1]["text"] == "the answer"
    still_serves(proxy, up)


def test_responses_failing_open_after_renumbering_keeps_the_answer_on_its_message(proxy, up):
    data = stream_of([msg(["<think>why</think>the ", "answer"])])
    head, sep, rest = data.partition(b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", '
                                     b'"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "answer"')
    assert sep
    pad = b"event: keepalive\ndata: " + json.dumps({"type": "keepalive", "pad": "p" * (2 * MiB)}).encode() + b"\n\n"
    up.route("/responses", sse_reply(rechunk(head + pad + sep + rest, [65536])))
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="x", max_retries=0, timeout=60)
    texts = []
    with client.responses.stream(model="m", input="q") as s:
        for ev in s:
            if ev.type == "response.output_text.delta":
                texts.append((ev.output_index, ev.delta))
        s.get_final_response()
    # The answer's deltas land on the client's message item (1: the reasoning item is 0).
    assert texts == [(1, "the "), (1, "answer")]
    still_serves(proxy, up)


def test_signed_reasoning_past_the_hold_cap_ends_unsigned_and_the_sdk_reads_it(proxy, up):
    """A signed thinking block holds its text for the mark up to 1 Mi characters: a 3 MiB one
    ends with an empty signature instead, its text whole, and the proxy's memory stays bounded."""
    reasoning = "r" * (3 * MiB)
    chunks = ["<think>"] + [reasoning[i:i + 16384] for i in range(0, len(reasoning), 16384)] + ["</think>ok"]
    data = b"".join(sse_event(o) for o in stream_objs(text(*chunks)))
    up.route("/messages", sse_reply(rechunk(data, [65536])))
    with Peak(proxy.pid) as peak:
        with _messages_client(proxy).messages.stream(**ASK) as s:
            final = s.get_final_message().to_dict()
    assert final["content"] == [{"type": "thinking", "thinking": reasoning, "signature": ""},
                                {"type": "text", "text": "ok"}]
    assert peak.grew < FLOW_BOUND, peak.grew
    still_serves(proxy, up)


def test_a_failure_is_one_warning_without_body_text(proxy, up):
    """Failing open logs one warning for the flow, with a fixed reason: none of the body's text,
    no traceback (that is DEBUG); the flow's comment has none either."""
    secret = "SECRET-BODY-TEXT-" * 4
    data = chat_chunk("<think>x") + chat_chunk(secret * (MiB // len(secret) + 1)) + chat_chunk("</think>y")
    up.route("/chat/completions", sse_reply(rechunk(data, [65536])))
    before = len(proxy.lines)
    status, _, got = post(proxy, "/v1/chat/completions", CHAT)
    assert status == 200 and got.endswith(data[len(chat_chunk("<think>x")):])
    still_serves(proxy, up)   # (its log line comes after the one of the flow above)
    logged = list(proxy.lines)[before:]
    assert not any("SECRET" in line for line in logged)
    assert not any("Traceback" in line for line in logged)
    failed = [line for line in logged if "stream rewrite failed" in line]
    assert len(failed) == 1 and failed[0].endswith("an event longer than 1 MiB"), logged
