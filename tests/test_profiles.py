"""Which profile a flow gets and where its model's output starts: real model names, the request
switches a template reads, what a silent request means, prefills, structured output, how the
output ended, bodies that use the whole text, and what thinkwire learns of a model."""

import json
import re

import pytest
from hypothesis import assume, given, settings, strategies as st

import support.messages as M
import support.responses as R
from conftest import make_ctx
from thinkwire import engine, tagsets
from thinkwire.context import STOP
from thinkwire.learning import LONGEST, SIZE, Learner
from thinkwire.request import prefill, structured, thinking_switch
from thinkwire.surfaces import chat, messages, responses

SHIPPED = tagsets.load(tagsets.SHIPPED)

# Real served names and the profile each must get. Sources: Ollama library tags; GGUF file names
# llama-server serves under; Hugging Face ids (vLLM, SGLang); hosted slugs (Fireworks'
# accounts/fireworks/models/..., OpenRouter, Groq, Alibaba Model Studio, Vertex AI MaaS,
# Scaleway); the names Claude Code, Codex and the SDKs send; llama-server aliases; and the names
# in /work/shared/realworld and tests/corpus. The last rows are fine-tunes and checkpoints whose
# names merely contain a family's letters.
NAMES = [
    # Ollama library tags
    ("qwen3:8b", "default"), ("qwen3:30b-a3b", "default"), ("qwen3-coder:30b", "default"),
    ("deepseek-r1:1.5b", "deepseek-r1"), ("deepseek-r1:8b", "deepseek-r1"), ("deepseek-r1:671b", "deepseek-r1"),
    ("deepseek-r1:latest", "deepseek-r1"), ("deepseek-r1:8b-gpu", "deepseek-r1"), ("qwq:32b", "qwq"),
    ("gpt-oss:20b", "gpt-oss"), ("gpt-oss:120b", "gpt-oss"), ("magistral:24b", "magistral"),
    ("phi4-reasoning:14b", "default"), ("granite3.3:8b", "default"), ("exaone-deep:7.8b", "exaone-deep"),
    ("openthinker:7b", "sky-t1"), ("deepscaler:1.5b", "default"), ("gemma3:27b", "default"),
    ("gemma4:26b", "gemma-4"), ("llama3.1:8b", "default"), ("mistral-small3.2:24b", "default"),
    ("deepseek-v3.1:671b", "deepseek-v3"), ("glm-4.7-flash", "glm-4.7"),
    ("granite-3.2:8b-thinking-preview-q8_0", "granite-3.2"),
    ("hf.co/unsloth/Qwen3-30B-A3B-GGUF:Q4_K_M", "default"),
    ("hf.co/bartowski/DeepSeek-R1-Distill-Qwen-14B-GGUF:Q4_K_M", "deepseek-r1"),
    # GGUF files
    ("Qwen3-30B-A3B-Q4_K_M.gguf", "default"), ("DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf", "deepseek-r1"),
    ("gpt-oss-20b-mxfp4.gguf", "gpt-oss"), ("gpt-oss-120b-mxfp4-00001-of-00003.gguf", "gpt-oss"),
    ("QwQ-32B-Q4_K_M.gguf", "qwq"), ("Qwen3.5-4B-Q5_K_M-MTP", "qwen3.5"),
    ("MiniMax-M2.1-UD-Q3_K_XL-00001-of-00003.gguf", "minimax-m2"),
    ("DeepSeek-V3.1-UD-IQ1_M-00001-of-00005.gguf", "deepseek-v3"),
    ("GLM-4.7-Flash-Q4_K_M.gguf", "glm-4.7"), ("gemma-4-31B-it-Q4_K_M.gguf", "gemma-4"),
    # Hugging Face ids
    ("deepseek-ai/DeepSeek-R1", "deepseek-r1"), ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek-r1"),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "deepseek-r1"),
    ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3"), ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek-v3"),
    ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-v3"), ("deepseek-ai/DeepSeek-V3-0324", "default"),
    ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-v4"), ("perplexity-ai/r1-1776", "deepseek-r1"),
    ("microsoft/MAI-DS-R1", "deepseek-r1"), ("Qwen/QwQ-32B", "qwq"), ("Qwen/Qwen3-8B", "default"),
    ("Qwen/Qwen3-32B", "default"), ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-thinking"),
    ("Qwen/Qwen3-235B-A22B-Thinking-2507", "qwen3-thinking"),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "qwen3-thinking"),
    ("Qwen/Qwen3-VL-235B-A22B-Thinking", "qwen3-thinking"), ("Qwen3-VL-30B-A3B-Thinking", "qwen3-thinking"),
    ("Qwen/Qwen3-VL-235B-A22B-Instruct", "default"), ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "default"),
    ("Qwen/Qwen3.5-397B-A17B", "qwen3.5"), ("Qwen/Qwen3.5-27B", "qwen3.5"), ("Qwen/Qwen3.6-27B-FP8", "qwen3.5"),
    ("Qwen/Qwen3.6-35B-A3B", "qwen3.5"), ("willcb/Qwen3-8B", "default"),
    ("openai/gpt-oss-20b", "gpt-oss"), ("openai/gpt-oss-120b", "gpt-oss"),
    ("MiniMaxAI/MiniMax-M2", "minimax-m2"), ("mlx-community/MiniMax-M2.1-8bit-gs32", "minimax-m2"),
    ("zai-org/GLM-4.6", "default"), ("zai-org/GLM-4.5-Air", "default"), ("zai-org/GLM-4.7-Flash", "glm-4.7"),
    ("zai-org/glm-4.7-flash", "glm-4.7"), ("moonshotai/Kimi-K2-Instruct", "default"),
    ("zai-org/GLM-5.3", "glm-5.3"), ("zai-org/GLM-5", "glm-4.7"),
    ("moonshotai/Kimi-K2-Instruct-0905", "default"), ("moonshotai/Kimi-K2-Thinking", "default"),
    ("moonshotai/Kimi-VL-A3B-Thinking-2506", "default"), ("moonshotai/Kimi-Linear-48B-A3B-Instruct", "default"),
    ("google/gemma-3-27b-it", "default"), ("google/gemma-3n-E4B-it", "default"),
    ("google/gemma-4-26b-a4b-it", "gemma-4"), ("gemma-4-26b-a4b-it", "gemma-4"), ("gemma-4-31B-it", "gemma-4"),
    ("mistralai/Magistral-Small-2509", "magistral"), ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "default"),
    ("tencent/Hunyuan-A13B-Instruct", "hunyuan"), ("unsloth/Hunyuan-A13B-Instruct-GGUF", "hunyuan"),
    ("baidu/ERNIE-4.5-21B-A3B-Thinking", "ernie-thinking"), ("baidu/ERNIE-4.5-21B-A3B-PT", "default"),
    ("ByteDance-Seed/Seed-OSS-36B-Instruct", "default"), ("ServiceNow-AI/Apriel-1.5-15b-Thinker", "apriel"),
    ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", "nemotron-nano-v2"),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron-3"),
    ("nvidia/Llama-3_3-Nemotron-Super-49B-v1_5", "default"), ("stepfun-ai/step3", "step3"),
    ("stepfun-ai/Step-3.5-Flash", "step3"), ("meituan-longcat/LongCat-Flash-Thinking", "longcat"),
    ("meituan-longcat/LongCat-Flash-Chat", "default"), ("LGAI-EXAONE/EXAONE-Deep-32B", "exaone-deep"),
    ("LGAI-EXAONE/EXAONE-4.0-32B", "default"), ("CohereLabs/command-a-reasoning-08-2025", "cohere-reasoning"),
    ("CohereForAI/c4ai-command-r7b-12-2024", "cohere-reasoning"), ("swiss-ai/Apertus-8B-Instruct-2509", "apertus"),
    ("ibm-granite/granite-3.3-8b-instruct", "granite-3.3"), ("ibm-granite/granite-3.2-8b-instruct", "granite-3.2"),
    ("ibm-granite/granite-4.0-h-small", "granite-4"), ("open-thoughts/OpenThinker3-7B", "sky-t1"),
    ("NovaSky-AI/Sky-T1-32B-Preview", "sky-t1"), ("allenai/Olmo-3-7B-Think", "olmo-3-think"),
    ("XiaomiMiMo/MiMo-7B-RL", "mimo"), ("XiaomiMiMo/MiMo-V2-Flash", "mimo"), ("Hcompany/Holo2-8B", "holo2"),
    ("upstage/Solar-Open-100B", "solar-open"), ("inclusionAI/Ling-1T", "default"),
    ("ai-sage/GigaChat3-10B-A1.8B", "default"), ("moonshotai/Kimi-K2.5", "kimi-k2.5"),
    # hosted providers' slugs
    ("accounts/fireworks/models/deepseek-r1-0528", "deepseek-r1"),
    ("accounts/fireworks/models/deepseek-v3p1", "deepseek-v3"), ("accounts/fireworks/models/deepseek-v3p2", "deepseek-v3"),
    ("accounts/fireworks/models/deepseek-v3-0324", "default"), ("accounts/fireworks/models/deepseek-v4-pro", "deepseek-v4"),
    ("accounts/fireworks/models/glm-4p5", "default"), ("accounts/fireworks/models/glm-4p5-air", "default"),
    ("accounts/fireworks/models/glm-4p6", "default"), ("accounts/fireworks/models/glm-4p7", "glm-4.7"),
    ("accounts/fireworks/models/glm-5p1", "glm-4.7"), ("accounts/fireworks/models/kimi-k2p5", "kimi-k2.5"),
    ("accounts/fireworks/models/kimi-k2p6", "kimi-k2.5"), ("accounts/fireworks/models/kimi-k2-thinking", "default"),
    ("accounts/fireworks/models/kimi-k2-instruct-0905", "default"), ("accounts/fireworks/models/kimi-k3", "kimi-k3"),
    ("accounts/fireworks/models/minimax-m2", "minimax-m2"), ("accounts/fireworks/models/minimax-m2p1", "minimax-m2"),
    ("accounts/fireworks/models/gpt-oss-120b", "gpt-oss"),
    ("accounts/fireworks/models/qwen3-235b-a22b-instruct-2507", "default"),
    ("accounts/fireworks/models/llama-v3p3-70b-instruct", "default"),
    ("deepseek/deepseek-r1-0528", "deepseek-r1"), ("deepseek/deepseek-chat-v3.1", "deepseek-v3"),
    ("perplexity/r1-1776", "deepseek-r1"), ("qwen/qwen3-235b-a22b-thinking-2507", "qwen3-thinking"),
    ("qwen/qwen3.5-35b-a3b", "qwen3.5"), ("z-ai/glm-4.6", "default"), ("z-ai/glm-4.7", "glm-4.7"),
    ("moonshotai/kimi-k2-thinking", "default"), ("minimax/minimax-m2", "minimax-m2"), ("x-ai/grok-4", "default"),
    ("google/gemini-2.5-pro", "default"), ("anthropic/claude-sonnet-4.5", "default"),
    ("moonshot.kimi-k2-thinking", "default"), ("qwen/qwen3-32b", "default"),
    ("deepseek-r1-distill-llama-70b", "deepseek-r1"), ("llama-3.3-70b-versatile", "default"),
    ("llama-3.1-8b-instant", "default"), ("gemma2-9b-it", "default"), ("deepseek-v3.2", "deepseek-v3"),
    ("deepseek-v3.2-exp", "deepseek-v3"), ("deepseek-v3.1", "deepseek-v3"),
    ("deepseek-r1-distill-qwen-1.5b", "deepseek-r1"), ("deepseek-v3", "default"), ("deepseek-chat", "default"),
    ("deepseek-reasoner", "deepseek-r1"), ("deepseek-ai/deepseek-r1-0528-maas", "deepseek-r1"),
    ("sonar-reasoning-pro", "default"), ("mistral-small-latest", "default"), ("minimax-m2.7-highspeed", "minimax-m2"),
    ("qwen3-235b-a22b-instruct-2507", "default"), ("mistral-nemo-instruct-2407", "default"),
    # the names clients send to whatever serves them
    ("claude-sonnet-4-5-20250929", "default"), ("claude-sonnet-4-20250514", "default"),
    ("claude-opus-4-1-20250805", "default"), ("claude-3-5-haiku-20241022", "default"), ("claude-sonnet-4-6", "default"),
    ("gpt-5-codex", "default"), ("gpt-5-2025-08-07", "default"), ("gpt-5-mini-2025-08-07", "default"),
    ("o3-mini-2025-01-31", "default"), ("gpt-3.5-turbo-0613", "default"), ("gpt-4o", "default"),
    # llama-server aliases and custom names
    ("a", "default"), ("default", "default"), ("local-model", "default"), ("model.gguf", "default"),
    ("matrix-local-llm-reason", "default"), ("seed_oss", "default"), ("kimi-vl", "default"),
    # fine-tunes and checkpoints
    ("Qwen2.5-7B-Instruct-GRPO-step3000", "default"), ("checkpoints/global_step500/actor/huggingface", "default"),
    ("verl/qwen2.5-3b-grpo-global_step500", "default"), ("mimosa-7b-instruct", "default"), ("sapling-3b", "default"),
    ("darling-3-8b", "default"),
]


