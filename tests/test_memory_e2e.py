"""The reasoning memory through a real mitmdump with default settings: clients that drop the
reasoning of the turns they send back (LangChain's ChatOpenAI drops `reasoning_content`), in a
tool loop, against upstreams that need it (tests/support/thinking.py)."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from harness import StrictAnthropic, StrictResponses
from support.loops import MessagesConversation, ResponsesConversation, loop_turns
from support.ollama import StrictOllama
from support.thinking import (DEEPSEEK_400, InterleavedTemplate, LangChainLoop, StrictThinking, deepseek_turns,
                              inline_turns)

pytest.importorskip("langchain_openai", reason="langchain-openai is in the test extra")
from langchain_core.messages import AIMessage  # noqa: E402

pytestmark = pytest.mark.e2e


def langchain_loop(url: str, model: str, stream: bool, key: str = "sk-one") -> tuple[str, list]:
    loop = LangChainLoop(model, stream, key)
    return loop.run(url), loop.msgs


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_langchain_tool_loop_completes_against_deepseek_thinking_mode(up, proxy, stream):
    strict = StrictThinking(deepseek_turns())
    up.route("/chat/completions", strict.handle)
    answer, msgs = langchain_loop(proxy.url, "deepseek-v4-pro", stream)
    assert answer == "All three steps are done."
    assert strict.errors == []
    # LangChain sent no reasoning_content back (it drops it): what reached the upstream was
    # the memory's, each turn's byte for byte.
    sent = json.loads(strict.bodies[-1])["messages"]
    assert [m.get("reasoning_content") for m in sent if m["role"] == "assistant"] == \
        ["I should list the files first.\n\nThen read them.", "Now the README: ünïcode ✓",
         "  Run the tests; spaces kept.  "]


def test_without_the_memory_the_same_loop_is_refused(up, proxy_factory):
    strict = StrictThinking(deepseek_turns())
    up.route("/chat/completions", strict.handle)
    p = proxy_factory({"think_memory": "off"})
    with pytest.raises(openai.BadRequestError) as e:   # (LangChain's OpenAIInvalidRequestError is one)
        langchain_loop(p.url, "deepseek-v4-pro", False)
    assert DEEPSEEK_400 in str(e.value)
    assert strict.errors == [DEEPSEEK_400]


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_interleaved_template_sees_each_turns_reasoning_as_the_model_wrote_it(up, proxy, stream):
    tpl = InterleavedTemplate(inline_turns())
    up.route("/chat/completions", tpl.handle)
    answer, msgs = langchain_loop(proxy.url, "qwen3-8b", stream)
    assert answer == "All three steps are done."
    # The client got the reasoning split out (and dropped it)...
    assert [m.content for m in msgs if isinstance(m, AIMessage)] == ["", "Reading it.", "", "All three steps are done."]
    # ... and every later request carried each earlier turn exactly as the model wrote it.
    for k, body in enumerate(tpl.bodies):
        sent = [m["content"] for m in json.loads(body)["messages"] if m["role"] == "assistant"]
        assert sent == [t.text for t in inline_turns()[:k]]
    assert tpl.rendered[-1] == ["<think>\nI should list the files.\n</think>\n\n",
                                "<think>\nNow read the README.\n</think>\n\nReading it.",
                                "<think>\nOne more check: ünïcode ✓\n</think>\n\n"]


def test_another_credential_sending_the_same_tool_call_ids_gets_nothing(up, proxy):
    strict = StrictThinking(deepseek_turns() * 2)
    up.route("/chat/completions", strict.handle)
    first = langchain_loop(proxy.url, "deepseek-v4-pro", False, key="sk-alice")[1]
    assert strict.errors == []
    # Bob replays Alice's history (her tool call ids) with his own key: nothing of hers is put
    # back, and the request goes as he sent it.
    history = [{"role": "user", "content": "fix the build"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
    got = httpx.post(proxy.url + "/v1/chat/completions", headers={"authorization": "Bearer sk-bob"},
                     json={"model": "deepseek-v4-pro", "messages": history}, timeout=20)
    assert got.status_code == 400 and got.json()["error"]["message"] == DEEPSEEK_400
    assert json.loads(strict.bodies[-1])["messages"] == history
    assert len(first) == 8


# -- every surface: the official SDKs, with clients that drop what they got ---------------------
@pytest.mark.parametrize("display", [None, "omitted"], ids=["signed", "omitted"])
def test_messages_loop_that_drops_thinking_blocks_reaches_the_upstream_as_the_model_wrote_it(up, proxy, display):
    """A client that rebuilds Anthropic turns from text and tool_use blocks (no thinking): the
    memory puts back the blocks the client got (thinkwire's marks), and the way back turns them
    into the text the model wrote, byte for byte (StrictAnthropic exact)."""
    strict = StrictAnthropic(loop_turns(), exact=True)
    up.route("/messages", strict.handle)
    conv = MessagesConversation(display=display, model="kimi-k2-thinking", drop=True)
    while not conv.done:
        conv.turn(proxy.url)
    assert strict.errors == []
    assert [b.text for b in conv.final.content if b.type == "text"] == ["All three steps are done."]
    sent = json.loads(strict.bodies[-1])["messages"]
    assert [[b.get("text") for b in m["content"] if b["type"] == "text"] for m in sent if m["role"] == "assistant"] == \
        [["<think>\nI should list the files.\n</think>\n\nLet me look."], ["<think>Now read the README.</think>"],
         ["<think>One more check: ünïcode ✓</think>Checking tests."]]
    # What the client sent carried no thinking block: the memory's were put back.
    assert all(b["type"] != "thinking" for m in conv.msgs if m["role"] == "assistant" for b in m["content"])


def test_messages_loop_without_the_memory_reaches_the_upstream_without_the_reasoning(up, proxy_factory):
    strict = StrictAnthropic(loop_turns(), exact=True)
    up.route("/messages", strict.handle)
    p = proxy_factory({"think_memory": "off"})
    conv = MessagesConversation(display=None, model="kimi-k2-thinking", drop=True)
    conv.turn(p.url)
    with pytest.raises(anthropic.BadRequestError):
        conv.turn(p.url)
    assert strict.errors == ["messages.1: assistant turn reads 'Let me look.', the model wrote "
                             "'<think>\\nI should list the files.\\n</think>\\n\\nLet me look.'"]


@pytest.mark.parametrize("include", [True, False], ids=["encrypted_content", "ids"])
def test_responses_loop_that_drops_reasoning_items_reaches_the_upstream_with_its_reasoning(up, proxy, include):
    """store: false, the output echoed without its reasoning items: the memory puts back the
    items the client got before the turn's function call, and the way back inlines them byte for
    byte (from encrypted_content's marks, or by id)."""
    strict = StrictResponses(loop_turns(), exact=include)
    up.route("/responses", strict.handle)
    conv = ResponsesConversation(include=include, drop=True)   # model qwen3: the memory is on
    while not conv.done:
        conv.turn(proxy.url)
    assert strict.errors == []
    assert all(it["type"] != "reasoning" for it in conv.items)
    sent = [it for it in json.loads(strict.bodies[-1])["input"] if it.get("role") == "assistant"]
    texts = [p["text"] for it in sent for p in it["content"]]
    # (By id too: the way back restores the markup as the model wrote it, from back32's cache.)
    assert texts == ["<think>\nI should list the files.\n</think>\n\nLet me look.", "<think>Now read the README.</think>",
                     "<think>One more check: ünïcode ✓</think>Checking tests."]


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_ollama_client_that_drops_thinking_reaches_the_model_as_it_wrote_each_turn(up, proxy, stream):
    """Ollama's own client, its history rebuilt from each answer's content (its `thinking` left
    out), a model whose template reads only text (the reasoning inline). Kimi K2 thinking reads
    the reasoning of every turn back: each answer is remembered and put back as written."""
    import ollama
    turns = ["<think>\nFirst, the plan.\n</think>\n\nHere is the plan.", "<think>Then: ünïcode ✓</think>Done twice.",
             "<think>last</think>All done."]
    server = StrictOllama({"kimi-k2-thinking": turns})
    for path in ("/api/chat", "/api/show"):
        up.route(path, server.handle)
    client = ollama.Client(host=proxy.url)
    msgs: list = []
    for ask in ("plan it", "do it", "finish"):
        msgs.append({"role": "user", "content": ask})
        if stream:
            parts = list(client.chat(model="kimi-k2-thinking", messages=msgs, stream=True))
            content = "".join(p.message.content or "" for p in parts)
            thinking = "".join(p.message.thinking or "" for p in parts)
        else:
            r = client.chat(model="kimi-k2-thinking", messages=msgs)
            content, thinking = r.message.content, r.message.thinking
        assert thinking   # the client got it split out...
        msgs.append({"role": "assistant", "content": content})   # ... and keeps only the text
    assert server.errors == []
    assert [m["content"] for m in server.bodies[-1]["messages"] if m["role"] == "assistant"] == turns[:2]
