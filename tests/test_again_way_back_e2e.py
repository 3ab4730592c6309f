"""End to end, the way back of turns under vLLM's `chat_template_kwargs.force_nonempty_content`
(thinkwire.again; issue 32): an output with reasoning and no answer gives its reasoning as the
answer too (a body: as the answer alone; a stream: the reasoning, then the same text as the
answer). Sent back as the client received it, such a turn reaches the upstream as the model wrote
it: not the answer without its tags, not the text twice.

The official SDKs (the Ollama one's requests carry the switch, which its client has no argument
for: httpx, read as the SDK reads them) run five turns through a real mitmdump; the strict
upstreams (exact) refuse a request unless every earlier assistant turn reads byte for byte as the
model wrote it."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from harness import StrictAnthropic, StrictChat, StrictResponses, Turn
from support.loops import assistant_texts, codex_echo, read_chat_stream
from support.ollama import StrictOllama

pytestmark = pytest.mark.e2e

FORCE = {"chat_template_kwargs": {"force_nonempty_content": True}}
WROTE = [
    "<think>\nPlan it: add the two numbers.\n</think>\n\n",   # reasoning, no answer
    "<think>\nCheck it.\n</think>\n\nIt is 4.",
    "<think> Sure of it. </think>",                           # reasoning, no answer
    "<think>Two ways:</think>\n<think> both give 4. </think>",  # reasoning in two blocks, no answer
    "<think>done</think>\n\nAll done.",
]
# What the client reads of each turn (reasoning, answer; several blocks joined with a blank line,
# as a body's answer and chat's reasoning field join them).
READ_STREAM = [("Plan it: add the two numbers.", "Plan it: add the two numbers."), ("Check it.", "It is 4."),
               ("Sure of it.", "Sure of it."), ("Two ways:\n\nboth give 4.", "Two ways:\n\nboth give 4."),
               ("done", "All done.")]
READ_BODY = [("", "Plan it: add the two numbers."), ("Check it.", "It is 4."), ("", "Sure of it."),
             ("", "Two ways:\n\nboth give 4."), ("done", "All done.")]


def turns() -> list[Turn]:
    return [Turn(t) for t in WROTE]


def read(stream: bool) -> list[tuple[str, str]]:
    return READ_STREAM if stream else READ_BODY


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_chat_gives_a_forced_answer_back_byte_for_byte(inline_proxies, up, stream):
    strict = StrictChat(turns(), exact=True)
    up.route("/chat/completions", strict.handle)
    client = openai.OpenAI(base_url=inline_proxies["off"].url + "/v1", api_key=f"chat force {stream}", max_retries=0,
                           timeout=20)
    msgs: list = [{"role": "user", "content": "what is 2 + 2"}]
    got = []
    for _ in WROTE:
        if stream:
            reasoning, content, _calls = read_chat_stream(
                client.chat.completions.create(model="m", messages=msgs, stream=True, extra_body=FORCE))
        else:
            m = client.chat.completions.create(model="m", messages=msgs, extra_body=FORCE).choices[0].message
            reasoning, content = getattr(m, "reasoning_content", None) or "", m.content or ""
        got.append((reasoning, content))
        msgs += [{"role": "assistant", "content": content, "reasoning_content": reasoning},
                 {"role": "user", "content": "go on"}]
    assert strict.errors == []
    assert got == read(stream)
    sent = [m["content"] for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert sent == WROTE[:-1]


@pytest.mark.parametrize("sig", ["signed", "off"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_messages_gives_a_forced_answer_back_byte_for_byte(inline_proxies, up, stream, sig):
    strict = StrictAnthropic(turns(), exact=True)
    up.route("/messages", strict.handle)
    client = anthropic.Anthropic(base_url=inline_proxies[sig].url, api_key=f"messages force {stream} {sig}",
                                 max_retries=0, timeout=20)
    msgs: list = [{"role": "user", "content": "what is 2 + 2"}]
    got = []
    for _ in WROTE:
        kw = dict(model="m", max_tokens=1024, messages=msgs, extra_body=FORCE)
        if stream:
            with client.messages.stream(**kw) as s:
                final = s.get_final_message()
        else:
            final = client.messages.create(**kw)
        blocks = final.to_dict()["content"]
        got.append(("\n\n".join(b["thinking"] for b in blocks if b["type"] == "thinking"),
                    "".join(b.get("text", "") for b in blocks)))
        msgs += [{"role": "assistant", "content": blocks},   # as received
                 {"role": "user", "content": "go on"}]
    assert strict.errors == []
    assert got == read(stream)
    sent = [m["content"] for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert sent == [[{"type": "text", "text": t}] for t in WROTE[:-1]]


@pytest.mark.parametrize("include", [True, False], ids=["encrypted", "codex"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_responses_gives_a_forced_answer_back_byte_for_byte(inline_proxies, up, stream, include):
    strict = StrictResponses(turns(), exact=True)
    up.route("/responses", strict.handle)
    client = openai.OpenAI(base_url=inline_proxies["signed"].url + "/v1", api_key=f"responses force {stream} {include}",
                           max_retries=0, timeout=20)
    items: list = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "2 + 2?"}]}]
    kw: dict = dict(model="m", store=False, reasoning={"summary": "auto"}, extra_body=FORCE)
    if include:
        kw["include"] = ["reasoning.encrypted_content"]
    got = []
    for _ in WROTE:
        if stream:
            final = list(client.responses.create(input=items, stream=True, **kw))[-1].response
        else:
            final = client.responses.create(input=items, **kw)
        out = [it.to_dict() for it in final.output]
        got.append(("\n\n".join(s["text"] for it in out if it["type"] == "reasoning" for s in it.get("summary") or []),
                    final.output_text))
        items += [codex_echo(it) for it in out]
        items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]})
    assert strict.errors == []
    assert got == read(stream)
    assert [it["content"][0]["text"] for it in assistant_texts(strict.bodies[-1])] == WROTE[:-1]
    assert not any(it.get("type") == "reasoning" for it in json.loads(strict.bodies[-1])["input"])


def ollama_turn(url: str, key: str, msgs: list, stream: bool) -> tuple[str, str]:
    """One /api/chat turn with the switch, read as the ollama SDK reads it: (thinking, content),
    joined from the stream's lines or from the body's message."""
    with httpx.Client(timeout=20) as client:
        r = client.post(url + "/api/chat", headers={"Authorization": f"Bearer {key}"},
                        json=dict(FORCE, model="m", messages=msgs, stream=stream))
    assert r.status_code == 200, r.text
    parts = [json.loads(line)["message"] for line in r.text.splitlines() if line.strip()]
    return "".join(p.get("thinking") or "" for p in parts), "".join(p.get("content") or "" for p in parts)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_ollama_gives_a_forced_answer_back_byte_for_byte(inline_proxies, up, stream):
    strict = StrictOllama({"m": list(WROTE)}, exact=True)
    for path in ("/api/chat", "/api/show"):
        up.route(path, strict.handle)
    msgs: list = [{"role": "user", "content": "what is 2 + 2"}]
    got = []
    for _ in WROTE:
        thinking, content = ollama_turn(inline_proxies["off"].url, f"ollama force {stream}", msgs, stream)
        got.append((thinking, content))
        msgs += [{"role": "assistant", "content": content, "thinking": thinking}, {"role": "user", "content": "go on"}]
    assert strict.errors == []
    assert got == read(stream)
    assert [m["content"] for m in strict.bodies[-1]["messages"] if m["role"] == "assistant"] == WROTE[:-1]
