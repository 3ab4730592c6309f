"""Where an Ollama model's output starts, from its own Go template (thinkwire.gotemplate):
Ollama's real library templates (tests/support/ollama_templates, checked by their registry
digests) rendered for one question with `think` unset, false and true, and the bounds of the
rendering."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from thinkwire import capabilities, gotemplate
from thinkwire.outbound import Answer
from thinkwire.rules import TagPair
from thinkwire.serverstart import ServerStart, Told

HERE = Path(__file__).parent / "support" / "ollama_templates"
DIGESTS = {"qwen3": "ae370d884f108d16e7cc8fd5259ebc5773a0afa6e078b11f4ed7e39a27e0dfc4",
           "deepseek-r1": "c5ad996bda6eed4df6e3b605a9869647624851ac248209d22fd5e2c0cc1121d3",
           "magistral": "35f7a1efc383aeaa73f17f770de9c1d3531693c65edf1e0cbadea7d17db23fa9"}
THINK = TagPair("<think>", "</think>")


def template(name: str) -> str:
    return (HERE / f"{name}.gotmpl").read_text()


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_the_templates_are_the_registrys_own_bytes(name):
    assert hashlib.sha256((HERE / f"{name}.gotmpl").read_bytes()).hexdigest() == DIGESTS[name]


# What Ollama renders (text/template semantics: `{{-`/`-}}` trim, `$last`, `.IsThinkSet`).
@pytest.mark.parametrize("name,think,prompt", [
    ("deepseek-r1", None, "<｜User｜>Hi<｜Assistant｜>"),
    ("deepseek-r1", False, "<｜User｜>Hi<｜Assistant｜><think>\n\n</think>\n\n"),
    ("deepseek-r1", True, "<｜User｜>Hi<｜Assistant｜>"),
    ("qwen3", None, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
    ("qwen3", False, "<|im_start|>user\nHi /no_think<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
    ("qwen3", True, "<|im_start|>user\nHi /think<|im_end|>\n<|im_start|>assistant\n"),
    ("qwen3", "high", "<|im_start|>user\nHi /think<|im_end|>\n<|im_start|>assistant\n"),
    ("magistral", None, "[INST]Hi[/INST]"),
    ("magistral", False, "[INST]Hi[/INST]<think>\n</think>\n"),
])
def test_an_ollama_template_renders_as_ollama_renders_it(name, think, prompt):
    assert gotemplate.render(template(name), think) == prompt


def test_a_system_prompt_goes_where_the_template_puts_it():
    assert gotemplate.render(template("qwen3"), None, "Be terse.") == (
        "<|im_start|>system\n\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert gotemplate.render(template("deepseek-r1"), False, "Be terse.") == (
        "Be terse.<｜User｜>Hi<｜Assistant｜><think>\n\n</think>\n\n")


def _show(name: str) -> capabilities.Shown:
    body = {"template": template(name), "capabilities": ["completion", "thinking"],
            "model_info": {"general.basename": {"deepseek-r1": "DeepSeek-R1-Distill-Qwen", "qwen3": "Qwen3",
                                                "magistral": "Magistral-Small-2506"}[name]}}
    got = capabilities.shown(Answer(200, json.dumps(body).encode()))
    assert got is not None
    return got


@pytest.mark.parametrize("name,think,told", [
    # think false: the template closes an empty block, the output starts in the answer (before,
    # unread, the deepseek-r1 profile started it inside: the whole answer as reasoning)
    ("deepseek-r1", False, Told("ollama", False, None, "DeepSeek-R1-Distill-Qwen")),
    ("deepseek-r1", None, Told("ollama", False, None, "DeepSeek-R1-Distill-Qwen")),
    ("deepseek-r1", True, Told("ollama", False, None, "DeepSeek-R1-Distill-Qwen")),
    ("qwen3", False, Told("ollama", False, None, "Qwen3")),
    ("magistral", False, Told("ollama", False, None, "Magistral-Small-2506")),
])
def test_the_requests_think_picks_which_rendering_is_read(name, think, told):
    ss = ServerStart(None, lambda: (THINK,))   # type: ignore[arg-type]  (no asks: the Shown is given)
    assert ss._from_show(_show(name), think) == told


def test_what_is_kept_of_a_template_is_three_short_ends():
    got = _show("qwen3")
    assert got.template_tail is None and got.ends is not None
    assert [len(e or "") <= gotemplate.TAIL for e in got.ends] == [True] * 3
    assert got.ends[1].endswith("<think>\n\n</think>\n\n")


def test_a_template_that_opens_the_block_starts_inside():
    opens = '{{ range .Messages }}{{ .Content }}{{ end }}<|im_start|>assistant\n{{ if not (and $.IsThinkSet (not $.Think)) }}<think>\n{{ end }}'
    ss = ServerStart(None, lambda: (THINK,))   # type: ignore[arg-type]
    shown = capabilities.shown(Answer(200, json.dumps({"template": opens, "model_info": {"general.basename": "m"}}).encode()))
    assert ss._from_show(shown, None) == Told("ollama", True, THINK, "m")
    assert ss._from_show(shown, False) == Told("ollama", False, None, "m")


@pytest.mark.parametrize("text,prompt", [
    ("{{ .Prompt }}", "Hi"),   # Ollama's default, for a GGUF whose template it cannot name
    ("{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}<|im_start|>user\n{{ .Prompt }}"
     "<|im_end|>\n<|im_start|>assistant\n{{ .Response }}<|im_end|>\n", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
    ("[INST] {{ .Prompt }} [/INST]<think>\n{{ .Response }}</s>", "[INST] Hi [/INST]<think>\n"),
])
def test_a_legacy_template_renders_its_last_turn_up_to_the_response(text, prompt):
    assert gotemplate.render(text, None) == prompt


@pytest.mark.parametrize("text", [
    '{{ template "x" . }}',                    # named templates
    "{{ upper .System }}",                     # a function outside the subset
    "{{ .Messages.Len }}",                     # a method
    "{{ if .System }}no end",                  # malformed
    '{{ eq 1 "a" }}',                          # Go errors on it; not guessed
    "{{ .Messages }}",                         # printing a structure
])
def test_what_is_past_the_subset_is_not_guessed(text):
    assert gotemplate.render(text, None) is None


def test_a_template_past_what_is_rendered_is_read_by_its_literal_end_without_think():
    shown = capabilities.shown(Answer(200, json.dumps({"template": "{{ upper .Prompt }}<think>\n",
                                                       "model_info": {"general.basename": "m"}}).encode()))
    assert shown.ends is None and shown.template_tail is not None
    ss = ServerStart(None, lambda: (THINK,))   # type: ignore[arg-type]
    assert ss._from_show(shown, None) == Told("ollama", True, THINK, "m")


def test_the_rendering_is_bounded():
    assert gotemplate.render("x" * (gotemplate.TEMPLATE_MAX + 1), None) is None
    # Nested ranges over the two messages: 2**n iterations; past STEPS nodes it stops.
    nest = lambda n: "{{ range $.Messages }}" * n + "a" + "{{ end }}" * n   # noqa: E731
    assert gotemplate.render(nest(8), None, "s") == "a" * 2 ** 8
    assert gotemplate.render(nest(20), None, "s") is None
    # Output past OUTPUT_MAX characters.
    ranges = lambda n: "{{ range $.Messages }}" * n + "y" * 12_000 + "{{ end }}" * n   # noqa: E731
    assert gotemplate.render(ranges(3), None, "s") is None   # 8 x 12,000 characters
    assert gotemplate.render(ranges(2), None, "s") == "y" * 48_000
    # Blocks and parentheses past DEPTH.
    deep = "{{ if true }}" * (gotemplate.DEPTH + 1) + "z" + "{{ end }}" * (gotemplate.DEPTH + 1)
    assert gotemplate.render(deep, None) is None
    assert gotemplate.render("{{ if true }}" * 8 + "z" + "{{ end }}" * 8, None) == "z"
    parens = "{{ not " + "(not " * (gotemplate.DEPTH + 1) + "true" + ")" * (gotemplate.DEPTH + 1) + " }}"
    assert gotemplate.render(parens, None) is None
