"""Realistic model output and the stream events each API surface streams it as (SSE events; for
Ollama, NDJSON lines).

Shared by every part of the bench: the splitter texts, the per-event micro benchmark and the
upstream server of the end-to-end runs, so all of them push the same shapes.

A streamed "token" is `(before, after)`: the text of one delta is `before + "@" + ts + after`,
where `ts` is the upstream's CLOCK_MONOTONIC in nanoseconds when it wrote the event. The client
finds each `@<digits>` the first time it arrives and so measures the delay of that piece of text
whatever the proxy did to the event around it (split it, renamed the field, held part back).
"""

from __future__ import annotations

import itertools
import json
import os
import random

MODEL = "bench-model"   # matches no profile in tagsets.yaml: the default tag pairs apply

_REASONING_WORDS = (
    " Okay", " so", " the", " user", " wants", " a", " function", " that", " parses", " the",
    " input", ".", " Let", " me", " think", " about", " edge", " cases", ":", " empty",
    " strings", ",", " unicode", ",", " and", " very", " long", " lines", ".", " Hmm", ",",
    " wait", " -", " if", " we", " stream", " it", " we", " must", " not", " buffer", ".",
    " First", " check", " x", " >", " 0", " then", " handle", " it",
)
_ANSWER_WORDS = (
    " Here", " is", " the", " function", ":", "\n\n", "```", "python", "\n", "def", " parse",
    "(", "text", ")", ":", "\n", "   ", " return", " text", ".", "split", "()", "\n", "```",
    "\n\n", "It", " runs", " in", " `", "O", "(n)", "`", " time", " and", " handles", " the",
    " **", "edge", " cases", "**", ".", " Note", " that", " a", " <", " b", " here", ".",
)


# Larger deltas (`--delta-chars N`, THINKWIRE_BENCH_DELTA_CHARS): some servers flush several tokens
# at once. Each delta then takes the next tokens up to a size drawn from N/4..N characters.
DELTA_CHARS = int(os.environ.get("THINKWIRE_BENCH_DELTA_CHARS") or 0)

# `--workload spaced` (THINKWIRE_BENCH_WORKLOAD=spaced), the chat shape of issue 34: deltas of 1-6
# characters (each token's text cut so), one stamp every STAMP_EVERY deltas only (a stamp is ~17
# characters: on every delta it would make them long), and chat's events written as Python's
# json.dumps writes them (a space after `:` and `,`, `"logprobs": null, "finish_reason": null`).
SPACED = (os.environ.get("THINKWIRE_BENCH_WORKLOAD") or "").strip() == "spaced"
STAMP_EVERY = 50


def tokens(n: int, reasoning_frac: float = 0.7, seed: int = 0) -> list[tuple[str, str]]:
    """`n` streamed deltas: a reasoning block (about `reasoning_frac` of them), then the answer.

    The first delta opens the block, one in the middle closes it; the answer carries code
    fences, inline code and a stray "<" that the splitter has to hold for one delta. With
    DELTA_CHARS, `n` tokens grouped into fewer, larger deltas (`grouped`).
    """
    rng = random.Random(seed)
    r = max(1, int(n * reasoning_frac))
    out: list[tuple[str, str]] = []
    for k in range(n):
        if k == 0:
            out.append(("<think>\nOkay", ""))
        elif k == r and n > 2:
            out.append((" done.", "</think>\n\nSo"))
        elif k < r:
            w = _REASONING_WORDS[rng.randrange(len(_REASONING_WORDS))]
            out.append((w, "\n\n" if rng.random() < 0.03 else ""))
        else:
            w = _ANSWER_WORDS[(k - r) % len(_ANSWER_WORDS)]
            if w == " <":
                out.append((" a", " <"))   # ends in "<": held back until the next delta
            else:
                out.append((w, ""))
    if SPACED:
        return small(out, rng)
    return grouped(out, DELTA_CHARS, rng) if DELTA_CHARS else out


