"""Designed cases (tests/cases_designed.json): outputs of the kinds models write every day (code,
prose that names tags, tool calls inside reasoning, cut-off tags, mixed pairs), each with the
exact result a user sees, on every surface, as a body and as a stream at any chunking.

A case: `output` (what the model wrote), `model` (default "m"), `finish` ("stop" or "length"),
`request` / `env` as in tests/realworld, and the result: `reasoning` (the blocks, in order) and
`content`; `stream` ({"reasoning", "content"}) where a stream gives another result (it cannot take
back what it sent); `stream_wrong` ({surface: why}): surfaces whose stream is known not to give it
yet (checked to differ, so a fix shows).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from support import runs

CASES = json.loads((Path(__file__).parent / "cases_designed.json").read_text(encoding="utf-8"))["cases"]


def _request(case: dict) -> tuple[dict, dict]:
    request = {"model": case.get("model", "m"), **(case.get("request") or {})}
    values = {k.lower().removeprefix("think_"): v for k, v in (case.get("env") or {}).items()}
    return request, values


def _want(case: dict, mode: str, surface: str) -> runs.Run:
    r = (case.get("stream") or case) if mode == "stream" else case
    return runs.SHOWS[surface](tuple(r["reasoning"])), r["content"]


def test_case_ids_are_unique():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_body_gives_the_exact_result_on_every_surface(case):
    request, values = _request(case)
    for surface, run in runs.BODIES.items():
        assert run(case["output"], request, values, case.get("finish", runs.STOP)) == _want(case, "body", surface), surface


def _check_stream(case: dict, cuts: dict[str, list[str]]) -> None:
    request, values = _request(case)
    for surface, run in runs.STREAMS.items():
        for how, chunks in cuts.items():
            got = run(chunks, request, values, case.get("finish", runs.STOP))
            if surface in (case.get("stream_wrong") or {}):
                # Known not done there (the case says why): strict, a fix turns it into a failure.
                assert got != _want(case, "stream", surface), (surface, how, "fixed: drop stream_wrong")
                continue
            assert got == _want(case, "stream", surface), (surface, how)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_stream_gives_the_exact_result_on_every_surface_per_character_and_at_random_cuts(case):
    _check_stream(case, runs.chunkings(case["output"], case["id"], randoms=3))


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_stream_at_any_chunking(case):
    text = case["output"]

    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=10))
    def run(cuts):
        at = sorted({c for c in cuts if c < len(text)})
        _check_stream(case, {"hypothesis": [text[a:b] for a, b in zip([0] + at, at + [len(text)])]})
    run()
