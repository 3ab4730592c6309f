"""Every shipped dialect: each default pair and each profile, split at every position.

Samples are built from tagsets.yaml itself, so a profile added there is tested here too.
Surface-specific checks live in SURFACE_CHECKS: each takes (model, output text, chunks) and
returns (reasoning, content) as the client would read them.
"""

import json

import pytest

from conftest import make_ctx
from thinkwire import engine, tagsets
from thinkwire.request import thinking_switch
from thinkwire.surfaces import chat

SHIPPED = tagsets.load(tagsets.SHIPPED)
REASONING = "Let me think: 2 < 3, and 5 > 4."
ANSWER = "The answer is 42."


def dialect_samples():
    """(id, model, output text, expected reasoning, expected content)."""
    out = []
    for pair in SHIPPED.default.pairs:
        out.append((f"default {pair.open}", "some-custom-model",
                    f"{pair.open}\n{REASONING}\n{pair.close}\n\n{ANSWER}", REASONING, ANSWER))
    for p in SHIPPED.profiles:
        model = name_of(p)
        if p.starts_inside and not p.thinking_default:
            # A stream of such a model starts inside only when the request turns thinking on.
            model = json.dumps({"model": model, "chat_template_kwargs": thinking_on(p)})
        for pair in p.declared or SHIPPED.default.pairs:
            opening = "" if p.starts_inside else pair.open
            wrap_open, wrap_close = (p.strip[0], p.strip[1]) if len(p.strip) >= 2 else ("", "")
            if p.name == "gpt-oss":
                wrap_open, wrap_close = p.strip[0], p.strip[-1]
            text = f"{opening}\n{REASONING}\n{pair.close}\n{wrap_open}{ANSWER}{wrap_close}"
            out.append((f"{p.name} {pair.open}", model, text, REASONING, ANSWER))
    return out


def name_of(p):
    """A model name the profile's first pattern matches (a `*` stands for a separate word)."""
    return p.models[0].replace("*", "-").strip("-")


def thinking_on(p):
    """chat_template_kwargs that turn thinking on for the profile's template."""
    name = (p.switches or ("enable_thinking",))[0]
    return {name: {"thinking_mode": "enabled", "reasoning_effort": "high"}.get(name, True)}


SAMPLES = dialect_samples()


def request_for(model):
    """A model name, or a whole request as JSON (for samples that need request flags)."""
    return json.loads(model) if model.startswith("{") else {"model": model}


