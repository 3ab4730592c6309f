import functools
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "addon"))
sys.path.insert(0, str(ROOT))  # devtools/
sys.path.insert(0, str(Path(__file__).resolve().parent))

if os.environ.get("THINKWIRE_HOT_LIB"):   # a sanitized build of the C part (devtools/sanitize.py)
    from devtools import sanitize  # noqa: E402
    sanitize.load(os.environ["THINKWIRE_HOT_LIB"])

from harness import Proxy, Upstream  # noqa: E402
from thinkwire.context import FlowContext  # noqa: E402
from thinkwire.settings import Settings  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"   # real recorded responses; provenance in its SOURCES.md


@pytest.fixture(autouse=True)
def _no_think_env(monkeypatch):
    """Tests start from the defaults, whatever THINK_* the developer has exported."""
    for k in list(os.environ):
        if k.startswith("THINK_"):
            monkeypatch.delenv(k)


def make_settings(**values) -> Settings:
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("THINK_")))
    return _settings(tuple(sorted(values.items())), env)


@functools.lru_cache(maxsize=64)
def _settings(values, env) -> Settings:
    # Settings are immutable; loading tagsets.yaml once per combination keeps the suite fast.
    return Settings.from_values({k if k.startswith("think_") else f"think_{k}": v for k, v in values})


def make_ctx(request: dict | None = None, sealer=None, surface: str | None = None, learner=None,
             **values) -> FlowContext:
    from thinkwire import engine
    return engine.new_context(make_settings(**values), request, sealer, surface=surface, learner=learner,
                              upstream="http://upstream:8000" if learner is not None else None)


def corpus_files(prefix: str) -> list[Path]:
    files = sorted(p for p in CORPUS.iterdir() if p.name.startswith(prefix) and p.suffix in (".sse", ".json", ".jsonl", ".ndjson"))
    assert files, f"no {prefix}* samples in {CORPUS}"   # the corpus ships with the tests
    return files


def corpus_bytes(path: Path) -> bytes:
    """The sample as wire bytes: JSONL chunk dumps get their SSE `data:` framing back (NDJSON is the wire)."""
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        lines = [ln for ln in data.splitlines() if ln.strip()]
        data = b"".join(b"data: " + ln + b"\n\n" for ln in lines)
    return data


@pytest.fixture(scope="session")
def upstream():
    up = Upstream()
    yield up
    up.close()


@pytest.fixture
def up(upstream):
    upstream.reset()
    return upstream


@pytest.fixture(scope="session")
def proxy_factory(upstream, tmp_path_factory):
    started = []

    def start(options=None, env=None, extra_args=None, confdir=None, upstream_url=None):
        conf = confdir or tmp_path_factory.mktemp("confdir")
        p = Proxy(upstream_url or upstream.url, conf, options, env, extra_args)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


@pytest.fixture(scope="module")
def inline_proxies(proxy_factory):
    """One mitmdump per signature policy ("signed", "off"), chat's way back inline: the proxies
    the way-back files through mitmdump run their conversations on."""
    return {sig: proxy_factory(options={"think_signature": sig, "think_chat_restore": "inline"})
            for sig in ("signed", "off")}


@pytest.fixture(scope="session")
def proxy(proxy_factory):
    """mitmdump with thinkwire and default options, shared by tests that need nothing else."""
    return proxy_factory()


def pytest_sessionfinish(session, exitstatus):
    """THINKWIRE_WRITE_RESULTS=1: write the stored results the tests recorded (tests/support/stored.py)."""
    from support import stored
    stored.save_all()


@pytest.fixture(scope="module")
def redis_server():
    """A real redis-server for a module's tests (support.redis); they skip, saying so, without one."""
    from support.redis import MISSING, REDIS, RedisServer
    if REDIS is None:
        pytest.skip(MISSING)
    server = RedisServer()
    yield server
    server.stop()
