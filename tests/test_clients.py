"""Client libraries through a real mitmdump with default settings, against strict upstreams.

The libraries people build agents on: the Vercel AI SDK (node), LiteLLM, Pydantic AI and the
OpenAI Agents SDK, and Ollama's own clients (`ollama` for Python, ollama-js) on its native API,
at the versions pinned in pyproject.toml and tests/clients/js/package.json.
For every surface each one speaks: a body, a stream, and a two-turn tool loop in which the
library builds turn 2 from its own turn-1 result. Each test reads what the library itself
exposes (its reasoning parts) and what reached the upstream.

The upstreams are strict (tests/harness.py): they refuse reasoning objects they did not issue,
item references to ids they never stored, and assistant turns that no longer read as the model
wrote them. Each scenario gets its own scripted upstream, named by the path prefix
`/s/<scenario>/`, behind one shared proxy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from harness import Reply, Seen, StrictAnthropic, StrictResponses, Turn, json_reply, sse, sse_reply
from support.ollama import StrictOllama

pytestmark = [pytest.mark.e2e,
              # LiteLLM's own models warn about fields of valid responses; not ours to fix.
              pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

JS = Path(__file__).resolve().parent / "clients" / "js"
ANSWER = [Turn("<think>\nThe user wants a fix.\n</think>\n\nHere is the fix.")]
LOOP = [Turn("<think>I should list the files.</think>Let me look.", ("bash", {"cmd": "ls"})),
        Turn("<think>The listing is fine.</think>All done.")]
SURFACES = {"chat/completions": "chat", "responses": "responses", "messages": "messages",
            "api/chat": "ollama", "api/show": "ollama"}


class StrictChat:
    """A chat completions upstream: replies with the scripted turns, records what it gets."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = turns
        self.bodies: list[bytes] = []
        self.errors: list[str] = []

    def handle(self, seen: Seen) -> Reply:
        self.bodies.append(seen.body)
        req = seen.json()
        n = len(self.bodies)
        if n > len(self.turns):
            self.errors.append("the script has no more turns")
            return json_reply({"error": {"message": "the script has no more turns"}}, 400)
        turn = self.turns[n - 1]
        msg: dict = {"role": "assistant", "content": turn.text}
        calls = []
        if turn.tool:
            calls = [{"index": 0, "id": f"call_{n}", "type": "function",
                      "function": {"name": turn.tool[0], "arguments": json.dumps(turn.tool[1])}}]
        finish = "tool_calls" if calls else "stop"
        head = {"id": f"chatcmpl-{n}", "created": 1, "model": "qwen3"}
        if not req.get("stream"):
            if calls:
                msg["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
            return json_reply(dict(head, object="chat.completion", choices=[
                {"index": 0, "message": msg, "finish_reason": finish}],
                usage={"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}))
        chunk = dict(head, object="chat.completion.chunk")
        evs = [dict(chunk, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
        evs += [dict(chunk, choices=[{"index": 0, "delta": {"content": turn.text[k:k + 5]}, "finish_reason": None}])
                for k in range(0, len(turn.text), 5)]
        if calls:
            evs.append(dict(chunk, choices=[{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}]))
        evs.append(dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": finish}],
                        usage={"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}))
        return sse_reply(sse(*evs, "[DONE]"))


STRICT = {"chat": StrictChat, "responses": StrictResponses, "messages": StrictAnthropic,
          # Ollama with a model whose template does not read thinking: it writes <think> inline.
          "ollama": lambda turns: StrictOllama({"qwen3": [t.text for t in turns]})}


class Scripts:
    """The scripted upstreams, one per scenario, made on first use from the request's path:
    `/s/<scenario>/...`; a scenario whose name has "roundtrip" gets the tool loop."""

    def __init__(self) -> None:
        self.by_name: dict[str, object] = {}
        self.lock = threading.Lock()

    def handle(self, seen: Seen) -> Reply:
        m = re.match(r"/s/([^/]+)/(?:v1/)?(chat/completions|responses|messages|api/chat|api/show)", seen.path)
        if not m:
            return json_reply({"error": {"message": f"unscripted path {seen.path}"}}, 404)
        name, surface = m.group(1), SURFACES[m.group(2)]
        with self.lock:
            if name not in self.by_name:
                self.by_name[name] = STRICT[surface](LOOP if "roundtrip" in name else ANSWER)
            strict = self.by_name[name]
        return strict.handle(seen)

    def sent(self, name: str) -> list[dict]:
        """The request bodies the upstream of `name` received, parsed."""
        strict = self.by_name.get(name)
        return [b if isinstance(b, dict) else json.loads(b) for b in strict.bodies] if strict else []

    def errors(self, name: str) -> list[str]:
        strict = self.by_name.get(name)
        return strict.errors if strict else ["no request reached the upstream"]


@pytest.fixture(scope="module")
def scripts(upstream):
    s = Scripts()
    routes = [(suffix, s.handle) for suffix in ("/chat/completions", "/responses", "/messages", "/api/chat", "/api/show")]
    upstream.routes[:0] = routes
    yield s
    for r in routes:
        upstream.routes.remove(r)


@pytest.fixture(scope="module")
def base(proxy, scripts):
    """The shared default-options proxy; a library's scenarios live under base + "/s/<name>"."""
    return proxy.url


# -- what reached the upstream ----------------------------------------------------------------
def assistant_turns_as_sent(body: dict) -> list:
    """The assistant turns of a request (messages or input items), as the upstream received them."""
    if "messages" in body:
        return [m for m in body["messages"] if m.get("role") == "assistant"]
    return [it for it in body.get("input", []) if isinstance(it, dict) and
            (it.get("role") == "assistant" or it.get("type") in ("reasoning", "item_reference"))]


def text_of(turn) -> str:
    c = turn.get("content") if isinstance(turn, dict) else None
    if isinstance(c, str):
        return c
    return "".join(b.get("text", "") for b in c or [] if isinstance(b, dict))


# == the Vercel AI SDK (node) =================================================================
def js_install(runner: str = "run.mjs") -> Path:
    """tests/clients/js installed with `npm ci` into a cache outside the repo, once per lockfile,
    and a copy of `runner` beside it; skips, saying why, when node or the npm registry is not there."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node is not installed (.ci/run installs Debian's nodejs and npm): apt-get install -y nodejs npm")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < 20:
        # The packages ask for node 22; 20 is the oldest measured to work (Debian 12 ships 18).
        pytest.skip(f"node {version} is older than 20, which the Vercel AI SDK tests need")
    import fcntl
    import hashlib
    lock = (JS / "package-lock.json").read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thinkwire" / \
        f"js-{hashlib.sha256(lock).hexdigest()[:16]}"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)   # test runs of other checkouts share the cache
        if not (cache / "node_modules" / ".thinkwire-ok").exists():
            for f in ("package.json", "package-lock.json"):
                shutil.copy(JS / f, cache / f)
            p = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                               cwd=cache, capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                pytest.skip(f"npm ci of tests/clients/js failed (no registry?): {p.stderr.strip()[-300:]}")
            (cache / "node_modules" / ".thinkwire-ok").touch()
        script = cache / f"{runner[:-4]}-{os.getpid()}.mjs"   # beside node_modules, so its imports resolve
        shutil.copy(JS / runner, script)
    return script


VERCEL = ["chat:body", "chat:stream", "chat:roundtrip", "openai-chat:body",
          "responses:body", "responses:stream", "responses:roundtrip", "responses:roundtrip-nostore",
          "messages:body", "messages:stream", "messages:roundtrip"]


def vercel_run(base: str, *scenarios: str, prefix: str = "vercel") -> dict:
    script = js_install()
    try:
        p = subprocess.run([shutil.which("node"), str(script), f"{base}/s/{prefix}", *scenarios],
                           capture_output=True, text=True, timeout=120, env=dict(os.environ, AI_SDK_LOG_WARNINGS="false"))
    finally:
        script.unlink()
    assert p.returncode == 0, p.stderr[-2000:]
    return {r["scenario"]: r for r in map(json.loads, p.stdout.splitlines())}


@pytest.fixture(scope="module")
def vercel(base, scripts):
    """Every Vercel AI SDK scenario, run in one node process: {"surface:mode": result}."""
    return vercel_run(base, *VERCEL)


def reasoning_and_text(result: dict) -> list[tuple[list[str], str]]:
    assert result["ok"], result.get("error")
    return [(s["reasoning"], s["text"]) for s in result["steps"]]


LOOP_SEEN = [(["I should list the files."], "Let me look."), (["The listing is fine."], "All done.")]


def test_vercel_ai_sdk_references_our_reasoning_id_which_the_upstream_never_issued(proxy_factory, scripts):
    """The control for store: true: without the way back, the reference reaches the upstream."""
    p = proxy_factory(options={"think_restore": "keep"})
    got = vercel_run(p.url, "responses:roundtrip", prefix="vercel-keep")["responses:roundtrip"]
    assert not got["ok"] and "Item with id 'rs_1_0' not found" in got["error"]
    assert {"type": "item_reference", "id": "rs_1_0"} in scripts.sent("vercel-keep-responses-roundtrip")[1]["input"]


# == the Python libraries (in this process: each is imported once, when its tests run) =========
PY = ["chat:body", "chat:stream", "chat:roundtrip", "responses:body", "responses:stream", "responses:roundtrip",
      "messages:body", "messages:stream", "messages:roundtrip"]


def run_all(scenarios: list[str], one) -> dict:
    """{"surface:mode": {"ok", "steps": [{"reasoning": [...], "text": ...}] or "error"}}: the
    shape the node driver prints, so the same tests read every library."""
    out = {}
    for sc in scenarios:
        surface, mode = sc.split(":")
        try:
            out[sc] = {"ok": True, "steps": [{"reasoning": r, "text": t} for r, t in one(surface, mode)]}
        except Exception as e:  # what the library raised is what the test reports
            out[sc] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
    return out


def bash(cmd: str) -> str:
    """Run a shell command."""
    return "ok"


TOOL_CHAT = [{"type": "function", "function": {"name": "bash", "description": "run", "parameters": {
    "type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}]
TOOL_RESPONSES = [dict(TOOL_CHAT[0]["function"], type="function")]


@pytest.fixture(scope="module")
def litellm_results(base, scripts):
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")   # no cost map fetch at import
    litellm = pytest.importorskip("litellm")
    # The docs/clients.md recipe: a model missing from LiteLLM's cost map gets a faked Responses stream
    # (one non-streamed call) unless it is registered with native streaming.
    litellm.register_model({"qwen3": {"litellm_provider": "openai", "supports_native_streaming": True}})

    def completion(surface, name, msgs, stream, tools=None):
        # completion() speaks chat (openai/) and Messages (anthropic/), with one result shape.
        base_url = f"{base}/s/{name}/v1" if surface == "chat" else f"{base}/s/{name}"
        r = litellm.completion(model=("openai/" if surface == "chat" else "anthropic/") + "qwen3",
                               api_base=base_url, api_key="x", messages=msgs, stream=stream,
                               max_tokens=1024, tools=tools)
        if stream:
            r = litellm.stream_chunk_builder(list(r), messages=msgs)
        m = r.choices[0].message
        if surface == "messages":
            reasoning = [b["thinking"] for b in m.thinking_blocks or []]
            assert m.reasoning_content == "".join(reasoning)
        else:
            reasoning = [m.reasoning_content] if m.reasoning_content else []
        return m, (reasoning, m.content or "")

    def responses(name, inp, stream, tools=None):
        r = litellm.responses(model="openai/qwen3", api_base=f"{base}/s/{name}/v1", api_key="x",
                              input=inp, stream=stream, tools=tools)
        if stream:
            r = [ev.response for ev in r if getattr(ev, "type", "") == "response.completed"][-1]
        items = [o.model_dump(exclude_none=True) for o in r.output]
        reasoning = [p["text"] for o in items if o["type"] == "reasoning" for p in o["summary"]]
        # By default the text is in the summary only (think_responses_content=off).
        assert not [o["content"] for o in items if o["type"] == "reasoning" and o.get("content")]
        text = "".join(p["text"] for o in items if o["type"] == "message" for p in o["content"])
        return items, (reasoning, text)

    def one(surface, mode):
        name = f"litellm-{surface}-{mode}"
        if surface == "responses":
            inp = [{"role": "user", "content": "fix the build"}]
            if mode != "roundtrip":
                return [responses(name, inp, mode == "stream")[1]]
            items, seen1 = responses(name, inp, True, TOOL_RESPONSES)
            inp += items + [{"type": "function_call_output", "call_id": o["call_id"], "output": "ok"}
                            for o in items if o["type"] == "function_call"]
            return [seen1, responses(name, inp, True, TOOL_RESPONSES)[1]]
        msgs = [{"role": "user", "content": "fix the build"}]
        if mode != "roundtrip":
            return [completion(surface, name, msgs, mode == "stream")[1]]
        m, seen1 = completion(surface, name, msgs, True, TOOL_CHAT)
        msgs += [m] + [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in m.tool_calls]
        return [seen1, completion(surface, name, msgs, True, TOOL_CHAT)[1]]

    return run_all(PY, one)


@pytest.fixture(scope="module")
def pydantic_ai_results(base, scripts):
    pytest.importorskip("pydantic_ai")
    import asyncio
    from pydantic_ai import Agent
    from pydantic_ai.direct import model_request_stream_sync, model_request_sync
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ThinkingPart
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.providers.openai import OpenAIProvider

    def model(surface, name):
        url = f"{base}/s/{name}"
        if surface == "messages":
            return AnthropicModel("qwen3", provider=AnthropicProvider(base_url=url, api_key="x"))
        cls = OpenAIChatModel if surface == "chat" else OpenAIResponsesModel
        return cls("qwen3", provider=OpenAIProvider(base_url=url + "/v1", api_key="x"))

    def seen(r: ModelResponse):
        return ([p.content for p in r.parts if isinstance(p, ThinkingPart)],
                "".join(p.content for p in r.parts if isinstance(p, TextPart)))

    async def loop(m):
        # The agent runs the tool loop itself, streaming, and builds turn 2 from turn 1.
        async with Agent(m, tools=[bash]).run_stream_events("fix the build") as events:
            async for ev in events:
                last = ev
        return [seen(r) for r in last.result.all_messages() if isinstance(r, ModelResponse)]

    def one(surface, mode):
        m = model(surface, f"pydantic_ai-{surface}-{mode}")
        ask = [ModelRequest.user_text_prompt("fix the build")]
        if mode == "body":
            return [seen(model_request_sync(m, ask))]
        if mode == "stream":
            with model_request_stream_sync(m, ask) as s:
                for _ in s:
                    pass
                return [seen(s.response)]
        return asyncio.run(loop(m))

    return run_all(PY, one)


@pytest.fixture(scope="module")
def openai_agents_results(base, scripts):
    pytest.importorskip("agents")
    import asyncio
    from openai import AsyncOpenAI
    from agents import (Agent, ItemHelpers, MessageOutputItem, OpenAIChatCompletionsModel, OpenAIResponsesModel,
                        ReasoningItem, Runner, function_tool, set_tracing_disabled)
    set_tracing_disabled(True)
    tool = function_tool(bash)

    def steps(items):
        """Per model turn: the reasoning (ReasoningItem summary, as the SDK gives chat reasoning)
        and the answer."""
        out: list = []
        for it in items:
            if isinstance(it, ReasoningItem):
                raw = it.raw_item
                summary = [x.text for x in raw.summary]
                if raw.content:   # Responses: the SDK hands over content too, the same text
                    assert [x.text for x in raw.content] == summary
                out.append((summary, ""))
            elif isinstance(it, MessageOutputItem):
                out[-1] = (out[-1][0], ItemHelpers.text_message_output(it))
        return out

    async def run(surface, mode):
        client = AsyncOpenAI(base_url=f"{base}/s/openai_agents-{surface}-{mode}/v1", api_key="x", max_retries=0)
        cls = OpenAIChatCompletionsModel if surface == "chat" else OpenAIResponsesModel
        agent = Agent(name="a", model=cls("qwen3", client), tools=[tool] if mode == "roundtrip" else [])
        if mode == "body":
            return steps((await Runner.run(agent, "fix the build")).new_items)
        r = Runner.run_streamed(agent, "fix the build")
        async for _ in r.stream_events():
            pass
        return steps(r.new_items)

    # The Agents SDK speaks chat and Responses only.
    return run_all([s for s in PY if not s.startswith("messages")], lambda s, m: asyncio.run(run(s, m)))


LIBRARIES = {"vercel": "vercel", "litellm": "litellm_results", "pydantic_ai": "pydantic_ai_results",
             "openai_agents": "openai_agents_results"}
CASES = [(lib, f"{surface}:{mode}") for lib in LIBRARIES for surface in ("chat", "responses", "messages")
         for mode in ("body", "stream") if not (lib == "openai_agents" and surface == "messages")]
LOOPS = [(lib, f"{surface}:roundtrip") for lib in LIBRARIES for surface in ("chat", "responses", "messages")
         if not (lib == "openai_agents" and surface == "messages")] + [("vercel", "responses:roundtrip-nostore")]


@pytest.mark.parametrize("lib,scenario", CASES)
def test_library_shows_the_reasoning(request, scripts, lib, scenario):
    got = request.getfixturevalue(LIBRARIES[lib])[scenario]
    assert reasoning_and_text(got) == [(["The user wants a fix."], "Here is the fix.")]
    assert scripts.errors(f"{lib}-{scenario.replace(':', '-')}") == []


# Chat reasoning carries no mark: it goes back as the library sends it (think_chat_restore=keep).
# The OpenAI Agents SDK replays chat reasoning only for model names with "deepseek": what it
# drops, the reasoning memory (on for qwen3, docs/memory.md) puts back as the model wrote it.
CHAT_BACK = {"vercel": ("Let me look.", "I should list the files."),
             "litellm": ("Let me look.", "I should list the files."),
             "pydantic_ai": ("Let me look.", "I should list the files."),
             "openai_agents": ("<think>I should list the files.</think>Let me look.", None)}


@pytest.mark.parametrize("lib,scenario", LOOPS)
def test_library_tool_loop_sends_the_reasoning_back_as_the_model_wrote_it(request, scripts, lib, scenario):
    got = request.getfixturevalue(LIBRARIES[lib])[scenario]
    assert reasoning_and_text(got) == LOOP_SEEN
    name = f"{lib}-{scenario.replace(':', '-')}"
    assert scripts.errors(name) == []   # the strict upstream accepted turn 2
    turn2 = assistant_turns_as_sent(scripts.sent(name)[1])
    if scenario.startswith("chat"):
        [a] = turn2
        assert (a["content"], a.get("reasoning_content")) == CHAT_BACK[lib]
    elif (lib, scenario) == ("pydantic_ai", "responses:roundtrip"):
        # Pydantic AI sends a reasoning item back only with its raw content, which thinkwire does
        # not send by default (think_responses_content=off): it writes the reasoning out as its
        # own assistant text instead, which the upstream reads, though not byte for byte.
        assert [text_of(t) for t in turn2] == ["<think>\nI should list the files.\n</think>", "Let me look."]
    elif turn2[0].get("type") == "item_reference":
        # store: true (the Vercel AI SDK): the SDK referred to rs_1_0 (ours) and msg_1; one
        # reference to the upstream's stored message, which holds the reasoning as written.
        assert turn2 == [{"type": "item_reference", "id": "msg_1"}]
    else:
        assert text_of(turn2[0]) == "<think>I should list the files.</think>Let me look."


# -- what the recipes warn about -------------------------------------------------------------
def test_vercel_ai_sdk_openai_chat_provider_never_reads_chat_reasoning(vercel, scripts):
    """Why the recipe says @ai-sdk/openai-compatible: @ai-sdk/openai's .chat() drops it."""
    assert reasoning_and_text(vercel["openai-chat:body"]) == [([], "Here is the fix.")]


def test_litellm_fakes_responses_streams_for_a_model_missing_from_its_cost_map(litellm_results, base, scripts):
    """Why the recipe registers the model: unregistered, stream=True goes out as one
    non-streamed call; registered with native streaming (the other tests), it streams."""
    import litellm
    events = list(litellm.responses(model="openai/qwen3-unmapped", api_base=f"{base}/s/litellm-unmapped/v1",
                                    api_key="x", input="fix the build", stream=True))
    assert events and not scripts.sent("litellm-unmapped")[0].get("stream")
    assert scripts.sent("litellm-responses-stream")[0]["stream"] is True


# == Ollama's own clients, on its native API ===================================================
OLLAMA = ["body", "stream", "roundtrip"]


@pytest.fixture(scope="module")
def ollama_js(base, scripts):
    script = js_install("ollama.mjs")
    try:
        p = subprocess.run([shutil.which("node"), str(script), f"{base}/s/ollama_js", *OLLAMA],
                           capture_output=True, text=True, timeout=120)
    finally:
        script.unlink()
    assert p.returncode == 0, p.stderr[-2000:]
    return {r["scenario"]: r for r in map(json.loads, p.stdout.splitlines())}


@pytest.fixture(scope="module")
def ollama_py(base, scripts):
    ollama = pytest.importorskip("ollama")
    ask = [{"role": "user", "content": "fix the build"}]

    def streamed(client, messages):
        # What the Ollama docs show: thinking and content accumulated chunk by chunk.
        thinking = content = ""
        for chunk in client.chat(model="qwen3", messages=messages, think=True, stream=True):
            thinking += chunk.message.thinking or ""
            content += chunk.message.content or ""
        return ollama.Message(role="assistant", content=content, thinking=thinking or None)

    def step(m):
        return [m.thinking] if m.thinking else [], m.content

    def one(_surface, mode):
        client = ollama.Client(host=f"{base}/s/ollama_py-{mode}")
        if mode == "body":
            return [step(client.chat(model="qwen3", messages=ask, think=True).message)]
        first = streamed(client, ask)
        if mode == "stream":
            return [step(first)]
        return [step(first), step(streamed(client, ask + [first, {"role": "user", "content": "go on"}]))]

    got = run_all([f"ollama:{m}" for m in OLLAMA], one)
    return {k.split(":")[1]: v for k, v in got.items()}


@pytest.mark.parametrize("lib", ["ollama_py", "ollama_js"])
@pytest.mark.parametrize("mode", ["body", "stream"])
def test_ollama_client_shows_the_thinking_apart(request, scripts, lib, mode):
    got = request.getfixturevalue(lib)[mode]
    assert reasoning_and_text(got) == [(["The user wants a fix."], "Here is the fix.")]
    assert scripts.errors(f"{lib}-{mode}") == []
    assert scripts.sent(f"{lib}-{mode}")[-1].get("think") is None   # no 400: the model has no native thinking


@pytest.mark.parametrize("lib", ["ollama_py", "ollama_js"])
def test_ollama_client_loop_sends_the_thinking_back_and_the_upstream_reads_it_inline(request, scripts, lib):
    got = request.getfixturevalue(lib)["roundtrip"]
    assert reasoning_and_text(got) == LOOP_SEEN
    assert scripts.errors(f"{lib}-roundtrip") == []
    [a] = assistant_turns_as_sent(scripts.sent(f"{lib}-roundtrip")[1])
    assert a == {"role": "assistant", "content": "<think>I should list the files.</think>Let me look."}
