"""The splitter, behaviour by behaviour, plus properties over any chunking."""

import os
import re

import pytest
from hypothesis import given, settings, strategies as st

from thinkwire.rules import Rules, TagPair, Written, partial_tag_len
from thinkwire.splitter import CONTENT, END, REASONING, Split, Splitter, merge, split_text

THINK = TagPair("<think>", "</think>")
PAIRS = (THINK, TagPair("<thinking>", "</thinking>"), TagPair("<reasoning>", "</reasoning>"),
         TagPair("<thought>", "</thought>"))
RULES = Rules(PAIRS)


def stream(text_chunks, rules=RULES):
    s = Splitter(rules)
    out = []
    for c in text_chunks:
        out += s.feed(c)
    out += s.finish()
    return merge(out)


def result(pieces):
    """(reasoning blocks, content) from pieces."""
    s = Split(merge(pieces))
    return s.reasoning, s.content


def whole(text, rules=RULES):
    s = split_text(text, rules)
    return s.reasoning, s.content


# -- basic splitting ----------------------------------------------------------------------
def test_reasoning_then_answer():
    assert whole("<think>x</think>hi") == (["x"], "hi")


def test_plain_answer_is_untouched():
    assert whole("hello <b>world</b>") == ([], "hello <b>world</b>")


def test_each_configured_pair_is_recognised():
    for p in PAIRS:
        assert whole(f"{p.open}r{p.close}a") == (["r"], "a")


def test_longer_tag_wins_over_its_prefix():
    assert whole("<thinking>r</thinking>a") == (["r"], "a")


def test_every_block_is_handled_in_order():
    assert whole("<think>a</think>b<think>c</think>d") == (["a", "c"], "b\nd")
    assert stream(["<think>a</think>b<think>c</think>d"]) == [
        (REASONING, "a"), (END, THINK), (CONTENT, "b"), (REASONING, "c"),
        (END, Written("<think>", "</think>", 1)), (CONTENT, "\nd")]   # (the line break put there: 1)


def test_closing_tag_of_another_pair_does_not_close_the_block():
    assert whole("<think>a</thinking>b</think>c") == (["a</thinking>b"], "c")


def test_end_piece_carries_the_pair_the_block_came_from():
    out = stream(["<thought>x</thought>y"])
    assert (END, TagPair("<thought>", "</thought>")) in out


# -- where an opening tag counts ----------------------------------------------------------
def test_opening_tag_counts_after_leading_whitespace():
    assert whole("\n  <think>x</think>hi") == (["x"], "hi")


def test_opening_tag_counts_at_the_start_of_a_line():
    assert whole("intro\n<think>x</think>\nrest") == (["x"], "intro\nrest")


def test_opening_tag_mid_sentence_stays_text():
    assert whole("what does <think> do?") == ([], "what does <think> do?")


def test_opening_tag_in_a_fenced_code_block_stays_text():
    text = "Example:\n```xml\n<think>not reasoning</think>\n```\ndone"
    assert whole(text) == ([], text)


def test_tilde_fence_also_protects_tags():
    text = "~~~\n<think>x</think>\n~~~\n"
    assert whole(text) == ([], text)


def test_an_indented_fence_cut_anywhere_in_its_indent_reads_the_same():
    # The fence's line reached the splitter in pieces: the indent counted against the 8
    # characters kept of a line's start, so "```" past them was missed when the line was cut.
    text = "x\n" + " " * 9 + "```\n<think>a</think>b\n```\n"
    assert whole(text) == ([], text)
    for cut in range(2, 14):
        assert result(stream([text[:cut], text[cut:]])) == ([], text), cut


def test_tag_after_a_closed_fence_counts_again():
    assert whole("```\ncode\n```\n<think>x</think>y") == (["x"], "```\ncode\n```\ny")


def test_opening_tag_in_an_inline_code_span_stays_text():
    text = "<think>r</think>Use the `<think>` tag."
    assert whole(text) == (["r"], "Use the `<think>` tag.")


def test_an_opening_tag_glued_to_the_text_before_it_counts():
    # A model writes its tag right after its text; prose names a tag after a space or a quote.
    assert whole("Sure.<think>checking</think>Done.") == (["checking"], "Sure.\nDone.")
    assert whole("<think>first</think>mid<think>second</think>end") == (["first", "second"], "mid\nend")


def test_after_a_block_a_whole_pair_on_the_line_is_a_block_even_after_a_space():
    # (A second block's secret must not show; a tag prose names has no closing tag on its line.)
    assert whole("<think>a</think>ok <think>b</think>c") == (["a", "b"], "ok c")
    assert whole("<think>a</think>ok <think> opens one.\nIt </think>closes.") == (
        ["a"], "ok <think> opens one.\nIt </think>closes.")
    text = "R1</think>V1 <think>SECRET</think> V2"
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]])) == (["SECRET"], "R1</think>V1 V2"), k


def test_a_pair_after_a_block_is_looked_for_within_a_bound():
    from thinkwire.splitter import PAIR_ON_LINE
    far = "<think>a</think>ok <think>" + "x" * PAIR_ON_LINE + "</think>c"
    assert whole(far) == (["a"], far[len("<think>a</think>"):])
    s = Splitter(RULES)
    s.feed("<think>a</think>ok <think>")
    assert s.feed("x" * (PAIR_ON_LINE - 1)) == []          # held while the pair may still close
    assert s.feed("x")[0][0] == CONTENT                     # the bound: it is text


