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
from thinkwire.jsonio import dumps
from thinkwire.marks import Sealer
from thinkwire.rules import Rules, TagPair
from thinkwire.stream import StreamDriver
from thinkwire.engine import PARSERS
from thinkwire.surfaces import chat, messages, ollama
from support.events import text_sequence
from support.ollama import chat_objs, line as ollama_line, stream_bytes
from support.fast import (RULES, SETTINGS, SURFACES, TOKENS, _ev, chat_stream, chunkings, messages_stream,
                          responses_stream, run)

# -- the C callable (thinkwire.hot) ---------------------------------------------------------------
# Where the extension is built, `StreamDriver.callable()` puts `_hot.Hot` in front of the driver:
# it answers steady plain deltas itself. The same property: the same bytes as the full path.
needs_c = pytest.mark.skipif(not hot.available(), reason="thinkwire._hot is not built (or THINKWIRE_HOT=0)")


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


# Text with code in it (fences, code spans) and tags' first characters. C keeps no code state:
# `Splitter.took` derives it from the texts C took, and the splitter decides a tag from it.
CODE_TOKENS = ["```", "~~~", "\n", "\n\n", " `", "`", "x`", " a <", " b", " <", "</", "th", "ink>", "x", "  ",
               " ``", "py\n", "[/TH", "INK]", "<<", " c", "<think>", " w"]


# Answer text, then an opening tag, which counts out of code (a block closed before: anywhere).
CODE_CASES = {"a fence opens": (["\n", "```", "\n", " a"], True),
              "after its indent": (["\n", "  ~~~", "py\n", " a"], True),
              "and closes": (["\n", "```", "\n", "x", "\n", "```", "\n", " a"], False),
              "a code span": ([" `", "x", " b`", " a `"], True),
              "a code span closed": ([" `", "x", " b`", " a"], False),
              "a line end closes a code span": ([" `x", "\n", " a"], False),
              "not at a line start": ([" ```", "\n", " a"], False),
              "a backslash, then n": ([" `x\\", "n", " b"], True)}


@needs_c
@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
def test_what_the_splitter_held_counts_in_the_line_it_goes_out_on(surface):
    # "~~~" is held (the start of "~~~<"), then goes out in front of a line end: a fence opens,
    # and the tag after it in the fenced block is text.
    texts = ["~~~<", "hm", "~~~>", "ok", " x", "\n", "~~~", "\n a", " b", " ~~~<", "c", "~~~>", " d", " e"]
    events = SURFACES[surface][1](texts)
    got, hits = run(surface, events, True, c=True, think_tags="~~~< ~~~>")
    assert got == run(surface, events, False, think_tags="~~~< ~~~>")[0]
    assert "".join(t for k, t in text_sequence(surface, got) if k == "c") == "ok x\n~~~\n a b ~~~<c~~~> d e"
    assert hits >= 3


@needs_c
@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("case", CODE_CASES)
def test_the_code_state_comes_from_the_texts_c_took(surface, case):
    tokens, in_code = CODE_CASES[case]
    tail = ["<think>", "y", "</think>", " c", " d"]   # (right after the text: where a model writes one)
    events = SURFACES[surface][1](["<think>", "hm", "</think>", "ok", " x"] + tokens + tail)
    got, hits = run(surface, events, True, c=True)
    assert got == run(surface, events, False)[0]
    answer = "".join(t for k, t in text_sequence(surface.split("+")[0], got) if k == "c")
    assert ("<think>y</think>" in answer) == in_code
    if surface != "responses+obfuscation":   # (a third slot: it has no C callable)
        assert hits >= len(tokens)   # the answer's tokens after its first, but the tag's


@needs_c
@pytest.mark.parametrize("surface", SURFACES)
@settings(max_examples=int(os.environ.get('HOT_EXAMPLES', 60)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.sampled_from(CODE_TOKENS), min_size=1, max_size=60), seed=st.integers(0, 2**16))
def test_the_c_callable_agrees_with_the_full_path_in_and_out_of_code(surface, texts, seed):
    events = SURFACES[surface][1](["<think>", "hm"] + texts + ["</think>", "ok"] + texts)
    for name, chunks in chunkings(events, random.Random(seed)).items():
        assert run(surface, chunks, True, c=True)[0] == run(surface, chunks, False)[0], name


