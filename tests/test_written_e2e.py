"""End to end, the way back byte for byte where no mark carries the block (thinkwire.written):
chat under think_chat_restore=inline, Ollama, Messages `off` / `unsigned`, Responses items
without encrypted_content. The official SDKs run the loop through a real mitmdump, sending each
turn back as they received it; the strict upstreams (tests/harness.py, tests/support/ollama.py)
check, byte for byte, that every earlier assistant turn reads as the model wrote it.

What goes out when the proxy did not see the turn (a restart, another replica, another
client's turn): the markup this model at this upstream was last seen writing for this client,
else the profile's pair around the text, as before."""

import json

import anthropic
import ollama
import openai
import pytest

from harness import StrictAnthropic, StrictChat, StrictResponses, Turn
from support.loops import (TOOLS_C, TOOLS_M, TOOLS_R, ChatConversation, MessagesConversation, ResponsesConversation,
                           assistant_texts, codex_echo, ollama_turn, pick)
from support.ollama import StrictOllama

pytestmark = pytest.mark.e2e

# Whitespace at every block edge, the output's start and end included, and several blocks in
# one turn, one of them after answer text on the same line.
TURNS = [
    Turn("\n<think>\n  I should list the files.\n\n</think>\n\n  Let me look.", ("bash", {"cmd": "ls"})),
    Turn("Sure.<think>\tNow read the README. \n</think>Reading.<think> and the tests </think>\n\n",
         ("bash", {"cmd": "cat README.md"})),
    Turn("<think>done</think>\n\nAll three steps are done."),
]
WROTE = [t.text for t in TURNS[:2]]
# What the way back wrote before (and writes for a turn it did not see, with nothing learned):
# the profile's pair around the texts the client kept, blocks joined by a blank line.
PAIRED = ["<think>I should list the files.</think>Let me look.",
          "<think>Now read the README.\n\nand the tests</think>Sure.\nReading."]


def run(conv, proxies, turns=3):
    for i in range(turns):
        conv.turn(pick(proxies, i).url)
        if conv.done:
            break
    return conv


@pytest.fixture(scope="module")
def m_proxies(proxy_factory):
    return {policy: proxy_factory(options={"think_signature": policy}) for policy in ("off", "unsigned")}


# -- Messages: thinking blocks without a signature ------------------------------------------------
@pytest.mark.parametrize("policy", ["off", "unsigned"])
@pytest.mark.parametrize("as_received", [True, False], ids=["claude-code", "sdk-objects"])
def test_messages_blocks_without_a_mark_go_back_byte_for_byte(m_proxies, up, policy, as_received):
    strict = StrictAnthropic(TURNS, exact=True)
    up.route("/messages", strict.handle)
    conv = run(MessagesConversation(None, as_received), [m_proxies[policy]])
    assert strict.errors == [] and conv.final.content[-1].text == "All three steps are done."
    sent = json.loads(strict.bodies[-1])["messages"]
    assert [m["content"] for m in sent if m["role"] == "assistant"] == [
        [{"type": "text", "text": WROTE[0]}, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}}],
        [{"type": "text", "text": WROTE[1]},
         {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"cmd": "cat README.md"}}]]


def test_messages_a_restarted_proxy_writes_the_pair_then_learns_the_layout(proxy_factory, up):
    """Turn 1 on one proxy, turns 2 and 3 on another (a restart): turn 1 is not remembered
    there, and goes with the profile's pair; turn 2, which the new proxy split, goes as written."""
    strict = StrictAnthropic(TURNS)   # modulo the trimmed whitespace: the miss is not exact
    up.route("/messages", strict.handle)
    proxies = [proxy_factory(options={"think_signature": "off"}), lambda: proxy_factory(options={"think_signature": "off"})]
    conv = run(MessagesConversation(None), proxies)
    assert strict.errors == [] and conv.final.content[-1].text == "All three steps are done."
    sent = json.loads(strict.bodies[-1])["messages"]
    texts = [m["content"][0]["text"] for m in sent if m["role"] == "assistant"]
    # Turn 1: a miss; the new proxy saw this model write `<think>\t` ... `</think>` (turn 2's
    # first closed block) and guesses that: the best it knows of how this model writes.
    assert texts == ["<think>\tI should list the files. \n</think>Let me look.", WROTE[1]]