def small(toks: list[tuple[str, str]], rng: random.Random) -> list[tuple]:
    """Each token's text cut into deltas of 1-6 characters; a delta is (before, after, stamped):
    only the last of every STAMP_EVERY-th token's carries the upstream's stamp (`render`), so no
    stamp cuts a tag. What a token has after its stamp (a tag, a line break) stays in its last
    delta."""
    out: list[tuple] = []
    for t, (before, after) in enumerate(toks):
        pieces, i = [], 0
        while i < len(before):
            k = rng.randint(1, 6)
            pieces.append(before[i:i + k])
            i += k
        pieces = pieces or [""]
        for j, p in enumerate(pieces):
            last = j == len(pieces) - 1
            out.append((p, after if last else "", last and t % STAMP_EVERY == 0))
    return out


def grouped(toks: list[tuple[str, str]], chars: int, rng: random.Random) -> list[tuple[str, str]]:
    """The tokens joined into deltas of up to `chars` characters (at least one token each)."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(toks):
        limit = rng.randint(max(1, chars // 4), chars)
        before, after = toks[i]
        size = len(before) + len(after)
        i += 1
        while i < len(toks) and size + len(toks[i][0]) + len(toks[i][1]) <= limit:
            before += after + toks[i][0]
            after = toks[i][1]
            size += len(toks[i][0]) + len(toks[i][1])
            i += 1
        out.append((before, after))
    return out


def render(tok: tuple, ts: int) -> str:
    if len(tok) > 2 and not tok[2]:   # (a `small` delta without a stamp)
        return tok[0] + tok[1]
    return f"{tok[0]}@{ts}{tok[1]}"


def text(size: int, seed: int = 0, unit: int = 2000) -> str:
    """`size` characters of model output: units of about `unit` characters, each a reasoning
    block (60%) then answer (40%), so every stretch of the text has the same mix and a
    longer text is only longer (interleaved thinking, as reasoning models with tools do)."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    k = 0
    while total < size:
        parts.append("<think>\n")
        n = 0
        while n < unit * 0.6:
            w = _REASONING_WORDS[rng.randrange(len(_REASONING_WORDS))]
            if rng.random() < 0.03:
                w += "\n\n"
            parts.append(w)
            n += len(w)
        parts.append("\n</think>\n\n")
        while n < unit:
            w = _ANSWER_WORDS[k % len(_ANSWER_WORDS)]
            k += 1
            parts.append(w)
            n += len(w)
        parts.append("\n\n")
        total += n + 22
    return "".join(parts)[:size]


def chunks(s: str, sizes: tuple[int, int], seed: int = 1) -> list[str]:
    """Cut `s` into pieces of random sizes in [lo, hi] (fixed seed)."""
    lo, hi = sizes
    if lo == hi:
        return [s[i:i + lo] for i in range(0, len(s), lo)]
    rng = random.Random(seed)
    out, i, n = [], 0, len(s)
    while i < n:
        k = rng.randint(lo, hi)
        out.append(s[i:i + k])
        i += k
    return out


