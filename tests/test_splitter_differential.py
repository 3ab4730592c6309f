"""The splitter against its frozen self (tests/support/frozen/: thinkwire.splitter and
thinkwire.lines as they were before issue 34 rewrote them): the same pieces and the same state
after every call, on every real output this repository holds (tests/corpus, tests/realworld,
tests/cases_designed.json, tests/conformance) at every chunking (whole, per character, random cuts,
every cut in two of a short text), through every entry point the surfaces use (`feed`, `plain`,
`took`, `resume`, `finish`), and on generated texts (hypothesis).

Two differences are on purpose. The first (`_CR_LINE`): a line that holds only whitespace and a carriage return
(`\\n\\r\\n`) is a blank line for the code rules however the text was cut (before, only when the
line reached the splitter whole), so a tab-indented line after it is indented code at every
chunking. There the rewrite must give what the frozen splitter gives for the text whole. The
second: the whitespace between a tag removed from the middle of the answer and a block's opening
tag after it (`a</think> <thought>`) is the block's written markup (its END's `open`, for the way
back) at every chunking; the frozen splitter dropped it where the text reached it in one piece.
There only the END pieces differ, and the rewrite must give the same at every chunking. The
third: a CR LF at the output's start ends a line as a LF does (the frozen splitter, given the text
whole, opened a block at `\\r\\n\\t<think>`, where `\\n\\t<think>` is indented code, text); there
the rewrite gives, at every chunking, what the frozen splitter gives for the text with LFs.
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import CORPUS
from support.frozen import splitter as frozen
from thinkwire import splitter as current, tagsets
from thinkwire.rules import Rules, TagPair

HERE = Path(__file__).parent
PAIRS = (TagPair("<think>", "</think>"), TagPair("<thinking>", "</thinking>"),
         TagPair("<reasoning>", "</reasoning>"), TagPair("<thought>", "</thought>"))
SHIPPED = tagsets.load(tagsets.SHIPPED)

# A whitespace-only line holding a carriage return, ended by a line feed: where the frozen
# splitter's result depended on the chunking (tests/test_splitter.py, the cut after "</think>\n").
_CR_LINE = re.compile(r"(?:^|\n)[ \t\r\f\v]*\r[ \t\r\f\v]*\n")


# -- the real outputs ---------------------------------------------------------------------------
def _strings(obj, keys=("content", "text", "delta", "thinking", "response")):
    """The text fields of a recorded event, in order (a generic read of any surface's shapes)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in keys and isinstance(v, str):
                yield v
            else:
                yield from _strings(v, keys)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v, keys)


def _corpus_texts() -> list[tuple[str, str | None, str]]:
    out = []
    for path in sorted(CORPUS.iterdir()):
        if path.suffix not in (".sse", ".json", ".jsonl", ".ndjson"):
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        parts: list[str] = []
        model = None
        docs = [raw] if path.suffix == ".json" else [
            ln[5:].strip() if ln.startswith("data:") else ln for ln in raw.splitlines()]
        for doc in docs:
            try:
                obj = json.loads(doc)
            except ValueError:
                continue
            if isinstance(obj, dict):
                model = model or obj.get("model")
            parts += _strings(obj)
        text = "".join(parts)
        if text:
            out.append((f"corpus/{path.name}", model if isinstance(model, str) else None, text))
    return out


def _case_texts() -> list[tuple[str, str | None, str]]:
    out = []
    files = [HERE / "realworld" / "cases.json", HERE / "cases_designed.json",
             *sorted(Path(p) for p in glob.glob(str(HERE / "conformance" / "*.json")))]
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        for case in data.get("cases", []) if isinstance(data, dict) else []:
            if isinstance(case.get("output"), str):
                out.append((f"{f.stem}/{case.get('id')}", case.get("model"), case["output"]))
    return out


TEXTS = _corpus_texts() + _case_texts()


def rules_for(model: str | None) -> list[Rules]:
    """The rules a flow for `model` splits with (its shipped profile), trimming on and off, starting
    inside and not, and the default profile's."""
    out = []
    for p in dict.fromkeys((SHIPPED.profile_for(model), SHIPPED.default)):
        for trim in (True, False):
            for inside in (p.starts_inside, not p.starts_inside):
                out.append(Rules(p.pairs, trim=trim, starts_inside=inside, strip=p.strip, ends=p.ends,
                                 start_pairs=p.start_pairs, start_ends=p.start_ends, resumes=p.resumes,
                                 tools=p.tools))
    return out


# -- one run through either splitter -------------------------------------------------------------
def _state(s) -> tuple:
    return (s.inside, s.holds_tag(), s.held_ws(), s.steady(), s.blocks, s.reasoning_chars, s.stray_closes,
            s.stray_after_text, s.markup_chars, s.added_chars)


