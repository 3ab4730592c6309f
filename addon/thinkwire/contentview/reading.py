"""What the content views show: a `Reading` of sections (model, reasoning, answer, tool calls,
finish reason, usage), and the helpers every surface's reader (thinkwire.contentview.chat,
.messages, .responses, .ollama) writes it with."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable


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
        new: list[Section] = []
        self.groups.append((name, new))
        return new


def add(secs: list[Section], kind: str, text: str, label: str = "") -> None:
    """Append text, merging with the previous section when it is the same kind and label."""
    if not text:
        return
    if secs and secs[-1].kind == kind and secs[-1].label == label:
        secs[-1].text += text
    else:
        secs.append(Section(kind, text, label))


def str_of(v: Any) -> str:
    return v if isinstance(v, str) else ""


def obj_of(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def pretty_args(raw: Any) -> str:
    """Tool arguments, pretty-printed when they are JSON."""
    if isinstance(raw, (dict, list)):
        return json.dumps(raw, indent=2, ensure_ascii=False)
    if not isinstance(raw, str):
        return "" if raw is None else str(raw)
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except ValueError:
        return raw


def usage_line(u: Any) -> str:
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


def content_text(content: Any) -> str:
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


def function_calls(secs: list[Section], calls: Any) -> None:
    """A message's `tool_calls` as chat and Ollama write them: `{"id"?, "function": {"name",
    "arguments"}}`, a section each."""
    for tc in calls or []:
        if isinstance(tc, dict):
            fn = obj_of(tc.get("function"))
            label = " · ".join(x for x in (str_of(fn.get("name")), str_of(tc.get("id"))) if x)
            secs.append(Section("tool call", pretty_args(fn.get("arguments")), label))


@dataclass(frozen=True)
class Readers:
    body: Callable[[dict[str, Any], Reading], None]
    stream: Callable[[list[Any], Reading], None]
    request: Callable[[dict[str, Any], Reading], None]