def chat_body(model, text):
    req = request_for(model)
    body = json.dumps({"model": req["model"], "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})
    new = chat.rewrite_body(body.encode(), make_ctx(req))
    msg = json.loads(new)["choices"][0]["message"] if new else {"content": text}
    return msg.get("reasoning_content", ""), msg["content"]


def chat_stream(model, chunks):
    req = request_for(model)
    ctx = make_ctx(req)
    driver = engine.stream_driver(chat, ctx)
    data = b""
    for c in chunks:
        ev = {"model": req["model"], "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
        data += b"".join(driver(b"data: " + json.dumps(ev).encode() + b"\n\n"))
    data += b"".join(driver(b"data: [DONE]\n\n") + driver(b""))
    r = c_ = ""
    for line in data.split(b"\n"):
        if line.startswith(b"data: {"):
            d = json.loads(line[6:])["choices"][0]["delta"]
            r += d.get("reasoning_content") or ""
            c_ += d.get("content") or ""
    return r, c_



def assert_chat_splits(model, text, want):
    """The body, and the stream cut in two at every position, all give `want`."""
    assert chat_body(model, text) == want
    for k in range(len(text) + 1):
        assert chat_stream(model, [text[:k], text[k:]]) == want, k


@pytest.mark.parametrize("name,model,text,reasoning,content", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_dialect_chat_body(name, model, text, reasoning, content):
    assert chat_body(model, text) == (reasoning, content)


@pytest.mark.parametrize("name,model,text,reasoning,content", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_dialect_chat_stream_split_at_every_position(name, model, text, reasoning, content):
    for k in range(len(text) + 1):
        assert chat_stream(model, [text[:k], text[k:]]) == (reasoning, content), k


def test_every_profile_and_pair_has_a_sample():
    names = {s[0] for s in SAMPLES}
    for p in SHIPPED.profiles:
        for pair in p.declared or SHIPPED.default.pairs:
            assert f"{p.name} {pair.open}" in names


def test_every_profile_is_reachable_by_its_own_pattern():
    """A profile shadowed by an earlier one could never apply."""
    for p in SHIPPED.profiles:
        assert SHIPPED.profile_for(name_of(p)) is p, p.name


@pytest.mark.parametrize("model,profile", [
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"), ("DeepSeek-R1-Distill-Qwen-32B", "deepseek-r1"),
    ("Qwen/QwQ-32B", "qwq"), ("qwen3-32b", "default"), ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-thinking"),
    ("openai/gpt-oss-20b", "gpt-oss"), ("MiniMax-M2.7", "minimax-m2"), ("deepseek-v3.1", "deepseek-v3"),
    ("zai-org/GLM-4.7-Flash", "glm-4.7"), ("glm-4.5", "default"), ("magistral-small-2509", "magistral"),
])
def test_real_model_names_get_the_right_profile(model, profile):
    assert SHIPPED.profile_for(model).name == profile


# -- starts inside ------------------------------------------------------------------------
def test_starts_inside_profile_streams_reasoning_before_the_closing_tag():
    assert chat_stream("deepseek-r1", ["I reason", " here", "</think>", "answer"]) == ("I reason here", "answer")


def test_starts_inside_profile_with_no_closing_tag_is_all_reasoning():
    assert chat_stream("qwq-32b", ["cut off ", "mid-thought"]) == ("cut off mid-thought", "")
    assert chat_body("qwq-32b", "cut off mid-thought") == ("cut off mid-thought", "")


def test_starts_inside_drops_an_opening_tag_the_model_writes_anyway():
    assert chat_stream("deepseek-r1-0528", ["<thi", "nk>\nr</think>a"]) == ("r", "a")


def test_tagless_means_content_without_a_closing_tag_is_the_answer():
    # DeepSeek-V3.1 with thinking off by default: no tags at all is an answer.
    assert chat_body("deepseek-v3.1", "plain answer") == ("", "plain answer")
    assert chat_stream("deepseek-v3.1", ["plain ", "answer"]) == ("", "plain answer")


def test_a_body_with_a_closing_tag_and_no_opening_tag_makes_the_text_before_it_reasoning():
    assert chat_body("deepseek-v3.1", "thinking</think>answer") == ("thinking", "answer")
    # Its stream cannot know in time: the text went out as answer before the tag came, and the
    # tag stays where the model wrote it, the boundary the client can still see.
    assert chat_stream("deepseek-v3.1", ["think", "ing</think>answer"]) == ("", "thinking</think>answer")
    on = json.dumps({"model": "deepseek-v3.1", "chat_template_kwargs": {"thinking": True}})
    assert chat_body(on, "thinking</think>answer") == chat_stream(on, ["think", "ing</think>answer"]) == ("thinking", "answer")


def test_tagless_means_content_stream_starts_inside_when_the_request_turns_thinking_on():
    ctx = make_ctx({"model": "deepseek-v3.1", "chat_template_kwargs": {"thinking": True}})
    assert ctx.rules().starts_inside


def test_request_turning_thinking_off_never_starts_inside():
    ctx = make_ctx({"model": "qwen3.5-27b", "chat_template_kwargs": {"enable_thinking": False}})
    assert not ctx.rules().starts_inside


def test_a_switch_the_template_does_not_read_changes_nothing():
    # QwQ's template always opens the block: it has no switch.
    assert make_ctx({"model": "qwq", "chat_template_kwargs": {"enable_thinking": False}}).rules().starts_inside


def test_starts_inside_option_forces_it_for_every_model():
    ctx = make_ctx({"model": "my-custom-name"}, starts_inside="on")
    assert ctx.rules().starts_inside


@pytest.mark.parametrize("request_body,switch", [
    (None, None), ({}, None), ({"chat_template_kwargs": {"enable_thinking": False}}, False),
    ({"chat_template_kwargs": {"thinking": True}}, True), ({"chat_template_kwargs": {"thinking_mode": "disabled"}}, False),
    ({"enable_thinking": True}, True), ({"thinking": False}, False), ({"thinking": {"type": "enabled"}}, True),
    ({"thinking": {"type": "disabled"}}, False), ({"thinking": {"type": "adaptive"}}, True),
    ({"reasoning_effort": "none"}, False), ({"reasoning_effort": "high"}, True),
    ({"reasoning": {"effort": "low"}}, True), ({"reasoning": {"summary": "auto"}}, None),
    ({"chat_template_kwargs": "x"}, None),
])
def test_thinking_switch_read_from_the_request(request_body, switch):
    assert thinking_switch(request_body) is switch


# -- strip markers ------------------------------------------------------------------------
def test_harmony_final_channel_header_leaves_the_answer():
    text = "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>Hi<|return|>"
    assert_chat_splits("gpt-oss-20b", text, ("think", "Hi"))


def test_strip_markers_leave_the_answer_anywhere():
    # Whitespace after a wrapper that opens the answer is trimmed; before its end it was sent.
    assert chat_body("hunyuan-a13b", "<think>\nr\n</think>\n<answer>\nA <answer> B\n</answer>") == ("r", "A  B\n")


def test_strip_marker_is_not_removed_inside_reasoning():
    assert chat_body("hunyuan-a13b", "<think>about <answer></think>x") == ("about <answer>", "x")


def test_loader_rejects_a_strip_marker_that_is_a_tag(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - name: a\n    models: ["m"]\n'
                 '    strip: ["<x>"]\n')
    with pytest.raises(tagsets.TagsetError, match=r":7: strip marker '<x>' is also a tag"):
        tagsets.load(p)


def test_a_strip_marker_may_be_a_closing_tag(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - name: a\n    models: ["m"]\n'
                 '    strip: ["</x>"]\n')
    assert tagsets.load(p).profiles[0].strip == ("</x>",)


def test_profiles_take_the_default_end_markers_unless_they_set_their_own(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text('default:\n  pairs:\n    - ["<x>", "</x>"]\n  ends_reasoning: ["<call>"]\nprofiles:\n'
                 '  - name: a\n    models: ["a"]\n  - name: b\n    models: ["b"]\n    ends_reasoning: []\n')
    ts = tagsets.load(p)
    assert [q.ends for q in (ts.default, *ts.profiles)] == [("<call>",), ("<call>",), ()]


def test_think_tags_keep_the_shipped_end_markers():
    assert tagsets.from_tags_string("<r> </r>").default.ends == SHIPPED.default.ends != ()


# -- the field's cases, by model (issue: conformance with vLLM, SGLang, llama.cpp) -------------
@pytest.mark.parametrize("text", [
    "<|channel|>analysis<|message|>Thinking...<|start|>assistant<|channel|>final<|message|>Hello world",
    "<|channel|>analysis<|message|>Thinking...<|end|><|start|>assistant<|channel|>final<|message|>Hello world<|return|>",
])
def test_harmony_analysis_ends_at_the_next_header_when_end_was_dropped(text):
    assert_chat_splits("gpt-oss-20b", text, ("Thinking...", "Hello world"))


def test_harmony_final_only_message_agrees_as_body_and_stream():
    text = "<|start|><|channel|>final<|message|>x<|end|>"
    assert_chat_splits("gpt-oss-20b", text, ("", "x"))


def test_harmony_tool_call_ends_the_analysis_and_stays_for_a_tool_parser():
    call = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"SF"}<|call|>'
    text = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant" + call
    # (The whole header, `<|start|>assistant` included: a tool call stays as written.)
    assert chat_body("gpt-oss-20b", text) == ("Need weather.", "<|start|>assistant" + call)
    assert chat_stream("gpt-oss-20b", list(text)) == ("Need weather.", "<|start|>assistant" + call)


@pytest.mark.parametrize("model,text,call", [
    ("qwen3-30b-a3b-thinking-2507", "I need to read the file.\n\n", '<tool_call>\n{"name": "read"}\n</tool_call>'),
    ("qwen3-8b", "<think>I need to read the file.\n\n", '<tool_call>\n{"name": "read"}\n</tool_call>'),
    ("kimi-k2-thinking", "<think>I need to read the file.", "<|tool_calls_section_begin|><|tool_call_begin|>x"),
    ("hunyuan-a13b", "<think>I need to read the file.\n", '<tool_calls>[{"name": "read"}]</tool_calls>'),
])
def test_a_tool_call_inside_unclosed_reasoning_ends_it(model, text, call):
    assert chat_body(model, text + call) == ("I need to read the file.", call)
    assert chat_stream(model, list(text + call)) == ("I need to read the file.", call)


def test_gemma_4_bare_channel_is_reasoning():
    for text in ("<|channel>Let me think<channel|>Answer", "<|channel>thought\nLet me think<channel|>Answer"):
        assert_chat_splits("gemma-4-27b", text, ("Let me think", "Answer"))


def test_an_opening_tag_inside_a_profile_opened_block_is_markup():
    assert chat_body("deepseek-r1", "Intro\n<think>reasoning</think>\nAnswer") == ("Intro\nreasoning", "Answer")
    assert chat_stream("deepseek-r1", ["Intro\n<th", "ink>reasoning</think>\nAnswer"]) == ("Intro\nreasoning", "Answer")


@pytest.mark.parametrize("request_body,expected", [
    ({"model": "minimax-m3"}, ("", "plain answer")),
    ({"model": "minimax-m3", "chat_template_kwargs": {"thinking_mode": "enabled"}}, ("plain answer", "")),
])
def test_minimax_m3_starts_inside_only_when_the_request_turns_thinking_on(request_body, expected):
    assert chat_stream(json.dumps(request_body), ["plain ", "answer"]) == expected


def test_loader_rejects_a_strip_that_is_not_a_list(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - name: a\n    models: ["m"]\n    strip: x\n')
    with pytest.raises(tagsets.TagsetError, match="must be a list of strings"):
        tagsets.load(p)


# -- the other surfaces ---------------------------------------------------------------------
import support.messages as M  # noqa: E402  (each surface's builders and SDK readers)
import support.responses as R  # noqa: E402
from thinkwire.surfaces import messages, responses  # noqa: E402


def messages_result(msg):
    thinking = "".join(b["thinking"] for b in msg["content"] if b["type"] == "thinking")
    text = "".join(b["text"] for b in msg["content"] if b["type"] == "text")
    return thinking, text


def messages_body(model, text):
    data = M.body(M.text(text), model=request_for(model)["model"])
    out, _, _ = M.run_body(data, ctx=make_ctx(request_for(model)))
    return messages_result(M.sdk_body(out))


def messages_stream(model, chunks):
    data = M.stream(M.text(*chunks), model=request_for(model)["model"])
    out, _ = M.run_stream(data, ctx=make_ctx(request_for(model)))
    return messages_result(M.sdk_stream(out))


def responses_result(final):
    out = final if isinstance(final, list) else [it.to_dict() for it in final.output]
    # (a reasoning item's text is in its summary by default: think_responses_content=off)
    reasoning = "".join(p["text"] for it in out if it["type"] == "reasoning"
                        for p in it.get("content") or it.get("summary") or [])
    answer = "".join(p.get("text", "") for it in out if it["type"] == "message" for p in it["content"])
    return reasoning, answer


def responses_body(model, text):
    data = R.body_of([R.msg([text])])
    new = responses.rewrite_body(data, make_ctx(request_for(model)))
    return responses_result(json.loads(new if new is not None else data)["output"])


def responses_stream(model, chunks):
    out, _ = R.run_stream(R.stream_of([R.msg(chunks)]), ctx=make_ctx(request_for(model)))
    return responses_result(R.sdk_final(out))


SURFACE_CHECKS = {
    "messages": (messages_body, messages_stream),
    "responses": (responses_body, responses_stream),
}
# Splitting at every position through the SDK is slow; a spread of positions covers the tags.
POSITIONS = 12


@pytest.mark.parametrize("surface", sorted(SURFACE_CHECKS))
@pytest.mark.parametrize("name,model,text,reasoning,content", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_dialect_on_other_surfaces_body_and_stream(surface, name, model, text, reasoning, content):
    body_check, stream_check = SURFACE_CHECKS[surface]
    assert body_check(model, text) == (reasoning, content)
    step = max(1, len(text) // POSITIONS)
    for k in list(range(0, len(text) + 1, step)) + [len(text)]:
        assert stream_check(model, [text[:k], text[k:]]) == (reasoning, content), k


@pytest.mark.parametrize("surface", sorted(SURFACE_CHECKS))
def test_every_tag_position_on_other_surfaces_for_think(surface):
    text = "<think>\nr\n</think>\n\nanswer"
    _, stream_check = SURFACE_CHECKS[surface]
    for k in range(len(text) + 1):
        assert stream_check("m", [text[:k], text[k:]]) == ("r", "answer"), k


# -- through mitmdump -----------------------------------------------------------------------
@pytest.mark.e2e
def test_bad_tagsets_file_stops_mitmdump_naming_file_line_and_problem(tmp_path):
    from harness import start_fails
    bad = tmp_path / "tags.yaml"
    bad.write_text('default:\n  pairs:\n    - ["<x>", ""]\n')
    out = start_fails({}, tmp_path, env={"THINK_TAGSETS": str(bad)})
    assert f"{bad}:3" in out and "a closing tag is empty" in out and "[exit 0]" not in out


@pytest.mark.e2e
def test_stray_closing_tag_in_a_stream_stays_as_the_boundary_and_the_log_suggests_a_profile(proxy, up):
    from harness import post, sse_reply
    chunks = [{"model": "mystery-model", "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
              for c in ("thought", "</think>", "answer")]
    up.route("/chat/completions", sse_reply([b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks]))
    r = post(proxy.url + "/v1/chat/completions", {"model": "mystery-model", "stream": True})
    got = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                  for line in r.content.split(b"\n") if line.startswith(b"data: {"))
    assert got == "thought</think>answer"   # (the text before it went out as answer: the tag shows where it ended)
    import time
    for _ in range(50):
        if any("mystery-model" in line and "starts_inside" in line for line in proxy.lines):
            break
        time.sleep(0.1)
    assert any("mystery-model" in line and "starts_inside: true" in line for line in proxy.lines)


def test_think_starts_inside_forces_starting_inside_even_for_a_tagless_means_content_profile():
    assert make_ctx({"model": "deepseek-v3.1"}, starts_inside="on").rules().starts_inside
    assert not make_ctx({"model": "deepseek-v3.1", "chat_template_kwargs": {"thinking": False}},
                        starts_inside="on").rules().starts_inside
