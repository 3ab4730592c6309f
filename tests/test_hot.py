"""The C part (thinkwire._hot, driven from thinkwire.hot): what it takes, what it leaves to Python,
and the bytes it sends, which are the full path's (`StreamRewriter(ctx, fast=False)`).

Where the extension is built, `StreamDriver.callable()` puts `_hot.Hot` in front of the driver:
it answers steady plain deltas itself and hands every other chunk to the driver.
"""

import json
import os
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import make_ctx
from thinkwire import hot
from thinkwire.fastpath import dumps
from thinkwire.marks import Sealer
from thinkwire.splitter import Rules, TagPair
from thinkwire.stream import StreamDriver
from thinkwire.surfaces import chat
from support.fast import (RULES, SETTINGS, SURFACES, TOKENS, _ev, chat_stream, chunkings, messages_stream,
                          responses_stream, run)

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
    taken = [b"hi there", b"a`b", b'a\\nb\\t\\"q\\"\\\\', b"\\r\\b\\f"]   # json.dumps writes these escapes so
    for body in taken:
        chunk = b'data: {"n":"%s"}\n\n' % body
        got = h(chunk)
        assert got == [chunk] and got[0] is chunk
    others = [b'"', b'a\\u0041', b'a\\/', b'a\\x', b'a\\', b"a<b", b"\xc3\xa9", b'a"b', b"a\tb", b"a\x7fb"]
    for other in [b'data: {"n":"%s"}\n\n' % o for o in others] + [
            b'data: {"n":"ab}\n\n', b'data: {"x":"ab"}\n\n', b'data: {"n":"ab"}\n', b"", b'"', b'data: {"n":""}\n\n',
            bytearray(b'data: {"n":"ab"}\n\n')]:
        assert h(other) == [b"FALLBACK"]
    assert len(calls) == len(others) + 7
    got = h.take()   # the texts joined, and as they came: json.dumps's literal of that text
    assert got == (4, 0, 22, b'hi therea`ba\nb\t"q"\\\r\b\f', 0, 0, b"",
                   b'hi therea`ba\\nb\\t\\"q\\"\\\\\\r\\b\\f')
    assert '"%s"' % hot.literal(got) == dumps(got[3].decode())
    assert h.take() == (0, 0, 0, None, 0, 0, b"", None) and h.hits == 0


def test_hot_takes_an_escape_only_where_its_character_starts_no_tag():
    table = hot.allowed(Rules((TagPair('"', "\n"),)))
    assert not table[ord('"')] & 2 and not table[ord("n")] & 2 and table[ord("t")] & 2
    assert table[ord("n")] & 1 and table[ord("`")] == 1 and table[ord("<")] & 1


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
    # The code state is the arm's, moved over what was taken since that arm only.
    h = _answer_hot()
    assert h(_n(b"`x")) == [_n(b"`x")] and h(_n(b"a <")) == [b"FALLBACK"]
    h.arm(h.armed, 0, 0, b"", 0, b"")   # (re-armed without a take, out of code again)
    assert h(_n(b"a <")) == [_n(b"a ")]


@needs_c
@pytest.mark.parametrize("code,head,bodies,held", [
    (1, b"", [b"a <"], False),                      # in a code span: the splitter holds nothing
    (2, b"", [b"a <"], False),                      # in a fenced block
    (0, b"", [b"`x", b"a <"], False),               # a code span opened since the arm
    (0, b"", [b"`x` a <"], True),                   # ... and closed again
    (1, b"", [b"x` a <"], True),
    (1, b"", [b"x\\n a <"], True),                # a line end closes a code span
    (0, b"``", [b"`py\\n a <"], False),           # a fence opens where a line starts with ```
    (0, b"", [b"  ~~~\\n", b"a <"], False),       # (after its indent)
    (2, b"", [b"```\\nok <"], True),              # and closes
    (2, b"~~~", [b"\\na <"], True),               # the line the splitter had begun
    (0, b"```", [b"\\n a <"], False),
    (0, b"", [b"a ```\\n b <"], True),            # not at a line start: no fence
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
