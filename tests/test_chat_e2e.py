"""End to end: the official openai SDK -> real mitmdump with thinkwire -> a local chat server."""

import gzip
import json
import zlib

import openai
import pytest

from harness import Reply, json_reply, post, rechunk, sse_reply, start_fails

pytestmark = pytest.mark.e2e


def completion(content, **msg):
    return {"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": content, **msg}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}


def chunk_bytes(pieces, finish="stop", tool_calls=None):
    def c(delta, finish=None):
        return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    objs = [c({"role": "assistant", "content": ""})] + [c({"content": p}) for p in pieces]
    if tool_calls:
        objs.append(c({"tool_calls": tool_calls}))
    objs.append(c({}, finish))
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs) + b"data: [DONE]\n\n"


def client(proxy):
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="x", max_retries=0, timeout=20)


def test_sdk_create_gets_reasoning_content(proxy, up):
    up.route("/chat/completions", json_reply(completion("<think>\nx\n</think>\n\nhi")))
    r = client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert r.choices[0].message.content == "hi"
    assert r.choices[0].message.model_extra["reasoning_content"] == "x"


def test_sdk_stream_helper_gets_reasoning_at_any_chunk_boundaries(proxy, up):
    data = chunk_bytes(["<thi", "nk>\nhello ", "wörld 𝄞</th", "ink>\n\nans", "wer"])
    for sizes in ([len(data)], [1], [3, 7, 2], [64]):
        up.route("/chat/completions", sse_reply(rechunk(data, sizes)))
        with client(proxy).chat.completions.stream(model="m", messages=[{"role": "user", "content": "q"}]) as s:
            final = s.get_final_completion()
        m = final.choices[0].message
        assert (m.model_extra["reasoning_content"], m.content) == ("hello wörld 𝄞", "answer"), sizes


def test_sdk_stream_delivers_reasoning_before_the_answer(proxy, up):
    up.route("/chat/completions", sse_reply(chunk_bytes(["<think>r1", " r2</think>", "a1", " a2"])))
    seen = []
    stream = client(proxy).chat.completions.create(model="m", messages=[], stream=True)
    for ch in stream:
        for c in ch.choices:
            if (c.delta.model_extra or {}).get("reasoning_content"):
                seen.append(("r", c.delta.model_extra["reasoning_content"]))
            if c.delta.content:
                seen.append(("c", c.delta.content))
    assert seen == [("r", "r1"), ("r", " r2"), ("c", "a1"), ("c", " a2")]


def test_reasoning_streams_in_real_time(proxy, up):
    """The first reasoning piece reaches the client while the upstream is still sending: the
    upstream sends the rest only once the client has it (a proxy that buffered would hold it)."""
    import threading
    seen = threading.Event()
    events = [e + b"\n\n" for e in chunk_bytes(["<think>early", " more", "</think>", "end"]).split(b"\n\n") if e]
    reply = sse_reply(events, gate=seen, gate_at=2)   # (the role, "<think>early"; then the rest)
    up.route("/chat/completions", reply)
    got = []
    for ch in client(proxy).chat.completions.create(model="m", messages=[], stream=True):
        for c in ch.choices:
            r = (c.delta.model_extra or {}).get("reasoning_content")
            if r:
                got.append(r)
                seen.set()
    assert reply.opened is True
    assert got == ["early", " more"]


