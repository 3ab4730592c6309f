"""Ollama's native API (`/api/chat`, `/api/generate`): bodies, NDJSON streams, the byte path, the
way back, the think switch and the /api/show answers."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import make_ctx
from support import drive
from support.fast import run as fast_run
from support.ollama import (METRICS, body_of, chat_objs, created_at, generate_objs, go_json, line,
                            stream_bytes, tool_call)
from thinkwire import engine, hot
from thinkwire.capabilities import Capabilities, show_path, thinks
from thinkwire.outbound import Answer, Server
from thinkwire.request import thinking_switch
from thinkwire.ndjson import NDJSONParser
from thinkwire.surfaces import ollama

MODEL = "hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M"   # a GGUF pulled straight from Hugging Face
THOUGHT = ["<think>", "\n", "The user", " greets", " me.", "\n", "</think>", "\n\n", "Hello", "!", " <3"]


def ctx(request: dict | None = None, **values):
    return make_ctx(request if request is not None else {"model": MODEL}, **values)


def run(objs_or_bytes, request=None, pieces=None, **values) -> bytes:
    data = objs_or_bytes if isinstance(objs_or_bytes, bytes) else b"".join(stream_bytes(objs_or_bytes))
    out, driver = drive(ollama, ctx(request, **values), data, pieces)
    assert driver.failure is None
    return out


def lines_of(data: bytes) -> list[dict]:
    return [json.loads(x) for x in data.splitlines()]


def seen(data: bytes) -> tuple[str, str]:
    """(thinking, content) as the official clients accumulate them, line by line."""
    thinking = content = ""
    for o in lines_of(data):
        holder = o.get("message", o)
        thinking += holder.get("thinking", "")
        content += holder.get("content", holder.get("response", ""))
    return thinking, content


# == bodies ======================================================================================
def test_chat_body_moves_the_reasoning_to_message_thinking_as_ollama_writes_it():
    body = go_json(body_of(chat_objs(MODEL, ["<think>\nThe user greets me.\n</think>\n\nHello! <3"])))
    out = ollama.rewrite_body(body.encode(), ctx())
    want = {"model": MODEL, "created_at": created_at(1),
            "message": {"role": "assistant", "content": "Hello! <3", "thinking": "The user greets me."},
            "done": True, "done_reason": "stop", **METRICS}
    assert out == go_json(want).encode()
    assert b"\\u003c3" in out and b"<" not in out   # Go's escaping, as Ollama writes a native split


def test_generate_body_moves_the_reasoning_to_thinking_after_response():
    body = go_json(body_of(generate_objs(MODEL, ["<think>hm</think>Hi"])))
    out = json.loads(ollama.rewrite_body(body.encode(), ctx()))
    assert list(out)[:5] == ["model", "created_at", "response", "thinking", "done"]
    assert (out["thinking"], out["response"], out["context"]) == ("hm", "Hi", [105, 2364, 107, 4377])


def test_body_tool_calls_stay_and_thinking_goes_before_them():
    calls = [tool_call("get_temperature", {"city": "Boulder"})]
    body = go_json(body_of(chat_objs(MODEL, ["<think>I need the tool.</think>\n\n"], tool_calls=calls)))
    msg = json.loads(ollama.rewrite_body(body.encode(), ctx()))["message"]
    assert msg == {"role": "assistant", "content": "", "thinking": "I need the tool.", "tool_calls": calls}
    assert list(msg) == ["role", "content", "thinking", "tool_calls"]


def test_body_with_native_thinking_is_left_as_it_came():
    body = go_json(body_of(chat_objs("qwen3:8b", ["<think>quoted</think> ok"], thinking=["real"])))
    c = ctx({"model": "qwen3:8b"})
    assert ollama.rewrite_body(body.encode(), c) is None and c.stats.native


@pytest.mark.parametrize("text", ["Plain answer.", "", "what does <think> do?"])
def test_body_without_reasoning_markup_is_left_as_it_came(text):
    assert ollama.rewrite_body(go_json(body_of(chat_objs(MODEL, [text]))).encode(), ctx()) is None


def test_body_of_several_ndjson_lines_is_rewritten_as_a_stream():
    """Ollama's cloud answers a stream as `application/json` (tests/corpus): read it line by line."""
    data = b"".join(stream_bytes(chat_objs(MODEL, THOUGHT)))
    assert ollama.rewrite_body(data, ctx()) == run(data)


