"""End to end: the official anthropic SDK -> real mitmdump with thinkwire -> a local Messages server."""

import json

import anthropic
import pytest

from harness import json_reply, post, rechunk, sse_reply
from support.messages import (body, native_thinking, redacted, stream, stream_objs, sse_event, text,
                           tool)
from thinkwire.marks import Sealer, client_binding

pytestmark = pytest.mark.e2e

SDK_CLIENT = client_binding({"authorization": "Bearer x"})   # what the SDK clients here send (api_key="x")
KEY = "e2e shared signing key, 32 bytes or more"
ASK = dict(model="m", max_tokens=2048, messages=[{"role": "user", "content": "q"}])
OMITTED = dict(ASK, thinking={"type": "adaptive", "display": "omitted"})


@pytest.fixture(scope="module")
def proxies(proxy_factory):
    """One mitmdump per signature policy, all with the same key (so the test can open marks)."""
    env = {"THINK_SIGNING_KEY": KEY}
    return {policy: proxy_factory(options={"think_signature": policy}, env=env)
            for policy in ("off", "unsigned", "redacted")}


def client(p):
    return anthropic.Anthropic(base_url=p.url, api_key="x", max_retries=0, timeout=20)


def create(p, **kw):
    return client(p).messages.create(**(kw or ASK)).to_dict()


def streamed(p, **kw):
    with client(p).messages.stream(**(kw or ASK)) as s:
        return s.get_final_message().to_dict()


def both(p, up, blocks, sizes=(7, 1, 30), stop="end_turn", **kw):
    """The message through create() and through stream().get_final_message(): they must agree."""
    up.route("/messages", json_reply(json.loads(body(*blocks, stop=stop))))
    whole = create(p, **kw)
    data = stream(*blocks, stop=stop)
    up.route("/messages", sse_reply(rechunk(data, list(sizes))))
    streamed_msg = streamed(p, **kw)
    return whole, streamed_msg


def test_plain_answer_arrives_unchanged(proxies, up):
    whole, s = both(proxies["off"], up, [text("Hello", " there.")])
    assert whole["content"] == s["content"] == [{"type": "text", "text": "Hello there."}]


def test_reasoning_and_answer(proxies, up):
    whole, s = both(proxies["off"], up, [text("<think>\nstep ", "one\n</th", "ink>\n\nanswer")])
    assert whole["content"] == s["content"] == [{"type": "thinking", "thinking": "step one"},
                                                {"type": "text", "text": "answer"}]
    assert whole["stop_reason"] == s["stop_reason"] == "end_turn"


def test_several_blocks_in_order(proxies, up):
    whole, s = both(proxies["off"], up, [text("<think>a</think>b\n<thinking>c</thinking>d")])
    expect = [{"type": "thinking", "thinking": "a"}, {"type": "text", "text": "b\n"},
              {"type": "thinking", "thinking": "c"}, {"type": "text", "text": "d"}]
    assert whole["content"] == s["content"] == expect


