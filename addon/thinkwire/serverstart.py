"""Where a flow's output starts, as its own server says: the prompt the server's chat template
renders for this kind of request, and the real model behind the name the client sent.

A stream cannot take back what it sent, so before the first token thinkwire must know whether
the output starts inside a reasoning block (the template opened it in the prompt) or in the
answer. The server knows for certain: it renders the template for every request. So thinkwire
asks it, concurrently with forwarding the request (the answer is needed when the response's
first byte comes), the way each kind of server lets one ask (found by asking, never configured):

- llama-server: `GET /props` (its `model_path`), then `POST /apply-template` with the request's
  shape: the prompt it would run, no inference;
- vLLM: `GET /v1/models` (`owned_by: vllm`, each served name's `root`), then `POST /tokenize`
  with chat `messages`, `add_generation_prompt`, `chat_template_kwargs` and `return_token_strs`;
- SGLang: `GET /v1/models` (`owned_by: sglang`; its `root` is the served name, not the model),
  `GET /get_model_info` (`model_path`): who the model is, not what its template renders (its
  `/tokenize` takes a prompt, not chat messages);
- LM Studio: `GET /api/v1/models` (0.4+: each model's `key` and the `id` of each loaded
  instance, the alias `lms load --identifier` gives it), else `GET /api/v0/models` (0.3.6+: the
  keys): who the model is. Its `arch` is not read: an architecture is no model (`qwen2` is
  Qwen2.5's and the R1 distills', which start apart). LM Studio answers 200 to every path it does
  not serve (`{"error": "Unexpected endpoint or method. ..."}`): only its own shapes count;
- Ollama: `POST /api/show` (the answer thinkwire.capabilities keeps, asked once for both): its
  `model_info` (`general.basename`) and its Go template, rendered for one question with `think`
  unset, false and true (thinkwire.gotemplate: the subset Ollama's templates use, bounded), so
  Qwen3's and DeepSeek-R1's `{{ if and $.IsThinkSet (not $.Think) }}<think>\n\n</think>...` is
  read for the request's own `think`.

The prompt's end decides (`read_prompt`): ending in an opening tag, the output starts inside that
pair's block; anything else (an empty block `<think>\\n\\n</think>\\n\\n`, a plain generation
prompt) starts in the answer. The real model's name picks the profile where the client sent
only an alias (`local-model`, a GGUF path, whatever Claude Code sends).

The request's shape is what the template reads of it and nothing else (the conversation is not
sent, nor kept): the `/think` and `/no_think` switches of its system prompt, its
`chat_template_kwargs`, `reasoning_effort` (and Responses' `reasoning.effort`), Ollama's `think`.
The asked request is a user turn of one word with those (and an assistant turn after it where
the request's conversation ends in one that is not a prefill: Responses renders its generation
prompt after it). Answers are kept per server, path
prefix, client, model and shape (`START_TTL`; "not known" `FAILURE_TTL`), bounded in entries and
bytes, so a conversation asks once; which kind a server is is kept per server, prefix and client.
Every ask is one of thinkwire.outbound's: a deadline, no redirect followed, the client's
credentials to the same server only, a cap on bytes and on asks in flight. A server with no such
endpoint is "not known" (a 404 is an answer, kept `KIND_FAILURE_TTL`), and the profile decides.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from .capabilities import Shown
from .outbound import Answer, Asker, Kept, Route, Server
from .rules import TagPair

KIND_TTL = 600.0          # seconds which kind a server is stays kept
KIND_FAILURE_TTL = 60.0   # seconds "no endpoint to ask" stays kept (a server restarted as another kind)
START_TTL = 600.0         # seconds an answer about one shape of request stays kept
FAILURE_TTL = 30.0        # seconds "not known" stays kept
SIZE = 1024               # answers kept (LRU), of each cache
MAX_BYTES = 1 << 20       # bytes kept in all (keys and answers), of each cache
LONGEST = 256             # longer model names, hosts and path prefixes are not asked about
LISTED = 256              # models (and LM Studio's loaded instances) of a server's list read
KWARGS_MAX = 1024         # bytes of a request's chat_template_kwargs (as JSON) sent and kept; more: not asked
PROMPT_TAIL = 512         # characters of a rendered prompt's end that are read
SYSTEM_READ = 64 << 10    # characters of a system prompt searched for /think, /no_think
SWITCHES_KEPT = 4         # /think, /no_think switches of a system prompt kept, in order
QUESTION = "Hi"           # the user turn of an asked request

KINDS = ("llama-server", "vllm", "sglang", "lmstudio", "ollama")
_SWITCH = re.compile(r"/(?:no_)?think\b")


@dataclass(frozen=True)
class Shape:
    """What a chat template reads of a request: small, whatever the request's size."""

    system: tuple[str, ...] = ()     # the system prompt's /think, /no_think switches, in order
    kwargs: str = ""                 # chat_template_kwargs, as canonical JSON ("" none)
    effort: str | None = None        # reasoning_effort / reasoning.effort
    think: object = None             # Ollama's `think` (a bool or a level)
    after_assistant: bool = False    # the conversation ends in an assistant turn (not a prefill)


