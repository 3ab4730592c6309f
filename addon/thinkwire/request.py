"""What a request says about where the model's output starts: its thinking switches, a prefill
of the assistant's turn, a request for structured output. Pure functions of the parsed body,
and `Facts`: what the response side reads of a request, kept while its stream is open instead
of the parsed body (a long agent session's request is megabytes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .serverstart import system_switches
from .tagsets import MODEL_CHARS

# Template variables thinkwire knows, in the order they are read when a profile does not say
# which its template reads (no profile: any of them may be the one).
KNOWN_SWITCHES = ("enable_thinking", "thinking", "thinking_mode", "reasoning_effort")
# API-level switches reach the template as these variables: vLLM passes `reasoning_effort` to the
# template and sets `enable_thinking` from it; gateways (LiteLLM) turn Anthropic's `thinking`
# and OpenAI's effort into `chat_template_kwargs.enable_thinking`. A template that reads neither
# (DeepSeek-V3.1 reads `thinking`) never sees them.
_FROM_THINKING_TYPE = ("enable_thinking",)
_FROM_EFFORT = ("enable_thinking", "reasoning_effort")
# Ollama's `think` (a bool, or a level, each of which turns it on) reaches a template as its
# thinking switch (`.Think`, what Qwen3's and DeepSeek's Ollama templates read).
_FROM_OLLAMA_THINK = ("enable_thinking", "thinking")
# A profile's `switches` name for the system prompt's `/think` and `/no_think` (SmolLM3, Nemotron).
SYSTEM_PROMPT = "system_prompt"
OLLAMA_THINK_LEVELS = ("low", "medium", "high", "max")


def _on(name: str, value: object) -> bool | None:
    """A template variable's value as on (True), off (False), or not a switch value (None)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        v = value.strip().lower()
        if name == "reasoning_effort":
            return v != "none"
        if v in ("enabled", "on", "true"):
            return True
        # MiniMax-M3's "adaptive": the model decides and writes its own tag; the prompt opens nothing.
        if v in ("disabled", "off", "false", "none", "adaptive"):
            return False
    return None


def thinking_switch(request: dict[str, Any] | None, names: tuple[str, ...] | None = None) -> bool | None:
    """Whether the request turns thinking on (True) or off (False) for a template that reads
    the variables `names` (None: every known one); None when it says nothing they read.

    Read, in order: `chat_template_kwargs.NAME` (vLLM, SGLang, llama.cpp pass it to the
    template) and a top-level boolean `NAME` (DashScope-style `enable_thinking`), any of them on
    winning over any off; then Ollama's `think`
    (a bool, or a level "low" / "medium" / "high" / "max", each of which turns it on), Anthropic's
    `thinking.type`, then OpenAI's `reasoning_effort` / `reasoning.effort` (Anthropic's
    `output_config.effort`); "none" turns thinking off.
    """
    if not isinstance(request, dict):
        return None
    return facts(request, None, KNOWN_SWITCHES if names is None else names).switch(names)


SUMMARY_CHARS = 32   # a Responses `reasoning.summary` longer than this is no value the API knows


@dataclass(frozen=True)
class Facts:
    """What the response side reads of a request (`facts`): its model (the first MODEL_CHARS
    characters), the switches it sets, its prefill text, whether it asks for structured output,
    and what it asks of the reasoning's form. Small whatever the request's size, but for the
    prefill, which is the text of its trailing assistant message."""

    model: str | None = None
    prefill: str | None = None
    structured: bool = False
    said: tuple[tuple[str, bool], ...] = ()   # (template variable, on) the request sets, of the names kept
    think: bool | None = None            # Ollama's `think`: on (true, a level) or off
    thinking_type: bool | None = None    # Anthropic's `thinking.type`: anything but "disabled"
    effort: bool | None = None           # an effort other than "none"
    display_omitted: bool = False        # Anthropic's `thinking.display` is "omitted"
    summary: str | None = None           # Responses' `reasoning.summary`, when a short string
    include_encrypted: bool = False      # Responses' `include` asks for reasoning.encrypted_content
    # vLLM's `chat_template_kwargs.force_nonempty_content`: an output with reasoning and no
    # answer gives its reasoning as the answer (docs/behaviour.md).
    force_nonempty: bool = False
    # The system prompt's switch (`/no_think` anywhere: off; else `/think`: on), as the templates
    # of SmolLM3 and Nemotron read it; read for a profile that declares no switches (or lists
    # SYSTEM_PROMPT) where the server cannot be asked.
    prompt_switch: bool | None = None

    def switch(self, names: tuple[str, ...] | None = None) -> bool | None:
        """`thinking_switch` of the request, for a template that reads `names`."""
        names = KNOWN_SWITCHES if names is None else names
        if not names:
            return None
        said = [on for name, on in self.said if name in names]
        # The names a template reads are one switch: any of them on turns thinking on (IQuest's
        # `thinking: false, enable_thinking: true` thinks), else any of them off turns it off.
        if True in said:
            return True
        if False in said:
            return False
        for value, via in ((self.think, _FROM_OLLAMA_THINK), (self.thinking_type, _FROM_THINKING_TYPE),
                           (self.effort, _FROM_EFFORT)):
            if value is not None and any(n in names for n in via):
                return value
        if names is KNOWN_SWITCHES or SYSTEM_PROMPT in names:
            return self.prompt_switch
        return None