def test_prose_naming_a_tag_after_an_empty_block_keeps_its_words():
    text = "<think>\n\n</think>\n\nThe <think> tag starts a block, and \"<think>\" is how you write it."
    assert whole(text) == ([], "The <think> tag starts a block, and \"<think>\" is how you write it.")


APERTUS = Rules((TagPair("<|inner_prefix|>", "<|inner_suffix|>"),) + PAIRS)


def test_a_special_token_counts_mid_line_but_not_in_code():
    assert whole("hello <|inner_prefix|>think<|inner_suffix|>world", APERTUS) == (["think"], "hello world")
    text = "Write `<|inner_prefix|>x<|inner_suffix|>` to open one."
    assert whole(text, APERTUS) == ([], text)


# -- no glued words ---------------------------------------------------------------------------------
def test_whitespace_after_a_block_stays_where_the_answer_goes_on():
    text = "Here is the response<think>thinking about it</think>\nmore"
    assert whole(text) == (["thinking about it"], "Here is the response\nmore")
    assert whole("Intro.\n<think>x</think>\n\nAnswer") == (["x"], "Intro.\nAnswer")
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]])) == whole(text), k


def test_answer_pieces_that_meet_across_a_block_with_no_whitespace_get_a_line_break():
    # The model wrote none: words would run together (`Here is the responsemore`).
    text = "Here is the response<think>thinking about it</think>more"
    assert whole(text) == (["thinking about it"], "Here is the response\nmore")
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]])) == whole(text), k
    # Not where the answer had not begun, and not with think_trim off (the text exactly as written).
    assert whole("<think>a</think>b") == (["a"], "b")
    assert whole(text, Rules(PAIRS, trim=False)) == (["thinking about it"], "Here is the responsemore")


def test_whitespace_after_a_removed_closing_tag_stays_where_the_answer_goes_on():
    # In the middle of the answer (a closing tag after a block), at any cut.
    for text, want in (("<think>a</think>b</think>c", "b\nc"), ("<think>a</think>b</think> c", "b c"),
                       ("<think>a</think>b\n</think> c", "b\n c"), ("<think>a</think>b</think>\n<think>d</think>", "b"),
                       ("<think>a</think>b</think></think>c", "b\nc")):
        assert whole(text) == (whole(text)[0], want), text
        for k in range(len(text) + 1):
            assert result(stream([text[:k], text[k:]])) == whole(text), (text, k)


# -- code inside reasoning ----------------------------------------------------------------------------
def test_a_closing_tag_in_a_code_span_inside_reasoning_is_text():
    text = "<think>The `</think>` tag ends it; so does ``a `</think>` b``.</think>Answer"
    assert whole(text) == (["The `</think>` tag ends it; so does ``a `</think>` b``."], "Answer")
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]])) == whole(text), k


def test_in_a_fence_inside_reasoning_a_closing_tag_closes_only_at_a_line_start():
    text = ('Draft:\n```python\nre.sub(r"<think>.*?</think>", "", s)\n```\nGood.\n</think>\n\n'
            'Use:\n```python\nre.sub(r"<think>.*?</think>", "", s)\n```')
    rules = Rules(PAIRS, starts_inside=True)
    assert whole(text, rules) == (['Draft:\n```python\nre.sub(r"<think>.*?</think>", "", s)\n```\nGood.'],
                                  'Use:\n```python\nre.sub(r"<think>.*?</think>", "", s)\n```')
    unclosed = "<think>```\nx </think> y\n</think>done"
    assert whole(unclosed) == (["```\nx </think> y"], "done")


def test_a_closing_tag_glued_to_a_fence_marker_on_its_opening_line_closes_the_block():
    # Found by the Responses echo property: "~~~" right after the opening tag starts a line of
    # reasoning, and the closing tag glued to it would have been the fence's info string.
    for text, want in (("<think>~~~</think>0", (["~~~"], "0")),
                       ("<think>plan\n```</think>\n\nDone.", (["plan\n```"], "Done."))):
        assert whole(text) == want
        for k in range(len(text) + 1):
            assert result(stream([text[:k], text[k:]])) == want, (text, k)
    # After a space it is prose naming the tag, on the fence's line as anywhere: the fence opens.
    assert whole("<think>~~~ </think> x\n</think>y") == (["~~~ </think> x"], "y")


def test_a_code_span_of_two_backticks_protects_a_tag():
    assert whole("<think>plan</think>Write ``<think>`` literally.") == (["plan"], "Write ``<think>`` literally.")
    # A run of another length inside the span is text; the span ends at its own run.
    assert whole("a ``x ` <think>`` <think>y</think>") == ([], "a ``x ` <think>`` <think>y</think>")


def test_a_backtick_run_cut_between_chunks_is_one_run():
    text = "<think>p</think>Say ``<think>`` here."
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]])) == (["p"], "Say ``<think>`` here."), k


def test_an_opening_tag_in_a_code_span_of_a_prompt_opened_block_is_text():
    rules = Rules(PAIRS, starts_inside=True)
    text = "Let's select `<thought>` or <thought> tags.\n</think>\n\nUse `<thought>`."
    assert whole(text, rules) == (["Let's select `<thought>` or <thought> tags."], "Use `<thought>`.")


def test_tags_anywhere_option_counts_mid_sentence_tags():
    rules = Rules(PAIRS, anywhere=True)
    assert whole("what does <think>x</think> do?", rules) == (["x"], "what does do?")


