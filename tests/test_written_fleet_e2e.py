"""The written layouts (thinkwire.written) on the memory's store: a proxy restarted with the file
store, and two replicas behind the shipped HAProxy configuration sharing a real redis-server,
restore turns another process split byte for byte, on chat, Messages, Responses and Ollama. The
official SDKs run the loop through real mitmdump processes; the strict upstreams (exact) refuse
any earlier assistant turn that does not read as the model wrote it. Redis down: the loop goes
on, each replica restoring what it split itself exactly and guessing the rest, as before.

The memory itself is off here (`think_memory=off`): the clients keep their reasoning, and what
comes back exact comes from the layouts alone."""

from __future__ import annotations

import json

import ollama
import pytest

from harness import Proxy, StrictAnthropic, StrictChat, StrictResponses, Upstream
from support.fleet import HAPROXY, MISSING as NO_HAPROXY, Balancer
from support.loops import ChatConversation, MessagesConversation, ResponsesConversation, assistant_texts
from support.ollama import StrictOllama
from support.redis import MISSING, REDIS, RedisServer, free_port
from test_written_e2e import INLINE, O_TURNS, TURNS, WROTE

pytestmark = pytest.mark.e2e

OPTIONS = {"think_memory": "off", "think_chat_restore": "inline", "think_signature": "off",
           "connection_strategy": "lazy"}
SURFACES = ["chat", "messages", "responses", "ollama"]


