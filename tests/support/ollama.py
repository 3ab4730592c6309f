"""Ollama's native API as Ollama writes it, for the tests: lines, bodies, and a scripted server.

Taken from Ollama's source (api/types.go, server/routes.go, read for facts): a response object's
fields come in the order of its Go struct (`model`, `created_at`, `message` {`role`, `content`,
`thinking`, `tool_calls`} or `response`, `thinking`, then `done`, `done_reason`, `context`, the
metrics); empty optional fields are left out (`omitempty`), `content` never; JSON is written by
Go's encoding/json, which escapes `<`, `>` and `&` (`\\u003c` ...); `created_at` is RFC 3339 in
UTC with nanoseconds, trailing zeros dropped. A stream is `application/x-ndjson`, one object and
a newline per token, the last `done: true` with the timings (generate: and `context`). A body
(`stream: false`) is the last object with every token's text joined. An error before the first
byte is a status with `{"error": "..."}`; after it, an `{"error": "..."}` line. A model whose
template does not read `thinking` answers a truthy `think` with 400 `"NAME" does not support
thinking`; its `/api/show` lists its capabilities.
"""

from __future__ import annotations

import json
from typing import Callable

from harness import Reply, Seen

NDJSON = "application/x-ndjson"
JSON = "application/json; charset=utf-8"
_GO = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})
METRICS = {"total_duration": 4_883_583_458, "load_duration": 1_019_500, "prompt_eval_count": 26,
           "prompt_eval_duration": 342_546_000, "eval_count": 282, "eval_duration": 4_535_599_000}


