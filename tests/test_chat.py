"""The chat surface: whole bodies, streams, the real corpus, and properties."""

import json
import random

import pytest
from hypothesis import given, settings, strategies as st
from openai._models import construct_type
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from support import drive
from support.stored import stored
from conftest import CORPUS, corpus_bytes, corpus_files, make_ctx
from harness import rechunk
from thinkwire import engine
from thinkwire.splitter import Splitter
from thinkwire.sse import SSEParser
from thinkwire.surfaces import chat


def body(content, **msg):
    return json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content, **msg}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}).encode()


def chunk(delta, index=0, finish=None, **extra):
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}], **extra}


def sse_bytes(*objs):
    return b"".join(b"data: " + (o.encode() if isinstance(o, str) else json.dumps(o).encode()) + b"\n\n"
                    for o in objs)


def text_stream(*pieces, finish="stop"):
    objs = [chunk({"role": "assistant", "content": ""})]
    objs += [chunk({"content": p}) for p in pieces]
    objs.append(chunk({}, finish=finish))
    return sse_bytes(*objs, "[DONE]")


def run_stream(data, pieces=None, **opts):
    ctx = make_ctx(**opts)
    return drive(chat, ctx, data, pieces)[0], ctx


def events(data):
    p = SSEParser()
    return p.feed(data) + p.finish()


def chunks_of(data):
    return [json.loads(e.data) for e in events(data) if e.data and e.data != "[DONE]"]


def accumulate(data):
    """What the openai SDK's stream helper makes of a chat stream."""
    state = ChatCompletionStreamState()
    for obj in chunks_of(data):
        for _ in state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=obj)):
            pass
    # get_final_completion() refuses finish_reason "length"; the snapshot is the same accumulation.
    return state.current_completion_snapshot


def message_of(body_bytes, i=0):
    return json.loads(body_bytes)["choices"][i]["message"]


def test_a_lone_surrogate_escape_is_split_and_written_back_as_the_escape():
    # Valid JSON (servers that escape every non-ASCII character can split a pair); before, the
    # rewrite could not encode it and the body went through unchanged.
    out = chat.rewrite_body(body("<think>a\ud800</think>hi\udfff"), make_ctx())
    assert b"\\ud800" in out and b"\\udfff" in out
    msg = message_of(out)
    assert msg["reasoning_content"] == "a\ud800" and msg["content"] == "hi\udfff"


# -- paths --------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/chat/completions", "/api/v1/chat/completions",
                                  "/openai/deployments/gpt/chat/completions?api-version=2024-10-21",
                                  "/v1/chat/completions/"])
def test_chat_paths_match(path):
    assert chat.matches(path)


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions/abc", "/v1/models", "/v1/messages"])
def test_other_paths_do_not_match(path):
    assert not chat.matches(path)


# -- whole bodies -------------------------------------------------------------------------
def test_body_reasoning_moves_to_reasoning_content():
    msg = message_of(chat.rewrite_body(body("<think>x</think>hi"), make_ctx()))
    assert msg == {"role": "assistant", "content": "hi", "reasoning_content": "x"}


def test_body_field_option_reasoning():
    msg = message_of(chat.rewrite_body(body("<think>x</think>hi"), make_ctx(chat_field="reasoning")))
    assert msg["reasoning"] == "x" and "reasoning_content" not in msg


def test_body_field_option_both():
    msg = message_of(chat.rewrite_body(body("<think>x</think>hi"), make_ctx(chat_field="both")))
    assert msg["reasoning"] == msg["reasoning_content"] == "x"


def test_body_several_blocks_join_with_a_blank_line():
    msg = message_of(chat.rewrite_body(body("<think>a</think>b\n<think>c</think>d"), make_ctx()))
    assert msg["reasoning_content"] == "a\n\nc" and msg["content"] == "b\nd"


def test_body_without_tags_is_unchanged():
    assert chat.rewrite_body(body("just an answer"), make_ctx()) is None


def test_body_with_native_reasoning_is_unchanged():
    ctx = make_ctx()
    assert chat.rewrite_body(body("<think>x</think>hi", reasoning_content="native"), ctx) is None
    assert ctx.stats.native


def test_body_null_native_field_does_not_count_as_native():
    msg = message_of(chat.rewrite_body(body("<think>x</think>hi", reasoning_content=None), make_ctx()))
    assert msg["reasoning_content"] == "x"


