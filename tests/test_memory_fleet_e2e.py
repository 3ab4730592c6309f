"""The reasoning memory where one process is not enough: two replicas (real mitmdump processes)
behind the shipped HAProxy configuration sharing a real redis-server, turns alternating between
them; a replica restarted mid-loop with the file store; Redis stopped mid-loop. The client is
LangChain's ChatOpenAI, which sends no reasoning back."""

from __future__ import annotations

import json

import httpx
import pytest

from harness import Proxy, Upstream
from support.fleet import HAPROXY, MISSING as NO_HAPROXY, Balancer
from support.redis import free_port
from support.thinking import InterleavedTemplate, LangChainLoop, StrictThinking, deepseek_turns, inline_turns
from thinkwire.endpoints import METRICS

pytest.importorskip("langchain_openai", reason="langchain-openai is in the test extra")
pytestmark = pytest.mark.e2e

DEEPSEEK_REASONING = [t.native for t in deepseek_turns()[:3]]


def memory_counts(proxy: Proxy) -> dict:
    """The replica's thinkwire_memory_turns for chat, by outcome."""
    out = {}
    for line in httpx.get(proxy.url + METRICS, timeout=5).text.splitlines():
        if line.startswith('thinkwire_memory_turns_total{') and 'surface="chat"' in line:
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            out[outcome] = int(float(line.rsplit(" ", 1)[1]))
    return out


@pytest.fixture
def upstream():
    up = Upstream()
    yield up
    up.close()


def test_two_replicas_sharing_redis_each_put_back_what_the_other_remembered(upstream, redis_server, tmp_path):
    if HAPROXY is None:
        pytest.skip(NO_HAPROXY)
    strict = StrictThinking(deepseek_turns())
    upstream.route("/chat/completions", strict.handle)
    ports = {"replica1": free_port(), "replica2": free_port()}
    options = {"think_memory_store": redis_server.url, "connection_strategy": "lazy"}
    replicas = {name: Proxy(upstream.url, tmp_path / name, options, port=port) for name, port in ports.items()}
    lb = None
    try:
        lb = Balancer(ports, free_port(), free_port())
        loop = LangChainLoop("deepseek-v4-pro")
        assert loop.run(lb.url) == "All three steps are done."
        assert strict.errors == []
        sent = [m.get("reasoning_content") for m in json.loads(strict.bodies[-1])["messages"] if m["role"] == "assistant"]
        assert sent == DEEPSEEK_REASONING
        # Round robin: turns 1 and 3 on one replica, 2 and 4 on the other. The first remembers
        # turns 1 and 3 and puts back turns 1 and 2 (turn 3's request); the second remembers
        # turn 2 and puts back turn 1 (the first's) and then turns 1 to 3.
        counts = {n: memory_counts(p) for n, p in replicas.items()}
        assert sorted((c["remembered"], c["put_back"]) for c in counts.values()) == [(1, 4), (2, 2)]
        assert all(c["missed"] == 0 and c["unavailable"] == 0 for c in counts.values())
    finally:
        if lb is not None:
            lb.stop()
        for p in replicas.values():
            p.stop()


def test_a_replica_restarted_mid_loop_with_the_file_store_goes_on(upstream, tmp_path):
    strict = StrictThinking(deepseek_turns())
    upstream.route("/chat/completions", strict.handle)
    options = {"think_memory_store": f"sqlite:{tmp_path / 'memory.db'}"}
    port = free_port()
    p = Proxy(upstream.url, tmp_path / "conf", options, port=port)
    loop = LangChainLoop("deepseek-v4-pro", stream=True)
    try:
        loop.turn(p.url)
        loop.turn(p.url)
        p.stop()
        p = Proxy(upstream.url, tmp_path / "conf", options, port=port)   # a new process: an empty memory but the file
        loop.turn(p.url)
        loop.turn(p.url)
        assert loop.done and loop.msgs[-1].content == "All three steps are done."
        assert strict.errors == []
        assert memory_counts(p) == {"remembered": 1, "put_back": 5, "missed": 0, "unavailable": 0}
    finally:
        p.stop()


def test_redis_stopped_mid_loop_costs_the_memory_only(upstream, redis_server, tmp_path):
    """An upstream that does not refuse (an interleaved template): the loop goes on while Redis is
    down, its turns as the client sent them (misses), and the memory comes back with Redis."""
    tpl = InterleavedTemplate(inline_turns() * 2)
    upstream.route("/chat/completions", tpl.handle)
    p = Proxy(upstream.url, tmp_path / "conf", {"think_memory_store": redis_server.url, "think_memory_timeout": "1"})
    try:
        loop = LangChainLoop("qwen3-8b")
        loop.turn(p.url)
        loop.turn(p.url)
        redis_server.stop()
        loop.turn(p.url)
        assert [m["content"] for m in json.loads(tpl.bodies[-1])["messages"] if m["role"] == "assistant"] == \
            [None, "Reading it."]   # as LangChain sent them (null content): nothing put back
        redis_server.restart()
        ai = loop.turn(p.url)
        assert loop.done and ai.content == "All three steps are done."
        counts = memory_counts(p)
        assert counts["unavailable"] >= 2 and counts["put_back"] == 1
        # After the restart (an empty Redis) the fourth turn remembered nothing old; the next
        # loop on the same proxy is remembered and put back again.
        again = LangChainLoop("qwen3-8b", key="sk-two")
        again.turn(p.url)
        again.turn(p.url)
        assert [m["content"] for m in json.loads(tpl.bodies[-1])["messages"] if m["role"] == "assistant"] == \
            ["<think>\nI should list the files.\n</think>\n\n"]
    finally:
        p.stop()
