"""The fast path (thinkwire.fastpath): the shortcuts give byte for byte what the full path gives.

The byte path works on a chunk that is one whole event; everything else takes on_event. So
the property: for any model output and any chunking (an event per chunk, two events glued,
events cut in half, random cuts), the stream callable with `fast=True` sends the same bytes as
with `fast=False` (every event parsed in full), on every surface.
"""

import gzip
import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import make_ctx
from thinkwire import hot
from thinkwire.fastpath import NUMBER_SLOT, ByteShape, slot_text, text_slot
from thinkwire.jsonio import OUT, dumps, loads_known, sharing_dumps
from thinkwire.marks import Sealer
from thinkwire.rules import TagPair
from thinkwire.shapes import SPECS_MAX, TEXT, Delta, Lane
from thinkwire.splitter import CONTENT, REASONING, Splitter, Text
from thinkwire.stream import StreamDriver
from thinkwire.surfaces import chat, messages, responses
from support.fast import (MODEL, RULES, SETTINGS, SURFACES, TOKENS, _d, _ev, chat_stream, chunkings, messages_stream,
                          responses_stream, run)

token_lists = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=40)


@pytest.mark.parametrize("surface", SURFACES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=token_lists, seed=st.integers(0, 2**16))
def test_fast_and_full_paths_send_the_same_bytes_under_every_chunking(surface, texts, seed):
    events = SURFACES[surface][1](texts)
    for name, chunks in chunkings(events, random.Random(seed)).items():
        assert run(surface, chunks, True)[0] == run(surface, chunks, False)[0], name


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


@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
@pytest.mark.parametrize("odd", ODD_LITERALS)
def test_a_shape_learned_from_a_delta_the_byte_path_cannot_read_fails_nothing(surface, odd):
    # The first delta, the one a shape is learned from, holds the odd literal (a Responses stream
    # whose first delta was bytes that are not UTF-8 failed open: the shape's probe read them).
    texts = ["ODD", "a", " b", "<think>", "c", "</think>", "d"]
    events = [e.replace(b'"ODD"', b'"' + ODD_LITERALS[odd] + b'"') for e in SURFACES[surface][1](texts)]
    for chunks in (events, [b"".join(events)]):
        assert run(surface, chunks, True)[0] == run(surface, chunks, False)[0]   # (run: no failure)


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


@pytest.mark.parametrize("surface", ["chat", "messages", "responses", "ollama"])
@pytest.mark.parametrize("how", ["two events glued", "events cut in half", "one chunk", "gzip"])
def test_events_the_parser_frames_take_the_byte_path_too(surface, how):
    # A chunk that holds several events or part of one, or a compressed stream: each whole event
    # the parser frames goes to the byte path (thinkwire.stream), as a chunk of one event does.
    texts = ["<think>", "Okay"] + [" word", " and ", " more"] * 10 + ["</think>", "So"] + [" it", " is"] * 10
    events = SURFACES[surface][1](texts)
    want, aligned = run(surface, events, True)
    if how == "gzip":
        z = gzip.compress(b"".join(events))
        got, hits = run(surface, [z[k:k + 64] for k in range(0, len(z), 64)], True, encoding="gzip")
    else:
        got, hits = run(surface, chunkings(events, random.Random(1))[how], True)
    assert got == want
    assert hits >= aligned - 4   # (a chunk the byte path declined is not tried again as its event)


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
    c = c and hot.available()
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
    c = c and hot.available()
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


def _state(s: Splitter):
    return {k: getattr(s, k) for k in Splitter.__slots__ if k != "rules"}


def test_splitter_plain_leaves_what_feed_leaves_after_the_models_own_opening_tag():
    # The template opened the block; the model writes its own tag after a line: a text after it
    # that ends in whitespace goes to feed's full path, and plain takes it: the same state after.
    a, b = Splitter(RULES[2]), Splitter(RULES[2])
    for t in ["x\n", "<think>"]:
        assert a.feed(t) == b.feed(t)
    assert a.feed("word ") == [b.plain("word ")] == [Text(REASONING, "word")]
    assert _state(a) == _state(b)


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


