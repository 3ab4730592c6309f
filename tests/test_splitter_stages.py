"""The splitter's two stages run one after the other: recognition (thinkwire.recognition) decides
alone where it scans and what it holds, and the whitespace stage (thinkwire.whitespace) only
consumes what recognition hands it. Here a splitter whose stage, while recognition scans, is a
recorder that answers nothing and has no fields, and which runs the real stage over the recorded
tokens and tails afterwards (`Deferred`), gives what the splitter gives: the same pieces, the same
state after every call and the same calls of the way back's hooks, on every real output and on
generated texts, tags that start with whitespace among them (`Rules._ws_lead`: there, where the
scan goes on after a tag's whitespace decides which tags are found)."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings, strategies as st

from test_splitter_differential import TEXTS, cuts, rules_for
from thinkwire.rules import Rules, TagPair
from thinkwire.splitter import CONTENT, END, REASONING, End, Splitter, Text, merge

# The stage's entry points, as recognition calls them.
ENTRIES = ("take", "_block_tail", "_block_cut", "_answer_tail")


class Recorder:
    """A stage that answers nothing and has no fields: it records each call, in order."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name: str):
        if name not in ENTRIES:
            raise AttributeError(f"recognition read the whitespace stage's {name}")
        return lambda *args: self.calls.append((name, args))


class Logged(Splitter):
    """A splitter that logs the way back's hooks."""

    __slots__ = ("log",)

    def __init__(self, rules: Rules, starts_inside: bool | None = None) -> None:
        self.log: list = []
        super().__init__(rules, starts_inside)

    def _dropped(self, out, reasoning, markup, added=0, gap=0, kept=None) -> None:
        self.log.append(("dropped", len(out), reasoning, markup, added, gap, None if kept is None else list(kept)))

    def _gone(self, out) -> None:
        self.log.append(("gone", len(out)))


class Deferred(Logged):
    """Recognition scans a feed with a `Recorder` for its stage; the stage then runs over what it
    recorded."""

    __slots__ = ()

    def _run(self, buf, out, final) -> None:
        stage, rec = self._ws, Recorder()
        self._ws = rec   # type: ignore[assignment]
        try:
            super()._run(buf, out, final)
        finally:
            self._ws = stage
        for name, args in rec.calls:
            getattr(stage, name)(*args)


def _state(s: Splitter) -> tuple:
    return (s.mode, s.holds_tag(), s.held_ws(), s.steady(), s.blocks, s.reasoning_chars, s.stray_closes,
            s.stray_after_text, s.markup_chars, s.added_chars)


def drive(cls, rules: Rules, chunks: list[str], prefill: str | None = None, cut_off: bool = False,
          starts_inside: bool | None = None) -> tuple[list, list]:
    s = cls(rules, starts_inside)
    trace: list = []
    if prefill is not None:
        s.resume(prefill)
        trace.append(("resume", _state(s)))
    for c in chunks:
        trace.append(("feed", s.feed(c), _state(s)))
    trace.append(("finish", s.finish(cut_off), _state(s)))
    return trace, s.log


def check(rules: Rules, chunks: list[str], **kw) -> None:
    assert drive(Deferred, rules, chunks, **kw) == drive(Logged, rules, chunks, **kw)


def test_the_recorder_stands_for_a_stage_that_answers_nothing():
    rec = Recorder()
    assert rec.take("a token", [], False) is None and rec.calls == [("take", ("a token", [], False))]
    with pytest.raises(AttributeError, match="read the whitespace stage's _gap"):
        rec._gap   # noqa: B018


def test_the_stage_runs_after_recognition_with_a_tag_that_starts_with_whitespace():
    # After the block, the answer before it ends in no whitespace: the whitespace after "</t>" is
    # kept whole in front of the answer's next text, and the scan goes on after all of it, so the
    # " <t>" that starts in it is text (and " </t>", a closing tag with no block open, goes).
    rules = Rules((TagPair(" <t>", " </t>"),))
    text = "a <t>b </t>\n     <t>c </t> d"
    for chunks in ([text], list(text)):
        trace, _ = drive(Deferred, rules, chunks)
        assert merge([p for step in trace for p in step[1]]) == [
            Text(CONTENT, "a"), Text(REASONING, "b"), End(END, TagPair(" <t>", " </t>")), Text(CONTENT, "\n     <t>c d")]
        check(rules, chunks)


@pytest.mark.parametrize("name,model,text", TEXTS, ids=[t[0] for t in TEXTS])
def test_every_real_output_splits_the_same_with_the_stage_after_recognition(name, model, text):
    for rules in rules_for(model):
        for how, chunks in cuts(text, name, randoms=1).items():
            if how in ("whole", "per character", "random 0"):
                check(rules, chunks, cut_off=how == "random 0")


# Rules with tags that start with whitespace, and some without, and texts made of their tags,
# whitespace runs and words.
WS_RULES = [
    Rules((TagPair("<think>", "</think>"),)),
    Rules((TagPair("<think>", "</think>"),), trim=False),
    Rules((TagPair("<think>", "</think>"),), starts_inside=True, ends=("<tool_call>",)),
    Rules((TagPair("\n<think>", "</think>\n"), TagPair("<think>", "</think>"))),
    Rules((TagPair(" <t>", " </t>"),), strip=(" <s>", "\n\n<e>")),
    Rules((TagPair(" <t>", " </t>"),), starts_inside=True, ends=("\n<tool>",)),
    Rules((TagPair("\n<think>", "</think>\n"),), strip=(" <s>",), trim=False),
    Rules((TagPair("<think>", "\n</think>"),), strip=("\t<s>", "<e>"), ends=("  <c>",),
          resumes=(("  <c>", "</c>"),)),
]
_TAGS = ["<think>", "</think>", "\n<think>", "</think>\n", " <t>", " </t>", "<t>", " <s>", "\n\n<e>", "<e>",
         "\n<tool>", "<tool_call>", "\n</think>", "\t<s>", "  <c>", "</c>", "<thi", " <"]
_WORDS = ["a", "b c", " ", "  ", "    ", "\n", "\n\n", "\r\n", "\t", "```", "`", "x.", " \n  ", "\n    ", "é"]
_TEXT = st.lists(st.sampled_from(_TAGS + _WORDS), max_size=24).map("".join)


@settings(max_examples=int(os.environ.get("SPLIT_EXAMPLES", 400)), deadline=None)
@given(text=_TEXT, r=st.sampled_from(range(len(WS_RULES))), data=st.data())
def test_any_text_splits_the_same_with_the_stage_after_recognition(text, r, data):
    points = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=10)))
    chunks = [text[a:b] for a, b in zip([0] + points, points + [len(text)])]
    check(WS_RULES[r], chunks, prefill=data.draw(st.sampled_from([None, "<think>", " <t>x ", "a\n"])),
          cut_off=data.draw(st.booleans()), starts_inside=data.draw(st.sampled_from([None, False, True])))


def test_every_cut_of_short_texts_with_whitespace_tags_splits_the_same():
    rng = random.Random(34)
    for _ in range(300):
        text = "".join(rng.choice(_TAGS + _WORDS) for _ in range(rng.randint(1, 8)))
        rules = rng.choice(WS_RULES)
        for k in range(len(text) + 1):
            check(rules, [text[:k], text[k:]])
