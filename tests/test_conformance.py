"""The field's reasoning-parser cases (vLLM, SGLang, llama.cpp, the Vercel AI SDK, LiteLLM), run
through thinkwire.

The cases live in tests/conformance/<peer>.json, ported from each project's own tests (each case
names its repository, file, commit and test). Every case runs on every surface (tests/support/runs.py),
as a body and as a stream (the peer's own chunks where it has them, per character, random
chunkings), and:

1. gives exactly the result stored in tests/conformance/results.json: reasoning blocks and answer,
   for a body and for a stream, per surface where a surface differs from how it shows the blocks
   (runs.SHOWS). Every chunking of a stream gives the same result.
2. agrees exactly with what the peer's test asserts, or is listed in
   tests/conformance/differences.json under a rule of the docs/conformance.md section "Where thinkwire differs
   from vLLM and SGLang": the rule is the argument for the difference, the stored result is the
   check. A case whose peer asserts no value (only relations, or only substrings) is counted apart.

KNOWN_WRONG lists the stored results a user would call wrong (the review's findings, for those
who change the rules). `THINKWIRE_WRITE_RESULTS=1 ./scripts/test tests/test_conformance.py`
rewrites results.json and differences.json from the current code (a new difference is recorded as
"unreviewed" until someone names its rule); `.venv/bin/python -m devtools.review conformance`
prints every stored result for review.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from support import runs
from support.stored import HOW, WRITE, stored
from thinkwire.surfaces import chat

HERE = Path(__file__).parent / "conformance"
PAGE = Path(__file__).parent.parent / "docs" / "conformance.md"
PEERS = ("vllm", "sglang", "llamacpp", "vercel-ai", "litellm")
RESULTS = stored(HERE / "results.json")
DIFFERENCES = stored(HERE / "differences.json")
UNREVIEWED = "unreviewed"
KNOWN_AS_WRONG = "known-wrong"   # the label of a difference no rule argues: thinkwire is wrong there


def load_cases() -> list[dict]:
    out = []
    for peer in PEERS:
        data = json.loads((HERE / f"{peer}.json").read_text(encoding="utf-8"))
        for case in data["cases"]:
            out.append(dict(case, peer=peer))
    return out


CASES = load_cases()


# -- what the case asks thinkwire to be -----------------------------------------------------------
def _args(case: dict) -> dict:
    return case.get("detector_args") or {}


def opened_in_prompt(case: dict) -> bool | None:
    """Whether the peer's test says the prompt opened the reasoning block (True), says it did
    not (False), or leaves it to the model (None)."""
    a = _args(case)
    for key in ("force_reasoning", "thinking_forced_open", "startWithReasoning", "started_reasoning_content"):
        if isinstance(a.get(key), bool):
            return a[key]
    if (case.get("initial_state") or {}).get("_in_reasoning"):
        return True
    return None


def custom_pair(case: dict) -> tuple[str, str] | None:
    """The tag pair a test sets itself, when it is not one thinkwire ships for every model."""
    a = _args(case)
    if case.get("markers"):
        return case["markers"]["start"], case["markers"]["end"]
    if a.get("think_start_token") and a.get("think_end_token"):
        return a["think_start_token"], a["think_end_token"]
    if a.get("end_tag"):
        return "<" + a["end_tag"][2:], a["end_tag"]
    if a.get("tagName"):
        return f"<{a['tagName']}>", f"</{a['tagName']}>"
    return None


def settings_for(case: dict) -> tuple[dict, dict]:
    """(request, option values) that put thinkwire where the peer's test puts its parser."""
    request = {"model": case.get("model") or "custom-model", **(case.get("request") or {})}
    a = _args(case)
    if isinstance(a.get("enable_thinking"), bool):   # llama.cpp's inputs.enable_thinking: the template's switch
        request["chat_template_kwargs"] = dict(request.get("chat_template_kwargs") or {},
                                               enable_thinking=a["enable_thinking"])
    if a.get("continue_final_message") and "previous_content" in a:   # what the request prefilled
        request.setdefault("messages", [{"role": "assistant", "content": a["previous_content"]}])
        request["continue_final_message"] = True
    values: dict = {}
    pair = custom_pair(case)
    if pair is not None and pair != ("<think>", "</think>"):
        values["tags"] = f"{pair[0]} {pair[1]}"
    opened = opened_in_prompt(case)
    if opened:
        values["starts_inside"] = "on"
    elif opened is False:
        # The prompt did not open the block: what a request that turns thinking off tells a profile.
        kwargs = dict(request.get("chat_template_kwargs") or {}, enable_thinking=False)
        request["chat_template_kwargs"] = kwargs
    return request, values


