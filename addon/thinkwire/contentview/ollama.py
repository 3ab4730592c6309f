"""Reading Ollama's native API (`/api/chat`, `/api/generate`): bodies, NDJSON streams, requests.
One row of thinkwire.contentview.read's READERS, written with its helpers."""

from __future__ import annotations

from .read import Readers, Reading, Section, _add, _args, _function_calls, _s, _usage

_OLLAMA_METRICS = ("prompt_eval_count", "eval_count", "total_duration", "load_duration", "prompt_eval_duration",
                   "eval_duration")


def _ollama_text(obj: dict, secs: list[Section]) -> None:
    """One response object (a body, or a stream line): its thinking, its text, its tool calls."""
    holder = obj.get("message") if isinstance(obj.get("message"), dict) else obj
    _add(secs, "reasoning", _s(holder.get("thinking")))
    _add(secs, "answer", _s(holder.get("content") if holder is not obj else obj.get("response")))
    _function_calls(secs, holder.get("tool_calls"))


def _ollama_tail(last: dict, r: Reading) -> None:
    if last.get("done_reason"):
        r.tail.append(("done reason", str(last["done_reason"])))
    if _usage({k: last[k] for k in _OLLAMA_METRICS if k in last}):
        r.tail.append(("usage", _usage({k: last[k] for k in _OLLAMA_METRICS if k in last})))


def _ollama_body(obj: dict, r: Reading) -> None:
    r.head += [("model", _s(obj.get("model"))), ("created at", _s(obj.get("created_at")))]
    _ollama_text(obj, r.group())
    _ollama_tail(obj, r)


def _ollama_stream(events: list, r: Reading) -> None:
    secs = r.group()
    last: dict = {}
    for _, obj in events:
        if not isinstance(obj, dict):
            continue
        if "error" in obj and not ("message" in obj or "response" in obj):
            secs.append(Section("error", _s(obj["error"]) or _args(obj["error"])))
            continue
        if not last:
            r.head += [("model", _s(obj.get("model"))), ("created at", _s(obj.get("created_at")))]
        last = obj
        _ollama_text(obj, secs)
    _ollama_tail(last, r)


def _ollama_request(obj: dict, r: Reading) -> None:
    if isinstance(obj.get("system"), str) and obj["system"]:
        _add(r.group("system"), "text", obj["system"])
    if isinstance(obj.get("prompt"), str):
        _add(r.group("#0 user"), "text", obj["prompt"])
    for i, m in enumerate(obj.get("messages") or []):
        if not isinstance(m, dict):
            continue
        secs = r.group(f"#{i} {m.get('role', '?')}")
        _add(secs, "reasoning", _s(m.get("thinking")))
        _add(secs, "tool result" if m.get("role") == "tool" else "text", _s(m.get("content")), _s(m.get("tool_name")))
        if m.get("images"):
            secs.append(Section("note", f"{len(m['images'])} image(s)"))
        _ollama_text({"message": {"tool_calls": m.get("tool_calls")}}, secs)


READERS = {"ollama": Readers(_ollama_body, _ollama_stream, _ollama_request)}