# -- unclosed and stray tags --------------------------------------------------------------
def test_unclosed_block_at_end_stays_reasoning():
    assert whole("<think>cut off by max_tokens") == (["cut off by max_tokens"], "")
    # (its END says what the model wrote around the text: no closing tag, cut off)
    assert stream(["<think>cut off"])[-1] == (END, TagPair("<think>", ""))


def test_unclosed_block_ending_in_a_partial_closing_tag_keeps_that_text():
    assert whole("<think>abc</thi") == (["abc</thi"], "")


def test_closing_tag_without_opening_after_text_stays_where_the_reasoning_ended():
    # As a stream must: the text was sent as answer before the tag came; the tag, as written, is
    # the only boundary the client can still see (thinkwire.context re-splits a body from inside).
    # A profile that starts inside makes it reasoning, in bodies and streams alike.
    assert whole("reasoned here.</think>Hi! 😊") == ([], "reasoned here.</think>Hi! 😊")
    assert split_text("reasoned here.</think>Hi! 😊", RULES).stray_closes == 1
    assert whole("reasoned here.</think>Hi! 😊", Rules(PAIRS, starts_inside=True)) == (["reasoned here."], "Hi! 😊")


def test_stray_closing_tag_in_a_stream_after_sent_text_stays_as_written():
    s = Splitter(RULES)
    out = s.feed("already sent.") + s.feed("</think>\n\nanswer") + s.finish()
    assert merge(out) == [(CONTENT, "already sent.</think>\n\nanswer")]
    assert (s.stray_closes, s.stray_after_text, s.markup_chars) == (1, 1, 0)
    # With nothing but whitespace before it nothing was said as answer: the tag goes.
    s = Splitter(RULES)
    out = s.feed("\n") + s.feed("</think>\n\nanswer") + s.finish()
    assert merge(out) == [(CONTENT, "\nanswer")]
    assert (s.stray_closes, s.stray_after_text, s.markup_chars) == (1, 0, len("</think>"))


def test_stray_closing_tag_after_a_block_is_removed():
    assert whole("<think>a</think>b.</think> c") == (["a"], "b. c")
    assert stream(["<think>a</think>b.</th", "ink> c"]) == stream(["<think>a</think>b.</think> c"])


def test_a_closing_tag_prose_names_mid_line_is_text():
    # After a space or a quote in the middle of a line, with no block open: prose names the tag,
    # before any block (it does not make the text before it reasoning) and after one.
    for text in ("The reasoning block ends with </think> and the answer follows it.",
                 'Write "</think>" to end it.', "<think>a</think>It ends with </think> then."):
        want = text.split("</think>", 1)[1] if text.startswith("<think>") else text
        assert whole(text)[1] == want, text
        for k in range(len(text) + 1):
            assert result(stream([text[:k], text[k:]])) == whole(text), (text, k)
    # Unless the text after it is glued to it, as markup is (a duplicated closing token).
    text = "<think>a</think>part1 </think>part2"
    assert whole(text) == (["a"], "part1 part2")
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]])) == whole(text), (text, k)
    # Glued to the text, at a line's start, or at the start: markup (the text before it was
    # reasoning; the tag stays where it ended, as the text went out as answer: see below).
    assert split_text("Reasoning here.</think>Answer", RULES).stray_closes == 1
    assert split_text("Reasoning here.\n</think>\n\nAnswer", RULES).stray_closes == 1


def test_second_closing_tag_of_a_prompt_opened_block_is_removed():
    rules = Rules(PAIRS, starts_inside=True)
    # (Where answer text meets across a removed tag with no whitespace, a line break goes between.)
    assert whole("reasoning</think>content A</think>content B", rules) == (["reasoning"], "content A\ncontent B")
    assert whole("reasoning</think>content A</think>content B") == ([], "reasoning</think>content A\ncontent B")


def test_closing_tag_of_a_pair_written_as_text_in_prose_is_text():
    text = "You can wrap reasoning in a <think> tag, as in <think>...</think>, inline."
    assert whole(text) == ([], text)
    assert result(stream([text[:k] for k in (50,)] + [text[50:]])) == ([], text)
    assert stream(list(text)) == [(CONTENT, text)]


def test_closing_tag_in_inline_code_is_text():
    text = "Close it with `</think>` when done."
    assert whole(text) == ([], text)


def test_a_block_opened_after_a_literal_tag_still_closes():
    text = "Mention <think> here.\n<think>real</think>answer"
    assert whole(text) == (["real"], "Mention <think> here.\nanswer")


def test_starts_inside_rule_makes_everything_up_to_the_close_reasoning():
    rules = Rules(PAIRS, starts_inside=True)
    assert result(stream(["abc", "</th", "ink>\n\nanswer"], rules)) == (["abc"], "answer")


def test_starts_inside_with_no_close_is_all_reasoning():
    rules = Rules(PAIRS, starts_inside=True)
    assert result(stream(["all of it"], rules)) == (["all of it"], "")


# -- whitespace ---------------------------------------------------------------------------
def test_whitespace_at_block_edges_and_after_close_is_trimmed():
    assert whole("<think>\n\nx y \n</think>\n\nhi ") == (["x y"], "hi ")
    assert whole("<think> x y </think>  hi ") == (["x y"], "hi ")   # (on the tag's line: it goes)


