"""The Anthropic Messages surface: whole bodies, streams, the real corpus, and properties.

Outputs are read back with the official anthropic SDK (its non-streaming client and its
`messages.stream()` helper) over an in-process transport, so what is checked is what a client sees.
"""

import json
import random

import anthropic
import httpx2
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from conftest import CORPUS, corpus_bytes, corpus_files, make_ctx
from harness import rechunk
from thinkwire import engine, jsonnum
from thinkwire.marks import Sealer
from thinkwire.rules import TagPair
from thinkwire.sse import SSEParser
from thinkwire.stream import StreamDriver
from thinkwire.surfaces import messages
from support.stored import stored
from support.messages import (  # noqa: F401  (builders shared with other test modules)
    ASK, SEALER, _client, body, ctx_for, final_block, native_thinking, redacted, run_body, run_stream, sdk_body, sdk_stream, sse_event, stream, stream_objs, text, tool,
)

THINK = TagPair("<think>", "</think>")


# -- building upstream responses ----------------------------------------------------------


# -- running the rewrite --------------------------------------------------------------------


def events(data):
    p = SSEParser()
    return p.feed(data) + p.finish()


def objs_of(data):
    return [json.loads(e.data) for e in events(data) if e.data]


def block_types(msg):
    return [b["type"] for b in msg["content"]]


# -- paths and shapes -----------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/v1/messages", "/messages", "/anthropic/v1/messages",
                                  "/v1/messages?beta=true", "/v1/messages/"])
def test_messages_paths_match(path):
    assert messages.matches(path)


@pytest.mark.parametrize("path", ["/v1/messages/count_tokens", "/v1/messages/batches",
                                  "/v1/messages/batches/msgbatch_1/results", "/v1/chat/completions",
                                  "/v1/messages_other", "/v1/messages/count_tokens?beta=true"])
def test_other_paths_do_not_match(path):
    assert not messages.matches(path)


def test_messages_is_registered_and_chosen_by_path():
    settings_ = make_ctx().settings
    assert engine.SURFACES["messages"] is messages
    assert engine.surface_for_path("/v1/messages?beta=true", settings_) is messages
    assert engine.surface_for_path("/v1/messages", make_ctx(messages="off").settings) is None


def test_looks_like_bodies_and_stream_events():
    assert messages.looks_like(json.loads(body(text("hi"))))
    assert messages.looks_like({"type": "message_start", "message": {}})
    assert messages.looks_like({"type": "content_block_delta", "index": 0})
    assert not messages.looks_like({"choices": []})
    assert not messages.looks_like({"type": "message", "content": "hi"})


# -- whole bodies ---------------------------------------------------------------------------
def test_body_reasoning_becomes_a_thinking_block_before_the_answer():
    out, changed, ctx = run_body(body(text("<think>\nx\n</think>\n\nhi")))
    assert changed
    msg = sdk_body(out)
    assert msg["content"] == [{"type": "thinking", "thinking": "x"}, {"type": "text", "text": "hi"}]
    assert (ctx.stats.blocks, ctx.stats.reasoning_chars) == (1, 1)


def test_body_several_blocks_keep_their_order():
    out, _, _ = run_body(body(text("<think>a</think>b\n<think>c</think>d")))
    assert json.loads(out)["content"] == [
        {"type": "thinking", "thinking": "a"}, {"type": "text", "text": "b\n"},
        {"type": "thinking", "thinking": "c"}, {"type": "text", "text": "d"}]
    # Written with no whitespace between, the answer's pieces get a line break (a client that
    # joins the text blocks shows no words run together).
    out, _, _ = run_body(body(text("<think>a</think>b<think>c</think>d")))
    assert [b.get("text") for b in json.loads(out)["content"]] == [None, "b", None, "\nd"]


def test_body_without_markup_is_unchanged():
    data = body(text("just an answer"), tool())
    assert messages.rewrite_body(data, ctx_for()) is None


def test_body_that_is_not_json_raises_value_error():
    with pytest.raises(ValueError):
        messages.rewrite_body(b"<html>oops", ctx_for())


@pytest.mark.parametrize("data", [b"[1, 2]", b'{"type": "error", "error": {"type": "overloaded_error"}}',
                                  b'{"content": "a string"}'])
def test_body_of_another_shape_is_unchanged(data):
    assert messages.rewrite_body(data, ctx_for()) is None


@pytest.mark.parametrize("native", [native_thinking(), redacted()])
def test_body_with_upstream_native_thinking_passes_untouched(native):
    ctx = ctx_for()
    assert messages.rewrite_body(body(native, text("<think>x</think>hi")), ctx) is None
    assert ctx.stats.native


def test_body_keeps_tool_use_and_unknown_blocks_in_order():
    other = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}}
    out, _, _ = run_body(body(text("<think>plan</think>Let me look."), other, tool()))
    content = json.loads(out)["content"]
    assert block_types({"content": content}) == ["thinking", "text", "server_tool_use", "tool_use"]
    assert content[2] == other
    assert content[3] == final_block(tool())


def test_body_reasoning_only_gives_no_empty_text_block():
    out, _, _ = run_body(body(text("<think>all thought</think>\n")))
    assert json.loads(out)["content"] == [{"type": "thinking", "thinking": "all thought"}]


def test_body_empty_reasoning_gives_no_thinking_block():
    out, _, _ = run_body(body(text("<think>\n</think>\n\nhi")))
    assert json.loads(out)["content"] == [{"type": "text", "text": "hi"}]