class OllamaConversation:
    """ollama-python's chat loop, streamed, sending `thinking` back as it read it."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.msgs: list = [{"role": "user", "content": "hi"}]
        self.done = False

    def turn(self, url: str) -> None:
        client = ollama.Client(host=url, headers={"Authorization": f"Bearer {self.key}"}, timeout=20)
        thinking = content = ""
        for part in client.chat(model=INLINE, messages=self.msgs, stream=True):
            thinking += part.message.thinking or ""
            content += part.message.content or ""
        self.msgs += [{"role": "assistant", "content": content, "thinking": thinking},
                      {"role": "user", "content": "go on"}]


def loop(surface: str, up: Upstream, key: str):
    """(the conversation, the strict upstream, what the last request's earlier turns must read)."""
    if surface == "ollama":
        strict = StrictOllama({INLINE: O_TURNS}, exact=True)
        for path in ("/api/chat", "/api/show"):
            up.route(path, strict.handle)
        return OllamaConversation(key), strict, O_TURNS[:2]
    conv = {"chat": ChatConversation, "messages": lambda: MessagesConversation(None),
            "responses": lambda: ResponsesConversation(include=False)}[surface]()
    conv.api_key = key
    strict = {"chat": StrictChat, "messages": StrictAnthropic, "responses": StrictResponses}[surface](TURNS, exact=True)
    up.route({"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}[surface], strict.handle)
    return conv, strict, WROTE


def sent_turns(surface: str, strict) -> list[str]:
    """The earlier assistant turns' texts in the last request the upstream got."""
    last = strict.bodies[-1]
    if surface == "ollama":
        return [m["content"] for m in last["messages"] if m["role"] == "assistant"]
    if surface == "responses":
        return [it["content"][0]["text"] for it in assistant_texts(last)]
    msgs = [m for m in json.loads(last)["messages"] if m["role"] == "assistant"]
    return [m["content"] if surface == "chat" else m["content"][0]["text"] for m in msgs]


def written_rows(db, rows: int) -> None:
    """Wait (a while at most) until the file holds `rows` layouts and guesses: a stream's are
    written as its last event goes out, on the store's thread, and a proxy stopped before
    that write ends loses it (a miss after the restart)."""
    import sqlite3
    import time
    deadline = time.monotonic() + 20
    while True:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                if c.execute("SELECT COUNT(*) FROM written").fetchone()[0] >= rows:
                    return
        except sqlite3.Error:
            pass
        assert time.monotonic() < deadline, f"the file never held {rows} layouts"
        time.sleep(0.05)


@pytest.fixture
def upstream():
    up = Upstream()
    yield up
    up.close()


# -- a restart, with the file store -------------------------------------------------------------
@pytest.mark.parametrize("surface", SURFACES)
def test_a_restarted_proxy_with_the_file_store_restores_the_turns_it_did_not_split(surface, upstream, tmp_path):
    options = dict(OPTIONS, think_memory_store=f"sqlite:{tmp_path / 'memory.db'}")
    port = free_port()
    p = Proxy(upstream.url, tmp_path / "conf", options, port=port)
    conv, strict, wrote = loop(surface, upstream, f"key of {surface}")
    try:
        conv.turn(p.url)
        conv.turn(p.url)
        written_rows(tmp_path / "memory.db", 3)   # turns 1 and 2, the guess
        p.stop()
        p = Proxy(upstream.url, tmp_path / "conf", options, port=port)   # an empty process, the same file
        conv.turn(p.url)
        assert strict.errors == []
        assert sent_turns(surface, strict) == wrote
    finally:
        p.stop()


def test_without_the_file_store_a_restarted_proxy_guesses(upstream, tmp_path):
    """The same restart with the default (in-process) store: turn 1 is not known to the new
    process; it goes with the markup of the last block the model wrote there (turn 2's)."""
    conv, _, _ = loop("chat", upstream, "key of the control")
    strict = StrictChat(TURNS)   # not exact: a guess
    upstream.route("/chat/completions", strict.handle)
    port = free_port()
    p = Proxy(upstream.url, tmp_path / "conf", OPTIONS, port=port)
    try:
        conv.turn(p.url)
        p.stop()
        p = Proxy(upstream.url, tmp_path / "conf", OPTIONS, port=port)
        conv.turn(p.url)
        conv.turn(p.url)
        assert strict.errors == []
        assert sent_turns("chat", strict) == ["<think>\tI should list the files. \n</think>Let me look.", WROTE[1]]
    finally:
        p.stop()


# -- a fleet, sharing Redis ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def fleet_upstream():
    up = Upstream()
    yield up
    up.close()


@pytest.fixture(scope="module")
def fleet(fleet_upstream, redis_server, tmp_path_factory):
    if HAPROXY is None:
        pytest.skip(NO_HAPROXY)
    tmp = tmp_path_factory.mktemp("written-fleet")
    ports = {"replica1": free_port(), "replica2": free_port()}
    options = dict(OPTIONS, think_memory_store=redis_server.url)
    replicas = {n: Proxy(fleet_upstream.url, tmp / n, options, port=port) for n, port in ports.items()}
    lb = None
    try:
        lb = Balancer(ports, free_port(), free_port())
        yield lb, replicas
    finally:
        if lb is not None:
            lb.stop()
        for p in replicas.values():
            p.stop()


@pytest.mark.parametrize("surface", SURFACES)
def test_two_replicas_sharing_redis_restore_each_others_turns_byte_for_byte(surface, fleet, fleet_upstream):
    """Round robin: turn 1 on one replica, turn 2 on the other (turn 1 from Redis), turn 3 on
    the first (turn 2 from Redis)."""
    lb, replicas = fleet
    fleet_upstream.reset()
    conv, strict, wrote = loop(surface, fleet_upstream, f"fleet key of {surface}")
    for _ in range(3):
        conv.turn(lb.url)
    assert strict.errors == []
    assert sent_turns(surface, strict) == wrote


def test_redis_holds_only_markup_and_numbers(fleet, redis_server):
    import redis
    r = redis.Redis.from_url(redis_server.url)
    keys = sorted(r.scan_iter("thinkwire:written:1:*"))
    assert keys and all(k.startswith((b"thinkwire:written:1:layout:", b"thinkwire:written:1:last:")) for k in keys)
    values = [r.get(k) for k in keys]
    # No text of any output, only the markup around it and the numbers placing it.
    for text in ["I should list the files", "Let me look", "Now read the README", "Reading", "and the tests"]:
        assert not any(text.encode() in v for v in values)
    layouts = {json.dumps(json.loads(v)) for k, v in zip(keys, values) if b":layout:" in k}
    assert layouts == {json.dumps(x) for x in [
        [[0, 24, "\n<think>\n  ", "\n\n</think>\n\n  ", 0]],                                    # TURNS
        [[5, 20, "<think>\t", " \n</think>", 1], [14, 13, "<think> ", " </think>\n\n", 0]],
        [[0, 4, "<think>", "</think>\n\n", 0]],
        [[0, 19, "\n<think>\n", "\n</think>\n\n", 0]],                                          # O_TURNS
        [[6, 26, "<think> ", "\t</think>", 0], [17, 8, "<think>\n", "\n</think>", 0]],
        [[0, 2, "<think>", "</think>", 0]]]}
    assert {json.dumps(json.loads(v)) for k, v in zip(keys, values) if b":last:" in k} == {
        '["<think>", "</think>\\n\\n"]', '["<think>", "</think>"]'}
    assert all(0 < r.ttl(k) <= 24 * 3600 for k in keys)


def test_redis_down_the_fleet_goes_on_each_replica_exact_for_what_it_split(upstream, tmp_path):
    """Redis stopped before the loop: no request fails or waits (a refused connection is a
    miss at once). One replica restores what it split itself byte for byte (the in-process
    store); a turn the other replica split goes with the guessed markup."""
    if REDIS is None:
        pytest.skip(MISSING)
    server = RedisServer()
    options = dict(OPTIONS, think_memory_store=server.url)
    a = Proxy(upstream.url, tmp_path / "a", options)
    b = Proxy(upstream.url, tmp_path / "b", options)
    server.stop()
    try:
        conv, _, _ = loop("chat", upstream, "key when redis is down")
        strict = StrictChat(TURNS)
        upstream.route("/chat/completions", strict.handle)
        conv.turn(a.url)
        after_one = list(conv.msgs)
        conv.turn(a.url)
        conv.turn(a.url)
        assert strict.errors == [] and conv.done
        assert sent_turns("chat", strict) == WROTE   # all split by this replica: exact
        other, _, _ = loop("chat", upstream, "key when redis is down")
        again = StrictChat(TURNS)   # not exact: b guesses
        again._n = 1                # (turn 2 again)
        upstream.route("/chat/completions", again.handle)
        other.msgs = after_one      # on the other replica
        other.turn(b.url)
        assert again.errors == []
        # (b saw nothing of this client's model: the profile's pair)
        assert sent_turns("chat", again) == ["<think>I should list the files.</think>Let me look."]
        assert a.alive() and b.alive()
    finally:
        a.stop()
        b.stop()


def test_dropped_markup_comes_back_exactly_after_a_restart_with_the_file_store(upstream, tmp_path):
    """The layouts of tests/test_written_markup_e2e.py (an opening tag written again, stray
    closing tags, an answer wrapper's close) from the file, in a process that split none of them."""
    from test_written_markup_e2e import BACK, MODEL, TURNS as MARKUP, back_behind_the_tag
    options = dict(OPTIONS, think_starts_inside="on", think_memory_store=f"sqlite:{tmp_path / 'memory.db'}")
    strict = StrictChat(list(MARKUP), exact=True)
    upstream.route("/chat/completions", strict.handle)
    conv = ChatConversation(MODEL)
    conv.api_key = "markup after a restart"
    port = free_port()
    p = Proxy(upstream.url, tmp_path / "conf", options, port=port)
    try:
        conv.turn(p.url)
        back_behind_the_tag(strict)
        conv.turn(p.url)
        conv.turn(p.url)
        written_rows(tmp_path / "memory.db", 4)   # turns 1 to 3, the guess
        p.stop()
        p = Proxy(upstream.url, tmp_path / "conf", options, port=port)
        conv.turn(p.url)
        assert strict.errors == [] and conv.done
        assert sent_turns("chat", strict) == BACK
    finally:
        p.stop()


def test_a_redis_that_hangs_costs_the_loop_no_failure(upstream, tmp_path):
    """A Redis host that accepts and never answers: the layouts' calls time out
    (think_memory_timeout) and the store is skipped a while; the loop runs, each turn this
    proxy split exact from its own store."""
    import socket
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)
    p = Proxy(upstream.url, tmp_path / "conf", dict(OPTIONS, think_memory_store=f"redis://127.0.0.1:{hung.getsockname()[1]}/0"))
    try:
        conv, strict, wrote = loop("messages", upstream, "key when redis hangs")
        for _ in range(3):
            conv.turn(p.url)
        assert strict.errors == [] and conv.done
        assert sent_turns("messages", strict) == wrote
        assert p.alive()
    finally:
        p.stop()
        hung.close()


def test_two_replicas_sharing_redis_restore_each_others_bodies(fleet, fleet_upstream):
    """Bodies (stream false): a body's layout is written before the client has it, so the
    next turn, on the other replica, finds it."""
    import openai
    from support.loops import TOOLS_C
    lb, _ = fleet
    fleet_upstream.reset()
    strict = StrictChat(TURNS, exact=True)
    fleet_upstream.route("/chat/completions", strict.handle)
    client = openai.OpenAI(base_url=lb.url + "/v1", api_key="fleet bodies", max_retries=0, timeout=20)
    msgs: list = [{"role": "user", "content": "fix the build"}]
    for _ in range(3):
        m = client.chat.completions.create(model="m", messages=msgs, tools=TOOLS_C).choices[0].message
        msgs.append(m.to_dict())
        msgs += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in m.tool_calls or []]
    assert strict.errors == [] and m.content == "All three steps are done."
    assert sent_turns("chat", strict) == WROTE
