"""thinkwire.serverstart: reading a rendered prompt's end, the request's shape, and the bounds of
what is kept (entries, bytes, key sizes), against scripted servers (support.templates)."""

from __future__ import annotations

import asyncio

import pytest

from harness import Upstream
from support import templates as t
from thinkwire.outbound import Asker, Kept, Server
from thinkwire.rules import TagPair
from thinkwire.serverstart import (KWARGS_MAX, LONGEST, MAX_BYTES, SWITCHES_KEPT, ServerStart, Shape, Told,
                                   read_prompt, shape_of, tokens_text)

THINK = TagPair("<think>", "</think>")
PAIRS = (THINK, TagPair("<thinking>", "</thinking>"), TagPair("<seed:think>", "</seed:think>"))


@pytest.mark.parametrize("prompt,got", [
    ("<｜User｜>Hi<｜Assistant｜><think>\n", (True, THINK)),                  # DeepSeek-R1
    ("<|im_start|>assistant\n<think>\n", (True, THINK)),                     # Qwen3.5, QwQ
    ("<|im_start|>assistant\n<think>\n\n</think>\n\n", (False, None)),      # Qwen3 enable_thinking: false
    ("<|assistant|>\n<think></think>", (False, None)),                      # GLM off
    ("<|start_header_id|>assistant<|end_header_id|>\n\n", (False, None)),   # opens nothing
    ("Use <think> tags.<|im_end|>\n<|im_start|>assistant\n", (False, None)),  # a tag in the system prompt
    ("<seed:think>", (True, TagPair("<seed:think>", "</seed:think>"))),
])
def test_the_prompts_end_decides(prompt, got):
    assert read_prompt(prompt, PAIRS) == got


def test_vllm_token_strings_read_as_text():
    assert tokens_text(["<|im_start|>", "assistant", "Ċ", "<think>", "Ċ"]) == "<|im_start|>assistant\n<think>\n"


def test_the_shape_keeps_what_a_template_reads_and_nothing_else():
    long_history = [{"role": "user", "content": "x" * 10_000}] * 50
    a = shape_of({"messages": [{"role": "system", "content": "Be terse. /no_think"}, *long_history]}, "chat")
    b = shape_of({"messages": [{"role": "system", "content": "Other words /no_think"},
                               {"role": "user", "content": "y"}]}, "chat")
    assert a == b == Shape(system=("/no_think",))
    assert shape_of({"system": [{"type": "text", "text": "/think"}], "messages": []}, "messages").system == ("/think",)
    assert shape_of({"instructions": "/no_think", "input": "q"}, "responses").system == ("/no_think",)
    assert shape_of({"chat_template_kwargs": {"enable_thinking": False}}, "chat").kwargs == '{"enable_thinking":false}'
    assert shape_of({"chat_template_kwargs": {"x": "y" * KWARGS_MAX}}, "chat") is None   # not asked about
    many = " ".join(["/think"] * 100)
    assert len(shape_of({"messages": [{"role": "system", "content": many}]}, "chat").system) == SWITCHES_KEPT


def test_kept_is_bounded_in_bytes():
    async def run():
        kept = Kept(60, 5, 1000, max_bytes=100, weigh=lambda k, v: 30)

        async def answer():
            return "yes"
        for n in range(10):
            await kept.get(n, answer)
        return len(kept), kept.bytes
    assert asyncio.run(run()) == (3, 90)


@pytest.fixture(scope="module")
def fleet():
    up = Upstream()
    f = t.Fleet(up)
    yield f, up
    up.close()


def _ask(up, ss: ServerStart, prefix: str, model: str, shape: Shape | None = None, client: str = "c"):
    return asyncio.run(ss.told(Server("http", "127.0.0.1", up.port), prefix + "/v1/chat/completions", "chat",
                               model, client, shape or Shape(), {}))