def test_body_empty_reasoning_between_answer_parts_keeps_one_text_block():
    data = body(text("a\n<think> </think>b"))
    out, _, _ = run_body(data)
    assert json.loads(out)["content"] == [{"type": "text", "text": "a\nb"}]
    assert sdk_stream(run_stream(stream(text("a\n<think> </think>b")))[0])["content"] == json.loads(out)["content"]


def test_body_text_block_with_nothing_left_stays_as_one_empty_text_block():
    out, _, _ = run_body(body(text("<think> </think>"), tool()))
    assert json.loads(out)["content"][0] == {"type": "text", "text": ""}


def test_body_text_blocks_keep_their_other_keys():
    out, _, _ = run_body(body(text("<think>x</think>hi", citations=None)))
    assert json.loads(out)["content"][1] == {"type": "text", "citations": None, "text": "hi"}


def test_body_later_text_blocks_do_not_start_inside_reasoning():
    # A model whose template opens the block in the prompt: only the start of the output is inside.
    out, _, _ = run_body(body(text("plan</think>Checking."), tool(), text("Done.")), starts_inside="on")
    assert json.loads(out)["content"] == [
        {"type": "thinking", "thinking": "plan"}, {"type": "text", "text": "Checking."},
        final_block(tool()), {"type": "text", "text": "Done."}]


def test_body_signature_off_has_no_signature_key():
    out, _, _ = run_body(body(text("<think>x</think>hi")), signature="off")
    assert "signature" not in json.loads(out)["content"][0]


def test_body_signature_unsigned_has_an_empty_signature():
    out, _, _ = run_body(body(text("<think>x</think>hi")), signature="unsigned")
    assert json.loads(out)["content"][0] == {"type": "thinking", "thinking": "x", "signature": ""}
    assert sdk_body(out)["content"][0]["signature"] == ""


def test_body_signature_redacted_seals_the_reasoning_in_data():
    out, _, _ = run_body(body(text("<thinking>secret plan</thinking>hi")), signature="redacted")
    block = json.loads(out)["content"][0]
    assert block["type"] == "redacted_thinking" and set(block) == {"type", "data"}
    assert b"secret plan" not in out
    opened = SEALER.open(block["data"])
    assert (opened.text, opened.pair) == ("secret plan", TagPair("<thinking>", "</thinking>"))
    assert Sealer(b"another key").open(block["data"]) is None


def test_body_display_omitted_gives_empty_thinking_and_a_mark_as_signature():
    request = {"model": "m", "thinking": {"type": "adaptive", "display": "omitted"}}
    out, _, _ = run_body(body(text("<think>quiet</think>hi")), request=request, signature="unsigned")
    block = sdk_body(out)["content"][0]
    assert block["type"] == "thinking" and block["thinking"] == ""
    assert SEALER.open(block["signature"]).text == "quiet"
    assert b"quiet" not in out


@pytest.mark.parametrize("request_, signature", [({"thinking": {"display": "omitted"}}, "off"),
                                                 (None, "redacted")])
def test_body_marks_fall_back_to_off_without_a_sealer(request_, signature):
    out, _, _ = run_body(body(text("<think>x</think>hi")), ctx=make_ctx(request_, None, signature=signature))
    assert json.loads(out)["content"][0] == {"type": "thinking", "thinking": "x"}


@pytest.mark.parametrize("thinking", [{"type": "enabled", "budget_tokens": 2048}, "omitted", None])
def test_body_display_shown_unless_request_says_omitted(thinking):
    out, _, _ = run_body(body(text("<think>x</think>hi")), request={"thinking": thinking})
    assert json.loads(out)["content"][0] == {"type": "thinking", "thinking": "x"}


def test_body_rewrite_counts_reasoning_in_the_stats():
    _, _, ctx = run_body(body(text("<think>ab</think>c<think>de</think>f")))
    assert ctx.stats.blocks == 2 and ctx.stats.reasoning_chars == 4


# -- streams --------------------------------------------------------------------------------
def test_stream_reasoning_and_answer_become_thinking_and_text_blocks():
    out, ctx = run_stream(stream(text("<think>\nx", "y\n</think>\n\n", "hi")))
    msg = sdk_stream(out)
    assert msg["content"] == [{"type": "thinking", "thinking": "xy"}, {"type": "text", "text": "hi"}]
    assert ctx.tally().reasoning_chars == 2


def test_stream_every_event_has_a_matching_event_line():
    out, _ = run_stream(stream(text("<think>a</think>b<think>c</think>d"), tool(), names=False))
    evs = [e for e in events(out) if e.data]
    created = [e for e in evs if json.loads(e.data)["type"].startswith("content_block")]
    assert created and all(e.event == json.loads(e.data)["type"] for e in created)


def test_stream_without_markup_passes_byte_identical():
    data = stream(text("Hello", " there, ", "friend."), tool(), ping=False)
    out, ctx = run_stream(data)
    assert out == data
    assert ctx.tally().blocks == 0


def test_stream_ping_inside_a_withheld_text_start_goes_out_first_unchanged():
    # A text block's start waits for its first text (it may turn out to be thinking).
    data = stream(text("Hello"))
    out, _ = run_stream(data)
    assert sorted(e.raw for e in events(out)) == sorted(e.raw for e in events(data))
    assert [json.loads(e.data)["type"] for e in events(out)][1:3] == ["ping", "content_block_start"]


def test_stream_several_blocks_in_order_with_tool_use_renumbered():
    data = stream(text("<think>a</think>b\n", "<think>c</think>d"), tool())
    out, _ = run_stream(data)
    msg = sdk_stream(out)
    assert msg["content"] == [
        {"type": "thinking", "thinking": "a"}, {"type": "text", "text": "b\n"},
        {"type": "thinking", "thinking": "c"}, {"type": "text", "text": "d"},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]
    tool_events = [o for o in objs_of(out) if o.get("index") == 4]
    assert [o["type"] for o in tool_events] == ["content_block_start", "content_block_delta",
                                                "content_block_delta", "content_block_stop"]
    assert "".join(o["delta"]["partial_json"] for o in tool_events[1:3]) == '{"city": "Paris"}'