def finish_of(case: dict) -> str:
    """How the output ended, for the response that carries it: cut off at the token limit where the
    peer's test says the output was truncated (partial parses, a test named for truncation), else
    complete (`finish_reason: stop`), as most outputs are."""
    cut = case.get("partial") or "truncat" in case["id"].lower() or "truncat" in str(case.get("test", "")).lower()
    return runs.LENGTH if cut else runs.STOP


# -- what the peer's test asserts ----------------------------------------------------------------------
def expectations(case: dict) -> dict[str, tuple]:
    """mode -> (reasoning, content) the peer's test asserts; None where it leaves a field unchecked.
    Reasoning is the peer's one text, or a tuple of blocks where its test lists blocks."""
    out: dict[str, tuple] = {}
    for mode in ("body", "stream"):
        exp = case.get(mode)
        if not isinstance(exp, dict):
            continue
        got = []
        for field in ("reasoning", "content"):
            v = exp.get(field)
            if v is None and case["peer"] != "vllm":
                got.append(None)          # a field the peer's test leaves unchecked
            else:
                got.append(v or "")       # vLLM's parsers return None for "no text"
        if got != [None, None]:
            out[mode] = tuple(got)
    if case.get("blocks") and "body" not in out:   # SGLang's block-sequence tests
        blocks = [(b[0], b[1]) if isinstance(b, list) else (b["type"], b["text"]) for b in case["blocks"]]
        out["body"] = (tuple(t for kind, t in blocks if kind == "reasoning"),
                       "".join(t for kind, t in blocks if kind == "text"))
    return out


def substring_checks(case: dict) -> list[tuple[str, str, str, str]]:
    """(kind, mode, field, text) of the peer's substring checks on a finished result. Its
    per-chunk checks (stream_chunks[n]) say nothing about a finished result."""
    out = []
    for kind in ("assert_in", "assert_not_in", "assert_prefix"):
        for key, wanted in (case.get(kind) or {}).items():
            mode, _, field = key.partition(".")
            if mode in ("body", "stream") and field in ("reasoning", "content"):
                out += [(kind, mode, field, x) for x in (wanted if isinstance(wanted, list) else [wanted])]
    for key in case.get("assert_nonempty") or []:
        mode, _, field = key.partition(".")
        if mode in ("body", "stream") and field in ("reasoning", "content"):
            out.append(("assert_nonempty", mode, field, ""))
    return out


def _field(result: dict, field: str) -> str:
    return chat.BLOCK_JOIN.join(result["reasoning"]) if field == "reasoning" else result["content"]


def _holds(kind: str, value: str, x: str) -> bool:
    return {"assert_in": x in value, "assert_not_in": x not in value,
            "assert_prefix": value.startswith(x), "assert_nonempty": bool(value)}[kind]


def _agrees(result: dict, peer: tuple) -> bool:
    pr, pc = peer
    if isinstance(pr, tuple):
        r_ok = tuple(result["reasoning"]) == pr
    else:
        r_ok = pr is None or _field(result, "reasoning") == pr
    return r_ok and (pc is None or pc == result["content"])


AGREES = "agrees exactly with every value the peer's test asserts"
DIFFERS = "differs, by a rule below"
SUBSTRINGS = "the peer's test asserts only substrings, and all hold"
NOTHING = "the peer's test asserts nothing checkable on a finished result"


def verdict(case: dict, result: dict) -> str:
    """How thinkwire's stored result stands against the peer's test."""
    exp = expectations(case)
    checks = substring_checks(case)
    # Every expectation of the peer's counts: its values and its substring checks alike.
    if not all(_agrees(result[mode], peer) for mode, peer in exp.items()):
        return DIFFERS
    if not all(_holds(kind, _field(result[mode], field), x) for kind, mode, field, x in checks):
        return DIFFERS
    return AGREES if exp else SUBSTRINGS if checks else NOTHING


def figures() -> tuple[Counter, Counter]:
    """(cases per verdict, differing cases per rule), from the stored results."""
    verdicts = Counter(verdict(c, RESULTS.get(c["id"])) for c in CASES)
    return verdicts, Counter(DIFFERENCES.data.values())


@functools.cache
def readme_section() -> str:
    """The section "Where thinkwire differs from vLLM and SGLang" of docs/conformance.md."""
    text = PAGE.read_text(encoding="utf-8").split("## Where thinkwire differs from vLLM and SGLang", 1)[1]
    return text.split("\n## ", 1)[0]


def readme_rules() -> list[str]:
    """The rules that section names."""
    return re.findall(r"^- `([a-z-]+)` \(\d+ cases?\):", readme_section(), re.M)


