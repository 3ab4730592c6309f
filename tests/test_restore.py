"""The way back: requests that carry reasoning this proxy made are restored before they go upstream.

Unit tests per surface, then properties over whole responses: rewriting an upstream answer and
restoring the client's echo of it gives the upstream back the text the model wrote (modulo the
whitespace thinkwire trims at reasoning block edges).
"""

import json
import os
import re
import stat

import anthropic
import httpx2
import openai
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import make_ctx, make_settings
from harness import as_written
from thinkwire.keys import KEY_FILE, KeyConfig, load, own_key
from thinkwire.marks import Sealer
from thinkwire.rules import TagPair, Written
from thinkwire.splitter import split_text
from thinkwire.surfaces import chat, messages, responses

SEALER = Sealer(b"test key")
OTHER = Sealer(b"another proxy's key")
THINK = TagPair("<think>", "</think>")
REASONING = TagPair("<reasoning>", "</reasoning>")


def tampered(mark: str) -> str:
    i = len(mark) // 2
    return mark[:i] + ("A" if mark[i] != "A" else "B") + mark[i + 1:]


# == Messages ===================================================================================
def m_req(*assistant_turns, model="m", **extra):
    """A Messages request: user, then each assistant turn (a block list) answered by a tool result."""
    msgs: list = [{"role": "user", "content": "q"}]
    for blocks in assistant_turns:
        msgs.append({"role": "assistant", "content": blocks})
        uses = [b["id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": u, "content": "ok"}
                                                 for u in uses] or "go on"})
    return {"model": model, "max_tokens": 1024, "messages": msgs, **extra}


def m_restore(req, sealer=SEALER, **opts):
    """(restored request or None, ctx). The context gets its own parsed copy, as in the addon
    (restoring changes that copy in place)."""
    data = json.dumps(req).encode()
    ctx = make_ctx(json.loads(data), sealer, **opts)
    new = messages.restore_request(data, ctx)
    return (json.loads(new) if new is not None else None), ctx


def tool_use(id_="toolu_1"):
    return {"type": "tool_use", "id": id_, "name": "get_weather", "input": {"city": "Rome"}}


def omitted(text, pair=THINK, sealer=SEALER):
    return {"type": "thinking", "thinking": "", "signature": sealer.seal(text, pair)}


def redacted_mark(text, pair=THINK, sealer=SEALER):
    return {"type": "redacted_thinking", "data": sealer.seal(text, pair)}


GENUINE = {"type": "thinking", "thinking": "real thought", "signature": "EqQBCkYIBxgCKkA+real=="}
GENUINE_REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3real=="}


def test_messages_display_omitted_block_is_restored_from_its_mark_into_the_answer_text():
    out, ctx = m_restore(m_req([omitted("plan it"), {"type": "text", "text": "Checking."}, tool_use()]))
    assert out["messages"][1]["content"] == [{"type": "text", "text": "<think>plan it</think>Checking."},
                                             tool_use()]
    assert ctx.stats.restored == 1


def test_messages_tool_result_pairing_is_unchanged():
    req = m_req([omitted("a"), {"type": "text", "text": "x"}, tool_use("toolu_a")],
                [omitted("b"), tool_use("toolu_b")])
    out, _ = m_restore(req)
    assert [m["role"] for m in out["messages"]] == [m["role"] for m in req["messages"]]
    for i in (2, 4):
        assert out["messages"][i] == req["messages"][i]
    assert out["messages"][3]["content"] == [{"type": "text", "text": "<think>b</think>"}, tool_use("toolu_b")]


def test_messages_unsigned_block_is_restored_with_its_own_text_and_the_default_pair():
    out, _ = m_restore(m_req([{"type": "thinking", "thinking": "x", "signature": ""},
                              {"type": "text", "text": "hi"}]))
    assert out["messages"][1]["content"] == [{"type": "text", "text": "<think>x</think>hi"}]


def test_messages_block_without_signature_key_is_restored():
    out, _ = m_restore(m_req([{"type": "thinking", "thinking": "x"}, {"type": "text", "text": "hi"}]))
    assert out["messages"][1]["content"] == [{"type": "text", "text": "<think>x</think>hi"}]


def test_messages_redacted_block_is_restored_with_the_pair_it_came_from():
    out, _ = m_restore(m_req([redacted_mark("r", REASONING), {"type": "text", "text": "hi"}]))
    assert out["messages"][1]["content"] == [{"type": "text", "text": "<reasoning>r</reasoning>hi"}]


