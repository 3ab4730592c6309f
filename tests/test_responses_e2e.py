"""End to end: the official openai SDK -> real mitmdump with thinkwire -> a local Responses server."""

import random

import openai
import pytest

from harness import json_reply, post, rechunk, sse_reply
from support.responses import MODEL, check_invariants, final_response, fn, msg, native, shape, stream_of
from thinkwire.marks import Sealer, client_binding

pytestmark = pytest.mark.e2e

SDK_CLIENT = client_binding({"authorization": "Bearer x"})   # what the SDK clients here send (api_key="x")
KEY = "e2e-responses-key, 32 bytes or more"


def client(proxy):
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="x", max_retries=0, timeout=20)


def final_of(proxy, **kw):
    with client(proxy).responses.stream(model=MODEL, input="q", **kw) as s:
        events = list(s)
        return s.get_final_response(), events


@pytest.fixture(scope="module")
def keyed_proxy(proxy_factory):
    """A proxy whose mark key is set (THINK_SIGNING_KEY), for encrypted_content."""
    return proxy_factory(env={"THINK_SIGNING_KEY": KEY})


def test_create_plain_answer_is_left_as_is(proxy, up):
    up.route("/v1/responses", json_reply(final_response([msg(["just an answer"])])))
    r = client(proxy).responses.create(model=MODEL, input="q")
    assert shape(r.output) == [("message", "just an answer")] and r.output_text == "just an answer"


def test_create_reasoning_and_answer_become_native_items(proxy, up):
    up.route("/v1/responses", json_reply(final_response([msg(["<think>\nweigh it\n</think>\n\nhi"])])))
    r = client(proxy).responses.create(model=MODEL, input="q")
    assert shape(r.output) == [("reasoning", "weigh it"), ("message", "hi")]
    assert r.output[0].id == "rs_1_0" and r.output[0].summary[0].type == "summary_text"
    assert r.output[0].content is None   # the text in one place (think_responses_content=off)
    assert r.output_text == "hi" and r.usage.total_tokens == 12


def test_retrieve_by_id_is_rewritten_like_a_create(proxy, up):
    up.route("/v1/responses/resp_1", json_reply(final_response([msg(["<think>x</think>hi"])])))
    r = client(proxy).responses.retrieve("resp_1")
    assert shape(r.output) == [("reasoning", "x"), ("message", "hi")]


def test_input_items_and_errors_pass_untouched(proxy, up):
    items = {"object": "list", "data": [{"type": "message", "content": [{"type": "output_text",
                                                                        "text": "<think>x</think>hi"}]}]}
    up.route("/v1/responses/resp_1/input_items", json_reply(items))
    got = post(proxy.url + "/v1/responses/resp_1/input_items", method="GET")
    assert got.json() == items
    err = final_response([msg(["<think>x</think>hi"])])
    up.route("/v1/responses", json_reply(err, status=500))
    assert post(proxy.url + "/v1/responses", {"model": MODEL}).json() == err


def test_stream_events_carry_reasoning_then_answer_at_any_chunking(proxy, up):
    data = stream_of([msg(["<th", "ink>wé", "ighing 𝄞</thi", "nk>\n\nthe an", "swer"])])
    for sizes in ([len(data)], [1], [random.Random(4).randint(1, 90) for _ in range(30)]):
        up.route("/v1/responses", sse_reply(rechunk(data, sizes)))
        events = list(client(proxy).responses.create(model=MODEL, input="q", stream=True))
        kinds = [(e.type, getattr(e, "delta", None)) for e in events if e.type.endswith("text.delta")]
        reasoning = "".join(d for t, d in kinds if t == "response.reasoning_summary_text.delta")
        assert not any(t == "response.reasoning_text.delta" for t, _ in kinds)
        answer = "".join(d for t, d in kinds if t == "response.output_text.delta")
        assert (reasoning, answer) == ("wéighing 𝄞", "the answer"), sizes
        assert kinds.index(next(k for k in kinds if k[0] == "response.output_text.delta")) > 0
        assert events[-1].type == "response.completed"
        assert shape(events[-1].response.output) == [("reasoning", "wéighing 𝄞"), ("message", "the answer")]


def test_stream_helper_final_response_with_several_blocks(proxy, up):
    up.route("/v1/responses", sse_reply(stream_of([msg(["<think>a</think>b\n", "<think>c</think>d"])])))
    final, _ = final_of(proxy)
    assert shape(final.output) == [("reasoning", "a"), ("message", "b\n"), ("reasoning", "c"), ("message", "d")]
    assert final.output_text == "b\nd"


def test_stream_helper_reasoning_then_a_function_call(proxy, up):
    up.route("/v1/responses", sse_reply(stream_of([msg(["<think>need the weather</think>"]),
                                                   fn('{"city":', '"Paris"}')])))
    final, events = final_of(proxy)
    assert shape(final.output) == [("reasoning", "need the weather"), ("function_call", '{"city":"Paris"}')]
    assert final.output[1].call_id == "call_fc_1"
    assert [e.snapshot for e in events if e.type == "response.function_call_arguments.delta"] == [
        '{"city":', '{"city":"Paris"}']