def test_the_name_table_is_large_and_has_no_duplicates():
    assert len(NAMES) >= 100 and len({n for n, _ in NAMES}) == len(NAMES)


@pytest.mark.parametrize("name,profile", NAMES, ids=[n for n, _ in NAMES])
def test_real_served_names_get_their_profile(name, profile):
    assert SHIPPED.profile_for(name).name == profile


@pytest.mark.parametrize("glob,name,matches", [
    ("*step3*", "stepfun-ai/step3", True), ("*step3*", "step3-fp8", True), ("*step3*", "grpo-step3000", False),
    ("*mimo*", "XiaomiMiMo/MiMo-7B-RL", True), ("*mimo*", "mimosa", False), ("*ling-3*", "sapling-3b", False),
    ("deepseek*", "deepseek-r1", True), ("deep*", "deepseek-r1", False),   # a prefix that cuts a word
    ("*qwen3*thinking*", "qwen3thinking", True), ("my-model", "My-Model", True), ("my-model", "my-model-2", False),
    ("deepseek-r1:[0-9]*b", "deepseek-r1:671b", True), ("qwen3-?b", "qwen3-8b", True), ("[!x]*", "abc", True),
    ("a[*]b", "a*b", True), ("a[", "a[", True), ("*", "anything/at:all", True), ("[]a]x", "]x", True),
    ("[^a]b", "^b", True), ("[a&&b]", "&", True),
])
def test_a_star_never_cuts_into_a_word_or_a_number(glob, name, matches):
    assert tagsets.Glob(glob).match(name.lower()) is matches
    assert bool(_regex_glob(glob).match(name.lower())) is matches