def facts(request: dict[str, Any], surface: str | None, names: tuple[str, ...]) -> Facts:
    """The Facts of a parsed request that came to `surface`; `names`: the template variables
    whose values are kept (those the tag sets' profiles read, and KNOWN_SWITCHES)."""
    kwargs = request.get("chat_template_kwargs")
    said = []
    for name in names:
        on = _on(name, kwargs.get(name)) if isinstance(kwargs, dict) else None
        if on is not None:
            said.append((name, on))
        if isinstance(request.get(name), bool):
            said.append((name, request[name]))
    think = request.get("think")
    thinking = request.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    effort = _effort(request)
    reasoning = request.get("reasoning")
    summary = reasoning.get("summary") if isinstance(reasoning, dict) else None
    include = request.get("include")
    model = request.get("model")
    switches = system_switches(request, surface or "")
    return Facts(
        model=model[:MODEL_CHARS] if isinstance(model, str) and model else None,
        prefill=prefill(request, surface), structured=structured(request), said=tuple(said),
        think=(think is not False) if isinstance(think, bool) or think in OLLAMA_THINK_LEVELS else None,
        thinking_type=kind != "disabled" if isinstance(kind, str) else None,
        effort=effort != "none" if effort is not None else None,
        display_omitted=isinstance(thinking, dict) and thinking.get("display") == "omitted",
        summary=summary if isinstance(summary, str) and len(summary) <= SUMMARY_CHARS else None,
        include_encrypted=isinstance(include, list) and "reasoning.encrypted_content" in include,
        force_nonempty=isinstance(kwargs, dict) and kwargs.get("force_nonempty_content") is True,
        prompt_switch=False if "/no_think" in switches else True if switches else None)


def _effort(request: dict[str, Any]) -> str | None:
    effort = request.get("reasoning_effort")
    for key in ("reasoning", "output_config"):
        section = request.get(key)
        if effort is None and isinstance(section, dict):
            effort = section.get("effort")
    return effort.strip().lower() if isinstance(effort, str) else None


def prefill(request: dict[str, Any] | None, surface: str | None) -> str | None:
    """The text a request puts at the start of the assistant's turn, which the model continues:
    Anthropic's and Ollama's trailing assistant message (Ollama continues it); on chat, a trailing assistant message the request
    asks the server to continue (`continue_final_message`, or `add_generation_prompt: false`).
    None when there is none (or it holds no text)."""
    if not isinstance(request, dict):
        return None
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "assistant":
        return None
    if surface == "chat":
        if not (request.get("continue_final_message") is True or request.get("add_generation_prompt") is False):
            return None
    elif surface not in ("messages", "ollama"):
        return None
    content = last.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(b["text"] for b in content
                       if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
    else:
        return None
    return text or None


_JSON_FORMATS = ("json_schema", "json_object")
# Server extras that constrain the output from its first token (vLLM's guided decoding and
# structured_outputs, llama.cpp's json_schema and grammar).
_CONSTRAINTS = ("guided_json", "guided_regex", "guided_choice", "guided_grammar", "json_schema", "grammar")


def structured(request: dict[str, Any] | None) -> bool:
    """Whether the request constrains the output to a format (a JSON schema, a JSON object, a
    grammar). A server without a reasoning parser (the only kind whose reasoning thinkwire
    moves) applies it from the first token, so the output is the answer from the start."""
    if not isinstance(request, dict):
        return False
    formats = [request.get("response_format")]                      # chat completions
    for outer, inner in (("text", "format"), ("output_config", "format")):   # Responses; Anthropic
        section = request.get(outer)
        if isinstance(section, dict):
            formats.append(section.get(inner))
    formats.append(request.get("output_format"))                    # Anthropic's beta name
    if any(isinstance(f, dict) and f.get("type") in _JSON_FORMATS for f in formats):
        return True
    if any(request.get(k) not in (None, "", {}, []) for k in _CONSTRAINTS):
        return True
    so = request.get("structured_outputs")
    return isinstance(so, dict) and any(so.get(k) not in (None, "", {}, [])
                                        for k in ("json", "regex", "choice", "grammar", "structural_tag"))