def test_body_keeps_ids_usage_tool_calls_and_unknown_fields():
    b = json.loads(body("<think>x</think>", tool_calls=[{"id": "t1", "type": "function",
                                                          "function": {"name": "f", "arguments": "{}"}}]))
    b["x_vendor"] = {"k": 1}
    b["choices"][0]["finish_reason"] = "tool_calls"
    out = json.loads(chat.rewrite_body(json.dumps(b).encode(), make_ctx()))
    assert out["x_vendor"] == {"k": 1} and out["usage"] == b["usage"] and out["id"] == "c1"
    assert out["choices"][0]["message"]["tool_calls"] == b["choices"][0]["message"]["tool_calls"]
    assert out["choices"][0]["finish_reason"] == "tool_calls"


def test_body_every_choice_is_split():
    b = json.loads(body("<think>a</think>A"))
    b["choices"].append({"index": 1, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "<think>b</think>B"}})
    out = json.loads(chat.rewrite_body(json.dumps(b).encode(), make_ctx()))
    assert [c["message"]["reasoning_content"] for c in out["choices"]] == ["a", "b"]


def test_body_closing_tag_only_makes_the_text_before_it_reasoning_for_any_model():
    ctx = make_ctx()
    msg = message_of(chat.rewrite_body(body("thought.</think>Hi!"), ctx))
    assert msg["reasoning_content"] == "thought." and msg["content"] == "Hi!"
    assert ctx.stats.stray_closes == 1   # the log line suggests a profile that starts inside


def test_body_closing_tag_only_is_reasoning_first_for_a_model_whose_template_opens_the_block():
    msg = message_of(chat.rewrite_body(body("thought.</think>Hi!"), make_ctx({"model": "deepseek-r1"})))
    assert msg["reasoning_content"] == "thought." and msg["content"] == "Hi!"


def test_body_not_json_raises_value_error():
    with pytest.raises(ValueError):
        chat.rewrite_body(b"<html>", make_ctx())


@pytest.mark.parametrize("b", [b"[]", b'{"choices": {}}', b'{"choices": [1, {"message": "x"}]}',
                               b'{"choices": [{"message": {"content": ["array"]}}]}'])
def test_body_unexpected_shapes_pass_unchanged(b):
    assert chat.rewrite_body(b, make_ctx()) is None


# -- streams ------------------------------------------------------------------------------
def test_stream_reasoning_then_content():
    out, _ = run_stream(text_stream("<think>", "x", "</think>", "hi"))
    m = accumulate(out).choices[0].message
    assert m.content == "hi" and m.model_extra["reasoning_content"] == "x"


def test_stream_tag_split_across_events():
    out, _ = run_stream(text_stream("<thi", "nk>\nhello ", "there</th", "ink>\n\nans", "wer"))
    m = accumulate(out).choices[0].message
    assert m.content == "answer" and m.model_extra["reasoning_content"] == "hello there"


def test_stream_reasoning_is_sent_before_the_block_closes():
    ctx = make_ctx()
    driver = engine.stream_driver(chat, ctx)
    first = b"".join(driver(text_stream("<think>", "early", "</think>")[:0] + sse_bytes(
        chunk({"content": "<think>early"}))))
    assert json.loads(events(first)[0].data)["choices"][0]["delta"]["reasoning_content"] == "early"


def test_stream_event_split_mid_line_and_utf8_split_mid_byte():
    data = text_stream("<think>", "ré𝄞son", "</think>", "ansé")
    for size in (1, 2, 3, 7):
        out, _ = run_stream(data, rechunk(data, [size]))
        m = accumulate(out).choices[0].message
        assert (m.model_extra["reasoning_content"], m.content) == ("ré𝄞son", "ansé")


def test_stream_one_event_with_a_whole_block_keeps_order():
    out, _ = run_stream(text_stream("<think>r</think>answer"))
    kinds = []
    for c in chunks_of(out):
        d = c["choices"][0]["delta"] if c["choices"] else {}
        if d.get("reasoning_content"):
            kinds.append("r")
        if d.get("content"):
            kinds.append("c")
    assert kinds == ["r", "c"]


def test_stream_several_blocks_join_with_a_blank_line():
    out, _ = run_stream(text_stream("<think>a</think>b\n<think>c</think>d"))
    m = accumulate(out).choices[0].message
    assert m.model_extra["reasoning_content"] == "a\n\nc" and m.content == "b\nd"


