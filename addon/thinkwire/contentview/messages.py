"""Reading Anthropic Messages (`/v1/messages`): bodies, streams,
requests (a row of thinkwire.contentview.read's READERS)."""

from __future__ import annotations

from typing import Any

from .reading import Readers, Reading, Section, add, content_text, obj_of, pretty_args, str_of, usage_line


def _messages_block(b: dict[str, Any], secs: list[Section]) -> None:
    t = b.get("type")
    if t == "thinking":
        add(secs, "reasoning", str_of(b.get("thinking")))
        if b.get("signature"):
            secs.append(Section("note", f"signature: {len(b['signature'])} chars"))
    elif t == "redacted_thinking":
        secs.append(Section("reasoning (redacted)", f"{len(str_of(b.get('data')))} chars of data"))
    elif t == "text":
        add(secs, "answer", str_of(b.get("text")))
    elif t in ("tool_use", "server_tool_use"):
        label = " · ".join(x for x in (str_of(b.get("name")), str_of(b.get("id"))) if x)
        secs.append(Section("tool call", pretty_args(b.get("input")), label))
    elif isinstance(t, str):
        secs.append(Section("block", pretty_args(b), t))


def _messages_body(obj: dict[str, Any], r: Reading) -> None:
    r.head += [("model", str_of(obj.get("model"))), ("id", str_of(obj.get("id")))]
    secs = r.group()
    for b in obj.get("content") or []:
        if isinstance(b, dict):
            _messages_block(b, secs)
    _messages_tail(obj.get("stop_reason"), obj.get("stop_sequence"), obj.get("usage"), r)


def _messages_tail(stop: Any, seq: Any, usage: Any, r: Reading) -> None:
    if stop is not None:
        r.tail.append(("stop reason", str(stop) + (f" ({seq!r})" if seq else "")))
    if usage_line(usage):
        r.tail.append(("usage", usage_line(usage)))


def _messages_stream(events: list[Any], r: Reading) -> None:
    blocks: dict[Any, dict[str, Any]] = {}     # index -> block as accumulated
    order: list[int] = []
    msg: dict[str, Any] = {}
    stop = seq = None
    usage: dict[str, Any] = {}
    errors = []
    b: dict[str, Any] | None
    for name, obj in events:
        if not isinstance(obj, dict):
            continue
        t = obj.get("type") or name
        if t == "message_start" and isinstance(obj.get("message"), dict):
            msg = obj["message"]
            if isinstance(msg.get("usage"), dict):
                usage.update(msg["usage"])
        elif t == "content_block_start" and isinstance(obj.get("content_block"), dict):
            idx = obj.get("index", len(order))
            b = dict(obj["content_block"])
            if b.get("type") in ("tool_use", "server_tool_use"):
                b["_json"] = ""
            if idx not in blocks:
                order.append(idx)
            blocks[idx] = b
        elif t == "content_block_delta" and isinstance(obj.get("delta"), dict):
            b = blocks.get(obj.get("index"))
            if b is None:
                continue
            d = obj["delta"]
            dt = d.get("type")
            if dt == "thinking_delta":
                b["thinking"] = str_of(b.get("thinking")) + str_of(d.get("thinking"))
            elif dt == "text_delta":
                b["text"] = str_of(b.get("text")) + str_of(d.get("text"))
            elif dt == "signature_delta":
                b["signature"] = str_of(d.get("signature"))
            elif dt == "input_json_delta":
                b["_json"] = str_of(b.get("_json")) + str_of(d.get("partial_json"))
        elif t == "message_delta":
            d = obj_of(obj.get("delta"))
            stop, seq = d.get("stop_reason", stop), d.get("stop_sequence", seq)
            if isinstance(obj.get("usage"), dict):
                usage.update(obj["usage"])
        elif t == "error":
            errors.append(Section("error", pretty_args(obj.get("error", obj))))
    r.head += [("model", str_of(msg.get("model"))), ("id", str_of(msg.get("id")))]
    secs = r.group()
    for idx in order:
        b = blocks[idx]
        if "_json" in b:
            b["input"] = b.pop("_json") or b.get("input")
        _messages_block(b, secs)
    secs.extend(errors)
    _messages_tail(stop, seq, usage, r)


def _messages_request(obj: dict[str, Any], r: Reading) -> None:
    system = obj.get("system")
    if system:
        add(r.group("system"), "text", content_text(system))
    for i, m in enumerate(obj.get("messages") or []):
        if not isinstance(m, dict):
            continue
        secs = r.group(f"#{i} {m.get('role', '?')}")
        content = m.get("content")
        if isinstance(content, str):
            add(secs, "text", content)
            continue
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                add(secs, "text", str_of(b.get("text")))
            elif b.get("type") == "tool_result":
                secs.append(Section("tool result", content_text(b.get("content")), str_of(b.get("tool_use_id"))))
            else:
                _messages_block(b, secs)


READERS = {"messages": Readers(_messages_body, _messages_stream, _messages_request)}
