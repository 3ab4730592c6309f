"""The Responses surface: whole bodies, streams, the real corpus, and properties."""

import json
import random

import httpx2 as httpx
import openai
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from conftest import corpus_bytes, corpus_files, make_ctx
from harness import rechunk
from thinkwire import engine
from thinkwire.marks import Sealer
from thinkwire.fastpath import slot_text
from thinkwire.sse import SSEParser
from thinkwire.stream import StreamDriver
from thinkwire.surfaces import responses
import thinkwire.jsonio as jsonio
from support.responses import (  # noqa: F401  (builders shared with other test modules)
    MODEL, RESP, USAGE, _Served, _text_part, body_of, check_invariants, final_item, final_response, fn, msg, native, parse, run_stream, sdk_client, sdk_final, shape, sse_bytes, stream_of, upstream_events,
    llama_server_events,
)


# -- building upstream responses ------------------------------------------------------------


@pytest.fixture(autouse=True)
def _summary_only_when_asked(monkeypatch):
    """These tests read reasoning items with the summary only where the request asks for one
    (the default puts it in every item: test_summary_is_on_by_default)."""
    monkeypatch.setenv("THINK_RESPONSES_SUMMARY", "off")


def test_by_default_the_reasoning_is_in_the_summary_only(monkeypatch):
    """Once, where every client tested reads it (Codex, the Agents SDK, the Vercel AI SDK,
    Pydantic AI read the summary; llm renders summary and content both, so twice with both)."""
    monkeypatch.delenv("THINK_RESPONSES_SUMMARY")
    out, _ = rewrite([msg(["<think>x</think>hi"])])
    rs = out["output"][0]
    assert rs["summary"] == [{"type": "summary_text", "text": "x"}] and "content" not in rs


def test_content_on_puts_the_reasoning_in_content_too(monkeypatch):
    monkeypatch.delenv("THINK_RESPONSES_SUMMARY")
    out, _ = rewrite([msg(["<think>x</think>hi"])], responses_content="on")
    rs = out["output"][0]
    assert rs["summary"] == [{"type": "summary_text", "text": "x"}]
    assert rs["content"] == [{"type": "reasoning_text", "text": "x"}]


# -- running the rewrite ----------------------------------------------------------------------


def objs(data):
    return [json.loads(e.data) for e in parse(data) if e.data]


def types(data):
    return [o["type"] for o in objs(data)]


def sdk_events(data):
    """`responses.create(stream=True)`: the SDK's parsed events (dicts)."""
    return [e.to_dict() for e in sdk_client(data).responses.create(model=MODEL, input="q", stream=True)]


SUMMARY = {"model": MODEL, "reasoning": {"summary": "auto"}}


# -- paths ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/v1/responses", "/responses", "/api/openai/v1/responses?x=1",
                                  "/v1/responses/", "/v1/responses/resp_123", "/v1/responses/resp_1?stream=true"])
def test_responses_paths_match(path):
    assert responses.matches(path)


@pytest.mark.parametrize("path", ["/v1/responses/resp_1/input_items", "/v1/responses/resp_1/cancel",
                                  "/v1/responses/input_tokens", "/v1/chat/completions", "/v1/responsesx",
                                  "/v1/my_responses"])
def test_other_paths_do_not_match(path):
    assert not responses.matches(path)


def test_looks_like_bodies_and_events_but_not_chat():
    assert responses.looks_like({"object": "response", "output": []})
    assert responses.looks_like({"type": "response.output_text.delta"})
    assert not responses.looks_like({"choices": []})


def test_registered_in_the_engine_behind_its_switch():
    from conftest import make_settings
    assert engine.surface_for_path("/v1/responses", make_settings()) is responses
    assert engine.surface_for_path("/v1/responses", make_settings(responses="off")) is None


# -- whole bodies ------------------------------------------------------------------------------
def rewrite(items, request=None, sealer=None, **opts):
    ctx = make_ctx(request or {"model": MODEL}, sealer, **opts)
    new = responses.rewrite_body(body_of(items), ctx)
    return (json.loads(new) if new is not None else None), ctx


def test_body_reasoning_becomes_a_reasoning_item_before_the_message():
    out, ctx = rewrite([msg(["<think>\nx\n</think>\n\nhi"])])
    rs, m = out["output"]
    assert rs == {"id": "rs_1_0", "type": "reasoning", "summary": [],
                  "content": [{"type": "reasoning_text", "text": "x"}], "status": "completed"}
    assert m["id"] == "msg_1" and m["content"] == [_text_part("hi")] and m["status"] == "completed"
    assert ctx.stats.blocks == 1 and ctx.stats.reasoning_chars == 1


def test_body_plain_answer_is_unchanged():
    out, _ = rewrite([msg(["just an answer"])])
    assert out is None


def test_body_several_blocks_make_items_in_text_order_with_deterministic_ids():
    items = [msg(["<think>a</think>b\n<think>c</think>d"])]
    out, _ = rewrite(items)
    assert shape(out["output"]) == [("reasoning", "a"), ("message", "b\n"), ("reasoning", "c"), ("message", "d")]
    assert [x["id"] for x in out["output"]] == ["rs_1_0", "msg_1", "rs_1_2", "msg_1_3"]
    assert rewrite(items)[0] == out


def test_body_answer_before_a_block_closes_that_message_as_completed():
    out, _ = rewrite([msg(["<think>a</think>b\n<think>c"])], status="incomplete", unclosed=True)
    assert shape(out["output"]) == [("reasoning", "a"), ("message", "b\n"), ("reasoning", "c")]
    assert out["output"][1]["status"] == "completed"


def test_body_function_call_usage_and_unknown_fields_pass():
    items = [msg(["<think>plan</think>calling"]), fn('{"city":"Paris"}')]
    out, _ = rewrite(items)
    before = final_response(items)
    assert out["output"][2] == before["output"][1]
    assert {k: v for k, v in out.items() if k != "output"} == {k: v for k, v in before.items() if k != "output"}


def test_body_with_native_reasoning_is_unchanged():
    out, ctx = rewrite([native(), msg(["<think>x</think>y"])])
    assert out is None and ctx.stats.native


def test_body_not_json_raises_value_error():
    with pytest.raises(ValueError):
        responses.rewrite_body(b"not json", make_ctx())


@pytest.mark.parametrize("b", [b"[]", b'{"output": "x"}', b'{"object": "response"}',
                               b'{"output": [{"type": "message", "content": "text"}]}',
                               b'{"output": [{"type": "message", "id": "m", "content": []}, 3]}'])
def test_body_unexpected_shapes_pass_unchanged(b):
    assert responses.rewrite_body(b, make_ctx()) is None


def test_body_text_entirely_reasoning_leaves_no_empty_message():
    out, _ = rewrite([msg(["<think>only thoughts</think>"])])
    assert shape(out["output"]) == [("reasoning", "only thoughts")]


def test_body_message_with_several_parts_keeps_each_part():
    items = [msg(["<think>x</think>a"], ["b"])]
    out, _ = rewrite(items)
    assert shape(out["output"]) == [("reasoning", "x"), ("message", "a|b")]