def test_whitespace_on_a_tags_line_is_no_indentation():
    # (A tab right after a closing tag is not an indented code line: the next block still opens.)
    assert whole("<think>0</think>\t<think>1</think>") == (["0", "1"], "")
    assert whole("<think>0</think>    <think>1</think>x") == (["0", "1"], "x")


def test_trimming_keeps_the_first_lines_indentation():
    # Blank lines go; the first line's indentation stays where it makes code (four columns, a
    # tab): an indented code block keeps its shape. Less means nothing in Markdown: it goes.
    assert whole("<think>\n  x y \n</think>\n\n  hi ") == (["x y"], "hi ")
    assert whole("<think>\n    x y \n</think>\n\n     hi ") == (["    x y"], "     hi ")
    assert whole("<think>plan</think>\n\n    $ make install\n    $ make test") == (
        ["plan"], "    $ make install\n    $ make test")
    assert whole("<think>\n\tcode\n</think>\n\t\tmore") == (["\tcode"], "\t\tmore")
    for text in ("<think>plan</think>\n\n    $ make install\n    $ make test", "<think>\n  x</think>\n \n  y"):
        for cut in range(1, len(text)):
            assert stream([text[:cut], text[cut:]]) == stream([text]), (text, cut)


def test_trim_off_keeps_all_whitespace():
    rules = Rules(PAIRS, trim=False)
    assert whole("\n<think>\nx\n</think>\n\nhi", rules) == (["\nx\n"], "\n\n\nhi")


def test_leading_whitespace_of_a_plain_answer_is_kept():
    assert whole("\n\nhello") == ([], "\n\nhello")


def test_empty_block_gives_no_reasoning():
    assert whole("<think>\n</think>\n\nanswer") == ([], "answer")


def test_whitespace_only_output_is_kept():
    assert whole("  \n") == ([], "  \n")


# -- holdback -----------------------------------------------------------------------------
def test_partial_opening_tag_is_held_until_decided():
    s = Splitter(RULES)
    assert s.feed("<thi") == []
    assert s.feed("nk>r") == [(REASONING, "r")]


def test_reasoning_goes_out_as_soon_as_it_arrives():
    s = Splitter(RULES)
    s.feed("<think>")
    assert s.feed("first words") == [(REASONING, "first words")]


def test_only_a_possible_tag_suffix_is_held_back():
    s = Splitter(RULES)
    s.feed("<think>")
    assert s.feed("abc</th") == [(REASONING, "abc")]
    assert s.feed("ink>x") == [(END, THINK), (CONTENT, "x")]


def test_less_than_sign_mid_line_is_not_held():
    s = Splitter(RULES)
    s.feed("<think>r</think>")
    s.feed("ok")
    # `<` that cannot start a counting tag here (inside code) goes out at once.
    assert s.feed(" `a <") == [(CONTENT, " `a <")]


def test_partial_tag_that_never_completes_is_text():
    assert whole("<thinx>") == ([], "<thinx>")
    assert stream(["<", "thi", "nx>"]) == [(CONTENT, "<thinx>")]


def test_many_partial_prefixes_are_linear_and_kept():
    text = "<thi" * 5000 + "<<<<<<<" * 1000
    assert whole(text) == ([], text)


# -- properties ---------------------------------------------------------------------------
tags = st.sampled_from(["<think>", "</think>", "<thinking>", "</thinking>", "<thought>", "</thought>", "<thi", "</"])
words = st.sampled_from(["a", "b c", " ", "\n", "\n\n", "\r", "\r\n", "\t", "```", "`", "``", "~~~", "é", "𝄞",
                         "x\u0301", "<", ">", "think", '"', "("])
texts = st.lists(st.one_of(tags, words), max_size=30).map("".join)


def chunkings(text, data):
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8).map(sorted))
    return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]


@settings(max_examples=int(os.environ.get("SPLIT_EXAMPLES", 400)), deadline=None)
@given(texts, st.data())
def test_any_chunking_gives_the_same_pieces(text, data):
    assert stream(chunkings(text, data)) == stream([text])


@settings(max_examples=int(os.environ.get("SPLIT_EXAMPLES", 300)), deadline=None)
@given(texts, st.booleans(), st.data())
def test_starts_inside_any_chunking_gives_the_same_pieces(text, inside, data):
    rules = Rules(PAIRS, starts_inside=inside, trim=data.draw(st.booleans()))
    assert stream(chunkings(text, data), rules) == stream([text], rules)


def _markup_free(text, rules):
    s = Splitter(rules)
    pieces = s.feed(text) + s.finish()
    return "".join(v for k, v in pieces if k != END), s.markup_chars


@settings(max_examples=int(os.environ.get("SPLIT_EXAMPLES", 400)), deadline=None)
@given(texts, st.booleans())
def test_nothing_lost_without_trimming(text, inside):
    out, markup = _markup_free(text, Rules(PAIRS, trim=False, starts_inside=inside))
    # Only recognised tags leave: the rest is the input, in order.
    assert len(out) + markup == len(text)
    assert _is_subsequence(out, text)


@settings(max_examples=int(os.environ.get("SPLIT_EXAMPLES", 400)), deadline=None)
@given(texts)
def test_nothing_lost_with_trimming_only_whitespace_differs(text):
    kept, _ = _markup_free(text, Rules(PAIRS, trim=False))
    trimmed, _ = _markup_free(text, RULES)
    assert re.sub(r"\s", "", kept) == re.sub(r"\s", "", trimmed)
    # What trimming adds is the line breaks it counts, between text that would run together.
    s = Splitter(RULES)
    out = "".join(v for k, v in s.feed(text) + s.finish() if k != END)
    assert len(out) - s.added_chars + s.markup_chars <= len(text)
    assert s.added_chars == 0 or "\n" in out


