"""Reading LLM requests and responses as a person reads them: a `Reading` of sections (model,
reasoning, answer, tool calls, finish reason, usage) from any surface's JSON body or stream (SSE;
Ollama's NDJSON).
It parses the wire format generically (not with the rewriters), so it shows what the bytes say,
whoever produced them. One row of readers per surface (`READERS`); which surface a body or a
path belongs to is decided by the surfaces' own `matches` / `looks_like`."""

from __future__ import annotations

import json
from typing import Any

from .. import engine
from ..ndjson import NDJSONParser
from ..sse import SSEParser
from . import chat, messages, ollama, responses
from .reading import Reading, str_of


# One row of readers per surface, each in the module named after it (as thinkwire.surfaces).
READERS = {**chat.READERS, **responses.READERS, **messages.READERS, **ollama.READERS}


# -- detecting the surface: the surfaces' own rules -------------------------------------------
def surface_of_path(path: str) -> str | None:
    for name, surface in engine.SURFACES.items():
        if surface.matches(path):
            return name
    return None


def _surface_of(obj: dict[str, Any]) -> str | None:
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


# The Responses stream events that carry text, and the section each one goes to.


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
    r.head.append(("model", str_of(obj.get("model"))))
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
        names = [str_of(t.get("name")) or str_of((t.get("function") or {}).get("name")) or str_of(t.get("type"))
                 for t in tools]
        r.head.append(("tools", ", ".join(n for n in names if n)))
    READERS[surface].request(obj, r)
    return r