def test_body_annotations_stay_with_the_last_piece_of_a_part():
    body = final_response([msg(["a\n<think>x</think>b"])])
    part = body["output"][0]["content"][0]
    part["annotations"] = [{"type": "url_citation", "url": "u"}]
    del part["logprobs"]  # servers that send no logprobs key
    out = json.loads(responses.rewrite_body(json.dumps(body).encode(), make_ctx()))["output"]
    assert shape(out) == [("message", "a\n"), ("reasoning", "x"), ("message", "b")]
    assert out[0]["content"] == [{"type": "output_text", "text": "a\n", "annotations": []}]
    assert out[2]["content"] == [{"type": "output_text", "text": "b", "annotations": [{"type": "url_citation", "url": "u"}]}]


def test_body_non_text_part_is_kept_in_place():
    body = final_response([msg(["<think>x</think>a"])])
    body["output"][0]["content"].append({"type": "refusal", "refusal": "no"})
    new = json.loads(responses.rewrite_body(json.dumps(body).encode(), make_ctx()))
    assert new["output"][1]["content"] == [_text_part("a"), {"type": "refusal", "refusal": "no"}]


def test_body_message_without_id_gets_ids_from_the_response_id():
    body = final_response([msg(["<think>x</think>a\n<think>y</think>b"])])
    del body["output"][0]["id"]
    out = json.loads(responses.rewrite_body(json.dumps(body).encode(), make_ctx()))
    assert [x.get("id") for x in out["output"]] == ["rs_resp_1_0_0", None, "rs_resp_1_0_2", "msg_resp_1_0_3"]


def test_body_summary_when_the_request_asks_for_one():
    out, _ = rewrite([msg(["<think>x</think>hi"])], request=SUMMARY)
    assert out["output"][0]["summary"] == [{"type": "summary_text", "text": "x"}]
    assert "content" not in out["output"][0]   # the summary carries it (think_responses_content=off)


@pytest.mark.parametrize("summary", [None, "none", "off"])
def test_body_no_summary_when_the_request_does_not_ask(summary):
    out, _ = rewrite([msg(["<think>x</think>hi"])], request={"reasoning": {"summary": summary}})
    assert out["output"][0]["summary"] == []


def test_body_summary_option_forces_summaries():
    out, _ = rewrite([msg(["<think>x</think>hi"])], responses_summary="on")
    assert out["output"][0]["summary"] == [{"type": "summary_text", "text": "x"}]


def test_body_content_off_leaves_content_out_when_the_summary_has_the_text():
    out, _ = rewrite([msg(["<think>x</think>hi"])], request=SUMMARY, responses_content="off")
    assert "content" not in out["output"][0] and out["output"][0]["summary"][0]["text"] == "x"


def test_body_content_off_without_a_summary_still_keeps_the_text():
    out, _ = rewrite([msg(["<think>x</think>hi"])], responses_content="off")
    assert out["output"][0]["content"] == [{"type": "reasoning_text", "text": "x"}]


def test_body_encrypted_content_is_a_mark_that_opens_with_the_key():
    sealer = Sealer(b"k1")
    req = {"model": MODEL, "include": ["reasoning.encrypted_content"]}
    out, _ = rewrite([msg(["<thinking>x</thinking>hi"])], request=req, sealer=sealer,
                     tags="<think> </think>,<thinking> </thinking>")
    opened = sealer.open(out["output"][0]["encrypted_content"])
    assert opened.text == "x" and (opened.pair.open, opened.pair.close) == ("<thinking>", "</thinking>")
    assert Sealer(b"other").open(out["output"][0]["encrypted_content"]) is None


def test_body_encrypted_content_left_out_without_a_sealer_or_when_not_asked():
    req = {"model": MODEL, "include": ["reasoning.encrypted_content"]}
    assert "encrypted_content" not in rewrite([msg(["<think>x</think>hi"])], request=req)[0]["output"][0]
    out, _ = rewrite([msg(["<think>x</think>hi"])], sealer=Sealer(b"k"))
    assert "encrypted_content" not in out["output"][0]


# -- streams ---------------------------------------------------------------------------------------
def test_stream_plain_answer_passes_byte_identical():
    data = stream_of([msg(["Hello", " world", "!"]), fn('{"a":', "1}")])
    assert run_stream(data)[0] == data


def test_stream_reasoning_then_answer_as_native_events():
    out, ctx = run_stream(stream_of([msg(["<think>", "x y", "</think>", "hi"])]))
    assert types(out) == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
        "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.completed"]
    check_invariants(out)
    assert shape(objs(out)[-1]["response"]["output"]) == [("reasoning", "x y"), ("message", "hi")]
    assert ctx.tally().blocks == 1


def test_stream_reasoning_is_sent_before_the_block_closes():
    evs = upstream_events([msg(["<think>first", " second", "</think>answer"])])
    driver = engine.stream_driver(responses, make_ctx())
    sent = []
    for ev in evs[:6]:  # up to the delta " second"
        sent += driver(sse_bytes([ev]))
    deltas = [o["delta"] for o in objs(b"".join(sent)) if o["type"] == "response.reasoning_text.delta"]
    assert deltas == ["first", " second"]


def test_stream_sdk_final_response_matches_what_was_streamed():
    data = run_stream(stream_of([msg(["<think>x</think>a\n<th", "ink>y</think>b"])]))[0]
    final = sdk_final(data)
    assert shape(final.output) == [("reasoning", "x"), ("message", "a\n"), ("reasoning", "y"), ("message", "b")]
    assert final.output_text == "a\nb"


def test_stream_sdk_create_events_carry_reasoning_deltas():
    data = run_stream(stream_of([msg(["<think>x</think>hi"])]))[0]
    evs = sdk_events(data)
    assert [e["delta"] for e in evs if e["type"] == "response.reasoning_text.delta"] == ["x"]
    assert [e["delta"] for e in evs if e["type"] == "response.output_text.delta"] == ["hi"]


def test_stream_event_lines_follow_the_rewritten_types():
    out = run_stream(stream_of([msg(["<think>x</think>hi"])]))[0]
    assert all(e.event == json.loads(e.data)["type"] for e in parse(out))


def test_stream_without_event_lines_sends_none():
    out = run_stream(stream_of([msg(["<think>x</think>hi"])], event_lines=False))[0]
    assert all(e.event is None for e in parse(out)) and b"event:" not in out


def test_stream_without_sequence_numbers_adds_none():
    out = run_stream(stream_of([msg(["<think>x</think>hi"])], seq=False))[0]
    assert not any("sequence_number" in o for o in objs(out))
    assert shape(objs(out)[-1]["response"]["output"]) == [("reasoning", "x"), ("message", "hi")]


def test_stream_of_llama_servers_shape_is_split_and_numbered_at_any_chunking():
    # llama-server's events carry no output_index, content_index or sequence_number: its item
    # ids say which item an event belongs to. The message is split as any other, and its events
    # go out numbered (the SDK's stream helper needs output_index; on the raw stream it fails).
    data = sse_bytes(llama_server_events(["<think>\n", "Two and", " two.", "</think>", "\n\nIt is", " 4."]))
    with pytest.raises(TypeError):
        sdk_final(data)
    for sizes in ([len(data)], [1], [random.Random(31).randint(1, 80) for _ in range(60)]):
        out = run_stream(data, rechunk(data, sizes))[0]
        check_invariants(out)
        got = [(o["type"], o.get("output_index"), o.get("content_index"), o.get("delta"))
               for o in objs(out) if not o["type"].endswith((".done", ".added"))]
        assert got == [("response.created", None, None, None), ("response.in_progress", None, None, None),
                       ("response.reasoning_text.delta", 0, 0, "Two and"),
                       ("response.reasoning_text.delta", 0, 0, " two."),
                       ("response.output_text.delta", 1, 0, "It is"), ("response.output_text.delta", 1, 0, " 4."),
                       ("response.completed", None, None, None)], sizes
        assert not any("sequence_number" in o for o in objs(out))
        final = sdk_final(out)
        assert shape(final.output) == [("reasoning", "Two and two."), ("message", "It is 4.")]
        assert final.output_text == "It is 4." and final.output[1].id == "msg_ll"