def _is_subsequence(small, big):
    it = iter(big)
    return all(c in it for c in small)


def test_removing_the_tags_gives_the_pieces_back():
    text = "lead\n<think>r1</think>mid\n<thought>r2</thought>end"
    rules = Rules(PAIRS, trim=False)
    s = split_text(text, rules)
    joined = "".join(v for k, v in s.pieces if k != END)
    assert joined == "lead\nr1mid\nr2end"


def test_rules_need_at_least_one_pair():
    with pytest.raises(ValueError):
        Rules(())


def test_a_carriage_return_alone_does_not_make_a_line_start():
    # "\r" is whitespace (the start boundary holds) but not a line end: after "x" a tag is mid-line.
    assert stream(["\r", "x", " <think>y"]) == stream(["\rx <think>y"]) == [(CONTENT, "\rx <think>y")]


# -- markers that end reasoning, tags inside tags, markers that are also closing tags -------------
TOOLS = Rules(PAIRS, ends=("<tool_call>", "<|tool_calls_section_begin|>"))


def test_a_tool_call_ends_an_unclosed_block_and_stays_in_the_answer():
    text = "<think>I need to read the file.\n\n<tool_call>{\"name\": \"read\"}</tool_call>"
    assert whole(text, TOOLS) == (["I need to read the file."], '<tool_call>{"name": "read"}</tool_call>')
    assert stream(list(text), TOOLS) == stream([text], TOOLS)


def test_a_tool_call_ends_a_prompt_opened_block():
    rules = Rules(PAIRS, starts_inside=True, ends=("<tool_call>",))
    assert whole("thinking\n<tool_call>x</tool_call>", rules) == (["thinking"], "<tool_call>x</tool_call>")


def test_a_tool_call_marker_glued_to_the_reasoning_ends_it():
    text = "<think>I need to think<tool_call>get_weather</tool_call>"
    assert whole(text, TOOLS) == (["I need to think"], "<tool_call>get_weather</tool_call>")
    assert whole("<think><tool_call>x</tool_call>", TOOLS) == ([], "<tool_call>x</tool_call>")


def test_a_tool_call_marker_named_in_prose_or_code_inside_reasoning_is_text():
    text = "<think>I could write a <tool_call> block, or `<tool_call>`, here.</think>ok"
    assert whole(text, TOOLS) == (["I could write a <tool_call> block, or `<tool_call>`, here."], "ok")
    assert stream(list(text), TOOLS) == stream([text], TOOLS)


def test_a_special_token_tool_marker_follows_the_same_rule():
    # Named in prose (after a space) it is text; glued to the reasoning's text it ends the block.
    text = "<think>It starts with <|tool_calls_section_begin|> and ends there."
    assert whole(text, TOOLS) == (["It starts with <|tool_calls_section_begin|> and ends there."], "")
    text = "<think>Calling it now.<|tool_calls_section_begin|>x"
    assert whole(text, TOOLS) == (["Calling it now."], "<|tool_calls_section_begin|>x")
    # A special token is structure, not a name prose uses: it ends the block in a body too, even
    # one that closes later (with a resume marker the reasoning goes on after the call: Apertus).
    text = "<think>plan<|tool_calls_section_begin|>[]<|tool_calls_section_end|>done</think>final"
    assert whole(text, TOOLS) == (["plan"], "<|tool_calls_section_begin|>[]<|tool_calls_section_end|>done\nfinal")


def test_a_tool_call_written_inside_the_reasoning_reaches_the_answer_in_a_body_as_in_a_stream():
    # The model wrote its call inside its reasoning, then thought on and closed the block: the
    # call goes to the answer (for the tool parser), and what follows it is reasoning again.
    rules = Rules(PAIRS, ends=("<tool_call>",), resumes=(("<tool_call>", "</tool_call>"),))
    text = "<think>Plan:\n<tool_call>\n{}\n</tool_call>\nno, wait.\n</think>\n\nanswer"
    assert whole(text, rules) == (["Plan:", "no, wait."], "<tool_call>\n{}\n</tool_call>\n\nanswer")
    assert result(stream(list(text), rules)) == whole(text, rules)
    # Without a resume marker the rest of the block follows the call into the answer.
    assert whole(text, TOOLS) == (["Plan:"], "<tool_call>\n{}\n</tool_call>\nno, wait.\n\n\nanswer")
    assert result(stream(list(text), TOOLS)) == whole(text, TOOLS)


def test_a_tool_call_marker_in_the_answer_is_answer_text():
    assert whole("<think>a</think>call <tool_call>x", TOOLS) == (["a"], "call <tool_call>x")


def test_an_opening_tag_inside_a_prompt_opened_block_is_dropped():
    rules = Rules(PAIRS, starts_inside=True)
    text = "Intro\n<think>reasoning</think>\nAnswer"
    assert whole(text, rules) == (["Intro\nreasoning"], "Answer")
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]], rules)) == (["Intro\nreasoning"], "Answer"), k