def test_messages_bodies_go_back_byte_for_byte_too(m_proxies, up):
    strict = StrictAnthropic(TURNS, exact=True)
    up.route("/messages", strict.handle)
    client = anthropic.Anthropic(base_url=m_proxies["off"].url, api_key="a body client", max_retries=0, timeout=20)
    msgs: list = [{"role": "user", "content": "fix the build"}]
    for _ in range(3):
        final = client.messages.create(model="m", max_tokens=1024, tools=TOOLS_M, messages=msgs)
        msgs.append({"role": "assistant", "content": final.content})   # the SDK's objects, as they came
        if final.stop_reason != "tool_use":
            break
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
                                                 for b in final.content if b.type == "tool_use"]})
    assert strict.errors == [] and final.content[-1].text == "All three steps are done."
    assert [b.type for b in msgs[3]["content"]] == ["text", "thinking", "text", "thinking", "tool_use"]
    sent = json.loads(strict.bodies[-1])["messages"]
    assert [m["content"][0]["text"] for m in sent if m["role"] == "assistant"] == WROTE


# -- Responses: reasoning items without encrypted_content (Codex without `include`) ---------------
@pytest.mark.parametrize("ids", [False, True], ids=["codex", "with-ids"])
def test_responses_items_without_a_mark_go_back_byte_for_byte(proxy, up, ids):
    strict = StrictResponses(TURNS, exact=True)
    up.route("/responses", strict.handle)
    conv = run(ResponsesConversation(ids=ids, include=False), [proxy])
    assert strict.errors == [] and conv.final.output_text == "All three steps are done."
    assert [it["content"][0]["text"] for it in assistant_texts(strict.bodies[-1])] == WROTE
    assert not any(it.get("type") == "reasoning" for it in json.loads(strict.bodies[-1])["input"])


def test_responses_bodies_go_back_byte_for_byte_too(proxy, up):
    strict = StrictResponses(TURNS, exact=True)
    up.route("/responses", strict.handle)
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="a body client", max_retries=0, timeout=20)
    items: list = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the build"}]}]
    for _ in range(3):
        final = client.responses.create(model="qwen3", input=items, tools=TOOLS_R, store=False)
        out = [it.to_dict() for it in final.output]
        items += [codex_echo(it) for it in out]
        calls = [it["call_id"] for it in out if it["type"] == "function_call"]
        if not calls:
            break
        items += [{"type": "function_call_output", "call_id": c, "output": "ok"} for c in calls]
    assert strict.errors == [] and final.output_text == "All three steps are done."
    assert [m["content"][0]["text"] for m in assistant_texts(strict.bodies[-1])] == WROTE


# -- chat: reasoning_content sent back, think_chat_restore=inline ---------------------------------
@pytest.fixture(scope="module")
def c_proxy(proxy_factory):
    return proxy_factory(options={"think_chat_restore": "inline"})


def test_chat_reasoning_content_goes_back_byte_for_byte(c_proxy, up):
    strict = StrictChat(TURNS, exact=True)
    up.route("/chat/completions", strict.handle)
    conv = ChatConversation()
    seen = [conv.turn(c_proxy.url) for _ in range(3)]
    assert strict.errors == [] and conv.done
    assert seen[1] == ("Now read the README.\n\nand the tests", "Sure.\nReading.")   # what the client read
    sent = [m for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in sent] == WROTE
    assert not any("reasoning_content" in m for m in sent)


def test_chat_bodies_go_back_byte_for_byte_too(c_proxy, up):
    strict = StrictChat(TURNS, exact=True)
    up.route("/chat/completions", strict.handle)
    client = openai.OpenAI(base_url=c_proxy.url + "/v1", api_key="a body client", max_retries=0, timeout=20)
    msgs: list = [{"role": "user", "content": "fix the build"}]
    for _ in range(3):
        m = client.chat.completions.create(model="m", messages=msgs, tools=TOOLS_C).choices[0].message
        msgs.append(m.to_dict())   # reasoning_content and all, as the SDK read it
        msgs += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in m.tool_calls or []]
    assert strict.errors == [] and m.content == "All three steps are done."
    assert msgs[3]["reasoning_content"] == "Now read the README.\n\nand the tests"
    sent = [m for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in sent] == WROTE