def test_steady_states_hold_nothing_but_whitespace_in_reasoning():
    s = Splitter(RULES[0])
    s.feed("<think>a</think>ok")
    assert s.steady() == CONTENT
    s.feed(" x <")   # the start of a tag held: the splitter decides the next text
    assert s.steady() is None
    s.feed("b")
    assert s.steady() == CONTENT
    s = Splitter(RULES[0], starts_inside=True)
    assert s.steady() is None   # a block's first text: its leading whitespace is trimmed
    s.feed("a \n")
    assert s.steady() == REASONING and s.held_ws() == " \n"
    s.feed(" </thi")
    assert s.steady() is None and s.held_ws() is None


# Texts thinkwire.hot takes in C: no character a tag or marker of the rules starts with.
C_TEXTS = [" word", "x", " `", "``", "`code` ", "\n", "\n\n", "   ", " \t", "```py\n", "~~~", "  ~~~\n", "end ",
           "\u00e9t\u00e9", "a\\b", " \"q\""]


@pytest.mark.parametrize("rules", RULES, ids=range(len(RULES)))
@settings(max_examples=150, deadline=None)
@given(texts=st.lists(st.sampled_from(TOKENS + C_TEXTS), max_size=40), runs=st.lists(st.integers(1, 6), min_size=1))
def test_took_leaves_the_state_feed_leaves_and_gives_what_it_gave(rules, texts, runs):
    # Splitter.took, the one place where what C took becomes the splitter's state: in a steady
    # state, plain texts taken together leave the state feed leaves taking them one by one.
    a, b = Splitter(rules), Splitter(rules)
    i = k = 0
    while i < len(texts):
        kind = b.steady()
        run = texts[i:i + runs[k % len(runs)]]
        k += 1
        trims = kind == REASONING and rules.trim
        if kind is not None and all(t and not rules.may_hold_tag(t) and not (trims and not t.strip(" \t\r\n\f"))
                                    for t in run):
            want = [p for t in run for p in a.feed(t)]
            assert {p[0] for p in want} <= {kind}
            assert b.took(kind, "".join(run)) == "".join(p[1] for p in want)
            i += len(run)
        else:
            assert a.feed(texts[i]) == b.feed(texts[i])
            i += 1
        assert _state(a) == _state(b)
    assert a.finish() == b.finish()
    with pytest.raises(ValueError):   # (not of the steady kind)
        b.took(REASONING, "x")


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
    assert d.failure == "the rewrite raised RuntimeError"
    k = 4   # the role chunk, then "<think>", "a", " b": the fourth text chunk raised
    assert b"".join(out[k]).endswith(events[k])
    assert [b"".join(o) for o in out[k + 1:-1]] == events[k + 1:]


def test_a_rewriter_built_with_fast_off_takes_no_shortcut():
    for mod in (chat, messages, responses):
        rw = mod.StreamRewriter(make_ctx(), fast=False)
        d = StreamDriver(rw)
        assert d._on_chunk is None and d._on_event_bytes is None


def test_the_c_specs_a_shape_keeps_are_capped_however_many_lanes_ask():
    # A compiled shape is kept for the process (Delta.compile), and a lane's output template names
    # what it writes for (a Responses item's id): every stream of every client asks with lanes of
    # its own. The shape keeps at most SPECS_MAX specs, and a spec made again is the same.
    shape = Delta(b"data: ", None, (b'{"d":', b"}"), (TEXT,), end=b"\n\n").compile(RULES[0])
    lanes = [Lane((b'data: {"id":"i%d","d":"' % k, hot.PART_BODY, b'"}\n\n')) for k in range(3 * SPECS_MAX)]
    first = [shape.spec(lane) for lane in lanes]
    assert first[0] is not None
    assert 0 < len(shape._specs) <= SPECS_MAX
    assert [shape.spec(lane) for lane in lanes[:3]] == first[:3]