def test_only_the_first_opening_tag_of_a_prompt_opened_block_is_dropped():
    rules = Rules(PAIRS, starts_inside=True)
    assert whole("<think>a <think> b</think>c", rules) == (["a <think> b"], "c")


GEMMA = Rules((TagPair("<|channel>thought", "<channel|>"), TagPair("<|channel>", "<channel|>")))


def test_a_tag_that_begins_a_longer_tag_waits_until_the_text_tells_them_apart():
    s = Splitter(GEMMA)
    assert s.feed("<|channel>") == []
    assert s.feed("tho") == []
    assert merge(s.feed("ught\nx<channel|>y") + s.finish()) == [(REASONING, "x"), (END, TagPair("<|channel>thought\n", "<channel|>")),
                                                     (CONTENT, "y")]


def test_the_shorter_tag_counts_when_the_longer_one_does_not_follow():
    assert whole("<|channel>x<channel|>y", GEMMA) == (["x"], "y")
    assert stream(["<|channel>", "x<channel|>y"], GEMMA) == stream(["<|channel>x<channel|>y"], GEMMA)


def test_an_undecided_tag_at_the_end_of_the_output_is_decided_then():
    assert result(stream(["a\n<|channel>"], GEMMA)) == ([], "a\n")  # an empty block: no reasoning
    assert result(stream(["a\n<|channel>", "tho"], GEMMA)) == (["tho"], "a\n")


HARMONY = Rules((TagPair("<|channel|>analysis<|message|>", "<|end|>"),),
                strip=("<|start|>assistant<|channel|>final<|message|>", "<|channel|>final<|message|>",
                       "<|start|>assistant", "<|start|>", "<|return|>", "<|end|>"),
                ends=("<|start|>", "<|channel|>final<|message|>", "<|channel|>commentary"))


def test_a_strip_marker_that_is_a_closing_tag_closes_a_block_and_is_removed_elsewhere():
    text = "<|channel|>analysis<|message|>Thinking<|end|><|start|>assistant<|channel|>final<|message|>Hi<|end|>"
    assert whole(text, HARMONY) == (["Thinking"], "Hi")
    assert whole("<|start|><|channel|>final<|message|>x<|end|>", HARMONY) == ([], "x")


def test_a_new_header_ends_a_block_whose_end_marker_was_dropped():
    text = "<|channel|>analysis<|message|>Thinking...<|start|>assistant<|channel|>final<|message|>Hello world"
    assert whole(text, HARMONY) == (["Thinking..."], "Hello world")
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]], HARMONY)) == (["Thinking..."], "Hello world"), k


def test_in_code_a_strip_marker_is_text_cut_anywhere():
    # A special token in a fence or a code span of the answer is text (an answer showing a format).
    text = "<|start|>assistant<|channel|>final<|message|>Hi\n```\nx <|return|> y\n```\nand `<|end|>`."
    assert whole(text, HARMONY) == ([], "Hi\n```\nx <|return|> y\n```\nand `<|end|>`.")
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]], HARMONY)) == whole(text, HARMONY), k
    s = Splitter(HARMONY)
    s.feed("<|start|>assistant<|channel|>final<|message|>Hi `x")
    assert s.feed(" <|channel|>an") == [(CONTENT, " <|channel|>an")]   # (in code nothing waits)
    # Outside code it is markup, as before.
    assert whole("<|start|>assistant<|channel|>final<|message|>Hi<|return|>", HARMONY) == ([], "Hi")


FIELD_RULES = [
    Rules(PAIRS, ends=("<tool_call>", "<|tool_calls_section_begin|>")),
    Rules(PAIRS, starts_inside=True, ends=("<tool_call>",)),
    GEMMA, Rules(GEMMA.pairs, starts_inside=True, trim=False),
    HARMONY, Rules(HARMONY.pairs, strip=HARMONY.strip, ends=HARMONY.ends, trim=False),
]
field_tags = st.sampled_from(["<think>", "</think>", "<thought>", "<tool_call>", "<thi", "</", "<|channel>",
                              "<|tool_calls_section_begin|>",
                              "<|channel>thought", "<channel|>", "<|channel|>analysis<|message|>", "<|end|>",
                              "<|start|>", "<|start|>assistant", "<|channel|>final<|message|>", "<|", "thought"])
field_texts = st.lists(st.one_of(field_tags, words), max_size=30).map("".join)


@settings(max_examples=int(os.environ.get("SPLIT_EXAMPLES", 300)), deadline=None)
@given(field_texts, st.sampled_from(range(len(FIELD_RULES))), st.data())
def test_any_chunking_gives_the_same_pieces_with_end_markers_and_nested_tags(text, r, data):
    rules = FIELD_RULES[r]
    assert stream(chunkings(text, data), rules) == stream([text], rules)


@settings(max_examples=int(os.environ.get("SPLIT_EXAMPLES", 300)), deadline=None)
@given(field_texts, st.sampled_from(range(len(FIELD_RULES))))
def test_nothing_lost_with_end_markers_and_nested_tags(text, r):
    rules = FIELD_RULES[r]
    rules = Rules(rules.pairs, trim=False, starts_inside=rules.starts_inside, strip=rules.strip, ends=rules.ends)
    out, markup = _markup_free(text, rules)
    assert len(out) + markup == len(text)
    assert _is_subsequence(out, text)


