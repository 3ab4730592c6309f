"""Tool loops the way agents run them, one turn at a time, through a proxy at any URL: Claude
Code's over Messages, Codex's over Responses, a chat client that keeps `reasoning_content`.
Each turn goes to the URL given for it (so turns can land on different proxies), streams, and
sends the assistant turn back as the client received it. Pair with the strict upstreams of
tests/harness.py, which refuse reasoning objects they did not issue."""

from __future__ import annotations

import json

import anthropic
import openai

from harness import Turn

TOOLS_M = [{"name": "bash", "description": "run", "input_schema": {"type": "object",
                                                                   "properties": {"cmd": {"type": "string"}}}}]
TOOLS_R = [{"type": "function", "name": "exec_command", "description": "run",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
TOOLS_C = [{"type": "function", "function": {"name": "bash", "description": "run",
                                              "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]


def loop_turns(native_first=False):
    """Three tool iterations, then an answer; reasoning in <think> markup every time."""
    return [
        Turn("<think>\nI should list the files.\n</think>\n\nLet me look.", ("bash", {"cmd": "ls"}),
             native="genuine upstream thought" if native_first else None),
        Turn("<think>Now read the README.</think>", ("bash", {"cmd": "cat README.md"})),
        Turn("<think>One more check: ünïcode ✓</think>Checking tests.", ("bash", {"cmd": "pytest"})),
        Turn("<think>done</think>\n\nAll three steps are done."),
    ]


def codex_echo(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in ("id", "status")}


class MessagesConversation:
    """Claude Code's loop: stream each turn, send the assistant turn back (as received, or as
    the SDK's objects) plus a tool result for each tool_use."""
    api_key = "x"   # the client's credential (what the proxy keeps things per)

    def __init__(self, display: str | None = "omitted", as_received: bool = True, model: str = "m",
                 drop: bool = False) -> None:
        """`drop`: send turns back without their thinking blocks (as clients that rebuild
        turns from text and tool calls do)."""
        self.msgs: list = [{"role": "user", "content": "fix the build"}]
        self.kw: dict = dict(model=model, max_tokens=4096, tools=TOOLS_M)
        self.drop = drop
        if display:
            self.kw["thinking"] = {"type": "adaptive", "display": display}
        self.as_received = as_received
        self.final = None
        self.done = False

    def turn(self, url: str):
        client = anthropic.Anthropic(base_url=url, api_key=self.api_key, max_retries=0, timeout=20)
        with client.messages.stream(messages=self.msgs, **self.kw) as s:
            final = self.final = s.get_final_message()
        content = final.to_dict()["content"] if self.as_received else final.content
        if self.drop:
            content = [b for b in content if (b["type"] if isinstance(b, dict) else b.type)
                       not in ("thinking", "redacted_thinking")]
        self.msgs.append({"role": "assistant", "content": content})
        if final.stop_reason != "tool_use":
            self.done = True
            return final
        self.msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": "ok"} for b in final.content if b.type == "tool_use"]})
        return final


class ResponsesConversation:
    """Codex's loop: stream each turn (store false, summaries, encrypted content), echo the output
    into `input` (without ids, as Codex does, unless `ids`), answer each function call."""
    api_key = "x"

    def __init__(self, ids: bool = False, include: bool = True, drop: bool = False) -> None:
        """`drop`: echo the output without its reasoning items (as clients with `store: false`
        that drop the reasoning of a model they do not know to reason)."""
        self.drop = drop
        self.items: list = [{"type": "message", "role": "developer", "content": "be brief"},
                            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the build"}]}]
        self.kw: dict = dict(model="qwen3", tools=TOOLS_R, store=False, reasoning={"summary": "auto"}, stream=True)
        if include:
            self.kw["include"] = ["reasoning.encrypted_content"]
        self.ids = ids
        self.final = None
        self.done = False

    def turn(self, url: str):
        client = openai.OpenAI(base_url=url + "/v1", api_key=self.api_key, max_retries=0, timeout=20)
        events = list(client.responses.create(input=self.items, **self.kw))
        assert events[-1].type == "response.completed"
        final = self.final = events[-1].response
        calls = []
        for it in final.output:
            d = it.to_dict()
            if self.drop and d["type"] == "reasoning":
                continue
            self.items.append(d if self.ids else codex_echo(d))
            if d["type"] == "function_call":
                calls.append(d["call_id"])
        if not calls:
            self.done = True
        self.items += [{"type": "function_call_output", "call_id": c, "output": "ok"} for c in calls]
        return final


class ChatConversation:
    """A chat client that keeps `reasoning_content` on the assistant turns it sends back (as
    DeepSeek's docs show, and many UIs do); the proxy puts it back inline under
    think_chat_restore=inline. Each turn returns (reasoning, content) as the client read them."""
    api_key = "x"

    def __init__(self, model: str = "m") -> None:
        self.msgs: list = [{"role": "user", "content": "fix the build"}]
        self.model = model
        self.done = False

    def turn(self, url: str) -> tuple[str, str]:
        client = openai.OpenAI(base_url=url + "/v1", api_key=self.api_key, max_retries=0, timeout=20)
        reasoning, content, calls = read_chat_stream(
            client.chat.completions.create(model=self.model, messages=self.msgs, tools=TOOLS_C, stream=True))
        msg: dict = {"role": "assistant", "content": content, "reasoning_content": reasoning}
        if calls:
            msg["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]
        self.msgs.append(msg)
        self.msgs += [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
        self.done = not calls
        return reasoning, content


def read_chat_stream(chunks) -> tuple[str, str, list[dict]]:
    """A chat stream read with the official openai client as an agent reads it: (reasoning,
    content, tool calls as {id, name, arguments}, each joined from its deltas by index)."""
    reasoning, content, calls = "", "", {}
    for ch in chunks:
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        reasoning += getattr(d, "reasoning_content", None) or ""
        content += d.content or ""
        for tc in d.tool_calls or []:
            c = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            c["id"] += tc.id or ""
            c["name"] += (tc.function.name or "") if tc.function else ""
            c["arguments"] += (tc.function.arguments or "") if tc.function else ""
    return reasoning, content, list(calls.values())


def ollama_turn(client, model: str, msgs: list, stream: bool) -> tuple[str, str]:
    """One /api/chat turn with the official ollama client, read as a user's app reads it:
    (thinking, content), from the stream's parts or the body's message."""
    if not stream:
        m = client.chat(model=model, messages=msgs).message
        return m.thinking or "", m.content
    thinking = content = ""
    for part in client.chat(model=model, messages=msgs, stream=True):
        thinking += part.message.thinking or ""
        content += part.message.content or ""
    return thinking, content


def ollama_loop(client, model: str, msgs: list, stream: bool, turns: int = 4,
                after_first=None) -> list[tuple[str, str]]:
    """`turns` turns of `ollama_turn` on `msgs`, each answer sent back as the client got it
    (content and thinking) with a user's "go on"; `after_first()` runs after the first turn.
    What each turn read, (thinking, content)."""
    read = []
    for i in range(turns):
        thinking, content = ollama_turn(client, model, msgs, stream)
        read.append((thinking, content))
        msgs += [{"role": "assistant", "content": content, "thinking": thinking}, {"role": "user", "content": "go on"}]
        if i == 0 and after_first is not None:
            after_first()
    return read


def pick(proxies: list, i: int):
    """The proxy for turn i: proxies[min(i, last)]; a callable entry starts (or restarts) one
    lazily, when its turn comes, and is replaced by what it returns."""
    k = min(i, len(proxies) - 1)
    if callable(proxies[k]):
        proxies[k] = proxies[k]()
    return proxies[k]


def messages_loop(proxies, display="omitted", as_received=True, turns=4):
    """The loop over proxies[min(i, len(proxies) - 1)] for turn i (so a second proxy can take
    over): (the final message, the messages sent)."""
    conv = MessagesConversation(display, as_received)
    for i in range(turns):
        conv.turn(pick(proxies, i).url)
        if conv.done:
            break
    return conv.final, conv.msgs


def responses_loop(proxies, ids=False, include=True, turns=4):
    """As messages_loop, over Responses: (the final response, the input items sent)."""
    conv = ResponsesConversation(ids, include)
    for i in range(turns):
        conv.turn(pick(proxies, i).url)
        if conv.done:
            break
    return conv.final, conv.items


def assistant_texts(body: bytes) -> list:
    """The assistant messages of a Responses request body."""
    return [it for it in json.loads(body)["input"] if it.get("role") == "assistant"]