def test_stream_reasoning_only_opens_no_text_block():
    out, _ = run_stream(stream(text("<think>", "only thought", "</think>", "\n\n"), tool()))
    assert block_types(sdk_stream(out)) == ["thinking", "tool_use"]


def test_stream_empty_reasoning_opens_no_thinking_block():
    out, _ = run_stream(stream(text("<think>\n", "</think>\n\n", "hi")))
    assert sdk_stream(out)["content"] == [{"type": "text", "text": "hi"}]


def test_stream_empty_text_block_stays_one_empty_text_block():
    data = stream(text(), tool(), ping=False)
    out, _ = run_stream(data)
    assert out == data
    out2, _ = run_stream(stream(text("<think>", "</think>"), tool()))
    assert sdk_stream(out2)["content"][0] == {"type": "text", "text": ""}


def test_stream_holds_back_only_a_possible_tag():
    out, _ = run_stream(stream(text("Hi <", "b> and 2 <", "3 <thin", "k")))
    assert sdk_stream(out)["content"][0] == {"type": "text", "text": "Hi <b> and 2 <3 <think"}
    deltas = [o["delta"]["text"] for o in objs_of(out) if o["type"] == "content_block_delta"]
    assert deltas == ["Hi ", "<b> and 2 ", "<3 ", "<think"]


def test_stream_text_in_the_start_event_is_split_too():
    objs = stream_objs(text("</think>answer"))
    objs[1]["content_block"]["text"] = "<think>why"
    data = b"".join(sse_event(o) for o in objs)
    msg = sdk_stream(run_stream(data)[0])
    assert msg["content"] == [{"type": "thinking", "thinking": "why"}, {"type": "text", "text": "answer"}]


def test_stream_non_text_delta_goes_to_a_text_block():
    citation = {"type": "char_location", "cited_text": "x", "document_index": 0,
                "document_title": None, "start_char_index": 0, "end_char_index": 1}
    for chunks, expect in [(["<think>a</think>", "b"], ["thinking", "text"]),
                           (["<think>a"], ["thinking", "text"]),
                           (["b"], ["text"])]:
        objs = stream_objs(text(*chunks))
        stop = next(k for k, o in enumerate(objs) if o["type"] == "content_block_stop")
        objs.insert(stop, {"type": "content_block_delta", "index": 0,
                           "delta": {"type": "citations_delta", "citation": citation}})
        data = b"".join(sse_event(o) for o in objs)
        msg = sdk_stream(run_stream(data)[0])
        assert block_types(msg)[:len(expect)] == expect
        assert any(b.get("citations") == [citation] for b in msg["content"])


def test_stream_with_upstream_native_thinking_passes_byte_identical():
    data = stream(native_thinking(), text("<think>x</think>hi"), redacted(), tool())
    out, ctx = run_stream(data)
    assert out == data
    assert ctx.stats.native


def test_stream_native_thinking_after_a_rewrite_keeps_indices_consistent():
    data = stream(text("<think>x</think>hi"), native_thinking(), text("<think>y</think>z"))
    out, ctx = run_stream(data)
    msg = sdk_stream(out)
    assert ctx.stats.native
    assert msg["content"] == [{"type": "thinking", "thinking": "x"}, {"type": "text", "text": "hi"},
                              native_thinking(), {"type": "text", "text": "<think>y</think>z"}]


def test_stream_signature_off_sends_no_signature():
    out, _ = run_stream(stream(text("<think>x</think>hi")), signature="off")
    assert b"signature" not in out
    assert sdk_stream(out)["content"][0] == {"type": "thinking", "thinking": "x"}


def kinds_of(out):
    return [o["type"] if o["type"] != "content_block_delta" else o["delta"]["type"] for o in objs_of(out)]


def test_stream_signature_unsigned_ends_the_block_with_an_empty_signature_delta():
    # Clients that read the signature only from signature_delta (the Vercel AI SDK) still get a string.
    out, _ = run_stream(stream(text("<think>x</think>hi"), ping=False), signature="unsigned")
    kinds = kinds_of(out)
    assert kinds[:5] == ["message_start", "content_block_start", "thinking_delta", "signature_delta",
                         "content_block_stop"]
    assert objs_of(out)[3]["delta"] == {"type": "signature_delta", "signature": ""}
    assert sdk_stream(out)["content"][0] == {"type": "thinking", "thinking": "x", "signature": ""}


def test_signed_is_the_default_policy():
    ctx = make_ctx(None, SEALER)
    assert messages.mode(ctx) == "signed"


def test_body_signed_block_shows_its_text_and_a_mark_of_text_and_pair_as_signature():
    out, _, _ = run_body(body(text("<thinking>\nplan</thinking>hi")), ctx=make_ctx(None, SEALER))
    block = sdk_body(out)["content"][0]
    assert block["type"] == "thinking" and block["thinking"] == "plan"
    opened = SEALER.open(block["signature"])
    # (the pair as the model wrote it: the line break trimmed after the opening tag included)
    assert (opened.text, opened.pair) == ("plan", TagPair("<thinking>\n", "</thinking>"))


