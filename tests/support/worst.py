"""Worst-case inputs, one set per path, as workloads whose work support.work counts.

Each workload is a function of a size n: it builds its input (not counted) and returns (a
callable that runs it once, the bytes it reads). n is a unit count (tags, characters, events);
the input grows linearly with it.
"""

from __future__ import annotations

import json
import re

from conftest import make_ctx
from support.ollama import go_json
from thinkwire.engine import PARSERS
from thinkwire.ndjson import NDJSONParser
from thinkwire.splitter import Splitter, split_text
from thinkwire.sse import SSEParser
from thinkwire.stream import StreamDriver
from thinkwire.surfaces import chat, messages, ollama, responses

WORKLOADS: dict = {}
SURFACES = {"chat": chat, "messages": messages, "responses": responses, "ollama": ollama}


def workload(name: str):
    def register(fn):
        WORKLOADS[name] = fn
        return fn
    return register


@workload("probe")
def _probe(n: int):
    return (lambda: sum(range(n))), n


# -- the splitter --------------------------------------------------------------------------------
SPLITTER = {
    # name: (text builder for n, feed size)
    "less-than signs, one chunk": (lambda n: "<" * n, 1 << 30),
    "less-than signs, 1 char a feed": (lambda n: "<" * n, 1),
    "<thi repeated, one chunk": (lambda n: "<thi" * n, 1 << 30),
    "<thi repeated, 3 chars a feed": (lambda n: "<thi" * n, 3),
    "</thi repeated inside a block": (lambda n: "<think>" + "</thi" * n, 1 << 30),
    "</thi repeated inside a block, 7 a feed": (lambda n: "<think>" + "</thi" * n, 7),
    "opening tags mid-line, one chunk": (lambda n: "a<think>" * n, 1 << 30),
    "opening tags in a code fence": (lambda n: "```\n" + "<think>x\n" * n, 1 << 30),
    "adjacent blocks, one chunk": (lambda n: "<think>a</think>" * n, 1 << 30),
    "whitespace inside a block, 1 char a feed": (lambda n: "<think>x" + " \n" * n + "</think>y", 1),
    "whitespace at the start, 1 char a feed": (lambda n: " \n" * n + "answer", 1),
    "whitespace after a block, 1 char a feed": (lambda n: "<think>x</think>" + "\n" * n + "y", 1),
    "unclosed block, 5 chars a feed": (lambda n: "<think>" + "abcde" * n, 5),
    "backtick runs in the answer, 2 a feed": (lambda n: "a " + "``" * n, 2),
    "backtick runs and closing tags in reasoning": (lambda n: "<think>" + "`` `</think>` x\n" * n, 1 << 30),
    "fence lines in reasoning, 3 chars a feed": (lambda n: "<think>" + "```\nx </think> y\n" * n, 3),
    "removed closing tags glued to the answer": (lambda n: "<think>a</think>" + "b</think>" * n, 1 << 30),
    "removed closing tags, 4 chars a feed": (lambda n: "<think>a</think>" + "b</think>" * n, 4),
    "tool-call markers quoted in reasoning": (lambda n: "<think>" + "I write a <tool_call> here. " * n, 1 << 30),
}


def _splitter(build, piece: int, model: str | None = None):
    def make(n: int):
        rules = make_ctx({"model": model} if model else None).rules()
        text = build(n)

        def run():
            sp = Splitter(rules)
            for i in range(0, len(text), piece):
                sp.feed(text[i:i + piece])
            sp.finish()
        return run, len(text.encode())
    return make


for _name, (_build, _piece) in SPLITTER.items():
    workload("splitter: " + _name)(_splitter(_build, _piece))
workload("splitter: gpt-oss strip markers mid-line")(
    _splitter(lambda n: "a<|channel|>final<|message|>" * n, 1 << 30, "gpt-oss-20b"))


@workload("splitter: a body's tool-call markers before the block closes")
def _markers_before_close(n: int):
    # A whole text looks ahead for the block's closing tag at a marker: once per block.
    rules = make_ctx({"model": "qwen3"}).rules()
    text = "<think>" + "x\n<tool_call>\n" * n + "</think>done"
    return (lambda: split_text(text, rules)), len(text.encode())


@workload("splitter: gpt-oss words at the start, 1 char a feed")
def _gpt_oss_words(n: int):
    rules = make_ctx({"model": "gpt-oss-20b"}).rules()
    text = "analysis" + "assistan " * n + "assistantfinal ok"

    def run():
        sp = Splitter(rules)
        for ch in text:
            sp.feed(ch)
        sp.finish()
    return run, len(text.encode())


# -- SSE framing ---------------------------------------------------------------------------------
SSE = {
    "one huge data line, 4 KiB reads": (lambda n: b"data: " + b"x" * (64 * n) + b"\n\n", 4096),
    "one event of many data lines, 4 KiB reads": (lambda n: b"data: xyzzy\n" * (8 * n) + b"\n", 4096),
    "many small events, 1 KiB reads": (lambda n: b"data: 1\n\n" * (8 * n), 1024),
    "bare CRs, 1 byte reads": (lambda n: b"\r" * n, 1),
    "a line of CR CR CR..., 4 KiB reads": (lambda n: b"data: " + b"x\r" * (16 * n), 4096),
}


def _framing(parser, build, piece: int):
    """A stream `build(n)` fed to a new `parser` in reads of `piece` bytes."""
    def make(n: int):
        data = build(n)

        def run():
            p = parser()
            for i in range(0, len(data), piece):
                p.feed(data[i:i + piece])
            p.finish()
        return run, len(data)
    return make