def test_chat_another_clients_turn_gets_none_of_this_clients_markup(c_proxy, up):
    """Client B sends back, word for word, the turn the proxy gave client A: B is not A, so the
    proxy knows nothing of it, nor of how the model writes for A: the profile's pair."""
    strict = StrictChat(TURNS)
    up.route("/chat/completions", strict.handle)
    a = ChatConversation()
    a.api_key = "key of A"
    a.turn(c_proxy.url)
    b = ChatConversation()
    b.api_key = "key of B"
    b.msgs = list(a.msgs)
    b.turn(c_proxy.url)
    assert strict.errors == []
    sent = [m for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in sent] == [PAIRED[0]]
    a.turn(c_proxy.url)   # A itself, the same history: as written
    sent = [m for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in sent] == WROTE[:1]


def test_chat_a_turn_edited_by_the_client_is_a_miss_and_gets_the_learned_layout(c_proxy, up):
    strict = StrictChat(TURNS)
    up.route("/chat/completions", strict.handle)
    conv = ChatConversation()
    conv.api_key = "key of C"
    conv.turn(c_proxy.url)
    conv.msgs[1]["content"] = "Let me look!"   # the client changed the answer: not what was seen
    strict.turns = [Turn("\n<think>\n  I should list the files.\n\n</think>\n\n  Let me look!")] + TURNS[1:]
    conv.turn(c_proxy.url)
    sent = [m for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    # The markup of the first block this model wrote for this client, around the kept text.
    assert sent[0]["content"] == "\n<think>\n  I should list the files.\n\n</think>\n\n  Let me look!"
    assert strict.errors == []


# -- Ollama: `thinking` sent back to a model whose template does not read it --------------------
INLINE = "scripted-thinker:latest"   # the default profile: the model opens its own block
NATIVE = "qwen3:8b-written"
O_TURNS = ["\n<think>\nThe user greets me.\n</think>\n\nHello! How can I help?",
           "Files:<think> They want files & folders.\t</think>\n\nRun `ls`.<think>\nand more\n</think>",
           "<think>ok</think>Done."]


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_thinking_goes_back_byte_for_byte(proxy, up, stream):
    strict = StrictOllama({INLINE: O_TURNS}, exact=True)
    for path in ("/api/chat", "/api/show"):
        up.route(path, strict.handle)
    client = ollama.Client(host=proxy.url)
    msgs = [{"role": "user", "content": "hi"}]
    for _ in range(3):
        thinking, content = ollama_turn(client, INLINE, msgs, stream)
        msgs += [{"role": "assistant", "content": content, "thinking": thinking}, {"role": "user", "content": "go on"}]
    assert strict.errors == []
    assert msgs[3] == {"role": "assistant", "content": "Files:\n\nRun `ls`.",
                       "thinking": "They want files & folders.\n\nand more"}
    assert [m["content"] for m in strict.bodies[-1]["messages"] if m["role"] == "assistant"] == O_TURNS[:2]
    assert not any("thinking" in m for m in strict.bodies[-1]["messages"])


def test_ollama_a_template_that_reads_thinking_gets_it_natively_not_inline(proxy, up):
    strict = StrictOllama({NATIVE: O_TURNS}, native=(NATIVE,))
    for path in ("/api/chat", "/api/show"):
        up.route(path, strict.handle)
    client = ollama.Client(host=proxy.url)
    sent = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello! How can I help?", "thinking": "The user greets me."},
            {"role": "user", "content": "files?"}]
    client.chat(model=NATIVE, messages=sent, think=True)
    assert strict.errors == []
    assert strict.bodies[-1]["messages"][1] == sent[1]   # `thinking` as sent: the template reads it
