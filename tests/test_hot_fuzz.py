"""Differential fuzz of the C part: hostile streams through the C callable, the Python byte path and
the full path (`StreamRewriter(ctx, fast=False)`) must give the same bytes, under every chunking.

Hostile: sequence numbers at the limits of a long long and past them, repeated or going back;
NUL and control bytes in every field (ids, the model, the event name, the text, raw or escaped;
Ollama's `created_at`, the C part's string slot, with escapes, huge and empty values too);
tags whose first character is unusual (a backtick, a quote, a backslash, a NUL, a letter, a
non-ASCII one); runs of "a<"; huge texts (past C's cap) and empty ones; lone surrogates and
bytes that are not UTF-8; and every cut of a stream in two. Each property counts the chunks C
took and must have given it some. CI also runs this module under ASan and UBSan
(devtools/sanitize.py). THINKWIRE_FUZZ_EXAMPLES sets the examples per property (default 30).
"""

from __future__ import annotations

import json
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import make_ctx
from thinkwire import hot
from thinkwire.engine import PARSERS
from thinkwire.ndjson import NDJSONParser
from thinkwire.sse import SSEParser
from thinkwire.stream import StreamDriver
from thinkwire.surfaces import chat, messages, ollama, responses
from support.ollama import created_at, go_json

pytestmark = pytest.mark.skipif(not hot.available(), reason="thinkwire._hot is not built (or THINKWIRE_HOT=0)")

SURFACES = {"chat": chat, "messages": messages, "responses": responses, "ollama": ollama}
TAKEN: dict[str, int] = {}   # chunks C took, per property
EXAMPLES = int(os.environ.get("THINKWIRE_FUZZ_EXAMPLES", "30"))

# Tag pairs (THINK_TAGS) whose first characters a literal holds as escapes, or as bytes C must not take.
TAGS = ["<think> </think>", "`T` `/T`", '"q" "/q"', "\\[ \\]", "\x00a \x00b", "~~~< ~~~>", "\u00e9< \u00e9>",
        "x< x>", "<think> </think>,[T] [/T]"]
NUMBERS = [0, 0, 0, 1, 10**18 - 3, 2**62, 2**63 - 4, 2**63 + 5, 2**64 - 2, 10**30]
# Field values with NUL and control characters (escaped in JSON), quotes, backslashes, non-ASCII.
ODD = ["c", "", "a\x00b", "\x01\x1f\x7f", 'q"\\', "\u00e9\u2028", "\ud800", "x" * 300]
# Event names with bytes an SSE line may hold (all but CR and LF).
NAMES = [None, b"x\x00y", b"\x01\x7f\xff", b"\xc3\xa9", b"a:b", b" lead"]
# Ollama's created_at (the C part's string slot): a timestamp mostly, then NUL and control
# characters, escapes, a byte of no timestamp, non-ASCII, empty, huge (past C's cap), a number.
STAMPS = ["\x00", "1\x1f", '1"2', "1\\", "\n", "1/2", "\u00e9", "", "9" * (hot.CAP + 5), "2025-08-20T13:48:22Z", 7,
          None]


def _texts(tags: str) -> list[str]:
    """Deltas a hostile model writes under `tags`: plain words, tag pieces, "a<" runs, control and
    non-ASCII characters, whitespace runs, empty and huge ones."""
    pieces = [t for pair in tags.split(",") for tag in pair.split() for t in (tag, tag[:2], tag[1:], tag[:-1])]
    return pieces + [" word", " so", "x", "a<", "<", "a <", "a<" * 40, "\x00", "a\x00b", "\x01", "\x7f", '"', "\\",
                     "\\n", "\n", "\n\n", "\t", " ", "   ", " \n ", "\u00e9", "\u2028", "\ud800", "\udcff", "`", "``",
                     "```\n", "~~~", "", "y" * (hot.CAP + 10), "z " * 3000, "<tool_call>"]


def _d(obj, ascii_only: bool) -> bytes:
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _frame(name: bytes | None, data: bytes) -> bytes:
    return (b"event: " + name + b"\n" if name is not None else b"") + b"data: " + data + b"\n\n"


def ollama_lines(texts: list[str], odd: str, stamps: list, go: bool) -> list[bytes]:
    """/api/chat's lines with `odd` as the model and created_at a timestamp but where `stamps`
    (cycled) gives another value (None: the field left out); written as Ollama's Go server
    writes them (`go`), else by json.dumps (`<`, `>`, `&` as they are: not how the byte path and
    C learn a line, but how a later one may come)."""
    def line(k: int, t: str, done: bool) -> bytes:
        stamp = stamps[k % len(stamps)] if stamps and k % 3 == 2 else created_at(k)
        obj = {"model": odd, "created_at": stamp, "message": {"role": "assistant", "content": t}, "done": done}
        if stamp is None:
            del obj["created_at"]
        return (go_json(obj).encode("utf-8", "surrogatepass") if go else _d(obj, False)) + b"\n"
    return [line(k, t, False) for k, t in enumerate(texts)] + [line(len(texts), "", True)]