def test_stream_of_llama_servers_shape_with_native_reasoning_passes_as_it_came():
    # --reasoning-format deepseek: llama-server sends a reasoning item of its own first.
    evs = llama_server_events(["It is 4."])
    native_item = {"id": "rs_ll", "summary": [], "type": "reasoning", "content": [], "encrypted_content": "",
                   "status": "in_progress"}
    evs[2:2] = [{"type": "response.output_item.added", "item": native_item},
                {"type": "response.reasoning_text.delta", "delta": "<think>x</think>", "item_id": "rs_ll"}]
    data = sse_bytes(evs)
    out, ctx = run_stream(data)
    assert out == data and ctx.stats.native


def test_stream_crlf_line_endings_are_kept():
    evs = upstream_events([msg(["<think>x</think>hi"])])
    out = run_stream(sse_bytes(evs, eol="\r\n"))[0]
    assert out.count(b"\r\n\r\n") == len(parse(out)) and b"\n\n" not in out.replace(b"\r\n", b"")


def test_stream_function_call_after_reasoning_is_renumbered_and_intact():
    items = [msg(["<think>need weather</think>"]), fn('{"city":', '"Paris"}')]
    out = run_stream(stream_of(items))[0]
    check_invariants(out)
    args = "".join(o["delta"] for o in objs(out) if o["type"] == "response.function_call_arguments.delta")
    assert args == '{"city":"Paris"}'
    assert {o["output_index"] for o in objs(out) if o["type"].startswith("response.function_call")} == {1}
    final = sdk_final(out)
    assert shape(final.output) == [("reasoning", "need weather"), ("function_call", '{"city":"Paris"}')]


def test_stream_native_reasoning_passes_untouched():
    data = stream_of([native(), msg(["<think>x</think>y"])])
    out, ctx = run_stream(data)
    assert out == data and ctx.stats.native


def test_stream_native_reasoning_after_a_rewritten_message_is_renumbered():
    out, ctx = run_stream(stream_of([msg(["<think>x</think>a"]), native(), msg(["b"], id="msg_2")]))
    check_invariants(out)
    assert ctx.stats.native
    assert shape(sdk_final(out).output) == [("reasoning", "x"), ("message", "a"), ("reasoning", "I thought"),
                                            ("message", "b")]


def test_stream_incomplete_with_an_unclosed_block_closes_the_reasoning_item():
    items = [msg(["<think>x</think>a\n<think>cut of", "f mid"])]
    out = run_stream(stream_of(items, status="incomplete"))[0]
    check_invariants(out)
    last = objs(out)[-1]
    assert last["type"] == "response.incomplete"
    assert shape(last["response"]["output"]) == [("reasoning", "x"), ("message", "a\n"), ("reasoning", "cut off mid")]


def test_stream_incomplete_without_any_done_events_closes_the_items_it_opened():
    items = [msg(["<think>x</think>a\n<think>cut of", "f mid"])]
    out = run_stream(stream_of(items, status="incomplete", unclosed=True))[0]
    check_invariants(out)
    last = objs(out)[-1]["response"]["output"]
    assert shape(last) == [("reasoning", "x"), ("message", "a\n"), ("reasoning", "cut off mid")]


def test_stream_unclosed_message_ending_in_answer_gets_the_final_status():
    out = run_stream(stream_of([msg(["<think>x</think>ans", "wer"])], status="incomplete", unclosed=True))[0]
    items = check_invariants(out)
    assert len(items) == 2
    last = objs(out)[-1]["response"]["output"]
    assert last[1]["status"] == "incomplete" and last[1]["content"][0]["text"] == "answer"


def test_stream_unclosed_message_missing_from_the_final_output_is_closed_by_status():
    evs = upstream_events([msg(["<think>x</think>ans"])], status="failed", unclosed=True)
    evs[-1]["response"]["output"] = []
    out = run_stream(sse_bytes(evs))[0]
    done = [o for o in objs(out) if o["type"] == "response.output_item.done"]
    assert done[-1]["item"]["status"] == "incomplete"
    assert objs(out)[-1]["response"]["output"] == []


def test_stream_failed_response_output_is_rewritten():
    out = run_stream(stream_of([msg(["<think>x</think>a"])], status="failed"))[0]
    check_invariants(out)
    assert objs(out)[-1]["type"] == "response.failed"


def test_stream_summary_events_when_the_request_asks():
    out = run_stream(stream_of([msg(["<think>x", "y</think>hi"])]), request=SUMMARY)[0]
    check_invariants(out)
    got = [(o["type"], o.get("summary_index"), o.get("delta", o.get("text"))) for o in objs(out)
           if "summary" in o["type"]]
    assert got == [("response.reasoning_summary_part.added", 0, None),
                   ("response.reasoning_summary_text.delta", 0, "x"),
                   ("response.reasoning_summary_text.delta", 0, "y"),
                   ("response.reasoning_summary_text.done", 0, "xy"),
                   ("response.reasoning_summary_part.done", 0, None)]
    assert sdk_final(out).output[0].summary[0].text == "xy"


def test_stream_content_off_sends_only_summary_events():
    out = run_stream(stream_of([msg(["<think>x</think>hi"])]), request=SUMMARY, responses_content="off")[0]
    assert not [t for t in types(out) if t.startswith("response.reasoning_text")]
    rs = objs(out)[-1]["response"]["output"][0]
    assert "content" not in rs and rs["summary"] == [{"type": "summary_text", "text": "x"}]


def test_stream_encrypted_content_on_output_item_done_and_in_the_final_output():
    sealer = Sealer(b"k1")
    req = {"model": MODEL, "include": ["reasoning.encrypted_content"]}
    ctx = make_ctx(req, sealer)
    out = run_stream(stream_of([msg(["<think>x</think>hi"])]), ctx=ctx)[0]
    done = [o for o in objs(out) if o["type"] == "response.output_item.done"][0]
    assert sealer.open(done["item"]["encrypted_content"]).text == "x"
    assert objs(out)[-1]["response"]["output"][0]["encrypted_content"] == done["item"]["encrypted_content"]


def test_stream_block_cut_by_an_unknown_event_is_sealed_with_the_first_pair():
    sealer = Sealer(b"k1")
    ctx = make_ctx({"include": ["reasoning.encrypted_content"]}, sealer)
    evs = upstream_events([msg(["<think>x", "</think>hi"])])
    note = {"type": "response.output_text.annotation.added", "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "annotation_index": 0, "annotation": {"type": "url_citation"},
            "sequence_number": 5}
    evs.insert(5, note)  # after the delta "<think>x"
    for n, ev in enumerate(evs):
        ev["sequence_number"] = n
    out = run_stream(sse_bytes(evs), ctx=ctx)[0]
    check_invariants(out)
    rs = objs(out)[-1]["response"]["output"][0]
    assert sealer.open(rs["encrypted_content"]).pair.open == "<think>"