def test_a_conversation_asks_once_and_each_shape_once(fleet):
    f, up = fleet
    tm = t.model("qwen3.5")
    if tm is None:
        pytest.skip(f"the real chat template Qwen3.5-4B.jinja is not in {t.DIR}")
    f.add("/q", "vllm", {"q": tm})
    ss = ServerStart(Asker(), lambda: PAIRS)
    first = _ask(up, ss, "/q", "q")
    assert (first.inside, first.pair, first.model, first.how) == (True, THINK, "Qwen3.5-4B-Q4_K_M", "server template")
    made = ss.asker.made
    assert _ask(up, ss, "/q", "q") == first and ss.asker.made == made    # kept
    off = _ask(up, ss, "/q", "q", Shape(kwargs='{"enable_thinking":false}'))
    assert (off.inside, off.pair) == (False, None) and ss.asker.made == made + 1   # one more: /tokenize
    assert _ask(up, ss, "/q", "q", client="other") == first   # another client asks for itself
    assert ss.asker.made == made + 1 + 3   # /props (404), /v1/models and /tokenize again


def test_what_is_kept_stays_within_its_bytes_and_names_past_the_longest_are_not_asked(fleet):
    f, up = fleet
    tm = t.model("llama-3.2")
    if tm is None:
        pytest.skip(f"the real chat template is not in {t.DIR}")
    served = {f"m{n}-" + "x" * 200: tm for n in range(30)}
    f.add("/many", "vllm", served)
    ss = ServerStart(Asker(), lambda: PAIRS)
    assert ss._told.max_bytes == MAX_BYTES
    ss._told.max_bytes = 20_000   # (MAX_BYTES, scaled down: 1 MiB takes a thousand asks)
    for name in served:
        _ask(up, ss, "/many", name, Shape(kwargs='{"k":"' + "z" * 900 + '"}'))
    assert 15_000 < ss._told.bytes <= 20_000 and len(ss._told) < 30
    made = ss.asker.made
    assert _ask(up, ss, "/many", "n" * (LONGEST + 1)) is None and ss.asker.made == made


def test_a_server_with_no_endpoint_is_not_known_and_kept_so(fleet):
    f, up = fleet
    ss = ServerStart(Asker(), lambda: PAIRS)
    assert _ask(up, ss, "/nothing-here", "m") is None
    made = ss.asker.made
    assert made == 4   # /props, /v1/models, /api/v1/models, /api/v0/models: each 404
    assert _ask(up, ss, "/nothing-here", "m") is None and ss.asker.made == made


def _need(name: str) -> t.TemplateModel:
    tm = t.model(name)
    if tm is None:
        pytest.skip(f"the real chat template {t.MODELS[name][0]}.jinja is not in {t.DIR}")
    return tm


def test_sglang_tells_the_model_path_behind_its_served_name(fleet):
    """SGLang's /v1/models gives the served name as `root` too: the model is /get_model_info's."""
    f, up = fleet
    f.add("/sgl", "sglang", {"local-model": _need("r1-distill")})
    ss = ServerStart(Asker(), lambda: PAIRS)
    got = _ask(up, ss, "/sgl", "local-model")
    assert got == Told("sglang", None, None, "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B")
    assert got.how == "server model identity"
    assert [s.path for s in up.requests[-3:]] == ["/sgl/props", "/sgl/v1/models", "/sgl/get_model_info"]


def test_lm_studio_tells_the_key_behind_a_loaded_instances_identifier(fleet):
    """LM Studio 0.4: /api/v1/models names each loaded instance (`lms load KEY --identifier
    NAME`) and its model's key; its 200 to /props (an error body) is not llama-server's."""
    f, up = fleet
    f.add("/lms", "lmstudio", {"local-model": _need("qwq")})
    ss = ServerStart(Asker(), lambda: PAIRS)
    assert _ask(up, ss, "/lms", "local-model") == Told("lmstudio", None, None, "qwen/qwq-32b")
    assert _ask(up, ss, "/lms", "qwen/qwq-32b") == Told("lmstudio", None, None, "qwen/qwq-32b")   # the key itself
    assert _ask(up, ss, "/lms", "not-loaded") is None
    assert [s.path for s in up.requests[-3:]] == ["/lms/props", "/lms/v1/models", "/lms/api/v1/models"]


