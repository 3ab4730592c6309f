"""Each surface's part of the memory: which of a response's turns to remember (and how), and how
to put a remembered turn back into a request in the client's own format.

Chat: a native `reasoning_content` / `reasoning` goes back into the same field (what the upstream
reads: DeepSeek's thinking mode refuses a tool turn without it); reasoning the model wrote inline
goes back as the turn's text exactly as the model wrote it (the upstream reads only text: its
template finds the markup there), when the client's text is still the answer thinkwire gave.
Ollama: the same, with `thinking` as the native field; its tool calls have no ids, so a turn is
found by its answer text and its calls.
"""

from __future__ import annotations

import json

from . import turns
from .entry import INLINE, NATIVE, Entry, key
from .turns import Said

LOOKUPS_MAX = 64   # assistant turns of one request looked up (the newest): one store call


def entry_for(upstream: Said, client: Said | None) -> Entry | None:
    """What to keep of a turn: its native reasoning, else the text as the model wrote it when
    thinkwire took reasoning out of it (the client got reasoning the upstream sent inline)."""
    if upstream.native:
        return Entry(NATIVE, upstream.native, field=upstream.native_field)
    if client is not None and client.native and client.text != upstream.text:
        return Entry(INLINE, upstream.text, answer=client.text)
    return None


class ChatSide:
    name = "chat"
    stream_end = b"[DONE]"   # in the client's last event: the stream is over
    read_body = staticmethod(turns.chat_body)
    read_stream = staticmethod(turns.chat_stream)

    @staticmethod
    def turn_key(scope: bytes, said: Said, every_turn: bool) -> str | None:
        if said.ids:
            return key(scope, "chat", tuple(said.ids))
        return key(scope, "chat", answer=said.text) if every_turn else None

    @staticmethod
    def wanting(request: dict, scope: bytes, every_turn: bool) -> list[tuple[dict, str]]:
        """(message, key) of the assistant turns that came back without their reasoning."""
        out = []
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
    def fill(m: dict, e: Entry) -> bool:
        if e.form == NATIVE:
            m[e.field] = e.text
            return True
        if turns._text(m.get("content")) == e.answer:
            m["content"] = e.text
            return True
        return False   # the client changed the answer: it goes as the client wrote it


def _calls_text(said_text: str, calls: list) -> str:
    return said_text + "\0" + json.dumps(calls, sort_keys=True, separators=(",", ":"), ensure_ascii=False) \
        if calls else said_text


class OllamaSide:
    name = "ollama"
    stream_end = b'"done":true'
    read_body = staticmethod(turns.ollama_body)
    read_stream = staticmethod(turns.ollama_stream)

    @staticmethod
    def turn_key(scope: bytes, said: Said, every_turn: bool) -> str | None:
        if said.calls or every_turn:
            return key(scope, "ollama", answer=_calls_text(said.text, said.calls))
        return None

    @staticmethod
    def wanting(request: dict, scope: bytes, every_turn: bool) -> list[tuple[dict, str]]:
        msgs = request.get("messages")
        out = []
        for m in reversed(msgs) if isinstance(msgs, list) else []:
            if len(out) >= LOOKUPS_MAX:
                break
            if not isinstance(m, dict) or m.get("role") != "assistant" or (isinstance(m.get("thinking"), str)
                                                                         and m.get("thinking")):
                continue
            calls = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []
            if calls or every_turn:
                k = key(scope, "ollama", answer=_calls_text(turns._text(m.get("content")), calls))
                if k is not None:
                    out.append((m, k))
        return out

    @staticmethod
    def fill(m: dict, e: Entry) -> bool:
        if e.form == NATIVE:
            m["thinking"] = e.text
            return True
        if turns._text(m.get("content")) == e.answer:
            m["content"] = e.text
            return True
        return False


SIDES = {"chat": ChatSide, "ollama": OllamaSide}