def test_messages_the_mark_wins_over_visible_text():
    block = dict(omitted("sealed text"), thinking="edited by the client")
    out, _ = m_restore(m_req([block, {"type": "text", "text": "hi"}]))
    assert out["messages"][1]["content"][0]["text"] == "<think>sealed text</think>hi"


def test_messages_signed_block_is_restored_from_its_mark_whatever_text_the_client_shows():
    # The default policy: the visible text and a mark. Libraries may re-trim or re-wrap the text.
    block = {"type": "thinking", "thinking": "  plan, as the client keeps it ",
             "signature": SEALER.seal("plan", TagPair("<thinking>", "</thinking>"))}
    out, ctx = m_restore(m_req([block, {"type": "text", "text": "hi"}]))
    assert out["messages"][1]["content"] == [{"type": "text", "text": "<thinking>plan</thinking>hi"}]
    assert ctx.stats.restored == 1


def test_messages_block_before_a_tool_use_becomes_its_own_text_block_in_place():
    out, _ = m_restore(m_req([{"type": "text", "text": "a"}, omitted("b"), tool_use()]))
    assert out["messages"][1]["content"] == [{"type": "text", "text": "a"},
                                             {"type": "text", "text": "<think>b</think>"}, tool_use()]


def test_messages_consecutive_blocks_join_in_order_ahead_of_the_answer():
    out, _ = m_restore(m_req([omitted("one"), redacted_mark("two"), {"type": "text", "text": "hi"}]))
    assert out["messages"][1]["content"] == [{"type": "text", "text": "<think>one</think><think>two</think>hi"}]


def test_messages_text_block_keeps_its_other_fields():
    out, _ = m_restore(m_req([omitted("r"), {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]))
    assert out["messages"][1]["content"] == [{"type": "text", "text": "<think>r</think>hi",
                                              "cache_control": {"type": "ephemeral"}}]


def test_messages_empty_reasoning_injects_nothing_and_makes_no_empty_text_block():
    out, ctx = m_restore(m_req([omitted(""), {"type": "thinking", "thinking": "", "signature": ""}, tool_use()]))
    assert out["messages"][1]["content"] == [tool_use()]
    assert ctx.stats.restored == 2


def test_messages_genuine_thinking_and_redacted_thinking_pass_unchanged():
    req = m_req([GENUINE, GENUINE_REDACTED, {"type": "text", "text": "hi"}, tool_use()])
    assert m_restore(req)[0] is None
    data = json.dumps(req).encode()
    assert messages.restore_request(data, make_ctx(req, SEALER)) is None


def test_messages_genuine_blocks_next_to_ours_keep_their_exact_values():
    req = m_req([GENUINE, GENUINE_REDACTED, {"type": "text", "text": "a"}, tool_use("toolu_a")],
                [omitted("mine"), {"type": "text", "text": "b"}])
    out, ctx = m_restore(req)
    assert out["messages"][1] == req["messages"][1]
    assert out["messages"][3]["content"] == [{"type": "text", "text": "<think>mine</think>b"}]
    assert ctx.stats.restored == 1


@pytest.mark.parametrize("block", [
    omitted("x", sealer=OTHER), redacted_mark("x", sealer=OTHER),
    dict(omitted("x"), signature=tampered(omitted("x")["signature"])),
    {"type": "redacted_thinking", "data": tampered(redacted_mark("x")["data"])},
    {"type": "thinking", "thinking": "x", "signature": "tw2.notamark"},
    {"type": "thinking", "thinking": "x", "signature": "tw2."},
    {"type": "redacted_thinking", "data": ""},
], ids=["other-key", "redacted-other-key", "tampered", "redacted-tampered", "fake-prefix", "bare-prefix",
        "redacted-empty"])
def test_messages_foreign_or_tampered_marks_are_not_ours(block):
    assert m_restore(m_req([block, {"type": "text", "text": "hi"}]))[0] is None


def test_messages_drop_removes_our_blocks_in_place():
    out, ctx = m_restore(m_req([omitted("r"), {"type": "text", "text": "hi"}, GENUINE_REDACTED, tool_use()]),
                         restore="drop")
    assert out["messages"][1]["content"] == [{"type": "text", "text": "hi"}, GENUINE_REDACTED, tool_use()]
    assert ctx.stats.restored == 1


def test_messages_drop_never_leaves_an_assistant_message_empty():
    out, _ = m_restore(m_req([omitted("all there was")]), restore="drop")
    assert out["messages"][1]["content"] == [{"type": "text", "text": "<think>all there was</think>"}]


def test_messages_keep_leaves_the_request_alone():
    assert m_restore(m_req([omitted("r"), {"type": "text", "text": "hi"}]), restore="keep")[0] is None


def test_messages_without_a_sealer_still_restores_unsigned_blocks_but_no_marks():
    req = m_req([{"type": "thinking", "thinking": "x", "signature": ""}, {"type": "text", "text": "hi"}])
    assert m_restore(req, sealer=None)[0]["messages"][1]["content"][0]["text"] == "<think>x</think>hi"
    assert m_restore(m_req([omitted("x"), {"type": "text", "text": "hi"}]), sealer=None)[0] is None


def test_messages_only_assistant_turns_are_touched():
    req = {"model": "m", "messages": [
        {"role": "user", "content": [{"type": "thinking", "thinking": "x", "signature": ""}]},
        {"role": "system", "content": "s"}, {"role": "assistant", "content": "plain string"}]}
    assert m_restore(req)[0] is None


def test_messages_thinking_a_library_replays_as_user_text_is_left_alone():
    # Pydantic AI replays a thinking part without a signature as text in a *user* turn. User
    # text is the user's: never rewritten. (With the default `signed` it sends the block back.)
    req = m_req([{"type": "text", "text": "hi"}])
    req["messages"].insert(1, {"role": "user", "content": [
        {"type": "text", "text": "<assistant_thinking>\nplan\n</assistant_thinking>"}]})
    assert m_restore(req)[0] is None


def test_messages_pair_for_unsigned_blocks_follows_the_model_profile():
    out, _ = m_restore(m_req([{"type": "thinking", "thinking": "x", "signature": ""},
                              {"type": "text", "text": "hi"}], model="m"), tags="<reason> </reason>")
    assert out["messages"][1]["content"][0]["text"] == "<reason>x</reason>hi"


@pytest.mark.parametrize("data", [b"", b"not json", b"[1,2]", b'{"messages": "x"}', b'{"model": "m"}',
                                  b'{"messages": [1, null, {"role": "assistant", "content": [1, null]}]}',
                                  b"\xff\xfe"])
def test_messages_non_json_or_unexpected_shapes_return_none(data):
    assert messages.restore_request(data, make_ctx(None, SEALER)) is None


def test_messages_keys_and_formatting_of_the_rest_survive_restoring():
    req = m_req([omitted("r"), {"type": "text", "text": "héllo ✓"}], system="sys", stream=True)
    out, _ = m_restore(req)
    assert list(out) == list(req) and out["system"] == "sys"
    raw = messages.restore_request(json.dumps(req).encode(), make_ctx(json.loads(json.dumps(req)), SEALER))
    assert "héllo ✓".encode() in raw   # non-ASCII goes out as UTF-8, like the servers send it


# == Responses ==================================================================================
def r_restore(items, sealer=SEALER, **opts):
    req = {"model": "qwen3", "input": items, "store": False, "include": ["reasoning.encrypted_content"]}
    data = json.dumps(req).encode()
    ctx = make_ctx(json.loads(data), sealer, **opts)
    new = responses.restore_request(data, ctx)
    return (json.loads(new)["input"] if new is not None else None), ctx


USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}