def test_stream_field_option_both():
    out, _ = run_stream(text_stream("<think>x</think>y"), chat_field="both")
    m = accumulate(out).choices[0].message
    assert m.model_extra["reasoning_content"] == m.model_extra["reasoning"] == "x"


def test_stream_unclosed_block_stays_reasoning_and_is_flushed_before_done():
    out, _ = run_stream(text_stream("<think>cut </th", finish="length"))
    m = accumulate(out).choices[0].message
    # (`</th` at the token limit is the closing tag cut short: markup, it goes.)
    assert m.model_extra["reasoning_content"] == "cut" and not m.content
    assert out.rstrip().endswith(b"data: [DONE]")


def test_stream_held_text_is_flushed_at_end_without_done():
    data = sse_bytes(chunk({"content": "answer <thi"}))
    out, _ = run_stream(data)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks_of(out)) == "answer <thi"


def test_stream_choices_have_their_own_state():
    objs = [chunk({"content": "<think>a"}, index=0), chunk({"content": "B"}, index=1),
            chunk({"content": "</think>A"}, index=0), chunk({"content": "\n<think>b</think>"}, index=1),
            chunk({}, index=0, finish="stop"), chunk({}, index=1, finish="stop"), "[DONE]"]
    out, _ = run_stream(sse_bytes(*objs))
    c = accumulate(out).choices
    assert (c[0].message.model_extra["reasoning_content"], c[0].message.content) == ("a", "A")
    assert (c[1].message.model_extra["reasoning_content"], c[1].message.content) == ("b", "B\n")


