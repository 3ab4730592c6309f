"""Real outputs (tests/realworld/, provenance in its README.md): what models really wrote, from public
issue threads, and designed edge cases. Each must split exactly as its `expect_body` /
`expect_stream` says, on every surface, as a body and as a stream at any chunking.

XFAIL lists the cases thinkwire does not get right yet, with what goes wrong; they are strict, so
a fix turns each into a failure until its entry goes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from support import runs
from thinkwire.surfaces import chat

DATA = json.loads((Path(__file__).parent / "realworld" / "cases.json").read_text(encoding="utf-8"))
CASES = DATA["cases"]

# How several reasoning blocks come out on Messages and Responses (chat: joined with a blank line,
# as expect_* writes them).
BLOCKS: dict[str, tuple[str, ...]] = {
    "wild/mtplx-149/longer-alias-split-after-close": ("R1", "SECRET"),
    "wild/dynamo-10569/reentry-open-split-at-lt": ("first", "second"),
    "adversarial/interleaved-then-unclosed": ("a", "b"),
    "adversarial/two-blocks-blank-lines-between": ("a", "b"),
    "adversarial/harmony-two-analysis-messages-split": ("First thought.", "Second thought."),
}

# The whitespace the model wrote at the end of its answer, before a marker that ends the output
# and is removed (an answer wrapper's close, an end token, the next block's opening tag):
# expect_* leaves it out; thinkwire keeps the end of an answer as the model wrote it.
ANSWER_END: dict[str, str] = {
    "wild/vllm-58127/hunyuan-answer-close-split": "\n",
    "wild/cherry-studio-8591/hunyuan-answer-wraps-code": "\n",
    "wild/vllm-52841/ernie-response-then-tool-call": "\n",
    "adversarial/interleaved-then-unclosed": "\n",
    "adversarial/apriel-markers": "\n\n",
}

# Where thinkwire splits otherwise on purpose: per mode, the exact result it gives (reasoning
# blocks, answer), argued in the section "Real outputs that split otherwise" of docs/conformance.md, which names
# each case.
ARGUED: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    # Answer text that meets across a removed block with no whitespace gets a line break.
    "wild/sglang-35083/text-before-open-tag": {
        "body": (("checking",), "Sure.\nDone."),
        "stream": (("checking",), "Sure.\nDone."),
    },
    "wild/dynamo-10569/reentry-open-split-at-lt": {
        "body": (("first", "second"), "mid\nend"),
        "stream": (("first", "second"), "mid\nend"),
    },
    # A stream cannot take back what it sent as answer before the closing tag came (the body is
    # right): the tag stays where the reasoning ended.
    "wild/ollama-18288/gemma4-orphan-channel-close": {
        "stream": ((), "1.  WHERE - `manic_miner.html`, line 90\n    WHAT - Replace line 90 with a corrected version "
                       "that removes the redundant `}` …\n    WHY - To fix the `SyntaxError: missing ) after argument "
                       "list` …\n\n<channel|>"),
    },
    # A tool call stays in the answer as the model wrote it, the whole header (`<|start|>assistant`
    # included) and `<|call|>`, for a tool parser (the collection checks only that it is there:
    # `match: contains`).
    "wild/mlxcel-654/gpt-oss-commentary-tool-call": {
        "body": (("Need to read /etc/hosts and summarize it. Use read_file.",),
                 '<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>'
                 '{"path":"/etc/hosts"}<|call|>'),
        "stream": (("Need to read /etc/hosts and summarize it. Use read_file.",),
                   '<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>'
                   '{"path":"/etc/hosts"}<|call|>'),
    },
}

# What thinkwire gets wrong today, per case and mode ("body" / "stream"), grouped by cause.
XFAIL: dict[str, dict[str, str]] = {}


def _wrong(cause: str, ids: list[str], modes=("body", "stream")) -> None:
    for i in ids:
        XFAIL.setdefault(i, {}).update({m: cause for m in modes})



def request_of(case: dict) -> tuple[dict, dict]:
    """(the request the client sent, option values the case sets)."""
    request = {"model": case["model"], **(case.get("request") or {})}
    values = {k.lower().removeprefix("think_"): v for k, v in (case.get("env") or {}).items()}
    return request, values


def expected(case: dict, mode: str, surface: str) -> runs.Run:
    argued = ARGUED.get(case["id"], {}).get(mode)
    if argued is not None:
        return runs.SHOWS[surface](argued[0]), argued[1]
    exp = case[f"expect_{mode}"]
    blocks = BLOCKS.get(case["id"]) or ((exp["reasoning"],) if exp["reasoning"] else ())
    assert chat.BLOCK_JOIN.join(blocks) == (exp["reasoning"] or "")
    return runs.SHOWS[surface](blocks), (exp["content"] or "") + ANSWER_END.get(case["id"], "")


def _params(mode: str) -> list:
    out = []
    for case in CASES:
        why = XFAIL.get(case["id"], {}).get(mode)
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


def test_case_ids_are_unique_and_the_lists_name_cases():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)) == 55
    assert set(BLOCKS) | set(ANSWER_END) | set(XFAIL) | set(ARGUED) <= set(ids)
    assert not set(ARGUED) & set(XFAIL)


@pytest.mark.parametrize("case", _params("body"))
def test_body_splits_as_a_user_wants_on_every_surface(case):
    request, values = request_of(case)
    for surface, run in runs.BODIES.items():
        assert run(case["output"], request, values) == expected(case, "body", surface), surface


def _check_stream(case: dict, cuts: dict[str, list[str]]) -> None:
    request, values = request_of(case)
    for surface, run in runs.STREAMS.items():
        for how, chunks in cuts.items():
            assert run(chunks, request, values) == expected(case, "stream", surface), (surface, how)


@pytest.mark.parametrize("case", _params("stream"))
def test_stream_splits_as_a_user_wants_on_every_surface(case):
    _check_stream(case, runs.chunkings(case["output"], case["id"], case.get("chunks"), randoms=3))


@pytest.mark.parametrize("case", _params("stream"))
def test_stream_at_any_chunking(case):
    text = case["output"]
    # A known failure fails at once: no shrinking (it would only cost time).
    phases = [Phase.generate] if case["id"] in XFAIL else list(Phase)

    @settings(max_examples=15, deadline=None, phases=phases, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=10))
    def run(cuts):
        at = sorted({c for c in cuts if c < len(text)})
        _check_stream(case, {"hypothesis": [text[a:b] for a, b in zip([0] + at, at + [len(text)])]})
    run()


def test_the_docs_count_the_cases_thinkwire_gets_right():
    docs = Path(__file__).parent.parent / "docs"
    guarantees = (docs / "guarantees.md").read_text(encoding="utf-8")
    argued = "(argued in [Real outputs that split otherwise](conformance.md#real-outputs-that-split-otherwise))"
    right = len(CASES) - len(XFAIL) - len(ARGUED)
    said = (f"{right} do today, and {len(ARGUED)} split otherwise on purpose {argued}; none is left as a strict "
            f"expected failure" if not XFAIL else
            f"{right} do today, {len(ARGUED)} split otherwise on purpose {argued}, and the other {len(XFAIL)} are "
            f"strict expected failures")
    assert said in " ".join(guarantees.split())
    assert f"`ANSWER_END` states it for the {len(ANSWER_END)} cases" in guarantees
    conformance = (docs / "conformance.md").read_text(encoding="utf-8")
    section = conformance.split("## Real outputs that split otherwise", 1)[1].split("\n## ", 1)[0]
    for case_id in ARGUED:
        assert f"`{case_id}`" in section, case_id