def test_whitespace_between_blocks_or_after_the_last_one_is_trimmed():
    assert whole("A<think>x</think>\n\n<think>y</think>\n\nB") == (["x", "y"], "A\n\nB")
    assert whole("A<think>x</think>\n\n") == (["x"], "A")
    assert whole("A<think>x</think>\n</think>\nB") == (["x"], "A\n\nB")
    for text in ("A<think>x</think>\n\n<think>y</think>\n\nB", "A<think>x</think>\n</think>\nB"):
        for k in range(len(text) + 1):
            assert result(stream([text[:k], text[k:]])) == whole(text), (text, k)
        assert stream(list(text)) == stream([text])


KIMI_K3 = Rules((TagPair("<|open|>think<|sep|>", "<|close|>think<|sep|>"),),
                strip=("<|open|>response<|sep|>", "<|close|>response<|sep|>"))


def test_a_marker_cut_off_at_the_end_that_starts_with_a_special_token_is_dropped():
    # Prose never holds `<|close|>`: cut off inside `<|close|>think<|sep|>`, it is markup.
    assert whole("<|open|>think<|sep|>deep thought<|close|>think", KIMI_K3) == (["deep thought"], "")
    text = "<|open|>think<|sep|>t<|close|>think<|sep|><|open|>response<|sep|>the answer<|close|>"
    assert whole(text, KIMI_K3) == (["t"], "the answer")
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]], KIMI_K3)) == whole(text, KIMI_K3), k
    # Any other start of a tag stays text, and so does one in code.
    assert whole("<think>abc</thi") == (["abc</thi"], "")
    assert whole("<|open|>think<|sep|>t<|close|>think<|sep|>see `<|close|>", KIMI_K3) == (["t"], "see `<|close|>")


def test_reasoning_on_both_sides_of_an_opening_tag_dropped_in_a_prompt_opened_block_gets_a_line_break():
    rules = Rules(PAIRS, starts_inside=True)
    assert whole("prefix<think>work</think>answer", rules) == (["prefix\nwork"], "answer")
    assert whole("prefix\n<think>work</think>answer", rules) == (["prefix\nwork"], "answer")
    # (After a space in the middle of a line it is prose naming the tag: text.)
    assert whole("prefix <think>work</think>answer", rules) == (["prefix <think>work"], "answer")
    for k in range(len("prefix<think>work</think>answer") + 1):
        text = "prefix<think>work</think>answer"
        assert result(stream([text[:k], text[k:]], rules)) == (["prefix\nwork"], "answer"), k


APERTUS_TOOLS = Rules((TagPair("<|inner_prefix|>", "<|inner_suffix|>"),), ends=("<|tools_prefix|>",),
                      resumes=(("<|tools_prefix|>", "<|tools_suffix|>"),))


def test_a_tool_block_inside_reasoning_goes_to_the_answer_and_the_reasoning_goes_on_after_it():
    text = '<|inner_prefix|>plan<|tools_prefix|>[{"name": "w"}]<|tools_suffix|>done<|inner_suffix|>final'
    want = (["plan", "done"], '<|tools_prefix|>[{"name": "w"}]<|tools_suffix|>\nfinal')
    assert whole(text, APERTUS_TOOLS) == want
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]], APERTUS_TOOLS)) == want, k
    # A tool block that ends the output leaves no empty block behind; the resume marker in the
    # answer of another block is text.
    assert whole("<|inner_prefix|>r<|tools_prefix|>[]<|tools_suffix|>", APERTUS_TOOLS) == (
        ["r"], "<|tools_prefix|>[]<|tools_suffix|>")
    assert whole("<|inner_prefix|>r<|inner_suffix|>a <|tools_suffix|> b", APERTUS_TOOLS) == (
        ["r"], "a <|tools_suffix|> b")


# -- the way back: the markup as written ------------------------------------------------------------
def _as_written(pieces: list) -> str:
    """The text the pieces say the model wrote: each block's END markup around its text, the
    line breaks thinkwire put after a block taken out."""
    out, reasoning, cut = [], [], 0
    for kind, value in pieces:
        if kind == REASONING:
            reasoning.append(value)
        elif kind == END:
            out.append(value.open + "".join(reasoning) + value.close)
            reasoning, cut = [], value.added if isinstance(value, Written) else 0
        else:
            out.append(value[cut:])
            cut = 0
    return "".join(out)


_WS_RUN = st.sampled_from(["", " ", "\n", "\n\n", "\t", " \n  ", "\r\n"])
_WORD = st.sampled_from(["a", "b c", "x.y", "ü"])


@st.composite
def _written_text(draw):
    parts = [draw(_WS_RUN)]
    for _ in range(draw(st.integers(1, 3))):
        parts += ["<think>", draw(_WS_RUN), draw(_WORD), draw(_WS_RUN), "</think>", draw(_WS_RUN)]
        parts += [draw(st.sampled_from(["", draw(_WORD)])), draw(_WS_RUN)]
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(text=_written_text(), data=st.data())
def test_the_end_pieces_hold_what_the_model_wrote_byte_for_byte_at_any_chunking(text, data):
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=6))))
    chunks = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    s = Splitter(Rules(PAIRS))
    got = []
    for c in chunks:
        got += s.feed(c)
    got += s.finish()
    assert _as_written(got) == text


def test_the_end_piece_of_a_cut_off_block_holds_no_closing_tag():
    s = Splitter(Rules(PAIRS))
    assert merge(s.feed("\n<think>\n plan \n") + s.finish()) == [(REASONING, "plan"),
                                                                   (END, TagPair("\n<think>\n ", " \n"))]