def test_body_that_is_not_json_raises_for_the_addon_to_pass_it():
    with pytest.raises(ValueError):
        ollama.rewrite_body(b"not json\nat all\n", ctx())


# == streams =====================================================================================
def test_chat_stream_lines_carry_thinking_then_content_and_the_final_line_as_it_came():
    objs = chat_objs(MODEL, THOUGHT)
    out = run(objs)
    got = out.splitlines(keepends=True)
    assert len(got) == len(objs)
    assert got[-1] == line(objs[-1])                             # timings and counts as they came
    assert got[8:11] == [line(o) for o in objs[8:11]]            # answer tokens: their own bytes
    assert got[2] == line(dict(objs[2], message={"role": "assistant", "content": "", "thinking": "The user"}))
    assert seen(out) == ("The user greets me.", "Hello! <3")


def test_generate_stream_lines_carry_thinking_then_response():
    objs = generate_objs(MODEL, THOUGHT)
    out = run(objs)
    assert seen(out) == ("The user greets me.", "Hello! <3")
    assert lines_of(out)[2] == {"model": MODEL, "created_at": created_at(2), "response": "", "thinking": "The user",
                                "done": False}
    assert out.splitlines(keepends=True)[-1] == line(objs[-1])


def test_a_line_whose_text_holds_a_boundary_becomes_a_line_per_run():
    objs = chat_objs(MODEL, ["<think>a</think>b"])
    got = lines_of(run(objs))
    assert [o["message"] for o in got[:2]] == [{"role": "assistant", "content": "", "thinking": "a"},
                                               {"role": "assistant", "content": "b"}]
    assert [o["created_at"] for o in got[:2]] == [created_at(0)] * 2


def test_held_text_goes_out_on_the_final_line():
    objs = chat_objs(MODEL, ["<think>a</think>b <"])
    got = lines_of(run(objs))
    assert got[-1]["message"] == {"role": "assistant", "content": "<"} and got[-1]["done"] is True
    assert got[-1]["total_duration"] == METRICS["total_duration"]


def test_unclosed_reasoning_at_the_end_stays_thinking():
    objs = chat_objs(MODEL, ["<think>cut off by num_pre", "dict"], done_reason="length")
    assert seen(run(objs)) == ("cut off by num_predict", "")


def test_native_thinking_passes_byte_for_byte():
    objs = chat_objs("qwen3:8b", ["The answer", " <b>is</b> 4."], thinking=["Two", " plus two."])
    data = b"".join(stream_bytes(objs))
    assert run(data, {"model": "qwen3:8b"}) == data


def test_text_held_when_native_thinking_starts_goes_out_first():
    objs = chat_objs(MODEL, ["<thi"]) [:1] + chat_objs(MODEL, [], thinking=["real"])
    got = lines_of(run(objs))
    assert got[0]["message"]["content"] == "" and got[1]["message"]["content"] == "<thi"
    assert got[2]["message"]["thinking"] == "real"


def test_tool_call_lines_pass_as_they_came():
    calls = [tool_call("bash", {"cmd": "ls"})]
    objs = chat_objs(MODEL, ["<think>list</think>"], tool_calls=calls)
    out = run(objs)
    assert line(objs[1]) in out.splitlines(keepends=True)
    assert seen(out) == ("list", "")


def test_an_error_line_comes_after_the_held_text():
    objs = chat_objs(MODEL, ["<think>x</think>y <"])[:1]
    data = b"".join(stream_bytes(objs)) + b'{"error":"an error was encountered while running the model"}\n'
    got = run(data).splitlines()
    assert json.loads(got[-2])["message"]["content"] == "<"
    assert got[-1] == b'{"error":"an error was encountered while running the model"}'


def test_blank_and_foreign_lines_pass_as_they_came():
    data = b"\n" + b"".join(stream_bytes(chat_objs(MODEL, ["<think>a</think>b"]))) + b"{not json\n[1,2]\n"
    out = run(data)
    assert out.startswith(b"\n") and out.endswith(b"{not json\n[1,2]\n")


@pytest.mark.parametrize("at", range(1, 400, 7))
def test_any_single_cut_of_the_stream_gives_the_same_bytes(at):
    data = b"".join(stream_bytes(chat_objs(MODEL, THOUGHT)))
    assert run(data, pieces=[data[:at], data[at:]]) == run(data)