def test_stream_annotation_event_lands_on_the_current_message_piece():
    evs = upstream_events([msg(["<think>x</think>a"])])
    k = next(i for i, e in enumerate(evs) if e["type"] == "response.output_text.done")
    evs.insert(k, {"type": "response.output_text.annotation.added", "item_id": "msg_1", "output_index": 0,
                   "content_index": 0, "annotation_index": 0, "annotation": {"type": "url_citation"}})
    for n, ev in enumerate(evs):
        ev["sequence_number"] = n
    out = run_stream(sse_bytes(evs))[0]
    check_invariants(out)
    note = [o for o in objs(out) if o["type"] == "response.output_text.annotation.added"][0]
    assert (note["output_index"], note["content_index"], note["item_id"]) == (1, 0, "msg_1")


def test_stream_several_parts_and_a_refusal_part():
    evs = upstream_events([msg(["<think>x</think>a"], ["b"])])
    k = next(i for i, e in enumerate(evs) if e["type"] == "response.output_item.done")
    refusal = [{"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 2,
                "part": {"type": "refusal", "refusal": ""}},
               {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0, "content_index": 2,
                "delta": "no"},
               {"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0, "content_index": 2,
                "part": {"type": "refusal", "refusal": "no"}}]
    evs[k:k] = refusal
    evs[k + 3]["item"]["content"].append({"type": "refusal", "refusal": "no"})
    evs[-1]["response"]["output"][0]["content"].append({"type": "refusal", "refusal": "no"})
    for n, ev in enumerate(evs):
        ev["sequence_number"] = n
    out = run_stream(sse_bytes(evs))[0]
    check_invariants(out)
    final = sdk_final(out)
    assert shape(final.output)[0] == ("reasoning", "x")
    assert [p.type for p in final.output[1].content] == ["output_text", "output_text", "refusal"]
    assert [o["content_index"] for o in objs(out) if o["type"] == "response.refusal.delta"] == [2]


def test_stream_refusal_only_message_passes_unchanged():
    evs = upstream_events([msg()])
    refusal = {"type": "refusal", "refusal": "no"}
    evs[3:3] = [{"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0,
                 "content_index": 0, "part": {"type": "refusal", "refusal": ""}},
                {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
                 "delta": "no"},
                {"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0,
                 "content_index": 0, "part": refusal}]
    evs[6]["item"]["content"] = evs[7]["response"]["output"][0]["content"] = [refusal]
    for n, ev in enumerate(evs):
        ev["sequence_number"] = n
    data = sse_bytes(evs)
    assert run_stream(data)[0] == data


def test_stream_message_without_part_events_is_split_at_its_done_event():
    evs = [e for e in upstream_events([msg(["<think>x</think>hi"])])
           if "content_part" not in e["type"] and "output_text" not in e["type"]]
    for n, ev in enumerate(evs):
        ev["sequence_number"] = n
    out = run_stream(sse_bytes(evs))[0]
    check_invariants(out)
    assert shape(sdk_final(out).output) == [("reasoning", "x"), ("message", "hi")]


def test_stream_output_text_done_without_deltas_is_split():
    evs = [e for e in upstream_events([msg(["<think>x</think>hi"])]) if e["type"] != "response.output_text.delta"]
    out = run_stream(sse_bytes(evs))[0]
    check_invariants(out)
    assert shape(sdk_final(out).output) == [("reasoning", "x"), ("message", "hi")]


def test_stream_part_without_text_done_event_is_finished_at_part_done():
    evs = [e for e in upstream_events([msg(["<think>x</think>hi <"])]) if e["type"] != "response.output_text.done"]
    out = run_stream(sse_bytes(evs))[0]
    check_invariants(out)
    assert shape(sdk_final(out).output) == [("reasoning", "x"), ("message", "hi <")]


def test_stream_next_part_without_the_previous_part_done_closes_it():
    evs = [e for e in upstream_events([msg(["<think>x</think>a"], ["b"])])
           if not (e["type"] in ("response.output_text.done", "response.content_part.done")
                   and e["content_index"] == 0)]
    out = run_stream(sse_bytes(evs))[0]
    check_invariants(out)
    assert shape(sdk_final(out).output) == [("reasoning", "x"), ("message", "a|b")]


def test_stream_delta_before_its_part_passes_on_the_message():
    evs = upstream_events([msg(["<think>x</think>a"])])
    evs.insert(3, {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
                   "content_index": 0, "delta": "early"})
    for n, ev in enumerate(evs):
        ev["sequence_number"] = n
    out = run_stream(sse_bytes(evs))[0]
    early = [o for o in objs(out) if o.get("delta") == "early"]
    assert early and early[0]["output_index"] == 0 and early[0]["item_id"] == "msg_1"


def test_stream_empty_deltas_are_dropped():
    out = run_stream(stream_of([msg(["", "<think>x</think>", "", "hi"])]))[0]
    assert [o["delta"] for o in objs(out) if o["type"].endswith("text.delta")] == ["x", "hi"]