def test_stream_signed_streams_text_live_then_one_signature_delta_before_the_stop():
    out, _ = run_stream(stream(text("<think>a", "b", "c</think>", "hi<think>d</think>e"), ping=False),
                        ctx=make_ctx(None, SEALER))
    objs = objs_of(out)
    kinds = kinds_of(out)
    assert objs[1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert kinds[2:7] == ["thinking_delta", "thinking_delta", "thinking_delta", "signature_delta",
                          "content_block_stop"]
    assert kinds.count("signature_delta") == 2   # one per thinking block, each sealing its own text
    msg = sdk_stream(out)
    assert [b["thinking"] for b in msg["content"] if b["type"] == "thinking"] == ["abc", "d"]
    assert [SEALER.open(b["signature"]).text for b in msg["content"] if b["type"] == "thinking"] == ["abc", "d"]


def test_signed_falls_back_to_unsigned_without_a_sealer():
    out, _, _ = run_body(body(text("<think>x</think>hi")), ctx=make_ctx(None, None))
    assert json.loads(out)["content"][0] == {"type": "thinking", "thinking": "x", "signature": ""}
    out, _ = run_stream(stream(text("<think>x</think>hi")), ctx=make_ctx(None, None))
    assert sdk_stream(out)["content"][0] == {"type": "thinking", "thinking": "x", "signature": ""}


def test_stream_signature_redacted_sends_marks_and_no_reasoning_text():
    out, _ = run_stream(stream(text("<think>first ", "secret</think>mid<think>second</think>end")),
                        signature="redacted")
    assert b"secret" not in out and b"thinking_delta" not in out
    content = sdk_stream(out)["content"]
    assert block_types({"content": content}) == ["redacted_thinking", "text", "redacted_thinking", "text"]
    assert [SEALER.open(content[i]["data"]).text for i in (0, 2)] == ["first secret", "second"]


def test_stream_display_omitted_sends_one_signature_delta_at_the_block_end():
    ctx = ctx_for({"thinking": {"type": "adaptive", "display": "omitted"}})
    out, _ = run_stream(stream(text("<think>a", "b", "c</think>", "hi")), ctx=ctx)
    objs = objs_of(out)
    assert not any(o.get("delta", {}).get("type") == "thinking_delta" for o in objs)
    kinds = [o["type"] if o["type"] != "content_block_delta" else o["delta"]["type"] for o in objs]
    k = kinds.index("signature_delta")
    assert kinds.count("signature_delta") == 1 and kinds[k + 1] == "content_block_stop"
    block = sdk_stream(out)["content"][0]
    assert block["thinking"] == "" and SEALER.open(block["signature"]) .text == "abc"


def test_stream_marks_fall_back_to_off_without_a_sealer():
    out, _ = run_stream(stream(text("<think>x</think>hi")), ctx=make_ctx(None, None, signature="redacted"))
    assert sdk_stream(out)["content"][0] == {"type": "thinking", "thinking": "x"}


def test_stream_error_event_passes_after_the_held_text():
    objs = stream_objs(text("<think>a</think>hel", "lo <"))[:-2]
    objs = [o for o in objs if o["type"] != "content_block_stop"]
    objs.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    data = b"".join(sse_event(o) for o in objs)
    out, _ = run_stream(data)
    evs = events(out)
    assert evs[-1].raw == sse_event(objs[-1])
    texts = "".join(o["delta"].get("text", "") for o in objs_of(out) if o["type"] == "content_block_delta")
    assert texts == "hello <"
    assert objs_of(out)[-2] == {"type": "content_block_stop", "index": 1}
    with pytest.raises(anthropic.APIStatusError):
        sdk_stream(out)


def test_stream_passes_comments_malformed_and_other_events_unchanged():
    extra = [b": keep-alive\n\n", b"event: content_block_delta\ndata: {not json\n\n",
             b"data: [1, 2]\n\n", b"event: surprise\ndata: {\"type\": \"surprise\"}\n\n",
             b'event: content_block_delta\ndata: {"type":"content_block_delta","index":7,"delta":{}}\n\n',
             b'event: content_block_start\ndata: {"type":"content_block_start","index":"x"}\n\n',
             b'event: content_block_stop\ndata: {"type":"content_block_stop","index":null}\n\n',
             b'event: message_start\ndata: {"type":"message_start","message":null}\n\n']
    data = stream(text("<think>a</think>b"))
    head, tail = data.split(b"event: content_block_start", 1)
    out, ctx = run_stream(head + b"".join(extra) + b"event: content_block_start" + tail)
    for e in extra:
        assert e in out
    assert ctx.stats.malformed_events == 1


def test_stream_keeps_crlf_line_endings_in_created_events():
    out, _ = run_stream(stream(text("<think>x</think>hi"), eol="\r\n"))
    assert b"\n" not in out.replace(b"\r\n", b"")
    assert sdk_stream(out)["content"][0] == {"type": "thinking", "thinking": "x"}


def test_stream_cut_off_before_its_end_still_closes_its_blocks():
    objs = stream_objs(text("<think>unfinished", " thought"))
    data = b"".join(sse_event(o) for o in objs if o["type"] not in
                    ("content_block_stop", "message_delta", "message_stop"))
    out, _ = run_stream(data)
    objs_out = objs_of(out)
    assert objs_out[-1] == {"type": "content_block_stop", "index": 0}
    assert "".join(o["delta"]["thinking"] for o in objs_out if o["type"] == "content_block_delta") \
        == "unfinished thought"


def test_stream_abort_sends_the_held_text_and_leaves_the_text_block_open_for_the_rest():
    rw = messages.StreamRewriter(ctx_for(signature="redacted"))
    out = []
    evs = events(stream(text("<think>hidden", "</think>ans", "wer <")))
    for k, ev in enumerate(evs):
        out += rw.on_event(ev)
        if json.loads(ev.data)["type"] == "content_block_delta" and b"wer" in ev.raw:
            break
    out += rw.abort()
    objs = objs_of(b"".join(out))
    assert objs[-1] == {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "<"}}
    # The upstream's own stop of its block 0 closes the client's text block 1.
    assert rw.translating
    assert objs_of(b"".join(rw.translate(evs[k + 1]))) == [{"type": "content_block_stop", "index": 1}]
    assert "".join(o["delta"]["text"] for o in objs if o.get("delta", {}).get("type") == "text_delta") == "answer <"
    first = next(o for o in objs if o["type"] == "content_block_start")
    assert SEALER.open(first["content_block"]["data"]).text == "hidden"
    assert rw.abort() == []


