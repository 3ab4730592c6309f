"""End to end, the way back: tool loops with the official SDKs -> real mitmdump -> strict upstreams.

The strict upstreams (tests/harness.py) behave like the real APIs on the way in: they reject
reasoning objects they did not issue and check that earlier assistant turns read as the model
wrote them. A loop completes only if the proxy turns every thinking block / reasoning item it
made back into the model's own text before the request goes upstream.
"""

import json
import os
import stat

import anthropic
import openai
import pytest

from harness import StrictAnthropic, StrictResponses, Turn, post
from support.loops import TOOLS_M, assistant_texts, loop_turns, messages_loop, responses_loop
from thinkwire.keys import KEY_FILE

pytestmark = pytest.mark.e2e

KEY = "restore-e2e shared key, 32 bytes or more"


@pytest.fixture(scope="module")
def m_proxies(proxy_factory):
    env = {"THINK_SIGNING_KEY": KEY}
    return {policy: proxy_factory(options={"think_signature": policy}, env=env)
            for policy in ("signed", "off", "unsigned", "redacted")}


@pytest.mark.parametrize("policy,display", [("signed", None), ("off", "omitted"), ("off", None),
                                            ("unsigned", None), ("redacted", None)])
@pytest.mark.parametrize("as_received", [True, False], ids=["claude-code", "sdk-objects"])
def test_messages_tool_loop_completes_against_the_strict_upstream(m_proxies, up, policy, display, as_received):
    strict = StrictAnthropic(loop_turns())
    up.route("/messages", strict.handle)
    final, msgs = messages_loop([m_proxies[policy]], display, as_received)
    assert strict.errors == []
    assert final.stop_reason == "end_turn" and final.content[-1].text == "All three steps are done."
    assert len(strict.bodies) == 4
    kinds = {b["type"] for m in msgs if m["role"] == "assistant" for b in
             (m["content"] if isinstance(m["content"][0], dict) else [x.to_dict() for x in m["content"]])}
    assert kinds & {"thinking", "redacted_thinking"}   # the client did see native thinking
    last = json.loads(strict.bodies[-1])["messages"]
    # A mark (signed, omitted, redacted) holds the markup as the model wrote it; for a block
    # without one (off, unsigned) the proxy remembers it (thinkwire.written).
    assert last[1]["content"][0] == {"type": "text", "text": "<think>\nI should list the files.\n</think>\n\nLet me look."}
    assert last[3]["content"][0] == {"type": "text", "text": "<think>Now read the README.</think>"}
    assert last[3]["content"][1]["type"] == "tool_use"


def test_the_strict_upstream_rejects_a_thinking_block_it_did_not_sign(up):
    """The control: without the way back, the upstream answers like the real API."""
    strict = StrictAnthropic(loop_turns())
    up.route("/messages", strict.handle)
    client = anthropic.Anthropic(base_url=up.url, api_key="x", max_retries=0, timeout=20)
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": "tw1.x"},
                                              {"type": "text", "text": "Let me look."}]},
            {"role": "user", "content": "go on"}]
    with pytest.raises(anthropic.BadRequestError,
                       match=r"messages\.1\.content\.0: Invalid `signature` in `thinking` block"):
        client.messages.create(model="m", max_tokens=1024, messages=msgs)


