"""The fast path (thinkwire.fastpath): the shortcuts give byte for byte what the full path gives.

The byte path works on a chunk that is one whole event; everything else takes on_event. So
the property: for any model output and any chunking (an event per chunk, two events glued,
events cut in half, random cuts), the stream callable with `fast=True` sends the same bytes as
with `fast=False` (every event parsed in full), on every surface.
"""

import json
import os
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import make_ctx
from thinkwire import hot
from thinkwire.fastpath import NUMBER_SLOT, OUT, ByteShape, dumps, loads_known, sharing_dumps, slot_text, text_slot
from thinkwire.marks import PREFIX, Sealer
from thinkwire.splitter import CONTENT, Rules, Splitter, TagPair
from thinkwire.stream import StreamDriver
from thinkwire.surfaces import chat, messages, responses

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


SURFACES = {"chat": (chat, chat_stream), "messages": (messages, messages_stream),
            "responses": (responses, responses_stream),
            "responses+obfuscation": (responses, lambda t: responses_stream(t, obfuscation=True))}

_MARK = re.compile(re.escape(PREFIX.encode()) + rb"[A-Za-z0-9_-]+")


def run(surface, chunks, fast, sealer=None, request=None, c=False, **opts):
    """The bytes the client gets, and how many chunks the byte path answered (`c`: with the C
    callable of thinkwire.hot in front, the chunks it answered)."""
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
    d = StreamDriver(rw)
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
token_lists = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=40)


@pytest.mark.parametrize("surface", SURFACES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=token_lists, seed=st.integers(0, 2**16))
def test_fast_and_full_paths_send_the_same_bytes_under_every_chunking(surface, texts, seed):
    events = SURFACES[surface][1](texts)
    for name, chunks in chunkings(events, random.Random(seed)).items():
        assert run(surface, chunks, True)[0] == run(surface, chunks, False)[0], name


SETTINGS = {"trim off": {"trim": "off"}, "both chat fields": {"chat_field": "both"},
            "start inside": {"starts_inside": "on"}}


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("opts", SETTINGS)
@pytest.mark.parametrize("seed", range(4))
def test_fast_and_full_paths_agree_under_other_settings(surface, opts, seed):
    rng = random.Random(seed)
    texts = ["<think>"] + [rng.choice(TOKENS) for _ in range(60)]
    events = SURFACES[surface][1](texts)
    for name, chunks in chunkings(events, rng).items():
        assert run(surface, chunks, True, **SETTINGS[opts])[0] == run(surface, chunks, False, **SETTINGS[opts])[0], name


@pytest.mark.parametrize("signature,request_", [("signed", None), ("redacted", None), ("off", None),
                                                ("signed", {"thinking": {"display": "omitted"}})])
def test_messages_marks_agree_on_both_paths(signature, request_):
    texts = ["<think>", "hm"] + [" w", " x "] * 20 + ["</think>", "ok", " fine"]
    events = messages_stream(texts)
    sealer = Sealer(b"k")
    fast, hits = run("messages", events, True, sealer, request_, signature=signature)
    assert fast == run("messages", events, False, sealer, request_, signature=signature)[0]
    assert hits >= 40


def test_responses_keeps_the_text_for_the_final_event():
    texts = ["<think>", "hm"] + [" w"] * 30 + ["</think>", "The"] + [" answer"] * 30
    events = responses_stream(texts, obfuscation=True)
    fast, hits = run("responses", events, True, request={"reasoning": {"summary": "auto"}})
    assert fast == run("responses", events, False, request={"reasoning": {"summary": "auto"}})[0]
    assert hits >= 55
    final = json.loads(fast.rsplit(b"data: ", 1)[1])
    assert final["response"]["output"][-1]["content"][0]["text"] == "The" + " answer" * 30


@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
def test_plain_tokens_take_the_byte_path_and_answer_text_leaves_as_it_came(surface):
    texts = ["<think>", "Okay"] + [" word", " and ", " more"] * 20 + ["</think>", "So"] + [" it", " is"] * 20
    events = SURFACES[surface][1](texts)
    fast, hits = run(surface, events, True)
    assert fast == run(surface, events, False)[0]
    assert hits >= 100    # every plain delta but the first of each kind, trailing spaces included
    answer = events[-42:-2] if surface == "chat" else []   # the answer deltas
    for e in answer:
        assert e in fast


@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
def test_escapes_line_ends_code_and_non_ascii_take_the_byte_path_too(surface):
    # What answers with code and reasoning in other languages are made of: only a tag's first
    # character sends a delta to the full path.
    tokens = [" a\n", "\tb", " \"q\"", " `x`", "```py\n", " \u00e9t\u00e9", " \u601d\u8003", " \\n"]
    texts = ["<think>", "Okay"] + tokens * 8 + ["</think>", "So"] + tokens * 8
    events = SURFACES[surface][1](texts)
    fast, hits = run(surface, events, True)
    assert fast == run(surface, events, False)[0]
    assert hits >= 2 * len(tokens) * 8 - 4


ODD_LITERALS = {"an empty text": b"", "a lone surrogate": b"\\ud800", "a surrogate pair": b"\\ud83d\\ude00",
                "bytes that are not UTF-8": b"\xff\xfe", "a tag's first character": b"a\\u003cb"}