def test_stream_done_events_without_a_part_pass_on_the_message():
    evs = upstream_events([msg(["<think>x</think>hi"])])
    k = next(i for i, e in enumerate(evs) if e["type"] == "response.output_item.done")
    evs[k:k] = [{"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 5,
                 "text": "stray"},
                {"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0, "content_index": 6}]
    for n, ev in enumerate(evs):
        ev["sequence_number"] = n
    out = run_stream(sse_bytes(evs))[0]
    stray = [o for o in objs(out) if o.get("content_index") in (5, 6)]
    assert [(o["type"], o["output_index"], o["item_id"]) for o in stray] == [
        ("response.output_text.done", 1, "msg_1"), ("response.content_part.done", 1, "msg_1")]


def test_stream_cut_before_any_text_sends_the_held_events():
    data = sse_bytes(upstream_events([msg(["hi"])])[:4])   # created, in_progress, item and part added
    assert run_stream(data)[0] == data


def test_stream_null_sequence_numbers_stay_null():
    evs = upstream_events([msg(["<think>x</think>hi"])], seq=False)
    for ev in evs:
        ev["sequence_number"] = None
    out = run_stream(sse_bytes(evs))[0]
    assert {o.get("sequence_number", "absent") for o in objs(out)} == {None, "absent"}
    assert shape(objs(out)[-1]["response"]["output"]) == [("reasoning", "x"), ("message", "hi")]


def test_stream_empty_message_passes_unchanged():
    data = stream_of([msg([]), fn("{}")])
    assert run_stream(data)[0] == data


def test_stream_whitespace_only_message_passes_unchanged():
    data = stream_of([msg(["  ", "\n"])])
    out = run_stream(data)[0]
    assert shape(objs(out)[-1]["response"]["output"]) == [("message", "  \n")]


def test_stream_held_text_is_flushed_at_the_end_without_completion():
    evs = upstream_events([msg(["<think>x</think>a <"])])
    evs = evs[: next(i for i, e in enumerate(evs) if e["type"] == "response.output_text.done")]
    out = run_stream(sse_bytes(evs))[0]
    text = "".join(o["delta"] for o in objs(out) if o["type"] == "response.output_text.delta")
    assert text == "a <"
    assert sorted(o["sequence_number"] for o in objs(out)) == [o["sequence_number"] for o in objs(out)]


def test_stream_held_events_of_an_unstarted_message_are_flushed_at_the_end():
    evs = upstream_events([msg(["<"])])[:4]   # created, in_progress, item added, part added
    data = sse_bytes(evs)
    out = run_stream(data + sse_bytes([{"type": "response.output_text.delta", "item_id": "msg_1",
                                         "output_index": 0, "content_index": 0, "delta": "<",
                                         "sequence_number": 4}]))[0]
    assert out.startswith(data) and types(out)[-1] == "response.output_text.delta"


def test_stream_done_marker_flushes_held_text_first():
    evs = upstream_events([msg(["<think>x</think>a <"])])
    evs = evs[: next(i for i, e in enumerate(evs) if e["type"] == "response.output_text.done")]
    out = run_stream(sse_bytes(evs) + b"data: [DONE]\n\n")[0]
    assert out.endswith(b"data: [DONE]\n\n")
    assert "".join(o["delta"] for o in objs(out[:-14]) if o["type"] == "response.output_text.delta") == "a <"


def test_stream_comments_malformed_and_other_events_pass():
    data = (b": keep-alive\n\n" + b"data: {not json\n\n" + b'data: [1, 2]\n\n'
            + b'data: {"type": "error", "message": "x"}\n\n' + stream_of([msg(["<think>x</think>y"])]))
    out, ctx = run_stream(data)
    assert out.startswith(b": keep-alive\n\ndata: {not json\n\ndata: [1, 2]\n\n")
    assert ctx.stats.malformed_events == 1
    assert shape(objs(out[out.index(b"data: {\"type\": \"error\""):])[-1]["response"]["output"]) == [("reasoning", "x"), ("message", "y")]


def test_stream_event_for_an_unknown_item_passes():
    evs = upstream_events([msg(["<think>x</think>a"])])
    evs.insert(2, {"type": "response.output_text.delta", "output_index": 7, "delta": "?", "sequence_number": 1})
    evs[3:] = [dict(e, sequence_number=e["sequence_number"] + 1) for e in evs[3:]]
    out = run_stream(sse_bytes(evs))[0]
    assert objs(out)[2]["output_index"] == 7


def test_stream_abort_sends_the_held_text():
    rw = responses.StreamRewriter(make_ctx())
    evs = upstream_events([msg(["<think>x</think>a <"])])
    sent = []
    for ev in parse(sse_bytes(evs[:5])):
        sent += rw.on_event(ev)
    held = b"".join(rw.abort())
    assert held
    out = b"".join(sent) + held
    assert "".join(o["delta"] for o in objs(out) if o["type"] == "response.output_text.delta") == "a <"
    assert rw.abort() == [] and rw.finish() == []


def test_stream_internal_error_fails_open_with_the_upstreams_events_on_the_clients_numbers(monkeypatch):
    data = stream_of([msg(["<think>x</think>a"])])

    def boom(self, obj, src):
        raise RuntimeError("bug")
    monkeypatch.setattr(responses._Message, "part_done", boom)
    ctx = make_ctx()
    driver = engine.stream_driver(responses, ctx)
    out = b"".join(driver(data) + driver(b""))
    assert driver.failure and ctx.stats.fell_back
    # From the failure on, the upstream's events as they came, but on the numbers the client has:
    # its message is item 1 (after the reasoning item), its events numbered after the inserted ones.
    got, sent = objs(out), objs(data)
    seq = got[-4]["sequence_number"]
    want = [dict(o, sequence_number=seq + k, **({"output_index": 1} if "output_index" in o else {}))
            for k, o in enumerate(sent[-3:], 1)]
    assert got[-3:] == want


def test_stream_sequence_numbers_reuse_the_numbers_of_held_events():
    out = run_stream(stream_of([msg(["<think>", "x", "</think>", "hi"])]))[0]
    seqs = [o["sequence_number"] for o in objs(out)]
    assert seqs == list(range(len(seqs)))  # held events' numbers went to inserted ones: no gaps


# -- the real corpus ----------------------------------------------------------------------------------
CORPUS = corpus_files("responses__")


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_corpus_passes_through_unchanged_whole_and_at_any_chunking(path):
    data = corpus_bytes(path)
    if path.suffix == ".json":
        ctx = make_ctx()
        assert responses.rewrite_body(data, ctx) is None and ctx.stats.native
        return
    rnd = random.Random(path.name)
    for sizes in ([len(data)], [1], [rnd.randint(1, 300) for _ in range(20)], [7, 4096]):
        out, ctx = run_stream(data, rechunk(data, sizes))
        assert out == data, sizes
        assert ctx.stats.native


def test_corpus_streams_read_by_the_sdk_after_the_proxy():
    for path in CORPUS:
        if path.suffix == ".sse":
            final = sdk_final(run_stream(corpus_bytes(path))[0])
            assert final.output and final.output[0].type == "reasoning"


# -- properties ---------------------------------------------------------------------------------------
_ALPHA = st.text(alphabet="ab <>/\né𝄞", min_size=1, max_size=12)
_TAGS = ("<think>", "</think>")


@st.composite
def model_text(draw):
    """Content and closed reasoning blocks; each block starts at a line start."""
    segs = draw(st.lists(st.tuples(st.sampled_from("cr"), _ALPHA), min_size=1, max_size=6))
    text, blocks = "", 0
    for kind, s in segs:
        if kind == "r":
            if text and not text.endswith("\n"):
                text += "\n"
            text += f"<think>{s}</think>"
            blocks += 1
        else:
            text += s
    assume(text.count(_TAGS[0]) == blocks and text.count(_TAGS[1]) == blocks)
    return text


def cut(text, points):
    pts = sorted({p % (len(text) + 1) for p in points})
    bounds = [0, *pts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a] or [""]


def final_output(data):
    return [o for o in objs(data) if o["type"] == "response.completed"][0]["response"]["output"]


_PROP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROP
@given(model_text(), st.lists(st.integers(0, 400), max_size=8), st.lists(st.integers(1, 50), min_size=1, max_size=5))
def test_property_any_chunking_gives_the_same_final_response(text, points, sizes):
    items = [msg([text]), fn('{"x":1}')]
    reference = run_stream(stream_of(items))[0]
    data = stream_of([msg(cut(text, points)), fn('{"x":', "1}")])
    out = run_stream(data, rechunk(data, sizes))[0]
    assert final_output(out) == final_output(reference)
    assert sdk_final(out).to_dict()["output"] == sdk_final(reference).to_dict()["output"]


@_PROP
@given(model_text(), st.lists(st.integers(0, 400), max_size=8), st.booleans())
def test_property_stream_accumulated_equals_the_body_rewrite(text, points, summary):
    items = [msg(cut(text, points)), fn("{}")]
    request = SUMMARY if summary else {"model": MODEL}
    out = run_stream(stream_of(items), request=request)[0]
    body = responses.rewrite_body(body_of(items), make_ctx(request))
    expected = json.loads(body)["output"] if body is not None else final_response(items)["output"]
    assert final_output(out) == expected
    whole = sdk_client(body or body_of(items)).responses.parse(model=MODEL, input="q")
    assert sdk_final(out).to_dict()["output"] == whole.to_dict()["output"]


@_PROP
@given(model_text(), st.lists(st.integers(0, 400), max_size=8))
def test_property_nothing_lost(text, points):
    out = run_stream(stream_of([msg(cut(text, points))]), trim="off")[0]
    rebuilt = ""
    for kind, t in shape(final_output(out)):
        rebuilt += f"<think>{t}</think>" if kind == "reasoning" else t
    assert rebuilt == text
    streamed = "".join(o["delta"] for o in objs(out) if o["type"] in (
        "response.output_text.delta", "response.reasoning_text.delta"))
    assert streamed == text.replace(_TAGS[0], "").replace(_TAGS[1], "")


@_PROP
@given(st.lists(model_text(), min_size=1, max_size=3), st.lists(st.integers(0, 400), max_size=6),
       st.booleans(), st.booleans(), st.booleans())
def test_property_output_index_and_sequence_number_hold_on_every_event(texts, points, summary, event_lines,
                                                                       unclosed):
    items = []
    for k, t in enumerate(texts):
        items.append(msg(cut(t, points), id=f"msg_{k}"))
        items.append(fn("{}", id=f"fc_{k}"))
    if unclosed:
        items.pop()
    request = SUMMARY if summary else {}
    status = "incomplete" if unclosed else "completed"
    data = stream_of(items, status=status, unclosed=unclosed, event_lines=event_lines)
    out = run_stream(data, request=request)[0]
    check_invariants(out)
    if not unclosed:
        sdk_final(out)  # raises on any index or identity mistake


# -- the fast path for output_text.delta (no JSON parse) ----------------------------------------------
class _FullPath(responses.StreamRewriter):
    """The rewriter with its fast path off: every event is parsed in full."""

    def __init__(self, ctx):
        super().__init__(ctx, fast=False)


class _Counted(responses.StreamRewriter):
    """The rewriter, counting the events its fast path handled without on_event."""
    fast = 0

    def on_chunk(self, chunk):
        self._full = False
        out = super().on_chunk(chunk)
        type(self).fast += out is not None and not self._full
        return out

    def on_event(self, ev):
        self._full = True
        return super().on_event(ev)


def _drive(cls, data, request=None, sealer=None, **opts):
    """The stream through the driver in one chunk: each event it frames goes to the byte path
    first (thinkwire.stream), then, where that declines, to on_event."""
    rw = cls(make_ctx(request, sealer, **opts))
    d = StreamDriver(rw)
    out = d(data) + d(b"")
    assert d.failure is None
    assert all(out)
    return b"".join(out)


def _wire(evs, compact=False, seq_first=False, obfuscation=None, logprobs=None, event_lines=True, eol="\n"):
    """Event dicts as SSE bytes in one of the layouts servers use."""
    out = []
    for k, ev in enumerate(evs):
        ev = dict(ev)
        if ev["type"] == "response.output_text.delta":
            if obfuscation is not None:
                ev["obfuscation"] = obfuscation(k)
            if logprobs is not None:
                ev["logprobs"] = logprobs
        if seq_first and "sequence_number" in ev:
            ev = {"type": ev["type"], "sequence_number": ev["sequence_number"], **ev}
        j = (json.dumps(ev, ensure_ascii=False, separators=(",", ":")) if compact
             else json.dumps(ev, ensure_ascii=compact is None))
        head = f"event: {ev['type']}{eol}" if event_lines else ""
        out.append(f"{head}data: {j}{eol}{eol}")
    return "".join(out).encode()


def _normalised(data, sealer):
    """The events, with each mark replaced by what it opens to (marks carry a random nonce)."""
    def fix(o):
        if isinstance(o, dict):
            return {k: (sealer.open(v).text if k == "encrypted_content" else fix(v)) for k, v in o.items()}
        return [fix(x) for x in o] if isinstance(o, list) else o
    return [(e.event, fix(json.loads(e.data))) for e in parse(data)]


_FAST_ITEMS = {
    "reasoning then answer": [msg(["<think>\nLet", " me", " think", " it", " over", ".</think>", "\n\nThe",
                                   " answer", " is", " 42", "."])],
    "plain answer": [msg(["Just", " an", " answer", " with", " no", " reasoning", "."])],
    "boundaries inside deltas": [msg(["a<think>x", " y</think>b", " c<think>", "z</think>", " d", "<think>w",
                                      "</think>", "e", " f"]), fn('{"x":', "1}")],
    "held text and escapes": [msg(["<", "thi", "nk>", "q\"uo\\te", " é𝄞\u2028", "\t\x01", "</thi", "nk>",
                                   "<", "b>", " end", "<"])],
    "empty deltas": [msg(["", "<think>", "", "r", "</think>", "", "a", ""])],
    "several parts and messages": [msg(["<think>r1</think>", "a1", " b1"], ["c", " <think>r2", "</think>d"]),
                                   fn("{}"), native(), msg(["x", "<think>y</think>", "z"], id="msg_2")],
    "answer first then reasoning": [msg(["The", " answer", "\n<think>", "why", " so", "</think>", "ok"])],
    "message without an id": [msg(["<think>r", "</think>a", " b", "<think>s</think>", "c", " d"], id=None)],
}
_FAST_OPTS = {
    "default": {},
    "summary": {"request": SUMMARY},
    "summary without content": {"request": SUMMARY, "responses_content": "off"},
    "summary option": {"responses_summary": "on"},
    "trim off": {"trim": "off"},
}
_FAST_LAYOUTS = {
    "sdk-like": {},
    "ascii escapes": {"compact": None},
    "compact, number first (the bench)": {"compact": True, "seq_first": True},
    "obfuscation": {"compact": True, "seq_first": True, "obfuscation": lambda k: "abc"[: k % 4]},
    "obfuscation with escapes": {"obfuscation": lambda k: "\\u00e9" if k % 2 else "é\""},
    "logprobs": {"logprobs": [{"token": "x", "logprob": -0.1}]},
    "no event lines, CRLF": {"event_lines": False, "eol": "\r\n"},
}


@pytest.mark.parametrize("items", _FAST_ITEMS, ids=str)
@pytest.mark.parametrize("opts", _FAST_OPTS, ids=str)
@pytest.mark.parametrize("layout", _FAST_LAYOUTS, ids=str)
def test_fast_path_sends_the_same_bytes_as_the_full_path(items, opts, layout):
    for unclosed in (False, True):
        its = _FAST_ITEMS[items]
        evs = upstream_events(its, status="incomplete" if unclosed else "completed", unclosed=unclosed)
        data = _wire(evs, **_FAST_LAYOUTS[layout])
        fast = _drive(_Counted, data, **_FAST_OPTS[opts])
        full = _drive(_FullPath, data, **_FAST_OPTS[opts])
        assert fast == full
        check_invariants(fast)
        if not unclosed:
            kw = {"reasoning": {"summary": "auto"}} if "request" in _FAST_OPTS[opts] else {}
            assert sdk_final(fast, **kw).to_dict() == sdk_final(full, **kw).to_dict()


def test_fast_path_handles_most_deltas_and_sends_plain_ones_as_they_came():
    toks = [f" w{k}" for k in range(200)]
    _Counted.fast = 0
    data = _wire(upstream_events([msg(toks)]), compact=True, seq_first=True)
    assert _drive(_Counted, data) == data
    assert _Counted.fast >= 198
    _Counted.fast = 0
    data = _wire(upstream_events([msg(["<think>\nhm"] + toks + ["</think>\n\nSo"] + toks)]))
    out = _drive(_Counted, data)
    assert out == _drive(_FullPath, data)
    assert _Counted.fast >= 390
    assert sdk_final(out).output_text == "So" + "".join(toks)


def test_fast_path_with_marks_matches_the_full_path():
    sealer = Sealer(b"k")
    request = {"model": MODEL, "include": ["reasoning.encrypted_content"]}
    data = _wire(upstream_events(_FAST_ITEMS["boundaries inside deltas"]), compact=True, seq_first=True)
    fast = _drive(responses.StreamRewriter, data, request, sealer)
    assert _normalised(fast, sealer) == _normalised(_drive(_FullPath, data, request, sealer), sealer)


def test_fast_path_keeps_the_numbering_of_held_and_inserted_events():
    # Held text lends its number, a block adds events: every later number shifts the same way.
    evs = upstream_events([msg(["<", "think>r", "</think>", "a", " b", " c"])])
    data = _wire(evs, compact=True, seq_first=True)
    fast = _drive(_Counted, data)
    assert fast == _drive(_FullPath, data)
    seqs = [o["sequence_number"] for o in objs(fast)]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_fast_path_declines_where_the_full_path_decides():
    d = lambda i, delta, s, **kw: {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": i,
                                   "content_index": 0, "delta": delta, "logprobs": [], "sequence_number": s, **kw}
    evs = upstream_events([msg(["<think>a", "</think>b"])])
    done = next(k for k, e in enumerate(evs) if e["type"] == "response.output_text.done")
    # A delta between output_text.done and content_part.done, one after the part, one after the item,
    # and one for an item that never was: each shaped like the learned one.
    evs.insert(done + 1, d(0, "late", 0))
    evs.insert(done + 3, d(0, "later", 0))
    item_done = next(k for k, e in enumerate(evs) if e["type"] == "response.output_item.done")
    evs.insert(item_done + 1, d(0, "latest", 0))
    evs.insert(item_done + 2, d(7, "nowhere", 0))
    for n, e in enumerate(evs):
        e["sequence_number"] = n
    data = _wire(evs)
    assert _drive(responses.StreamRewriter, data) == _drive(_FullPath, data)


def test_fast_path_without_any_number_sent_yet_takes_the_full_path():
    evs = [e for e in upstream_events([msg(["", "a", "<think>r</think>", "b"])])]
    for e in evs:   # only the deltas carry numbers; the first one, empty, sends nothing
        if e["type"] != "response.output_text.delta":
            e.pop("sequence_number")
    data = _wire(evs)
    assert _drive(_Counted, data) == _drive(_FullPath, data)


@pytest.mark.parametrize("data", [
    '{"type":"response.output_text.delta","output_index":0,"delta":"x","logprobs":[{"t":1}],"sequence_number":1}',
    '{"type":"response.output_text.delta","output_index":0,"delta":"x","sequence_number":true}',
    '{"type":"response.output_text.delta","output_index":0,"delta":"x","sequence_number":-1}',
    '{"type":"response.output_text.delta","output_index":"0","delta":"x","sequence_number":1}',
    '{"type":"response.output_text.delta","output_index":0,"delta":null,"sequence_number":1}',
    '{"type":"response.output_text.delta","output_index":0,"delta":"x"}',
    '{"type":"response.output_text.delta","output_index":0,"delta":"x","sequence_number":"1","sequence_number":1}',
    '{"type":"response.output_text.delta","output_index":0,"delta":"x","sequence_number":2,"sequence_number":1}',
    '{"type":"response.output_text.delta","output_index":0,"delta":"y","delta":"x","sequence_number":1}',
    '{"type":"response.output_text.delta","output_index":0,"delta":"x","sequence_number":1,"obfuscation":null}',
    '{"type":"response.output_text.delta","output_index":0,"d\\u0065lta":"x","sequence_number":1}',
    '{"type":"response.output_text.delta","output_index":0,"delta":"x","d\\u0065lta":"x","sequence_number":1}',
])
def test_no_shape_is_learned_from_events_it_cannot_read_safely(data):
    ev = parse(f"data: {data}\n\n".encode())[0]
    assert responses._learn(ev, json.loads(data), _RULES) is None


_RULES = make_ctx().rules(MODEL)


def _read(learned, data):
    """The slots' values the learned shape reads from the event whose data is `data`, or None."""
    m = learned.shape.match(f"data: {data}\n\n".encode())
    got = slot_text(m, learned.shape.text, _RULES) if m is not None else None
    return learned.values(m, got[0]) if got is not None else None


def test_a_shape_reads_only_events_with_its_text_around_valid_values():
    data = '{"type":"response.output_text.delta","sequence_number":5,"output_index":0,"delta":"x","obfuscation":"ab"}'
    learned = responses._learn(parse(f"data: {data}\n\n".encode())[0], json.loads(data), _RULES)
    assert _read(learned, data) == [5, "x", "ab"]
    assert _read(learned, data.replace(":5,", ":50,").replace('"x"', '"\\u00e9"')) == [50, "é", "ab"]
    for bad in (data.replace(":5,", ":05,"), data.replace(":5,", ":5.0,"), data.replace('"x"', '"\x01"'),
                data.replace('"x"', "1"), data.replace('"ab"', '"ab\\q"'), data[:-1] + ',"more":1}',
                data.replace("output_index", "output_indeks")):
        assert _read(learned, bad) is None, bad


def test_no_shape_is_learned_from_events_framed_otherwise():
    # The byte path reads events as sse.encode frames them (LF, `data: `): others are parsed in full.
    data = '{"type":"response.output_text.delta","sequence_number":5,"output_index":0,"delta":"x"}'
    for raw in (f"data: {data}\r\n\r\n", f"data:{data}\n\n"):
        assert responses._learn(parse(raw.encode())[0], json.loads(data), _RULES) is None


def test_text_is_held_once_and_comes_back_whole():
    t = responses.HeldText()
    pieces = [str(k % 10) * (k % 3) for k in range(64 * 64 * 2 + 77)]
    for k, p in enumerate(pieces):
        t.add(p)
        if k == 5000:
            assert t.value() == "".join(pieces[:k + 1])
    assert t.value() == "".join(pieces)
    assert t.value() == "".join(pieces)


def test_dumps_falls_back_to_the_json_encoder(monkeypatch):
    import json.encoder as enc
    monkeypatch.setattr(enc, "c_make_encoder", None)
    assert jsonio._make_dumps()({"a": "é"}) == '{"a":"é"}'
    made = []

    def other(*args):   # an encoder that reads its arguments otherwise: each one says something else
        made.append(args)
        return lambda o, level, n=len(made): [str(n)]
    monkeypatch.setattr(enc, "c_make_encoder", other)
    assert jsonio._make_dumps().fallback   # json.JSONEncoder.encode, behind the kept numbers


@pytest.mark.parametrize("content", [[{"type": "reasoning_text", "text": ""}], None])
def test_way_back_reads_the_summary_when_the_content_has_no_text(content):
    item = {"type": "reasoning", "id": "rs_x_0", "content": content,
            "summary": [{"type": "summary_text", "text": "from the summary"}]}
    req = {"model": MODEL, "input": [item, {"type": "message", "role": "assistant",
                                            "content": [{"type": "output_text", "text": "hi"}]}]}
    new = json.loads(responses.restore_request(json.dumps(req).encode(), make_ctx(req, restore="inline")))
    assert new["input"][0]["content"][0]["text"].startswith("<think>from the summary</think>")


@_PROP
@given(st.lists(model_text(), min_size=1, max_size=2), st.lists(st.integers(0, 400), max_size=10),
       st.sampled_from(sorted(_FAST_OPTS)), st.sampled_from(sorted(_FAST_LAYOUTS)), st.booleans())
def test_property_fast_path_sends_the_same_bytes_as_the_full_path(texts, points, opts, layout, unclosed):
    items = [msg(cut(t, points), id=f"msg_{k}") for k, t in enumerate(texts)]
    evs = upstream_events(items, status="incomplete" if unclosed else "completed", unclosed=unclosed)
    data = _wire(evs, **_FAST_LAYOUTS[layout])
    assert _drive(responses.StreamRewriter, data, **_FAST_OPTS[opts]) == _drive(_FullPath, data, **_FAST_OPTS[opts])


def test_deltas_that_differ_in_more_than_their_slots_stop_the_learning():
    evs = upstream_events([msg([f"t{k}" for k in range(60)])])
    for k, e in enumerate(evs):
        e["stamp"] = k   # a field that changes on every event: no shape fits the next delta
    data = _wire(evs)
    rw = responses.StreamRewriter(make_ctx())
    p = SSEParser()
    out = b"".join(b for ev in p.feed(data) for b in rw.on_event(ev))
    assert out == data and rw._shape_c is None and rw._misses == 16


def test_a_non_numeric_content_index_fails_open_before_any_text_is_fed():
    data = stream_of([msg(["a\n<", "think></think>"])])
    data = data.replace(b'"content_index": 0, "part"', b'"content_index": [], "part"', 1)
    ctx = make_ctx()
    driver = engine.stream_driver(responses, ctx)
    out = b"".join(driver(data) + driver(b""))
    assert ctx.stats.fell_back and ctx.stats.fell_back == "the rewrite raised TypeError"
    deltas = [o["delta"] for o in objs(out) if o["type"] == "response.output_text.delta"]
    assert deltas == ["a\n<", "think></think>"]  # as the upstream sent them, once


def test_a_non_numeric_output_index_of_an_unknown_item_passes_unchanged():
    data = stream_of([msg(["plain"])]).replace(b'"output_index": 0, "item": {"id": "msg_1", "type": "message", '
                                                b'"role": "assistant", "status": "completed"',
                                                b'"output_index": [0], "item": {"id": "msg_1", "type": "message", '
                                                b'"role": "assistant", "status": "completed"', 1)
    out, _ = run_stream(data)
    assert b'"output_index": [0]' in out or b'"output_index":[0]' in out


# -- markup only, and events under another output_index -----------------------------------------
def test_a_message_of_only_empty_blocks_becomes_an_empty_message_in_a_body():
    new = responses.rewrite_body(body_of([msg(["<think>\n\n</think>\n\n"])]), make_ctx())
    assert shape(json.loads(new)["output"]) == [("message", "")]


def test_a_message_of_only_empty_blocks_becomes_an_empty_message_in_a_stream():
    for deltas in (["<think></think>"], ["<think>", "\n\n", "</think>", "\n\n"], ["<th", "ink></thi", "nk>"]):
        out, _ = run_stream(stream_of([msg(deltas)]))
        check_invariants(out)
        assert shape(sdk_final(out).output) == [("message", "")], deltas
        assert "think>" not in out.decode()


def _misnumbered(items, keep_item_id=True):
    """The upstream's events with every event of item 0 but its output_item.added under index 1."""
    evs = upstream_events(items)
    for ev in evs:
        if ev.get("output_index") == 0 and ev["type"] != "response.output_item.added":
            ev["output_index"] = 1
            if not keep_item_id and "item_id" in ev:
                ev["item_id"] = "msg_elsewhere"
    return evs


def test_events_under_another_output_index_follow_their_item_id():
    out, _ = run_stream(sse_bytes(_misnumbered([msg(["<think>r</think>", "hi"])])))
    check_invariants(out)
    assert shape(sdk_final(out).output) == [("reasoning", "r"), ("message", "hi")]


def test_text_events_for_an_item_never_added_pass_through_and_are_not_sent_twice():
    out, _ = run_stream(sse_bytes(_misnumbered([msg(["<think>r</think>", "hi"])], keep_item_id=False)))
    deltas = [o["delta"] for o in objs(out) if o["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "<think>r</think>hi"      # the upstream's own, once


# -- a tag cut off at the token limit: the text's end waits for the response's status -----------
def _answer_texts(out):
    """(the answer the client's deltas spell, the message texts of its final output)."""
    evs = objs(out)
    said = "".join(o["delta"] for o in evs if o["type"] == "response.output_text.delta")
    final = [t for k, t in shape(evs[-1]["response"]["output"]) if k == "message"]
    return said, final


@pytest.mark.parametrize("status,want", [("incomplete", "The answer is 4. "), ("completed", "The answer is 4. <thi")])
def test_stream_a_tail_that_starts_a_tag_goes_only_when_the_output_was_cut_there(status, want):
    out, _ = run_stream(stream_of([msg(["The answer is 4. <th", "i"])], status=status))
    check_invariants(out)
    assert _answer_texts(out) == (want, [want])
    if status == "completed":   # (the SDK's accumulator reads a completed response only)
        assert sdk_final(out).output_text == want


def test_stream_the_held_end_goes_in_the_order_it_came_before_the_final_event():
    out, _ = run_stream(stream_of([msg(["Partial <thi"]), fn('{"city": "Paris"}')], status="incomplete"))
    check_invariants(out)
    kinds = [o["type"] for o in objs(out)]
    assert kinds[-6:] == ["response.output_item.done", "response.output_item.added",
                          "response.function_call_arguments.delta", "response.function_call_arguments.done",
                          "response.output_item.done", "response.incomplete"]
    assert _answer_texts(out) == ("Partial ", ["Partial "])


def test_stream_past_the_held_bounds_the_tail_is_decided_as_not_cut_off():
    # More events after the text's done than are held: it goes on as at a stop (the tail stays).
    from thinkwire.surfaces.responses.stream import HELD_MAX
    evs = upstream_events([msg(["Partial <thi"]), fn(*['{"a": 1}'[i:i + 1] for i in range(8)] * 10)],
                          status="incomplete")
    assert sum(e["type"] == "response.function_call_arguments.delta" for e in evs) > HELD_MAX
    out, _ = run_stream(sse_bytes(evs))
    check_invariants(out)
    assert _answer_texts(out) == ("Partial <thi", ["Partial <thi"])


def test_stream_that_ends_while_a_text_end_is_held_sends_it_all():
    evs = upstream_events([msg(["Partial <thi"])], status="incomplete")
    cut = [e for e in evs if e["type"] != "response.incomplete"]   # the stream ends before its status
    out, _ = run_stream(sse_bytes(cut))
    kinds = [o["type"] for o in objs(out)]
    assert kinds[-3:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert [o["text"] for o in objs(out) if o["type"] == "response.output_text.done"] == ["Partial <thi"]
