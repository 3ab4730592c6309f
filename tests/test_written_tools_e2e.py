"""End to end, the way back byte for byte for turns whose output holds a tool call's markup
(tagsets.yaml `tool_calls`: a call from its header to its end marker stays in the answer as the
model wrote it, for a tool parser; issue 32):

- gpt-oss (Harmony) served without a Harmony parser: the analysis channel, then a call whose
  header names its recipient after the channel (`<|start|>assistant<|channel|>commentary
  to=functions.get_weather <|constrain|>json<|message|>...<|call|>`), after a preamble to the
  user, or after the role (`<|start|>assistant to=functions.echo<|channel|>commentary ...`),
  with `<|end|>` and `<|return|>` as text in its arguments;
- Muse: a tool channel `<|start|>to=functions<|message|>...` ending in `<|eom|>` or `<|eot|>`,
  kept whole, after reasoning (a line break put in before the answer that follows it) and
  after answer text (no line break put in front of a header).

The official SDKs run four turns through a real mitmdump, each client sending its turns back as
it received them (the markup is text of the answer, so a user turn follows each); the strict
upstreams (exact) refuse a request unless every earlier assistant turn reads byte for byte as the
model wrote it."""

from __future__ import annotations

import json

import anthropic
import ollama
import openai
import pytest

from harness import StrictAnthropic, StrictChat, StrictResponses, Turn
from support.loops import assistant_texts, codex_echo, ollama_loop, read_chat_stream
from support.ollama import StrictOllama

pytestmark = pytest.mark.e2e

WROTE = {
    "gpt-oss-20b": [
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>",
        "<|channel|>analysis<|message|>Read it.<|end|><|start|>assistant<|channel|>commentary<|message|>Reading the "
        "file.<|end|><|start|>assistant<|channel|>commentary to=functions.read <|constrain|>json<|message|>"
        "{\"path\": \"a\"}<|call|>",
        "<|channel|>analysis<|message|>Echo it.<|end|><|start|>assistant to=functions.echo<|channel|>commentary "
        "<|constrain|>json<|message|>{\"text\": \"<|end|> and <|return|>\"}<|call|>",
        "<|channel|>analysis<|message|>Done.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny in "
        "Oslo.<|return|>",
    ],
    "muse-glimmer": [
        "<|start|>to=self<|message|>Look it up.<|eom|><|start|>to=functions<|message|>{\"q\": \"x\"}<|eom|>"
        "<|start|>to=user<|message|>Done.<|eot|>",
        "<|start|>to=user<|message|>ok<|eom|><|start|>to=functions<|message|><atem:function_calls>x<|eom|>",
        "<|start|>to=self<|message|>Check.<|eom|><|start|>to=functions<|message|>{\"q\": \"y\"}<|eot|>",
        "<|start|>to=self<|message|>done<|eom|><|start|>to=user<|message|>All done.<|eot|>",
    ],
}
# What the client reads of each (reasoning, answer): the calls' markup whole, in the answer.
READ = {
    "gpt-oss-20b": [
        ("Need the weather.", "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
                              "<|message|>{\"city\": \"Oslo\"}<|call|>"),
        ("Read it.", "Reading the file.<|start|>assistant<|channel|>commentary to=functions.read <|constrain|>json"
                     "<|message|>{\"path\": \"a\"}<|call|>"),
        ("Echo it.", "<|start|>assistant to=functions.echo<|channel|>commentary <|constrain|>json<|message|>"
                     "{\"text\": \"<|end|> and <|return|>\"}<|call|>"),
        ("Done.", "It is sunny in Oslo."),
    ],
    "muse-glimmer": [
        ("Look it up.", "<|start|>to=functions<|message|>{\"q\": \"x\"}<|eom|>\nDone."),
        ("", "ok<|start|>to=functions<|message|><atem:function_calls>x<|eom|>"),
        ("Check.", "<|start|>to=functions<|message|>{\"q\": \"y\"}<|eot|>"),
        ("done", "All done."),
    ],
}
MODELS = list(WROTE)