def drive(mod, rules: Rules, chunks: list[str], how: str = "feed", prefill: str | None = None,
          cut_off: bool = False, starts_inside: bool | None = None) -> list:
    """Every call's result and the state after it. `how`: "feed" (every chunk fed), "plain" (a
    chunk with no tag character goes to `plain` first, as the byte path does), "took" (and where
    the splitter is steady, to `took`, as the C path's fold does)."""
    s = mod.Splitter(rules, starts_inside)
    trace: list = []
    if prefill is not None:
        s.resume(prefill)
        trace.append(("resume", _state(s)))
    for c in chunks:
        if how != "feed" and c and not rules.may_hold_tag(c):
            kind = s.steady()
            if how == "took" and kind is not None:
                try:
                    trace.append(("took", s.took(kind, c), _state(s)))
                    continue
                except ValueError:
                    trace.append(("took refused", _state(s)))
            got = s.plain(c)
            trace.append(("plain", got, _state(s)))
            if got is not None:
                continue
        trace.append(("feed", s.feed(c), _state(s)))
    trace.append(("finish", s.finish(cut_off), _state(s)))
    return trace


def _pieces(trace: list) -> list:
    out: list = []
    for step in trace:
        if step[0] in ("feed", "finish"):
            out += step[1]
        elif step[0] in ("plain", "took") and step[1] is not None:
            out.append(step[1] if step[0] == "plain" else ("took", step[1]))
    return _merge([p for p in out if p[0] != "took"])


def _merge(pieces: list) -> list:
    """Adjacent texts of a kind joined, as `merge` does, for either splitter's pieces (the frozen
    one's are plain tuples)."""
    out: list = []
    for kind, value in pieces:
        if out and kind != current.END and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + value)
        else:
            out.append((kind, value))
    return out


def cuts(text: str, seed: str, randoms: int = 3) -> dict[str, list[str]]:
    rng = random.Random(seed)
    out = {"whole": [text], "per character": list(text)}
    for k in range(randoms):
        points = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 12)))) if len(text) > 1 else []
        out[f"random {k}"] = [text[a:b] for a, b in zip([0] + points, points + [len(text)])]
    if len(text) <= 120:
        for k in range(1, len(text)):
            out[f"cut at {k}"] = [text[:k], text[k:]]
    return out


def _no_markup(trace: list) -> list:
    """The trace with each END piece's written markup left out."""
    def piece(p):
        return (p[0], None) if isinstance(p, tuple) and p and p[0] == current.END else p
    return [tuple([step[0], [piece(p) for p in step[1]]] + list(step[2:])) if step[0] in ("feed", "finish") else step
            for step in trace]


def check(rules: Rules, chunks: list[str], text: str, **kw) -> None:
    """The rewrite gives the frozen splitter's every result; where the text has a carriage-return
    line (`_CR_LINE`), it gives, at any chunking, the frozen splitter's result for the text whole;
    where only the END pieces' markup differs (`_GAP_BEFORE_BLOCK`), the same at every chunking."""
    got = drive(current, rules, chunks, **kw)
    want = drive(frozen, rules, chunks, **kw)
    if got == want:
        return
    if _no_markup(got) == _no_markup(want):
        # The whitespace between a removed tag and a block's opening tag is the block's markup at
        # every chunking (before, only where the text was cut between them).
        whole = drive(current, rules, [text], **{k: v for k, v in kw.items() if k != "how"})
        assert _pieces(got) == _pieces(whole), "an END's markup: not the same as for the text whole"
        return
    assert _CR_LINE.search(text), "differs from the frozen splitter"
    once = {k: v for k, v in kw.items() if k != "how"}
    whole = drive(frozen, rules, [text], **once)
    if _pieces(got) != _pieces(whole) and _pieces(got) == _pieces(drive(current, rules, [text], **once)):
        # The third: a CR LF ends a line as a LF does; the frozen splitter, given the text whole,
        # could read a CR LF line at the output's start otherwise ("\r\n\t<think>" opened a block
        # where "\n\t<think>" is indented code). The rewrite splits it as the frozen one splits
        # the text with LFs.
        lf = text.replace("\r\n", "\n")
        assert _lf(_pieces(got)) == _pieces(drive(frozen, rules, [lf], **once)), "a CR LF: not split as a LF"
        return
    assert _pieces(got) == _pieces(whole), "a carriage-return line: not the frozen whole-text result"
    assert got[-1][1:] == whole[-1][1:] or _pieces(got) == _pieces(whole)


def _lf(pieces: list) -> list:
    """Pieces with each CR LF in their texts and markup written as a LF."""
    def lf(v):
        return v.replace("\r\n", "\n") if isinstance(v, str) else type(v)(*(lf(x) for x in v))
    return [(kind, lf(value)) for kind, value in pieces]


@pytest.mark.parametrize("name,model,text", TEXTS, ids=[t[0] for t in TEXTS])
def test_every_real_output_splits_as_before_at_every_chunking(name, model, text):
    for r, rules in enumerate(rules_for(model)):
        for how, chunks in cuts(text, name).items():
            for mode in ("feed", "plain", "took") if how in ("per character", "random 0") else ("feed",):
                check(rules, chunks, text, how=mode, cut_off=how == "random 1")


def test_the_corpus_is_all_there():
    assert len(TEXTS) > 900
    assert sum(n.startswith("corpus/") for n, _, _ in TEXTS) >= 40