def test_stream_tool_calls_finish_reason_usage_and_done_pass_through():
    tool = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}
    objs = [chunk({"role": "assistant", "content": "<think>plan</think>"}),
            chunk({"tool_calls": [tool]}), chunk({}, finish="tool_calls"),
            {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
             "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}, "[DONE]"]
    data = sse_bytes(*objs)
    out, _ = run_stream(data)
    final = accumulate(out)
    assert final.choices[0].finish_reason == "tool_calls"
    assert final.choices[0].message.tool_calls[0].function.arguments == "{\"a\":1}"
    assert final.choices[0].message.model_extra["reasoning_content"] == "plan"
    raw_in = events(data)
    raw_out = events(out)
    assert raw_out[-1].raw == raw_in[-1].raw == b"data: [DONE]\n\n"
    assert raw_out[-2].raw == raw_in[-2].raw  # the usage chunk, byte for byte
    assert raw_in[1].raw in out and raw_in[2].raw in out  # untouched events keep their bytes


def test_stream_comments_and_keepalives_pass():
    data = b": keep-alive\n\n" + text_stream("<think>x</think>y") + b": bye\n\n"
    out, _ = run_stream(data)
    assert out.startswith(b": keep-alive\n\n") and out.endswith(b": bye\n\n")


def test_stream_native_reasoning_choice_passes_untouched():
    data = sse_bytes(chunk({"role": "assistant", "content": None, "reasoning_content": "native"}),
                     chunk({"content": "<think> literally</think>"}), chunk({}, finish="stop"), "[DONE]")
    out, ctx = run_stream(data)
    assert out == data and ctx.stats.native


def test_stream_native_after_held_text_sends_the_held_text_first():
    data = sse_bytes(chunk({"content": "a <thi"}), chunk({"reasoning_content": "native"}), "[DONE]")
    out, _ = run_stream(data)
    texts = [(c["choices"][0]["delta"].get("content"), c["choices"][0]["delta"].get("reasoning_content"))
             for c in chunks_of(out)]
    assert "".join(t[0] or "" for t in texts) == "a <thi" and texts[-1][1] == "native"


def test_stream_crlf_line_endings_are_kept():
    data = text_stream("<think>x</think>y").replace(b"\n", b"\r\n")
    out, _ = run_stream(data)
    assert b"\r\n\r\n" in out and b"\n\n" not in out.replace(b"\r\n", b"")
    assert accumulate(out).choices[0].message.content == "y"


def test_stream_malformed_event_passes_and_the_rest_is_still_rewritten():
    data = sse_bytes(chunk({"content": "<think>x"}), "{not json", chunk({"content": "</think>y"}), "[DONE]")
    out, ctx = run_stream(data)
    assert b"data: {not json\n\n" in out and ctx.stats.malformed_events == 1
    m = accumulate(out.replace(b"data: {not json\n\n", b"")).choices[0].message
    assert (m.model_extra["reasoning_content"], m.content) == ("x", "y")


def test_stream_internal_error_fails_open_with_original_bytes(monkeypatch):
    data = text_stream("<think>x", "</think>y", "z")
    evs = events(data)
    real_event, real_chunk = chat.StreamRewriter.on_event, chat.StreamRewriter.on_chunk

    def on_event(self, ev):   # the third event raises, whichever path takes it
        if ev.raw == evs[2].raw:
            raise RuntimeError("bug")
        return real_event(self, ev)

    def on_chunk(self, chunk):
        if chunk == evs[2].raw:
            raise RuntimeError("bug")
        return real_chunk(self, chunk)

    monkeypatch.setattr(chat.StreamRewriter, "on_event", on_event)
    monkeypatch.setattr(chat.StreamRewriter, "on_chunk", on_chunk)
    out, ctx = run_stream(data)
    tail = b"".join(e.raw for e in evs[2:])
    assert out.endswith(tail) and ctx.stats.fell_back == "the rewrite raised RuntimeError"


def test_stream_text_held_back_sends_no_empty_answer_delta_at_any_chunking():
    # A real llama-server (--reasoning-format none) streams its `<think>` and the block's line
    # breaks as deltas of their own; a delta whose text is all held back is not sent as an empty
    # answer delta (`"content": ""`), which clients that switch from thinking to answering on
    # the first content delta read as the answer starting. What else the chunk carries goes on.
    data = sse_bytes(chunk({"role": "assistant", "content": None}), chunk({"content": "<think>"}),
                     chunk({"content": "\n"}), chunk({"content": "Two"}), chunk({"content": "\n"}),
                     chunk({"content": " and two"}), chunk({"content": "</think>"}), chunk({"content": "\n\n"}),
                     chunk({"role": "assistant", "content": "It"}), chunk({"content": " is 4."}),
                     chunk({}, finish="stop"), "[DONE]")
    for sizes in ([len(data)], [1], [7], [random.Random(31).randint(1, 60) for _ in range(40)]):
        out, _ = run_stream(data, rechunk(data, sizes))
        deltas = [c["choices"][0]["delta"] for c in chunks_of(out)]
        assert deltas == [{"role": "assistant", "content": None},
                          {"reasoning_content": "Two"},
                          {"reasoning_content": "\n and two"},
                          {"role": "assistant", "content": "It"}, {"content": " is 4."}, {}], sizes


def test_stream_text_held_back_keeps_the_usage_a_chunk_carries():
    data = sse_bytes(chunk({"content": "<think>"}, usage={"completion_tokens": 1}), chunk({"content": "x</think>y"}))
    out, _ = run_stream(data)
    got = chunks_of(out)
    assert got[0] == {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
                      "usage": {"completion_tokens": 1}}
    assert [c["choices"][0]["delta"] for c in got[1:]] == [{"reasoning_content": "x"},
                                                           {"content": "y"}]


def test_stream_empty_deltas_are_not_rewritten():
    data = sse_bytes(chunk({"role": "assistant", "content": ""}), chunk({"content": "hi"}))
    out, _ = run_stream(data)
    assert out == data


def test_stream_non_choice_json_and_odd_choices_pass():
    data = sse_bytes({"error": {"message": "x"}}, {"choices": [1, {"index": "a"}, {"index": 0, "delta": "s"}]},
                     {"object": "x"})
    out, _ = run_stream(data)
    assert out == data


def test_stream_cumulative_message_field_is_rewritten_too():
    obj = chunk({"content": "<think>r"})
    obj["choices"][0]["message"] = {"role": "assistant", "content": "<think>r"}
    obj2 = chunk({"content": "</think>a"})
    obj2["choices"][0]["message"] = {"role": "assistant", "content": "<think>r</think>a"}
    out, _ = run_stream(sse_bytes(obj, obj2))
    last = chunks_of(out)[-1]["choices"][0]["message"]
    assert last == {"role": "assistant", "content": "a", "reasoning_content": "r"}


def test_stream_event_lines_are_kept():
    data = b"event: chunk\n" + sse_bytes(chunk({"content": "<think>x</think>y"}))
    out, _ = run_stream(data)
    assert all(e.event == "chunk" for e in events(out))


# -- the real corpus ----------------------------------------------------------------------
CHAT_SAMPLES = corpus_files("chat__")
NATIVE = [p for p in CHAT_SAMPLES if "native-reasoning" in p.name or "structured-thinking" in p.name]
CORPUS_RESULTS = stored(CORPUS / "results.json")


def _recorded(reasoning, content) -> dict:
    """A chat result as tests/corpus/results.json stores it."""
    return {"reasoning": [reasoning] if reasoning else [], "content": content or ""}


@pytest.mark.parametrize("path", CHAT_SAMPLES, ids=lambda p: p.name)
def test_corpus_sample_as_recorded_gives_its_stored_result(path):
    """The sample's own bytes: a body keeps every other field; a stream gives the same bytes at any
    re-chunking; reasoning and answer are exactly the stored ones (tests/test_corpus.py runs the
    same output on every surface)."""
    data = corpus_bytes(path)
    if path.suffix == ".json":
        new = chat.rewrite_body(data, make_ctx())
        if path in NATIVE:
            assert new is None
            return
        out = json.loads(new if new is not None else data)
        msg = out["choices"][0]["message"]
        CORPUS_RESULTS.check(path.name + " as recorded", _recorded(msg.pop("reasoning_content", None),
                                                                   msg.pop("content")))
        before = json.loads(data)
        before["choices"][0]["message"].pop("content")
        before["choices"][0]["message"].pop("reasoning_content", None)
        assert out == before  # every other field unchanged
        return
    out, _ = run_stream(data)
    if path in NATIVE:
        assert out == data
        return
    rnd = random.Random(path.name)
    for _ in range(5):
        sizes = [rnd.randint(1, 64) for _ in range(20)]
        again, _ = run_stream(data, rechunk(data, sizes))
        assert again == out
    deltas = [ch.get("delta") or {} for obj in chunks_of(out) for ch in obj.get("choices") or []
              if ch.get("index", 0) == 0]
    CORPUS_RESULTS.check(path.name + " as recorded", _recorded(
        "".join(d.get("reasoning_content") or "" for d in deltas), "".join(d.get("content") or "" for d in deltas)))


def test_corpus_stream_equals_body_for_the_same_output():
    path = next(p for p in CHAT_SAMPLES if p.name == "chat__ollama-qwen3__stream_2.sse")
    out, _ = run_stream(corpus_bytes(path))
    streamed = accumulate(out).choices[0].message
    original = "".join((c["choices"][0]["delta"].get("content") or "")
                       for c in chunks_of(corpus_bytes(path)) if c.get("choices"))
    whole = message_of(chat.rewrite_body(body(original), make_ctx()))
    assert (streamed.model_extra["reasoning_content"], streamed.content) == (whole["reasoning_content"], whole["content"])


# -- properties ---------------------------------------------------------------------------
pieces_st = st.lists(st.sampled_from(["<think>", "</think>", "<thi", "nk>", "</th", "ink>", "\n", "\n\n", " ",
                                      "word", "é", "𝄞", "`", "```", "<", "reason", "answer"]),
                     min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(pieces_st, st.data())
def test_any_chunking_of_the_bytes_gives_the_same_stream(pieces, data):
    raw = text_stream(*pieces)
    out, _ = run_stream(raw)
    sizes = data.draw(st.lists(st.integers(1, 40), min_size=1, max_size=10))
    again, _ = run_stream(raw, rechunk(raw, sizes))
    assert again == out


@settings(max_examples=150, deadline=None)
@given(pieces_st)
def test_stream_accumulated_equals_body_rewrite(pieces):
    text = "".join(pieces)
    probe = Splitter(make_ctx().rules())
    probe.feed(text)
    if probe.stray_closes:
        return  # a stray close: the body rule (text before it is reasoning) cannot be known mid-stream
    out, _ = run_stream(text_stream(*pieces))
    streamed = accumulate(out).choices[0].message
    new = chat.rewrite_body(body(text), make_ctx())
    whole = message_of(new) if new is not None else {"content": text}
    assert (streamed.model_extra.get("reasoning_content") or "") == (whole.get("reasoning_content") or "")
    assert (streamed.content or "") == whole["content"]


# -- the way back -------------------------------------------------------------------------
def chat_request(*messages):
    return json.dumps({"model": "m", "messages": list(messages)}).encode()


ASSISTANT = {"role": "assistant", "content": "hi", "reasoning_content": "x"}


def test_restore_keeps_reasoning_fields_by_default():
    assert chat.restore_request(chat_request({"role": "user", "content": "q"}, ASSISTANT), make_ctx()) is None


def test_restore_inline_puts_reasoning_back_ahead_of_the_answer():
    ctx = make_ctx(chat_restore="inline")
    out = json.loads(chat.restore_request(chat_request(ASSISTANT, {"role": "assistant", "content": None,
                                                                     "reasoning": "y", "tool_calls": []}), ctx))
    assert out["messages"][0] == {"role": "assistant", "content": "<think>x</think>hi"}
    assert out["messages"][1] == {"role": "assistant", "content": "<think>y</think>", "tool_calls": []}
    assert ctx.stats.restored == 2


def test_restore_inline_with_content_parts():
    msg = {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "reasoning_content": "x"}
    out = json.loads(chat.restore_request(chat_request(msg), make_ctx(chat_restore="inline")))
    assert out["messages"][0]["content"] == [{"type": "text", "text": "<think>x</think>"}, {"type": "text", "text": "hi"}]


def test_restore_drop_removes_the_fields():
    plain = {"role": "assistant", "content": "earlier"}
    out = json.loads(chat.restore_request(chat_request(plain, ASSISTANT), make_ctx(chat_restore="drop")))
    assert out["messages"] == [plain, {"role": "assistant", "content": "hi"}]


def test_restore_leaves_requests_without_reasoning_byte_identical():
    for body in (chat_request({"role": "user", "content": "q"}), b"not json", b"[]", b'{"messages": 1}',
                 chat_request("x", {"role": "user", "reasoning_content": "u"})):
        assert chat.restore_request(body, make_ctx(chat_restore="inline")) is None


# -- the fast path: plain deltas shaped like the last one skip the JSON parse ---------------
def test_fast_path_matches_the_full_path_for_every_kind_of_delta():
    pieces = ["<think>", "a", " b", "</th", "ink>", "\n\nans", "wer", "", "x<", "y", "\n<think>r</think>z"]
    data = text_stream(*pieces)
    from thinkwire.stream import StreamDriver
    taken = []

    class Counted(chat.StreamRewriter):
        def on_chunk(self, chunk):
            got = super().on_chunk(chunk)
            taken.append(got is not None)
            return got
    d = StreamDriver(Counted(make_ctx()))
    out = b"".join(d(data) + d(b""))
    d = StreamDriver(chat.StreamRewriter(make_ctx(), fast=False))
    full = b"".join(d(data) + d(b""))
    assert sum(taken) == len(pieces) - 1, "the fast path took every delta of the learned shape"
    # (json.dumps' spaced events: the fast path keeps their spaces, the full path writes compact.)
    assert accumulate(out).choices[0].message.model_extra == accumulate(full).choices[0].message.model_extra
    assert accumulate(out).choices[0].message.content == accumulate(full).choices[0].message.content

def test_fast_path_keeps_original_bytes_for_unchanged_answer_text():
    data = sse_bytes(chunk({"content": "hello"}), chunk({"content": " world"}), chunk({"content": " again"}))
    out, _ = run_stream(data)
    assert out == data


def test_fast_path_handles_escaped_literals():
    data = sse_bytes(chunk({"content": "x\n"})) + \
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,' \
        b'"delta":{"content":"\\u003cthink\\u003er\\u003c/think\\u003e\\"q\\""},"finish_reason":null}]}\n\n'
    out, _ = run_stream(data)
    d = [c["choices"][0]["delta"] for c in chunks_of(out)]
    assert "".join(x.get("reasoning_content") or "" for x in d) == "r"
    assert "".join(x.get("content") or "" for x in d) == 'x\n"q"'


