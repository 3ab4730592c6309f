"""Each surface's part of the memory: which of a response's turns to remember (and how), and how
to put a remembered turn back into a request in the client's own format.

Chat: a native `reasoning_content` / `reasoning` goes back into the same field (what the upstream
reads: DeepSeek's thinking mode refuses a tool turn without it); reasoning the model wrote inline
goes back as the turn's text exactly as the model wrote it (the upstream reads only text: its
template finds the markup there), when the client's text is still the answer thinkwire gave.
Ollama: the same, with `thinking` as the native field; its tool calls have no ids, so a turn is
found by its answer text and its calls.
Messages and Responses: the thinking blocks / reasoning items the client got (thinkwire's carry
marks: the exact text and markup the model wrote) go back where the client would have kept them,
and the way back (docs/way-back.md) turns them into what the upstream reads, as for a client that
kept them. An upstream's own blocks or items (native reasoning) go back as it sent them.
A side's `ended(piece)`: whether a piece the client gets holds the stream's last event.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from . import turns
from .entry import INLINE, NATIVE, OBJECTS, Entry, key
from .turns import JSON, Said

LOOKUPS_MAX = 64   # assistant turns of one request looked up (the newest): one store call


class Side(Protocol):
    """What one surface does for the memory (each is a class of static functions)."""
    name: str

    def read_body(self, obj: object) -> dict[int, Said]: ...
    def read_stream(self, objs: Any) -> dict[int, Said]: ...
    def ended(self, piece: bytes) -> bool: ...
    calls: bytes   # in a response's bytes wherever it has a tool call: none, nothing to read
    def entry(self, upstream: Said, client: Said | None) -> Entry | None: ...
    def turn_key(self, scope: bytes, said: Said, every_turn: bool) -> str | None: ...
    def wanting(self, request: JSON, scope: bytes, every_turn: bool) -> list[tuple[Any, str]]: ...
    def fill(self, handle: Any, e: Entry) -> bool: ...


def entry_for(upstream: Said, client: Said | None) -> Entry | None:
    """What to keep of a turn: its native reasoning, else the text as the model wrote it when
    thinkwire took reasoning out of it (the client got reasoning the upstream sent inline)."""
    if upstream.native:
        return Entry(NATIVE, upstream.native, field=upstream.native_field)
    if client is not None and client.native and client.text != upstream.text:
        return Entry(INLINE, upstream.text, answer=client.text)
    return None


def _line_start(piece: bytes, line: bytes) -> bool:
    return piece.startswith(line) or b"\n" + line in piece


class ChatSide:
    name = "chat"
    calls = b'"tool_calls"'

    @staticmethod
    def ended(piece: bytes) -> bool:
        return piece.rstrip().endswith(b"data: [DONE]")

    entry = staticmethod(entry_for)
    read_body = staticmethod(turns.chat_body)
    read_stream = staticmethod(turns.chat_stream)

    @staticmethod
    def turn_key(scope: bytes, said: Said, every_turn: bool) -> str | None:
        if said.ids:
            return key(scope, "chat", tuple(said.ids))
        return key(scope, "chat", answer=said.text) if every_turn else None

    @staticmethod
    def wanting(request: JSON, scope: bytes, every_turn: bool) -> list[tuple[Any, str]]:
        """(message, key) of the assistant turns that came back without their reasoning."""
        out: list[tuple[Any, str]] = []
        for m in turns.chat_request(request)[:LOOKUPS_MAX]:
            if turns.chat_kept(m):
                continue
            ids = turns.chat_ids(m)
            k = key(scope, "chat", ids) if ids else \
                key(scope, "chat", answer=turns._text(m.get("content"))) if every_turn else None
            if k is not None:
                out.append((m, k))
        return out

    @staticmethod
    def fill(m: JSON, e: Entry) -> bool:
        if e.form == NATIVE:
            m[e.field] = e.text
            return True
        if turns._text(m.get("content")) == e.answer:
            m["content"] = e.text
            return True
        return False   # the client changed the answer: it goes as the client wrote it


def _calls_text(said_text: str, calls: list[Any]) -> str:
    return said_text + "\0" + json.dumps(calls, sort_keys=True, separators=(",", ":"), ensure_ascii=False) \
        if calls else said_text


class OllamaSide:
    name = "ollama"
    calls = b'"tool_calls"'
    entry = staticmethod(entry_for)

    @staticmethod
    def ended(piece: bytes) -> bool:
        return b'"done":true' in piece or b'"done": true' in piece
    read_body = staticmethod(turns.ollama_body)
    read_stream = staticmethod(turns.ollama_stream)

    @staticmethod
    def turn_key(scope: bytes, said: Said, every_turn: bool) -> str | None:
        if said.calls or every_turn:
            return key(scope, "ollama", answer=_calls_text(said.text, said.calls))
        return None

    @staticmethod
    def wanting(request: JSON, scope: bytes, every_turn: bool) -> list[tuple[Any, str]]:
        msgs = request.get("messages")
        out: list[tuple[Any, str]] = []
        for m in reversed(msgs) if isinstance(msgs, list) else []:
            if len(out) >= LOOKUPS_MAX:
                break
            if not isinstance(m, dict) or m.get("role") != "assistant" or (isinstance(m.get("thinking"), str)
                                                                         and m.get("thinking")):
                continue
            got = m.get("tool_calls")
            calls: list[Any] = got if isinstance(got, list) else []
            if calls or every_turn:
                k = key(scope, "ollama", answer=_calls_text(turns._text(m.get("content")), calls))
                if k is not None:
                    out.append((m, k))
        return out

    @staticmethod
    def fill(m: JSON, e: Entry) -> bool:
        if e.form == NATIVE:
            m["thinking"] = e.text
            return True
        if turns._text(m.get("content")) == e.answer:
            m["content"] = e.text
            return True
        return False


def _objects_entry(upstream: Said, client: Said | None) -> Entry | None:
    got = client if client is not None else upstream
    return Entry(OBJECTS, json.dumps(got.objects, ensure_ascii=False)) if got.objects else None


def _by_ids_or_text(surface: str, scope: bytes, ids: list[str], text: str, every_turn: bool) -> str | None:
    if ids:
        return key(scope, surface, tuple(ids))
    return key(scope, surface, answer=text) if every_turn else None


class MessagesSide:
    name = "messages"
    calls = b'"tool_use"'
    read_body = staticmethod(turns.messages_body)
    read_stream = staticmethod(turns.messages_stream)
    entry = staticmethod(_objects_entry)

    @staticmethod
    def ended(piece: bytes) -> bool:
        return _line_start(piece, b"event: message_stop")

    @staticmethod
    def turn_key(scope: bytes, said: Said, every_turn: bool) -> str | None:
        return _by_ids_or_text("messages", scope, said.ids, said.text, every_turn)

    @staticmethod
    def wanting(request: JSON, scope: bytes, every_turn: bool) -> list[tuple[Any, str]]:
        out: list[tuple[Any, str]] = []
        for m in turns.messages_request(request)[:LOOKUPS_MAX]:
            said = turns.messages_turn(m)
            if said.objects:
                continue   # the client kept them
            k = _by_ids_or_text("messages", scope, said.ids, said.text, every_turn)
            if k is not None:
                out.append((m, k))
        return out

    @staticmethod
    def fill(m: JSON, e: Entry) -> bool:
        if e.form != OBJECTS:
            return False
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}] if content else []
        if not isinstance(content, list):
            return False
        m["content"] = json.loads(e.text) + content   # thinking comes first in a turn
        return True


class ResponsesSide:
    name = "responses"
    calls = b'"call_id"'
    read_body = staticmethod(turns.responses_body)
    read_stream = staticmethod(turns.responses_stream)
    entry = staticmethod(_objects_entry)

    @staticmethod
    def ended(piece: bytes) -> bool:
        return _line_start(piece, b"event: response.completed") or _line_start(piece, b"event: response.incomplete")

    @staticmethod
    def turn_key(scope: bytes, said: Said, every_turn: bool) -> str | None:
        return _by_ids_or_text("responses", scope, said.ids, said.text, every_turn)

    @staticmethod
    def wanting(request: JSON, scope: bytes, every_turn: bool) -> list[tuple[Any, str]]:
        """A turn in `input`: a run of assistant messages, reasoning items and tool calls (ended by
        anything else: a tool's output, a user message). Handles: (input, the run's first item)."""
        items = request.get("input")
        if not isinstance(items, list):
            return []
        if any(isinstance(it, dict) and it.get("type") in ("reasoning", "item_reference") for it in items):
            # A client that sends reasoning items back keeps them, and one that refers to stored
            # items (store: true, the Vercel AI SDK) has the server keep them: nothing was dropped.
            return []
        runs: list[list[JSON]] = []
        open_run = False
        for it in items:
            t = it.get("type", "message") if isinstance(it, dict) else None
            part = t == "reasoning" or (t == "message" and it.get("role") == "assistant") or \
                (isinstance(t, str) and t.endswith("_call"))
            if part and not open_run:
                runs.append([])
            if part:
                runs[-1].append(it)
            open_run = part
        out: list[tuple[Any, str]] = []
        for run in reversed(runs):
            if len(out) >= LOOKUPS_MAX:
                break
            said = turns._responses_items([dict(it, type=it.get("type", "message")) for it in run])[0]
            if said.objects:
                continue
            k = _by_ids_or_text("responses", scope, said.ids, said.text, every_turn)
            if k is not None:
                out.append(((items, run[0], said.text), k))
        return out

    @staticmethod
    def fill(handle: tuple[list[Any], JSON, str], e: Entry) -> bool:
        items, first, text = handle
        if e.form != OBJECTS:
            return False
        if any(t and t in text for t in _reasoning_texts(e.text)):
            return False   # the client wrote the reasoning into the turn's text itself (Pydantic AI)
        at = next((i for i, it in enumerate(items) if it is first), None)
        if at is None:
            return False
        items[at:at] = json.loads(e.text)
        return True


def _reasoning_texts(objects: str) -> list[str]:
    """The texts of remembered reasoning items (their content, else their summary)."""
    out: list[str] = []
    for it in json.loads(objects):
        if isinstance(it, dict):
            parts = it.get("content") or it.get("summary") or []
            out += [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return out


SIDES: dict[str, Side] = {"chat": ChatSide, "ollama": OllamaSide, "messages": MessagesSide, "responses": ResponsesSide}