def stream(surface: str, texts: list[str], odd: str, name: bytes | None, seq0: int, step: int,
           ascii_only: bool, stamps: list = ()) -> list[bytes]:
    """One event per delta, compact as servers send them, with `odd` in the ids and model, `name`
    as every event's name, and Responses numbered from `seq0` by `step`; Ollama's lines with the
    created_at values of `stamps` (Go's encoding unless `ascii_only`: then json.dumps's)."""
    if surface == "ollama":
        return ollama_lines(texts, odd, list(stamps), not ascii_only)

    def ev(obj, own_name=None):
        return _frame(name if name is not None else own_name, _d(obj, ascii_only))
    if surface == "chat":
        head = {"id": odd, "object": "chat.completion.chunk", "created": 1, "model": odd}
        return ([ev(dict(head, choices=[{"index": 0, "delta": d, "finish_reason": None}]))
                 for d in [{"role": "assistant", "content": ""}] + [{"content": t} for t in texts]]
                + [ev(dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])), b"data: [DONE]\n\n"])
    if surface == "messages":
        objs = [{"type": "message_start", "message": {"id": odd, "type": "message", "role": "assistant", "model": odd,
                                                      "content": []}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
        objs += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}} for t in texts]
        objs += [{"type": "content_block_stop", "index": 0},
                 {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, {"type": "message_stop"}]
        return [ev(o, o["type"].encode()) for o in objs]
    seq = iter(range(seq0, seq0 + step * (len(texts) + 10), step) if step else [seq0] * (len(texts) + 10))
    item = {"id": odd, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    objs = [{"type": "response.created", "response": {"id": odd, "object": "response", "model": odd, "output": []}},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.content_part.added", "item_id": odd, "output_index": 0, "content_index": 0,
             "part": part}]
    objs += [{"type": "response.output_text.delta", "item_id": odd, "output_index": 0, "content_index": 0, "delta": t,
              "logprobs": []} for t in texts]
    full = "".join(texts)
    done = dict(item, status="completed", content=[dict(part, text=full)])
    objs += [{"type": "response.output_text.done", "item_id": odd, "output_index": 0, "content_index": 0, "text": full},
             {"type": "response.output_item.done", "output_index": 0, "item": done},
             {"type": "response.completed", "response": {"id": odd, "object": "response", "model": odd,
                                                         "status": "completed", "output": [done]}}]
    return [ev({"type": o["type"], "sequence_number": next(seq), **o}, o["type"].encode()) for o in objs]


def through(path: str, surface: str, chunks: list[bytes], **opts) -> tuple[bytes, int, str | None]:
    """The bytes the client gets on `path` ("c", "byte", "full"), the chunks C took, the failure."""
    mod = SURFACES[surface]
    rw = mod.StreamRewriter(make_ctx(**opts), fast=path != "full")
    taken = [0]
    if path == "c":
        settle = rw.settle
        rw.settle = lambda got: taken.__setitem__(0, taken[0] + got[0]) or settle(got)
    d = StreamDriver(rw, parser=PARSERS[mod.STREAM_TYPE]())
    call = d.callable() if path == "c" else d
    assert (call is not d) == (path == "c" and hot.available())
    out = []
    for c in chunks:
        got = call(c)
        assert isinstance(got, list) and all(isinstance(b, bytes) and b for b in got)
        out += got
    out += call(b"")
    return b"".join(out), taken[0], d.failure


def chunkings(events: list[bytes], rng: random.Random) -> dict[str, list[bytes]]:
    data = b"".join(events)
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, len(events))))
    return {"an event per chunk": events, "two glued": [b"".join(events[i:i + 2]) for i in range(0, len(events), 2)],
            "cut in half": [h for e in events for h in (e[:len(e) // 2], e[len(e) // 2:]) if h],
            "random cuts": [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]}


def events_of(data: bytes, surface: str) -> list:
    """Each event's (each Ollama line's) name and JSON value (its data where that is not JSON)."""
    p = NDJSONParser() if surface == "ollama" else SSEParser()
    out = []
    for e in p.feed(data) + p.finish():
        try:
            out.append((e.event, json.loads(e.data)))
        except (TypeError, ValueError):
            out.append((e.event, e.data))
    return out


def agree(prop: str, surface: str, events: list[bytes], rng: random.Random, canonical: bool = True, **opts) -> None:
    """C and the Python byte path give the same bytes, and so does the full path, which writes the
    events it changes anew: where the upstream writes JSON otherwise than json.dumps does (escapes
    non-ASCII: not `canonical`), the same events, read as JSON."""
    for name, chunks in chunkings(events, rng).items():
        c, taken, cf = through("c", surface, chunks, **opts)
        byte, _, bf = through("byte", surface, chunks, **opts)
        full, _, ff = through("full", surface, chunks, **opts)
        assert c == byte, name
        assert c == full if canonical else events_of(c, surface) == events_of(full, surface), name
        assert cf == bf == ff is None, (cf, bf, ff)
        TAKEN[prop] = TAKEN.get(prop, 0) + taken


FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def hostile(draw):
    tags = draw(st.sampled_from(TAGS))
    # Between the hostile texts, plain words: steady stretches for the C part to take.
    words = st.lists(st.sampled_from([" word", " so", " y", "z", "\n", " `q`", " a>b&c"]), min_size=1, max_size=6)
    texts = draw(st.lists(st.one_of(st.sampled_from(_texts(tags)).map(lambda t: [t]), words), min_size=1, max_size=20))
    texts = [t for run in texts for t in run]
    texts = [draw(st.sampled_from(["<think>", tags.split()[0]]))] + texts
    return (tags, texts, draw(st.sampled_from(ODD)), draw(st.sampled_from(NAMES)), draw(st.sampled_from(NUMBERS)),
            draw(st.sampled_from([1, 1, 1, 0, 2])), draw(st.booleans()), draw(st.booleans()),
            draw(st.lists(st.sampled_from(STAMPS), max_size=4)), draw(st.integers(0, 2**16)))


@pytest.mark.parametrize("surface", sorted(SURFACES))
@FUZZ
@given(case=hostile())
def test_hostile_streams_give_the_same_bytes_on_every_path(surface, case):
    tags, texts, odd, name, seq0, step, ascii_only, trim, stamps, seed = case
    events = stream(surface, texts, odd, name, seq0, step, ascii_only, stamps)
    agree(f"hostile streams ({surface})", surface, events, random.Random(seed), not ascii_only, tags=tags,
          trim="on" if trim else "off")


@pytest.mark.parametrize("surface", sorted(SURFACES))
@FUZZ
@given(n=st.integers(1, 120), words=st.lists(st.sampled_from([" a", "b ", "\\n", " \\t", "`x`", "```\\n"]), max_size=8),
       seed=st.integers(0, 2**16))
def test_runs_of_a_less_than_give_the_same_bytes_on_every_path(surface, n, words, seed):
    # What was quadratic in C (finding 1): the answer's deltas ending in the start of a tag,
    # between plain ones, in and out of code.
    texts = ["<think>", "r", "</think>", "ok"] + (["a<"] + [json.loads(f'"{w}"') for w in words]) * n
    agree(f"runs of a< ({surface})", surface, stream(surface, texts, "c", None, 0, 1, False), random.Random(seed))


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_every_cut_of_a_hostile_stream_in_two_gives_the_same_bytes(surface):
    texts = ["<think>", "r\x00", " a", " b ", "\\", "`/T`", "\ud800", " c", "</think>", "ok", " a<", "b", " \u00e9",
             " d"]
    # (Responses: the numbers pass 10**18 mid-stream, where C stops reading them. Ollama: a
    # created_at with a NUL, one with an escaped quote, an empty one.)
    events = stream(surface, texts, "a\x00b", b"x\x00y" if surface == "chat" else None, 10**18 - 12, 1, False,
                    ["\x00", '1"2', ""])
    data = b"".join(events)
    want = through("full", surface, [data], tags="`T` `/T`")[0]
    for k in range(1, len(data)):   # (what mitmproxy calls: C in front of the Python paths)
        assert through("c", surface, [data[:k], data[k:]], tags="`T` `/T`")[0] == want, k
    got, taken, _ = through("c", surface, events, tags="`T` `/T`")
    assert got == want and taken > 0


def test_zz_the_c_part_took_chunks_in_every_property():
    """Each property above that ran gave the C part chunks, and it took some (run with -s to see)."""
    if not TAKEN:
        pytest.skip("no property of this module ran")
    for prop, k in sorted(TAKEN.items()):
        print(f"\nfuzz figure: chunks taken in C ({prop}): {k}")
    assert all(k > 0 for k in TAKEN.values()), TAKEN