# -- long and hostile model names (issue 33, finding 2) -----------------------------------------
# The glob semantics as a backtracking regex: what thinkwire matched with before, kept here as
# the reference the linear matcher must agree with.
_NOT_IN_A_WORD = r"(?!(?<=[^\W\d_])[^\W\d_]|(?<=\d)\d)"


def _regex_glob(glob: str) -> re.Pattern:
    items = tagsets._glob_items(glob)
    out = []
    for k, (kind, rx) in enumerate(items):
        if kind != "star":
            out.append(rx)
            continue
        before = items[k - 1][0] if k else "lit"
        after = items[k + 1][0] if k + 1 < len(items) else "lit"
        out.append("(?:" + (_NOT_IN_A_WORD if before == "lit" else "") + ".*"
                   + (_NOT_IN_A_WORD if after == "lit" else "") + ")")
    return re.compile("(?s:" + "".join(out) + r")\Z")


_SHIPPED_GLOBS = sorted({g for p in SHIPPED.profiles for g in p.models})
_NAME_CHARS = "ab3-_/:. 7z\u00e9\u0663\u00bd"   # letters, digits (an Arabic-Indic one), a numeric that is no digit


@settings(max_examples=400, deadline=None)
@given(glob=st.one_of(st.sampled_from(_SHIPPED_GLOBS), st.text("ab3*?-[]!_", max_size=8)),
       name=st.text(_NAME_CHARS, max_size=14))
def test_the_linear_matcher_agrees_with_the_glob_regex(glob, name):
    try:
        _regex_glob(glob)
    except re.error:   # a set no glob may hold ([3--]): refused either way
        assume(False)
    assert tagsets.Glob(glob).match(name) is bool(_regex_glob(glob).match(name))


@settings(max_examples=200, deadline=None)
@given(glob=st.sampled_from(_SHIPPED_GLOBS), name=st.sampled_from([n for n, _ in NAMES]),
       cut=st.integers(0, 40))
def test_the_linear_matcher_agrees_on_real_names_and_their_cuts(glob, name, cut):
    name = name.lower()[:len(name) - cut] if cut < len(name) else name.lower()
    assert tagsets.Glob(glob).match(name) is bool(_regex_glob(glob).match(name))


class _Counting:
    """A star-free piece of a glob, its searches counted (the matcher's only steps)."""

    def __init__(self, pattern: re.Pattern, seen: list) -> None:
        self.pattern, self.seen = pattern, seen

    def __getattr__(self, name):
        def call(text, *args):
            self.seen.append(len(text))
            return getattr(self.pattern, name)(text, *args)
        return call


def test_a_40_kb_model_name_costs_at_most_a_search_per_position_of_its_first_256_characters():
    """Finding 2: `*nemotron*nano*v2*` and its like, run as backtracking regexes over a 40 KB
    name, froze the event loop for ~25 s. Only the name's first 256 characters are matched, by
    searches of star-free pieces, at most one per position and piece."""
    ts = tagsets.load(tagsets.SHIPPED)
    seen: list[int] = []
    pieces = 0
    for p in ts.profiles:
        for g in p._globs:
            g.pieces = [_Counting(x, seen) for x in g.pieces]
            pieces += len(g.pieces)
    name = "nemotron-nano-" * 3000            # 42,000 characters, every piece found again and again
    assert ts.profile_for(name).name == "default"
    assert seen and max(seen) <= tagsets.MODEL_CHARS
    assert len(seen) <= pieces * tagsets.MODEL_CHARS
    print(f"\nwork figure: a 42,000-character name: {len(seen)} searches of at most {max(seen)} characters")


def test_a_long_name_is_matched_by_its_first_256_characters():
    assert tagsets.MODEL_CHARS == 256
    head = "deepseek-r1:8b"
    assert SHIPPED.profile_for(head + "-" + "x" * 300).name == "deepseek-r1"
    # A name whose only match would lie past the first 256 characters gets the default profile.
    assert SHIPPED.profile_for("x" * 256 + "-deepseek-r1").name == "default"
    assert SHIPPED.profile_for("x" * 200 + "-deepseek-r1").name == "deepseek-r1"


def test_the_profile_cache_holds_a_bounded_number_of_bounded_names():
    ts = tagsets.load(tagsets.SHIPPED)
    for i in range(tagsets.FOUND_NAMES + 100):
        ts.profile_for(f"{i}-" + "y" * 50_000)
    assert len(ts._found) == tagsets.FOUND_NAMES
    assert max(len(k) for k in ts._found) == tagsets.MODEL_CHARS


