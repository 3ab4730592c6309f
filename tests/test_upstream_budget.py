"""What one upstream response can cost the proxy at most (docs/budget.md, "Upstream responses"):
decoders capped, one event or line capped, held reasoning capped, learned shapes capped; and
what the client gets past each cap (read by the official SDK stream helpers where one applies)."""

from __future__ import annotations

import gzip
import json
import logging
import zlib

import brotli
import pytest
from hypothesis import example, given, settings, strategies as st

from conftest import make_ctx
from support import drive
from support import messages as msup
from support import responses as rsup
from thinkwire import decoding, engine, fastpath
from thinkwire.decoding import BODY_MAX, READ_MAX, TooLarge, decode_body, decoder_for
from thinkwire.ndjson import NDJSONParser
from thinkwire.sse import EVENT_MAX, SSEParser
from thinkwire.surfaces import chat, messages, ollama, responses

MiB = 1 << 20


def _zstd(data: bytes) -> bytes:
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    return zstd.compress(data)


def _deflate_raw(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


ENCODE = {"gzip": gzip.compress, "deflate": zlib.compress, "br": lambda d: brotli.compress(d, quality=5),
          "zstd": _zstd}


# -- decoders ------------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding", sorted(ENCODE))
def test_a_decoder_makes_at_most_its_cap_from_one_read(encoding):
    bomb = ENCODE[encoding](b"a" * (4 * MiB))
    d = decoder_for(encoding, limit=MiB)
    with pytest.raises(TooLarge) as e:
        d.decompress(bomb)
    assert e.value.head == b"a" * MiB


@pytest.mark.parametrize("encoding", sorted(ENCODE))
def test_a_decoder_under_its_cap_decodes_every_read_whole(encoding):
    data = b"".join(b"data: %d\n\n" % i for i in range(20000))
    packed = ENCODE[encoding](data)
    d = decoder_for(encoding, limit=len(data))
    out = b"".join(d.decompress(packed[i:i + 7]) for i in range(0, len(packed), 7)) + d.flush()
    assert out == data and d.ended()


def test_raw_deflate_and_zlib_wrapped_gzip_still_decode():
    assert decode_body(_deflate_raw(b"x" * 100), "deflate") == b"x" * 100
    assert decode_body(zlib.compress(b"y" * 100), "gzip") == b"y" * 100   # as mitmproxy reads gzip


def test_a_stream_bomb_ends_the_stream_after_the_capped_read():
    event = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"a" * (READ_MAX * 2) + b'"}}]}\n\n'
    ctx = make_ctx({"model": "m", "stream": True})
    d = engine.stream_driver(chat, ctx, decoder_for("br"))
    out = b"".join(d(brotli.compress(event, quality=5)) + d(b""))
    assert out == event[:READ_MAX]
    assert ctx.stats.broken == "one read decoded to more than 8 MiB"


def test_a_body_that_decodes_past_the_cap_is_not_decoded():
    assert decode_body(gzip.compress(b"a" * (BODY_MAX + 1)), "gzip") is None
    assert decode_body(b"a" * (BODY_MAX + 1), None) is None
    assert decode_body(gzip.compress(b"a" * BODY_MAX), "gzip") == b"a" * BODY_MAX


@pytest.mark.parametrize("encoding,cut", [("gzip", 4), ("gzip", 30), ("deflate", 2), ("br", 2), ("zstd", 2)])
def test_a_body_cut_before_its_encoding_ends_is_not_decoded(encoding, cut):
    """What decodes of a cut body is a prefix (here whole JSON: the padding after it is cut), and
    a prefix is never given as the body."""
    whole = b'{"choices":[{"index":0,"message":{"content":"<think>r</think>a"}}]}' + b" " * 4096
    with pytest.raises(decoding.BodyError) as e:
        decode_body(ENCODE[encoding](whole)[:-cut], encoding)
    assert str(e.value) == f"cannot decode the {encoding} body (truncated: it ends before its {encoding} stream does)"
    assert decode_body(ENCODE[encoding](whole), encoding) == whole


def test_an_empty_body_with_an_encoding_is_empty():
    assert decode_body(b"", "gzip") == b""


def test_a_stream_s_bytes_cut_short_are_read_as_far_as_they_decode():
    """(The reasoning memory reads a stream that broke off as the client got it.)"""
    assert decode_body(gzip.compress(b"data: a\n\n" * 1000)[:-4], "gzip", partial=True) == b"data: a\n\n" * 1000


def test_an_undecodable_body_names_its_encoding_and_no_byte_of_it():
    with pytest.raises(decoding.BodyError) as e:
        decode_body(b"\x1f\x8bSECRET-BYTES", "gzip")
    assert str(e.value) == "cannot decode the gzip body (error)"


# -- one event, one line -------------------------------------------------------------------------
def _chunks(data: bytes, sizes: list[int]) -> list[bytes]:
    out, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        out.append(data[i:i + n])
        i, k = i + n, k + 1
    return out


def _framed(parser, data: bytes, sizes: list[int]):
    """The events a parser frames from `data` read in `sizes`, and the most it held at once."""
    events, held = [], 0
    for c in _chunks(data, sizes):
        events += parser.feed(c)
        held = max(held, parser._held)
    return events + parser.finish(), held


@settings(max_examples=40, deadline=None)
@given(eol=st.sampled_from(["\n", "\r\n", "\r"]), sizes=st.lists(st.integers(1, 70000), min_size=1, max_size=5))
@example(eol="\r\n", sizes=[58, 1, 1])   # (the cap crossed in the read that ends at the blank line's CR)
@example(eol="\r", sizes=[58, 1, 1])
def test_an_event_past_the_cap_comes_out_as_it_came_and_the_next_is_read(eol, sizes):
    e = eol.encode()
    long_ev = b"data: " + b"x" * (EVENT_MAX + 10) + e + b"data: more" + e + e
    data = b"data: a" + e + e + long_ev + b"data: b" + e + e
    events, held = _framed(SSEParser(EVENT_MAX), data, sizes)
    assert held <= EVENT_MAX + max(sizes)
    assert b"".join(ev.raw for ev in events) == data
    assert [ev.data for ev in events if not ev.long] == ["a", "b"]
    assert b"".join(ev.raw for ev in events if ev.long) == long_ev


@settings(max_examples=20, deadline=None)
@given(sizes=st.lists(st.integers(1, 70000), min_size=1, max_size=5))
def test_an_ndjson_line_past_the_cap_comes_out_as_it_came(sizes):
    long_line = b'{"x":"' + b"x" * (EVENT_MAX + 10) + b'"}\n'
    data = b'{"a":1}\n' + long_line + b'{"b":2}\n'
    events, held = _framed(NDJSONParser(EVENT_MAX), data, sizes)
    assert held <= EVENT_MAX + max(sizes)
    assert b"".join(ev.raw for ev in events) == data
    assert [ev.data for ev in events if not ev.long] == ['{"a":1}', '{"b":2}']


def test_the_byte_path_does_not_take_a_chunk_past_the_cap():
    """A chunk that is one whole token delta but longer than an event may be: framed, capped."""
    ctx = make_ctx({"model": "m", "stream": True})

    def delta(t: str) -> bytes:
        return b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % t.encode()
    out, d = drive(chat, ctx, b"", [delta("a"), delta("b"), delta("c" * (EVENT_MAX + 1))])
    assert d.failure == "an event longer than 1 MiB" and out.endswith(delta("c" * (EVENT_MAX + 1)))


# -- failing open after renumbering --------------------------------------------------------------
def _nested(name: str) -> bytes:
    return f"event: {name}\ndata: {{\"type\":\"{name}\",\"x\":{'[' * 100000}{']' * 100000}}}\n\n".encode()


def test_a_json_event_nested_past_the_stack_is_malformed_and_the_rewrite_goes_on():
    objs = msup.stream_objs(msup.text("<think>why</think>the ", "answer"))
    k = next(i for i, o in enumerate(objs) if o.get("delta", {}).get("text") == "answer")
    data = b"".join(msup.sse_event(o) for o in objs[:k]) + _nested("ping") + \
        b"".join(msup.sse_event(o) for o in objs[k:])
    ctx = msup.ctx_for(signature="off")
    out, d = drive(messages, ctx, data)
    assert d.failure is None and ctx.stats.malformed_events == 1 and _nested("ping") in out
    final = msup.sdk_stream(out)   # (the SDK does not parse a ping)
    assert final["content"] == [{"type": "thinking", "thinking": "why"},
                                {"type": "text", "text": "the answer"}]


def bug_on(monkeypatch, cls, marker: bytes) -> None:
    """A bug in the rewriter on the event whose bytes hold `marker`, whichever path takes it (the
    byte path, `on_chunk`, or the full path, `on_event`)."""
    real_chunk, real_event = cls.on_chunk, cls.on_event

    def on_chunk(self, chunk):
        if marker in chunk:
            raise RuntimeError("a bug")
        return real_chunk(self, chunk)

    def on_event(self, ev):
        if marker in ev.raw:
            raise RuntimeError("a bug")
        return real_event(self, ev)
    monkeypatch.setattr(cls, "on_chunk", on_chunk)
    monkeypatch.setattr(cls, "on_event", on_event)


def test_messages_failing_open_after_renumbering_keeps_the_answer_on_its_text_block(monkeypatch):
    """A bug on the answer's second delta: from there the upstream's events pass, moved from
    its block 0 to the client's text block 1; the SDK's message has the whole answer."""
    objs = msup.stream_objs(msup.text("<think>why</think>the ", "answer"))
    data = b"".join(msup.sse_event(o) for o in objs)
    bug_on(monkeypatch, messages.StreamRewriter, b'"text": "answer"')
    ctx = msup.ctx_for(signature="off")
    out, d = drive(messages, ctx, data)
    assert d.failure == "the rewrite raised RuntimeError"
    final = msup.sdk_stream(out)
    assert final["content"] == [{"type": "thinking", "thinking": "why"},
                                {"type": "text", "text": "the answer"}]


def sdk_answers(stream: bytes) -> dict[int, str]:
    """The answer text the openai SDK's `responses.stream` has for each output_index at the end
    (the snapshot its output_text deltas build)."""
    snapshots = {}
    with rsup.sdk_client(stream).responses.stream(model=rsup.MODEL, input="q") as s:
        for ev in s:
            if ev.type == "response.output_text.delta":
                snapshots[ev.output_index] = ev.snapshot
    return snapshots


def test_responses_failing_open_after_renumbering_keeps_the_answer_on_its_message(monkeypatch):
    data = rsup.stream_of([rsup.msg(["<think>why</think>the ", "answer"])])
    bug_on(monkeypatch, responses.StreamRewriter, b'"delta": "answer"')
    ctx = make_ctx()
    out, d = drive(responses, ctx, data)
    assert d.failure == "the rewrite raised RuntimeError"
    assert sdk_answers(out) == {1: "the answer"}   # item 0 is the reasoning item


# -- held reasoning ------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["signed", "omitted", "redacted"])
def test_reasoning_past_the_hold_cap_goes_out_unsigned_and_whole(policy):
    reasoning = "r" * (messages.HOLD_MAX + 5000)
    chunks = ["<think>"] + [reasoning[i:i + 4096] for i in range(0, len(reasoning), 4096)] + ["</think>ok"]
    data = msup.stream(msup.text(*chunks))
    request = {"thinking": {"type": "adaptive", "display": "omitted"}} if policy == "omitted" else None
    ctx = msup.ctx_for(request, signature="signed" if policy == "omitted" else policy)
    rw = messages.StreamRewriter(ctx)
    held = 0
    out = []
    for ev in SSEParser().feed(data):
        out += rw.on_event(ev)
        held = max([held] + [sum(map(len, st.reasoning)) for st in rw.texts.values()])
    out += rw.finish()
    assert held <= messages.HOLD_MAX
    final = msup.sdk_stream(b"".join(out))
    assert final["content"] == [{"type": "thinking", "thinking": reasoning, "signature": ""},
                                {"type": "text", "text": "ok"}]


def test_reasoning_under_the_hold_cap_is_still_signed():
    ctx = msup.ctx_for(signature="signed")
    out, _ = drive(messages, ctx, msup.stream(msup.text("<think>short</think>ok")))
    sig = msup.sdk_stream(out)["content"][0]["signature"]
    assert msup.SEALER.open(sig).text == "short"


# -- learned shapes ------------------------------------------------------------------------------
def test_an_ollama_line_with_a_long_head_is_not_learned():
    """A learned shape holds the bytes around a line's text: one learned from an upstream's long
    line would keep them (and match them against every later line) for the whole stream."""
    pad = "p" * (fastpath.SHAPE_MAX + 1)
    lines = b"".join(json.dumps({"model": pad, "created_at": "2025-01-01T00:00:00Z", "message": {
        "role": "assistant", "content": c}, "done": False}, separators=(",", ":")).encode() + b"\n"
        for c in ("a", "b", "c"))
    out, d = drive(ollama, make_ctx({"model": "m"}), lines)
    assert out == lines and d.rewriter._shape_c is None


def test_a_short_ollama_line_is_still_learned():
    lines = b"".join(json.dumps({"model": "short", "created_at": "2025-01-01T00:00:00Z",
                                 "message": {"role": "assistant", "content": c}, "done": False},
                                separators=(",", ":")).encode() + b"\n" for c in ("a", "b", "c"))
    out, d = drive(ollama, make_ctx({"model": "m"}), lines)
    assert out == lines and d.rewriter._shape_c is not None


# -- what failing open logs ----------------------------------------------------------------------
def test_failing_open_logs_one_warning_without_body_text_or_traceback(caplog):
    ctx = make_ctx({"model": "m", "stream": True})

    def delta(t: str) -> bytes:
        return b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % t.encode()
    secret = "SECRET" * (EVENT_MAX // 6 + 1)
    with caplog.at_level(logging.INFO):
        drive(chat, ctx, b"", [delta("<think>a"), delta(secret), delta("b"), delta(secret)])
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warned] == [
        "thinkwire: stream rewrite failed, passing the rest through unchanged: an event longer than 1 MiB"]
    assert warned[0].exc_info is None and ctx.stats.fell_back == "an event longer than 1 MiB"


# -- numbers as the upstream wrote them ----------------------------------------------------------
NUMBERS = "[1e400,1E5,-1.5e-4,0.5,2,-0.0,1.50]"


@pytest.mark.parametrize("surface, body", [
    (chat, '{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",'
           '"content":"<think>r</think>a"},"logprobs":{"x":%s},"finish_reason":"stop"}]}'),
    (messages, '{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"<think>r</think>a"},'
               '{"type":"tool_use","id":"t","name":"f","input":{"x":%s}}],"stop_reason":"tool_use"}'),
    (responses, '{"id":"r","object":"response","status":"completed","output":[{"id":"msg_1","type":"message",'
                '"role":"assistant","content":[{"type":"output_text","text":"<think>r</think>a","annotations":[],'
                '"logprobs":[{"x":%s}]}]}]}'),
    (ollama, '{"model":"m","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant",'
             '"content":"<think>r</think>a"},"done":true,"x":%s}'),
])
def test_a_rewritten_body_keeps_numbers_as_the_upstream_wrote_them(surface, body):
    out = surface.rewrite_body((body % NUMBERS).encode(), make_ctx({"model": "m"}))
    assert out is not None and NUMBERS.encode() in out and b"Infinity" not in out


def test_a_rewritten_stream_event_keeps_numbers_as_the_upstream_wrote_them():
    ev = b'data: {"choices":[{"index":0,"delta":{"content":"<think>r</think>a"},"logprobs":{"x":%s}}]}\n\n' % \
        NUMBERS.encode()
    out, d = drive(chat, make_ctx({"model": "m", "stream": True}), ev)
    assert d.failure is None and b'"logprobs":{"x":%s}' % NUMBERS.encode() in out and b'"reasoning_content":"r"' in out


def test_a_responses_text_part_past_the_hold_cap_fails_open_on_the_clients_numbers():
    """Responses' done events repeat a part's whole text, so a stream holds it: past 1 Mi
    characters the stream fails open there, and the SDK still reads the whole answer."""
    answer = "a" * (responses.HOLD_MAX + 5000)
    chunks = ["<think>why</think>"] + [answer[i:i + 4096] for i in range(0, len(answer), 4096)]
    data = rsup.stream_of([rsup.msg(chunks)])
    ctx = make_ctx()
    out, d = drive(responses, ctx, data, _chunks(data, [65536]))
    assert d.failure == "a text part longer than 1 Mi characters"
    assert sdk_answers(out) == {1: answer}


def test_a_responses_stream_without_output_index_numbers_at_most_its_cap_of_items():
    """Events without an output_index (llama-server's) are numbered by their item's id: at most
    UNNUMBERED_MAX items of ids up to ID_MAX characters; past that an item passes as it came,
    its text unsplit."""
    from thinkwire.surfaces.responses import stream as rstream

    def item(iid, text=None):
        evs = [{"type": "response.output_item.added",
                "item": {"id": iid, "type": "message", "role": "assistant", "status": "in_progress", "content": []}}]
        if text is not None:
            evs += [{"type": "response.content_part.added", "item_id": iid, "part": {"type": "output_text", "text": ""}},
                    {"type": "response.output_text.delta", "item_id": iid, "delta": text}]
        return evs + [{"type": "response.output_item.done",
                       "item": {"id": iid, "type": "message", "role": "assistant", "status": "completed", "content": []}}]

    evs = [{"type": "response.created", "response": {"id": "r", "object": "response", "status": "in_progress"}}]
    for i in range(rstream.UNNUMBERED_MAX):
        evs += item(f"msg_{i}")
    rewriter = responses.StreamRewriter(make_ctx())
    out = [b for ev in SSEParser().feed(rsup.sse_bytes(evs)) for b in rewriter.on_event(ev)]
    assert len(rewriter._unnumbered) == rstream.UNNUMBERED_MAX
    assert json.loads(out[-1].split(b"data: ", 1)[1])["output_index"] == rstream.UNNUMBERED_MAX - 1
    past = rsup.sse_bytes(item("msg_past", "<think>x</think>y"))
    got = b"".join(b for ev in SSEParser().feed(past) for b in rewriter.on_event(ev))
    assert got == past and len(rewriter._unnumbered) == rstream.UNNUMBERED_MAX
    long_id = rsup.sse_bytes(item("m" * (rstream.ID_MAX + 1), "<think>x</think>y"))
    fresh = responses.StreamRewriter(make_ctx())
    assert b"".join(b for ev in SSEParser().feed(long_id) for b in fresh.on_event(ev)) == long_id
