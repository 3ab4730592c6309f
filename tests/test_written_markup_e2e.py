"""End to end, the way back byte for byte for markup the splitter drops where no block's edge
holds it (thinkwire.written, the splitter's `_dropped`):

- an opening tag written again after some reasoning, in a block the template opened
  (`Plan.<think>Check the README.</think>`: the reasoning reads `Plan.\\nCheck the README.`);
- a stray closing tag removed later in the answer (`Reading it.</think>` with a line break
  after it, and `Found</think>them.`, which gets a line break put in);
- an answer wrapper's closing tag (Hunyuan's `<answer>` ... `</answer>`, tagsets.yaml `strip`).

The official SDKs run a four-turn tool loop through a real mitmdump (the template opens the
block: think_starts_inside=on; the model is a Hunyuan, whose profile strips `<answer>`), each
client sending its turns back as it received them; the strict upstreams (exact) refuse the
request unless every earlier assistant turn reads byte for byte as the model wrote it. (Turn 1
starts inside the block the template opened, so it goes back behind that opening tag, as every
such block does: the model's output follows it byte for byte.)"""

from __future__ import annotations

import json

import ollama
import pytest

from harness import StrictAnthropic, StrictChat, StrictResponses, Turn
from support.loops import ChatConversation, MessagesConversation, ResponsesConversation, assistant_texts, ollama_loop
from support.ollama import StrictOllama

pytestmark = pytest.mark.e2e

MODEL = "hunyuan-a13b"
WROTE = [
    "Plan the steps.<think>Check the README first.</think>\n\nLet me look.",
    "<think>\nList the files.\n</think>\n\nFound</think>them. Reading it.</think>\n",
    "<think>Run the tests.</think>\n<answer>\nRunning them.\n</answer>",
    "<think>done</think>\n<answer>All three steps are done.</answer>",
]
TURNS = [Turn(WROTE[0], ("bash", {"cmd": "ls"})), Turn(WROTE[1], ("bash", {"cmd": "cat README.md"})),
         Turn(WROTE[2], ("bash", {"cmd": "pytest"})), Turn(WROTE[3])]
BACK = ["<think>" + WROTE[0], WROTE[1], WROTE[2]]   # (turn 1 behind the template's opening tag)
# What the client read of each of them.
READ = [("Plan the steps.\nCheck the README first.", "Let me look."),
        ("List the files.", "Found\nthem. Reading it."),
        ("Run the tests.", "Running them.\n")]
OPTIONS = {"think_starts_inside": "on", "think_chat_restore": "inline"}


@pytest.fixture(scope="module")
def proxies(proxy_factory):
    return {sig: proxy_factory(options=dict(OPTIONS, think_signature=sig)) for sig in ("signed", "off")}


def back_behind_the_tag(strict) -> None:
    """After turn 1 went out: it comes back behind the template's opening tag."""
    if isinstance(strict, StrictOllama):
        strict.models[MODEL][0] = BACK[0]
    else:
        strict.turns[0] = Turn(BACK[0], TURNS[0].tool)


def test_chat_gives_back_each_dropped_markup_byte_for_byte(proxies, up):
    strict = StrictChat(list(TURNS), exact=True)
    up.route("/chat/completions", strict.handle)
    conv = ChatConversation(MODEL)
    conv.api_key = "chat markup"
    seen = [conv.turn(proxies["off"].url)]
    back_behind_the_tag(strict)
    seen += [conv.turn(proxies["off"].url) for _ in range(3)]
    assert strict.errors == [] and conv.done
    assert seen[:3] == READ
    sent = [m["content"] for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert sent == BACK


@pytest.mark.parametrize("sig", ["signed", "off"])
def test_messages_gives_back_each_dropped_markup_byte_for_byte(proxies, up, sig):
    """Signed: the thinking blocks carry marks (the block's text and markup), the answer's
    markup comes from the layout; off: both from the layout."""
    strict = StrictAnthropic(list(TURNS), exact=True)
    up.route("/messages", strict.handle)
    conv = MessagesConversation(None, model=MODEL)
    conv.api_key = f"messages markup {sig}"
    conv.turn(proxies[sig].url)
    back_behind_the_tag(strict)
    for _ in range(3):
        conv.turn(proxies[sig].url)
    assert strict.errors == [] and conv.done
    assert conv.final.content[-1].text == "All three steps are done."
    sent = [m["content"] for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
    assert [c[0] for c in sent] == [{"type": "text", "text": t} for t in BACK]


@pytest.mark.parametrize("include", [True, False], ids=["encrypted", "codex"])
def test_responses_gives_back_each_dropped_markup_byte_for_byte(proxies, up, include):
    strict = StrictResponses(list(TURNS), exact=True)
    up.route("/responses", strict.handle)
    conv = ResponsesConversation(include=include)
    conv.kw["model"] = MODEL
    conv.api_key = f"responses markup {include}"
    conv.turn(proxies["signed"].url)
    back_behind_the_tag(strict)
    for _ in range(3):
        conv.turn(proxies["signed"].url)
    assert strict.errors == [] and conv.done
    assert conv.final.output_text == "All three steps are done."
    assert [it["content"][0]["text"] for it in assistant_texts(strict.bodies[-1])] == BACK
    assert not any(it.get("type") == "reasoning" for it in json.loads(strict.bodies[-1])["input"])


@pytest.mark.parametrize("stream", [True, False])
def test_ollama_gives_back_each_dropped_markup_byte_for_byte(proxies, up, stream):
    strict = StrictOllama({MODEL: list(WROTE)}, exact=True)
    strict.template = "{{ .Prompt }}<think>"   # (the template opens the block, as the profile says)
    for path in ("/api/chat", "/api/show"):
        up.route(path, strict.handle)
    client = ollama.Client(host=proxies["off"].url, headers={"Authorization": f"Bearer ollama markup {stream}"})
    msgs: list = [{"role": "user", "content": "hi"}]
    read = ollama_loop(client, MODEL, msgs, stream, after_first=lambda: back_behind_the_tag(strict))
    assert strict.errors == []
    assert read[:3] == READ
    assert [m["content"] for m in strict.bodies[-1]["messages"] if m["role"] == "assistant"] == BACK
