"""Reading the Responses API (`/responses`): bodies, streams,
requests (a row of thinkwire.contentview.read's READERS)."""

from __future__ import annotations

import json
from typing import Any

from .reading import Readers, Reading, Section, add, content_text, pretty_args, str_of, usage_line


def _responses_item(item: dict[str, Any], secs: list[Section]) -> None:
    t = item.get("type")
    if t == "reasoning":
        own: list[Section] = []
        for p in item.get("summary") or []:
            if isinstance(p, dict):
                add(own, "reasoning summary", str_of(p.get("text")))
        for p in item.get("content") or []:
            if isinstance(p, dict):
                add(own, "reasoning", str_of(p.get("text")))
        secs += _once(own)
        if item.get("encrypted_content"):
            secs.append(Section("note", f"encrypted_content: {len(item['encrypted_content'])} chars"))
    elif t == "message":
        content = item.get("content")
        if isinstance(content, str):
            add(secs, "answer", content)
        for p in content if isinstance(content, list) else []:
            if isinstance(p, dict):
                if p.get("type") == "refusal":
                    add(secs, "refusal", str_of(p.get("refusal")))
                else:
                    add(secs, "answer", str_of(p.get("text")))
    elif t in ("function_call", "custom_tool_call"):
        label = " · ".join(x for x in (str_of(item.get("name")), str_of(item.get("call_id"))) if x)
        secs.append(Section("tool call", pretty_args(item.get("arguments", item.get("input"))), label))
    elif isinstance(t, str):
        secs.append(Section("item", pretty_args({k: v for k, v in item.items() if k != "id"}), t))


def _responses_body(obj: dict[str, Any], r: Reading) -> None:
    r.head += [("model", str_of(obj.get("model"))), ("id", str_of(obj.get("id"))),
               ("status", str_of(obj.get("status")))]
    secs = r.group()
    for item in obj.get("output") or []:
        if isinstance(item, dict):
            _responses_item(item, secs)
    _responses_tail(obj, r)


def _responses_tail(obj: dict[str, Any], r: Reading) -> None:
    inc = obj.get("incomplete_details")
    if isinstance(inc, dict) and inc.get("reason"):
        r.tail.append(("incomplete", str(inc["reason"])))
    if isinstance(obj.get("error"), dict):
        r.tail.append(("error", str_of(obj["error"].get("message")) or json.dumps(obj["error"])))
    if usage_line(obj.get("usage")):
        r.tail.append(("usage", usage_line(obj.get("usage"))))


def _once(secs: list[Section]) -> list[Section]:
    """One reasoning item's sections, its text shown once when its summary repeats its content
    word for word (thinkwire puts the reasoning in both by default)."""
    def text(kind: str) -> str:
        return "".join(x.text for x in secs if x.kind == kind)
    summary = text("reasoning summary")
    if not summary or summary != text("reasoning"):
        return secs
    return [Section("reasoning", summary)] + [x for x in secs if x.kind not in ("reasoning", "reasoning summary")]


_RESPONSES_DELTAS = {
    "response.reasoning_text.delta": "reasoning",
    "response.reasoning_summary_text.delta": "reasoning summary",
    "response.output_text.delta": "answer",
    "response.refusal.delta": "refusal",
}


def _responses_stream(events: list[Any], r: Reading) -> None:
    items: dict[int, dict[str, Any]] = {}           # output_index -> {"item": added item, "secs": [...]}
    final: dict[str, Any] | None = None
    for _, obj in events:
        if not isinstance(obj, dict):
            continue
        t = str_of(obj.get("type"))
        oi = obj.get("output_index")
        if t in ("response.created", "response.in_progress", "response.completed",
                 "response.incomplete", "response.failed"):
            if isinstance(obj.get("response"), dict):
                final = obj["response"]
            continue
        if t == "error":
            r.group().append(Section("error", pretty_args({k: v for k, v in obj.items() if k != "type"})))
            continue
        if not isinstance(oi, int):
            continue
        slot = items.setdefault(oi, {"item": {}, "secs": [], "deltas": False})
        secs = slot["secs"]
        if t == "response.output_item.added" and isinstance(obj.get("item"), dict):
            slot["item"] = obj["item"]
        elif t in _RESPONSES_DELTAS:
            slot["deltas"] = True
            add(secs, _RESPONSES_DELTAS[t], str_of(obj.get("delta")))
        elif t == "response.output_item.done" and isinstance(obj.get("item"), dict):
            slot["item"] = obj["item"]
            if not slot["deltas"]:  # items without text deltas: tool calls, whole items
                _responses_item(obj["item"], secs)
                slot["deltas"] = True
    if final:
        r.head += [("model", str_of(final.get("model"))), ("id", str_of(final.get("id"))),
                   ("status", str_of(final.get("status")))]
    out = r.group()
    for oi in sorted(items):
        slot = items[oi]
        if not slot["deltas"] and slot["item"]:
            _responses_item(slot["item"], slot["secs"])
        for s in _once(slot["secs"]):
            add(out, s.kind, s.text, s.label) if s.kind in ("reasoning", "answer") else out.append(s)
    if not items and final and final.get("output"):  # a stream with only the final event
        for item in final["output"]:
            if isinstance(item, dict):
                _responses_item(item, out)
    if final:
        _responses_tail(final, r)


def _responses_request(obj: dict[str, Any], r: Reading) -> None:
    if isinstance(obj.get("instructions"), str):
        add(r.group("instructions"), "text", obj["instructions"])
    inp = obj.get("input")
    if isinstance(inp, str):
        add(r.group("#0 user"), "text", inp)
        return
    for i, item in enumerate(inp if isinstance(inp, list) else []):
        if not isinstance(item, dict):
            continue
        t = item.get("type") or ("message" if "role" in item else "?")
        if t == "message":
            add(r.group(f"#{i} {item.get('role', '?')}"), "text", content_text(item.get("content")))
        elif t == "function_call_output":
            add(r.group(f"#{i} tool result"), "tool result", content_text(item.get("output")),
                 str_of(item.get("call_id")))
        else:
            _responses_item(item, r.group(f"#{i} {t}"))


READERS = {"responses": Readers(_responses_body, _responses_stream, _responses_request)}
