"""Reading LLM requests and responses as a person reads them: a `Reading` of sections (model,
reasoning, answer, tool calls, finish reason, usage) from any surface's JSON body or stream (SSE;
Ollama's NDJSON).
It parses the wire format generically (not with the rewriters), so it shows what the bytes say,
whoever produced them. One row of readers per surface (`READERS`); which surface a body or a
path belongs to is decided by the surfaces' own `matches` / `looks_like`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import engine
from ..ndjson import NDJSONParser
from ..sse import SSEParser


# -- the reader's model of a response -----------------------------------------------------
@dataclass
class Section:
    kind: str              # "reasoning", "answer", "tool call", "refusal", "note", ...
    text: str
    label: str = ""        # e.g. the tool's name and call id


@dataclass
class Reading:
    surface: str = ""
    streamed: bool = False
    events: int = 0
    head: list[tuple[str, str]] = field(default_factory=list)      # model, id, status ...
    groups: list[tuple[str, list[Section]]] = field(default_factory=list)  # per choice
    tail: list[tuple[str, str]] = field(default_factory=list)      # finish reason, usage ...

    def group(self, name: str = "") -> list[Section]:
        for n, secs in self.groups:
            if n == name:
                return secs
        secs: list[Section] = []
        self.groups.append((name, secs))
        return secs


def _add(secs: list[Section], kind: str, text: str, label: str = "") -> None:
    """Append text, merging with the previous section when it is the same kind and label."""
    if not text:
        return
    if secs and secs[-1].kind == kind and secs[-1].label == label:
        secs[-1].text += text
    else:
        secs.append(Section(kind, text, label))


def _s(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _args(raw: Any) -> str:
    """Tool arguments, pretty-printed when they are JSON."""
    if isinstance(raw, (dict, list)):
        return json.dumps(raw, indent=2, ensure_ascii=False)
    if not isinstance(raw, str):
        return "" if raw is None else str(raw)
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except ValueError:
        return raw


def _usage(u: Any) -> str:
    if not isinstance(u, dict):
        return ""
    parts = []
    for k, v in u.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"{k}={v}")
        elif isinstance(v, dict):
            inner = [f"{k}.{k2}={v2}" for k2, v2 in v.items()
                     if isinstance(v2, (int, float)) and not isinstance(v2, bool) and v2]
            parts.extend(inner)
    return " ".join(parts)


# -- detecting the surface: the surfaces' own rules -------------------------------------------
def surface_of_path(path: str) -> str | None:
    for name, surface in engine.SURFACES.items():
        if surface.matches(path):
            return name
    return None


def _surface_of(obj: dict) -> str | None:
    """The surface whose body or stream event this is (each surface's own `looks_like`)."""
    for name, surface in engine.SURFACES.items():
        if surface.looks_like(obj):
            return name
    return None


def _events(data: bytes, ndjson: bool = False) -> list[tuple[str | None, Any]]:
    """(event name, parsed JSON or the raw data string) for every SSE event (NDJSON line) with data."""
    p = NDJSONParser() if ndjson else SSEParser()
    out = []
    for ev in p.feed(data) + p.finish():
        if ev.data is None:
            continue
        try:
            out.append((ev.event, json.loads(ev.data)))
        except ValueError:
            out.append((ev.event, ev.data))
    return out


def is_sse(data: bytes, content_type: str | None) -> bool:
    if content_type:
        return content_type == "text/event-stream"
    head = data.lstrip()[:16]
    return head.startswith((b"data:", b"event:", b":"))


def is_ndjson(data: bytes, content_type: str | None) -> bool:
    """Ollama's streams: `application/x-ndjson`, or (no type, or the `application/json` some servers
    send them as) several lines of JSON objects."""
    if content_type not in (None, "application/json", "application/x-ndjson"):
        return False
    if content_type == "application/x-ndjson":
        return True
    lines = data.strip().split(b"\n", 2)
    if len(lines) < 2 or not lines[0].startswith(b"{"):
        return False
    try:
        json.loads(lines[0])
        return True
    except ValueError:
        return False


# -- responses: JSON bodies --------------------------------------------------------------------
def read_response(data: bytes, surface: str | None = None, content_type: str | None = None) -> Reading:
    """Parse a response body or stream of any surface. Raises ValueError when it is neither."""
    ndjson = is_ndjson(data, content_type)
    if ndjson or is_sse(data, content_type):
        events = _events(data, ndjson)
        if not surface:
            for _, obj in events:
                if isinstance(obj, dict) and (surface := _surface_of(obj)):
                    break
        readers = READERS.get(surface or "")
        if readers is None:
            raise ValueError("not an LLM event stream thinkwire knows")
        r = Reading(surface or "", True, len(events))
        readers.stream(events, r)
        return r
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    surface = _surface_of(obj) or surface
    readers = READERS.get(surface or "")
    if readers is None:
        raise ValueError("not an LLM response thinkwire knows")
    r = Reading(surface or "")
    readers.body(obj, r)
    return r


def _chat_body(obj: dict, r: Reading) -> None:
    r.head += [("model", _s(obj.get("model"))), ("id", _s(obj.get("id")))]
    choices = [c for c in obj["choices"] if isinstance(c, dict)]
    for ch in choices:
        name = f"choice {ch.get('index', 0)}" if len(choices) > 1 else ""
        secs = r.group(name)
        msg = ch.get("message") if isinstance(ch.get("message"), dict) else {}
        _chat_delta(msg, secs, {})
        if ch.get("finish_reason") is not None:
            r.tail.append((f"{name} finish reason".strip(), str(ch["finish_reason"])))
    if _usage(obj.get("usage")):
        r.tail.append(("usage", _usage(obj.get("usage"))))
    _pretty_tools(r)


def _chat_delta(d: dict, secs: list[Section], tools: dict) -> None:
    """One message or delta: reasoning, then answer, then tool calls (by index)."""
    for k in ("reasoning_content", "reasoning"):
        if isinstance(d.get(k), str) and d[k]:
            _add(secs, "reasoning", d[k])
            break
    _add(secs, "answer", _s(d.get("content")))
    _add(secs, "refusal", _s(d.get("refusal")))
    for tc in d.get("tool_calls") or []:
        if not isinstance(tc, dict):
            continue
        idx = tc.get("index", len(tools))
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        sec = tools.get(idx)
        if sec is None:
            sec = tools[idx] = Section("tool call", "", "")
            secs.append(sec)
        name, cid = _s(fn.get("name")), _s(tc.get("id"))
        if name or cid:
            old_name, _, old_id = sec.label.partition(" · ")
            sec.label = f"{name or old_name} · {cid or old_id}".strip(" ·")
        args = fn.get("arguments")
        sec.text += args if isinstance(args, str) else _args(args)


def _chat_stream(events: list, r: Reading) -> None:
    tools: dict[int, dict] = {}
    model = rid = ""
    finish: dict[int, str] = {}
    usage = ""
    indices: set = set()
    for _, obj in events:
        if not isinstance(obj, dict):
            continue
        model = model or _s(obj.get("model"))
        rid = rid or _s(obj.get("id"))
        if _usage(obj.get("usage")):
            usage = _usage(obj.get("usage"))
        for ch in obj.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            idx = ch.get("index", 0)
            indices.add(idx)
            secs = r.group(f"choice {idx}")
            d = ch.get("delta") if isinstance(ch.get("delta"), dict) else {}
            _chat_delta(d, secs, tools.setdefault(idx, {}))
            if ch.get("finish_reason") is not None:
                finish[idx] = str(ch["finish_reason"])
        if isinstance(obj.get("error"), dict):
            r.group("").append(Section("error", _args(obj["error"])))
    if len(indices) <= 1:  # one choice: no "choice 0" headings
        r.groups = [("", secs) for _, secs in r.groups]
    r.head += [("model", model), ("id", rid)]
    for idx in sorted(finish):
        r.tail.append(("finish reason" if len(indices) <= 1 else f"choice {idx} finish reason", finish[idx]))
    if usage:
        r.tail.append(("usage", usage))
    _pretty_tools(r)


def _pretty_tools(r: Reading) -> None:
    for _, secs in r.groups:
        for s in secs:
            if s.kind == "tool call":
                s.text = _args(s.text)


# -- Responses ----------------------------------------------------------------------------------
def _responses_item(item: dict, secs: list[Section]) -> None:
    t = item.get("type")
    if t == "reasoning":
        own: list[Section] = []
        for p in item.get("summary") or []:
            if isinstance(p, dict):
                _add(own, "reasoning summary", _s(p.get("text")))
        for p in item.get("content") or []:
            if isinstance(p, dict):
                _add(own, "reasoning", _s(p.get("text")))
        secs += _once(own)
        if item.get("encrypted_content"):
            secs.append(Section("note", f"encrypted_content: {len(item['encrypted_content'])} chars"))
    elif t == "message":
        content = item.get("content")
        if isinstance(content, str):
            _add(secs, "answer", content)
        for p in content if isinstance(content, list) else []:
            if isinstance(p, dict):
                if p.get("type") == "refusal":
                    _add(secs, "refusal", _s(p.get("refusal")))
                else:
                    _add(secs, "answer", _s(p.get("text")))
    elif t in ("function_call", "custom_tool_call"):
        label = " · ".join(x for x in (_s(item.get("name")), _s(item.get("call_id"))) if x)
        secs.append(Section("tool call", _args(item.get("arguments", item.get("input"))), label))
    elif isinstance(t, str):
        secs.append(Section("item", _args({k: v for k, v in item.items() if k != "id"}), t))


def _responses_body(obj: dict, r: Reading) -> None:
    r.head += [("model", _s(obj.get("model"))), ("id", _s(obj.get("id"))),
               ("status", _s(obj.get("status")))]
    secs = r.group()
    for item in obj.get("output") or []:
        if isinstance(item, dict):
            _responses_item(item, secs)
    _responses_tail(obj, r)


def _responses_tail(obj: dict, r: Reading) -> None:
    inc = obj.get("incomplete_details")
    if isinstance(inc, dict) and inc.get("reason"):
        r.tail.append(("incomplete", str(inc["reason"])))
    if isinstance(obj.get("error"), dict):
        r.tail.append(("error", _s(obj["error"].get("message")) or json.dumps(obj["error"])))
    if _usage(obj.get("usage")):
        r.tail.append(("usage", _usage(obj.get("usage"))))


def _once(secs: list[Section]) -> list[Section]:
    """One reasoning item's sections, its text shown once when its summary repeats its content
    word for word (thinkwire puts the reasoning in both by default)."""
    def text(kind: str) -> str:
        return "".join(x.text for x in secs if x.kind == kind)
    summary = text("reasoning summary")
    if not summary or summary != text("reasoning"):
        return secs
    return [Section("reasoning", summary)] + [x for x in secs if x.kind not in ("reasoning", "reasoning summary")]


# The Responses stream events that carry text, and the section each one goes to.
_RESPONSES_DELTAS = {
    "response.reasoning_text.delta": "reasoning",
    "response.reasoning_summary_text.delta": "reasoning summary",
    "response.output_text.delta": "answer",
    "response.refusal.delta": "refusal",
}


def _responses_stream(events: list, r: Reading) -> None:
    items: dict[int, dict] = {}           # output_index -> {"item": added item, "secs": [...]}
    final: dict | None = None
    for _, obj in events:
        if not isinstance(obj, dict):
            continue
        t = _s(obj.get("type"))
        oi = obj.get("output_index")
        if t in ("response.created", "response.in_progress", "response.completed",
                 "response.incomplete", "response.failed"):
            if isinstance(obj.get("response"), dict):
                final = obj["response"]
            continue
        if t == "error":
            r.group().append(Section("error", _args({k: v for k, v in obj.items() if k != "type"})))
            continue
        if not isinstance(oi, int):
            continue
        slot = items.setdefault(oi, {"item": {}, "secs": [], "deltas": False})
        secs = slot["secs"]
        if t == "response.output_item.added" and isinstance(obj.get("item"), dict):
            slot["item"] = obj["item"]
        elif t in _RESPONSES_DELTAS:
            slot["deltas"] = True
            _add(secs, _RESPONSES_DELTAS[t], _s(obj.get("delta")))
        elif t == "response.output_item.done" and isinstance(obj.get("item"), dict):
            slot["item"] = obj["item"]
            if not slot["deltas"]:  # items without text deltas: tool calls, whole items
                _responses_item(obj["item"], secs)
                slot["deltas"] = True
    if final:
        r.head += [("model", _s(final.get("model"))), ("id", _s(final.get("id"))),
                   ("status", _s(final.get("status")))]
    out = r.group()
    for oi in sorted(items):
        slot = items[oi]
        if not slot["deltas"] and slot["item"]:
            _responses_item(slot["item"], slot["secs"])
        for s in _once(slot["secs"]):
            _add(out, s.kind, s.text, s.label) if s.kind in ("reasoning", "answer") else out.append(s)
    if not items and final and final.get("output"):  # a stream with only the final event
        for item in final["output"]:
            if isinstance(item, dict):
                _responses_item(item, out)
    if final:
        _responses_tail(final, r)


# -- Anthropic Messages ---------------------------------------------------------------------------
def _messages_block(b: dict, secs: list[Section]) -> None:
    t = b.get("type")
    if t == "thinking":
        _add(secs, "reasoning", _s(b.get("thinking")))
        if b.get("signature"):
            secs.append(Section("note", f"signature: {len(b['signature'])} chars"))
    elif t == "redacted_thinking":
        secs.append(Section("reasoning (redacted)", f"{len(_s(b.get('data')))} chars of data"))
    elif t == "text":
        _add(secs, "answer", _s(b.get("text")))
    elif t in ("tool_use", "server_tool_use"):
        label = " · ".join(x for x in (_s(b.get("name")), _s(b.get("id"))) if x)
        secs.append(Section("tool call", _args(b.get("input")), label))
    elif isinstance(t, str):
        secs.append(Section("block", _args(b), t))


def _messages_body(obj: dict, r: Reading) -> None:
    r.head += [("model", _s(obj.get("model"))), ("id", _s(obj.get("id")))]
    secs = r.group()
    for b in obj.get("content") or []:
        if isinstance(b, dict):
            _messages_block(b, secs)
    _messages_tail(obj.get("stop_reason"), obj.get("stop_sequence"), obj.get("usage"), r)


def _messages_tail(stop: Any, seq: Any, usage: Any, r: Reading) -> None:
    if stop is not None:
        r.tail.append(("stop reason", str(stop) + (f" ({seq!r})" if seq else "")))
    if _usage(usage):
        r.tail.append(("usage", _usage(usage)))


def _messages_stream(events: list, r: Reading) -> None:
    blocks: dict[int, dict] = {}     # index -> block as accumulated
    order: list[int] = []
    msg: dict = {}
    stop = seq = None
    usage: dict = {}
    errors = []
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
                b["thinking"] = _s(b.get("thinking")) + _s(d.get("thinking"))
            elif dt == "text_delta":
                b["text"] = _s(b.get("text")) + _s(d.get("text"))
            elif dt == "signature_delta":
                b["signature"] = _s(d.get("signature"))
            elif dt == "input_json_delta":
                b["_json"] = _s(b.get("_json")) + _s(d.get("partial_json"))
        elif t == "message_delta":
            d = obj.get("delta") if isinstance(obj.get("delta"), dict) else {}
            stop, seq = d.get("stop_reason", stop), d.get("stop_sequence", seq)
            if isinstance(obj.get("usage"), dict):
                usage.update(obj["usage"])
        elif t == "error":
            errors.append(Section("error", _args(obj.get("error", obj))))
    r.head += [("model", _s(msg.get("model"))), ("id", _s(msg.get("id")))]
    secs = r.group()
    for idx in order:
        b = blocks[idx]
        if "_json" in b:
            b["input"] = b.pop("_json") or b.get("input")
        _messages_block(b, secs)
    secs.extend(errors)
    _messages_tail(stop, seq, usage, r)


# -- requests ---------------------------------------------------------------------------------
def read_request(data: bytes, surface: str | None) -> Reading:
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if surface is None:
        if "prompt" in obj or "think" in obj:
            surface = "ollama"
        elif "messages" in obj and ("max_tokens" in obj or "system" in obj) and "n" not in obj:
            surface = "messages"
        elif "input" in obj:
            surface = "responses"
        elif "messages" in obj:
            surface = "chat"
        else:
            raise ValueError("not an LLM request thinkwire knows")
    r = Reading(surface, bool(obj.get("stream")))
    r.head.append(("model", _s(obj.get("model"))))
    if obj.get("stream"):
        r.head.append(("stream", "yes"))
    for k in ("reasoning_effort", "reasoning", "thinking", "think", "chat_template_kwargs", "enable_thinking",
              "max_tokens", "max_completion_tokens", "max_output_tokens", "temperature",
              "tool_choice", "previous_response_id", "store"):
        if k in obj and obj[k] is not None:
            v = obj[k]
            r.head.append((k, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)))
    tools = [t for t in obj.get("tools") or [] if isinstance(t, dict)]
    if tools:
        names = [_s(t.get("name")) or _s((t.get("function") or {}).get("name")) or _s(t.get("type"))
                 for t in tools]
        r.head.append(("tools", ", ".join(n for n in names if n)))
    READERS[surface].request(obj, r)
    return r


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for p in content if isinstance(content, list) else []:
        if isinstance(p, dict):
            if isinstance(p.get("text"), str):
                parts.append(p["text"])
            else:
                parts.append(f"[{p.get('type', 'part')}]")
    return "\n".join(parts)


