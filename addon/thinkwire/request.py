"""What a request says about where the model's output starts: its thinking switches, a prefill
of the assistant's turn, a request for structured output. Pure functions of the parsed body."""

from __future__ import annotations

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


def thinking_switch(request: dict | None, names: tuple[str, ...] | None = None) -> bool | None:
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
    names = KNOWN_SWITCHES if names is None else names
    if not names:
        return None
    # The names a template reads are one switch: any of them on turns thinking on (IQuest's
    # `thinking: false, enable_thinking: true` thinks), else any of them off turns it off.
    kwargs = request.get("chat_template_kwargs")
    said = [_on(name, kwargs.get(name)) for name in names] if isinstance(kwargs, dict) else []
    said += [request[name] for name in names if isinstance(request.get(name), bool)]
    if True in said:
        return True
    if False in said:
        return False
    think = request.get("think")
    if (isinstance(think, bool) or think in OLLAMA_THINK_LEVELS) and any(n in names for n in _FROM_OLLAMA_THINK):
        return think is not False
    thinking = request.get("thinking")
    if isinstance(thinking, dict) and isinstance(thinking.get("type"), str) and any(
            n in names for n in _FROM_THINKING_TYPE):
        return thinking["type"] != "disabled"
    effort = _effort(request)
    if effort is not None and any(n in names for n in _FROM_EFFORT):
        return effort != "none"
    return None


def _effort(request: dict) -> str | None:
    effort = request.get("reasoning_effort")
    for key in ("reasoning", "output_config"):
        section = request.get(key)
        if effort is None and isinstance(section, dict):
            effort = section.get("effort")
    return effort.strip().lower() if isinstance(effort, str) else None


def prefill(request: dict | None, surface: str | None) -> str | None:
    """The text a request puts at the start of the assistant's turn, which the model continues:
    Anthropic's trailing assistant message; on chat, a trailing assistant message the request
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
    elif surface != "messages":
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


def structured(request: dict | None) -> bool:
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
