"""Client libraries through a real mitmdump with default settings, against strict upstreams.

The libraries people build agents on: the Vercel AI SDK (node), LiteLLM, Pydantic AI and the
OpenAI Agents SDK, at the versions pinned in pyproject.toml and tests/clients/js/package.json.
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

pytestmark = pytest.mark.e2e

JS = Path(__file__).resolve().parent / "clients" / "js"
ANSWER = [Turn("<think>\nThe user wants a fix.\n</think>\n\nHere is the fix.")]
LOOP = [Turn("<think>I should list the files.</think>Let me look.", ("bash", {"cmd": "ls"})),
        Turn("<think>The listing is fine.</think>All done.")]
SURFACES = {"chat/completions": "chat", "responses": "responses", "messages": "messages"}


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


STRICT = {"chat": StrictChat, "responses": StrictResponses, "messages": StrictAnthropic}


class Scripts:
    """The scripted upstreams, one per scenario, made on first use from the request's path:
    `/s/<scenario>/...`; a scenario whose name has "roundtrip" gets the tool loop."""

    def __init__(self) -> None:
        self.by_name: dict[str, object] = {}
        self.lock = threading.Lock()

    def handle(self, seen: Seen) -> Reply:
        m = re.match(r"/s/([^/]+)/(?:v1/)?(chat/completions|responses|messages)", seen.path)
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
        return [json.loads(b) for b in strict.bodies] if strict else []

    def errors(self, name: str) -> list[str]:
        strict = self.by_name.get(name)
        return strict.errors if strict else ["no request reached the upstream"]


@pytest.fixture(scope="module")
def scripts(upstream):
    s = Scripts()
    routes = [(suffix, s.handle) for suffix in ("/chat/completions", "/responses", "/messages")]
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
def js_install() -> Path:
    """tests/clients/js installed with `npm ci` into a cache outside the repo, once per lockfile;
    skips, saying why, when node or the npm registry is not there."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node is not installed (.ci/run installs Debian's nodejs and npm): apt-get install -y nodejs npm")
    import hashlib
    lock = (JS / "package-lock.json").read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thinkwire" / \
        f"js-{hashlib.sha256(lock).hexdigest()[:16]}"
    if not (cache / "node_modules" / ".thinkwire-ok").exists():
        cache.mkdir(parents=True, exist_ok=True)
        for f in ("package.json", "package-lock.json"):
            shutil.copy(JS / f, cache / f)
        p = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                           cwd=cache, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            pytest.skip(f"npm ci of tests/clients/js failed (no registry?): {p.stderr.strip()[-300:]}")
        (cache / "node_modules" / ".thinkwire-ok").touch()
    shutil.copy(JS / "run.mjs", cache / "run.mjs")
    return cache


VERCEL = ["chat:body", "chat:stream", "chat:roundtrip",
          "responses:body", "responses:stream", "responses:roundtrip", "responses:roundtrip-nostore",
          "messages:body", "messages:stream", "messages:roundtrip"]


@pytest.fixture(scope="module")
def vercel(base, scripts):
    """Every Vercel AI SDK scenario, run in one node process: {"surface:mode": result}."""
    cache = js_install()
    p = subprocess.run([shutil.which("node"), str(cache / "run.mjs"), f"{base}/s/vercel", *VERCEL],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return {r["scenario"]: r for r in map(json.loads, p.stdout.splitlines())}


def vercel_run(base: str, *scenarios: str, prefix: str = "vercel") -> dict:
    cache = js_install()
    p = subprocess.run([shutil.which("node"), str(cache / "run.mjs"), f"{base}/s/{prefix}", *scenarios],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, AI_SDK_LOG_WARNINGS="false"))
    assert p.returncode == 0, p.stderr[-2000:]
    return {r["scenario"]: r for r in map(json.loads, p.stdout.splitlines())}


@pytest.fixture(scope="module")
def vercel(base, scripts):
    """Every Vercel AI SDK scenario, run in one node process: {"surface:mode": result}."""
    return vercel_run(base, *VERCEL)


def reasoning_and_text(result: dict) -> list[tuple[list[str], str]]:
    assert result["ok"], result.get("error")
    return [(s["reasoning"], s["text"]) for s in result["steps"]]


@pytest.mark.parametrize("surface", ["chat", "responses", "messages"])
@pytest.mark.parametrize("mode", ["body", "stream"])
def test_vercel_ai_sdk_shows_the_reasoning(vercel, scripts, surface, mode):
    assert reasoning_and_text(vercel[f"{surface}:{mode}"]) == [(["The user wants a fix."], "Here is the fix.")]
    assert scripts.errors(f"vercel-{surface}-{mode}") == []


LOOP_SEEN = [(["I should list the files."], "Let me look."), (["The listing is fine."], "All done.")]


@pytest.mark.parametrize("scenario", ["chat:roundtrip", "responses:roundtrip", "responses:roundtrip-nostore",
                                      "messages:roundtrip"])
def test_vercel_ai_sdk_tool_loop_sends_the_reasoning_back(vercel, scripts, scenario):
    assert reasoning_and_text(vercel[scenario]) == LOOP_SEEN
    name = "vercel-" + scenario.replace(":", "-")
    assert scripts.errors(name) == []
    turn2 = scripts.sent(name)[1]
    if scenario.startswith("chat"):
        # Chat reasoning goes back as reasoning_content (think_chat_restore=keep), the answer as content.
        [a] = assistant_turns_as_sent(turn2)
        assert (a["content"], a["reasoning_content"]) == ("Let me look.", "I should list the files.")
    elif scenario == "responses:roundtrip":
        # store: true. The SDK referred to rs_1_0 (ours) and msg_1: one reference to the upstream's
        # stored message, which holds the reasoning as written (the upstream checked it).
        assert assistant_turns_as_sent(turn2) == [{"type": "item_reference", "id": "msg_1"}]
    else:
        assert text_of(assistant_turns_as_sent(turn2)[0]) == "<think>I should list the files.</think>Let me look."


def test_vercel_ai_sdk_references_our_reasoning_id_which_the_upstream_never_issued(proxy_factory, scripts):
    """The control for store: true: without the way back, the reference reaches the upstream."""
    p = proxy_factory(options={"think_restore": "keep"})
    got = vercel_run(p.url, "responses:roundtrip", prefix="vercel-keep")["responses:roundtrip"]
    assert not got["ok"] and "Item with id 'rs_1_0' not found" in got["error"]
    assert {"type": "item_reference", "id": "rs_1_0"} in scripts.sent("vercel-keep-responses-roundtrip")[1]["input"]