def test_stream_surface_failure_falls_back_to_the_original_bytes():
    class Boom(messages.StreamRewriter):
        def _delta(self, ev, obj):
            raise RuntimeError("bug")
    ctx = ctx_for()
    from thinkwire.stream import StreamDriver
    data = stream(text("<think>x</think>hi"))
    driver = StreamDriver(Boom(ctx))
    out = b"".join(driver(data) + driver(b""))
    assert data.split(b"event: content_block_delta", 1)[1] in out
    assert driver.failure


def test_stream_model_from_message_start_picks_the_profile(tmp_path):
    ts = tmp_path / "t.yaml"
    ts.write_text("default:\n  pairs:\n    - ['<think>', '</think>']\nprofiles:\n"
                  "  - name: r1\n    models: ['deepseek*']\n    starts_inside: true\n")
    out, _ = run_stream(stream(text("plan</think>go"), tool(), text("done"), model="deepseek-r1"),
                        tagsets=str(ts))
    assert sdk_stream(out)["content"][:2] == [{"type": "thinking", "thinking": "plan"},
                                              {"type": "text", "text": "go"}]
    assert sdk_stream(out)["content"][3] == {"type": "text", "text": "done"}


# -- the real recordings ---------------------------------------------------------------------
NATIVE_CORPUS = [p for p in corpus_files("messages__") if "mimicry" not in p.name]
MIMICRY_CORPUS = [p for p in corpus_files("messages__") if "mimicry" in p.name]
CORPUS_RESULTS = stored(CORPUS / "results.json")


@pytest.mark.parametrize("path", NATIVE_CORPUS, ids=lambda p: p.name)
def test_corpus_native_thinking_passes_byte_identical_at_any_chunking(path):
    data = corpus_bytes(path)
    if path.suffix == ".json":
        assert messages.rewrite_body(data, ctx_for()) is None
        return
    rng = random.Random(path.name)
    for _ in range(20):
        sizes = [rng.randint(1, 64) for _ in range(rng.randint(1, 8))]
        out, _ = run_stream(data, rechunk(data, sizes))
        assert out == data
    sdk_stream(data)  # and the SDK reads it


@pytest.mark.parametrize("path", MIMICRY_CORPUS, ids=lambda p: p.name)
def test_corpus_thinking_markup_in_claude_text_becomes_a_thinking_block(path):
    data = corpus_bytes(path)
    original = json.loads(data)["content"][0]["text"]
    out, changed, _ = run_body(data)
    assert changed
    msg = sdk_body(out)
    assert block_types(msg) == ["thinking", "text"]
    CORPUS_RESULTS.check(path.name + " as recorded", {
        "reasoning": [b["thinking"] for b in msg["content"] if b["type"] == "thinking"],
        "content": "".join(b["text"] for b in msg["content"] if b["type"] == "text")})
    # The same output, streamed at random chunkings, accumulates to the same message.
    rng = random.Random(1)
    for _ in range(5):
        pieces, i = [], 0
        while i < len(original):
            n = rng.randint(1, 12)
            pieces.append(original[i:i + n])
            i += n
        streamed = sdk_stream(run_stream(stream(text(*pieces)))[0])
        assert streamed["content"] == msg["content"]


# -- properties -------------------------------------------------------------------------------
PAIRS = [("<think>", "</think>"), ("<thinking>", "</thinking>")]
plain = st.text(alphabet="ab yz.\n\u00e9\u4e2d>", max_size=12)


@st.composite
def model_output(draw):
    """(text, reasoning blocks, content parts): a model's text with well-formed markup."""
    lead = draw(plain)
    if lead and not lead.endswith("\n"):
        lead += "\n"  # an opening tag counts at the start of a line
    parts, reasoning, content = [lead], [], [lead]
    for k in range(draw(st.integers(0, 3))):
        o, c = draw(st.sampled_from(PAIRS))
        r, t = draw(plain), draw(plain)
        last = k == 2 or draw(st.booleans())
        closed = not last or draw(st.booleans())
        if not last and t.strip() and not t.endswith("\n"):
            t += "\n"   # the next block at a line's start (after a space it would be prose)
        parts += [o, r] + ([c, t] if closed else [])
        reasoning.append(r)
        content.append(t if closed else "")
        if last:
            break
    return "".join(parts), reasoning, content


def cut(s: str, points: list[int]) -> list[str]:
    points = sorted({p % (len(s) + 1) for p in points})
    out, prev = [], 0
    for p in points + [len(s)]:
        out.append(s[prev:p])
        prev = p
    return [x for x in out if x] or [""]


SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODES = st.sampled_from([("signed", None), ("off", None), ("unsigned", None), ("redacted", None),
                         ("off", {"thinking": {"display": "omitted"}})])


def normalise(msg):
    """Marks are sealed with a random nonce: compare what they open to."""
    out = []
    for b in msg["content"]:
        b = dict(b)
        if b["type"] == "redacted_thinking":
            b["data"] = SEALER.open(b["data"])
        elif b.get("signature"):
            b["signature"] = SEALER.open(b["signature"])
        out.append(b)
    return out


