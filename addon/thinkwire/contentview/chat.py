"""Reading Chat Completions (`/chat/completions`): bodies, streams,
requests (a row of thinkwire.contentview.read's READERS)."""

from __future__ import annotations

from typing import Any

from .reading import (Readers, Reading, Section, add, content_text, function_calls, obj_of, pretty_args, str_of,
                      usage_line)


def _chat_body(obj: dict[str, Any], r: Reading) -> None:
    r.head += [("model", str_of(obj.get("model"))), ("id", str_of(obj.get("id")))]
    choices = [c for c in obj["choices"] if isinstance(c, dict)]
    for ch in choices:
        name = f"choice {ch.get('index', 0)}" if len(choices) > 1 else ""
        secs = r.group(name)
        msg = obj_of(ch.get("message"))
        _chat_delta(msg, secs, {})
        if ch.get("finish_reason") is not None:
            r.tail.append((f"{name} finish reason".strip(), str(ch["finish_reason"])))
    if usage_line(obj.get("usage")):
        r.tail.append(("usage", usage_line(obj.get("usage"))))
    _pretty_tools(r)


def _chat_delta(d: dict[str, Any], secs: list[Section], tools: dict[Any, Section]) -> None:
    """One message or delta: reasoning, then answer, then tool calls (by index)."""
    for k in ("reasoning_content", "reasoning"):
        if isinstance(d.get(k), str) and d[k]:
            add(secs, "reasoning", d[k])
            break
    add(secs, "answer", str_of(d.get("content")))
    add(secs, "refusal", str_of(d.get("refusal")))
    for tc in d.get("tool_calls") or []:
        if not isinstance(tc, dict):
            continue
        idx = tc.get("index", len(tools))
        fn = obj_of(tc.get("function"))
        sec = tools.get(idx)
        if sec is None:
            sec = tools[idx] = Section("tool call", "", "")
            secs.append(sec)
        name, cid = str_of(fn.get("name")), str_of(tc.get("id"))
        if name or cid:
            old_name, _, old_id = sec.label.partition(" · ")
            sec.label = f"{name or old_name} · {cid or old_id}".strip(" ·")
        args = fn.get("arguments")
        sec.text += args if isinstance(args, str) else pretty_args(args)


def _chat_stream(events: list[Any], r: Reading) -> None:
    tools: dict[Any, dict[Any, Section]] = {}   # choice index -> tool call index -> its section
    model = rid = ""
    finish: dict[int, str] = {}
    usage = ""
    indices: set[Any] = set()
    for _, obj in events:
        if not isinstance(obj, dict):
            continue
        model = model or str_of(obj.get("model"))
        rid = rid or str_of(obj.get("id"))
        if usage_line(obj.get("usage")):
            usage = usage_line(obj.get("usage"))
        for ch in obj.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            idx = ch.get("index", 0)
            indices.add(idx)
            secs = r.group(f"choice {idx}")
            d = obj_of(ch.get("delta"))
            _chat_delta(d, secs, tools.setdefault(idx, {}))
            if ch.get("finish_reason") is not None:
                finish[idx] = str(ch["finish_reason"])
        if isinstance(obj.get("error"), dict):
            r.group("").append(Section("error", pretty_args(obj["error"])))
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
                s.text = pretty_args(s.text)


def _chat_request(obj: dict[str, Any], r: Reading) -> None:
    for i, m in enumerate(obj.get("messages") or []):
        if not isinstance(m, dict):
            continue
        secs = r.group(f"#{i} {m.get('role', '?')}")
        for k in ("reasoning_content", "reasoning"):
            if isinstance(m.get(k), str) and m[k]:
                add(secs, "reasoning", m[k])
                break
        text = content_text(m.get("content"))
        add(secs, "tool result" if m.get("role") == "tool" else "text", text,
             str_of(m.get("tool_call_id")))
        function_calls(secs, m.get("tool_calls"))


READERS = {"chat": Readers(_chat_body, _chat_stream, _chat_request)}
