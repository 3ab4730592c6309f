"""Reading Ollama's native API (`/api/chat`, `/api/generate`): bodies, NDJSON streams, requests.
A row of thinkwire.contentview.read's READERS."""

from __future__ import annotations

from typing import Any

from .reading import Readers, Reading, Section, add, function_calls, pretty_args, str_of, usage_line

_OLLAMA_METRICS = ("prompt_eval_count", "eval_count", "total_duration", "load_duration", "prompt_eval_duration",
                   "eval_duration")


def _ollama_text(obj: dict[str, Any], secs: list[Section]) -> None:
    """One response object (a body, or a stream line): its thinking, its text, its tool calls."""
    holder: dict[str, Any] = obj["message"] if isinstance(obj.get("message"), dict) else obj
    add(secs, "reasoning", str_of(holder.get("thinking")))
    add(secs, "answer", str_of(holder.get("content") if holder is not obj else obj.get("response")))
    function_calls(secs, holder.get("tool_calls"))


def _ollama_tail(last: dict[str, Any], r: Reading) -> None:
    if last.get("done_reason"):
        r.tail.append(("done reason", str(last["done_reason"])))
    if usage_line({k: last[k] for k in _OLLAMA_METRICS if k in last}):
        r.tail.append(("usage", usage_line({k: last[k] for k in _OLLAMA_METRICS if k in last})))


def _ollama_body(obj: dict[str, Any], r: Reading) -> None:
    r.head += [("model", str_of(obj.get("model"))), ("created at", str_of(obj.get("created_at")))]
    _ollama_text(obj, r.group())
    _ollama_tail(obj, r)


def _ollama_stream(events: list[Any], r: Reading) -> None:
    secs = r.group()
    last: dict[str, Any] = {}
    for _, obj in events:
        if not isinstance(obj, dict):
            continue
        if "error" in obj and not ("message" in obj or "response" in obj):
            secs.append(Section("error", str_of(obj["error"]) or pretty_args(obj["error"])))
            continue
        if not last:
            r.head += [("model", str_of(obj.get("model"))), ("created at", str_of(obj.get("created_at")))]
        last = obj
        _ollama_text(obj, secs)
    _ollama_tail(last, r)


def _ollama_request(obj: dict[str, Any], r: Reading) -> None:
    if isinstance(obj.get("system"), str) and obj["system"]:
        add(r.group("system"), "text", obj["system"])
    if isinstance(obj.get("prompt"), str):
        add(r.group("#0 user"), "text", obj["prompt"])
    for i, m in enumerate(obj.get("messages") or []):
        if not isinstance(m, dict):
            continue
        secs = r.group(f"#{i} {m.get('role', '?')}")
        add(secs, "reasoning", str_of(m.get("thinking")))
        add(secs, "tool result" if m.get("role") == "tool" else "text", str_of(m.get("content")), str_of(m.get("tool_name")))
        if m.get("images"):
            secs.append(Section("note", f"{len(m['images'])} image(s)"))
        _ollama_text({"message": {"tool_calls": m.get("tool_calls")}}, secs)


READERS = {"ollama": Readers(_ollama_body, _ollama_stream, _ollama_request)}
