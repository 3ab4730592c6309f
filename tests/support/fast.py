"""What the tests of the shortcuts share (test_fastpath.py, test_hot.py): each surface's upstream
stream of some text deltas, compact as servers send them (Ollama's: NDJSON lines as its Go server
writes them), and the stream callable run over it."""

import json
import re

from conftest import make_ctx
from thinkwire.decoding import decoder_for
from thinkwire.engine import PARSERS
from thinkwire.marks import PREFIX
from thinkwire.rules import Rules, TagPair
from thinkwire.stream import StreamDriver
from thinkwire.surfaces import chat, messages, ollama, responses
from support.ollama import chat_objs, stream_bytes

MODEL = "m"


def _d(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _ev(obj, name=None) -> bytes:
    return ((f"event: {name}\n" if name else "") + f"data: {_d(obj)}\n\n").encode()


# -- each surface's upstream stream of some text deltas ------------------------------------------
def chat_stream(texts):
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    def ch(delta, finish=None):
        return _ev(dict(head, choices=[{"index": 0, "delta": delta, "finish_reason": finish}]))
    return ([ch({"role": "assistant", "content": ""})] + [ch({"content": t}) for t in texts]
            + [ch({}, "stop"), b"data: [DONE]\n\n"])


def messages_stream(texts):
    def ev(obj):
        return _ev(obj, obj["type"])
    return ([ev({"type": "message_start", "message": {"id": "m1", "type": "message", "role": "assistant",
                                                      "model": MODEL, "content": []}}),
             ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
            + [ev({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})
               for t in texts]
            + [ev({"type": "content_block_stop", "index": 0}),
               ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}), ev({"type": "message_stop"})])


def responses_stream(texts, obfuscation=False):
    seq = iter(range(10_000))
    def ev(type_, **f):
        return _ev({"type": type_, "sequence_number": next(seq), **f}, type_)
    item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    full = "".join(texts)
    resp = {"id": "resp_1", "object": "response", "model": MODEL, "status": "in_progress", "output": []}
    out = [ev("response.created", response=resp),
           ev("response.output_item.added", output_index=0, item=item),
           ev("response.content_part.added", item_id="msg_1", output_index=0, content_index=0, part=part)]
    for k, t in enumerate(texts):
        extra = {"obfuscation": "abcd"[: k % 5]} if obfuscation else {}
        out.append(ev("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0,
                      delta=t, logprobs=[], **extra))
    done_part = dict(part, text=full)
    done_item = dict(item, status="completed", content=[done_part])
    out += [ev("response.output_text.done", item_id="msg_1", output_index=0, content_index=0, text=full,
               logprobs=[]),
            ev("response.content_part.done", item_id="msg_1", output_index=0, content_index=0, part=done_part),
            ev("response.output_item.done", output_index=0, item=done_item),
            ev("response.completed", response=dict(resp, status="completed", output=[done_item]))]
    return out


def ollama_stream(texts):
    """/api/chat's lines, `created_at` new on every one."""
    return stream_bytes(chat_objs(MODEL, texts))


SURFACES = {"chat": (chat, chat_stream), "messages": (messages, messages_stream),
            "responses": (responses, responses_stream),
            "responses+obfuscation": (responses, lambda t: responses_stream(t, obfuscation=True)),
            "ollama": (ollama, ollama_stream)}

_MARK = re.compile(re.escape(PREFIX.encode()) + rb"[A-Za-z0-9_-]+")


def run(surface, chunks, fast, sealer=None, request=None, c=False, encoding=None, **opts):
    """The bytes the client gets, and how many chunks the byte path answered (`c`: with the C
    callable of thinkwire.hot in front, the chunks it answered; `encoding`: the chunks are that
    Content-Encoding's, decoded by the driver)."""
    mod = SURFACES[surface][0]
    rw = mod.StreamRewriter(make_ctx(request, sealer, **opts), fast=fast)
    hits = []
    if fast and not c:
        real = rw.on_chunk
        def counted(chunk):
            got = real(chunk)
            hits.append(got is not None)
            return got
        rw.on_chunk = counted
    if c:
        settle = rw.settle
        def settled(got):
            hits.append(got[0])
            settle(got)
        rw.settle = settled
    d = StreamDriver(rw, decoder=decoder_for(encoding), parser=PARSERS[mod.STREAM_TYPE]())
    call = d.callable() if c else d
    assert (call is not d) == c
    out = b"".join(b for ch in chunks for b in call(ch)) + b"".join(call(b""))
    assert d.failure is None
    if sealer is not None:   # marks carry a random nonce: put what each opens to in its place
        out = _MARK.sub(lambda m: repr(sealer.open(m.group().decode())).encode(), out)
    return out, sum(hits)


def chunkings(events, rng):
    data = b"".join(events)
    glued = [b"".join(events[i:i + 2]) for i in range(0, len(events), 2)]
    halves = [h for e in events for h in (e[: len(e) // 2], e[len(e) // 2:])]
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, len(events))))
    rand = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
    return {"an event per chunk": events, "two events glued": glued, "events cut in half": halves,
            "random cuts": rand, "one chunk": [data]}


TOKENS = [" so", " the", " x", " >", " 0", "word ", "  ", " ", "\n", "\n\n", "<think>", "</think>", "<th",
          "ink>", "</thi", "nk>", "\u00e9t\u00e9", " \"q\"", "a\\b", " `code`", " [x]", "<", "b>", "\t", " \u2028",
          "[THINK]", "[/THINK]", "<tool_call>", "```", "\nok", " a <", " b"]

# Settings under which the shortcuts must agree with the full path too.
SETTINGS = {"trim off": {"trim": "off"}, "both chat fields": {"chat_field": "both"},
            "start inside": {"starts_inside": "on"}}


RULES = [Rules((TagPair("<think>", "</think>"), TagPair("[THINK]", "[/THINK]")), ends=("<tool_call>",)),
         Rules((TagPair("<think>", "</think>"),), trim=False),
         Rules((TagPair("<think>", "</think>"),), starts_inside=True),
         Rules((TagPair(" <t>", "</t>"),)),   # a tag that starts with whitespace
         Rules((TagPair("<think>", "</think>"),), strip=("<answer>",))]