STEADY = ["<think>", "Okay, so"] + [" word", " and", " more"] * 20 + ["</think>", "So here it is:"] + [" it", " is"] * 20


@needs_c
@pytest.mark.parametrize("surface", ["chat", "messages", "responses", "ollama"])
@pytest.mark.parametrize("opts", [{}, {"chat_field": "both"}, {"trim": "off"}])
def test_steady_deltas_are_answered_in_c(surface, opts):
    request = {"reasoning": {"summary": "auto"}} if surface == "responses" else None   # two channels
    events = SURFACES[surface][1](STEADY)
    fast, hits = run(surface, events, True, request=request, c=True, **opts)
    assert fast == run(surface, events, False, request=request, **opts)[0]
    assert hits >= 100   # all but the first of the block and of the answer (and the tags)
    if surface in ("chat", "ollama"):
        for e in events[-41:-2] if surface == "chat" else events[-40:-1]:   # the answer deltas
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
    assert hits >= 40   # (a number repeated is Python's to count on: C takes the deltas of a number once)
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
    assert d.failure == "the rewrite raised RuntimeError"
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
PRE, POST = b'data: {"n":', b'}\n\n'


def _hot(**kw):
    """The C type armed for `data: {"n":<literal>}` under RULES[0]; the chunks it handed on."""
    calls = []
    h = hot.Hot(lambda chunk: calls.append(chunk) or [b"FALLBACK"])
    h.arm(hot.spec(RULES[0], PRE, POST, **kw))
    return h, calls


def _n(body: bytes) -> bytes:
    return b'data: {"n":"%s"}\n\n' % body


@needs_c
def test_hot_passes_a_plain_literal_and_leaves_anything_else():
    h, calls = _hot()
    taken = [b"hi there", b"a`b", b'a\\nb\\t\\"q\\"\\\\', b"\\r\\b\\f", b"  "]   # json.dumps writes these escapes so
    for body in taken:
        chunk = _n(body)
        got = h(chunk)
        assert got == [chunk] and got[0] is chunk
    # A tag's first character (<, [ of RULES[0]), as a byte or an escape; an escape json.dumps
    # does not write; a control or non-ASCII byte; not one literal; not the learned event.
    others = [b'"', b"a\\u003cb", b"a\\u0041", b"a\\/", b"a\\x", b"a\\", b"a<b", b"a [x", b"x</think>", b"`a <`",
              b"\xc3\xa9", b'a"b', b"a\tb", b"a\x7fb", b"a\x00b"]
    for other in [_n(o) for o in others] + [b'data: {"n":"ab}\n\n', b'data: {"x":"ab"}\n\n', b'data: {"n":"ab"}\n',
                                            b"", b'"', _n(b""), bytearray(_n(b"ab"))]:
        assert h(other) == [b"FALLBACK"]
    assert len(calls) == len(others) + 7
    got = h.take()   # the literals' bodies, as they came, one after the other
    assert got == (5, 0, b'hi therea`ba\\nb\\t\\"q\\"\\\\\\r\\b\\f  ', 0, 0)
    assert h.take() == (0, 0, None, 0, 0) and h.hits == 0


def test_the_table_leaves_out_every_character_a_tag_or_marker_starts_with():
    # (Finding 4: a backtick was marked plain whatever the tags.) As a byte, or as what an escape stands for.
    default = hot.table(RULES[0], False)   # <think> [THINK] <tool_call>
    assert not default[ord("<")] and not default[ord("[")]
    assert default[ord('"')] == default[ord("\\")] == hot.ALLOW_ESCAPE   # (\" and \\ only as escapes)
    assert default[ord("`")] == default[ord(" ")] == default[ord("a")] == hot.ALLOW_BYTE
    assert default[ord("n")] == hot.ALLOW_BYTE | hot.ALLOW_ESCAPE and not default[0x7F] and not default[0xC3]
    backtick = hot.table(Rules((TagPair("`T`", "`/T`"),)), False)
    assert not backtick[ord("`")] and backtick[ord("<")] == hot.ALLOW_BYTE
    odd = hot.table(Rules((TagPair('"', "\n"),)), True)   # (trimming: whitespace marked)
    assert not odd[ord('"')] & hot.ALLOW_ESCAPE and odd[ord("n")] == hot.ALLOW_BYTE   # \" and \n: tag starts
    assert odd[ord("t")] == hot.ALLOW_BYTE | hot.ALLOW_ESCAPE | hot.ESCAPE_WS
    assert odd[ord(" ")] == hot.ALLOW_BYTE | hot.BYTE_WS
    assert odd[ord("b")] == hot.ALLOW_BYTE | hot.ALLOW_ESCAPE   # (\b is no whitespace)