# -- what a user would call wrong ----------------------------------------------------------------------
# Stored results a user would call wrong, found by reading every stored result (devtools/review.py
# flags the candidates), grouped by cause: what the current rules give, kept so the suite stays green
# and each change shows in results.json. Some causes are documented limits (a stream cannot take
# back what it sent); they stay listed, as a user still sees them, with what makes later responses
# right. Those who change the rules take entries off as they fix them. A case that differs from its
# peer only because thinkwire is wrong is labelled `known-wrong` in differences.json.
KNOWN_WRONG: dict[str, str] = {}


def _wrong(what: str, ids: list[str]) -> None:
    for i in ids:
        assert i not in KNOWN_WRONG, i
        KNOWN_WRONG[i] = what


# Documented: a stream cannot take back what it sent.
_wrong("documented (docs/behaviour.md \"A closing tag with no opening tag\", `stray-close`): a model not known to open its "
       "reasoning block (no profile says so, nothing learned yet) writes only a closing tag. The body is right; the "
       "stream sent the reasoning as answer before the tag came, so its answer starts with the reasoning, then the "
       "closing tag where the model wrote it (the boundary left to see), then the answer "
       "(`This is a reasoning section</think>This is the rest`). Later streams of the model at that "
       "upstream are right once thinkwire has learned it (two such responses in a row, think_learn), or from the "
       "first with a profile that starts inside", [
    "vllm/base_thinking/extract_reasoning_only_end_token", "vllm/base_thinking/different_token_implementations",
    "vllm/base_thinking/different_token_implementations-2", "vllm/base_thinking/multiple_end_tokens",
    "vllm/gemma4/invalid_simple", "vllm/gemma4/invalid_complete", "vllm/granite_thinking_parser/without_start_token",
    "vllm/hy_v3/with_think", "vllm/hy_v3/complete_reasoning", "vllm/hy_v3/multiline_reasoning",
    "vllm/minimax_m3/nonstreaming_non_leading_end_tag_is_content", "vllm/qwen3/without_start_token",
    "vllm/qwen3/without_start_token_complete_reasoning", "vllm/qwen3/multi_token_deltas_end_token_grouped_with_content",
    "vllm/qwen3/multi_token_deltas_no_start_end_grouped_with_content", "llamacpp/chat-hermes-2-pro-L1298",
    "vercel-ai/generate-start-with-reasoning-false",
    "sglang/apertus2509/test_continue_final_message_resumes_inside_reasoning"])   # (Responses and Ollama: no prefill)
_wrong("documented (`stray-close`): the request turned thinking off and the model still wrote a closing tag. The body "
       "makes the text before it reasoning; the stream sent that text as answer before the tag came "
       "(`Simple question.\\n</think>\\n\\n2 + 2 = **4**`, the tag left as the boundary). Nothing makes later streams right: a request that turns thinking off "
       "never starts inside, and learning does not count it", [
    "vllm/glm45/glm47_template_honors_thinking_disable",
    "llamacpp/parser-tnk-unopened-none"])
_wrong("documented (docs/behaviour.md \"How the output ended\", `ended-as-answer`): a model whose template opens the block "
       "answers complete with no tag at all. Every body gives the answer; the stream has sent the text as reasoning "
       "before the end says the output was complete, and then sends it again as the answer (docs/behaviour.md "
       "\"Reasoning and no answer\"): the answer is right, the thinking panel repeats it. (Responses and Ollama have no prefill: there a chat request's continued message "
       "leaves the output where a silent request does.)", [
    "vllm/deepseek_r1/no_content_token", "vllm/deepseek_r1/no_reasoning_token", "vllm/step3p5/no_content_token",
    "vllm/step3p5/no_reasoning_token", "vllm/ernie45/without_think", "vllm/glm45/without_think",
    "vllm/minimax_m2/no_end_token", "vllm/minimax_m2_append_think/no_end_token",
    "sglang/BaseReasoningFormatDetector/test_detect_and_parse_force_reasoning",
    "sglang/BaseReasoningFormatDetector/test_parse_streaming_increment_partial_token/2",
    "sglang/BaseReasoningFormatDetector/test_streaming_returns_empty_when_in_reasoning_and_end_buffered",
    "sglang/deepseek-r1/test_detect_and_parse_r1_format", "sglang/glm45/test_forced_reasoning_mode/1",
    "sglang/minimax-append-think/test_detect_and_parse_prepends_think",
    "sglang/minimax-append-think/test_streaming_first_chunk_prepends_think",
    "sglang/minimax-append-think/test_streaming_second_chunk_no_prepend",
    "sglang/iquest_q1/test_tool_call_requires_reasoning_close/1",
    "sglang/kimi_k3/test_non_stream_reasoning_channels/4",
    "sglang/iquest_q1/test_continue_final_message_keeps_answer_out_of_reasoning",
    "sglang/BaseReasoningFormatDetector/test_continue_detect_parse_with_end_in_previous"])
