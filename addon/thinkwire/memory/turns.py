"""What the memory reads of a response and of a request, surface by surface: the assistant turn
(its text, its native reasoning, its tool call ids) as the upstream sent it and as the client
got it, and the assistant turns a request carries back.

A `Said` is one assistant turn of a response. Readers take a whole body (parsed JSON) or a
stream's events' data (parsed JSON objects, in order) and never raise on a shape they do not
know: they read less.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

JSON = dict[str, Any]


@dataclass
class Said:
    text: str = ""                   # the turn's text (chat/Ollama `content`)
    native: str = ""                 # reasoning in a field of its own
    native_field: str = ""           # which field
    ids: list[str] = field(default_factory=list)   # tool call ids, in order
    calls: list[Any] = field(default_factory=list)      # Ollama: the tool calls themselves (they have no ids)
    objects: list[Any] = field(default_factory=list)    # Messages thinking blocks, Responses reasoning items


CHAT_NATIVE = ("reasoning_content", "reasoning")


def _text(content: object) -> str:
    """A message's text: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _native(d: JSON, fields: tuple[str, ...], into: Said) -> None:
    for f in fields:
        v = d.get(f)
        if isinstance(v, str) and v:
            into.native += v
            into.native_field = into.native_field or f
            return


# -- chat completions -------------------------------------------------------------------------
def chat_body(obj: object) -> dict[int, Said]:
    out: dict[int, Said] = {}
    for i, ch in enumerate(obj.get("choices") or [] if isinstance(obj, dict) else []):
        msg = ch.get("message") if isinstance(ch, dict) else None
        if not isinstance(msg, dict):
            continue
        s = out.setdefault(ch.get("index", i) if isinstance(ch.get("index", i), int) else i, Said())
        s.text = _text(msg.get("content"))
        _native(msg, CHAT_NATIVE, s)
        s.ids = [c["id"] for c in msg.get("tool_calls") or [] if isinstance(c, dict) and isinstance(c.get("id"), str)]
    return out


def chat_stream(objs: Iterable[Any]) -> dict[int, Said]:
    out: dict[int, Said] = {}
    for obj in objs:
        for ch in obj.get("choices") or [] if isinstance(obj, dict) else []:
            delta = ch.get("delta") if isinstance(ch, dict) else None
            if not isinstance(delta, dict):
                continue
            idx = ch.get("index", 0)
            s = out.setdefault(idx if isinstance(idx, int) else 0, Said())
            c = delta.get("content")
            if isinstance(c, str):
                s.text += c
            _native(delta, CHAT_NATIVE, s)
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"]:
                    s.ids.append(call["id"])
    return out


def chat_request(obj: JSON) -> list[JSON]:
    """The request's assistant messages, newest first."""
    msgs = obj.get("messages")
    return [m for m in reversed(msgs) if isinstance(m, dict) and m.get("role") == "assistant"] \
        if isinstance(msgs, list) else []


def chat_ids(m: JSON) -> tuple[str, ...]:
    return tuple(c["id"] for c in m.get("tool_calls") or [] if isinstance(c, dict) and isinstance(c.get("id"), str))


def chat_kept(m: JSON) -> bool:
    """The client sent this turn's reasoning back itself."""
    return any(isinstance(m.get(f), str) and m.get(f) for f in CHAT_NATIVE)


# -- Ollama's native API -----------------------------------------------------------------------
def ollama_body(obj: object) -> dict[int, Said]:
    return ollama_stream([obj])


def ollama_stream(objs: Iterable[Any]) -> dict[int, Said]:
    s = Said()
    for obj in objs:
        msg = obj.get("message") if isinstance(obj, dict) else None
        if not isinstance(msg, dict):
            if isinstance(obj, dict) and isinstance(obj.get("response"), str):   # /api/generate
                s.text += obj["response"]
                _native(obj, ("thinking",), s)
            continue
        c = msg.get("content")
        if isinstance(c, str):
            s.text += c
        _native(msg, ("thinking",), s)
        calls = msg.get("tool_calls")
        if isinstance(calls, list):
            s.calls += calls
            s.ids += [c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)]
    return {0: s}


# -- Anthropic Messages (as the client got it: thinking blocks carry thinkwire's marks) -------------
REASONING_BLOCKS = ("thinking", "redacted_thinking")


def messages_body(obj: object) -> dict[int, Said]:
    s = Said()
    for b in obj.get("content") or [] if isinstance(obj, dict) else []:
        _message_block(b, s)
    return {0: s}


def _message_block(b: object, s: Said) -> None:
    if not isinstance(b, dict):
        return
    t = b.get("type")
    if t in REASONING_BLOCKS:
        s.objects.append(b)
    elif t == "text" and isinstance(b.get("text"), str):
        s.text += b["text"]
    elif t in ("tool_use", "server_tool_use") and isinstance(b.get("id"), str):
        s.ids.append(b["id"])


def messages_stream(objs: Iterable[Any]) -> dict[int, Said]:
    blocks: dict[int, JSON] = {}
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        t, i = obj.get("type"), obj.get("index")
        if t == "content_block_start" and isinstance(obj.get("content_block"), dict) and isinstance(i, int):
            blocks[i] = dict(obj["content_block"])
        elif t == "content_block_delta" and i in blocks and isinstance(obj.get("delta"), dict):
            d, b = obj["delta"], blocks[i]
            for part, into in (("thinking", "thinking"), ("signature", "signature"), ("text", "text")):
                if isinstance(d.get(part), str) and d.get("type") in (f"{part}_delta",):
                    b[into] = (b.get(into) or "") + d[part]
    return messages_body({"content": [blocks[i] for i in sorted(blocks)]})


def messages_request(obj: JSON) -> list[JSON]:
    msgs = obj.get("messages")
    return [m for m in reversed(msgs) if isinstance(m, dict) and m.get("role") == "assistant"] \
        if isinstance(msgs, list) else []


def messages_turn(m: JSON) -> Said:
    s = Said()
    c = m.get("content")
    if isinstance(c, str):
        s.text = c
    for b in c if isinstance(c, list) else []:
        _message_block(b, s)
    return s


# -- OpenAI Responses (as the client got it: reasoning items carry thinkwire's marks or ids) -------
def responses_body(obj: object) -> dict[int, Said]:
    return _responses_items(obj.get("output") if isinstance(obj, dict) else None)


def _responses_items(items: object) -> dict[int, Said]:
    s = Said()
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, dict):
            continue
        t = it.get("type")
        if t == "reasoning":
            s.objects.append({k: v for k, v in it.items() if k != "status"})
        elif t == "message":
            s.text += _text(it.get("content"))
        elif isinstance(t, str) and t.endswith("_call") and isinstance(it.get("call_id"), str):
            s.ids.append(it["call_id"])
    return {0: s}


def responses_stream(objs: Iterable[Any]) -> dict[int, Said]:
    done: dict[int, JSON] = {}
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        if obj.get("type") == "response.output_item.done" and isinstance(obj.get("item"), dict):
            i = obj.get("output_index")
            done[i if isinstance(i, int) else len(done)] = obj["item"]
        elif obj.get("type") in ("response.completed", "response.incomplete") and not done:
            return responses_body(obj.get("response"))
    return _responses_items([done[i] for i in sorted(done)])