@needs_c
def test_hot_fills_a_template_and_keeps_the_literals_as_they_came():
    h, _ = _hot(out=hot.template([b"<", b"|", b">"]))
    assert h(_n(b"ab")) == [b"<ab|ab>"]
    assert h(_n(b" e\\tf ")) == [b"< e\\tf | e\\tf >"]
    assert h.take() == (2, 2, b"ab e\\tf ", 0, 0)


@needs_c
def test_hot_holds_trailing_whitespace_as_the_splitter_does():
    h = hot.Hot(lambda chunk: [b"FALLBACK"])
    spec = hot.spec(RULES[0], b"<", b">", hot.template([b"[", b"]"]), trim=True)
    h.arm(spec, 0, 0, b" \\n")   # held by the splitter before (escaped)
    assert h(b'<"a\\n\\n">') == [b"[ \\na]"]            # what was held, then the text; its end held
    assert h(b'<" \\t">') == [b"FALLBACK"]                # whitespace alone: the splitter's
    assert h(b'<"b \\\\n ">') == [b"[\\n\\nb \\\\n]"]    # (an escaped backslash then n is text)
    assert h(b'<"c' + b" " * 65 + b'">') == [b"FALLBACK"]   # more than it holds
    assert h.take() == (2, 2, b"a\\n\\nb \\\\n ", 0, 0)
    with pytest.raises(ValueError):
        h.arm(spec, 0, 0, b" " * 65)
    no_trim = hot.spec(RULES[0], b"<", b">", hot.template([b"[", b"]"]))
    with pytest.raises(ValueError):   # whitespace held, for a spec that does not hold it
        h.arm(no_trim, 0, 0, b" ")
    h.arm(no_trim)
    assert h(b'<"a ">') == [b"[a ]"] and h(b'<" ">') == [b"[ ]"]


@needs_c
def test_hot_holds_whitespace_alone_where_the_spec_says_what_goes_out():
    h = hot.Hot(lambda chunk: [b"FALLBACK"])
    spec = hot.spec(RULES[0], b"<", b">", hot.template([b"[", b"]"]), trim=True, held=(b"<>",))
    h.arm(spec)
    assert h(b'<" \\t">') == []                  # held whole: the held template's output is kept ...
    assert h(b'<" ">') == [b"<>FALLBACK"]         # ... for the next write (more whitespace: the splitter's)
    assert h(b'<"a">') == [b"[ \\ta]"]           # what was held, then the text
    assert h(b'<"' + b" " * 33 + b'">') == [b"FALLBACK"]   # longer than the splitter holds alone
    assert h(b'<"' + b" " * 32 + b'">') == []
    got = h.take()
    assert got == (3, 3, b" \\ta" + b" " * 32, 0, 0)
    assert (got.hits, got.changed, got.literal) == (3, 3, b" \\ta" + b" " * 32)   # a named tuple
    h.arm(hot.spec(RULES[0], b"<", b">", hot.template([b"[", b"]"]), trim=True, held=()))
    assert h(b'<"\\n">') == []                    # nothing goes out (the kept output still waits)
    assert h.take() == (1, 1, b"\\n", 0, 0)
    assert h(b"") == [b"<>FALLBACK"]              # the end of the stream: the fallback's, after it
    # Without trim, whitespace is text: `held` does not apply.
    assert hot.spec(RULES[0], b"<", b">", hot.template([b"[", b"]"]), held=()).held is None