# -- helpers: chat, Messages and Responses, as bodies and streams -------------------------------------
def chat_body(request, text, finish="stop", model=None, ctx=None, **values):
    ctx = ctx or make_ctx(request, surface="chat", **values)
    body = json.dumps({"model": model or request.get("model"), "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}]})
    new = chat.rewrite_body(body.encode(), ctx)
    msg = json.loads(new)["choices"][0]["message"] if new else {"content": text}
    return msg.get("reasoning_content") or "", msg["content"]


def chat_stream(request, chunks, finish="stop", model=None, ctx=None, **values):
    ctx = ctx or make_ctx(request, surface="chat", **values)
    driver = engine.stream_driver(chat, ctx)
    name = model or request.get("model")
    evs = [{"model": name, "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]} for c in chunks]
    evs.append({"model": name, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    data = b"".join(b"".join(driver(b"data: " + json.dumps(e).encode() + b"\n\n")) for e in evs)
    data += b"".join(driver(b"data: [DONE]\n\n") + driver(b""))
    ctx.tally()
    r = c = ""
    for line in data.split(b"\n"):
        if line.startswith(b"data: {"):
            d = json.loads(line[6:])["choices"][0]["delta"]
            r += d.get("reasoning_content") or ""
            c += d.get("content") or ""
    return r, c


def blocks_of(msg):
    return [(b["type"], b.get("thinking", b.get("text"))) for b in msg["content"]]


def messages_body(request, *texts, stop="end_turn"):
    ctx = M.ctx_for(request, surface="messages")
    out, _, _ = M.run_body(M.body(*[M.text(t) for t in texts], stop=stop, model=request["model"]), ctx=ctx)
    return blocks_of(M.sdk_body(out))


def messages_stream(request, *chunks, stop="end_turn"):
    ctx = M.ctx_for(request, surface="messages")
    out, _ = M.run_stream(M.stream(M.text(*chunks), stop=stop, model=request["model"]), ctx=ctx)
    return blocks_of(M.sdk_stream(out))


def responses_body(request, text, status="completed"):
    data = json.dumps(dict(R.final_response([R.msg([text])], status=status), model=request["model"])).encode()
    new = responses.rewrite_body(data, make_ctx(request, surface="responses"))
    return R.shape(json.loads(new if new is not None else data)["output"])


# -- profile pairs add to the default pairs ---------------------------------------------------------
@pytest.mark.parametrize("model,text,want", [
    ("gemma-4-26b-a4b-it", "<think>outer<thought>inner</thought> middle</think>final",
     ("outer<thought>inner</thought> middle", "final")),                      # a server that normalises the channel
    ("gemma-4-26b-a4b-it", "<|channel>thought\nplan<channel|>final", ("plan", "final")),
    ("minimax-m3", "<think>plan</think>final", ("plan", "final")),              # the hosted API's tag
    ("open-thoughts/OpenThinker3-7B", "<think>plan</think>final", ("plan", "final")),
    ("apertus-8b", "<thinking>plan</thinking>final", ("plan", "final")),
])
def test_the_default_pairs_hold_for_every_model(model, text, want):
    assert chat_body({"model": model}, text) == want
    assert chat_stream({"model": model}, list(text)) == want


def test_a_profiles_own_pair_comes_first():
    p = SHIPPED.profile_for("gemma-4-31B-it")
    assert p.pairs[:2] == p.declared and p.pairs[2:] == SHIPPED.default.pairs


def test_loader_rejects_a_profile_pair_that_clashes_with_the_defaults(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - name: a\n    models: ["m"]\n'
                 '    pairs:\n      - ["</x>", "<y>"]\n')
    with pytest.raises(tagsets.TagsetError, match=r":8: pairs of 'a' with the default pairs: '</x>' is both an opening and a closing tag"):
        tagsets.load(f)


def test_loader_reads_switches_and_what_a_silent_request_means(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n'
                 '  - {name: a, models: ["a"], starts_inside: true, switches: [enable_thinking], thinking_default: false}\n'
                 '  - {name: b, models: ["b"], starts_inside: true, tagless_means: content}\n'
                 '  - {name: c, models: ["c"], starts_inside: true, switches: []}\n')
    a, b, c = tagsets.load(f).profiles
    assert (a.switches, a.thinking_default) == (("enable_thinking",), False)
    assert (b.switches, b.thinking_default) == (None, False)     # an answer when tagless: thinks only when asked
    assert (c.switches, c.thinking_default, c.declared) == ((), True, ())


@pytest.mark.parametrize("line,problem", [
    ("switches: enable_thinking", ":5: 'switches' of 'a' must be a list of names"),
    ("switches: [enable-thinking]", ":5: switch 'enable-thinking' of 'a' is not a template variable name"),
    ("thinking_default: maybe", ":5: thinking_default must be true or false"),
])
def test_loader_refuses_bad_switches(tmp_path, line, problem):
    f = tmp_path / "t.yaml"
    f.write_text('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - {name: a, models: ["a"], ' + line + '}\n')
    with pytest.raises(tagsets.TagsetError, match=re.escape(problem)):
        tagsets.load(f)


def test_loader_reads_tool_calls_and_refuses_bad_ones(tmp_path):
    f = tmp_path / "t.yaml"
    head = 'default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - {name: a, models: ["a"], '
    f.write_text(head + 'tool_calls: [["<|start|>to=f", "<|eom|>"], ["<|start|>to=f", "<|eot|>"]]}\n')
    assert tagsets.load(f).profiles[0].tools == (("<|start|>to=f", "<|eom|>"), ("<|start|>to=f", "<|eot|>"))
    for line, problem in (("tool_calls: x", ":5: 'tool_calls' of 'a' must be a list of [header, end] pairs"),
                          ('tool_calls: [["h"]]', ":5: each of 'tool_calls' must be [header, end marker]"),
                          ('tool_calls: [["h", ""]]', ":5: a tool_calls marker is empty")):
        f.write_text(head + line + '}\n')
        with pytest.raises(tagsets.TagsetError, match=re.escape(problem)):
            tagsets.load(f)


# -- the model name: the request's, else the response's ------------------------------------------
def test_an_alias_the_request_sends_takes_the_profile_the_response_names():
    # llama-server --alias a, serving DeepSeek-R1: the stream's first event names the model.
    req = {"model": "a"}
    assert chat_stream(req, ["plan", "</think>", "answer"], model="deepseek-ai/DeepSeek-R1") == ("plan", "answer")
    assert chat_body(req, "plan</think>answer", model="deepseek-ai/DeepSeek-R1") == ("plan", "answer")
    ctx = make_ctx(req, surface="chat")
    chat_stream(req, ["x"], model="deepseek-ai/DeepSeek-R1", ctx=ctx)
    assert (ctx.profile.name, ctx.model) == ("deepseek-r1", "a")


def test_messages_and_responses_streams_read_the_model_their_first_event_names():
    ctx = M.ctx_for({"model": "local-model"}, surface="messages")
    out, _ = M.run_stream(M.stream(M.text("plan", "</think>", "answer"), model="deepseek-r1"), ctx=ctx)
    assert blocks_of(M.sdk_stream(out)) == [("thinking", "plan"), ("text", "answer")]
    events = R.upstream_events([R.msg(["plan", "</think>", "answer"])])
    for e in events:
        if "response" in e:
            e["response"] = dict(e["response"], model="deepseek-r1")
    out, _ = R.run_stream(R.sse_bytes(events), ctx=make_ctx({"model": "local-model"}, surface="responses"))
    assert R.shape(R.sdk_final(out).to_dict()["output"]) == [("reasoning", "plan"), ("message", "answer")]


def test_the_request_names_the_profile_when_it_matches_one():
    ctx = make_ctx({"model": "qwq-32b"}, surface="chat")
    assert chat_stream({}, ["plan</think>answer"], model="Qwen/Qwen3-8B", ctx=ctx) == ("plan", "answer")
    assert ctx.profile.name == "qwq"


def test_a_flow_plan_is_decided_once_and_kept():
    # A chat response names its model in every chunk; a later chunk naming another (a server
    # that switched models mid-stream, a hostile upstream) does not re-decide the flow.
    ctx = make_ctx({"model": "a"}, surface="chat")
    first = ctx.rules("deepseek-ai/DeepSeek-R1")
    plan = ctx.plan
    assert ctx.rules("gpt-oss-20b") is first and ctx.plan is plan
    assert (plan.profile.name, plan.how, plan.inside, plan.inside_because, plan.prefill) == (
        "deepseek-r1", "profile", True, "profile", None)
    with pytest.raises(AttributeError):
        plan.rules = first   # type: ignore[misc]  (a NamedTuple: nothing of it changes)


def test_a_request_without_a_model_takes_the_responses():
    ctx = make_ctx({}, surface="chat")
    chat_stream({}, ["x"], model="gpt-oss-20b", ctx=ctx)
    assert (ctx.profile.name, ctx.model) == ("gpt-oss", "gpt-oss-20b")


# -- request switches count where the template reads them -----------------------------------------
def test_reasoning_effort_does_not_turn_on_deepseek_v31_thinking():
    req = {"model": "deepseek-ai/DeepSeek-V3.1", "reasoning_effort": "high"}
    assert chat_stream(req, ["A plain ", "answer."]) == ("", "A plain answer.")
    on = {"model": "deepseek-ai/DeepSeek-V3.1", "chat_template_kwargs": {"thinking": True}}
    assert chat_stream(on, ["plan", "</think>", "answer"]) == ("plan", "answer")


@pytest.mark.parametrize("request_extra", [
    {"chat_template_kwargs": {"enable_thinking": False}}, {"enable_thinking": False},
    {"thinking": {"type": "disabled"}}, {"reasoning_effort": "none"}, {"reasoning": {"effort": "none"}},
])
def test_a_switch_qwen35s_template_reads_turns_thinking_off(request_extra):
    req = {"model": "Qwen/Qwen3.5-27B", **request_extra}
    assert chat_stream(req, ["Paris is ", "the capital."]) == ("", "Paris is the capital.")


@pytest.mark.parametrize("model", ["Qwen/QwQ-32B", "deepseek-r1:8b", "MiniMaxAI/MiniMax-M2"])
def test_a_template_without_a_switch_thinks_whatever_the_request_says(model):
    req = {"model": model, "chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "none"}
    assert chat_stream(req, ["plan", "</think>", "answer"]) == ("plan", "answer")


@pytest.mark.parametrize("request_body,names,switch", [
    ({"reasoning_effort": "high"}, ("thinking",), None), ({"reasoning_effort": "high"}, ("enable_thinking",), True),
    ({"reasoning_effort": "high"}, ("reasoning_effort",), True), ({"thinking": {"type": "enabled"}}, ("thinking",), None),
    ({"thinking": {"type": "enabled"}}, ("enable_thinking",), True), ({"thinking": True}, ("thinking",), True),
    ({"chat_template_kwargs": {"thinking_mode": "adaptive"}}, ("thinking_mode",), False),
    ({"chat_template_kwargs": {"reasoning_effort": "low"}}, ("reasoning_effort",), True),
    ({"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "none"}, ("enable_thinking",), True),
    ({"output_config": {"effort": "none"}}, None, False), ({"chat_template_kwargs": {"enable_thinking": True}}, (), None),
    ({"chat_template_kwargs": {"enable_thinking": "maybe", "thinking": "enabled"}}, None, True),
    ({"chat_template_kwargs": {"enable_thinking": 1}}, None, None), (None, None, None),
])
def test_thinking_switch_reads_only_the_names_a_template_reads(request_body, names, switch):
    assert thinking_switch(request_body, names) is switch


# -- silent requests mean what the template does by default ---------------------------------------
@pytest.mark.parametrize("model,thinks", [
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", True),   # enable_thinking defaults to true
    ("Qwen/Qwen3.5-27B", True), ("zai-org/GLM-4.7-Flash", True), ("moonshotai/Kimi-K2.5", True),
    ("Hcompany/Holo2-8B", True), ("deepseek-ai/DeepSeek-V4-Flash", True), ("upstage/plamo-3-nict-31b", True),
    ("deepseek-ai/DeepSeek-V3.1", False), ("minimax-m3", False), ("ibm-granite/granite-4.0-h-small", False),
    ("poolside/laguna-xs.2", False), ("XiaomiMiMo/MiMo-V2-Flash", False),
])
def test_a_silent_request_starts_where_the_template_does_by_default(model, thinks):
    assert make_ctx({"model": model}).rules().starts_inside is thinks
    want = ("plan", "answer") if thinks else ("", "planning done")
    text = ["plan", "</think>", "answer"] if thinks else ["planning ", "done"]
    assert chat_stream({"model": model}, text) == want


# -- a prefill sets where the output starts --------------------------------------------------------
def test_an_answer_prefill_of_a_model_that_starts_inside_starts_in_the_answer():
    req = {"model": "deepseek-r1", "max_tokens": 64,
           "messages": [{"role": "user", "content": "JSON please"}, {"role": "assistant", "content": "{"}]}
    assert messages_stream(req, '"a": ', "1}") == [("text", '"a": 1}')]
    assert messages_body(req, '"a": 1}') == [("text", '"a": 1}')]


def test_a_prefill_that_opens_a_block_starts_inside_it():
    req = {"model": "my-model", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "text", "text": "<think>\nLet me"}]}]}
    # The continuation goes on from "Let me": its space is the reasoning's.
    assert messages_stream(req, " check", ".</think>\n", "Done.") == [("thinking", " check."), ("text", "Done.")]
    assert messages_body(req, " check.</think>\nDone.") == [("thinking", " check."), ("text", "Done.")]


@pytest.mark.parametrize("flag", [{"continue_final_message": True, "add_generation_prompt": False},
                                  {"add_generation_prompt": False}])
def test_a_chat_prefill_the_server_continues_sets_the_start(flag):
    req = {"model": "deepseek-r1", "messages": [{"role": "user", "content": "q"},
                                                {"role": "assistant", "content": "The answer is "}], **flag}
    assert chat_stream(req, ["4", "2."]) == ("", "42.")
    assert chat_body(req, "42.") == ("", "42.")


def test_a_trailing_chat_assistant_message_without_a_continue_flag_is_no_prefill():
    req = {"model": "deepseek-r1", "messages": [{"role": "assistant", "content": "The answer is "}]}
    assert prefill(req, "chat") is None
    assert chat_stream(req, ["plan", "</think>", "42."]) == ("plan", "42.")


def test_a_prefill_carries_its_code_state_over():
    # The prefill opened a fenced block: a tag the model writes inside it is text.
    req = {"model": "my-model", "continue_final_message": True,
           "messages": [{"role": "assistant", "content": "Example:\n```xml\n"}]}
    assert chat_stream(req, ["<think>x</think>\n", "```\nDone."]) == ("", "<think>x</think>\n```\nDone.")


@pytest.mark.parametrize("request_body,surface,text", [
    ({"messages": [{"role": "assistant", "content": "x"}]}, "messages", "x"),
    ({"messages": [{"role": "assistant", "content": [{"type": "thinking", "thinking": "t"},
                                                     {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]},
     "messages", "ab"),
    ({"messages": [{"role": "assistant", "content": "x"}]}, "responses", None),
    ({"messages": [{"role": "assistant", "content": ""}]}, "messages", None),
    ({"messages": [{"role": "user", "content": "x"}]}, "messages", None),
    ({"messages": [{"role": "assistant", "content": [{"type": "text", "text": "x"}]}], "continue_final_message": True},
     "chat", "x"),
    ({"messages": [{"role": "assistant", "content": 3}]}, "messages", None), ({"messages": []}, "messages", None),
])
def test_prefill_reads_the_trailing_assistant_turn(request_body, surface, text):
    assert prefill(request_body, surface) == text


# -- structured output starts in the answer ---------------------------------------------------------
def test_qwen35_json_schema_output_is_the_answer():
    req = {"model": "Qwen/Qwen3.5-27B", "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}
    assert chat_stream(req, ['{"city": ', '"Paris"}']) == ("", '{"city": "Paris"}')
    assert chat_body(req, '{"city": "Paris"}') == ("", '{"city": "Paris"}')


def test_structured_output_with_reasoning_before_a_closing_tag_still_splits_the_body():
    req = {"model": "Qwen/Qwen3.5-27B", "response_format": {"type": "json_object"}}
    assert chat_body(req, 'plan</think>{"a": 1}') == ("plan", '{"a": 1}')


@pytest.mark.parametrize("request_body,want", [
    ({"response_format": {"type": "json_schema"}}, True), ({"response_format": {"type": "json_object"}}, True),
    ({"response_format": {"type": "text"}}, False), ({"text": {"format": {"type": "json_schema"}}}, True),
    ({"text": {"format": {"type": "text"}}}, False), ({"output_config": {"format": {"type": "json_schema"}}}, True),
    ({"output_format": {"type": "json_schema"}}, True), ({"guided_json": {"type": "object"}}, True),
    ({"json_schema": {"type": "object"}}, True), ({"grammar": "root ::= x"}, True), ({"guided_regex": None}, False),
    ({"structured_outputs": {"choice": ["a", "b"]}}, True), ({"structured_outputs": {}}, False), ({}, False),
])
def test_structured_reads_every_way_to_ask(request_body, want):
    assert structured(request_body) is want


def test_messages_and_responses_structured_requests_start_in_the_answer():
    msg_req = {"model": "Qwen/Qwen3.5-27B", "output_config": {"format": {"type": "json_schema", "schema": {}}}}
    assert messages_stream(msg_req, '{"a":', " 1}") == [("text", '{"a": 1}')]
    resp_req = {"model": "Qwen/Qwen3.5-27B", "text": {"format": {"type": "json_object"}}}
    out, _ = R.run_stream(R.stream_of([R.msg(['{"a":', " 1}"])]), ctx=make_ctx(resp_req, surface="responses"))
    assert R.shape(R.sdk_final(out).to_dict()["output"]) == [("message", '{"a": 1}')]


# -- how the output ended ---------------------------------------------------------------------------
@pytest.mark.parametrize("finish,want", [
    ("stop", ("", "A complete answer.")), ("length", ("A complete answer.", "")),
    ("tool_calls", ("A complete answer.", "")), (None, ("A complete answer.", "")),
])
def test_a_tagless_body_of_a_model_that_starts_inside_is_an_answer_when_it_ended_complete(finish, want):
    assert chat_body({"model": "deepseek-ai/DeepSeek-V4-Flash"}, "A complete answer.", finish=finish) == want


def test_its_stream_has_sent_the_text_as_reasoning_before_the_end_came():
    # ... and at its end, which says the answer was complete, it sends the text again as the answer.
    assert chat_stream({"model": "deepseek-ai/DeepSeek-V4-Flash"}, ["A complete ", "answer."]) == \
        ("A complete answer.", "A complete answer.")


def test_tagless_means_decides_when_the_body_does_not_say_how_it_ended():
    assert chat_body({"model": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"}, "An answer.", finish=None) == ("", "An answer.")


def test_a_block_the_model_opened_and_never_closed_stays_reasoning_whatever_the_end():
    assert chat_body({"model": "magistral:24b"}, "<think>\nOkay, I need to", finish="stop") == ("Okay, I need to", "")


@pytest.mark.parametrize("stop,want", [("end_turn", [("text", "An answer.")]),
                                       ("max_tokens", [("thinking", "An answer.")])])
def test_messages_bodies_read_the_stop_reason(stop, want):
    assert messages_body({"model": "deepseek-r1"}, "An answer.", stop=stop) == want


@pytest.mark.parametrize("status,want", [("completed", [("message", "An answer.")]),
                                         ("incomplete", [("reasoning", "An answer.")])])
def test_responses_bodies_read_the_status(status, want):
    assert responses_body({"model": "deepseek-r1"}, "An answer.", status=status) == want


def test_a_responses_body_that_calls_a_tool_did_not_end_as_an_answer():
    data = json.dumps(dict(R.final_response([R.msg(["I need the weather."]), R.fn('{"city": "Paris"}')]),
                           model="deepseek-r1")).encode()
    new = responses.rewrite_body(data, make_ctx({"model": "deepseek-r1"}, surface="responses"))
    assert R.shape(json.loads(new)["output"])[:1] == [("reasoning", "I need the weather.")]


# -- a body uses its whole text: a closing tag with no opening tag -----------------------------------
def test_a_closing_tag_with_no_opening_tag_makes_the_text_before_it_reasoning_on_every_surface():
    req = {"model": "gpt-3.5-turbo-0613"}   # DeepSeek-V3.1 on ik_llama.cpp, under a borrowed name
    text = "The user greets me. I should be engaging.</think>Hi! How can I help you today?"
    assert chat_body(req, text) == ("The user greets me. I should be engaging.", "Hi! How can I help you today?")
    assert messages_body(req, text) == [("thinking", "The user greets me. I should be engaging."),
                                        ("text", "Hi! How can I help you today?")]
    assert responses_body(req, text) == [("reasoning", "The user greets me. I should be engaging."),
                                         ("message", "Hi! How can I help you today?")]


def test_a_later_text_block_of_a_message_splits_at_its_own_closing_tag():
    assert messages_body({"model": "m"}, "first answer", "more thought</think>last answer") == [
        ("text", "first answer"), ("thinking", "more thought"), ("text", "last answer")]


def test_a_closing_tag_in_code_makes_nothing_reasoning():
    assert chat_body({"model": "m"}, "Close it with `</think>`, then answer.") == (
        "", "Close it with `</think>`, then answer.")


# -- gpt-oss headers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("header", ["<|channel|>final <|constrain|>json<|message|>",
                                    "<|channel|>final <|constrain|>JSON<|message|>"])
def test_gpt_oss_final_header_with_a_content_type_hint_leaves_the_answer(header):
    text = ("<|channel|>analysis<|message|>Need JSON.<|end|><|start|>assistant" + header + '{"issues":[]}')
    want = ("Need JSON.", '{"issues":[]}')
    assert chat_body({"model": "openai/gpt-oss-120b"}, text) == want
    assert chat_stream({"model": "openai/gpt-oss-120b"}, list(text)) == want


def test_gpt_oss_commentary_preamble_is_answer_and_a_tool_call_stays():
    call = '<|channel|>commentary to=functions.read <|constrain|>json<|message|>{"path":"a"}<|call|>'
    text = ("<|channel|>analysis<|message|>Read it.<|end|><|start|>assistant<|channel|>commentary<|message|>"
            "Reading the file.<|end|><|start|>assistant" + call)
    # The call's header stays whole, `<|start|>assistant` included, for a tool parser (no line
    # break put in front of it: the preamble's `<|end|>` goes).
    want = ("Read it.", "Reading the file.<|start|>assistant" + call)
    assert chat_body({"model": "gpt-oss-20b"}, text) == want
    assert chat_stream({"model": "gpt-oss-20b"}, list(text)) == want


# -- learning ----------------------------------------------------------------------------------------
def test_the_learner_needs_two_responses_in_a_row_and_forgets_on_a_tagless_answer():
    L = Learner()
    assert L.observe("c", "up", "m", stray=True, answered=False) is None
    assert not L.inside("c", "up", "m")
    msg = L.observe("c", "up", "m", stray=True, answered=False)
    assert L.inside("c", "up", "m") and not L.inside("c", "other-upstream", "m") and not L.inside("c", "up", "m2")
    assert msg.startswith("model 'm' at up wrote a closing tag with no opening tag in 2 responses in a row")
    assert msg.endswith('\n  - name: m\n    models: ["m"]\n    starts_inside: true')
    assert L.observe("c", "up", "m", stray=True, answered=False) is None     # said once
    assert L.observe("c", "up", "m", stray=False, answered=False) is None    # a tagged answer changes nothing
    assert L.inside("c", "up", "m")
    assert L.observe("c", "up", "m", stray=False, answered=True) == (
        "model 'm' at up answered with no tag at all: its responses to this client no longer start inside "
        "a reasoning block (what was learned is forgotten)")
    assert not L.inside("c", "up", "m") and len(L) == 0


def test_a_tagless_answer_between_two_stray_closes_starts_the_count_again():
    L = Learner()
    L.observe("c", "up", "m", True, False)
    L.observe("c", "up", "m", False, True)
    assert L.observe("c", "up", "m", True, False) is None and not L.inside("c", "up", "m")


def test_the_learner_is_bounded_and_forgets_the_least_recently_seen():
    L = Learner(size=3)
    for name in ("a", "b", "c", "a", "d"):
        L.observe("c", "up", name, True, False)
    assert len(L) == 3 and L.inside("c", "up", "a") and not L.inside("c", "up", "d")
    assert ("c", "up", "b") not in L._strays


def test_a_model_name_with_glob_characters_is_logged_as_its_exact_pattern():
    L = Learner(evidence=1)
    msg = L.observe("c", None, "my*model[v2]?", True, False)
    assert 'models: ["my[*]model[[]v2][?]"]' in msg and "at its upstream" in msg
    assert tagsets.Glob("my[*]model[[]v2][?]").match("my*model[v2]?")
    assert L.observe("c", "up", None, True, False) is None
    assert L.observe("c", "up", "x" * 257, True, False) is None and len(L) == 1


def learning_stream(learner, request, chunks, finish="stop"):
    ctx = make_ctx(request, surface="chat", learner=learner)
    got = chat_stream(request, chunks, finish=finish, ctx=ctx)
    return got, ctx.learn(), ctx.inside_because


def test_streams_of_a_model_that_sent_two_stray_closes_start_inside():
    L = Learner()
    req = {"model": "my-finetune"}
    assert learning_stream(L, req, ["plan", "</think>", "answer"]) == (("", "plan</think>answer"), None, None)
    got, said, _ = learning_stream(L, req, ["plan", "</think>", "answer"])
    assert got == ("", "plan</think>answer") and "starts_inside: true" in said
    assert learning_stream(L, req, ["plan", "</think>", "answer"]) == (("plan", "answer"), None, "learned")
    # An answer with no tag at all forgets it (that stream went out as reasoning).
    got, said, _ = learning_stream(L, req, ["Just ", "an answer."])
    assert got == ("Just an answer.", "Just an answer.") and "forgotten" in said
    assert learning_stream(L, req, ["Just ", "an answer."]) == (("", "Just an answer."), None, None)


@pytest.mark.parametrize("request_extra", [
    {"chat_template_kwargs": {"enable_thinking": False}},               # the template closed the block
    {"continue_final_message": True, "messages": [{"role": "assistant", "content": "Sure"}]},   # a prefill
])
def test_only_flows_whose_start_nothing_else_decided_teach(request_extra):
    L = Learner()
    for _ in range(3):
        learning_stream(L, {"model": "my-finetune", **request_extra}, ["plan", "</think>", "answer"])
    assert not L.inside(None, "http://upstream:8000", "my-finetune")


def test_a_profile_that_starts_inside_is_not_relearned():
    L = Learner(evidence=1)
    assert learning_stream(L, {"model": "deepseek-r1"}, ["x"]) == (("x", "x"), None, "profile")
    assert len(L) == 0


def test_a_profile_that_starts_as_answer_when_silent_learns_its_server():
    # DeepSeek-V3.1 behind llama.cpp thinks by default (llama.cpp passes its enable_thinking).
    L = Learner()
    req = {"model": "deepseek-ai/DeepSeek-V3.1"}
    for _ in range(2):
        learning_stream(L, req, ["plan", "</think>", "answer"])
    assert learning_stream(L, req, ["plan", "</think>", "answer"])[::2] == (("plan", "answer"), "learned")


def test_bodies_teach_too_and_learned_bodies_start_inside():
    L = Learner()
    for _ in range(2):
        ctx = make_ctx({"model": "m"}, surface="chat", learner=L)
        assert chat_body({"model": "m"}, "plan</think>answer", ctx=ctx) == ("plan", "answer")
        ctx.learn()
    ctx = make_ctx({"model": "m"}, surface="chat", learner=L)
    assert chat_body({"model": "m"}, "plan", finish="length", ctx=ctx) == ("plan", "")
    assert ctx.inside_because == "learned"


def test_think_learn_is_an_option_with_its_env_variable(monkeypatch):
    from thinkwire.settings import BY_NAME, Settings
    assert (BY_NAME["think_learn"].env, BY_NAME["think_learn"].default) == ("THINK_LEARN", "on")
    monkeypatch.setenv("THINK_LEARN", "off")
    assert Settings.from_values({}).learn is False


@pytest.mark.e2e
def test_mitmdump_learns_a_model_and_logs_the_profile_to_keep_it(proxy, up):
    from harness import post, sse_reply

    def stream(chunks):
        evs = [{"model": "learn-me", "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
               for c in chunks]
        evs.append({"model": "learn-me", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        up.route("/chat/completions", sse_reply([b"data: " + json.dumps(e).encode() + b"\n\n" for e in evs]
                                                + [b"data: [DONE]\n\n"]))
        r = post(proxy.url + "/v1/chat/completions", {"model": "learn-me", "stream": True})
        got = [json.loads(line[6:])["choices"][0]["delta"] for line in r.content.split(b"\n")
               if line.startswith(b"data: {")]
        return "".join(d.get("reasoning_content") or "" for d in got), "".join(d.get("content") or "" for d in got)

    assert stream(["plan", "</think>", "answer"]) == ("", "plan</think>answer")
    assert stream(["plan", "</think>", "answer"]) == ("", "plan</think>answer")
    proxy.wait_for(r"model 'learn-me' at http://127\.0\.0\.1:\d+ wrote a closing tag with no opening tag", timeout=10)
    assert stream(["plan", "</think>", "answer"]) == ("plan", "answer")
    # (The flow's line is logged once the response hook ran, which may come after the client has
    # read the whole body.)
    proxy.wait_for(r"started inside the reasoning block \(learned of this model\)", timeout=10)
    text = proxy.log()
    assert re.search(r'- name: learn-me\n\s+models: \["learn-me"\]\n\s+starts_inside: true', text)


def test_a_closing_tag_with_nothing_before_it_is_no_evidence():
    # Nothing was said inside the block: a response that starts with `</think>` does not show that
    # the template opened one (a conversation about tags, a model echoing markup).
    L = Learner()
    req = {"model": "my-finetune"}
    for _ in range(3):
        assert learning_stream(L, req, ["</think>", "answer"]) == (("", "answer"), None, None)
        assert learning_stream(L, req, ["  \n</thi", "nk>answer"])[::2] == (("", "  \nanswer"), None)
    ctx = make_ctx(req, surface="chat", learner=L)
    assert chat_body(req, "</think>answer", ctx=ctx) == ("", "answer") and ctx.learn() is None
    assert len(L) == 0
    assert learning_stream(L, req, ["plan", "</think>", "answer"]) == (("", "plan</think>answer"), None, None)
    assert len(L) == 1


def test_what_is_learned_for_one_client_is_not_used_for_another():
    L = Learner()
    for _ in range(2):
        L.observe("client-a", "up", "m", True, False)
    assert L.inside("client-a", "up", "m") and not L.inside("client-b", "up", "m")
    ctx = make_ctx({"model": "m"}, surface="chat", learner=L)
    ctx.client = "client-b"
    assert chat_stream({"model": "m"}, ["Just ", "an answer."], ctx=ctx) == ("", "Just an answer.")


def test_the_learner_is_bounded_in_entries_and_in_the_length_of_each_key():
    L = Learner()
    longest = "m" * LONGEST
    for i in range(3 * SIZE):
        L.observe(f"cred:{i:032x}", "u" * LONGEST, longest[:-8] + f"{i:08d}", True, False)
    assert len(L) == SIZE
    assert max(sum(len(part) for part in key) for key in L._strays) <= 3 * LONGEST
    for client, upstream, model in [("c", "up", longest + "m"), ("c", "u" * (LONGEST + 1), "m"),
                                    ("c" * (LONGEST + 1), "up", "m")]:
        assert L.observe(client, upstream, model, True, False) is None
    assert len(L) == SIZE and ("c", "up", "m") not in L._strays


@pytest.mark.e2e
def test_one_clients_outputs_never_change_another_clients_streams(proxy, up):
    """Client A's model writes closing tags with no opening tag (learned: A's streams of it start
    inside). Client B, with another key, streams the same model at the same upstream: its answers
    stay answers."""
    from harness import post, sse_reply

    def stream(key, chunks):
        evs = [{"model": "shared-model", "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
               for c in chunks]
        evs.append({"model": "shared-model", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        up.route("/chat/completions", sse_reply([b"data: " + json.dumps(e).encode() + b"\n\n" for e in evs]
                                                + [b"data: [DONE]\n\n"]))
        r = post(proxy.url + "/v1/chat/completions", {"model": "shared-model", "stream": True},
                 headers={"authorization": f"Bearer {key}"})
        got = [json.loads(line[6:])["choices"][0]["delta"] for line in r.content.split(b"\n")
               if line.startswith(b"data: {")]
        return "".join(d.get("reasoning_content") or "" for d in got), "".join(d.get("content") or "" for d in got)

    assert stream("sk-a", ["plan", "</think>", "answer"]) == ("", "plan</think>answer")
    assert stream("sk-a", ["plan", "</think>", "answer"]) == ("", "plan</think>answer")
    proxy.wait_for(r"model 'shared-model' at http://127\.0\.0\.1:\d+ wrote a closing tag", timeout=10)
    assert stream("sk-a", ["plan", "</think>", "answer"]) == ("plan", "answer")          # A: learned
    assert stream("sk-b", ["Just ", "an answer."]) == ("", "Just an answer.")            # B: untouched
    assert stream("sk-b", ["plan", "</think>", "answer"]) == ("", "plan</think>answer")        # B learns alone
    assert stream("sk-a", ["plan", "</think>", "answer"]) == ("plan", "answer")          # A still learned


# -- gpt-oss whose special tokens the server dropped --------------------------------------------------
DROPPED = "analysisUser says hi. We should reply politely.assistantfinalHello! How can I help you today?"


@pytest.mark.parametrize("cut", [None, 1, 3, 8, 20, 60])
def test_gpt_oss_whose_special_tokens_were_dropped_splits_at_its_words(cut):
    want = ("User says hi. We should reply politely.", "Hello! How can I help you today?")
    req = {"model": "gpt-oss-20b"}
    assert chat_body(req, DROPPED) == want
    chunks = list(DROPPED) if cut is None else [DROPPED[:cut], DROPPED[cut:]]
    assert chat_stream(req, chunks) == want


def test_gpt_oss_dropped_tokens_count_only_at_the_very_start():
    req = {"model": "gpt-oss-20b"}
    # An answer that starts with another word, or names them later, is the answer.
    for text in ("analyst notes: fine", "ana", "The analysis shows growth.\nassistantfinal is a word here",
                 "<|channel|>final<|message|>The analysis is done.assistantfinal"):
        want = text.replace("<|channel|>final<|message|>", "")
        assert chat_body(req, text) == ("", want) == chat_stream(req, list(text)), text
    # A tool call after the dropped analysis header ends the reasoning and stays in the answer.
    text = 'analysisNeed the file.assistantcommentary to=functions.read json{"path":"a"}'
    want = ("Need the file.", 'assistantcommentary to=functions.read json{"path":"a"}')
    assert chat_body(req, text) == want == chat_stream(req, list(text))
    # Other models never read these words as tags.
    assert chat_body({"model": "qwen3"}, DROPPED) == ("", DROPPED)


@pytest.mark.parametrize("kwargs,want", [
    ({"thinking": False, "enable_thinking": True}, True), ({"thinking": True, "enable_thinking": False}, True),
    ({"thinking": False, "enable_thinking": None}, False), ({"enable_thinking": None}, None), ({}, None)])
def test_the_names_a_template_reads_are_one_switch_any_on_wins(kwargs, want):
    assert thinking_switch({"chat_template_kwargs": kwargs}, ("thinking", "enable_thinking")) is want