@SLOW
@given(model_output(), st.lists(st.integers(0, 10_000), max_size=8), st.lists(st.integers(1, 40), min_size=1, max_size=6),
       st.booleans(), MODES)
def test_property_any_chunking_gives_the_same_message(out_, text_cuts, byte_sizes, with_tool, mode):
    signature, request = mode
    blocks = [text(*cut(out_[0], text_cuts))] + ([tool()] if with_tool else [])
    data = stream(*blocks)
    whole = normalise(sdk_stream(run_stream(data, signature=signature, request=request)[0]))
    pieces = rechunk(data, byte_sizes)
    chunked = normalise(sdk_stream(run_stream(data, pieces, signature=signature, request=request)[0]))
    assert chunked == whole


@SLOW
@given(model_output(), st.lists(st.integers(0, 10_000), max_size=8), st.booleans(), st.booleans(), MODES)
def test_property_stream_accumulated_equals_body_rewrite(out_, text_cuts, with_tool, trim, mode):
    signature, request = mode
    opts = dict(signature=signature, request=request, trim="on" if trim else "off")
    blocks = [text(*cut(out_[0], text_cuts))] + ([tool()] if with_tool else []) + [text("after")]
    streamed = sdk_stream(run_stream(stream(*blocks), **opts)[0])
    bodied = sdk_body(run_body(body(*blocks), **opts)[0])
    assert normalise(streamed) == normalise(bodied)


@SLOW
@given(model_output(), st.lists(st.integers(0, 10_000), max_size=8))
def test_property_nothing_lost(out_, text_cuts):
    full, reasoning, content = out_
    msg = sdk_stream(run_stream(stream(text(*cut(full, text_cuts))), trim="off")[0])
    thinking = [b["thinking"] for b in msg["content"] if b["type"] == "thinking"]
    texts = "".join(b["text"] for b in msg["content"] if b["type"] == "text")
    assert thinking == [r for r in reasoning if r]
    assert texts == "".join(content)
    # With trimming on, only whitespace at block edges goes.
    msg = sdk_stream(run_stream(stream(text(*cut(full, text_cuts))))[0])
    thinking = [b["thinking"] for b in msg["content"] if b["type"] == "thinking"]
    assert thinking == [r.strip(" \n") for r in reasoning if r.strip(" \n")]
    strip = lambda s: "".join(s.split())  # noqa: E731
    assert strip("".join(b.get("text", "") for b in msg["content"])) == strip("".join(content))


@SLOW
@given(st.lists(st.one_of(model_output().map(lambda o: ("text", o[0])), st.just(("tool", ""))),
                min_size=1, max_size=4),
       st.lists(st.integers(1, 40), min_size=1, max_size=6), MODES)
def test_property_indices_run_0_to_n_minus_1_in_start_order(shape, sizes, mode):
    signature, request = mode
    blocks = [text(*cut(s, [3, 7])) if kind == "text" else tool(f"toolu_{k}") for k, (kind, s) in enumerate(shape)]
    data = stream(*blocks)
    out, _ = run_stream(data, rechunk(data, sizes), signature=signature, request=request)
    started, stopped = [], set()
    for o in objs_of(out):
        if o["type"] == "content_block_start":
            started.append(o["index"])
        elif o["type"] in ("content_block_delta", "content_block_stop"):
            assert o["index"] in started and o["index"] not in stopped
            if o["type"] == "content_block_stop":
                stopped.add(o["index"])
    assert started == list(range(len(started)))
    assert stopped == set(started)
    n_tools = sum(1 for b in blocks if b["type"] == "tool_use")
    assume(n_tools)
    assert [b["id"] for b in sdk_stream(out)["content"] if b["type"] == "tool_use"] \
        == [b["id"] for b in blocks if b["type"] == "tool_use"]


# -- the fast path for text deltas (no JSON parse) -------------------------------------------
import copy  # noqa: E402
import re  # noqa: E402

from thinkwire.context import Stats  # noqa: E402
from thinkwire.marks import PREFIX  # noqa: E402
from thinkwire.jsonio import dumps  # noqa: E402
from thinkwire.sse import encode  # noqa: E402


class FullPath(messages.StreamRewriter):
    """The rewrite with no fast path, whose deltas are built as dicts and dumped: the reference
    the fast path and the delta templates must match byte for byte."""

    def __init__(self, ctx):
        super().__init__(ctx, fast=False)

    def _delta_event(self, index, head, literal):
        kind = "text_delta" if head == messages.stream._TEXT_DELTA else "thinking_delta"
        key = "text" if kind == "text_delta" else "thinking"
        return self._created(messages._DELTA, {"type": messages._DELTA, "index": index,
                                               "delta": {"type": kind, key: json.loads(literal)}})


_MARK = re.compile(re.escape(PREFIX.encode()) + rb"[A-Za-z0-9_-]+")


def unmark(out: bytes, sealer) -> bytes:
    """Marks carry a random nonce: put what each one opens to in its place."""
    if sealer is None:
        return out
    return _MARK.sub(lambda m: repr(sealer.open(m.group().decode())).encode(), out)


class Twin:
    """Runs each event through the rewrite and through FullPath on a copy of the context, and
    checks they give the same bytes; what goes on is the rewrite's."""

    def __init__(self, ctx):
        ref_ctx = copy.copy(ctx)
        ref_ctx.stats, ref_ctx._splitters = Stats(), []
        self.fast, self.ref, self.sealer = messages.StreamRewriter(ctx), FullPath(ref_ctx), ctx.sealer

    def _both(self, name, *args):
        got, want = getattr(self.fast, name)(*args), getattr(self.ref, name)(*args)
        assert unmark(b"".join(got), self.sealer) == unmark(b"".join(want), self.sealer)
        assert len(got) == len(want)
        return got

    def on_event(self, ev):
        return self._both("on_event", ev)

    def finish(self):
        return self._both("finish")

    def abort(self):
        return self._both("abort")