@dataclass(frozen=True)
class Told:
    """What the server said. `inside`: the rendered prompt leaves the output inside the block of
    `pair` (True) or in the answer (False); None when the server told only who the model is
    (`model`: the real model behind the served name)."""

    kind: str
    inside: bool | None = None
    pair: TagPair | None = None
    model: str | None = None

    @property
    def how(self) -> str:
        return "server template" if self.inside is not None else "server model identity"


@dataclass(frozen=True)
class _Kind:
    kind: str
    model: str | None = None   # the server's one model (llama-server's model_path, SGLang's)
    roots: tuple[tuple[str, str], ...] = ()   # vLLM: (served name, root); LM Studio: (instance or key, key)


class _Ask(Protocol):
    def __call__(self, method: str, where: str, body: object = None) -> Awaitable[Answer | None]: ...


OllamaShow = Callable[[Server, str, str, str, dict[str, str], Route], Awaitable[Shown | None]]


def shape_of(request: dict[str, Any], surface: str) -> Shape | None:
    """The request's Shape; None when it cannot be asked about (kwargs past KWARGS_MAX)."""
    kwargs = request.get("chat_template_kwargs")
    text = ""
    if isinstance(kwargs, dict) and kwargs:
        try:
            text = json.dumps(kwargs, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return None
        if len(text) > KWARGS_MAX:
            return None
    effort = request.get("reasoning_effort")
    reasoning = request.get("reasoning")
    if effort is None and isinstance(reasoning, dict):
        effort = reasoning.get("effort")
    think = request.get("think") if surface == "ollama" else None
    items = request.get("input") if surface == "responses" else request.get("messages")
    last = items[-1] if isinstance(items, list) and items else None
    return Shape(system_switches(request, surface), text,
                 effort[:32] if isinstance(effort, str) else None,
                 think if isinstance(think, bool) or isinstance(think, str) and len(think) <= 32 else None,
                 isinstance(last, dict) and last.get("role") == "assistant")


def system_switches(request: dict[str, Any], surface: str) -> tuple[str, ...]:
    """The `/think` and `/no_think` switches a request's system prompt holds, in order (the
    templates of Qwen3, SmolLM3 and Nemotron read them there)."""
    return tuple(_SWITCH.findall(system_text(request, surface)[:SYSTEM_READ]))[:SWITCHES_KEPT]


def system_text(request: dict[str, Any], surface: str) -> str:
    """The text of a request's system prompt: chat's and Ollama's system (or developer)
    messages, Anthropic's `system`, Responses' `instructions` and system input items, Ollama
    generate's `system`. Read up to SYSTEM_READ characters."""
    parts: list[str] = []

    def add(content: object) -> None:
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for b in content[:64]:
                if isinstance(b, dict) and isinstance(b.get("text"), str):
                    parts.append(b["text"])
    if surface == "messages":
        add(request.get("system"))
    for key in ("instructions", "system"):
        if surface in ("responses", "ollama") and key in request:
            add(request.get(key))
    items = request.get("input") if surface == "responses" else request.get("messages")
    if isinstance(items, list):
        for m in items[:8]:   # system messages lead a conversation
            if isinstance(m, dict) and m.get("role") in ("system", "developer"):
                add(m.get("content"))
    text = "\n".join(parts)
    return text[:SYSTEM_READ]


def read_prompt(prompt: str, pairs: tuple[TagPair, ...]) -> tuple[bool, TagPair | None]:
    """Where a rendered prompt leaves the output: (True, pair) when it ends in `pair`'s opening
    tag (whitespace after it aside); else (False, None), in the answer (an empty block closed, a
    generation prompt that opens nothing)."""
    tail = prompt[-PROMPT_TAIL:].rstrip()
    for pair in sorted(pairs, key=lambda p: -len(p.open)):
        if tail.endswith(pair.open):
            return True, pair
    return False, None


_BYTE_LEVEL = str.maketrans({"Ġ": " ", "Ċ": "\n", "ĉ": "\t", "▁": " "})


def tokens_text(strs: list[object]) -> str:
    """vLLM's `token_strs` as text: byte-level BPE's space and newline marks read as themselves."""
    return "".join(s for s in strs if isinstance(s, str)).translate(_BYTE_LEVEL)


def model_name(path: object) -> str | None:
    """A model's name from a file or repository path (`/models/DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf`:
    `DeepSeek-R1-Distill-Qwen-7B-Q4_K_M`), at most LONGEST characters."""
    if not isinstance(path, str) or not path.strip():
        return None
    name = path.strip().rstrip("/\\")
    base = re.split(r"[/\\]", name)[-1]
    if base.lower().endswith(".gguf"):
        base = base[:-5]
    # A Hugging Face repository (org/name) keeps its org; a file path, only its file's name.
    if "/" in name and not name.startswith(("/", ".", "~")) and name.count("/") == 1:
        base = name
    return base[:LONGEST] or None


def prefix_of(path: str) -> str:
    """The path prefix a server's own endpoints sit under (a gateway's `/llama`): what comes
    before `/v1/`, `/api/`, or the surface's path."""
    path = path.split("?", 1)[0]
    for mark in ("/v1/", "/api/", "/chat/completions", "/responses", "/messages"):
        at = path.find(mark)
        if at >= 0:
            return path[:at]
    return ""


def _json(answer: Answer | None) -> object:
    if answer is None or answer.status != 200:
        return None
    try:
        return json.loads(answer.body)
    except (ValueError, RecursionError):
        return None


class ServerStart:
    """The kept answers of servers about where their output starts."""

    def __init__(self, asker: Asker, pairs: Callable[[], tuple[TagPair, ...]],
                 clock: Callable[[], float] | None = None, ollama_show: OllamaShow | None = None) -> None:
        """`ollama_show`: capabilities.Capabilities.show (one kept /api/show answer for all
        that read it); without it Ollama servers are not asked."""
        self.asker, self._pairs, self._ollama_show = asker, pairs, ollama_show
        tick = clock or time.monotonic
        self._kinds: Kept[tuple[Server, str, str], _Kind] = Kept(
            KIND_TTL, KIND_FAILURE_TTL, SIZE, tick, max_bytes=MAX_BYTES, weigh=_weigh)
        self._told: Kept[tuple[Server, str, str, str, str | None, Shape], Told] = Kept(
            START_TTL, FAILURE_TTL, SIZE, tick, max_bytes=MAX_BYTES, weigh=_weigh)
        self.asked = 0   # asks started, of every kind (tests, the bench)

    def __len__(self) -> int:
        return len(self._told)

    @property
    def bytes(self) -> int:
        return self._kinds.bytes + self._told.bytes

    async def told(self, server: Server, path: str, surface: str, model: str | None, client: str,
                   shape: Shape, credentials: dict[str, str], route: Route = Route()) -> Told | None:
        """What the server says of this request's start; None when it cannot say."""
        prefix = prefix_of(path)
        if len(model or "") > LONGEST or len(server.host) > LONGEST or len(prefix) > LONGEST:
            return None

        def ask(method: str, where: str, body: object = None) -> Awaitable[Answer | None]:
            self.asked += 1
            raw = json.dumps(body).encode() if body is not None else None
            return self.asker.ask(server, method, prefix + where, raw, credentials, route)

        if surface == "ollama":
            if not model or self._ollama_show is None:
                return None
            got = await self._ollama_show(server, path, model, client, credentials, route)
            return self._from_show(got, shape.think) if got is not None else None

        async def find_kind() -> _Kind | None:
            return await self._find_kind(ask)
        kind = await self._kinds.get((server, prefix, client), find_kind)
        if kind is None:
            return None

        async def render() -> Told | None:
            return await self._render(kind, model, shape, ask)
        return await self._told.get((server, prefix, client, kind.kind, model, shape), render)

    async def _find_kind(self, ask: _Ask) -> _Kind | None:
        props = _json(await ask("GET", "/props"))
        if isinstance(props, dict) and ("chat_template" in props or "default_generation_settings" in props):
            return _Kind("llama-server", model_name(props.get("model_path")))
        models = _json(await ask("GET", "/v1/models"))
        data = models.get("data") if isinstance(models, dict) else None
        if isinstance(data, list):
            cards = [m for m in data[:LISTED] if isinstance(m, dict)]
            owners = {m.get("owned_by") for m in cards}
            if "vllm" in owners:
                return _Kind("vllm", None, tuple((m["id"], m["root"]) for m in cards if _name(m.get("id"))
                                                 and isinstance(m.get("root"), str)))
            if "sglang" in owners:
                # (Its `root` is the served name again: the model is /get_model_info's.)
                info = _json(await ask("GET", "/get_model_info"))
                return _Kind("sglang", model_name(info.get("model_path")) if isinstance(info, dict) else None)
        return await self._lmstudio(ask)

    async def _lmstudio(self, ask: _Ask) -> _Kind | None:
        """LM Studio, by its own lists: v1's models (`key`) with their loaded instances (`id`), else
        v0's (`id`, the key, beside LM Studio's own `state` or `compatibility_type`)."""
        got = _json(await ask("GET", "/api/v1/models"))
        listed = got.get("models") if isinstance(got, dict) else None
        if isinstance(listed, list):
            names: list[tuple[str, str]] = []
            for m in listed[:LISTED]:
                key = m.get("key") if isinstance(m, dict) else None
                if not isinstance(key, str) or not _name(key):
                    continue
                instances = m.get("loaded_instances")
                for i in instances[:LISTED] if isinstance(instances, list) else ():
                    alias = i.get("id") if isinstance(i, dict) else None
                    if isinstance(alias, str) and _name(alias):
                        names.append((alias, key))
                names.append((key, key))
            return _Kind("lmstudio", None, tuple(names[:LISTED]))
        got = _json(await ask("GET", "/api/v0/models"))
        data = got.get("data") if isinstance(got, dict) else None
        if isinstance(data, list):
            cards = [m for m in data[:LISTED] if isinstance(m, dict) and _name(m.get("id"))]
            if any("state" in m or "compatibility_type" in m for m in cards):
                return _Kind("lmstudio", None, tuple((m["id"], m["id"]) for m in cards))
        return None

    async def _render(self, kind: _Kind, model: str | None, shape: Shape, ask: _Ask) -> Told | None:
        real = kind.model
        if kind.kind in ("vllm", "lmstudio"):
            real = model_name(next((r for name, r in kind.roots if name == model), None))
        if kind.kind not in ("llama-server", "vllm"):
            return Told(kind.kind, model=real) if real else None
        messages = ([{"role": "system", "content": " ".join(shape.system)}] if shape.system else []) + \
            [{"role": "user", "content": QUESTION}] + \
            ([{"role": "assistant", "content": QUESTION}] if shape.after_assistant else [])
        body: dict[str, object] = {"messages": messages, "add_generation_prompt": True}
        if shape.kwargs:
            body["chat_template_kwargs"] = json.loads(shape.kwargs)
        if shape.effort is not None:
            body["reasoning_effort"] = shape.effort
        if kind.kind == "llama-server":
            got = _json(await ask("POST", "/apply-template", body))
            prompt = got.get("prompt") if isinstance(got, dict) else None
        else:
            body.update(model=model, return_token_strs=True)
            got = _json(await ask("POST", "/tokenize", body))
            strs = got.get("token_strs") if isinstance(got, dict) else None
            prompt = tokens_text(strs) if isinstance(strs, list) else None
        if not isinstance(prompt, str):
            return Told(kind.kind, model=real) if real else None
        inside, pair = read_prompt(prompt, self._pairs())
        return Told(kind.kind, inside, pair, real)

    def _from_show(self, shown: Shown, think: object) -> Told | None:
        """Ollama's /api/show (capabilities.Shown): the model's name from its model_info, and
        whether the prompt its template renders for this request's `think` (unset, false, true or
        a level) ends in an open block (thinkwire.gotemplate renders it). A template past what
        gotemplate renders is read by its literal end, where it does not read `.Think`: the
        text before its closing `{{ end }}`s (what is rendered when the last message is the
        user's)."""
        inside = pair = None
        if shown.ends is not None:
            end = shown.ends[0 if think is None else 1 if think is False else 2]
            if end is not None:
                inside, pair = read_prompt(end, self._pairs())
        elif isinstance(shown.template_tail, str):
            literal = re.sub(r"(?:\{\{-?\s*end\s*-?\}\}\s*)+$", "", shown.template_tail.rstrip())
            if literal and not literal.endswith("}}"):
                inside, pair = read_prompt(literal, self._pairs())
        if inside is None and shown.name is None:
            return None
        return Told("ollama", inside, pair, shown.name)


def _name(value: object) -> bool:
    """A model name (or key) as a list gives it: a string of at most LONGEST characters."""
    return isinstance(value, str) and 0 < len(value) <= LONGEST


def _weigh(key: tuple[object, ...], value: object) -> int:
    """Bytes a kept entry holds, near enough (its strings)."""
    size = 64
    for part in key:
        size += len(part) if isinstance(part, str) else 16
        if isinstance(part, Shape):
            size += len(part.kwargs) + sum(len(s) for s in part.system) + len(part.effort or "") + 16
    if isinstance(value, Told):
        size += len(value.model or "") + (len(value.pair.open) + len(value.pair.close) if value.pair else 0) + 32
    elif isinstance(value, _Kind):
        size += len(value.model or "") + sum(len(a) + len(b) for a, b in value.roots) + 32
    return size