# -- generated texts -------------------------------------------------------------------------------
FIELD_RULES = [
    Rules(PAIRS), Rules(PAIRS, trim=False), Rules(PAIRS, starts_inside=True), Rules(PAIRS, anywhere=True),
    Rules(PAIRS, starts_inside=True, trim=False),
    Rules(PAIRS, ends=("<tool_call>", "<|tool_calls_section_begin|>")),
    Rules(PAIRS, starts_inside=True, ends=("<tool_call>",)),
    Rules(PAIRS, ends=("<tool_call>",), resumes=(("<tool_call>", "</tool_call>"),)),
    Rules((TagPair("<|channel>thought", "<channel|>"), TagPair("<|channel>", "<channel|>"))),
    Rules((TagPair("<|channel|>analysis<|message|>", "<|end|>"),),
          strip=("<|start|>assistant<|channel|>final<|message|>", "<|channel|>final<|message|>",
                 "<|start|>assistant", "<|start|>", "<|return|>", "<|end|>"),
          ends=("<|start|>", "<|channel|>final<|message|>", "<|channel|>commentary")),
    Rules((TagPair("<|channel|>analysis<|message|>", "<|end|>"),), strip=("<|start|>assistant", "<|end|>"),
          ends=("<|start|>",), tools=(("<|start|>assistant to=", "<|call|>"),)),
    Rules(PAIRS, start_pairs=(TagPair("analysis", "assistantfinal"),), start_ends=("assistantcommentary",)),
]
_TAGS = ["<think>", "</think>", "<thinking>", "</thinking>", "<thought>", "</thought>", "<thi", "</",
         "<tool_call>", "</tool_call>", "<|channel>", "<|channel>thought", "<channel|>", "<|tool_calls_section_begin|>",
         "<|channel|>analysis<|message|>", "<|end|>", "<|start|>", "<|start|>assistant", "<|start|>assistant to=f",
         "<|call|>", "<|channel|>final<|message|>", "<|return|>", "<|", "analysis", "assistantfinal", "thought"]
_WORDS = ["a", "1", "b c", " ", "  ", "    ", "\n", "\n\n", "\r", "\r\n", "\t", "```", "`", "``", "~~~", "é", "𝄞",
          "<", ">", "think", '"', "(", "x."]
_TEXT = st.lists(st.sampled_from(_TAGS + _WORDS), max_size=30).map("".join)


@settings(max_examples=int(os.environ.get("SPLIT_EXAMPLES", 400)), deadline=None)
@given(text=_TEXT, r=st.sampled_from(range(len(FIELD_RULES))), how=st.sampled_from(["feed", "plain", "took"]),
       data=st.data())
def test_any_text_splits_as_before_at_any_chunking(text, r, how, data):
    points = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=10)))
    chunks = [text[a:b] for a, b in zip([0] + points, points + [len(text)])]
    prefill = data.draw(st.sampled_from([None, "", "<think>", "<think>plan", "a\n", "<thi", "</think>"]))
    inside = data.draw(st.sampled_from([None, False, True]))
    check(FIELD_RULES[r], chunks, text, how=how, prefill=prefill, cut_off=data.draw(st.booleans()),
          starts_inside=inside)


# -- the differences --------------------------------------------------------------------------------
def test_a_cr_lf_line_at_the_start_splits_as_a_lf_line():
    # Hypothesis found it: given whole, the frozen splitter opened a block here, and not after "\n\t".
    text = "\r\n\t<think>"
    for rules in FIELD_RULES[:2]:
        for chunks in cuts(text, "cr lf").values():
            for how in ("feed", "plain", "took"):
                for cut_off in (False, True):
                    check(rules, chunks, text, how=how, cut_off=cut_off)
                    assert _pieces(drive(current, rules, chunks, how=how, cut_off=cut_off)) == [
                        (current.CONTENT, "\r\n\t<think>")]


def test_the_carriage_return_line_difference_is_where_the_frozen_splitter_split_by_chunking():
    # (The frozen splitter split this by where it was cut; the rewrite splits every cut as the text whole.)
    rules = Rules(PAIRS, trim=False)
    text = "</think>\n\r\n\t<think>"
    assert _pieces(drive(frozen, rules, [text[:9], text[9:]])) != _pieces(drive(frozen, rules, [text]))
    for k in range(len(text) + 1):
        assert _pieces(drive(current, rules, [text[:k], text[k:]])) == [(current.CONTENT, "\n\r\n\t<think>")], k


def test_a_start_pairs_closing_tag_closes_its_block_as_before():
    # gpt-oss with its special tokens dropped: `assistantfinal` closes the `analysis` block. The
    # rewrite once sent it to the answer (its block table knew only the pairs' closing tags).
    text = "analysisUser says hi. We should reply politely.assistantfinalHello! How can I help you today?"
    for rules in rules_for("gpt-oss-20b"):
        for how, chunks in cuts(text, "gpt-oss dropped").items():
            for mode in ("feed", "plain", "took") if how in ("per character", "random 0") else ("feed",):
                check(rules, chunks, text, how=mode)