@pytest.fixture(autouse=True, scope="module")
def twin_checks_every_stream():
    """Every stream the tests of this module drive through engine.stream_driver (examples,
    corpus, hypothesis properties, at every chunking) is checked event by event against the
    full path."""
    real = engine.stream_driver

    def driver(surface, ctx, decoder=None):
        if surface is not messages:
            return real(surface, ctx, decoder)
        from thinkwire.stream import StreamDriver
        return StreamDriver(Twin(ctx), decoder, lambda reason: setattr(ctx.stats, "fell_back", reason))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "stream_driver", driver)
        yield


def rewrite_with(cls, data, **opts):
    """The stream through the driver in one chunk: each event it frames goes to the byte path
    first (thinkwire.stream), then, where that declines, to on_event."""
    ctx = ctx_for(**opts)
    rw = cls(ctx)
    d = StreamDriver(rw)
    out = d(data) + d(b"")
    assert d.failure is None
    return b"".join(out), rw, ctx


def _take(rw, ev):
    """One framed event as the driver hands it over: the byte path, else on_event."""
    out = rw.on_chunk(ev.raw)
    return rw.on_event(ev) if out is None else out


def event_seq(out):
    seq = []
    for o in objs_of(out):
        d = o.get("delta") if isinstance(o.get("delta"), dict) else {}
        block = o.get("content_block") or {}
        seq.append((o.get("type"), o.get("index"), d.get("type") or block.get("type"),
                    d.get("text", d.get("thinking", block.get("text")))))
    return seq


SAMPLES = {
    "plain": stream(text("Hello", " there, ", "friend.", ""), tool(), ping=False),
    "answer renumbered": stream(text("<think>\nx", "y\n</think>\n\n", "hi", " there", " you"), tool(), text("a", "b")),
    "reasoning": stream(text("<think>", "plan", " more", " \"quoted\\\"", " \u00e9\u4e2d", "</think>ok", " sure")),
    "escapes": stream(text("tab\there", "nl\n", "uni \u2028 \U0001F600", "q\"", "<think>r\\", "\x01</think>", "a\\b")),
    "boundaries": stream(text("<think>a", "</think>b<think>", "c</think>", "d", "e<", "think>f", "</thi", "nk>g")),
    "several texts": stream(text("a<think>b</think>c", "d"), tool(), text("<think>e", "f", "</think>", "g"), text("h")),
    "text in the start event": stream(text("b", "c")).replace(b'"text": ""}', b'"text": "<think>a</think>"}', 1),
    "crlf": stream(text("<think>x", "y</think>hi", " there"), eol="\r\n"),
    "cr": stream(text("<think>x", "y</think>hi", " there"), eol="\r"),
    "no event lines": stream(text("<think>x", "y</think>hi", " there"), names=False),
}
SIGNATURES = [("off", None), ("unsigned", None), ("signed", None), ("redacted", None),
              ("off", {"thinking": {"display": "omitted"}})]


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("signature,request_", SIGNATURES)
def test_fast_path_gives_what_the_full_path_gives(name, signature, request_):
    data = SAMPLES[name]
    got, rw, ctx = rewrite_with(messages.StreamRewriter, data, signature=signature, request=request_)
    want, _, _ = rewrite_with(FullPath, data, signature=signature, request=request_)
    assert unmark(got, ctx.sealer) == unmark(want, ctx.sealer)
    assert event_seq(got) == event_seq(want)
    if name != "no event lines":  # the SDK reads events by their event line
        assert normalise(sdk_stream(got)) == normalise(sdk_stream(want))


def test_twin_notices_a_fast_path_that_differs():
    """The twin fixture checks every stream of this module; here, that it would notice."""
    class Wrong(messages.StreamRewriter):
        def _text(self, ev, st, u, text, literal):
            return [ev.raw]
    twin = Twin(ctx_for())
    twin.fast = Wrong(twin.fast.ctx)
    with pytest.raises(AssertionError):
        for ev in events(stream(text("<think>a", "b</think>c", "d"))):
            twin.on_event(ev)


def _count_loads(monkeypatch):
    calls = []
    real = json.loads

    def loads(s, *a, **k):
        calls.append(s)
        return real(s, *a, **k)
    monkeypatch.setattr(json, "loads", loads)
    decode = jsonnum._DECODE

    def kept(s):   # (the surfaces parse events with thinkwire.jsonnum)
        calls.append(s)
        return decode(s)
    monkeypatch.setattr(jsonnum, "_DECODE", kept)
    return calls


def _delta(index, text_, **extra):
    return sse_event({"type": "content_block_delta", "index": index,
                      "delta": {"type": "text_delta", "text": text_}, **extra})


def test_fast_path_plain_deltas_leave_as_their_bytes_without_a_parse(monkeypatch):
    rw = messages.StreamRewriter(ctx_for())
    head = stream(text("x"))
    for ev in events(head)[:4]:  # message_start, start, ping, the first delta (learns the shape)
        rw.on_event(ev)
    calls = _count_loads(monkeypatch)
    for t in ["a", " b\u00e9", "c\\\"d"]:
        ev = events(_delta(0, t))[0]
        assert _take(rw, ev) == [ev.raw]
    assert _take(rw, events(_delta(0, "<"))[0]) == []  # a possible tag, held
    assert _take(rw, events(_delta(0, "x"))[0]) == [
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"<x"}}\n\n']
    assert calls == []
    assert objs_of(b"".join(rw.finish())) == [{"type": "content_block_stop", "index": 0}]