for _name, (_build, _piece) in SSE.items():
    workload("sse: " + _name)(_framing(SSEParser, _build, _piece))


# -- NDJSON framing (Ollama) ---------------------------------------------------------------------
NDJSON = {
    "one huge line, 4 KiB reads": (lambda n: b"{" + b"x" * (64 * n) + b"}\n", 4096),
    "many small lines, 1 KiB reads": (lambda n: b"{}\n" * (16 * n), 1024),
    "bare CRs, 1 byte reads": (lambda n: b"\r" * n, 1),
}


for _name, (_build, _piece) in NDJSON.items():
    workload("ndjson: " + _name)(_framing(NDJSONParser, _build, _piece))


# -- streams, through each path ------------------------------------------------------------------
def _d(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def stream(surface: str, texts: list[str]) -> list[bytes]:
    """A surface's upstream events (one chunk each) for a model writing `texts`, compact as
    servers send them (so the byte path and C learn their shape)."""
    if surface == "chat":
        head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        evs = [_d(dict(head, choices=[{"index": 0, "delta": d, "finish_reason": None}]))
               for d in [{"role": "assistant", "content": ""}] + [{"content": t} for t in texts]]
        return [f"data: {e}\n\n".encode() for e in evs] + [b"data: [DONE]\n\n"]
    if surface == "messages":
        objs = [{"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                      "model": "m", "content": []}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
        objs += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
                 for t in texts]
        objs += [{"type": "content_block_stop", "index": 0}, {"type": "message_stop"}]
        return [f"event: {o['type']}\ndata: {_d(o)}\n\n".encode() for o in objs]
    if surface == "ollama":   # (written as Ollama's Go server writes them, as the byte path and C learn them)
        line = {"model": "m", "created_at": "2025-08-20T13:48:22.164615Z", "message": {"role": "assistant"}}
        out = [(go_json(dict(line, message={"role": "assistant", "content": t}, done=False)) + "\n").encode()
               for t in texts]
        return out + [(go_json(dict(line, message={"role": "assistant", "content": ""}, done=True,
                                    done_reason="stop")) + "\n").encode()]
    seq = iter(range(1 << 30))
    item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    objs = [{"type": "response.created", "response": {"id": "r", "object": "response", "model": "m", "output": []}},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
             "part": part}]
    objs += [{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
              "delta": t} for t in texts]
    full = "".join(texts)
    done = dict(item, status="completed", content=[dict(part, text=full)])
    objs += [{"type": "response.output_item.done", "output_index": 0, "item": done},
             {"type": "response.completed", "response": {"id": "r", "object": "response", "model": "m",
                                                         "status": "completed", "output": [done]}}]
    return [f"event: {o['type']}\ndata: {_d(dict(o, sequence_number=next(seq)))}\n\n".encode() for o in objs]


def _through(path: str, surface: str, chunks: list[bytes]):
    """Run `chunks` through `path`: "c" what mitmproxy calls (the C callable in front where
    built), "byte" the Python driver with its byte path, "full" every event parsed in full."""
    mod = SURFACES[surface]

    def run():   # (framed as the surface's streams are: SSE, or Ollama's NDJSON lines)
        d = StreamDriver(mod.StreamRewriter(make_ctx(), fast=path != "full"), parser=PARSERS[mod.STREAM_TYPE]())
        call = d.callable() if path == "c" else d
        for c in chunks:
            call(c)
        call(b"")
        d.settle()
        assert d.failure is None, d.failure
    return run, sum(map(len, chunks))


# Streams that cost a path the most per byte, or that once were quadratic in C (an answer whose
# deltas end in the start of a tag: C re-read the texts it took since the arm for each).
STREAMS = {
    "deltas ending in the start of a tag (a<)": lambda n: ["<think>r</think>ok"] + ["a<"] * n,
    "one plain character a delta": lambda n: ["<think>r"] + ["x"] * n + ["</think>a"] + ["y"] * n,
    "whitespace-only deltas in reasoning": lambda n: ["<think>r"] + [" "] * n + ["x"],
    "a tag mid-line in each delta": lambda n: ["ok"] + [" a<think>b</think>"] * n,
    "adjacent blocks in one delta": lambda n: ["<think>a</think>" * n],
    "deltas past C's cap (16 KiB)": lambda n: ["<think>r"] + ["abc " * 4097] * n + ["</think>d"] + ["e\\n" * 8193] * n,
}

for _surface in SURFACES:
    for _path in ("c", "byte", "full"):
        for _name, _texts in STREAMS.items():
            workload(f"{_path} {_surface}: {_name}")(
                lambda n, s=_surface, p=_path, t=_texts: _through(p, s, stream(s, t(n))))


def _long_created_at(size: int):
    def build(n: int):
        lines = stream("ollama", ["<think>r"] + [" x"] * n + ["</think>a"] + [" y"] * n)
        return _through("c", "ollama", [re.sub(rb'"created_at":"[^"]*"', b'"created_at":"' + b"1" * size + b'"', line)
                                        for line in lines])
    return build


# The C part's string slot: read to its end, and copied into each reasoning line it writes (a line
# of 1,900 bytes is still learned: fastpath.SHAPE_MAX is 2,048 around the text).
workload("c ollama: a long created_at in each line")(_long_created_at(1800))
# Past SHAPE_MAX no shape is learned: each line takes the full path, and tries learning at no cost.
workload("c ollama: a created_at past the shape cap in each line")(_long_created_at(4000))