def test_reasoning_and_tool_use(proxies, up):
    blocks = [text("<think>need weather</think>Let me check."), tool("toolu_9", "get_weather", '{"ci', 'ty": "Rome"}')]
    whole, s = both(proxies["off"], up, blocks, stop="tool_use")
    assert whole["content"] == s["content"]
    assert [b["type"] for b in s["content"]] == ["thinking", "text", "tool_use"]
    assert s["content"][2] == {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": "Rome"}}


def test_upstream_genuine_thinking_and_redacted_thinking_pass_byte_identical(proxies, up):
    blocks = [native_thinking("real thought", "EqQBCkYIBxgCKkA="), redacted("EmwKAhgBEgy3"),
              text("<think>x</think>hi")]
    data = stream(*blocks)
    up.route("/messages", sse_reply(rechunk(data, [5, 11])))
    got = post(proxies["redacted"].url + "/v1/messages", dict(ASK, stream=True))
    assert got.content == data
    up.route("/messages", sse_reply([data]))
    assert [b["type"] for b in streamed(proxies["off"])["content"]] == ["thinking", "redacted_thinking", "text"]
    raw = body(*blocks)
    up.route("/messages", json_reply(json.loads(raw)))
    assert post(proxies["unsigned"].url + "/v1/messages", ASK).content == raw


def test_signature_unsigned(proxies, up):
    whole, s = both(proxies["unsigned"], up, [text("<think>x</think>hi")])
    assert whole["content"][0] == s["content"][0] == {"type": "thinking", "thinking": "x", "signature": ""}


def test_signature_off_has_no_signature(proxies, up):
    up.route("/messages", sse_reply([stream(text("<think>x</think>hi"))]))
    got = post(proxies["off"].url + "/v1/messages", dict(ASK, stream=True))
    assert b"signature" not in got.content and b"thinking_delta" in got.content


def test_signature_redacted_sends_sealed_marks_only(proxies, up):
    blocks = [text("<think>private plan</think>hi")]
    whole, s = both(proxies["redacted"], up, blocks)
    sealer = Sealer(KEY.encode())
    for msg in (whole, s):
        assert [b["type"] for b in msg["content"]] == ["redacted_thinking", "text"]
        assert "private plan" not in json.dumps(msg)
        assert sealer.open(msg["content"][0]["data"], SDK_CLIENT).text == "private plan"


def test_display_omitted_gives_empty_thinking_with_a_mark(proxies, up):
    whole, s = both(proxies["unsigned"], up, [text("<think>unseen</think>hi")], **OMITTED)
    sealer = Sealer(KEY.encode())
    for msg in (whole, s):
        block = msg["content"][0]
        assert block["type"] == "thinking" and block["thinking"] == ""
        assert sealer.open(block["signature"], SDK_CLIENT).text == "unseen"
        assert msg["content"][1] == {"type": "text", "text": "hi"}


def test_query_string_path_is_rewritten(proxies, up):
    up.route("/messages", json_reply(json.loads(body(text("<think>x</think>hi")))))
    got = post(proxies["off"].url + "/v1/messages?beta=true", ASK)
    assert json.loads(got.content)["content"][0] == {"type": "thinking", "thinking": "x"}


def test_error_event_mid_stream_reaches_the_sdk(proxies, up):
    objs = [o for o in stream_objs(text("<think>a</think>part", "ial <")) if o["type"] not in
            ("content_block_stop", "message_delta", "message_stop")]
    objs.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    data = b"".join(sse_event(o) for o in objs)
    up.route("/messages", sse_reply(rechunk(data, [9])))
    seen = []
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        with client(proxies["off"]).messages.stream(**ASK) as s:
            for ev in s:
                if ev.type == "text":
                    seen.append(ev.text)
    assert "".join(seen) == "partial <"


@pytest.mark.parametrize("path", ["/v1/messages/count_tokens", "/v1/messages/batches"])
def test_other_messages_paths_pass_unchanged(proxies, up, path):
    raw = body(text("<think>x</think>hi"))
    up.route(path.rsplit("/", 1)[1], json_reply(json.loads(raw)))
    assert post(proxies["off"].url + path, {"model": "m"}).content == raw


def test_upstream_error_status_passes_unchanged(proxies, up):
    err = {"type": "error", "error": {"type": "invalid_request_error", "message": "<think>no</think>"}}
    up.route("/messages", json_reply(err, status=400))
    got = post(proxies["off"].url + "/v1/messages", ASK)
    assert (got.status, json.loads(got.content)) == (400, err)


def test_surface_switch_off_passes_messages_unchanged(proxy_factory, up):
    p = proxy_factory(options={"think_messages": "off"})
    raw = body(text("<think>x</think>hi"))
    up.route("/messages", json_reply(json.loads(raw)))
    assert post(p.url + "/v1/messages", ASK).content == raw