def _chat_request(obj: dict, r: Reading) -> None:
    for i, m in enumerate(obj.get("messages") or []):
        if not isinstance(m, dict):
            continue
        secs = r.group(f"#{i} {m.get('role', '?')}")
        for k in ("reasoning_content", "reasoning"):
            if isinstance(m.get(k), str) and m[k]:
                _add(secs, "reasoning", m[k])
                break
        text = _content_text(m.get("content"))
        _add(secs, "tool result" if m.get("role") == "tool" else "text", text,
             _s(m.get("tool_call_id")))
        _function_calls(secs, m.get("tool_calls"))


def _function_calls(secs: list[Section], calls) -> None:
    """A message's `tool_calls` as chat and Ollama write them: `{"id"?, "function": {"name",
    "arguments"}}`, a section each."""
    for tc in calls or []:
        if isinstance(tc, dict):
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
            label = " · ".join(x for x in (_s(fn.get("name")), _s(tc.get("id"))) if x)
            secs.append(Section("tool call", _args(fn.get("arguments")), label))


def _responses_request(obj: dict, r: Reading) -> None:
    if isinstance(obj.get("instructions"), str):
        _add(r.group("instructions"), "text", obj["instructions"])
    inp = obj.get("input")
    if isinstance(inp, str):
        _add(r.group("#0 user"), "text", inp)
        return
    for i, item in enumerate(inp if isinstance(inp, list) else []):
        if not isinstance(item, dict):
            continue
        t = item.get("type") or ("message" if "role" in item else "?")
        if t == "message":
            _add(r.group(f"#{i} {item.get('role', '?')}"), "text", _content_text(item.get("content")))
        elif t == "function_call_output":
            _add(r.group(f"#{i} tool result"), "tool result", _content_text(item.get("output")),
                 _s(item.get("call_id")))
        else:
            _responses_item(item, r.group(f"#{i} {t}"))