@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
@pytest.mark.parametrize("odd", ODD_LITERALS)
def test_literals_the_byte_path_declines_give_what_the_full_path_gives(surface, odd):
    # Built as bytes: json.dumps writes none of these. In the block and in the answer.
    texts = ["<think>", "a", "ODD", " b", "</think>", "c", "ODD", " d"]
    events = [e.replace(b'"ODD"', b'"' + ODD_LITERALS[odd] + b'"') for e in SURFACES[surface][1](texts)]
    fast, hits = run(surface, events, True)
    assert fast == run(surface, events, False)[0]
    if odd == "a surrogate pair":   # valid JSON for one character: it takes the byte path
        assert "\U0001f600".encode() in fast


@pytest.mark.parametrize("surface", ["chat", "messages"])
def test_held_whitespace_in_front_of_a_shorter_kept_text_is_escaped(surface):
    # "\t" is held; "b  " then gives "\tb": no longer than the literal, but not a start of it.
    events = SURFACES[surface][1](["<think>", "a", "\t", "b  ", "c", "</think>", "x"])
    fast = run(surface, events, True)[0]
    assert fast == run(surface, events, False)[0]
    assert b"\t" not in fast and b"\\tb" in fast


def test_a_byte_shape_matches_the_ids_it_learned_and_no_others():
    rules = RULES[0]
    shape = ByteShape(b"event: d\ndata: ", "d", [b'{"seq":', b',"item_id":"msg_a","n":0,"delta":', b'}'],
                      [NUMBER_SLOT, text_slot(rules)])
    def chunk(seq, item, text):
        return b'event: d\ndata: {"seq":%s,"item_id":%s,"n":0,"delta":%s}\n\n' % (seq, item, text)
    m = shape.match(chunk(b"12", b'"msg_a"', b'"hi"'))
    assert m is not None and m[shape.groups[0]] == b"12" and slot_text(m, shape.groups[1], rules) == ("hi", True)
    assert shape.match(chunk(b"12", b'"msg_b"', b'"hi"')) is None      # another item
    assert shape.match(chunk(b"12", b'"msg_\\"a"', b'"hi"')) is None  # an escape: the full path reads it
    assert shape.match(chunk(b"012", b'"msg_a"', b'"hi"')) is None     # not a JSON number
    assert shape.match(chunk(b"12", b'"msg_a"', b'"h"i"')) is None     # not one string
    ev = shape.event(chunk(b"1", b'"msg_a"', b'"x"'))
    assert (ev.event, ev.data) == ("d", '{"seq":1,"item_id":"msg_a","n":0,"delta":"x"}')


def test_responses_with_two_messages_of_the_same_shape_agree_on_both_paths():
    one = responses_stream(["<think>", "a", " b", "</think>", "c", " d"])
    two = [e.replace(b"msg_1", b"msg_2").replace(b'"output_index":0', b'"output_index":1')
           for e in responses_stream(["<think>", "e", " f", "</think>", "g", " h"])]
    # One response: its first item's events, then the second item's, numbered in order.
    seq = iter(range(1000))
    events = [re.sub(rb'"sequence_number":\d+', lambda m: b'"sequence_number":%d' % next(seq), e)
              for e in [one[0]] + one[1:-1] + two[1:-1] + [one[-1]]]
    for name, chunks in chunkings(events, random.Random(5)).items():
        assert run("responses", chunks, True)[0] == run("responses", chunks, False)[0], name


def test_events_framed_otherwise_take_the_full_path_only():
    # `data:` without its space parses the same, but the shortcut sends canonical frames only.
    events = [e.replace(b"data: ", b"data:") for e in chat_stream(["<think>", "a", " b", "</think>", "c", " d"])]
    fast, hits = run("chat", events, True)
    assert hits == 0 and fast == run("chat", events, False)[0]


def test_responses_renumbers_repeated_sequence_numbers_on_both_paths():
    # A server that repeats a number: what goes out must still increase, the shortcut included.
    events = [re.sub(rb'"sequence_number":\d+', b'"sequence_number":7', e) if b"output_text.delta" in e else e
              for e in responses_stream(["<think>", "a", " b", " c", "</think>", "d", " e", " f"])]
    fast, hits = run("responses", events, True)
    assert hits and fast == run("responses", events, False)[0]
    numbers = [int(n) for n in re.findall(rb'"sequence_number":(\d+)', fast)]
    assert numbers == sorted(set(numbers))


def test_sharing_dumps_writes_what_dumps_writes():
    share = sharing_dumps(keep=2)
    longs = ["x%d\n\u00e9\"" % k * 400 for k in range(4)]
    for text in longs + longs[::-1]:   # (more than it keeps: the oldest go)
        obj = {"a": text, "b": [text, "short", 1], "c": {"d": text[:10]}}
        assert share(obj) == dumps(obj)


def test_sharing_dumps_reuses_a_literal_it_is_given():
    share = sharing_dumps(keep=2)
    text = "y" * 2000
    share.known(text, '"given"')          # (a wrong literal, to see that it is the one used)
    share.known("short", '"given"')       # short strings are written each time
    assert share({"a": text, "b": "short"}) == '{"a":"given","b":"short"}'
    share.known(text, '"other"')          # the first one stays
    assert share([text]) == '["given"]'


@pytest.mark.parametrize("summary", [None, "auto"])
def test_responses_long_texts_go_out_with_the_literals_the_c_callable_kept(summary):
    # Over 1 KB of reasoning and of answer, with escapes, most of it taken in C: the done
    # events and response.completed write each whole text from the literals kept as it came.
    texts = ["<think>", "Hm"] + [" w\n", "\t\"x\"", " <", " y"] * 120 + ["</think>", "A"] + [" b\n\n", " c"] * 300
    events = responses_stream(texts)
    request = {"reasoning": {"summary": summary}} if summary else None
    fast, hits = run("responses", events, True, request=request, c=hot.available())
    assert hits > 600 and fast == run("responses", events, False, request=request)[0]
    final = json.loads(fast.rsplit(b"data: ", 1)[1])["response"]["output"]
    assert final[-1]["content"][0]["text"] == "A" + " b\n\n c" * 300


