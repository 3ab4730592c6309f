"""End to end, issue 32's last way-back gaps, byte for byte on every surface, body and stream:

- a stray closing tag at the output's start, where the output starts in the answer
  (`</think>\\n\\nLet me look.`): a stream drops it and keeps it for the way back; a body splits
  again from inside the block the template opened, so it goes back behind that opening tag;
- a stray closing tag right before the next block (`Found</think><think>them.</think>`): the
  line break put after the tag goes before the block, and out of the layout;
- an answer wrapper with no block before it (Hunyuan's `<answer>` ... `</answer>`).

The official SDKs run a four-turn tool loop through a real mitmdump, each client sending its
turns back as it received them; the strict upstreams (exact) refuse a request unless every
earlier assistant turn reads byte for byte as the model wrote it (for a body's first turn:
behind the template's opening tag)."""

from __future__ import annotations

import json

import anthropic
import ollama
import openai
import pytest

from harness import StrictAnthropic, StrictChat, StrictResponses, Turn
from support.loops import TOOLS_C, TOOLS_M, TOOLS_R, assistant_texts, codex_echo, ollama_loop, read_chat_stream
from support.ollama import StrictOllama

pytestmark = pytest.mark.e2e

MODEL = "hunyuan-a13b"
WROTE = [
    "</think>\n\nLet me look.",
    "<think>\nList the files.\n</think>\n\nFound</think><think>them.</think> Reading it.",
    "<answer>\nRunning them.\n</answer>",
    "<think>done</think>\n<answer>All three steps are done.</answer>",
]
TOOLS = [("bash", {"cmd": "ls"}), ("bash", {"cmd": "cat README.md"}), ("bash", {"cmd": "pytest"}), None]
# What the client read of each (reasoning, answer).
READ = [("", "Let me look."), ("List the files.\n\nthem.", "Found Reading it."), ("", "Running them.\n"),
        ("done", "All three steps are done.")]


def back(stream: bool) -> list[str]:
    """What the upstream must read again of turns 1 to 3."""
    return [WROTE[0] if stream else "<think>" + WROTE[0], WROTE[1], WROTE[2]]


def turns(stream: bool) -> list[Turn]:
    return [Turn(t, tool) for t, tool in zip(WROTE, TOOLS)]


def behind_the_tag(strict, stream: bool) -> None:
    """After turn 1 went out as a body: it comes back behind the template's opening tag."""
    if not stream:
        if isinstance(strict, StrictOllama):
            strict.models[MODEL][0] = back(False)[0]
        else:
            strict.turns[0] = Turn(back(False)[0], TOOLS[0])


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_chat_gives_back_each_gap_byte_for_byte(inline_proxies, up, stream):
    strict = StrictChat(turns(stream), exact=True)
    up.route("/chat/completions", strict.handle)
    client = openai.OpenAI(base_url=inline_proxies["off"].url + "/v1", api_key=f"chat gaps {stream}", max_retries=0,
                           timeout=20)
    msgs: list = [{"role": "user", "content": "fix the build"}]
    read = []
    for i in range(4):
        if stream:
            reasoning, content, calls = read_chat_stream(
                client.chat.completions.create(model=MODEL, messages=msgs, tools=TOOLS_C, stream=True))
        else:
            m = client.chat.completions.create(model=MODEL, messages=msgs, tools=TOOLS_C).choices[0].message
            reasoning, content = getattr(m, "reasoning_content", None) or "", m.content or ""
            calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in m.tool_calls or []]
        read.append((reasoning, content))
        msg: dict = {"role": "assistant", "content": content, "reasoning_content": reasoning}
        if calls:
            msg["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]
        msgs += [msg] + [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
        if i == 0:
            behind_the_tag(strict, stream)
    assert strict.errors == []
    assert read == READ
    sent = [m["content"] for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert sent == back(stream)


@pytest.mark.parametrize("sig", ["signed", "off"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_messages_gives_back_each_gap_byte_for_byte(inline_proxies, up, stream, sig):
    strict = StrictAnthropic(turns(stream), exact=True)
    up.route("/messages", strict.handle)
    client = anthropic.Anthropic(base_url=inline_proxies[sig].url, api_key=f"messages gaps {stream} {sig}",
                                 max_retries=0, timeout=20)
    msgs: list = [{"role": "user", "content": "fix the build"}]
    for i in range(4):
        kw = dict(model=MODEL, max_tokens=1024, tools=TOOLS_M, messages=msgs)
        if stream:
            with client.messages.stream(**kw) as s:
                final = s.get_final_message()
        else:
            final = client.messages.create(**kw)
        msgs.append({"role": "assistant", "content": final.to_dict()["content"]})   # as received
        if final.stop_reason == "tool_use":
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
                                                     for b in final.content if b.type == "tool_use"]})
        if i == 0:
            behind_the_tag(strict, stream)
    assert strict.errors == [] and final.content[-1].text == "All three steps are done."
    sent = [m["content"] for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert [c[0] for c in sent] == [{"type": "text", "text": t} for t in back(stream)]


@pytest.mark.parametrize("include", [True, False], ids=["encrypted", "codex"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_responses_gives_back_each_gap_byte_for_byte(inline_proxies, up, stream, include):
    strict = StrictResponses(turns(stream), exact=True)
    up.route("/responses", strict.handle)
    client = openai.OpenAI(base_url=inline_proxies["signed"].url + "/v1", api_key=f"responses gaps {stream} {include}",
                           max_retries=0, timeout=20)
    items: list = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the build"}]}]
    kw: dict = dict(model=MODEL, tools=TOOLS_R, store=False, reasoning={"summary": "auto"})
    if include:
        kw["include"] = ["reasoning.encrypted_content"]
    for i in range(4):
        if stream:
            events = list(client.responses.create(input=items, stream=True, **kw))
            final = events[-1].response
        else:
            final = client.responses.create(input=items, **kw)
        out = [codex_echo(it.to_dict()) for it in final.output]
        items += out + [{"type": "function_call_output", "call_id": it["call_id"], "output": "ok"}
                        for it in out if it["type"] == "function_call"]
        if i == 0:
            behind_the_tag(strict, stream)
    assert strict.errors == [] and final.output_text == "All three steps are done."
    assert [it["content"][0]["text"] for it in assistant_texts(strict.bodies[-1])] == back(stream)
    assert not any(it.get("type") == "reasoning" for it in json.loads(strict.bodies[-1])["input"])


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_ollama_gives_back_each_gap_byte_for_byte(inline_proxies, up, stream):
    strict = StrictOllama({MODEL: list(WROTE)}, exact=True)
    for path in ("/api/chat", "/api/show"):
        up.route(path, strict.handle)
    client = ollama.Client(host=inline_proxies["off"].url, headers={"Authorization": f"Bearer ollama gaps {stream}"})
    msgs: list = [{"role": "user", "content": "hi"}]
    read = ollama_loop(client, MODEL, msgs, stream, after_first=lambda: behind_the_tag(strict, stream))
    assert strict.errors == []
    assert read == READ
    assert [m["content"] for m in strict.bodies[-1]["messages"] if m["role"] == "assistant"] == back(stream)