def rs(text="", mark=None, id=None, summary=None, content=None):
    """A reasoning item as a client echoes it: Codex leaves out the id; the mark may hold the text."""
    it: dict = {"type": "reasoning", "summary": summary if summary is not None else []}
    if id is not None:
        it["id"] = id
    if content is not None:
        it["content"] = content
    elif text:
        it["content"] = [{"type": "reasoning_text", "text": text}]
    if mark is not None:
        it["encrypted_content"] = mark
    return it


def sealed(text, pair=THINK, sealer=SEALER):
    return rs(mark=sealer.seal(text, pair), summary=[])


def amsg(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def call(n=1):
    return {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": f"call_{n}"}


def output(n=1):
    return {"type": "function_call_output", "call_id": f"call_{n}", "output": "ok"}


def test_responses_sealed_item_is_prepended_to_the_next_assistant_message():
    out, ctx = r_restore([USER, sealed("plan"), amsg("hi")])
    assert out == [USER, amsg("<think>plan</think>hi")]
    assert ctx.stats.restored == 1


def test_responses_sealed_text_is_restored_exactly_even_when_visible_text_is_empty_or_different():
    item = dict(sealed("exact text"), summary=[{"type": "summary_text", "text": "shown summary"}])
    assert r_restore([USER, item, amsg("hi")])[0][1] == amsg("<think>exact text</think>hi")


def test_responses_item_before_a_function_call_becomes_an_assistant_message_just_before_it():
    out, _ = r_restore([USER, sealed("use the tool"), call(), output()])
    assert out == [USER, amsg("<think>use the tool</think>"), call(), output()]


def test_responses_other_tool_call_types_count_as_assistant_turns():
    custom = {"type": "custom_tool_call", "name": "apply_patch", "input": "x", "call_id": "c"}
    out, _ = r_restore([USER, sealed("patch"), custom])
    assert out == [USER, amsg("<think>patch</think>"), custom]


def test_responses_several_sealed_items_join_in_order_as_their_marks_say():
    # (a mark holds the markup as written: what the model wrote between the blocks is in it)
    out, _ = r_restore([USER, sealed("one", TagPair("<think>", "</think>\n")), sealed("two", REASONING), amsg("hi")])
    assert out == [USER, amsg("<think>one</think>\n<reasoning>two</reasoning>hi")]
    out, _ = r_restore([USER, sealed("one"), sealed("two", REASONING), amsg("hi")])
    assert out == [USER, amsg("<think>one</think><reasoning>two</reasoning>hi")]


def test_responses_several_items_without_a_mark_join_with_a_newline():
    out, _ = r_restore([USER, rs("one", id="rs_1_0"), rs("two", id="rs_1_1"), amsg("hi")])
    assert out == [USER, amsg("<think>one</think>\n<think>two</think>hi")]


def test_responses_a_line_break_thinkwire_put_after_a_block_is_taken_out_again():
    out, _ = r_restore([USER, amsg("Sure."), sealed("plan", Written("<think>", "</think>", 1)), amsg("\nDone.")])
    assert out == [USER, amsg("Sure."), amsg("<think>plan</think>Done.")]
    # (only a line break it put there: text that starts otherwise stays as it is)
    out, _ = r_restore([USER, sealed("plan", Written("<think>", "</think>", 1)), amsg("Done.")])
    assert out == [USER, amsg("<think>plan</think>Done.")]


@pytest.mark.parametrize("after", [[USER], [output()], []], ids=["user", "tool-output", "end"])
def test_responses_item_with_no_assistant_turn_after_it_is_dropped(after):
    out, ctx = r_restore([USER, amsg("a"), sealed("orphan")] + after + ([amsg("later")] if after else []))
    assert out == [USER, amsg("a")] + after + ([amsg("later")] if after else [])
    assert ctx.stats.restored == 1


def test_responses_empty_reasoning_injects_nothing():
    out, _ = r_restore([USER, sealed(""), call(), output()])
    assert out == [USER, call(), output()]


def test_responses_first_text_part_of_the_message_gets_the_reasoning():
    m = {"type": "message", "role": "assistant", "id": "msg_1",
         "content": [{"type": "refusal", "refusal": "no"}, {"type": "output_text", "text": "a", "annotations": []}]}
    out, _ = r_restore([USER, sealed("r"), m])
    assert out[1] == dict(m, content=[m["content"][0], {"type": "output_text", "text": "<think>r</think>a",
                                                           "annotations": []}])


def test_responses_easy_message_with_string_content():
    out, _ = r_restore([USER, sealed("r"), {"role": "assistant", "content": "hi"}])
    assert out[1] == {"role": "assistant", "content": "<think>r</think>hi"}


def test_responses_message_without_a_text_part_gets_one_in_front():
    m = {"type": "message", "role": "assistant", "content": []}
    assert r_restore([USER, sealed("r"), m])[0][1] == dict(m, content=[{"type": "output_text",
                                                                        "text": "<think>r</think>"}])


def test_responses_our_id_shape_without_encrypted_content_is_ours_and_read_from_content_then_summary():
    out, _ = r_restore([USER, rs("from content", id="rs_1_0"), amsg("a")])
    assert out[1] == amsg("<think>from content</think>a")
    summary = [{"type": "summary_text", "text": "from summary"}]
    out, _ = r_restore([USER, rs(id="rs_abc_def_2", summary=summary, content=[]), amsg("a")])
    assert out[1] == amsg("<think>from summary</think>a")


def test_responses_our_id_with_no_text_anywhere_is_removed_and_injects_nothing():
    out, ctx = r_restore([USER, rs(id="rs_1_0", content=[], summary=[]), amsg("a")])
    assert out == [USER, amsg("a")] and ctx.stats.restored == 1


@pytest.mark.parametrize("ptype", ["reasoning_text", "summary_text", "text", "output_text"])
def test_responses_accepted_part_types(ptype):
    item = rs(id="rs_1_0", content=[{"type": ptype, "text": "x"}, {"type": "image", "text": "no"}])
    assert r_restore([USER, item, amsg("a")])[0][1] == amsg("<think>x</think>a")


@pytest.mark.parametrize("item", [
    rs("real", mark="gAAAAABreal-openai-blob"),
    rs("real", id="rs_1_0", mark="gAAAAABreal-openai-blob"),
    rs("x", mark=OTHER.seal("x", THINK)),
    rs("x", mark=tampered(SEALER.seal("x", THINK))),
    rs("real", id="rs_68af0c7e3a5c81a0b1c2d3e4f5a6b7c8"),
    rs("no id, no mark"),
    rs("x", id="rs_"), rs("x", id="rs_1_x"), rs("x", id="msg_1_0"), rs("x", id="rs__0"),
], ids=["openai-blob", "our-id-foreign-blob", "other-key", "tampered", "openai-id", "nothing", "bare",
        "non-digit-tail", "not-rs", "empty-base"])
def test_responses_foreign_reasoning_items_pass_untouched(item):
    assert r_restore([USER, item, amsg("a"), call(), output()])[0] is None


def test_responses_foreign_items_between_ours_and_the_answer_stay_and_do_not_end_the_turn():
    foreign = rs("real", mark="gAAAAABblob")
    out, _ = r_restore([USER, sealed("mine"), foreign, amsg("a")])
    assert out == [USER, foreign, amsg("<think>mine</think>a")]


def test_responses_drop_removes_our_items_only():
    foreign = rs("real", mark="gAAAAABblob")
    out, ctx = r_restore([USER, sealed("mine"), foreign, amsg("a"), sealed("x"), call(), output()], restore="drop")
    assert out == [USER, foreign, amsg("a"), call(), output()]
    assert ctx.stats.restored == 2


def test_responses_keep_leaves_the_request_alone():
    assert r_restore([USER, sealed("mine"), amsg("a")], restore="keep")[0] is None


def ref(id_):
    return {"type": "item_reference", "id": id_}


def test_responses_reference_to_our_reasoning_id_names_the_upstream_message_it_came_from():
    # The Vercel AI SDK with store: true. The upstream stored msg_abc as the model wrote it
    # (reasoning inline) and never issued rs_abc_0: the reference to msg_abc carries it, once.
    out, ctx = r_restore([USER, ref("rs_abc_0"), ref("msg_abc"), call(), output()])
    assert out == [USER, ref("msg_abc"), call(), output()]
    assert ctx.stats.restored == 1


def test_responses_references_to_later_pieces_of_a_message_become_one_reference():
    # a<think>b</think>c<think>d</think>e became msg_abc, rs_abc_1, msg_abc_2, rs_abc_3, msg_abc_4.
    items = [USER, ref("msg_abc"), ref("rs_abc_1"), ref("msg_abc_2"), ref("rs_abc_3"), ref("msg_abc_4"), USER]
    out, ctx = r_restore(items)
    assert out == [USER, ref("msg_abc"), USER]
    assert ctx.stats.restored == 4


def test_responses_reference_of_a_tool_turn_without_text_names_its_message():
    # <think>x</think> then a tool call: the client saw only rs_abc_0 and the call.
    out, _ = r_restore([USER, ref("rs_abc_0"), call(), output(), ref("rs_def_0"), ref("msg_def")])
    assert out == [USER, ref("msg_abc"), call(), output(), ref("msg_def")]


def test_responses_references_to_upstream_ids_pass_untouched():
    items = [USER, ref("msg_0f1e2d"), ref("rs_0f1e2d"), ref("fc_1"), call(), output()]
    assert r_restore(items)[0] is None


def test_responses_drop_removes_references_to_our_reasoning_and_still_merges_pieces():
    out, ctx = r_restore([USER, ref("rs_abc_0"), ref("msg_abc"), ref("rs_abc_2"), ref("msg_abc_3")],
                         restore="drop")
    assert out == [USER, ref("msg_abc")]
    assert ctx.stats.restored == 3


def test_responses_keep_leaves_references_alone():
    assert r_restore([USER, ref("rs_abc_0"), ref("msg_abc")], restore="keep")[0] is None


@pytest.mark.parametrize("data", [b"", b"nope", b"[]", b'{"input": "just text"}', b'{"input": {"a": 1}}',
                                  b'{"input": [1, null, "x", {"type": "reasoning"}]}', b"\xff"])
def test_responses_non_json_or_unexpected_shapes_return_none(data):
    assert responses.restore_request(data, make_ctx(None, SEALER)) is None


def test_responses_other_request_fields_survive():
    req = {"model": "qwen3", "input": [USER, sealed("r"), amsg("a")], "tools": [{"type": "function", "name": "f"}],
           "reasoning": {"summary": "auto"}, "store": False, "prompt_cache_key": "k"}
    ctx = make_ctx(req, SEALER)
    out = json.loads(responses.restore_request(json.dumps(req).encode(), ctx))
    assert {k: v for k, v in out.items() if k != "input"} == {k: v for k, v in req.items() if k != "input"}


# == Chat (done earlier; one check that it stays opt-in) ==========================================
def test_chat_reasoning_content_passes_by_default():
    req = {"model": "m", "messages": [{"role": "assistant", "content": "hi", "reasoning_content": "x"}]}
    assert chat.restore_request(json.dumps(req).encode(), make_ctx(req, SEALER)) is None


# == The key ====================================================================================
def test_key_file_is_created_once_with_mode_0600(tmp_path):
    secret = own_key(tmp_path)
    path = tmp_path / KEY_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert own_key(tmp_path) == secret and len(secret) >= 32


def test_env_key_wins_over_the_key_file(tmp_path, monkeypatch):
    monkeypatch.setenv("THINK_SIGNING_KEY", "shared by all instances, 32 bytes or more")
    assert load(KeyConfig.from_values({}), tmp_path).current == b"shared by all instances, 32 bytes or more"
    assert not (tmp_path / KEY_FILE).exists()


def test_marks_open_only_under_their_own_key():
    mark = SEALER.seal("a private plan", THINK)
    assert Sealer(b"test key").open(mark).text == "a private plan"
    assert OTHER.open(mark) is None and SEALER.open(tampered(mark)) is None
    assert "private" not in mark and mark.startswith("tw2.")


# == Properties: whole responses round-trip =======================================================
# No "<", ">", "|" (tag pairs) and no backticks (a code fence makes a tag literal answer text).
_ALPHABET = st.characters(blacklist_characters="<>|`\x00", blacklist_categories=("Cs",))
_words = st.text(_ALPHABET, min_size=0, max_size=30)
_thought = _words.filter(lambda s: s.strip() != "")
# An answer's words, with a block written right after them: at a line's start or right after a
# word (a tag after a space, a quote or a bracket is how prose names one, and stays text).
_answer = _words.filter(lambda s: not s.rsplit("\n", 1)[-1].strip(" \t")
                        or s[-1] not in " \t\r\f\v\"'([{<“‘«「『（【")
_pad = st.sampled_from(["", "\n", "\n\n", " "])


@st.composite
def model_text(draw):
    """What the model writes: one or more reasoning blocks, each followed by some answer text."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        parts.append(f"<think>{draw(_pad)}{draw(_thought)}{draw(_pad)}</think>{draw(_pad)}{draw(_answer)}")
    return "".join(parts)


def _mock(anth_or_oai, body_json):
    """A client of the official SDK whose server answers `body_json` and records what it was sent."""
    sent: list[bytes] = []

    def handler(request):
        sent.append(request.read())
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=body_json)
    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    if anth_or_oai == "anthropic":
        return anthropic.Anthropic(api_key="k", base_url="http://t", max_retries=0, http_client=http), sent
    return openai.OpenAI(api_key="k", base_url="http://t/v1", max_retries=0, http_client=http), sent


def _m_upstream_body(text, with_tool):
    content = [{"type": "text", "text": text}]
    if with_tool:
        content.append(tool_use())
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": content,
                       "stop_reason": "tool_use" if with_tool else "end_turn", "stop_sequence": None,
                       "usage": {"input_tokens": 1, "output_tokens": 1}}).encode()


def _assistant_text(req):
    turn = [m for m in req["messages"] if m["role"] == "assistant"][0]
    return "".join(b["text"] for b in turn["content"] if b["type"] == "text")


@pytest.mark.parametrize("policy,display", [("signed", None), ("off", None), ("unsigned", None),
                                            ("redacted", None), ("off", "omitted")])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=model_text(), with_tool=st.booleans(), via_sdk=st.booleans())
@example(text="<think>\n\t0 </think>", with_tool=False, via_sdk=False)   # (the tag in indented code)
def test_property_messages_echo_of_a_rewritten_response_restores_what_the_model_wrote(
        policy, display, text, with_tool, via_sdk):
    ask = {"model": "m", "max_tokens": 1024, "messages": [{"role": "user", "content": "q"}]}
    if display:
        ask["thinking"] = {"type": "adaptive", "display": display}
    rewritten = messages.rewrite_body(_m_upstream_body(text, with_tool), make_ctx(ask, SEALER, signature=policy))
    assert rewritten is not None
    if via_sdk:   # the SDK way: messages.append({"role": "assistant", "content": response.content})
        client, sent = _mock("anthropic", rewritten)
        got = client.messages.create(**ask)
        nxt = dict(ask, messages=ask["messages"] + [{"role": "assistant", "content": got.content}])
    else:         # the Claude Code way: the assistant turn as received
        sent = [b""]
        nxt = dict(ask, messages=ask["messages"] + [{"role": "assistant", "content": json.loads(rewritten)["content"]}])
    uses = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}] if with_tool else "next"
    nxt["messages"].append({"role": "user", "content": uses})
    if via_sdk:
        client.messages.create(**nxt)
        data = sent[-1]
    else:
        data = json.dumps(nxt).encode()
    new = messages.restore_request(data, make_ctx(json.loads(data), SEALER, signature=policy))
    assert new is not None
    out = json.loads(new)
    if policy in ("signed", "redacted") or display == "omitted":
        assert _assistant_text(out) == text   # the mark holds the markup as written: byte for byte
    elif "</think>" not in "".join(b.get("thinking", "") for b in json.loads(rewritten)["content"]):
        # No mark: the pair's tags, the whitespace trimmed at the block's edges unknown. (A block
        # whose text holds its closing tag in code, `<think>\n\t0 </think>`, left open by it,
        # cannot be told apart from one closed after it: the guess writes it closed, as the
        # Responses property below says.)
        assert as_written(_assistant_text(out)) == as_written(text)
    turn = [m for m in out["messages"] if m["role"] == "assistant"][0]
    assert all(b["type"] in ("text", "tool_use") for b in turn["content"])
    assert all(b["text"] for b in turn["content"] if b["type"] == "text")


def _r_upstream_body(text, with_tool):
    out = [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}]
    if with_tool:
        out.append({"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1",
                    "name": "exec_command", "arguments": "{}"})
    return json.dumps({"id": "resp_1", "object": "response", "created_at": 1, "model": "qwen3",
                       "status": "completed", "output": out,
                       "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}).encode()


def codex_echo(item: dict) -> dict:
    """How Codex puts an output item back into `input`: without its id (and without status)."""
    return {k: v for k, v in item.items() if k not in ("id", "status")}


@pytest.mark.parametrize("summary,content,include,ids", [
    ("auto", "on", True, False),     # Codex: summaries, encrypted_content, no ids
    (None, "on", True, False),
    ("auto", "off", True, False),    # no content: the mark carries the text
    (None, "on", False, True),       # no mark: our ids, echoed with them (the SDK way)
    ("auto", "on", False, True),
])
@pytest.mark.parametrize("remembered", [False, True], ids=["no-layouts", "layouts"])
@settings(max_examples=60, deadline=None)
@given(text=model_text(), with_tool=st.booleans(), blank_visible=st.booleans())
@example(text="<think>\n\t0 </think>0", with_tool=False, blank_visible=False)
@example(text="<think>\n\t0 </think>0", with_tool=True, blank_visible=True)
def test_property_responses_echo_of_a_rewritten_response_restores_what_the_model_wrote(
        summary, content, include, ids, remembered, text, with_tool, blank_visible):
    """`remembered`: the proxy's memory of the layouts it split (thinkwire.written), as the
    addon always has: the echo goes back byte for byte, mark or none. Without it (a restart,
    another replica without a shared store), the marks alone hold what the model wrote."""
    from thinkwire import engine, written
    ask = {"model": "qwen3", "input": [USER], "store": False}
    if summary:
        ask["reasoning"] = {"summary": summary}
    if include:
        ask["include"] = ["reasoning.encrypted_content"]
    mem = written.Memory() if remembered else None

    def ctx_of(request, **values):
        return engine.new_context(make_settings(**values), request, SEALER, client="client A", written=mem)
    rctx = ctx_of(ask, responses_content=content)
    rewritten = responses.rewrite_body(_r_upstream_body(text, with_tool), rctx)
    rctx.tally()
    assert rewritten is not None
    client, sent = _mock("openai", rewritten)
    got = client.responses.create(**ask)
    echo = []
    for it in got.output:
        d = it.to_dict()
        if not ids:
            d = codex_echo(d)
        if d["type"] == "reasoning" and blank_visible and include:   # the mark alone carries it
            d.pop("content", None)
            d["summary"] = []
        echo.append(d)
    nxt = dict(ask, input=[USER] + echo + ([{"type": "function_call_output", "call_id": "call_1", "output": "ok"}]
                                           if with_tool else []))
    client.responses.create(**nxt)
    data = sent[-1]
    new = responses.restore_request(data, ctx_of(json.loads(data)))
    assert new is not None
    items = json.loads(new)["input"]
    assert not any(it.get("type") == "reasoning" for it in items)
    said = "".join(p["text"] for it in items if it.get("role") == "assistant" for p in it["content"])
    # Reasoning with no assistant turn after it (only reasoning at the end, no tool call) is
    # dropped, unless the layout gives back the whole message the upstream wrote.
    expect = text if with_tool else re.sub(r"([ \t\r\n\f\v]*<think>[^<]*</think>[ \t\r\n\f\v]*)+\Z", "", text)
    if remembered or include and with_tool:
        assert said == text   # the layout, or the marks, hold the markup as written: byte for byte
    elif include:
        # Byte for byte up to the reasoning dropped at the end, which holds no answer. (A block's
        # text may hold its closing tag, in code, and the last block be left open by it.)
        assert text.startswith(said)
        dropped = split_text(text[len(said):], make_ctx(ask).rules())
        assert dropped.content.strip(" \t\r\n\f\v") == "" and (said == text or dropped.reasoning)
    elif "</think>" not in "".join(p.get("text", "") for it in got.to_dict()["output"] if it["type"] == "reasoning"
                                   for p in it.get("content") or []):
        # (No mark and no layout: a block whose text holds its own closing tag in code cannot be
        # told apart from a closed one. `<think>\n\t0 </think>0` (the tag in indented code: the
        # block is left open) and `<think>\n\t0 </think>0\n</think>` (closed on the next line)
        # give the same items, reasoning `\t0 </think>0` and no answer; the way back writes the
        # block closed, as most are: `<think>\t0 </think>0</think>`. docs/way-back.md.)
        assert as_written(said) == as_written(expect)
    if with_tool:
        kinds = [it.get("type") for it in items]
        assert kinds[-2:] == ["function_call", "function_call_output"]


@pytest.mark.parametrize("text", ["<think>\n\t0 </think>0", "<think>\n\t0 </think>0\n</think>"])
def test_a_block_whose_closing_tag_is_in_code_comes_back_from_its_layout(text):
    """Issue 32: `<think>\n\t0 </think>0` leaves its block open (the closing tag is in indented
    code), `<think>\n\t0 </think>0\n</think>` closes it on the next line; both give the client
    the same reasoning item, no message, and the tool call. Codex echoes them without
    `encrypted_content` and without ids: the layout gives each back as written. Without a layout
    (echoed with their ids, the SDK way), nothing can tell the two apart, and both go back as
    the guess, closed."""
    from thinkwire import engine, written
    ask = {"model": "qwen3", "input": [USER], "store": False}
    call = {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"}
    result = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}
    for mem, back in ((written.Memory(), text), (None, "<think>\t0 </think>0</think>")):
        def ctx_of(request):
            return engine.new_context(make_settings(), request, SEALER, client="client A", written=mem)
        rctx = ctx_of(ask)
        out = json.loads(responses.rewrite_body(_r_upstream_body(text, True), rctx))["output"]
        rctx.tally()
        assert out == [{"id": "rs_1_0", "type": "reasoning", "status": "completed",
                        "summary": [{"type": "summary_text", "text": "\t0 </think>0"}]},
                       dict(call, id="fc_1", status="completed")]
        echo = dict(ask, input=[USER] + [codex_echo(it) if mem is not None else it for it in out] + [result])
        new = json.loads(responses.restore_request(json.dumps(echo).encode(), ctx_of(echo)))
        assert [codex_echo(it) for it in new["input"]] == [
            USER, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": back}]},
            call, result]


def test_a_restored_request_keeps_its_numbers_as_the_client_wrote_them():
    """A request the way back re-serializes keeps every number it did not own as written (a parse
    through floats gave 0.7, 100000.0 and Infinity, which strict servers refuse)."""
    blocks = json.dumps([omitted("plan"), {"type": "text", "text": "hi"}])
    data = ('{"model": "m", "max_tokens": 1024, "temperature": 0.70, "top_p": 1E5, "x": 1e400, "messages": '
            '[{"role": "user", "content": "q"}, {"role": "assistant", "content": %s}]}' % blocks).encode()
    from thinkwire import engine
    new = messages.restore_request(data, make_ctx(engine.parse_request(data), SEALER))
    assert new == (b'{"model":"m","max_tokens":1024,"temperature":0.70,"top_p":1E5,"x":1e400,"messages":'
                   b'[{"role":"user","content":"q"},{"role":"assistant","content":'
                   b'[{"type":"text","text":"<think>plan</think>hi"}]}]}')