def test_messages_restore_keep_sends_our_blocks_upstream_where_they_are_rejected(proxy_factory, up):
    p = proxy_factory(options={"think_restore": "keep"}, env={"THINK_SIGNING_KEY": KEY})
    strict = StrictAnthropic(loop_turns())
    up.route("/messages", strict.handle)
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature` in `thinking` block") as e:
        messages_loop([p], "omitted")
    assert e.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                       "message": "messages.1.content.0: Invalid `signature` in `thinking` block"}}


def test_messages_restore_drop_removes_the_reasoning(proxy_factory, up):
    p = proxy_factory(options={"think_restore": "drop"}, env={"THINK_SIGNING_KEY": KEY})
    strict = StrictAnthropic([Turn("<think>private</think>Let me look.", ("bash", {"cmd": "ls"})), Turn("ok")])
    up.route("/messages", strict.handle)
    with pytest.raises(anthropic.BadRequestError, match="assistant turn reads 'Let me look.'"):
        messages_loop([p], "omitted")   # the strict upstream wants the turn as written: drop is visible
    sent = json.loads(strict.bodies[-1])["messages"]
    assert "private" not in json.dumps(sent)
    assert sent[1]["content"][0] == {"type": "text", "text": "Let me look."}


def test_messages_genuine_thinking_reaches_the_upstream_byte_identical(m_proxies, up):
    strict = StrictAnthropic(loop_turns(native_first=True))
    up.route("/messages", strict.handle)
    p = m_proxies["redacted"]
    client = anthropic.Anthropic(base_url=p.url, api_key="x", max_retries=0, timeout=20)
    msgs: list = [{"role": "user", "content": "q"}]
    with client.messages.stream(model="m", max_tokens=4096, tools=TOOLS_M, messages=msgs) as s:
        first = s.get_final_message().to_dict()
    genuine = first["content"][:2]
    assert [b["type"] for b in genuine] == ["thinking", "redacted_thinking"]   # native: untouched
    msgs += [{"role": "assistant", "content": first["content"]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]
    # Nothing of ours in it: the request goes upstream as the client's exact bytes.
    raw = json.dumps({"model": "m", "max_tokens": 4096, "tools": TOOLS_M, "messages": msgs}, indent=1).encode()
    # (With the SDK client's credential, api_key="x": the marks of this turn are bound to it.)
    got = post(p.url + "/v1/messages", raw=raw, headers={"anthropic-version": "2023-06-01", "authorization": "Bearer x"})
    assert got.status == 200 and strict.bodies[-1] == raw
    # Next turn mixes genuine blocks and ours: ours are restored, genuine ones keep their exact bytes.
    second = got.json()
    assert second["content"][0]["type"] == "redacted_thinking"   # ours (policy redacted)
    msgs += [{"role": "assistant", "content": second["content"]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "ok"}]}]
    with client.messages.stream(model="m", max_tokens=4096, tools=TOOLS_M, messages=msgs) as s:
        s.get_final_message()
    assert strict.errors == []
    sent = strict.bodies[-1]
    for b in genuine:
        assert json.dumps(b, separators=(",", ":"), ensure_ascii=False).encode() in sent
    assert json.loads(sent)["messages"][1]["content"][:2] == genuine


# -- Responses, the Codex way -------------------------------------------------------------------
@pytest.fixture(scope="module")
def r_proxy(proxy_factory):
    return proxy_factory(env={"THINK_SIGNING_KEY": KEY})


def test_responses_codex_tool_loop_completes_against_the_strict_upstream(r_proxy, up):
    strict = StrictResponses(loop_turns())
    up.route("/responses", strict.handle)
    final, items = responses_loop([r_proxy])
    assert strict.errors == []
    assert final.output_text == "All three steps are done." and len(strict.bodies) == 4
    rs = [it for it in items if it["type"] == "reasoning"]
    assert len(rs) == 4 and all(it["encrypted_content"].startswith("tw2.") and it["summary"] for it in rs)
    sent = json.loads(strict.bodies[-1])["input"]
    assert not any(it.get("type") == "reasoning" for it in sent)
    assert assistant_texts(strict.bodies[-1])[0]["content"][0]["text"] == \
        "<think>\nI should list the files.\n</think>\n\nLet me look."
    assert assistant_texts(strict.bodies[-1])[1] == {
        "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": "<think>Now read the README.</think>"}]}
    kinds = [it.get("type") for it in sent]
    assert kinds.count("function_call") == kinds.count("function_call_output") == 3


def test_responses_echo_with_our_ids_and_no_encrypted_content_completes(r_proxy, up):
    strict = StrictResponses(loop_turns())
    up.route("/responses", strict.handle)
    final, _ = responses_loop([r_proxy], ids=True, include=False)
    assert strict.errors == [] and final.output_text == "All three steps are done."


def test_responses_genuine_reasoning_items_pass_untouched(r_proxy, up):
    strict = StrictResponses(loop_turns(native_first=True))
    up.route("/responses", strict.handle)
    final, items = responses_loop([r_proxy])
    assert strict.errors == [] and final.output_text == "All three steps are done."
    genuine = next(it for it in items if it["type"] == "reasoning" and not it["encrypted_content"].startswith("tw2."))
    assert genuine in json.loads(strict.bodies[-1])["input"]


def test_responses_restore_keep_is_rejected_like_openai_would(proxy_factory, up):
    p = proxy_factory(options={"think_restore": "keep"}, env={"THINK_SIGNING_KEY": KEY})
    strict = StrictResponses(loop_turns())
    up.route("/responses", strict.handle)
    with pytest.raises(openai.BadRequestError) as e:
        responses_loop([p])
    assert e.value.code == "invalid_encrypted_content"
    strict = StrictResponses(loop_turns())
    up.route("/responses", strict.handle)
    with pytest.raises(openai.NotFoundError, match=r"Item with id 'rs_1_0' not found"):
        responses_loop([p], ids=True, include=False)


# -- restart, several instances, other keys -------------------------------------------------------
def test_restart_marks_minted_by_one_process_restore_in_another_with_the_same_key(proxy_factory, up):
    env = {"THINK_SIGNING_KEY": KEY + " restart"}
    first = proxy_factory(env=env)

    def restart():
        first.stop()   # the minting process is gone before the next request
        return proxy_factory(env=env)
    strict = StrictAnthropic(loop_turns())
    up.route("/messages", strict.handle)
    final, _ = messages_loop([first, restart], "omitted")
    assert strict.errors == [] and final.stop_reason == "end_turn"
    # Two instances side by side (a load balancer): every turn alternates between them.
    a, b = proxy_factory(env=env), proxy_factory(env=env)
    strict_r = StrictResponses(loop_turns())
    up.route("/responses", strict_r.handle)
    final_r, _ = responses_loop([a, b, a, b])
    assert strict_r.errors == [] and final_r.output_text == "All three steps are done."


def test_restart_with_the_key_file_in_a_shared_confdir(proxy_factory, up, tmp_path):
    conf = tmp_path / "shared-confdir"
    conf.mkdir()
    first = proxy_factory(confdir=conf)

    def restart():
        first.stop()
        return proxy_factory(confdir=conf)
    strict = StrictAnthropic(loop_turns())
    up.route("/messages", strict.handle)
    proxies = [first, restart]
    final, _ = messages_loop(proxies, "omitted")
    assert strict.errors == [] and final.stop_reason == "end_turn"
    key_file = conf / KEY_FILE
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    secret = key_file.read_bytes().strip().decode()
    assert secret not in first.log() and secret not in proxies[1].log()


def test_a_mark_sealed_under_another_key_is_not_ours(proxy_factory, up):
    minting = proxy_factory(env={"THINK_SIGNING_KEY": KEY + " one"})
    other = proxy_factory(env={"THINK_SIGNING_KEY": KEY + " two"})
    strict = StrictAnthropic(loop_turns())
    up.route("/messages", strict.handle)
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0: Invalid `signature` in `thinking` block"):
        messages_loop([minting, other], "omitted")
    strict_r = StrictResponses(loop_turns())
    up.route("/responses", strict_r.handle)
    with pytest.raises(openai.BadRequestError) as e:
        responses_loop([minting, other])
    assert e.value.code == "invalid_encrypted_content"


def test_tampered_marks_are_never_restored(r_proxy, up):
    strict = StrictAnthropic(loop_turns())
    up.route("/messages", strict.handle)
    client = anthropic.Anthropic(base_url=r_proxy.url, api_key="x", max_retries=0, timeout=20)
    msgs = [{"role": "user", "content": "q"}]
    with client.messages.stream(model="m", max_tokens=1024, tools=TOOLS_M, messages=msgs,
                                thinking={"type": "adaptive", "display": "omitted"}) as s:
        block = s.get_final_message().to_dict()["content"][0]
    sig = block["signature"]
    block["signature"] = sig[:-3] + ("AAA" if not sig.endswith("AAA") else "BBB")
    msgs += [{"role": "assistant", "content": [block, {"type": "text", "text": "Let me look."},
                                               {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]
    raw = json.dumps({"model": "m", "max_tokens": 1024, "messages": msgs}).encode()
    got = post(r_proxy.url + "/v1/messages", raw=raw)
    assert got.status == 400 and strict.bodies[-1] == raw   # passed through byte-identical, rejected


def test_the_key_never_appears_in_the_logs(proxy_factory, up):
    key = "do-not-log-this-key-7f3a-32-bytes-or-more"
    p = proxy_factory(options={"termlog_verbosity": "debug", "flow_detail": "4"}, env={"THINK_SIGNING_KEY": key})
    strict = StrictAnthropic(loop_turns())
    up.route("/messages", strict.handle)
    messages_loop([p], "omitted")
    strict_r = StrictResponses(loop_turns())
    up.route("/responses", strict_r.handle)
    responses_loop([p])
    assert strict.errors == strict_r.errors == []
    assert "object(s) restored on the request" in p.log()
    assert key not in p.log()


# -- byte for byte ------------------------------------------------------------------------------
# What the model wrote, whitespace at every block edge included, as a server's prefix cache needs
# the earlier turns (the strict upstreams with exact=True compare each turn byte for byte).
EXACT_TURNS = [
    Turn("\n<think>\n  I should list the files.\n\n</think>\n\n  Let me look.", ("bash", {"cmd": "ls"})),
    Turn("<think>\tNow read the README. \n</think>\n", ("bash", {"cmd": "cat README.md"})),
    Turn("<think>done</think>\n\nAll three steps are done."),
]


@pytest.mark.parametrize("policy,display", [("signed", None), ("off", "omitted"), ("redacted", None)])
def test_messages_way_back_is_byte_for_byte_where_a_mark_holds_the_block(m_proxies, up, policy, display):
    strict = StrictAnthropic(EXACT_TURNS, exact=True)
    up.route("/messages", strict.handle)
    final, _ = messages_loop([m_proxies[policy]], display, turns=3)
    assert strict.errors == [] and final.content[-1].text == "All three steps are done."
    sent = json.loads(strict.bodies[-1])["messages"]
    assert [m["content"][0]["text"] for m in sent if m["role"] == "assistant"] == [t.text for t in EXACT_TURNS[:2]]


def test_responses_way_back_is_byte_for_byte_with_encrypted_content(r_proxy, up):
    strict = StrictResponses(EXACT_TURNS, exact=True)
    up.route("/responses", strict.handle)
    final, _ = responses_loop([r_proxy], turns=3)
    assert strict.errors == [] and final.output_text == "All three steps are done."
    texts = [m["content"][0]["text"] for m in assistant_texts(strict.bodies[-1])]
    assert texts == [t.text for t in EXACT_TURNS[:2]]