def test_sdk_stream_with_tool_call(proxy, up):
    tool = [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    up.route("/chat/completions", sse_reply(chunk_bytes(["<think>use ls</think>\n\n"], "tool_calls", tool)))
    with client(proxy).chat.completions.stream(model="m", messages=[]) as s:
        final = s.get_final_completion()
    m = final.choices[0].message
    assert m.model_extra["reasoning_content"] == "use ls" and m.tool_calls[0].function.name == "ls"
    assert final.choices[0].finish_reason == "tool_calls"


def test_gzip_body_from_upstream(proxy, up):
    up.route("/chat/completions", json_reply(completion("<think>z</think>ok"), gzip_it=True))
    r = client(proxy).chat.completions.create(model="m", messages=[])
    assert (r.choices[0].message.model_extra["reasoning_content"], r.choices[0].message.content) == ("z", "ok")


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_compressed_stream_from_upstream(proxy, up, encoding):
    data = chunk_bytes(["<think>zipped", "</think>", "ok"])
    if encoding == "gzip":
        comp = gzip.compress(data)
    elif encoding == "deflate":
        comp = zlib.compress(data)
    elif encoding == "br":
        import brotli
        comp = brotli.compress(data)
    else:
        from backports import zstd
        comp = zstd.compress(data)
    up.route("/chat/completions", sse_reply(rechunk(comp, [5]), headers={"content-encoding": encoding}))
    with client(proxy).chat.completions.stream(model="m", messages=[]) as s:
        m = s.get_final_completion().choices[0].message
    assert (m.model_extra["reasoning_content"], m.content) == ("zipped", "ok")


def test_upstream_error_passes_unchanged(proxy, up):
    err = {"error": {"message": "bad <think> request", "type": "invalid_request_error", "code": None}}
    up.route("/chat/completions", json_reply(err, status=400))
    r = post(proxy.url + "/v1/chat/completions", {"model": "m"})
    assert r.status == 400 and r.json() == err


def test_malformed_chunk_passes_through(proxy, up):
    data = chunk_bytes(["<think>x", "</think>y"])
    data = data.replace(b"data: [DONE]", b"data: {broken json\n\ndata: [DONE]")
    up.route("/chat/completions", sse_reply([data]))
    r = post(proxy.url + "/v1/chat/completions", {"model": "m", "stream": True})
    assert b"data: {broken json\n\n" in r.content
    assert b'"reasoning_content":"x"' in r.content


def test_non_json_body_passes_unchanged_and_flow_is_marked(proxy, up):
    up.route("/chat/completions", Reply(200, {"content-type": "application/json"}, [b"<think>not json"], chunked=False))
    r = post(proxy.url + "/v1/chat/completions", {"model": "m"})
    assert r.content == b"<think>not json"


def test_other_paths_pass_unchanged(proxy, up):
    up.route("/completions", json_reply({"choices": [{"text": "<think>x</think>y"}]}))
    r = post(proxy.url + "/v1/completions", {})
    assert r.json() == {"choices": [{"text": "<think>x</think>y"}]}


def test_rewritten_stream_has_no_content_length(proxy, up):
    data = chunk_bytes(["<think>x</think>y"])
    up.route("/chat/completions", Reply(200, {"content-type": "text/event-stream"}, [data], chunked=False))
    r = post(proxy.url + "/v1/chat/completions", {"stream": True})
    assert "content-length" not in r.headers and r.headers.get("transfer-encoding") == "chunked"
    assert b'"reasoning_content":"x"' in r.content


def test_surface_switch_off(proxy_factory, up):
    p = proxy_factory(options={"think_chat": "off"})
    up.route("/chat/completions", json_reply(completion("<think>x</think>hi")))
    r = client(p).chat.completions.create(model="m", messages=[])
    assert r.choices[0].message.content == "<think>x</think>hi"


def test_env_variables_set_option_defaults(proxy_factory, up):
    p = proxy_factory(env={"THINK_CHAT_FIELD": "reasoning", "THINK_TAGS": "<r> </r>"})
    up.route("/chat/completions", json_reply(completion("<r>x</r>hi")))
    r = client(p).chat.completions.create(model="m", messages=[])
    assert r.choices[0].message.model_extra["reasoning"] == "x"


def test_bad_option_value_stops_mitmdump_with_a_clear_message(tmp_path):
    out = start_fails({"think_chat_field": "thoughts"}, tmp_path)
    assert "think_chat_field" in out and "reasoning_content" in out and "[exit 0]" not in out


def test_bad_env_value_stops_mitmdump(tmp_path):
    out = start_fails({}, tmp_path, env={"THINK_TRIM": "maybe"})
    assert "THINK_TRIM" in out and "[exit 0]" not in out


def test_request_without_reasoning_reaches_upstream_byte_identical(proxy, up):
    up.route("/chat/completions", json_reply(completion("ok")))
    raw = b'{ "model":"m",  "messages": [{"role":"user","content":"caf\\u00e9"}] }'
    post(proxy.url + "/v1/chat/completions", raw=raw)
    assert up.requests[-1].body == raw


def test_chat_restore_inline_sends_reasoning_back_as_the_model_wrote_it(proxy_factory, up):
    p = proxy_factory(options={"think_chat_restore": "inline"})
    up.route("/chat/completions", json_reply(completion("ok")))
    client(p).chat.completions.create(model="m", messages=[
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "hi", "reasoning_content": "x"},  # type: ignore[typeddict-unknown-key]
        {"role": "user", "content": "more"}])
    sent = up.requests[-1].json()["messages"]
    assert sent[1] == {"role": "assistant", "content": "<think>x</think>hi"}
    # (The flow's line is logged once its response hook ran: waited for, under load it comes late.)
    p.wait_for(r"1 object\(s\) restored on the request", timeout=10)


@pytest.mark.parametrize("spelling", ["yes", "on", "1", "true"])
def test_a_switch_set_with_any_documented_spelling_takes_effect(proxy_factory, up, spelling):
    # mitmproxy itself reads a bool --set only as true/false; thinkwire reads its own spellings.
    p = proxy_factory(options={"think_starts_inside": spelling})
    up.route("/chat/completions", json_reply(completion("x</think>hi")))
    r = client(p).chat.completions.create(model="m", messages=[])
    assert r.choices[0].message.content == "hi" and r.choices[0].message.reasoning_content == "x"