def test_a_stream_cut_mid_line_sends_the_held_text_before_the_partial_line():
    data = b"".join(stream_bytes(chat_objs(MODEL, ["<think>abc</thi"])[:1])) + b'{"model":"m","creat'
    out = run(data)
    assert out.endswith(b'\n{"model":"m","creat')
    assert seen(out.rsplit(b"\n", 1)[0]) == ("abc</thi", "")


def test_crlf_lines_and_a_bom_are_read():
    data = b"".join(stream_bytes(chat_objs(MODEL, ["<think>a</think>", "b"])))
    out = run(b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n"))
    assert seen(out) == ("a", "b")   # (the BOM goes with the first line, which is rewritten)
    assert out.count(b"\r\n") == out.count(b"\n")


# == the byte path, and the C part ===============================================================
def _run_rw(data_lines: list[bytes], fast: bool, c: bool = False, **values) -> tuple[bytes, int]:
    """The bytes the client gets, and how many lines the byte path answered (`c`: with the C
    callable of thinkwire.hot in front, what mitmproxy calls, the lines C answered)."""
    return fast_run("ollama", data_lines, fast, request={"model": MODEL}, c=c, **values)


needs_c = pytest.mark.skipif(not hot.available(), reason="thinkwire._hot is not built (or THINKWIRE_HOT=0)")


TOKENS = ["<think>", "</think>", " so", " x", "\n", "\n\n", " ", "<th", "ink>", "é", " \"q\"", " a & b",
          " >", " `c`", "<", "b>", " \u2028", "\t", "word "]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.sampled_from(TOKENS), min_size=1, max_size=30), seed=st.integers(0, 2**16),
       generate=st.booleans())
def test_fast_and_full_paths_send_the_same_bytes_under_every_chunking(texts, seed, generate):
    # Through the C callable (where built), the Python byte path and the full path.
    objs = (generate_objs if generate else chat_objs)(MODEL, texts)
    lines = stream_bytes(objs)
    data = b"".join(lines)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, len(lines))))
    for chunks in (lines, [data], [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])],
                   [b"".join(lines[i:i + 2]) for i in range(0, len(lines), 2)]):
        full = _run_rw(chunks, False)[0]
        assert _run_rw(chunks, True)[0] == full
        assert _run_rw(chunks, True, c=hot.available())[0] == full


def test_plain_token_lines_take_the_byte_path():
    texts = ["<think>"] + [" thinking"] * 20 + ["</think>"] + [" answer"] * 20
    out, hits = _run_rw(stream_bytes(chat_objs(MODEL, texts)), True)
    assert hits >= 36
    assert seen(out) == ("thinking" + " thinking" * 19, "answer" + " answer" * 19)


@needs_c
@pytest.mark.parametrize("generate", [False, True])
@pytest.mark.parametrize("stamped", [True, False])
def test_steady_token_lines_are_answered_in_c(generate, stamped):
    # created_at changes on every line: the C part reads it as a string slot and copies it into
    # the reasoning line as it came; the answer's lines go as they came.
    texts = ["<think>", "Okay"] + [" so", " it", " is\n"] * 10 + ["</think>", "Sure"] + [" it", " is\t"] * 10
    objs = (generate_objs if generate else chat_objs)(MODEL, texts)
    if not stamped:
        objs = [{k: v for k, v in o.items() if k != "created_at"} for o in objs]
    lines = stream_bytes(objs)
    out, hits = _run_rw(lines, True, c=True)
    assert out == _run_rw(lines, False)[0]
    assert hits >= 45   # all but the first of the block and of the answer, and the tags'
    assert seen(out) == ("Okay" + " so it is\n" * 9 + " so it is", "Sure" + " it is\t" * 10)   # (trimmed)
    for e in lines[-21:-1]:   # the answer's lines
        assert e in out
    for k, thinking in [(15, " it"), (17, "\n so")]:   # (a line end held goes out in front of the next text)
        want = {"model": MODEL, "created_at": created_at(k)}
        want.update({"response": "", "thinking": thinking} if generate else
                    {"message": {"role": "assistant", "content": "", "thinking": thinking}})
        want["done"] = False
        if not stamped:
            del want["created_at"]
        assert line(want) in out