# loads_known: a JSON text that repeats a known string literal, parsed without reading it.
KNOWN = "x" * 70 + ' "quoted" \\ back\nslash \u00e9t\u00e9'


@pytest.mark.parametrize("data,reads", [
    (_d({"text": KNOWN, "n": 1}), True),
    (_d({"a": [KNOWN, {"b": KNOWN}], "c": "x"}), True),
    (_d({"a": "pre" + KNOWN}), False),                 # the text's start, inside another string
    (_d({"a": KNOWN + "post"}), False),
    (_d({"a": _d(KNOWN)}), False),                     # its literal, escaped inside another string
    (_d({KNOWN: 1}), False),                           # a key
    (_d({"a": KNOWN, "m": "\x00thinkwire-known\x00"}), False),   # the mark was there before
    (_d({"a": KNOWN, "e": "\x00"}), False),           # (any \u escape left: parsed in full)
    (_d({"a": "y" * 80}), False),
    (_d({"a": KNOWN})[:-1], False),                    # not JSON: the caller parses, and counts it
    (_d([KNOWN]), True),
    (_d(KNOWN), False),                                # not in an object or a list
])
def test_loads_known_parses_as_json_loads_or_leaves_it_to_it(data, reads):
    got = loads_known(data, _d(KNOWN), KNOWN)
    if reads:
        assert got == json.loads(data)
    else:
        assert got is None


@settings(max_examples=300, deadline=None)
@given(known=st.text(min_size=64, max_size=120), other=st.text(max_size=80),
       where=st.lists(st.sampled_from(["value", "list", "nested", "inside", "key", "other"]), min_size=1, max_size=5))
def test_loads_known_agrees_with_json_loads(known, other, where):
    obj: dict = {}
    for k, w in enumerate(where):
        v = {"value": known, "list": [1, known], "nested": {"a": [known]}, "inside": other + known + other,
             "other": other}.get(w, 0)
        obj[known + str(k) if w == "key" else f"k{k}"] = v
    data = _d(obj)
    got = loads_known(data, _d(known), known)
    assert got is None or got == json.loads(data)


@pytest.mark.parametrize("c", [False, True])
def test_responses_done_events_are_read_with_the_text_the_deltas_brought(monkeypatch, c):
    read = []
    real = responses.stream.loads_known
    monkeypatch.setattr(responses.stream, "loads_known", lambda *a: read.append(real(*a)) or read[-1])
    texts = ["<think>", "hm"] + [" x", " \"q\"\n"] * 400 + ["</think>", "so"] + [" a", " <", " b"] * 400
    events = responses_stream(texts)
    got = run("responses", events, True, c=c)[0]
    assert len(read) == 4 and all(type(r) is dict for r in read)   # the four done events
    monkeypatch.setattr(responses.stream, "loads_known", lambda *a: None)
    assert got == run("responses", events, True, c=c)[0] == run("responses", events, False)[0]


@pytest.mark.parametrize("c", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.sampled_from(TOKENS + ["x" * 300, " y" * 200, "\u00e9" * 100, "\x01"]), min_size=1,
                      max_size=30))
def test_responses_done_events_read_with_the_known_text_as_in_full(monkeypatch, c, texts):
    events = responses_stream(["<think>", "hm"] + texts + ["x" * 1100])
    with_known = run("responses", events, True, c=c)[0]
    monkeypatch.setattr(responses.stream, "loads_known", lambda *a: None)
    assert with_known == run("responses", events, True, c=c)[0]
    monkeypatch.undo()


def test_the_out_error_handler_only_encodes():
    assert "a\ud800\udcff".encode("utf-8", OUT) == b"a\\ud800\xff"
    with pytest.raises(UnicodeDecodeError):
        b"\xff".decode("utf-8", OUT)