def test_fast_path_declines_a_middle_that_is_not_one_string():
    # Same bytes around, but the middle is two strings: must go the full way (and stay valid).
    first = chunk({"content": "a", "extra": "e"})
    raw = json.dumps(first).encode()
    tricky = raw.replace(b'"content": "a"', b'"content": "b", "content": "c"')
    data = b"data: " + raw + b"\n\ndata: " + tricky + b"\n\n"
    out, _ = run_stream(data)
    assert out == data  # both plain answers, unchanged either way


def test_learned_shape_requires_a_plain_single_choice_delta():
    from thinkwire.surfaces.chat import _learn_shape
    for obj in (chunk({"content": "a"}, finish="stop"), chunk({"reasoning_content": "r", "content": "a"}),
                chunk({"tool_calls": []}), {"choices": [chunk({"content": "a"})["choices"][0]] * 2}):
        assert _learn_shape(json.dumps(obj), obj) is None
    obj = chunk({"content": "a"})
    before, after, idx = _learn_shape(json.dumps(obj), obj)
    assert before.endswith('"content": ') and after.startswith("}") and idx == 0


def test_fast_path_declines_null_content_and_broken_literals():
    first = json.dumps(chunk({"content": "a"})).encode()
    null = first.replace(b'"content": "a"', b'"content": null')
    broken = first.replace(b'"content": "a"', b'"content": "a\\q"')
    data = b"".join(b"data: " + x + b"\n\n" for x in (first, broken, null))
    out, ctx = run_stream(data)
    assert out == data and ctx.stats.malformed_events == 1