def turns(model: str) -> list[Turn]:
    return [Turn(t) for t in WROTE[model]]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_chat_gives_back_tool_call_markup_byte_for_byte(inline_proxies, up, stream, model):
    strict = StrictChat(turns(model), exact=True)
    up.route("/chat/completions", strict.handle)
    client = openai.OpenAI(base_url=inline_proxies["off"].url + "/v1", api_key=f"chat tools {stream} {model}",
                           max_retries=0, timeout=20)
    msgs: list = [{"role": "user", "content": "what is the weather"}]
    read = []
    for _ in range(4):
        if stream:
            reasoning, content, _calls = read_chat_stream(
                client.chat.completions.create(model=model, messages=msgs, stream=True))
        else:
            m = client.chat.completions.create(model=model, messages=msgs).choices[0].message
            reasoning, content = getattr(m, "reasoning_content", None) or "", m.content or ""
        read.append((reasoning, content))
        msgs += [{"role": "assistant", "content": content, "reasoning_content": reasoning},
                 {"role": "user", "content": "go on"}]
    assert strict.errors == []
    assert read == READ[model]
    sent = [m["content"] for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert sent == WROTE[model][:3]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("sig", ["signed", "off"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_messages_gives_back_tool_call_markup_byte_for_byte(inline_proxies, up, stream, sig, model):
    strict = StrictAnthropic(turns(model), exact=True)
    up.route("/messages", strict.handle)
    client = anthropic.Anthropic(base_url=inline_proxies[sig].url, api_key=f"messages tools {stream} {sig} {model}",
                                 max_retries=0, timeout=20)
    msgs: list = [{"role": "user", "content": "what is the weather"}]
    for _ in range(4):
        kw = dict(model=model, max_tokens=1024, messages=msgs)
        if stream:
            with client.messages.stream(**kw) as s:
                final = s.get_final_message()
        else:
            final = client.messages.create(**kw)
        msgs += [{"role": "assistant", "content": final.to_dict()["content"]},   # as received
                 {"role": "user", "content": "go on"}]
    assert strict.errors == []
    assert [(b.get("thinking", ""), b.get("text", "")) for b in final.to_dict()["content"]][-1][1] == \
        READ[model][3][1]
    sent = [m["content"] for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert sent == [[{"type": "text", "text": t}] for t in WROTE[model][:3]]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("include", [True, False], ids=["encrypted", "codex"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_responses_gives_back_tool_call_markup_byte_for_byte(inline_proxies, up, stream, include, model):
    strict = StrictResponses(turns(model), exact=True)
    up.route("/responses", strict.handle)
    client = openai.OpenAI(base_url=inline_proxies["signed"].url + "/v1",
                           api_key=f"responses tools {stream} {include} {model}",
                           max_retries=0, timeout=20)
    items: list = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]}]
    kw: dict = dict(model=model, store=False, reasoning={"summary": "auto"})
    if include:
        kw["include"] = ["reasoning.encrypted_content"]
    for _ in range(4):
        if stream:
            final = list(client.responses.create(input=items, stream=True, **kw))[-1].response
        else:
            final = client.responses.create(input=items, **kw)
        items += [codex_echo(it.to_dict()) for it in final.output]
        items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]})
    assert strict.errors == [] and final.output_text == READ[model][3][1]
    assert [it["content"][0]["text"] for it in assistant_texts(strict.bodies[-1])] == WROTE[model][:3]
    assert not any(it.get("type") == "reasoning" for it in json.loads(strict.bodies[-1])["input"])


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
def test_ollama_gives_back_tool_call_markup_byte_for_byte(inline_proxies, up, stream, model):
    strict = StrictOllama({model: list(WROTE[model])}, exact=True)
    for path in ("/api/chat", "/api/show"):
        up.route(path, strict.handle)
    client = ollama.Client(host=inline_proxies["off"].url,
                           headers={"Authorization": f"Bearer ollama tools {stream} {model}"})
    msgs: list = [{"role": "user", "content": "what is the weather"}]
    read = ollama_loop(client, model, msgs, stream)
    assert strict.errors == []
    assert read == READ[model]
    assert [m["content"] for m in strict.bodies[-1]["messages"] if m["role"] == "assistant"] == WROTE[model][:3]