def _j(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _c(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


# -- the surfaces' stream shapes ------------------------------------------------------------
class Shape:
    """How one surface streams text. `head`, `delta`, `tail` return event bytes (SSE events, or
    NDJSON lines for a shape whose `content_type` says so; `end` ends one event)."""

    name = ""
    path = ""
    content_type = "text/event-stream"
    end = b"\n\n"

    def request(self) -> dict:
        raise NotImplementedError

    def head(self, st: dict) -> list[bytes]:
        raise NotImplementedError

    def delta(self, st: dict, text: str) -> bytes:
        raise NotImplementedError

    def tail(self, st: dict, full: str) -> list[bytes]:
        raise NotImplementedError

    def rewritten(self, body: bytes) -> bool:
        """Whether client-side bytes show reasoning moved into this surface's native field."""
        raise NotImplementedError

    def stream(self, texts: list[str]) -> list[bytes]:
        st: dict = {}
        return self.head(st) + [self.delta(st, t) for t in texts] + self.tail(st, "".join(texts))


def _stream_id(st: dict) -> str:
    """Each stream's own id, as servers give (so nothing learned from one stream's bytes is
    reused for the next)."""
    if "id" not in st:
        st["id"] = f"{next(_IDS):012x}"
    return st["id"]


_IDS = itertools.count(random.Random().getrandbits(40))


class Chat(Shape):
    name, path = "chat", "/v1/chat/completions"

    def request(self) -> dict:
        return {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi"}]}

    def _pre(self, st: dict) -> str:
        if SPACED:
            return self._spaced(st)
        if "pre" not in st:
            st["pre"] = ('data: {"id":"chatcmpl-' + _stream_id(st) + '","object":"chat.completion.chunk",'
                         '"created":1700000000,"model":"' + MODEL + '","system_fingerprint":"fp_bench",'
                         '"choices":[{"index":0,"delta":')
        return st["pre"]

    def head(self, st: dict) -> list[bytes]:
        if SPACED:
            return [(self._pre(st) + '{"role": "assistant", "content": ""}, "logprobs": null, '
                     '"finish_reason": null}]}\n\n').encode()]
        return [(self._pre(st) + '{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n').encode()]

    def delta(self, st: dict, text: str) -> bytes:
        if SPACED:
            return (self._pre(st) + '{"content": ' + _j(text) + '}, "logprobs": null, "finish_reason": null}]}\n\n').encode()
        return (self._pre(st) + '{"content":' + _j(text) + '},"logprobs":null,"finish_reason":null}]}\n\n').encode()

    def tail(self, st: dict, full: str) -> list[bytes]:
        pre = self._pre(st)
        if SPACED:
            return [(pre + '{}, "logprobs": null, "finish_reason": "stop"}]}\n\n').encode(),
                    (pre[:-len('{"index": 0, "delta": ')] + '], "usage": {"prompt_tokens": 9, '
                     '"completion_tokens": 2000, "total_tokens": 2009}}\n\n').encode(),
                    b"data: [DONE]\n\n"]
        return [(pre + '{},"logprobs":null,"finish_reason":"stop"}]}\n\n').encode(),
                (pre[:-len('{"index":0,"delta":')] + '],"usage":{"prompt_tokens":9,'
                 '"completion_tokens":2000,"total_tokens":2009}}\n\n').encode(),
                b"data: [DONE]\n\n"]

    def _spaced(self, st: dict) -> str:
        """The same, as Python's json.dumps writes it (with the spaces head, delta and tail
        splice in)."""
        if "pre" not in st:
            st["pre"] = ('data: {"id": "chatcmpl-' + _stream_id(st) + '", "object": "chat.completion.chunk", '
                         '"created": 1700000000, "model": "' + MODEL + '", '
                         '"choices": [{"index": 0, "delta": ')
        return st["pre"]

    def rewritten(self, body: bytes) -> bool:
        return b'"reasoning_content":"' in body or b'"reasoning":"' in body


class Messages(Shape):
    name, path = "messages", "/v1/messages"

    def request(self) -> dict:
        return {"model": MODEL, "stream": True, "max_tokens": 4096,
                "messages": [{"role": "user", "content": "hi"}]}

    def head(self, st: dict) -> list[bytes]:
        start = {"type": "message_start", "message": {
            "id": "msg_" + _stream_id(st), "type": "message", "role": "assistant", "model": MODEL,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 9, "output_tokens": 1}}}
        block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        return [f"event: message_start\ndata: {_c(start)}\n\n".encode(),
                f"event: content_block_start\ndata: {_c(block)}\n\n".encode(),
                b'event: ping\ndata: {"type":"ping"}\n\n']

    def delta(self, st: dict, text: str) -> bytes:
        return ('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                '"delta":{"type":"text_delta","text":' + _j(text) + '}}\n\n').encode()

    def tail(self, st: dict, full: str) -> list[bytes]:
        return [b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
                b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
                b'"stop_sequence":null},"usage":{"output_tokens":2000}}\n\n',
                b'event: message_stop\ndata: {"type":"message_stop"}\n\n']

    def rewritten(self, body: bytes) -> bool:
        return b'"thinking_delta"' in body


class Responses(Shape):
    name, path = "responses", "/v1/responses"

    def request(self) -> dict:
        return {"model": MODEL, "stream": True, "input": "hi"}

    def _ev(self, st: dict, obj: dict) -> bytes:
        seq = st.get("seq", 0)
        st["seq"] = seq + 1
        obj = {"type": obj["type"], "sequence_number": seq, **{k: v for k, v in obj.items() if k != "type"}}
        return f"event: {obj['type']}\ndata: {json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()

    def _resp(self, st: dict, status: str, output: list) -> dict:
        return {"id": "resp_" + _stream_id(st), "object": "response", "created_at": 1700000000, "status": status,
                "model": MODEL, "output": output, "usage": None if status != "completed" else
                {"input_tokens": 9, "output_tokens": 2000, "total_tokens": 2009}}

    def request_item(self, st: dict, status: str, text: str | None) -> dict:
        return {"id": "msg_" + _stream_id(st), "type": "message", "status": status, "role": "assistant",
                "content": [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]}

    def head(self, st: dict) -> list[bytes]:
        return [self._ev(st, {"type": "response.created", "response": self._resp(st, "in_progress", [])}),
                self._ev(st, {"type": "response.in_progress", "response": self._resp(st, "in_progress", [])}),
                self._ev(st, {"type": "response.output_item.added", "output_index": 0,
                              "item": self.request_item(st, "in_progress", None)}),
                self._ev(st, {"type": "response.content_part.added", "item_id": "msg_" + _stream_id(st),
                              "output_index": 0, "content_index": 0,
                              "part": {"type": "output_text", "text": "", "annotations": []}})]

    def delta(self, st: dict, text: str) -> bytes:
        seq = st.get("seq", 0)
        st["seq"] = seq + 1
        return ('event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
                f'"sequence_number":{seq},"item_id":"msg_{_stream_id(st)}","output_index":0,"content_index":0,'
                '"delta":' + _j(text) + ',"logprobs":[]}\n\n').encode()

    def tail(self, st: dict, full: str) -> list[bytes]:
        part = {"type": "output_text", "text": full, "annotations": []}
        item = self.request_item(st, "completed", full)
        return [self._ev(st, {"type": "response.output_text.done", "item_id": "msg_" + _stream_id(st), "output_index": 0,
                              "content_index": 0, "text": full, "logprobs": []}),
                self._ev(st, {"type": "response.content_part.done", "item_id": "msg_" + _stream_id(st), "output_index": 0,
                              "content_index": 0, "part": part}),
                self._ev(st, {"type": "response.output_item.done", "output_index": 0, "item": item}),
                self._ev(st, {"type": "response.completed", "response": self._resp(st, "completed", [item])})]

    def rewritten(self, body: bytes) -> bool:
        return b"response.reasoning_text.delta" in body or b"response.reasoning_summary_text.delta" in body


_GO = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


class Ollama(Shape):
    """Ollama's /api/chat as its Go server writes it: a line per token, `created_at` new on every
    line (nanoseconds, trailing zeros trimmed), `<`, `>`, `&` escaped, a final line with timings."""

    name, path = "ollama", "/api/chat"
    content_type, end = "application/x-ndjson", b"\n"

    def request(self) -> dict:
        return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}

    def _line(self, st: dict, message: str, done: str) -> bytes:
        n = st["n"] = st.get("n", 0) + 1
        frac = f"{(n * 5_003_117 + len(_stream_id(st))) % 10**9:09d}".rstrip("0") or "0"
        return ('{"model":"' + MODEL + f'","created_at":"2025-08-20T13:{n // 60 % 60:02d}:{n % 60:02d}.{frac}Z",'
                '"message":{"role":"assistant","content":' + message + '},"done":' + done + '}\n').encode()

    def head(self, st: dict) -> list[bytes]:
        return []

    def delta(self, st: dict, text: str) -> bytes:
        return self._line(st, _j(text).translate(_GO), "false")

    def tail(self, st: dict, full: str) -> list[bytes]:
        return [self._line(st, '""', 'true,"done_reason":"stop","total_duration":4883583458,'
                           '"load_duration":1019500,"prompt_eval_count":9,"prompt_eval_duration":342546000,'
                           '"eval_count":2000,"eval_duration":4535599000')]

    def rewritten(self, body: bytes) -> bool:
        return b'"thinking":"' in body


SHAPES: dict[str, Shape] = {s.name: s for s in (Chat(), Messages(), Responses(), Ollama())}