def test_fast_path_renumbered_answer_gets_its_index_and_the_same_literal(monkeypatch):
    rw = messages.StreamRewriter(ctx_for())
    for ev in events(stream(text("<think>r</think>", "a")))[:5]:
        _take(rw, ev)
    calls = _count_loads(monkeypatch)
    ev = events(_delta(0, "h\u00e9 \"q\""))[0]
    out = _take(rw, ev)
    assert out == [encode(dumps({"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "text_delta", "text": "h\u00e9 \"q\""}}), "content_block_delta")]
    ev = events(_delta(0, "plain"))[0]
    assert _take(rw, ev) == [b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
                               b'"delta":{"type":"text_delta","text":"plain"}}\n\n']
    assert calls == []


def test_fast_path_reasoning_becomes_thinking_deltas_with_the_stream_eol(monkeypatch):
    rw = messages.StreamRewriter(ctx_for(signature="unsigned"))
    for ev in events(stream(text("<think>", "a"), eol="\r\n"))[:5]:
        _take(rw, ev)
    calls = _count_loads(monkeypatch)
    for t in ["plan", " \u4e2d\\", "\n"]:
        ev = events(_delta(0, t).replace(b"\n", b"\r\n"))[0]
        out = _take(rw, ev)
        if t == "\n":
            assert out == []  # whitespace held by the trim
        else:
            assert out == [encode(dumps({"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "thinking_delta", "thinking": t}}),
                                  "content_block_delta", b"\r\n")]
    assert rw._shape_c is None   # (CRLF frames: no byte shape, each event parsed in full)


@pytest.mark.parametrize("signature,request_", SIGNATURES[2:])
def test_fast_path_marks_hold_reasoning_and_seal_it_at_the_block_end(signature, request_, monkeypatch):
    data = stream(text("<think>", "a", "b", "c", "</think>", "x", "y"))
    calls = _count_loads(monkeypatch)
    out, _, ctx = rewrite_with(messages.StreamRewriter, data, signature=signature, request=request_)
    assert len(calls) < len(events(data)) - 3  # the deltas after the first went without a parse
    msg = normalise(sdk_stream(out))
    assert msg[0].get("data", msg[0].get("signature")).text == "abc"
    assert msg[1] == {"type": "text", "text": "xy"}


@pytest.mark.parametrize("odd", [
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}',         # not a string
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":[1,2]}}',     # not a string
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\x"}}',     # a bad escape
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}',  # two
])
def test_fast_path_takes_the_full_path_for_what_it_cannot_read(odd):
    first = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'  # the same shape
             b'"delta":{"type":"text_delta","text":"<think>r"}}\n\n')
    ev_odd = b"event: content_block_delta\ndata: " + odd + b"\n\n"
    data = stream(text("")).replace(b'event: content_block_stop', first + ev_odd + b'event: content_block_stop', 1)
    for sig in ("off", "redacted"):
        got, _, ctx = rewrite_with(messages.StreamRewriter, data, signature=sig)
        want, _, want_ctx = rewrite_with(FullPath, data, signature=sig)
        assert unmark(got, ctx.sealer) == unmark(want, ctx.sealer)
        assert ctx.stats.malformed_events == want_ctx.stats.malformed_events == (b"\\x" in odd)


def test_fast_path_delta_after_its_block_stopped_takes_the_full_path():
    extra = _delta(0, "late")  # shaped like the block's deltas, after its stop: the block is not ours now
    data = stream(text("<think>a</think>", "b"), tool())
    cut = data.index(b'event: content_block_start\ndata: {"type": "content_block_start", "index": 1')
    data = data[:cut] + extra + data[cut:]
    got, _, _ = rewrite_with(messages.StreamRewriter, data)
    want, _, _ = rewrite_with(FullPath, data)
    assert got == want and extra in got


@pytest.mark.parametrize("shaped,after", [
    # the text key of another object, with another value, after the delta's
    ('{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{t}}},"meta":{{"text":"zz"}}}}',
     '},"meta":{"text":"zz"}}'),
    # ... with the same value: the check finds it is not the delta's text, and goes on to it
    ('{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{t}}},"meta":{{"text":{t}}}}}',
     '},"meta":{"text":"<think>a"}}'),
    # the key spelled with an escape: no literal found
    ('{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","te\\u0078t":{t}}}}}', None),
    # spaces and other key orders are learnt like the compact form
    ('{{ "delta" : {{ "text" : {t} , "type" : "text_delta" }} , "index" : 0 , "type" : "content_block_delta" }}',
     ' , "type" : "text_delta" } , "index" : 0 , "type" : "content_block_delta" }'),
])
def test_fast_path_learns_only_the_literal_the_parse_takes_the_text_from(shaped, after):
    def ev(t):
        return b"event: content_block_delta\ndata: " + shaped.format(t=json.dumps(t)).encode() + b"\n\n"
    data = stream(text()).replace(b"event: content_block_stop",
                                  b"".join(ev(t) for t in ["<think>a", "b", "</think>c", "d", "e"])
                                  + b"event: content_block_stop", 1)
    rw = messages.StreamRewriter(ctx_for())
    for e in events(data)[:4]:
        rw.on_event(e)
    assert (rw._shape and rw._shape[1]) == after
    got, _, _ = rewrite_with(messages.StreamRewriter, data)
    want, _, _ = rewrite_with(FullPath, data)
    assert got == want
    assert sdk_stream(got)["content"] == [{"type": "thinking", "thinking": "ab"}, {"type": "text", "text": "cde"}]