def test_stream_incomplete_with_an_unclosed_block(proxy, up):
    up.route("/v1/responses", sse_reply(stream_of([msg(["<think>still thin", "king"])],
                                                  status="incomplete", unclosed=True)))
    events = list(client(proxy).responses.create(model=MODEL, input="q", stream=True))
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details.reason == "max_output_tokens"
    assert shape(last.response.output) == [("reasoning", "still thinking")]
    assert [e.type for e in events].count("response.output_item.done") == 1


def test_upstream_with_native_reasoning_items_passes_byte_identical(proxy, up):
    data = stream_of([native("native summary"), msg(["<think>not mine</think>hi"])])
    up.route("/v1/responses", sse_reply(rechunk(data, [37])))
    got = post(proxy.url + "/v1/responses", {"model": MODEL, "stream": True})
    assert got.content == data
    final, _ = final_of(proxy)
    assert shape(final.output) == [("reasoning", "native summary"), ("message", "<think>not mine</think>hi")]
    up.route("/v1/responses", json_reply(final_response([native(), msg(["<think>x</think>y"])])))
    assert shape(client(proxy).responses.create(model=MODEL, input="q").output)[1] == (
        "message", "<think>x</think>y")


def test_summary_auto_gives_summary_events_and_a_final_summary(proxy, up):
    up.route("/v1/responses", sse_reply(stream_of([msg(["<think>plan", " it</think>done"])])))
    final, events = final_of(proxy, reasoning={"summary": "auto"})
    deltas = [e.delta for e in events if e.type == "response.reasoning_summary_text.delta"]
    assert deltas == ["plan", " it"]
    assert [e.summary_index for e in events if e.type.startswith("response.reasoning_summary")] == [0] * 5
    assert final.output[0].summary[0].text == "plan it" and final.output[0].content is None
    assert up.requests[-1].json()["reasoning"] == {"summary": "auto"}  # the request went out as sent


def test_summary_by_default_even_when_not_asked_and_only_there(proxy, up):
    # Clients that read only the summary (the Vercel AI SDK, Pydantic AI) show the reasoning too;
    # clients that render summary and content (llm) show it once.
    up.route("/v1/responses", sse_reply(stream_of([msg(["<think>plan</think>done"])])))
    final, events = final_of(proxy)
    assert final.output[0].summary[0].text == "plan" and final.output[0].content is None
    assert [e.delta for e in events if e.type == "response.reasoning_summary_text.delta"] == ["plan"]
    assert not [e for e in events if e.type.startswith("response.reasoning_text")]


def test_summary_not_asked_and_option_off_gives_no_summary(proxy_factory, up):
    p = proxy_factory(options={"think_responses_summary": "off"})
    up.route("/v1/responses", sse_reply(stream_of([msg(["<think>plan</think>done"])])))
    final, events = final_of(p)
    assert final.output[0].summary == [] and not [e for e in events if "summary" in e.type]


def test_include_encrypted_content_gives_a_mark_that_opens_with_the_key(keyed_proxy, up):
    up.route("/v1/responses", sse_reply(stream_of([msg(["<think>sealed thought</think>ok"])])))
    final, events = final_of(keyed_proxy, include=["reasoning.encrypted_content"],
                             reasoning={"summary": "auto"}, store=False)
    mark = final.output[0].encrypted_content
    opened = Sealer(KEY.encode()).open(mark, SDK_CLIENT)
    assert opened is not None and opened.text == "sealed thought" and opened.pair.open == "<think>"
    assert Sealer(b"another key").open(mark) is None
    done = [e for e in events if e.type == "response.output_item.done"][0]
    assert done.item.encrypted_content == mark
    up.route("/v1/responses", json_reply(final_response([msg(["<think>whole</think>ok"])])))
    r = client(keyed_proxy).responses.create(model=MODEL, input="q", include=["reasoning.encrypted_content"])
    assert Sealer(KEY.encode()).open(r.output[0].encrypted_content, SDK_CLIENT).text == "whole"


def test_raw_stream_through_the_proxy_keeps_the_stream_rules(proxy, up):
    data = stream_of([msg(["<think>a</think>b"]), fn("{}"), msg(["c\n<think>d"], id="msg_2")],
                     status="incomplete", unclosed=True)
    up.route("/v1/responses", sse_reply(rechunk(data, [5, 13])))
    got = post(proxy.url + "/v1/responses", {"model": MODEL, "stream": True})
    items = check_invariants(got.content)
    assert [t for t, _ in items.values()] == ["reasoning", "message", "function_call", "message", "reasoning"]
    assert "content-length" not in got.headers