def _messages_request(obj: dict, r: Reading) -> None:
    system = obj.get("system")
    if system:
        _add(r.group("system"), "text", _content_text(system))
    for i, m in enumerate(obj.get("messages") or []):
        if not isinstance(m, dict):
            continue
        secs = r.group(f"#{i} {m.get('role', '?')}")
        content = m.get("content")
        if isinstance(content, str):
            _add(secs, "text", content)
            continue
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                _add(secs, "text", _s(b.get("text")))
            elif b.get("type") == "tool_result":
                secs.append(Section("tool result", _content_text(b.get("content")), _s(b.get("tool_use_id"))))
            else:
                _messages_block(b, secs)


# -- the readers, one row per surface ----------------------------------------------------------
@dataclass(frozen=True)
class Readers:
    body: Callable[[dict, Reading], None]
    stream: Callable[[list, Reading], None]
    request: Callable[[dict, Reading], None]


READERS = {
    "chat": Readers(_chat_body, _chat_stream, _chat_request),
    "responses": Readers(_responses_body, _responses_stream, _responses_request),
    "messages": Readers(_messages_body, _messages_stream, _messages_request),
}

from .ollama import READERS as _OLLAMA  # noqa: E402  (it reads with the helpers above)
READERS.update(_OLLAMA)