@needs_c
def test_characters_go_escapes_in_reasoning_go_out_escaped_as_the_full_path_writes_them():
    # Ollama writes `<`, `>`, `&` as \u003c ...: a line that holds them as they are (another
    # server) still matches the learned line, and its reasoning goes out escaped.
    lines = stream_bytes(chat_objs(MODEL, ["<think>", "a"] + [" b"] * 4 + [" x > y & z", " c"]))
    lines[-3] = lines[-3].replace(b"\\u003e", b">").replace(b"\\u0026", b"&")
    out, hits = _run_rw(lines, True, c=True)
    assert out == _run_rw(lines, False)[0] and hits >= 4
    assert b'"thinking":" x \\u003e y \\u0026 z"' in out and b">" not in out


# == the think switch ============================================================================
@pytest.mark.parametrize("think,want", [(True, True), (False, False), ("low", True), ("medium", True),
                                        ("high", True), ("max", True), ("odd", None), (None, None)])
def test_think_is_the_thinking_switch(think, want):
    assert thinking_switch({"model": "m", "think": think}) is want


def test_think_false_never_starts_inside_where_the_template_reads_it():
    """Qwen3.5's template reads the switch and thinks by default: with think false it closed the
    block in the prompt. DeepSeek-R1's template opens the block whatever the request says (it has
    no switch), so its output starts inside all the same."""
    objs = chat_objs("qwen3.5:27b", ["Sure", "</think>", "Here"])
    assert seen(run(objs, {"model": "qwen3.5:27b"})) == ("Sure", "Here")
    # (a stray closing tag after text sent as answer stays where it was: the boundary)
    assert seen(run(objs, {"model": "qwen3.5:27b", "think": False})) == ("", "Sure</think>Here")
    objs = chat_objs("deepseek-r1:8b", ["Sure", "</think>", "Here"])
    assert seen(run(objs, {"model": "deepseek-r1:8b", "think": False})) == ("Sure", "Here")


def test_think_true_starts_inside_for_a_model_that_opens_the_block_when_asked():
    objs = chat_objs("deepseek-v3.1:671b", ["Let me see.", "</think>", "Done."])
    assert seen(run(objs, {"model": "deepseek-v3.1:671b"})) == ("", "Let me see.</think>Done.")   # (the boundary)
    assert seen(run(objs, {"model": "deepseek-v3.1:671b", "think": True})) == ("Let me see.", "Done.")


def test_thinking_the_model_wrote_when_asked_for_none_is_kept_in_thinking():
    objs = chat_objs(MODEL, ["<think>unasked</think>", "answer"])
    assert seen(run(objs, {"model": MODEL, "think": False})) == ("unasked", "answer")


# == the way back ================================================================================
def _req(**extra) -> dict:
    return {"model": MODEL, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!", "thinking": "The user greets me."},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "", "thinking": "Use the tool.",
         "tool_calls": [tool_call("bash", {"cmd": "ls"})]},
        {"role": "tool", "content": "a.txt", "tool_name": "bash"}], **extra}


def restore(request: dict, native: bool | None, **values) -> dict | None:
    c = ctx(request, **values)
    c.native_thinking = native
    out = ollama.restore_request(json.dumps(request).encode(), c)
    return None if out is None else json.loads(out)


def test_for_a_model_without_native_thinking_thinking_goes_back_inline_and_think_goes():
    got = restore(_req(think=True, stream=True), native=False)
    assert "think" not in got and got["stream"] is True
    a1, a2 = got["messages"][1], got["messages"][3]
    assert a1 == {"role": "assistant", "content": "<think>The user greets me.</think>Hello!"}
    assert a2 == {"role": "assistant", "content": "<think>Use the tool.</think>",
                  "tool_calls": [tool_call("bash", {"cmd": "ls"})]}
    assert got["messages"][4] == _req()["messages"][4]


def test_a_client_that_edits_the_thinking_gets_what_it_sent():
    req = _req()
    req["messages"][1]["thinking"] = "An edited thought."
    assert restore(req, native=False)["messages"][1]["content"] == "<think>An edited thought.</think>Hello!"


@pytest.mark.parametrize("native", [True, None])
def test_a_model_that_thinks_natively_or_is_not_known_gets_the_request_as_it_came(native):
    assert restore(_req(think="high"), native=native) is None