def native_streams():
    """Streams whose upstream reasons natively: thinkwire passes them as they come."""
    msg = [_ev({"type": "message_start", "message": {"id": "m1", "type": "message", "role": "assistant",
                                                   "model": MODEL, "content": []}}, "message_start"),
           _ev({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
               "content_block_start")]
    msg += [_ev({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": t}},
                "content_block_delta") for t in ["a", " <think>b", "\u00e9"] * 5]
    msg += [_ev({"type": "content_block_stop", "index": 0}, "content_block_stop"), _ev({"type": "message_stop"}, "message_stop")]
    resp = responses_stream(["<think>", "a", "</think>", "b"])
    item = _ev({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
                "item": {"id": "rs_1", "type": "reasoning", "summary": []}}, "response.output_item.added")
    return {"messages": msg, "responses": [resp[0], item] + resp[1:]}


@pytest.mark.parametrize("surface", ["messages", "responses"])
@pytest.mark.parametrize("seed", range(3))
def test_a_native_reasoning_stream_passes_as_it_came_on_both_paths(surface, seed):
    events = native_streams()[surface]
    for name, chunks in chunkings(events, random.Random(seed)).items():
        fast, hits = run(surface, chunks, True)
        assert fast == run(surface, chunks, False)[0] == b"".join(events), name
        if name == "an event per chunk":
            assert hits >= len(events) - 3    # unparsed, once the native block is seen


# -- Splitter.plain: what feed does for a plain text -------------------------------------------------
RULES = [Rules((TagPair("<think>", "</think>"), TagPair("[THINK]", "[/THINK]")), ends=("<tool_call>",)),
         Rules((TagPair("<think>", "</think>"),), trim=False),
         Rules((TagPair("<think>", "</think>"),), starts_inside=True),
         Rules((TagPair(" <t>", "</t>"),)),   # a tag that starts with whitespace
         Rules((TagPair("<think>", "</think>"),), strip=("<answer>",))]


def _state(s: Splitter):
    return {k: getattr(s, k) for k in Splitter.__slots__ if k != "rules"}


@pytest.mark.parametrize("rules", RULES, ids=range(len(RULES)))
@settings(max_examples=150, deadline=None)
@given(texts=st.lists(st.sampled_from(TOKENS + ["x", " y ", "z  ", "  w"]), max_size=40))
def test_splitter_plain_gives_what_feed_gives(rules, texts):
    def plain(text):   # what the byte path hands Splitter.plain
        return not rules.may_hold_tag(text)
    a, b = Splitter(rules), Splitter(rules)
    for t in texts:
        before = _state(b)
        want = a.feed(t)
        got = b.plain(t) if t and plain(t) else None
        if got is None:
            assert _state(b) == before
            b.feed(t)
        else:
            assert [got] == want
        assert _state(b) == _state(a)
    assert a.finish() == b.finish()


def test_splitter_plain_keeps_trailing_whitespace_held_like_feed():
    s = Splitter(RULES[0], starts_inside=True)
    assert s.feed("a") == [(0, "a")]
    assert s.plain(" b ") == (0, " b")
    assert s.plain(" c") == (0, "  c")
    assert s.plain("  ") is None          # whitespace only: feed holds it
    assert s.feed("</think>x") == [(2, TagPair("<think>", "</think>")), (1, "x")]


def test_splitter_plain_declines_where_feed_must_decide():
    s = Splitter(RULES[0])
    assert s.plain("x") is None           # the start of the output: trimming may apply
    s.feed("<think>")
    assert s.plain("x") is None           # a block's first text: leading whitespace is trimmed
    s.feed("a<")
    assert s.plain("x") is None           # a partial tag is held


def test_the_answer_is_steady_with_the_start_of_a_tag_held():
    # What thinkwire.hot holds in C as the splitter does: `took` then leaves feed's state.
    a, b = Splitter(RULES[0]), Splitter(RULES[0])
    for s in (a, b):
        s.feed("<think>a</think>ok")
    assert a.steady() == CONTENT and a.held_tag() == "" and a.code() == (0, "ok")
    assert a.feed(" x <") == [(CONTENT, " x ")]
    b.took(CONTENT, " x ", "<")
    assert _state(a) == _state(b) and a.held_tag() == "<" and a.steady() == CONTENT
    assert a.feed(" y `z") == [(CONTENT, "< y `z")]
    b.took(CONTENT, "< y `z")
    assert _state(a) == _state(b) and a.code() == (1, "ok x < y")
    assert a.feed(" <") == [(CONTENT, " <")] and a.held_tag() == ""   # in code nothing is held
    a.feed("`\n```py\n")
    assert a.code() == (2, "") and a.steady() == CONTENT
    # A start held that the C callable does not hold: the splitter decides each text.
    kimi = Rules((TagPair("<think>", "</think>"), TagPair("\u25c1think\u25b7", "\u25c1/think\u25b7")))
    assert kimi.hot_tags[-1] == "\u25c1/think\u25b7".encode()
    s = Splitter(kimi)
    s.feed("<think>a</think>ok \u25c1")
    assert s.held_tag() is None and s.steady() is None
    assert Rules((TagPair('<t a="1">', "</t>"),)).hot_tags == ()   # (a quote is escaped in JSON)


def test_an_error_in_the_byte_path_fails_open_with_the_chunk_and_the_rest_as_they_came():
    class Broken(chat.StreamRewriter):
        def on_chunk(self, chunk):
            got = super().on_chunk(chunk)
            if got is not None and b"boom" in chunk:
                raise RuntimeError("boom")
            return got
    events = chat_stream(["<think>", "a", " b", " boom", " c", "</think>", "d"])
    d = StreamDriver(Broken(make_ctx()))
    out = [d(e) for e in events] + [d(b"")]
    assert d.failure == "RuntimeError: boom"
    k = 4   # the role chunk, then "<think>", "a", " b": the fourth text chunk raised
    assert b"".join(out[k]).endswith(events[k])
    assert [b"".join(o) for o in out[k + 1:-1]] == events[k + 1:]


def test_a_rewriter_built_with_fast_off_takes_no_shortcut():
    for mod in (chat, messages, responses):
        rw = mod.StreamRewriter(make_ctx(), fast=False)
        d = StreamDriver(rw)
        assert d._on_chunk is None


# -- the C callable (thinkwire.hot) ---------------------------------------------------------------
# Where the extension is built, `StreamDriver.callable()` puts `_hot.Hot` in front of the driver:
# it answers steady plain deltas itself. The same property: the same bytes as the full path.
needs_c = pytest.mark.skipif(hot.Hot is None, reason="thinkwire._hot is not built")


def test_the_c_callable_is_built_here():
    # ./scripts/test builds it (pip install -e . compiles addon/thinkwire/_hot.c); without a C
    # compiler thinkwire runs on Python alone, and every test below is skipped.
    assert hot.Hot is not None, "thinkwire._hot is not built: is there a C compiler (gcc)?"


@needs_c
@pytest.mark.parametrize("surface", SURFACES)
@settings(max_examples=int(os.environ.get('HOT_EXAMPLES', 60)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.sampled_from(TOKENS + [" steady", " state", " words", "x ", "longer text"]),
                      min_size=1, max_size=60), seed=st.integers(0, 2**16))
def test_the_c_callable_sends_the_same_bytes_under_every_chunking(surface, texts, seed):
    events = SURFACES[surface][1](texts)
    for name, chunks in chunkings(events, random.Random(seed)).items():
        assert run(surface, chunks, True, c=True)[0] == run(surface, chunks, False)[0], name


@needs_c
@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("opts", SETTINGS)
@pytest.mark.parametrize("seed", range(4))
def test_the_c_callable_agrees_under_other_settings(surface, opts, seed):
    rng = random.Random(seed)
    texts = ["<think>"] + [rng.choice(TOKENS + [" steady", " words"] * 6) for _ in range(80)]
    events = SURFACES[surface][1](texts)
    for name, chunks in chunkings(events, rng).items():
        assert run(surface, chunks, True, c=True, **SETTINGS[opts])[0] == run(surface, chunks, False, **SETTINGS[opts])[0], name


# Answer text where the start of a tag ends a delta, in and out of code (the C callable holds it
# as the splitter does, and holds none in code).
CODE_TOKENS = ["```", "~~~", "\n", "\n\n", " `", "`", "x`", " a <", " b", " <", "</", "th", "ink>", "x", "  ",
               " ``", "py\n", "[/TH", "INK]", "<<", " c"]


CODE_CASES = {"a fence opens": ["\n", "```", "\n", " a <", " b"],
              "after its indent": ["\n", "  ~~~", "py\n", " a <", " b"],
              "and closes": ["\n", "```", "\n", "x", "\n", "```", "\n", " a <", " b"],
              "a code span": [" `", "x <", " b`", " a <", " b"],
              "a line end closes a code span": [" `x", "\n", " a <", " b"],
              "not at a line start": [" ```", "\n", " a <", " b"],
              "a backslash, then n": [" `x\\", "n <", " b"]}


@needs_c
@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
def test_what_is_held_counts_in_the_line_it_goes_out_on(surface):
    # "~~~" is held (the start of "~~~<"), then goes out in front of a line end: a fence opens,
    # and the start of a tag ("~") after it in the fenced block is not held.
    texts = ["~~~<", "hm", "~~~>", "ok", " x", "\n", "~~~", "\n a ~", " b", " c", " d"]
    events = SURFACES[surface][1](texts)
    got, hits = run(surface, events, True, c=True, think_tags="~~~< ~~~>")
    assert got == run(surface, events, False, think_tags="~~~< ~~~>")[0]
    assert hits >= 3


@needs_c
@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("case", CODE_CASES)
def test_the_c_callable_holds_the_start_of_a_tag_out_of_code_only(surface, case):
    events = SURFACES[surface][1](["<think>", "hm", "</think>", "ok", " x"] + CODE_CASES[case] + [" c", " d"])
    got, hits = run(surface, events, True, c=True)
    assert got == run(surface, events, False)[0]
    if surface != "responses+obfuscation":   # (a third slot: it has no C callable)
        assert hits >= len(CODE_CASES[case]) - 2   # the tokens after the first of the answer, but a few


@needs_c
@pytest.mark.parametrize("surface", SURFACES)
@settings(max_examples=int(os.environ.get('HOT_EXAMPLES', 60)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.sampled_from(CODE_TOKENS), min_size=1, max_size=60), seed=st.integers(0, 2**16))
def test_the_c_callable_holds_the_start_of_a_tag_as_the_full_path_does(surface, texts, seed):
    events = SURFACES[surface][1](["<think>", "hm", "</think>", "ok"] + texts)
    for name, chunks in chunkings(events, random.Random(seed)).items():
        assert run(surface, chunks, True, c=True)[0] == run(surface, chunks, False)[0], name


STEADY = ["<think>", "Okay, so"] + [" word", " and", " more"] * 20 + ["</think>", "So here it is:"] + [" it", " is"] * 20


@needs_c
@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
@pytest.mark.parametrize("opts", [{}, {"chat_field": "both"}, {"trim": "off"}])
def test_steady_deltas_are_answered_in_c(surface, opts):
    request = {"reasoning": {"summary": "auto"}} if surface == "responses" else None   # two channels
    events = SURFACES[surface][1](STEADY)
    fast, hits = run(surface, events, True, request=request, c=True, **opts)
    assert fast == run(surface, events, False, request=request, **opts)[0]
    assert hits >= 100   # all but the first of the block and of the answer (and the tags)
    if surface == "chat":
        for e in events[-41:-2]:   # the answer deltas
            assert e in fast


@needs_c
@pytest.mark.parametrize("signature,request_", [("signed", None), ("redacted", None), ("off", None),
                                                ("signed", {"thinking": {"display": "omitted"}})])
def test_messages_marks_agree_with_the_c_callable(signature, request_):
    texts = ["<think>", "hm"] + [" w", " x"] * 20 + ["</think>", "ok", " fine"]
    events = messages_stream(texts)
    sealer = Sealer(b"k")
    got, hits = run("messages", events, True, sealer, request_, c=True, signature=signature)
    assert got == run("messages", events, False, sealer, request_, signature=signature)[0]
    live = signature != "redacted" and request_ is None   # thinking streams as it comes
    assert hits >= 38 if live else hits <= 2   # (the answer only)
    if signature != "off":   # the mark opens to the thinking text (sealed from the literals kept)
        assert ("Opened(text=%r" % ("hm" + " w x" * 20)).encode() in got


@needs_c
def test_responses_keeps_the_text_and_numbers_with_the_c_callable():
    texts = ["<think>", "hm"] + [" w"] * 30 + ["</think>", "The answer"] + [" answer"] * 30
    events = [re.sub(rb'"sequence_number":(\d+)', lambda m: b'"sequence_number":%d' % (int(m[1]) // 3), e)
              for e in responses_stream(texts)]   # numbers repeated: what goes out must still increase
    fast, hits = run("responses", events, True, request={"reasoning": {"summary": "auto"}}, c=True)
    assert fast == run("responses", events, False, request={"reasoning": {"summary": "auto"}})[0]
    assert hits >= 50
    final = json.loads(fast.rsplit(b"data: ", 1)[1])
    assert final["response"]["output"][-1]["content"][0]["text"] == "The answer" + " answer" * 30
    numbers = [int(n) for n in re.findall(rb'"sequence_number":(\d+)', fast)]
    assert numbers == sorted(set(numbers))


@needs_c
def test_responses_sequence_number_after_the_text_is_read_too():
    # vLLM writes a delta's keys in alphabetical order: the number comes after the text.
    def reorder(e):
        if b"output_text.delta" not in e:
            return e
        obj = json.loads(e.split(b"data: ", 1)[1])
        return _ev(dict(sorted(obj.items())), obj["type"])
    events = [reorder(e) for e in responses_stream(STEADY)]
    fast, hits = run("responses", events, True, c=True)
    assert fast == run("responses", events, False)[0] and hits >= 100


@needs_c
def test_the_counts_of_a_stream_cut_short_are_folded_in_by_settle():
    # A client that goes away: no last chunk. The addon settles before it counts.
    events = chat_stream(STEADY)[:50]
    counts = []
    for c in (False, True):
        ctx = make_ctx()
        d = StreamDriver(chat.StreamRewriter(ctx))
        call = d.callable() if c else d
        for e in events:
            call(e)
        d.settle()
        counts.append(ctx.tally().reasoning_chars)
    assert counts[0] == counts[1] > 100


@needs_c
def test_settling_at_the_end_of_a_flow_never_raises(caplog):
    class Broken(chat.StreamRewriter):
        def settle(self, got):
            raise RuntimeError("boom")
    d = StreamDriver(Broken(make_ctx()))
    call = d.callable()
    for e in chat_stream(STEADY)[:20]:
        call(e)
    assert d.hot.hits
    d.settle()   # (the addon, in its response and error hooks)
    assert d.failure is None


@needs_c
@pytest.mark.parametrize("where", ["settle", "hot"])
def test_an_error_around_the_c_callable_fails_open(where):
    class Broken(chat.StreamRewriter):
        def settle(self, got):
            if where == "settle":
                raise RuntimeError("boom")
            super().settle(got)

        def hot(self):
            spec = super().hot()
            if where == "hot" and spec is not None and self.choices[0].splitter.reasoning_chars > 40:
                raise RuntimeError("boom")
            return spec
    events = chat_stream(STEADY)
    d = StreamDriver(Broken(make_ctx()))
    call = d.callable()
    out = b"".join(b for e in events for b in call(e)) + b"".join(call(b""))
    assert d.failure == "RuntimeError: boom"
    assert out.endswith(b"".join(events[-3:]))   # the rest as it came
    assert b'"content":" is"' in out


def test_the_c_callable_is_off_with_thinkwire_hot_0(monkeypatch):
    monkeypatch.setenv("THINKWIRE_HOT", "0")
    d = StreamDriver(chat.StreamRewriter(make_ctx()))
    assert d.callable() is d and not hot.available()


@needs_c
def test_a_compressed_stream_gets_no_c_callable():
    from thinkwire.stream import decoder_for
    d = StreamDriver(chat.StreamRewriter(make_ctx()), decoder_for("gzip"))
    assert d.callable() is d


# The C type alone: what it takes, and what it leaves to the fallback.
def _hot(spec_kw=None, **kw):
    rules = RULES[0]
    calls = []
    h = hot.Hot(lambda chunk: calls.append(chunk) or [b"FALLBACK"])
    pre, post = b'data: {"n":', b'}\n\n'
    h.arm(hot.spec(rules, pre, post, **(spec_kw or {})), kw.get("offset", 0), kw.get("last", 0))
    return h, calls


@needs_c
def test_hot_passes_a_plain_literal_and_leaves_anything_else():
    h, calls = _hot({"collect": True})
    taken = [b"hi there", b"ab", b'a\\nb\\t\\"q\\"\\\\', b"\\r\\b\\f"]   # json.dumps writes these escapes so
    for body in taken:
        chunk = b'data: {"n":"%s"}\n\n' % body
        got = h(chunk)
        assert got == [chunk] and got[0] is chunk
    # (A backtick or a tilde: code spans and fences are the splitter's to read.)
    others = [b'"', b'a\\u0041', b'a\\/', b'a\\x', b'a\\', b"a<b", b"\xc3\xa9", b'a"b', b"a\tb", b"a\x7fb", b"a`b",
              b"a~b"]
    for other in [b'data: {"n":"%s"}\n\n' % o for o in others] + [
            b'data: {"n":"ab}\n\n', b'data: {"x":"ab"}\n\n', b'data: {"n":"ab"}\n', b"", b'"', b'data: {"n":""}\n\n',
            bytearray(b'data: {"n":"ab"}\n\n')]:
        assert h(other) == [b"FALLBACK"]
    assert len(calls) == len(others) + 7
    got = h.take()   # the texts joined, and as they came: json.dumps's literal of that text
    assert got == (4, 0, 21, b'hi thereaba\nb\t"q"\\\r\b\f', 0, 0, b"",
                   b'hi thereaba\\nb\\t\\"q\\"\\\\\\r\\b\\f')
    assert '"%s"' % hot.literal(got) == dumps(got[3].decode())
    assert h.take() == (0, 0, 0, None, 0, 0, b"", None) and h.hits == 0


def test_hot_takes_an_escape_only_where_its_character_starts_no_tag():
    table = hot.allowed(Rules((TagPair('"', "\n"),)))
    assert not table[ord('"')] & 2 and not table[ord("n")] & 2 and table[ord("t")] & 2
    assert table[ord("n")] & 1 and table[ord("`")] == 0 and table[ord("~")] == 0 and table[ord("<")] & 1


@needs_c
def test_hot_fills_a_template_and_keeps_the_texts():
    h, _ = _hot({"out": hot.template([b"<", b"|", b">"]), "collect": True, "trim": True})
    assert h(b'data: {"n":"ab"}\n\n') == [b"<ab|ab>"]
    assert h(b'data: {"n":"cd "}\n\n') == [b"FALLBACK"]   # trailing space, trimming: the splitter's
    assert h(b'data: {"n":" ef"}\n\n') == [b"< ef| ef>"]
    assert h.take() == (2, 2, 5, b"ab ef", 0, 0, b"", b"ab ef")


@needs_c
def test_hot_holds_trailing_whitespace_as_the_splitter_does():
    rules = RULES[0]
    h = hot.Hot(lambda chunk: [b"FALLBACK"])
    spec = hot.spec(rules, b"<", b">", hot.template([b"[", b"]"]), collect=True, trim=True, hold=True)
    h.arm(spec, 0, 0, hot.held(" \n"))   # held by the splitter before
    assert h(b'<"a\\n\\n">') == [b"[ \\na]"]            # what was held, then the text; its end held
    assert h(b'<" \\t">') == [b"FALLBACK"]                # whitespace alone: the splitter's
    assert h(b'<"b \\\\n ">') == [b"[\\n\\nb \\\\n]"]    # (an escaped backslash then n is text)
    assert h.take() == (2, 2, 9, b" \na\n\nb \\n", 0, 0, b" ", b" \\na\\n\\nb \\\\n")
    assert hot.unheld(b" \\r\\f") == " \r\f" and hot.unheld(b"") == ""
    with pytest.raises(ValueError):
        h.arm(spec, 0, 0, b" " * 65)
    no_hold = hot.spec(rules, b"<", b">", hot.template([b"[", b"]"]), trim=True)
    h.arm(no_hold)
    assert h(b'<"a ">') == [b"FALLBACK"] and h(b'<"a">') == [b"[a]"]


def _answer_hot(code=0, head=b"", held=b""):
    """The C type armed for answer text as it came, holding the start of a tag as the splitter does."""
    rules = RULES[0]   # <think> </think> [THINK] [/THINK], and <tool_call> (it ends reasoning only)
    h = hot.Hot(lambda chunk: [b"FALLBACK"])
    pre, post = b'data: {"n":', b'}\n\n'
    h.arm(hot.spec(rules, pre, post, collect=True, **hot.as_it_came(pre, post), **hot.answer(rules)),
          0, 0, held, code, head)
    return h


def _n(body: bytes) -> bytes:
    return b'data: {"n":"%s"}\n\n' % body


@needs_c
def test_hot_holds_the_start_of_a_tag_in_the_answer_as_the_splitter_does():
    h = _answer_hot()
    plain = _n(b"so a")
    assert h(plain)[0] is plain                        # nothing held: as it came
    assert h(_n(b"a <")) == [_n(b"a ")]                 # the start of <think> (or </think>): held
    assert h(_n(b" b")) == [_n(b"< b")]                 # text after all: in front of the next text
    assert h(_n(b"x </th")) == [_n(b"x ")]
    assert h(_n(b"ere")) == [_n(b"</there")]
    assert h(_n(b"y [/THI")) == [_n(b"y ")]
    assert h.take() == (6, 5, 20, b"so aa < bx </therey ", 0, 0, b"[/THI", b"so aa < bx </therey ")
    # Where the splitter decides: a tag, or the start of one, going on from what is held; a text
    # with nothing before the start of a tag, or with another tag's character in it.
    for held, body in [(b"<", b"think>x"), (b"<", b"th"), (b"</th", b"ink>"), (b"[/THI", b"NK]"),
                       (b"<", b"x <b"), (b"", b"<"), (b"", b"a <b"), (b"", b"a [x"), (b"", b"a <<"),
                       (b"<", b"")]:
        assert _answer_hot(held=held)(_n(body)) == [b"FALLBACK"], (held, body)
    assert _answer_hot(held=b"<")(_n(b"<<x")) == [b"FALLBACK"]   # (a tag's character: not taken)
    # <tool_call> ends reasoning only: in the answer "<tool" starts no tag, and a tag's first
    # character that is not the start of one at the text's end is the splitter's to read.
    assert _answer_hot()(_n(b"a <tool")) == [b"FALLBACK"]
    with pytest.raises(ValueError):
        _answer_hot(head=b"123456789")
    # A backtick is the splitter's to read (code spans).
    h = _answer_hot()
    assert h(_n(b"`x")) == [b"FALLBACK"] and h(_n(b"a <")) == [_n(b"a ")]


@needs_c
@pytest.mark.parametrize("code,head,bodies,held", [
    (1, b"", [b"a <"], False),                      # in a code span: the splitter holds nothing
    (2, b"", [b"a <"], False),                      # in a fenced block
    (1, b"", [b"x\\n a <"], True),                # a line end closes a code span
    (2, b"~~~", [b"\\na <"], True),               # the line the splitter had begun
    (0, b"```", [b"\\n a <"], False),
])
def test_hot_holds_no_start_of_a_tag_in_code(code, head, bodies, held):
    h = _answer_hot(code=code, head=head)
    for body in bodies[:-1]:
        assert h(_n(body)) == [_n(body)]
    last = h(_n(bodies[-1]))
    assert last == ([_n(bodies[-1][:-1])] if held else [b"FALLBACK"])


@needs_c
@pytest.mark.parametrize("num_pos", [1, 2])
def test_hot_numbers_as_the_sequencer_does(num_pos):
    rules = RULES[0]
    h = hot.Hot(lambda chunk: [b"FALLBACK"])
    pre, mid, post = b"{", b",", b"}\n\n"
    def chunk(seq, text):
        return b"{%s,%s}\n\n" % ((seq, text) if num_pos == 1 else (text, seq))
    out = ((b"[", hot.PART_N, b']"', hot.PART_BODY, b'"') if num_pos == 1 else
           (b'"', hot.PART_BODY, b'"[', hot.PART_N, b"]"))
    own = hot.spec(rules, pre, post, out, num_pos=num_pos, mid=mid, seq_mode=hot.SEQ_OWN, pass_same=True)
    h.arm(own, 0, 4)
    assert h(chunk(b"5", b'"a"')) == [chunk(b"5", b'"a"')]                   # its own number: as it came
    assert h(chunk(b"5", b'"b"')) == [b'[6]"b"' if num_pos == 1 else b'"b"[6]']   # a repeat: the next
    assert h(chunk(b"6", b'"c"'))[0] in (b'[7]"c"', b'"c"[7]')               # the offset stays
    for bad in [b"05", b"-1", b"x", b"", b"1234567890123456789"]:
        assert h(chunk(bad, b'"d"')) == [b"FALLBACK"]
    assert h.take() == (3, 2, 3, None, 1, 7, b"", None)
    two = (b"<", hot.PART_N, b":", hot.PART_BODY, b"><", hot.PART_N1, b":", hot.PART_BODY, b">")
    h.arm(hot.spec(rules, pre, post, two, num_pos=num_pos, mid=mid, seq_mode=hot.SEQ_NEW, channels=2), 1, 7)
    assert h(chunk(b"7", b'"e"')) == [b"<8:e><9:e>"]
    assert h.take()[4:] == (2, 9, b"", None)


@needs_c
def test_hot_refuses_a_bad_spec_and_disarms():
    rules = RULES[0]
    h, calls = _hot()
    assert h.armed is not None
    good = hot.spec(rules, b"a", b"b")
    for bad in [good[:5], (1,) + good[1:], good[:4] + (b"short",) + good[5:],
                good[:1] + (1,) + good[2:],                  # a number slot without numbering
                good[:6] + ((b"x", 7),) + good[7:],          # an unknown part code
                good[:6] + ((b"x", hot.PART_N),) + good[7:],   # a number with no numbering
                hot.spec(rules, b"a", b"b", (b"x", hot.PART_N1), num_pos=1, seq_mode=hot.SEQ_NEW),  # one channel
                hot.spec(rules, b"a", b"b", tags=(b"<t>",), collect=True),            # tags, no template
                hot.spec(rules, b"a", b"b", (b"x",), tags=(b"<t>",)),                 # ... not collected
                hot.spec(rules, b"a", b"b", (b"x",), tags=(b"<t>",), collect=True, trim=True),  # in reasoning
                hot.spec(rules, b"a", b"b", (b"x",), tags=(b"<t>",) * 65, collect=True),
                hot.spec(rules, b"a", b"b", (b"x",), tags=(b"<" * 65,), collect=True),
                hot.spec(rules, b"a", b"b", (b"x",), tags=(b"",), collect=True),
                hot.spec(rules, b"a", b"b", (b"x",), tags=("<t>",), collect=True),
                hot.spec(rules, b"a", b"b", (b"x",), tags=[b"<t>"], collect=True)]:
        with pytest.raises((TypeError, ValueError)):
            h.arm(bad)
        assert h.armed is None
    h.arm(good)
    h.disarm()
    assert h(b'a"x"b') == [b"FALLBACK"] and h.armed is None
    with pytest.raises(TypeError):
        hot.Hot(1)
    for args, kw in [((b"a", b"b"), {}), ((b"a",), {"x": 1}), ((), {})]:
        with pytest.raises(TypeError):
            h(*args, **kw)
    with pytest.raises(RuntimeError):   # (not initialised: called through its tp_call)
        hot.Hot.__new__(hot.Hot)(b"a")


@needs_c
def test_a_driver_and_its_c_callable_are_collected_together():
    import gc
    import weakref
    d = StreamDriver(chat.StreamRewriter(make_ctx()))
    call = d.callable()
    for e in chat_stream(STEADY)[:20]:
        call(e)
    ref = weakref.ref(d)
    del d, call
    gc.collect()
    assert ref() is None