@needs_c
@pytest.mark.parametrize("surface", ["chat", "messages", "responses", "ollama"])
def test_reasoning_of_whitespace_alone_is_answered_in_c(surface):
    """1-6 character deltas (the issue 34 workload): a reasoning delta of a space alone is held
    in C as the splitter holds it, and what goes out for it is the full path's."""
    texts = ["<think>", "Okay"] + [t for k in range(30) for t in (" ", f"w{k}")] + ["</think>", "So."]
    events = SURFACES[surface][1](texts)
    fast, hits = run(surface, events, True, c=True)
    assert fast == run(surface, events, False)[0]
    assert hits >= 58   # the spaces and the words after the first (not the tags)
    if surface == "chat":   # a space alone: nothing goes out; the next word takes it in front
        assert b'"delta":{"content":""}' not in fast[fast.index(b"w0"):] and b'"reasoning_content":" w7"' in fast
    elif surface == "ollama":   # a line with an empty content (Ollama's own for a held text)
        assert b'"content":""},"done":false}' in fast and b'"thinking":" w7"' in fast


@needs_c
def test_what_goes_out_for_whitespace_alone_goes_in_one_write_with_the_next_output():
    """mitmproxy writes each output on its own (a write costs it more than a whole call here):
    the held template's output waits for the next output, C's or the fallback's, and goes in
    front of its first bytes; with nothing from the fallback, alone."""
    outs = [[b"F1", b"F2"], []]
    h = hot.Hot(lambda chunk: outs.pop(0))
    spec = hot.spec(RULES[0], b"<", b">", hot.template([b"[", b"]"]), trim=True, held=(b"<>",))
    h.arm(spec)
    assert h(b'<" ">') == [] and h(b'<"a">') == [b"<>[ a]"]            # C's next output
    assert h(b'<"\\n">') == [] and h(b"x") == [b"<>F1", b"F2"]       # the fallback's
    h.arm(spec)   # (nothing held, as the driver arms it where the splitter holds nothing)
    assert h(b'<"\\t">') == [] and h(b"") == [b"<>"]                 # nothing from the fallback


@needs_c
def test_an_ollama_line_of_held_whitespace_goes_out_with_the_next_line_in_one_write():
    """The bench's spaced workload: one reasoning delta in fourteen is a space alone. Its line
    (an empty content, Ollama's own for a held text) reaches the client in the same write as
    the next line: the bytes of the Python paths, one write less for mitmproxy."""
    texts = ["<think>", "Okay", " ", "so", " ", "\\n", "</think>", "Hi"]
    objs = chat_objs("m", texts)
    call = StreamDriver(ollama.StreamRewriter(make_ctx({"model": "m"})), parser=PARSERS[ollama.STREAM_TYPE]()).callable()
    writes = [call(e) for e in stream_bytes(objs)] + [call(b"")]

    def held(k: int, thinking: str = "") -> bytes:   # line k with its text moved (Ollama's field order)
        message = {"role": "assistant", "content": "", **({"thinking": thinking} if thinking else {})}
        return ollama_line(dict(objs[k], message=message))
    assert writes[2:5] == [[], [held(2) + held(3, " so")], []]
    assert b"".join(w for ws in writes for w in ws) == run("ollama", stream_bytes(objs), False)[0]


@needs_c
def test_hot_takes_the_unicode_escapes_its_spec_names_as_they_came():
    h = hot.Hot(lambda chunk: [b"FALLBACK"])
    spec = hot.spec(RULES[0], b"<", b">", hot.template([b"[", b"]"]), exclude="<>&", unicode_escaped="<>&")
    assert spec.escapes == b"0026003e"   # (`<` starts a tag: not named)
    h.arm(spec)
    assert h(b'<"a\\u003eb\\u0026">') == [b"[a\\u003eb\\u0026]"]
    for python_s in (b'<"\\u003c">', b'<"\\u003E">', b'<"\\u0041">', b'<"a>">', b'<"\\u003">', b'<"\\u003e'):
        assert h(python_s) == [b"FALLBACK"], python_s
    for bad in (b"0020", b"0022", b"005c", b"003E", b"003", b"0026" * 5):   # whitespace, quote ...
        with pytest.raises(ValueError):
            h.arm(spec._replace(escapes=bad))