def test_usage_stays_on_the_last_of_several_chunks_made_from_one():
    data = sse_bytes(chunk({"content": "<think>r</think>a"}, usage={"total_tokens": 3}))
    objs = chunks_of(run_stream(data)[0])
    assert [o["usage"] for o in objs] == [None, {"total_tokens": 3}]


def test_two_adjacent_blocks_in_one_delta_join_with_a_blank_line():
    out, _ = run_stream(text_stream("<think>a</think><think>b</think>c"))
    m = accumulate(out).choices[0].message
    assert (m.model_extra["reasoning_content"], m.content) == ("a\n\nb", "c")


def test_stream_of_only_non_choice_events_flushes_nothing():
    data = sse_bytes({"choices": [], "usage": {"total_tokens": 1}}, "[DONE]")
    assert run_stream(data)[0] == data


@pytest.mark.parametrize("field", ["reasoning_content", "both"])
def test_reasoning_deltas_carry_no_content_null_on_any_path(field):
    # The reference wire format (vLLM, SGLang, llama.cpp): the reasoning field alone, where the
    # delta's content stood. The full path, the byte path and the C part write the same bytes.
    from support.fast import chat_stream, run
    from thinkwire import hot
    events = chat_stream(["<think>", "Okay", " so", " then", "</think>", "Hi", " there"])
    full = run("chat", events, False, chat_field=field)[0]
    assert b'"content":null' not in full
    keys = b'"reasoning_content":"Okay"' if field != "both" else b'"reasoning_content":"Okay","reasoning":"Okay"'
    assert b'"delta":{' + keys + b'}' in full
    assert run("chat", events, True, chat_field=field)[0] == full
    if hot.Hot is not None:
        out, hits = run("chat", events, True, c=True, chat_field=field)
        assert out == full and hits > 0