def test_lm_studio_0_3_is_known_by_its_v0_list(fleet):
    f, up = fleet
    f.add("/lms03", "lmstudio-0.3", {"qwen/qwq-32b": _need("qwq")})
    ss = ServerStart(Asker(), lambda: PAIRS)
    assert _ask(up, ss, "/lms03", "qwen/qwq-32b") == Told("lmstudio", None, None, "qwen/qwq-32b")
    assert [s.path for s in up.requests[-4:]] == ["/lms03/props", "/lms03/v1/models", "/lms03/api/v1/models",
                                                  "/lms03/api/v0/models"]


def test_a_servers_model_list_is_read_up_to_listed():
    """A list of 1,000 models (each with 3 loaded instances) is read only to LISTED entries."""
    import json as _json
    from thinkwire.outbound import Answer
    from thinkwire.serverstart import LISTED
    many = {"models": [{"key": f"org/m{n}", "loaded_instances": [{"id": f"a{n}-{i}"} for i in range(3)]}
                       for n in range(1000)]}
    vllm = {"data": [{"id": f"m{n}", "owned_by": "vllm", "root": f"/r/m{n}"} for n in range(1000)]}

    async def ask(answers):
        async def one(method, where, body=None):
            return Answer(200, _json.dumps(answers[where]).encode()) if where in answers else Answer(404, b"")
        return await ServerStart(Asker(), lambda: PAIRS)._find_kind(one)
    lms = asyncio.run(ask({"/api/v1/models": many}))
    assert lms.kind == "lmstudio" and len(lms.roots) == LISTED and lms.roots[:4] == (
        ("a0-0", "org/m0"), ("a0-1", "org/m0"), ("a0-2", "org/m0"), ("org/m0", "org/m0"))
    v = asyncio.run(ask({"/v1/models": vllm}))
    assert v.kind == "vllm" and len(v.roots) == LISTED


def test_the_flow_record_says_how_the_start_was_decided():
    from thinkwire.record import FlowRecord
    rec = FlowRecord("chat", "default", 1, 22, start="started inside <think> (the server's chat template)")
    assert rec.summary() == "1 reasoning block(s), 22 chars moved; started inside <think> (the server's chat template)"


def test_an_ollama_trailing_assistant_message_is_a_prefill():
    from thinkwire import engine
    from thinkwire.settings import Settings
    request = {"model": "deepseek-r1:7b", "messages": [{"role": "user", "content": "q"},
                                                       {"role": "assistant", "content": "<think>Let me"}]}
    ctx = engine.new_context(Settings.from_values({}), request, surface="ollama")
    got = ctx.split(" see.</think>It is 4.")
    assert (got.reasoning, ctx.plan.how, ctx.inside_because) == ([" see."], "prefill", "prefill")
    answer = engine.new_context(Settings.from_values({}), dict(request, messages=[
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "Sure,"}]), surface="ollama")
    assert answer.split(" it is 4.").reasoning == [] and answer.plan.describe() == "started in the answer (the prefill's text)"


def test_the_server_template_decides_before_the_profile_and_the_real_name_picks_the_profile():
    from thinkwire import engine
    from thinkwire.serverstart import Told
    from thinkwire.settings import Settings
    s = Settings.from_values({})
    ctx = engine.new_context(s, {"model": "deepseek-r1-distill"}, surface="chat")
    ctx.told = Told("vllm", False, None, "DeepSeek-R1-Distill-Qwen-7B")
    assert ctx.split("It is 4.").reasoning == [] and ctx.plan.how == "server template"
    alias = engine.new_context(s, {"model": "local-model"}, surface="chat")
    alias.told = Told("sglang", None, None, "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B")
    assert alias.split("Two.</think>It is 4.").reasoning == ["Two."]
    assert (alias.profile.name, alias.plan.describe()) == (
        "deepseek-r1", "started inside the reasoning block (the profile of the model the server runs)")