@needs_c
def test_ollama_reasoning_with_what_go_escapes_is_answered_in_c():
    """Ollama's Go server writes `>` and `&` as `\\u003e` and `\\u0026`: C takes those escapes
    as they came (the bytes the Python paths write again); `<`, which starts a tag, is Python's."""
    texts = ["<think>", "Okay"] + [t for k in range(20) for t in (f" x{k} >", " a&b")] + [" c<d", "</think>", "So."]
    events = SURFACES["ollama"][1](texts)
    fast, hits = run("ollama", events, True, c=True)
    assert fast == run("ollama", events, False)[0]
    assert hits == 40 and b'"thinking":" x7 \\u003e"' in fast and b'"thinking":" a\\u0026b"' in fast


@needs_c
def test_hot_hands_a_chunk_to_python_before_what_it_keeps_passes_its_cap():
    h, calls = _hot()
    body = b"x" * 1000
    taken = [h(_n(body)) != [b"FALLBACK"] for _ in range(40)]
    assert taken == [True] * (hot.CAP // 1000) + [False] * (40 - hot.CAP // 1000)
    got = h.take()
    assert got[0] == hot.CAP // 1000 and len(got[2]) <= hot.CAP
    assert h(_n(body)) == [_n(body)]   # (after a take: room again)
    assert h(_n(b"y" * (hot.CAP + 1))) == [b"FALLBACK"]   # a text longer than the cap: always Python's


@needs_c
@pytest.mark.parametrize("slot_pos", [1, 2])
def test_hot_numbers_as_the_sequencer_does(slot_pos):
    h = hot.Hot(lambda chunk: [b"FALLBACK"])
    pre, mid, post = b"{", b",", b"}\n\n"

    def chunk(seq, text):
        return b"{%s,%s}\n\n" % ((seq, text) if slot_pos == 1 else (text, seq))
    out = ((b"[", hot.PART_N, b']"', hot.PART_BODY, b'"') if slot_pos == 1 else
           (b'"', hot.PART_BODY, b'"[', hot.PART_N, b"]"))
    own = hot.spec(RULES[0], pre, post, out, slot_pos=slot_pos, mid=mid, seq_mode=hot.SEQ_OWN, pass_same=True)
    h.arm(own, 0, 4)
    assert h(chunk(b"5", b'"a"')) == [chunk(b"5", b'"a"')]      # its own number: as it came
    assert h(chunk(b"5", b'"b"')) == [b"FALLBACK"]              # a repeat: Python numbers it ...
    h.arm(own, 1, 6)                                            # ... and arms again
    assert h(chunk(b"6", b'"c"')) == [b'[7]"c"' if slot_pos == 1 else b'"c"[7]']   # the offset stays
    for bad in [b"05", b"-1", b"x", b"", b"1234567890123456789"]:
        assert h(chunk(bad, b'"d"')) == [b"FALLBACK"]
    assert h.take() == (2, 1, b"ac", 1, 7)
    # Numbers that would not fit a long long are Python's (which counts with ints of any size).
    h.arm(own, hot.MAX_NUMBER - 10, 0)
    assert h(chunk(b"11", b'"e"')) == [b"FALLBACK"]
    assert h(chunk(b"10", b'"e"'))[0].count(b"%d" % hot.MAX_NUMBER) == 1
    two = (b"<", hot.PART_N, b":", hot.PART_BODY, b"><", hot.PART_N1, b":", hot.PART_BODY, b">")
    new = hot.spec(RULES[0], pre, post, two, slot_pos=slot_pos, mid=mid, seq_mode=hot.SEQ_NEW, channels=2)
    h.arm(new, 1, 7)
    assert h(chunk(b"7", b'"e"')) == [b"<8:e><9:e>"]
    assert h.take()[3:] == (2, 9)
    h.arm(new, 0, hot.MAX_NUMBER - 1)
    assert h(chunk(b"7", b'"e"')) == [b"FALLBACK"]             # the second channel's would not fit
    for offset, last in [(-1, 0), (0, -1)]:
        with pytest.raises(ValueError):
            h.arm(new, offset, last)
    with pytest.raises(OverflowError):
        h.arm(new, 0, hot.MAX_NUMBER + 1)


STAMP = b"-+.:0123456789TZ"   # the bytes of a timestamp (Ollama's created_at)


@needs_c
@pytest.mark.parametrize("slot_pos", [1, 2])
def test_hot_copies_a_string_slot_as_it_came(slot_pos):
    # Ollama's created_at changes on every line: a second slot, a string literal of the bytes
    # `chars` names, copied into the output as it came (PART_STR). Anything else there is Python's.
    h = hot.Hot(lambda chunk: [b"FALLBACK"])

    def chunk(stamp, text):
        return b"{%s,%s}\n" % ((stamp, text) if slot_pos == 1 else (text, stamp))
    out = (b"<", hot.PART_STR, b"|", hot.PART_BODY, b">")
    h.arm(hot.spec(RULES[0], b"{", b"}\n", out, slot_pos=slot_pos, mid=b",", chars=STAMP))
    assert h(chunk(b'"2025-08-20T13:48:22.1Z"', b'"a b"')) == [b"<2025-08-20T13:48:22.1Z|a b>"]
    assert h(chunk(b'""', b'"c"')) == [b"<|c>"]   # an empty one
    huge = b"1" * (4 * hot.CAP)   # (copied, not kept: no cap)
    assert h(chunk(b'"' + huge + b'"', b'"d"')) == [b"<" + huge + b"|d>"]
    # A byte `chars` does not name; escapes (a NUL, a quote, a line end); control, NUL and
    # non-ASCII bytes; a quote missing; a number; a text; nothing.
    for other in [b'"2025x"', b'"\\u0000"', b'"1\\"1"', b'"\\n"', b'"1\x001"', b'"1\x1f"', b'"\x7f"',
                  b'"\xc3\xa9"', b'"1', b'1"', b"12", b'"a b"', b""]:
        assert h(chunk(other, b'"e"')) == [b"FALLBACK"], other
    assert h(chunk(b'"1"', b'"a<"')) == [b"FALLBACK"]   # (the text's table still decides)
    assert h.take() == (3, 3, b"a bcd", 0, 0)
    h.arm(hot.spec(RULES[0], b"{", b"}\n", slot_pos=slot_pos, mid=b",", chars=STAMP))   # as it came
    c = chunk(b'"1:2"', b'"f"')
    assert h(c)[0] is c and h(chunk(b'"1/2"', b'"f"')) == [b"FALLBACK"]


@needs_c
def test_hot_refuses_a_bad_spec_and_keeps_the_one_it_holds():
    rules = RULES[0]
    h, calls = _hot()
    armed = h.armed
    good = hot.spec(rules, b"a", b"b")
    table = bytearray(good[4])
    table[ord('"')] = hot.ALLOW_BYTE
    for bad in [good[:5], (1,) + good[1:], good[:4] + (b"short",) + good[5:], good[:4] + (bytes(table),) + good[5:],
                good[:1] + (1,) + good[2:],                  # a number slot without numbering
                good[:6] + ((b"x", 7),) + good[7:],          # an unknown part code
                good[:6] + ((b"x", True),) + good[7:],       # (not an int code)
                good[:6] + ((b"x", hot.PART_N),) + good[7:],   # a number with no numbering
                good[:6] + ((b"x",) * 17,) + good[7:],
                good[:8] + (3,) + good[9:],                  # channels
                hot.spec(rules, b"a", b"b", (b"x", hot.PART_N1), slot_pos=1, seq_mode=hot.SEQ_NEW),  # one channel
                hot.spec(rules, b"a", b"b", trim=True),     # whitespace held needs a template
                *[hot.spec(rules, b"a", b"b", slot_pos=1, chars=c)   # a string slot may hold no escape
                  for c in [b'1"', b"1\\", b"\x00", b"\x1f", b"\x7f", b"\xc3"]],
                hot.spec(rules, b"a", b"b", chars=b"1"),    # a string slot with no place
                hot.spec(rules, b"a", b"b", slot_pos=1, chars=b"1", seq_mode=hot.SEQ_OWN),   # both kinds
                hot.spec(rules, b"a", b"b", (b"x", hot.PART_STR)),   # a string slot's body with none
                hot.spec(rules, b"a", b"b", slot_pos=1, chars="1"),   # (not bytes)
                [*good]]:
        with pytest.raises((TypeError, ValueError)):
            h.arm(bad)
        assert h.armed is armed
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


# == issue 25: what a hostile upstream did to the C part, each finding with its reproducer =========
def three_paths(surface, events, **kw):
    """The bytes the client gets through the C callable (where built), the Python byte path and
    the full path, and how many chunks C took."""
    c, taken = run(surface, events, True, c=hot.available(), **kw)
    return c, run(surface, events, True, **kw)[0], run(surface, events, False, **kw)[0], taken


@needs_c
@pytest.mark.parametrize("surface", ["chat", "messages"])
def test_what_the_c_callable_holds_is_capped(surface):
    # Finding 2: every chunk C took was kept (twice) until Python next saw one: one stream of
    # long deltas grew the proxy by 95 MB. Now C keeps one literal, and hands a chunk to Python
    # (which folds what C took) before what it keeps would pass its cap.
    import tracemalloc
    texts = (["<think>", "hm"] + ["r" * 999 + " "] * 1000) if surface == "chat" else ["ok"] + [" " + "a" * 999] * 1000
    events = SURFACES[surface][1](texts)
    rw = SURFACES[surface][0].StreamRewriter(make_ctx())
    taken, settle = [], rw.settle
    rw.settle = lambda got: taken.append(got[0]) or settle(got)
    d = StreamDriver(rw)
    call = d.callable()
    tracemalloc.start()
    try:
        for e in events[:100]:
            call(e)
        before = tracemalloc.get_traced_memory()[0]
        for e in events[100:-4]:
            call(e)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    d.settle()
    assert sum(taken) > 900   # (every 17th goes to Python: C keeps 16 KiB of text between two)
    assert held < 200_000, f"{held} bytes held after 900 deltas of 1,000 characters"


LIMITS = {"the largest long long": 2**63 - 6, "past 18 digits": 10**18 - 4, "past 64 bits": 2**64 - 3,
          "huge": 10**40}


@needs_c
@pytest.mark.parametrize("start", LIMITS)
def test_sequence_numbers_at_the_limits_count_on_as_in_python(start):
    # Finding 3: C's numbering overflowed a long long and wrote `"sequence_number":-'..--).0-*(+`.
    texts = ["<think>", "a"] + [" b", " c"] * 6 + ["</think>", "d"] + [" e", " f"] * 6
    base = LIMITS[start]
    events = [re.sub(rb'"sequence_number":(\d+)', lambda m: b'"sequence_number":%d' % (base + int(m[1])), e)
              for e in responses_stream(texts)]
    for req in (None, {"reasoning": {"summary": "auto"}}):   # one reasoning channel, and two
        c, py, full, _ = three_paths("responses", events, request=req)
        assert c == py == full
        numbers = [json.loads(line[6:])["sequence_number"] for line in c.split(b"\n") if line.startswith(b"data: ")]
        assert numbers == sorted(set(numbers)) and numbers[0] == base


@needs_c
@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
def test_a_tag_that_starts_with_a_backtick_is_seen(surface):
    # Finding 4: the table marked a backtick as always plain; C took "`/T`" as reasoning text.
    texts = ["`T`", "hm"] + [" x", " y"] * 5 + ["`/T`", "ok"] + [" z", " w"] * 5
    c, py, full, _ = three_paths(surface, SURFACES[surface][1](texts), tags="`T` `/T`")
    assert c == py == full
    seq = text_sequence(surface, c)
    assert "".join(t for k, t in seq if k == "r") == "hm" + " x y" * 5
    assert "".join(t for k, t in seq if k == "c") == "ok" + " z w" * 5


@pytest.mark.parametrize("surface", ["chat", "messages", "responses"])
def test_an_event_name_with_a_nul_byte_stays_the_event_name(surface):
    # Finding 5: the chat reasoning event's template was cut at "\0", so with `event: x\0y` the
    # reasoning text was spliced into the event name (the Python byte path and C alike).
    texts = ["<think>", "hm"] + [" x", " y"] * 5 + ["</think>", "ok"] + [" z", " w"] * 5
    events = [b"event: x\x00y\n" + e.split(b"\n", 1)[1] if e.startswith(b"event: ") else b"event: x\x00y\n" + e
              for e in SURFACES[surface][1](texts)]
    c, py, full, _ = three_paths(surface, events)
    assert c == py == full
    seq = text_sequence(surface, full)
    assert "".join(t for k, t in seq if k == "r") == "hm" + " x y" * 5
    if surface == "chat":   # (the others name the events they write by their type)
        assert full.count(b"event: x\x00y\ndata: ") == full.count(b"data: ")


class _Reenter:
    """A flag whose truth test re-arms the C callable with another spec (hostile Python)."""

    def __init__(self, h, spec):
        self.h, self.spec = h, spec

    def __bool__(self):
        self.h.arm(self.spec)
        return True


@needs_c
def test_arm_validates_then_commits():
    # Finding 7: arm stored pointers into a spec before it finished validating it, and a flag's
    # truth test can run Python: a spec refused after that left C reading a spec it did not hold.
    rules = RULES[0]
    h = hot.Hot(lambda chunk: [b"FALLBACK"])
    other = hot.spec(rules, b"Y", b"Z")
    bad = list(hot.spec(rules, b"X", b"Z"))
    bad[5] = _Reenter(h, other)   # trim: read as a flag
    bad[8] = 3                    # channels: refused after the flag is read
    with pytest.raises(ValueError):
        h.arm(tuple(bad))
    del bad
    assert h.armed is other
    assert h(b'Y"ab"Z') == [b'Y"ab"Z']     # the spec it holds decides
    assert h(b'X"ab"Z') == [b"FALLBACK"]


@pytest.mark.parametrize("signature", ["signed", "redacted"])
def test_reasoning_with_a_lone_surrogate_is_sealed_and_opens_exactly(signature):
    # Finding 8: a Messages stream with signature=signed (the default) whose reasoning held a lone
    # surrogate escape raised UnicodeEncodeError in marks.py, and the stream passed through as it came.
    sealer = Sealer(b"k")
    texts = ["<think>", "a ODD b", " c", "</think>", "ok"]
    events = [e.replace(b"ODD", b"\\ud800 \\udcff") for e in messages_stream(texts)]
    got, _ = run("messages", events, True, sealer, c=hot.available(), signature=signature)
    assert ("Opened(text=%r" % "a \ud800 \udcff b c").encode() in got
    assert got == run("messages", events, False, sealer, signature=signature)[0]
    # The same in Responses' encrypted_content, and in a whole Messages body.
    req = {"include": ["reasoning.encrypted_content"]}
    events = [e.replace(b"ODD", b"\\ud800 \\udcff") for e in responses_stream(texts)]
    got, _ = run("responses", events, True, sealer, req, c=hot.available())
    assert ("Opened(text=%r" % "a \ud800 \udcff b c").encode() in got
    assert got == run("responses", events, False, sealer, req)[0]
    body = json.dumps({"id": "m", "type": "message", "role": "assistant", "model": "m", "content": [
        {"type": "text", "text": "<think>x \ud800</think>ok"}]}).encode()
    out = json.loads(messages.rewrite_body(body, make_ctx(None, sealer, signature=signature)))
    mark = out["content"][0]["signature" if signature == "signed" else "data"]
    assert sealer.open(mark).text == "x \ud800"
    for text in ["\ud800", "a\udcffb", "\udbff\udc00 x" * 100, "\ud83d"]:
        pair = TagPair("<think>", "</think>")
        assert sealer.open(sealer.seal(text, pair)).text == text
        assert sealer.open(sealer.seal(text, pair, dumps(text)[1:-1])).text == text


@needs_c
def test_the_c_part_built_with_ubsan_takes_streams_without_a_report(tmp_path):
    # Finding 6: memcpy(NULL, ..., 0) ran on the first chunk C took, undefined behaviour that
    # UBSan reported on every run. (CI runs the C tests and the differential fuzz under ASan and
    # UBSan as a whole: devtools/sanitize.py. This runs a few of them under UBSan alone.)
    if os.environ.get("THINKWIRE_HOT_LIB"):
        pytest.skip("this whole run is sanitized")
    import subprocess
    import sys
    from devtools import sanitize
    try:
        lib = sanitize.build(tmp_path, "undefined")
    except sanitize.NoCompiler as e:
        pytest.skip(str(e))
    p = subprocess.run([sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider", "tests/test_hot.py",
                        "-k", "steady_deltas_are_answered_in_c or keeps_the_text_and_numbers or marks_agree"],
                       cwd=sanitize.ROOT, env=sanitize.environment(lib, "undefined"), capture_output=True, text=True)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and not sanitize.REPORT.search(out), out[-3000:]
    assert re.search(r"\b1[0-9] passed", out), out[-1000:]