def test_learned_shape_skips_other_content_keys():
    from thinkwire.surfaces.chat import _learn_shape
    obj = chunk({"content": "a"}, extra={"content": "other"})
    before, after, _ = _learn_shape(json.dumps(obj), obj)
    assert after.startswith("}, ") and '"other"' in after
    obj = chunk({"content": "a"})
    obj["choices"][0]["delta"]["content"] = "b"
    assert _learn_shape(json.dumps(chunk({"content": "a"})), obj) is None


def test_restore_counts_an_assistant_message_with_empty_reasoning_fields():
    msg = {"role": "assistant", "content": "hi", "reasoning_content": ""}
    out = json.loads(chat.restore_request(chat_request(msg), make_ctx(chat_restore="inline")))
    assert out["messages"][0] == {"role": "assistant", "content": "hi"}


def test_deltas_that_carry_null_native_reasoning_keys_get_their_reasoning():
    # SGLang-style chunks: every delta has "reasoning_content": null (and other null keys).
    def c(text):
        return chunk({"role": None, "content": text, "reasoning_content": None, "tool_calls": None})
    data = sse_bytes(c("<think>"), c("hello"), c(" world"), c("</think>"), c("answer"), c(" more"), "[DONE]")
    for field in ("reasoning_content", "reasoning"):
        m = accumulate(run_stream(data, chat_field=field)[0]).choices[0].message
        assert (m.model_extra[field], m.content) == ("hello world", "answer more")
