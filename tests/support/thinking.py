"""Scripted chat upstreams that need the reasoning of earlier turns back (thinkwire.memory):

- `StrictThinking`: DeepSeek's thinking mode. It answers with native `reasoning_content` and
  tool calls, and refuses (400, DeepSeek's error) a request whose assistant turn with
  `tool_calls` lacks its `reasoning_content`, or carries one it did not give for those calls.
- `InterleavedTemplate`: a server without a reasoning parser (llama-server's default for many
  templates) whose model writes `<think>...</think>` inline, and whose chat template renders the
  reasoning of the assistant turns after the last user message, as Qwen3's does (MiniMax-M2,
  GLM-4.5 and Kimi K2 thinking alike). It records each rendered assistant turn, so a test reads
  what reached the model.
Both answer streamed or whole, as the request asks, from a script of harness.Turn.
"""

from __future__ import annotations

import json

from harness import Reply, Seen, StrictChat, Turn, json_reply, sse, sse_reply

DEEPSEEK_400 = "The `reasoning_content` in the thinking mode must be passed back to the API."


def _reply(n: int, text: str, call: dict | None, stream: bool, reasoning: str | None = None) -> Reply:
    finish = "tool_calls" if call else "stop"
    if not stream:
        msg: dict = {"role": "assistant", "content": text}
        if reasoning is not None:
            msg["reasoning_content"] = reasoning
        if call:
            msg["tool_calls"] = [call]
        return json_reply({"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1, "model": "m",
                           "choices": [{"index": 0, "message": msg, "finish_reason": finish}]})

    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        return {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    evs = [chunk({"role": "assistant", "content": None if reasoning is not None else ""})]
    if reasoning is not None:
        evs += [chunk({"reasoning_content": reasoning[k:k + 7]}) for k in range(0, len(reasoning), 7)]
    evs += [chunk({"content": text[k:k + 5]}) for k in range(0, len(text), 5)]   # tags split across chunks
    if call:
        evs.append(chunk({"tool_calls": [dict(call, index=0)]}))
    evs.append(chunk({}, finish))
    return sse_reply(sse(*evs, "[DONE]"))


def _call(turn: Turn, n: int, prefix: str) -> dict | None:
    if not turn.tool:
        return None
    return {"id": f"{prefix}{n}", "type": "function",
            "function": {"name": turn.tool[0], "arguments": json.dumps(turn.tool[1])}}


class StrictThinking:
    def __init__(self, turns: list[Turn], call_prefix: str = "call_") -> None:
        self.turns, self.prefix = turns, call_prefix
        self.issued: dict[str, str] = {}   # tool call id -> the reasoning given with it
        self.errors: list[str] = []
        self.bodies: list[bytes] = []
        self._n = 0

    _error = StrictChat._error   # (an OpenAI-style 400, recorded in self.errors)

    def handle(self, seen: Seen) -> Reply:
        self.bodies.append(seen.body)
        req = seen.json()
        for m in req.get("messages", []):
            if m.get("role") != "assistant" or not m.get("tool_calls"):
                continue
            ids = [c["id"] for c in m["tool_calls"]]
            if "reasoning_content" not in m:
                return self._error(DEEPSEEK_400)
            if any(self.issued.get(i) != m["reasoning_content"] for i in ids):
                return self._error(f"reasoning_content of {ids} is not what the model wrote")
        if self._n >= len(self.turns):
            return self._error("the script has no more turns")
        turn = self.turns[self._n]
        self._n += 1
        call = _call(turn, self._n, self.prefix)
        if call:
            self.issued[call["id"]] = turn.native or ""
        return _reply(self._n, turn.text, call, bool(req.get("stream")), reasoning=turn.native or "")


def qwen3_assistant(m: dict, after_last_user: bool, last: bool) -> str:
    """An assistant message as Qwen3's chat template renders it (its reasoning part)."""
    content = m.get("content") or ""
    reasoning = m.get("reasoning_content")
    if reasoning is None:
        reasoning = ""
        if "</think>" in content:
            reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
            content = content.split("</think>")[-1].lstrip("\n")
    if after_last_user and (last or reasoning):
        return "<think>\n" + reasoning.strip("\n") + "\n</think>\n\n" + content.lstrip("\n")
    return content


class InterleavedTemplate:
    def __init__(self, turns: list[Turn]) -> None:
        self.turns = turns
        self.rendered: list[list[str]] = []   # per request: its assistant turns, as the template rendered them
        self.bodies: list[bytes] = []
        self._n = 0

    def handle(self, seen: Seen) -> Reply:
        self.bodies.append(seen.body)
        req = seen.json()
        msgs = req.get("messages", [])
        last_user = max((i for i, m in enumerate(msgs) if m.get("role") == "user"), default=-1)
        self.rendered.append([qwen3_assistant(m, i > last_user, i == len(msgs) - 1)
                              for i, m in enumerate(msgs) if m.get("role") == "assistant"])
        turn = self.turns[min(self._n, len(self.turns) - 1)]
        self._n += 1
        return _reply(self._n, turn.text, _call(turn, self._n, "call_"), bool(req.get("stream")))


# Scripts: each turn's reasoning is distinct, so one put back into the wrong turn would not read as
# the model wrote it.
def deepseek_turns() -> list[Turn]:
    """Native reasoning (DeepSeek's API), a tool call per turn, then the answer."""
    return [Turn("", ("bash", {"cmd": "ls"}), native="I should list the files first.\n\nThen read them."),
            Turn("Reading it.", ("bash", {"cmd": "cat README.md"}), native="Now the README: ünïcode ✓"),
            Turn("", ("bash", {"cmd": "pytest"}), native="  Run the tests; spaces kept.  "),
            Turn("All three steps are done.", native="done")]


def inline_turns() -> list[Turn]:
    """Reasoning written inline, as a server without a reasoning parser passes it."""
    return [Turn("<think>\nI should list the files.\n</think>\n\n", ("bash", {"cmd": "ls"})),
            Turn("<think>\nNow read the README.\n</think>\n\nReading it.", ("bash", {"cmd": "cat README.md"})),
            Turn("<think>One more check: ünïcode ✓</think>", ("bash", {"cmd": "pytest"})),
            Turn("<think>\ndone\n</think>\n\nAll three steps are done.")]


class LangChainLoop:
    """LangChain's tool loop as its docs write it, one turn at a time (each to the URL given for
    it): invoke (or stream and add up the chunks), append the AI message (ChatOpenAI keeps no
    `reasoning_content` in it, and sends none back), answer each tool call with "ok"."""

    def __init__(self, model: str, stream: bool = False, key: str = "sk-one") -> None:
        from langchain_core.messages import HumanMessage
        self.model, self.stream, self.key = model, stream, key
        self.msgs: list = [HumanMessage("fix the build")]
        self.done = False

    def turn(self, url: str):
        from langchain_core.messages import ToolMessage
        from langchain_core.tools import tool
        from langchain_openai import ChatOpenAI

        @tool
        def bash(cmd: str) -> str:
            """Run a shell command."""
            return "ok"
        llm = ChatOpenAI(base_url=url + "/v1", api_key=self.key, model=self.model, max_retries=0,
                         timeout=20).bind_tools([bash])
        if self.stream:
            ai = None
            for chunk in llm.stream(self.msgs):
                ai = chunk if ai is None else ai + chunk
        else:
            ai = llm.invoke(self.msgs)
        self.msgs.append(ai)
        self.done = not ai.tool_calls
        self.msgs += [ToolMessage("ok", tool_call_id=c["id"]) for c in ai.tool_calls]
        return ai

    def run(self, url: str, most: int = 8) -> str:
        for _ in range(most):
            ai = self.turn(url)
            if self.done:
                return ai.content
        raise AssertionError("the loop did not end")