def go_json(obj: object) -> str:
    """json.Marshal's bytes for `obj` (key order as given)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).translate(_GO)


def created_at(n: int) -> str:
    """The n-th token's timestamp, as Go's time.Time marshals (nanoseconds, zeros trimmed)."""
    frac = f"{123_456_789 + n * 5_003_117:09d}"[-9:].rstrip("0")
    return f"2025-08-20T13:48:{24 + n // 400:02d}.{frac or '0'}Z"


def line(obj: dict) -> bytes:
    return (go_json(obj) + "\n").encode("utf-8", "surrogateescape")


def _message(content: str, thinking: str = "", tool_calls: list | None = None) -> dict:
    m: dict = {"role": "assistant", "content": content}
    if thinking:
        m["thinking"] = thinking
    if tool_calls:
        m["tool_calls"] = tool_calls
    return m


def tool_call(name: str, arguments: dict, index: int = 0, call_id: str = "call_1") -> dict:
    return {"id": call_id, "function": {"index": index, "name": name, "arguments": arguments}}


def chat_objs(model: str, deltas: list[str], thinking: list[str] = (), tool_calls: list | None = None,
              done_reason: str = "stop") -> list[dict]:
    """A chat stream's objects: native thinking tokens (a model Ollama splits itself), text
    tokens, a tool call line, the final line."""
    objs = []
    for t in thinking:
        objs.append({"model": model, "created_at": "", "message": _message("", t), "done": False})
    for t in deltas:
        objs.append({"model": model, "created_at": "", "message": _message(t), "done": False})
    if tool_calls:
        objs.append({"model": model, "created_at": "", "message": _message("", "", tool_calls), "done": False})
    objs.append({"model": model, "created_at": "", "message": _message(""), "done": True,
                 "done_reason": done_reason, **METRICS})
    for n, o in enumerate(objs):
        o["created_at"] = created_at(n)
    return objs


def generate_objs(model: str, deltas: list[str], thinking: list[str] = (), done_reason: str = "stop") -> list[dict]:
    objs = []
    for t in thinking:
        objs.append({"model": model, "created_at": "", "response": "", "thinking": t, "done": False})
    for t in deltas:
        objs.append({"model": model, "created_at": "", "response": t, "done": False})
    objs.append({"model": model, "created_at": "", "response": "", "done": True, "done_reason": done_reason,
                 "context": [105, 2364, 107, 4377], **METRICS})
    for n, o in enumerate(objs):
        o["created_at"] = created_at(n)
    return objs


def stream_bytes(objs: list[dict]) -> list[bytes]:
    """One chunk per line, as Ollama flushes them."""
    return [line(o) for o in objs]


def body_of(objs: list[dict]) -> dict:
    """The `stream: false` body: the last object, with every token's text and thinking joined
    and the tool calls gathered (server/routes.go writeChatResponse, GenerateHandler)."""
    last = dict(objs[-1])
    if "message" in last:
        text = "".join(o["message"]["content"] for o in objs)
        thinking = "".join(o["message"].get("thinking", "") for o in objs)
        calls = [c for o in objs for c in o["message"].get("tool_calls", [])]
        last["message"] = _message(text, thinking, calls)
    else:
        text = "".join(o["response"] for o in objs)
        thinking = "".join(o.get("thinking", "") for o in objs)
        last = {k: v for k, v in last.items() if k != "thinking"}
        out = {}
        for k, v in last.items():
            out[k] = text if k == "response" else v
            if k == "response" and thinking:
                out["thinking"] = thinking
        last = out
    return last


def reply(objs: list[dict], stream: bool) -> Reply:
    if stream:
        return Reply(200, {"content-type": NDJSON}, stream_bytes(objs))
    return Reply(200, {"content-type": JSON}, [go_json(body_of(objs)).encode()], chunked=False)


def error_reply(status: int, message: str) -> Reply:
    return Reply(status, {"content-type": JSON}, [go_json({"error": message}).encode()], chunked=False)


# -- a scripted Ollama ---------------------------------------------------------------------------
class StrictOllama:
    """An Ollama server with scripted models. `models` maps a name to its turns: the raw text the
    model writes each turn (markup included); a name in `native` is a model whose template reads
    thinking, which Ollama splits itself (its turns' `<think>` blocks come out as `thinking`).
    Like Ollama, it answers a truthy `think` for any other model with 400, drops the `thinking` an
    assistant turn carries back for such a model (it checks that the turn, as it reads without
    it, is what the model wrote; `exact`: byte for byte), answers /api/show with the
    capabilities, and records requests."""

    def __init__(self, models: dict[str, list[str]], native: tuple[str, ...] = (), piece: int = 4,
                 exact: bool = False) -> None:
        self.models, self.native, self.piece, self.exact = models, set(native), piece, exact
        self.bodies: list[dict] = []      # /api/chat and /api/generate requests, parsed
        self.shows: list[dict] = []       # /api/show requests
        self.errors: list[str] = []
        self.show: Callable[[dict], Reply] | None = None   # a scripted /api/show answer instead
        self.template = "{{ .Prompt }}"   # what /api/show says the models' template is

    def handle(self, seen: Seen) -> Reply:
        path = seen.path.split("?", 1)[0]
        req = seen.json()
        if path.endswith("/api/show"):
            self.shows.append(req)
            if self.show is not None:
                return self.show(req)
            name = req.get("model") or req.get("name")
            if name not in self.models:
                return error_reply(404, f"model '{name}' not found")
            caps = ["completion", "tools"] + (["thinking"] if name in self.native else [])
            return Reply(200, {"content-type": JSON}, [go_json(
                {"modelfile": "# Modelfile", "template": self.template, "details": {"format": "gguf"},
                 "model_info": {}, "capabilities": caps}).encode()], chunked=False)
        self.bodies.append(req)
        name = req.get("model")
        if name not in self.models:
            return error_reply(404, f"model '{name}' not found")
        think = req.get("think")
        asks = think is True or isinstance(think, str)
        if asks and name not in self.native:
            return self._error(400, f'"{name}" does not support thinking')
        problem = self._check_history(name, req.get("messages") or [])
        if problem:
            return self._error(400, problem)
        # The turn: how many the model has had in this conversation (generate: its first).
        n = sum(1 for m in req.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")
        turns = self.models[name]
        if n >= len(turns):
            return self._error(400, "the script has no more turns")
        text = turns[n]
        thinking: list[str] = []
        if name in self.native and think is not False and text.startswith("<think>") and "</think>" in text:
            inner, text = text[len("<think>"):].split("</think>", 1)
            thinking = self._pieces(inner.strip())
            text = text.lstrip()
        deltas = self._pieces(text)
        stream = req.get("stream") is not False
        if path.endswith("/api/generate"):
            return reply(generate_objs(name, deltas, thinking), stream)
        return reply(chat_objs(name, deltas, thinking), stream)

    def _pieces(self, text: str) -> list[str]:
        return [text[k:k + self.piece] for k in range(0, len(text), self.piece)]

    def _check_history(self, name: str, messages: list) -> str | None:
        """An earlier assistant turn must read as the model wrote it, once the upstream has done
        what Ollama does with it: for a model without native thinking, `thinking` is dropped."""
        k = 0
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") != "assistant":
                continue
            content = m.get("content") or ""
            if name in self.native and m.get("thinking"):
                content = f"<think>{m['thinking']}</think>{content}"
            want = self.models[name][k] if k < len(self.models[name]) else None
            if want is not None and (content != want if self.exact else _squash(content) != _squash(want)):
                return f"messages.{i}: assistant turn reads {content!r}, the model wrote {want!r}"
            k += 1
        return None

    def _error(self, status: int, message: str) -> Reply:
        self.errors.append(message)
        return error_reply(status, message)


def _squash(s: str) -> str:
    """Text compared modulo the whitespace thinkwire trims at block edges."""
    import re
    return re.sub(r"\s*(</?think>)\s*", r"\1", s).strip()