def test_think_restore_drop_and_keep():
    dropped = restore(_req(), native=False, restore="drop")
    assert [m.get("thinking") for m in dropped["messages"]] == [None] * 5
    assert dropped["messages"][1]["content"] == "Hello!"
    assert restore(_req(), native=False, restore="keep") is None
    assert restore(_req(think=True), native=False, restore="keep") == _req()   # think still goes


def test_a_request_with_nothing_to_change_goes_as_it_came():
    assert restore({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "think": False},
                   native=False) is None


def test_the_response_still_reads_the_think_the_client_sent():
    req = _req(think=True)
    c = ctx(req)
    c.native_thinking = False
    ollama.restore_request(json.dumps(req).encode(), c)
    assert c.request["think"] is True and thinking_switch(c.request) is True


@pytest.mark.parametrize("request_,want", [
    ({"model": "m", "think": True}, True), ({"model": "m", "think": "low"}, True),
    ({"model": "m", "think": False}, False), ({"model": "m"}, False),
    ({"model": "m", "messages": [{"role": "assistant", "content": "x", "thinking": "y"}]}, True),
    ({"model": "m", "messages": [{"role": "assistant", "content": "x", "thinking": ""}]}, True),   # (a layout's)
    ({"model": "m", "messages": [{"role": "assistant", "content": "x"}]}, True),
    ({"model": "m", "messages": [{"role": "assistant", "content": "", "thinking": ""}]}, False),
    ({"model": "m", "messages": [{"role": "user", "content": "x", "thinking": "y"}]}, False)])
def test_the_capabilities_are_asked_only_when_the_way_back_depends_on_them(request_, want):
    assert ollama.wants_capabilities(request_) is want


# == /api/show ===================================================================================
def test_show_path_is_beside_the_request_path():
    assert show_path("/api/chat") == "/api/show"
    assert show_path("/ollama/api/generate?x=1") == "/ollama/api/show"


@pytest.mark.parametrize("status,body,want", [
    (200, b'{"capabilities":["completion","thinking"]}', True), (200, b'{"capabilities":["completion"]}', False),
    (200, b'{"license":"MIT"}', None), (404, b'{"error":"model not found"}', None), (200, b"<html>", None),
    (200, b"[1]", None), (302, b"", None), (200, b"[" * 100_000, None)])
def test_what_an_api_show_answer_says(status, body, want):
    assert thinks(Answer(status, body)) is want
    assert thinks(None) is None


class ScriptedAsker:
    """An Asker that answers from a script and records what it was asked."""

    def __init__(self, answer: Answer | None) -> None:
        self.answer, self.calls = answer, []

    async def ask(self, server, method, path, body, headers, route):
        self.calls.append((server.url(path), json.loads(body), headers))
        return self.answer


SERVER = Server("http", "127.0.0.1", 11434)


def test_answers_are_kept_asked_once_for_a_burst_and_forgotten_when_contradicted():
    asker = ScriptedAsker(Answer(200, b'{"capabilities":["completion","thinking"]}'))
    now = [0.0]
    caps = Capabilities(asker, ttl=10, clock=lambda: now[0])

    def ask(client="c1"):
        return caps.native_thinking(SERVER, "/api/chat", "m", client, {"authorization": "Bearer k"})

    async def burst():
        return await asyncio.gather(*(ask() for _ in range(5)))
    assert asyncio.run(burst()) == [True] * 5
    assert asker.calls == [("http://127.0.0.1:11434/api/show", {"model": "m"}, {"authorization": "Bearer k"})]
    asyncio.run(ask())
    assert len(asker.calls) == 1
    asyncio.run(ask("c2"))    # another client asks for itself
    assert len(asker.calls) == 2
    now[0] = 11.0
    asyncio.run(ask())
    assert len(asker.calls) == 3
    caps.forget(SERVER, "/api/chat", "m", "c1")
    asyncio.run(ask())
    assert len(asker.calls) == 4


def test_no_answer_is_not_known_and_kept_briefly():
    asker = ScriptedAsker(None)
    now = [0.0]
    caps = Capabilities(asker, failure_ttl=30, clock=lambda: now[0])

    def ask():
        return asyncio.run(caps.native_thinking(SERVER, "/api/chat", "m", "c", {}))
    assert ask() is None and ask() is None and len(asker.calls) == 1
    now[0] = 31.0
    assert ask() is None and len(asker.calls) == 2


