"""Streams of any surface from one text sequence, and reading them back: shared by the fuzz, fault, load and security tests.
Ollama's streams are NDJSON lines; the others SSE events (`parse_events` frames each by its surface)."""

from __future__ import annotations

import json
from thinkwire.ndjson import NDJSONParser
from thinkwire.sse import SSEParser
from support.messages import stream_objs as _messages_objs, text as _mtext
from support.ollama import chat_objs as _ollama_objs
from support.responses import msg as _rmsg, upstream_events as _responses_objs


def _chat_chunk(delta, finish=None):
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def model_objs(surface: str, deltas: list[str]) -> list:
    """The upstream's events (dicts, or "[DONE]") for a model writing `deltas`."""
    if surface == "chat":
        return ([_chat_chunk({"role": "assistant", "content": ""})]
                + [_chat_chunk({"content": d}) for d in deltas] + [_chat_chunk({}, "stop"), "[DONE]"])
    if surface == "messages":
        return _messages_objs(_mtext(*deltas))
    if surface == "ollama":
        return _ollama_objs("m", deltas)
    return _responses_objs([_rmsg(deltas)])


def encode_events(surface: str, objs: list, eol: str = "\n") -> list[bytes]:
    """Wire bytes per event; text may hold surrogate escapes, which become invalid UTF-8."""
    out = []
    if surface == "ollama":                # one line each; NDJSON lines end at LF (or CRLF)
        end = ("\r\n" if eol != "\n" else "\n").encode()
        return [(o.replace(b"\n", b" ").replace(b"\r", b" ") if isinstance(o, bytes) else
                 json.dumps(o, ensure_ascii=False).encode("utf-8", "surrogateescape")) + end for o in objs]
    for o in objs:
        if isinstance(o, bytes):           # a foreign event, already bytes (without its blank line)
            out.append(o.replace(b"\n", eol.encode()) + eol.encode() * 2)
            continue
        data = o if isinstance(o, str) else json.dumps(o, ensure_ascii=False)
        head = f"event: {o['type']}{eol}" if surface != "chat" and isinstance(o, dict) and "type" in o else ""
        out.append(f"{head}data: {data}{eol}{eol}".encode("utf-8", "surrogateescape"))
    return out


def parse_events(data: bytes, surface: str = "chat"):
    p = NDJSONParser() if surface == "ollama" else SSEParser()
    return p.feed(data) + p.finish()


def _json(ev):
    if ev.data is None:
        return None
    try:
        return json.loads(ev.data)
    except ValueError:
        return None


def text_sequence(surface: str, data: bytes, done_texts: bool = True) -> list[tuple[str, str]]:
    """("r" | "c", text) for every text-carrying field of every event that parses, in order.
    `done_texts`: also a Responses part's done text where its deltas never came."""
    seq: list[tuple[str, str]] = []
    streamed: set = set()
    summarized: set = set()   # Responses items whose reasoning came as summary deltas
    for ev in parse_events(data, surface):
        o = _json(ev)
        if not isinstance(o, dict):
            continue
        if surface == "ollama":
            holder = o.get("message") if isinstance(o.get("message"), dict) else o
            for k, kind in (("thinking", "r"), ("content", "c"), ("response", "c")):
                if isinstance(holder.get(k), str) and holder[k]:
                    seq.append((kind, holder[k]))
        elif surface == "chat":
            choices = o.get("choices")
            for ch in choices if isinstance(choices, list) else ():
                d = ch.get("delta") if isinstance(ch, dict) else None
                if isinstance(d, dict):
                    for k, kind in (("reasoning_content", "r"), ("content", "c")):
                        if isinstance(d.get(k), str) and d[k]:
                            seq.append((kind, d[k]))
        elif surface == "messages":
            b = o.get("content_block") if o.get("type") == "content_block_start" else (
                o.get("delta") if o.get("type") == "content_block_delta" else None)
            if isinstance(b, dict):
                for k, kind in (("thinking", "r"), ("text", "c")):
                    if isinstance(b.get(k), str) and b[k]:
                        seq.append((kind, b[k]))
        else:
            t = o.get("type")
            key = repr(o.get("output_index"))
            if t == "response.reasoning_summary_text.delta" and isinstance(o.get("delta"), str):
                seq.append(("r", o["delta"]))     # the reasoning's place by default
                summarized.add(key)
            elif t == "response.reasoning_text.delta" and key in summarized:
                continue                           # the same text again (think_responses_content=on)
            elif t in ("response.output_text.delta", "response.reasoning_text.delta") and isinstance(o.get("delta"), str):
                seq.append(("r" if "reasoning" in t else "c", o["delta"]))
                streamed.add(key)
            elif (done_texts and t == "response.output_text.done" and isinstance(o.get("text"), str)
                  and key not in streamed):
                seq.append(("c", o["text"]))  # a part whose deltas never came: its text is here
                streamed.add(key)
    return seq
