"""Client applications through a real mitmdump with default settings, against strict upstreams:
opencode (its OpenAI-compatible provider), aider, and llm (a chat model and a Responses model).
Each runs non-interactively, two turns (the second continues the first), and the test reads
what the application prints: the reasoning once, apart from a clean answer.

They install into their own environments outside the repository (tests/support/apps.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading

import pytest

from devtools.process import child_env
from harness import Seen, Turn, json_reply
from support import apps
from test_clients import STRICT, SURFACES

pytestmark = pytest.mark.e2e

TURNS = [Turn("<think>\nThe user wants a fix.\n</think>\n\nHere is the fix."),
         Turn("<think>They ask again.</think>Still the fix.")]
SEEN = [("The user wants a fix.", "Here is the fix."), ("They ask again.", "Still the fix.")]
RUN_SECONDS = 180


class TwoTurns:
    """A strict upstream per scenario (`/s/<scenario>/...`), each scripted with TURNS."""

    def __init__(self) -> None:
        self.by_name: dict[str, object] = {}
        self.lock = threading.Lock()

    def handle(self, seen: Seen):
        m = re.match(r"/s/([^/]+)/(?:v1/)?(chat/completions|responses)", seen.path)
        if not m:
            return json_reply({"error": {"message": f"unscripted path {seen.path}"}}, 404)
        with self.lock:
            strict = self.by_name.setdefault(m.group(1), STRICT[SURFACES[m.group(2)]](TURNS))
        return strict.handle(seen)

    def errors(self, name: str) -> list[str]:
        strict = self.by_name.get(name)
        return strict.errors if strict else ["no request reached the upstream"]

    def requests(self, name: str) -> int:
        strict = self.by_name.get(name)
        return len(strict.bodies) if strict else 0


@pytest.fixture(scope="module")
def two_turns(upstream):
    s = TwoTurns()
    routes = [(suffix, s.handle) for suffix in ("/chat/completions", "/responses")]
    upstream.routes[:0] = routes
    yield s
    for r in routes:
        upstream.routes.remove(r)


def run(argv: list, cwd, env: dict[str, str]) -> tuple[str, str]:
    p = subprocess.run([str(a) for a in argv], cwd=cwd, env=child_env(env), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=RUN_SECONDS)
    assert p.returncode == 0, f"{argv[0]} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return p.stdout, p.stderr


# -- llm ------------------------------------------------------------------------------------
def _llm(proxy, tmp_path, name: str, responses: bool) -> list[tuple[str, str]]:
    llm = apps.python_app(apps.LLM, "llm")
    (tmp_path / "extra-openai-models.yaml").write_text(json.dumps([{   # (YAML reads JSON)
        "model_id": "tw", "model_name": "qwen3", "api_base": f"{proxy.url}/s/{name}/v1", "responses": responses}]))
    env = {"LLM_USER_PATH": str(tmp_path), "OPENAI_API_KEY": "x"}
    return [run([llm, "-m", "tw", "fix the build"], tmp_path, env), run([llm, "-c", "again"], tmp_path, env)]


def test_llm_responses_model_shows_the_reasoning_once_apart_from_the_answer(proxy, two_turns, tmp_path):
    """llm prints reasoning on stderr and the answer on stdout; it renders summary and content
    both, so with both sent (think_responses_content=on) every piece came twice."""
    got = _llm(proxy, tmp_path, "llm-responses", responses=True)
    assert got == [(f"{answer}\n", f"{reasoning}\n") for reasoning, answer in SEEN]
    assert two_turns.errors("llm-responses") == [] and two_turns.requests("llm-responses") == 2


def test_llm_chat_model_gets_a_clean_answer(proxy, two_turns, tmp_path):
    """llm 0.36's chat models never read reasoning_content: the answer is clean, the reasoning
    is not shown (its Responses models show it)."""
    got = _llm(proxy, tmp_path, "llm-chat", responses=False)
    assert got == [(f"{answer}\n", "") for _, answer in SEEN]
    assert two_turns.errors("llm-chat") == [] and two_turns.requests("llm-chat") == 2


# -- aider ----------------------------------------------------------------------------------
def _aider_sections(out: str) -> tuple[str, str]:
    m = re.search(r"► \*\*THINKING\*\*\n(.*?)\n-+\n► \*\*ANSWER\*\*\n(.*?)\nTokens:", out, re.S)
    assert m, out
    return m.group(1).strip(), m.group(2).strip()


def test_aider_shows_the_reasoning_once_apart_from_the_answer(proxy, two_turns, tmp_path):
    aider = apps.python_app(apps.AIDER, "aider")
    (tmp_path / "home").mkdir()
    env = {"HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    common = ["--yes-always", "--no-git", "--model", "openai/qwen3", "--openai-api-base",
              f"{proxy.url}/s/aider-chat/v1", "--openai-api-key", "x", "--no-check-update",
              "--no-show-model-warnings", "--analytics-disable", "--no-pretty", "--no-fancy-input"]
    first, _ = run([aider, "--message", "fix the build", *common], tmp_path, env)
    second, _ = run([aider, "--message", "again", "--restore-chat-history", *common], tmp_path, env)
    assert [_aider_sections(first), _aider_sections(second)] == SEEN
    assert first.count("The user wants a fix.") == 1 and "<think>" not in first + second
    assert two_turns.errors("aider-chat") == [] and two_turns.requests("aider-chat") == 2


# -- opencode -------------------------------------------------------------------------------
def test_opencode_shows_the_reasoning_once_apart_from_the_answer(proxy, two_turns, tmp_path):
    opencode = apps.npm_app(apps.OPENCODE, "opencode")
    (tmp_path / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"tw": {"npm": "@ai-sdk/openai-compatible", "name": "thinkwire",
                            "options": {"baseURL": f"{proxy.url}/s/opencode-chat/v1", "apiKey": "x"},
                            "models": {"qwen3": {"name": "qwen3"}}}},
        "model": "tw/qwen3"}))
    home = apps.cache() / "opencode-home"   # its provider package (@ai-sdk/openai-compatible), fetched once
    home.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "OPENCODE_CONFIG": str(tmp_path / "opencode.json"),
           # offline: no update check, models.dev list, language servers or default plugins
           **{f"OPENCODE_DISABLE_{f}": "1" for f in ("AUTOUPDATE", "MODELS_FETCH", "LSP_DOWNLOAD", "DEFAULT_PLUGINS")}}
    # --title: no extra request for a session title; --thinking: print the reasoning.
    first, _ = run([opencode, "run", "fix the build", "-m", "tw/qwen3", "--title", "t", "--thinking"], tmp_path, env)
    second, _ = run([opencode, "run", "-c", "again", "-m", "tw/qwen3", "--thinking"], tmp_path, env)
    assert [first, second] == [f"Thinking: {reasoning}\n{answer}\n" for reasoning, answer in SEEN]
    assert two_turns.errors("opencode-chat") == [] and two_turns.requests("opencode-chat") == 2
