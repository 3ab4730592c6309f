"""The reasoning memory through a real mitmdump with default settings: clients that drop the
reasoning of the turns they send back (LangChain's ChatOpenAI drops `reasoning_content`), in a
tool loop, against upstreams that need it (tests/support/thinking.py)."""

from __future__ import annotations

import json

import httpx
import pytest

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
    with pytest.raises(Exception) as e:
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