_wrong("documented (`ended-as-answer`): as above, a complete answer with no tag from a model whose template opens the "
       "block: every body gives the answer, the stream gives it as reasoning and then again as the answer", [
    "vllm/kimi_k2/extract_reasoning_implicit_start", "sglang/nemotron_3/test_detect_and_parse_no_thinking",
    "sglang/nemotron_3/test_force_nonempty_content_no_thinking_tokens"])

# Documented rules a user still reads as wrong.
_wrong("documented (`no-markup`: a later closing tag with no block open is removed outside code, but where prose "
       "names it, after a space or a quote mid-line): a `</think>` the model wrote as text right after an HTML tag in "
       "its answer after the block is gone (`before <code></code> after`)", [
    "sglang/qwen3/test_streaming_mid_text_think_end_is_preserved"])
_wrong("documented (`partial-tag-kept`: a marker missing its last token stays text): Kimi K3's think-close marker "
       "without its `<|sep|>` stays in the reasoning (`thought<|close|>think`)", [
    "sglang/kimi_k3/test_non_stream_recovers_missing_think_separator",
    "sglang/kimi_k3/test_streaming_recovers_missing_think_separator"])
_wrong("no tag set knows Seed's budget note: after the block, `<seed:cot_budget_reflect>...</seed:cot_budget_reflect>` "
       "stays in the answer, markup and all", ["llamacpp/chat-seed-oss-L1998"])
_wrong("no profile knows Inkling's typed blocks (docs/tagsets.md: not profiled): `<|content_thinking|>...<|end_message|>` and "
       "the reasoning stay in the answer", ["sglang/inkling/test_single_chunk_matches_one_shot",
                                            "sglang/inkling/test_token_chunking_matches_one_shot"])

# Wrong by the documented rules: bugs. (None known.)


# -- the tests -----------------------------------------------------------------------------------------
IDS = [c["id"] for c in CASES]


def test_case_ids_are_unique():
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_surface_gives_the_stored_result_as_body_and_stream(case):
    request, values = settings_for(case)
    cuts = runs.chunkings(case["output"], case["id"], case.get("chunks"))
    RESULTS.check(case["id"], runs.observe(case["output"], request, values, cuts, finish_of(case)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_agrees_with_the_peer_or_differs_by_a_stated_rule(case):
    result = RESULTS.get(case["id"])
    assert result is not None, HOW
    v = verdict(case, result)
    rule = DIFFERENCES.get(case["id"])
    if WRITE:
        DIFFERENCES.put(case["id"], rule or UNREVIEWED) if v == DIFFERS else DIFFERENCES.drop(case["id"])
        return
    if v != DIFFERS:
        assert rule is None, f"{v} now: take it off differences.json ({HOW})"
        return
    assert rule != KNOWN_AS_WRONG or case["id"] in KNOWN_WRONG, "say in KNOWN_WRONG what is wrong"
    assert rule in readme_rules(), (
        f"differs from the peer ({expectations(case) or substring_checks(case)}) with no stated rule "
        f"({rule!r}): name one of {readme_rules()} in differences.json, or make thinkwire agree")


def test_stored_results_are_the_cases():
    if WRITE:
        for key in set(RESULTS.data) - set(IDS):
            RESULTS.drop(key)
    assert set(RESULTS.data) == set(IDS)
    assert set(DIFFERENCES.data) <= set(IDS)
    assert set(KNOWN_WRONG) <= set(IDS)


def test_every_rule_is_stated_in_the_docs_with_its_figures():
    verdicts, rules = figures()
    section = readme_section()
    want = [f"| {name} | {verdicts[name]} |" for name in (AGREES, DIFFERS, SUBSTRINGS, NOTHING)]
    names = sorted(set(rules) | set(readme_rules()))
    want += [f"- `{name}` ({rules[name]} case{'s' if rules[name] != 1 else ''}):" for name in names]
    missing = [line for line in want if line not in section]
    assert not missing, "docs/conformance.md's figures are not the stored ones; write:\n" + "\n".join(missing)


def test_a_case_agrees_only_when_its_substring_checks_hold_too():
    case = {"peer": "sglang", "id": "x", "stream": {"reasoning": "r", "content": None},
            "assert_in": {"stream.content": ["</think>"]}}
    assert verdict(case, {"stream": {"reasoning": ["r"], "content": "a </think> b"}}) == AGREES
    assert verdict(case, {"stream": {"reasoning": ["r"], "content": "a  b"}}) == DIFFERS
    assert verdict(case, {"stream": {"reasoning": ["x"], "content": "a </think> b"}}) == DIFFERS