def test_a_model_name_past_the_longest_is_not_asked_about():
    asker = ScriptedAsker(Answer(200, b'{"capabilities":["thinking"]}'))
    caps = Capabilities(asker)
    assert asyncio.run(caps.native_thinking(SERVER, "/api/chat", "m" * 257, "c", {})) is None
    assert asyncio.run(caps.native_thinking(SERVER, "/api/chat", "m" * 256, "c", {})) is True
    assert len(asker.calls) == 1 and len(caps) == 1


# == NDJSON framing ==============================================================================
def test_ndjson_lines_cut_anywhere_and_glued_come_out_whole():
    data = b'{"a":1}\n{"b":"\xc3\xa9"}\r\n\n{"c":3}'
    for at in range(len(data) + 1):
        p = NDJSONParser()
        evs = p.feed(data[:at]) + p.feed(data[at:]) + p.finish()
        assert [e.raw for e in evs] == [b'{"a":1}\n', b'{"b":"\xc3\xa9"}\r\n', b"\n", b'{"c":3}']
        assert [e.data for e in evs] == ['{"a":1}', '{"b":"é"}', None, '{"c":3}']
        assert [e.eol for e in evs][:2] == [b"\n", b"\r\n"] and evs[-1].complete is False


def test_ndjson_parser_is_idle_between_lines_and_hands_over_what_it_holds():
    p = NDJSONParser()
    assert not p.idle()
    p.feed(b'{"a":1}\n')
    assert p.idle()
    p.feed(b'{"b"')
    assert not p.idle() and p.pending() == b'{"b"' and p.idle()


def test_the_engine_frames_ollama_streams_as_ndjson():
    assert engine.is_stream("application/x-ndjson", ollama) and not engine.is_stream("text/event-stream", ollama)
    assert engine.is_stream("application/x-ndjson; charset=utf-8")
    assert isinstance(engine.stream_driver(ollama, ctx()).parser, NDJSONParser)
    assert engine.surface_for_path("/ollama/api/chat", make_ctx().settings) is ollama
    assert engine.surface_for_path("/api/generate?x=1", make_ctx().settings) is ollama
    assert engine.surface_for_path("/api/chat", make_ctx(ollama="off").settings) is None


# == the real corpus (tests/corpus/SOURCES.md) ===================================================
from conftest import corpus_files  # noqa: E402

SAMPLES = {p.name: p for p in corpus_files("ollama__")}
LEFT_ALONE = ["ollama__gpt-oss-120b__native-thinking_stream_1.ndjson", "ollama__gemma3-1b__stream_1.ndjson",
              "ollama__gemma3-1b__generate-stream_1.ndjson"]


@pytest.mark.parametrize("name", LEFT_ALONE)
def test_corpus_native_thinking_and_plain_answers_pass_byte_for_byte(name):
    data = SAMPLES[name].read_bytes()
    model = json.loads(data.split(b"\n", 1)[0])["model"]
    rnd = random.Random(name)
    for sizes in ([len(data)], [1], [rnd.randint(1, 300) for _ in range(30)]):
        assert run(data, {"model": model}, _cut(data, sizes)) == data
    assert ollama.rewrite_body(data, ctx({"model": model})) is None   # (served as application/json too)


def _cut(data: bytes, sizes: list[int]) -> list[bytes]:
    out, i, k = [], 0, 0
    while i < len(data):
        out.append(data[i:i + sizes[k % len(sizes)]])
        i += sizes[k % len(sizes)]
        k += 1
    return out


def test_corpus_deepseek_r1_stream_gives_an_empty_thinking_block_and_the_answer():
    data = SAMPLES["ollama__deepseek-r1-1.5b__stream_1.ndjson"].read_bytes()
    out = run(data, {"model": "deepseek-r1:1.5b"})
    assert seen(out) == ("", "Hello! How can I assist you today? 😊")
    assert out.splitlines(keepends=True)[-1] == data.splitlines(keepends=True)[-1]   # the final line as it came
    for sizes in ([1], [7, 64, 3], [200]):
        assert run(data, {"model": "deepseek-r1:1.5b"}, _cut(data, sizes)) == out
    # And the stream agrees with the body of the same output.
    text = "".join(o["message"]["content"] for o in lines_of(data))
    body = json.loads(ollama.rewrite_body(go_json({"model": "deepseek-r1:1.5b", "created_at": "x", "message": {
        "role": "assistant", "content": text}, "done": True}).encode(), ctx({"model": "deepseek-r1:1.5b"})))
    assert (body["message"].get("thinking", ""), body["message"]["content"]) == seen(out)