# -- tool calls as written ------------------------------------------------------------------------
GPT_OSS_TOOLS = Rules((TagPair("<|channel|>analysis<|message|>", "<|end|>"),), strip=("<|start|>assistant", "<|end|>"),
                      ends=("<|start|>",), tools=(("<|start|>assistant to=", "<|call|>"),))


def test_a_tool_call_stays_as_written_up_to_its_end_marker_at_any_cut():
    call = '<|start|>assistant to=functions.f<|channel|>commentary<|message|>{"s": "<|end|>`"}<|call|>'
    text = "<|channel|>analysis<|message|>Plan.<|end|>" + call + "<|start|>assistant<|end|>Done `x` <|end|>."
    want = (["Plan."], call + "\nDone `x` .")   # (after the call, markers are markup again, and code is code)
    assert whole(text, GPT_OSS_TOOLS) == want
    for k in range(len(text) + 1):
        assert result(stream([text[:k], text[k:]], GPT_OSS_TOOLS)) == want, k
    assert result(stream(list(text), GPT_OSS_TOOLS)) == want
    # Cut off inside the call: what came of it is answer, a partial end marker included.
    s = Splitter(GPT_OSS_TOOLS)
    out = s.feed('<|start|>assistant to=f<|message|>{}<|ca')
    assert merge(out) == [(CONTENT, '<|start|>assistant to=f<|message|>{}')]
    assert merge(s.finish()) == [(CONTENT, "<|ca")]


def test_a_line_of_only_a_carriage_return_is_blank_however_the_text_is_cut():
    # Found by the chunking property: "\r\n" ends a line, so the line between the two line feeds
    # is blank and the tab-indented line after it is indented code, where an opening tag is text.
    # Read in one piece the line was blank; cut after the first "\n", the "\r" made it a line of text
    # and the tag opened a block.
    text = "</think>\n\r\n\t<think>"
    for trim, want in ((False, [(CONTENT, "\n\r\n\t<think>")]), (True, [(CONTENT, "\t<think>")])):
        rules = Rules(PAIRS, trim=trim)
        for k in range(len(text) + 1):
            assert stream([text[:k], text[k:]], rules) == want, (trim, k)
    rules = Rules(PAIRS, starts_inside=True)
    for k in range(len(text) + 1):
        assert stream([text[:k], text[k:]], rules) == [(END, TagPair("<think>", "</think>\n\r\n")),
                                                       (CONTENT, "\t<think>")], k


@settings(max_examples=int(os.environ.get("SPLIT_EXAMPLES", 400)), deadline=None)
@given(st.lists(st.sampled_from([" ", "\t", "\r", "\n", "x", "`", "```", "~~~", "    ", "<"]), max_size=25).map("".join),
       st.data())
def test_lines_read_in_pieces_stand_where_the_whole_text_stands(text, data):
    from thinkwire.lines import Lines
    whole, cut = Lines(), Lines()
    whole.read(text)
    points = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    for a, b in zip([0] + points, points + [len(text)]):
        cut.read(text, a, b)
    def where(ln):
        return ln.in_code(), ln.close_counts(), ln.close_counts(False), ln.glued(), ln.indented_code(), ln.blank
    assert where(cut) == where(whole)


# -- modes -------------------------------------------------------------------------------------------
def test_the_splitter_moves_between_its_modes_by_the_table():
    from thinkwire.modes import TRANSITIONS, Mode
    s = Splitter(GPT_OSS_TOOLS)
    seen = [s.mode]
    for chunk in ("<|channel|>analysis<|message|>", "Plan.", "<|end|>", "<|start|>assistant to=f", "{}", "<|call|>", "ok"):
        s.feed(chunk)
        seen.append(s.mode)
    assert seen == [Mode.ANSWER, Mode.BLOCK, Mode.BLOCK, Mode.ANSWER, Mode.TOOL_CALL, Mode.TOOL_CALL, Mode.ANSWER,
                    Mode.ANSWER]
    s = Splitter(RULES, starts_inside=True)
    assert s.mode is Mode.PROMPT_BLOCK
    s.feed("a\n<think>b")
    assert s.mode is Mode.BLOCK              # the model's own opening tag, dropped
    s.finish()
    assert s.mode is Mode.ANSWER             # cut off
    assert set(TRANSITIONS) == set(Mode)


def test_a_move_the_table_does_not_hold_is_an_error():
    from thinkwire.modes import Event, SplitterError
    s = Splitter(RULES)
    with pytest.raises(SplitterError, match="no move from answer"):
        s._go(Event.CLOSE)


def test_whitespace_between_a_removed_tag_and_a_block_is_the_blocks_markup_however_the_text_is_cut():
    # Found by the chunking property: read whole, the space was dropped from the way back's record;
    # cut after the removed tag, it was the block's opening markup (as the model wrote it).
    text = "</think>a</think> <thought></thought>"
    for k in range(len(text) + 1):
        assert stream([text[:k], text[k:]]) == [(CONTENT, "a"), (END, TagPair(" <thought>", "</thought>"))], k
    text = "<think>x</think>a</think> \n <think>y</think>b"
    for k in range(len(text) + 1):
        assert stream([text[:k], text[k:]]) == [(REASONING, "x"), (END, THINK), (CONTENT, "a"), (REASONING, "y"),
                                                (END, Written(" \n <think>", "</think>", 1)), (CONTENT, "\nb")], k