@pytest.mark.parametrize("name,model", [("ollama__deepseek-r1-7b__1.json", "deepseek-r1:7b"),
                                        ("ollama__qwen3-8b__generate_1.json", "qwen3:8b"),
                                        ("ollama__qwen3-1.7b__2.json", "qwen3:1.7b")])
def test_corpus_bodies_move_the_block_and_keep_every_other_field(name, model):
    data = SAMPLES[name].read_bytes()
    before = json.loads(data)
    holder = before.get("message", before)
    key = "content" if "message" in before else "response"
    text = holder[key]
    assert text.startswith("<think>\n")
    out = json.loads(ollama.rewrite_body(data, ctx({"model": model})))
    got = out.get("message", out)
    assert got["thinking"] == text[len("<think>\n"):text.index("\n</think>")]
    assert got[key] == text[text.index("</think>\n\n") + len("</think>\n\n"):]
    del got["thinking"], got[key], holder[key]
    assert out == before


def test_corpus_tool_call_body_keeps_the_tool_call_and_moves_the_thinking():
    data = SAMPLES["ollama__qwen3-1.7b__tools_1.json"].read_bytes()
    before = json.loads(data)
    out = json.loads(ollama.rewrite_body(data, ctx({"model": "qwen3:1.7b"})))
    assert out["message"]["tool_calls"] == before["message"]["tool_calls"]
    assert out["message"]["content"] == ""
    assert out["message"]["thinking"].startswith("Okay, the user is asking for the temperature in Boulder")
    assert out["message"]["thinking"].endswith("I'll wrap that in the tool_call tags as specified.")


# == inspection: the mitmweb view and `thinkwire rewrite` =========================================
def _sections(text: str) -> list[tuple[str, str]]:
    import re
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^── (.+?) ─+\n(.*?)(?=\n\n|\Z)", text, re.S | re.M)]


def test_the_view_reads_a_rewritten_stream_as_thinking_answer_and_tool_call():
    from thinkwire.contentview import read_response, render
    calls = [tool_call("bash", {"cmd": "ls"}, call_id="call_7")]
    out = run(chat_objs(MODEL, ["<think>list</think>", "Looking."], tool_calls=calls))
    text = render(read_response(out, None, "application/x-ndjson"))
    assert text.startswith("surface      Ollama native API (stream, 4 events)\nmodel        " + MODEL)
    assert _sections(text) == [("reasoning", "list"), ("answer", "Looking."),
                               ("tool call: bash · call_7", '{\n  "cmd": "ls"\n}')]
    assert "done reason  stop" in text and "eval_count=282" in text


def test_the_view_reads_a_generate_body_and_a_request():
    from thinkwire.contentview import read_request, read_response, render
    body = ollama.rewrite_body(go_json(body_of(generate_objs(MODEL, ["<think>hm</think>Hi"]))).encode(), ctx())
    assert _sections(render(read_response(body, "ollama", "application/json"))) == [("reasoning", "hm"), ("answer", "Hi")]
    req = render(read_request(json.dumps(_req(think=True)).encode(), "ollama"), request=True)
    assert "\nthink    true\n" in req
    assert ("reasoning", "The user greets me.") in _sections(req) and ("tool call: bash · call_1", '{\n  "cmd": "ls"\n}') in _sections(req)


def test_the_view_is_chosen_for_handled_ndjson_flows():
    from mitmproxy.contentviews import Metadata
    from mitmproxy.test import tflow, tutils
    from thinkwire.contentview import PRIORITY, ThinkwireContentview
    f = tflow.tflow(req=tutils.treq(path=b"/api/chat"), resp=tutils.tresp(content=b'{"a":1}\n'))
    f.metadata["thinkwire"] = {"surface": "ollama", "profile": "default"}
    md = Metadata(flow=f, http_message=f.response, content_type="application/x-ndjson")
    assert ThinkwireContentview().render_priority(b'{"a":1}\n', md) == PRIORITY


def test_thinkwire_rewrite_reads_ndjson_for_the_ollama_surface(capsys):
    from thinkwire import cli
    path = SAMPLES["ollama__deepseek-r1-1.5b__stream_1.ndjson"]
    assert cli.main(["rewrite", "--surface", "ollama", "--model", "deepseek-r1:1.5b", str(path)]) == 0
    assert seen(capsys.readouterr().out.encode()) == ("", "Hello! How can I assist you today? 😊")
    assert cli.main(["rewrite", "--surface", "chat", str(path)]) == 2
    assert "an NDJSON stream, which chat does not stream (--surface ollama)" in capsys.readouterr().err


# == odd shapes ==================================================================================
def test_a_generate_line_whose_text_holds_a_boundary_becomes_a_line_per_run():
    got = lines_of(run(generate_objs(MODEL, ["<think>a</think>b"])))
    assert got[:2] == [{"model": MODEL, "created_at": created_at(0), "response": "", "thinking": "a", "done": False},
                       {"model": MODEL, "created_at": created_at(0), "response": "b", "done": False}]


def test_lines_without_created_at_take_the_byte_path_too():
    objs = [{k: v for k, v in o.items() if k != "created_at"} for o in chat_objs(MODEL, ["<think>"] + [" x"] * 9)]
    out, hits = _run_rw(stream_bytes(objs), True)
    assert hits >= 7 and out == _run_rw(stream_bytes(objs), False)[0]


@pytest.mark.parametrize("body", [b"[1, 2]", b'{"error": "model not found"}', b'{"model": "m", "done": true}',
                                  b'{"model": "m", "message": {"role": "assistant", "content": 7}, "done": true}'])
def test_bodies_of_other_shapes_are_left_as_they_came(body):
    assert ollama.rewrite_body(body, ctx()) is None


def test_an_empty_thinking_field_is_not_native_and_is_replaced():
    body = go_json({"model": MODEL, "message": {"role": "assistant", "content": "<think>x</think>y", "thinking": ""},
                    "done": True}).encode()
    assert json.loads(ollama.rewrite_body(body, ctx()))["message"] == {"role": "assistant", "content": "y",
                                                                        "thinking": "x"}


def test_an_empty_thinking_sent_back_is_removed_without_counting():
    req = {"model": MODEL, "messages": [{"role": "assistant", "content": "a", "thinking": ""}]}
    c = ctx(req)
    c.native_thinking = False
    out = json.loads(ollama.restore_request(json.dumps(req).encode(), c))
    assert out["messages"] == [{"role": "assistant", "content": "a"}] and c.stats.restored == 0
    assert ollama.wants_capabilities(None) is False


def test_the_view_reads_errors_prompts_and_images():
    from thinkwire.contentview import read_request, read_response, render
    data = b"".join(stream_bytes(generate_objs(MODEL, ["Hi"])[:1])) + b'{"error":"out of memory"}\n'
    assert [(k, v.strip()) for k, v in _sections(render(read_response(data, "ollama", "application/x-ndjson")))] == [
        ("answer", "Hi"), ("error", "out of memory")]
    req = {"model": MODEL, "system": "Be brief.", "prompt": "hi", "images": ["aGk="]}
    text = render(read_request(json.dumps(req).encode(), None), request=True)
    assert "Ollama native API (request)" in text and "Be brief." in text and "hi" in text


def test_a_refusal_is_read_with_a_cap_on_what_its_body_decodes_to():
    """The 400 that makes thinkwire forget a model's capabilities is the upstream's body: it is
    decoded up to REFUSAL_MAX only (a gzip bomb is not read; a body it cannot decode is no refusal)."""
    import gzip
    from mitmproxy.test import tutils
    from thinkwire.capabilities import REFUSAL_MAX, refuses_thinking
    said = b'{"error":"\\"m\\" does not support thinking"}'

    def resp(body, encoding=None):
        r = tutils.tresp(status_code=400, content=b"")
        r.raw_content = body
        if encoding:
            r.headers["content-encoding"] = encoding
        return r
    assert refuses_thinking(resp(said)) is True
    assert refuses_thinking(resp(gzip.compress(said), "gzip")) is True
    assert refuses_thinking(resp(gzip.compress(b" " * REFUSAL_MAX + said), "gzip")) is False
    assert refuses_thinking(resp(b"not gzip", "gzip")) is False
    assert refuses_thinking(resp(b'{"error":"model not found"}')) is False
