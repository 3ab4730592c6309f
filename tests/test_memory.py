"""The reasoning memory's parts: when it is on, its keys, its stores and their bounds (entries,
bytes, lifetime, time), and the coordinator the addon calls (thinkwire.memory)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest

from conftest import make_settings
from thinkwire import memory
from thinkwire.memory import Memory, policy, stores
from thinkwire.memory.entry import INLINE, NATIVE, Entry, key
from thinkwire.memory.sides import LOOKUPS_MAX


def run(coro):
    return asyncio.run(coro)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- when ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,host,want", [
    ("deepseek-v4-pro", None, "deepseek"), ("deepseek-reasoner", None, "deepseek"),
    ("kimi-k2-thinking", None, "kimi-k2-thinking"), ("moonshotai/Kimi-K2-Thinking", None, "kimi-k2-thinking"),
    ("MiniMax-M2", None, "minimax-m2"), ("zai-org/GLM-4.6", None, "glm"), ("glm-4.5-air", None, "glm"),
    ("openai/gpt-oss-120b", None, "gpt-oss"), ("Qwen3-30B-A3B", None, "qwen3"), ("mimo-v2-flash", None, "mimo"),
    ("whatever", "api.deepseek.com", "deepseek"), ("gpt-4o", None, None), ("llama-3.1-8b", "localhost", None),
    ("glm-4-9b", None, None), (None, None, None), (["not", "a", "name"], None, None),
])
def test_auto_turns_the_memory_on_for_the_families_that_need_it(model, host, want):
    got = policy.decide("auto", model, host)
    assert (got.name if got else None) == want


def test_on_forces_it_for_every_model_and_off_for_none():
    assert policy.decide("on", "gpt-4o", None) == policy.FORCED
    assert policy.decide("off", "deepseek-v4-pro", "api.deepseek.com") is None


def test_every_turn_is_remembered_for_the_families_that_read_it():
    assert [policy.decide("auto", m, None).every_turn for m in ("MiniMax-M2", "kimi-k2-thinking", "deepseek-chat")] \
        == [True, True, False]


# -- keys and entries ---------------------------------------------------------------------------
def test_keys_are_scoped_to_the_client_and_never_hold_the_text():
    a, b = key(b"alice", "chat", ("call_1",)), key(b"bob", "chat", ("call_1",))
    assert a != b and a.startswith("thinkwire:mem:1:") and len(a) == len("thinkwire:mem:1:") + 40
    assert key(b"alice", "chat", ("call_1",)) == a
    assert key(b"alice", "ollama", ("call_1",)) != a
    assert key(b"alice", "chat", answer="secret plan") != key(b"alice", "chat", answer="secret plan!")
    assert "secret" not in key(b"alice", "chat", answer="secret plan")
    assert key(b"alice", "chat") is None and key(b"alice", "chat", answer="") is None


def test_an_entry_comes_back_as_it_went_and_garbage_is_none():
    e = Entry(INLINE, "<think>\n\ud800 x\n</think>\n\nhi", answer="hi")
    assert Entry.decode(e.encode()) == e
    assert Entry.decode(Entry(NATIVE, "r", field="reasoning").encode()) == Entry(NATIVE, "r", "", "reasoning")
    for junk in (b"", b"{}", b'["other","a","b","c"]', b'["inline",1,"b","c"]', b"\xff"):
        assert Entry.decode(junk) is None


# -- the in-proxy store -------------------------------------------------------------------------
def test_local_store_holds_its_entry_and_byte_bounds_under_a_flood():
    s = stores.LocalStore(entries=100, max_bytes=10_000, ttl=60)
    for n in range(5000):
        s.set(f"k{n}", b"x" * (n % 300))
    assert len(s) <= 100 and s.bytes <= 10_000
    assert s.bytes == sum(len(v) for _, v in s._items.values())
    assert s.get("k4999") == b"x" * (4999 % 300) and s.get("k0") is None   # the newest stay, the oldest went


def test_local_store_forgets_after_its_lifetime():
    clock = Clock()
    s = stores.LocalStore(entries=10, max_bytes=1000, ttl=60, clock=clock)
    s.set("a", b"1")
    clock.now += 59
    assert s.get("a") == b"1"
    clock.now += 1
    assert s.get("a") is None and len(s) == 0 and s.bytes == 0


def test_local_store_refuses_an_entry_larger_than_its_bytes():
    s = stores.LocalStore(entries=10, max_bytes=10, ttl=60)
    s.set("a", b"x" * 11)
    assert len(s) == 0


# -- the file store -----------------------------------------------------------------------------
def test_file_store_bounds_hold_under_a_flood_and_it_survives_a_restart(tmp_path):
    path = str(tmp_path / "mem.db")

    async def flood():
        s = stores.SqliteStore(path, entries=50, max_bytes=5000, ttl=60, timeout=5)
        for n in range(500):
            await s.put(f"k{n}", b"y" * (n % 200))
        got = await s.get_many(["k499", "k0"])
        count, total = s.count, s.bytes
        await s.close()
        return got, count, total
    got, count, total = run(flood())
    assert got == [b"y" * (499 % 200), None] and count <= 50 and total <= 5000

    async def again():
        s = stores.SqliteStore(path, entries=50, max_bytes=5000, ttl=60, timeout=5)
        got = await s.get_many(["k499"])
        rows = await s._call(lambda: s._open().execute("SELECT COUNT(*), SUM(size) FROM memory").fetchone())
        await s.close()
        return got, rows, (s.count, s.bytes)
    got, rows, counted = run(again())
    assert got == [b"y" * (499 % 200)] and rows == counted   # the counts read back match the rows


def test_file_store_forgets_after_its_lifetime(tmp_path):
    clock = Clock()

    async def go():
        s = stores.SqliteStore(str(tmp_path / "m.db"), 10, 1000, ttl=60, timeout=5, clock=clock)
        await s.put("a", b"1")
        clock.now += 61
        got = await s.get_many(["a"])
        await s.close()
        return got
    assert run(go()) == [None]


def test_a_file_store_that_is_stuck_is_a_miss_never_a_wait_past_its_queue(tmp_path):
    """Its thread held (a disk that hangs): calls past PENDING_MAX are refused at once, and a
    waiting call gives up at its timeout (the flow goes on as a miss)."""
    gate = threading.Event()

    async def go():
        s = stores.SqliteStore(str(tmp_path / "m.db"), 10, 1000, ttl=60, timeout=0.05)
        s._pool.submit(gate.wait)
        outcomes = await asyncio.gather(*[s.get_many(["a"]) for _ in range(stores.PENDING_MAX + 5)],
                                        return_exceptions=True)
        gate.set()
        await s.close()
        return outcomes
    outcomes = run(go())
    assert all(isinstance(o, stores.Unavailable) for o in outcomes)
    assert sum("queue is full" in str(o) for o in outcomes) == 5


# -- Redis --------------------------------------------------------------------------------------
def test_redis_store_keeps_entries_with_a_lifetime_and_is_a_miss_when_down(redis_server):
    async def go():
        s = stores.RedisStore(redis_server.url, ttl=3600, timeout=1)
        await s.put("thinkwire:mem:1:t", b"value")
        got = await s.get_many(["thinkwire:mem:1:t", "thinkwire:mem:1:none"])
        ttl = await s._redis.ttl("thinkwire:mem:1:t")
        await s.close()
        return got, ttl
    got, ttl = run(go())
    assert got == [b"value", None] and 3590 <= ttl <= 3600

    async def refused():
        s = stores.RedisStore("redis://127.0.0.1:1/0", ttl=60, timeout=1)
        got = await asyncio.gather(s.get_many(["a"]), s.get_many(["a"]), return_exceptions=True)
        await s.close()
        return got
    assert ["ConnectionError" in str(o) for o in run(refused())] == [True, True]   # each tried: it fails at once


def test_a_redis_that_hangs_is_skipped_after_one_timeout():
    """A server that accepts and never answers (a stuck host): one call waits its timeout, the
    next ones are misses at once, without a call."""
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)

    async def go():
        s = stores.RedisStore(f"redis://127.0.0.1:{hung.getsockname()[1]}/0", ttl=60, timeout=0.2)
        first = await asyncio.gather(s.get_many(["a"]), return_exceptions=True)
        calls = []
        real = s._redis.mget
        s._redis.mget = lambda *a: calls.append(a) or real(*a)   # counted: skipped while it is down
        second = await asyncio.gather(s.get_many(["a"]), s.put("a", b"v"), return_exceptions=True)
        await s.close()
        return first, second, calls
    try:
        first, second, calls = run(go())
    finally:
        hung.close()
    assert isinstance(first[0], stores.Unavailable) and "Timeout" in str(first[0])
    assert [str(o) for o in second] == ["down a moment ago"] * 2 and calls == []


def test_a_restarted_redis_is_used_again_at_once(redis_server):
    async def go():
        s = stores.RedisStore(redis_server.url, ttl=60, timeout=1)
        await s.put("thinkwire:mem:1:r", b"1")
        redis_server.restart()   # the pooled connection is dead now
        await s.put("thinkwire:mem:1:r", b"2")
        got = await s.get_many(["thinkwire:mem:1:r"])
        await s.close()
        return got
    assert run(go()) == [b"2"]


# -- the coordinator --------------------------------------------------------------------------------
class Flow:
    def __init__(self, fid: str, status: int = 200) -> None:
        self.id, self.metadata, self.comment = fid, {}, ""
        self.response = type("R", (), {"status_code": status})()


def tool_turn(call_id: str, reasoning: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "", "reasoning_content": reasoning,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]}).encode()


def request_back(*call_ids: str) -> dict:
    msgs: list = [{"role": "user", "content": "go"}]
    for c in call_ids:
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": c, "content": "ok"}]
    return {"model": "deepseek-v4-pro", "messages": msgs}


def memory_with(**values) -> Memory:
    m = Memory()
    m.configure(make_settings(**values))
    return m


def remember(m: Memory, fid: str, body: bytes, scope: bytes = b"s") -> None:
    m.start(fid, "chat", {"model": "deepseek-v4-pro", "messages": []}, scope, None)
    m.saw_body(fid, body, None)
    co = m.settle(Flow(fid))
    if co is not None:
        run(co)


def test_a_flood_of_tool_turns_keeps_the_entry_and_byte_bounds():
    m = memory_with(memory_entries="200", memory_bytes="20k")
    for n in range(3000):
        remember(m, f"f{n}", tool_turn(f"call_{n}", "r" * (n % 100)))
    assert len(m.store) == 200 or m.store.bytes <= 20 * 1024
    assert len(m.store) <= 200 and m.store.bytes <= 20 * 1024
    req = request_back("call_2999", "call_0")
    assert run(m.start("q", "chat", req, b"s", None)) == 1
    assert req["messages"][1]["reasoning_content"] == "r" * (2999 % 100) and "reasoning_content" not in req["messages"][3]


def test_a_turn_larger_than_an_entry_may_be_is_not_remembered():
    m = memory_with(memory_bytes="64m")
    remember(m, "f", tool_turn("call_big", "r" * (memory.ENTRY_MAX + 1)))
    assert len(m.store) == 0


def test_a_request_with_many_turns_is_looked_up_once_for_the_newest_only():
    m = memory_with()
    asked = []

    async def get_many(keys):
        asked.append(len(keys))
        return [None] * len(keys)
    m.store.get_many = get_many
    req = request_back(*[f"call_{n}" for n in range(1000)])
    assert run(m.start("q", "chat", req, b"s", None)) == 0
    assert asked == [LOOKUPS_MAX]


def test_a_store_that_is_down_is_a_miss_and_the_request_is_unchanged():
    m = memory_with(memory_store="redis://127.0.0.1:1/0", memory_timeout="1")
    req = request_back("call_1")
    before = json.dumps(req)
    assert run(m.start("q", "chat", req, b"s", None)) == 0
    assert json.dumps(req) == before


def test_nothing_is_looked_up_or_kept_for_a_model_the_memory_is_off_for():
    m = memory_with()
    req = dict(request_back("call_1"), model="gpt-4o")
    assert m.start("q", "chat", req, b"s", None) is None and not m.serves("q")
    remember(m, "f", tool_turn("call_1", "r"))   # (deepseek: kept)
    assert m.start("q", "chat", req, b"s", None) is None


def test_an_error_response_is_not_remembered():
    m = memory_with()
    m.start("f", "chat", {"model": "deepseek-v4-pro"}, b"s", None)
    m.saw_body("f", tool_turn("call_1", "r"), None)
    assert m.settle(Flow("f", status=500)) is None and len(m.store) == 0


def test_a_turn_the_client_kept_its_reasoning_for_is_left_alone():
    m = memory_with()
    remember(m, "f", tool_turn("call_1", "r"))
    req = request_back("call_1")
    req["messages"][1]["reasoning_content"] = "the client's own"
    assert m.start("q", "chat", req, b"s", None) is None
    assert req["messages"][1]["reasoning_content"] == "the client's own"


def test_inline_reasoning_goes_back_only_while_the_answer_is_the_one_the_client_got():
    m = memory_with()
    up = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "<think>\nr\n</think>\n\nhi",
                                                          "tool_calls": [{"id": "c1", "type": "function"}]}}]}).encode()
    client = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi", "reasoning_content": "r",
                                                              "tool_calls": [{"id": "c1", "type": "function"}]}}]}).encode()
    m.start("f", "chat", {"model": "qwen3"}, b"s", None)
    m.saw_body("f", up, client)
    run(m.settle(Flow("f")))
    same = {"model": "qwen3", "messages": [{"role": "assistant", "content": "hi", "tool_calls": [{"id": "c1"}]}]}
    edited = {"model": "qwen3", "messages": [{"role": "assistant", "content": "hi!", "tool_calls": [{"id": "c1"}]}]}
    assert run(m.start("a", "chat", same, b"s", None)) == 1 and same["messages"][0]["content"] == "<think>\nr\n</think>\n\nhi"
    assert run(m.start("b", "chat", edited, b"s", None)) == 0 and edited["messages"][0]["content"] == "hi!"


def chat_stream(*deltas: dict) -> bytes:
    return b"".join(b"data: " + json.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": d, "finish_reason": None}]}).encode() + b"\n\n" for d in deltas) + b"data: [DONE]\n\n"


def test_a_streamed_answer_without_tool_calls_is_not_read_for_a_family_that_keeps_only_tool_turns(monkeypatch):
    m = memory_with()
    read = []
    monkeypatch.setattr(m, "_entries", lambda p, real=m._entries: read.append(1) or real(p))
    from thinkwire.memory import sides
    monkeypatch.setattr(sides.ChatSide, "read_stream", staticmethod(lambda objs: read.append("parsed") or {}))
    m.start("f", "chat", {"model": "deepseek-v4-pro"}, b"s", None)
    body = chat_stream({"reasoning_content": "r"}, {"content": "just an answer"})
    stream = m.tap(Flow("f"), lambda chunk: [chunk] if chunk else [], None)
    stream(body)
    assert read == [1] and len(m.store) == 0   # looked at once, never parsed


def test_a_compressed_stream_is_remembered_from_its_decoded_bytes():
    import gzip
    m = memory_with()
    m.start("f", "chat", {"model": "deepseek-v4-pro"}, b"s", None)
    body = chat_stream({"reasoning_content": "thought"}, {"tool_calls": [{"index": 0, "id": "call_z", "type": "function",
                                                                          "function": {"name": "f", "arguments": "{}"}}]})
    packed = gzip.compress(body)
    # The rewrite's callable decodes (the client gets plain bytes); the tap keeps both.
    stream = m.tap(Flow("f"), lambda chunk: [gzip.decompress(chunk)] if chunk else [], "gzip")
    stream(packed)
    req = request_back("call_z")
    assert run(m.start("q", "chat", req, b"s", None)) == 1 and req["messages"][1]["reasoning_content"] == "thought"


def responses_tool_turn(reasoning: str) -> bytes:
    return json.dumps({"id": "resp_1", "object": "response", "status": "completed", "output": [
        {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": reasoning}]},
        {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}",
         "status": "completed"}]}).encode()


def responses_back(*before_call: dict) -> dict:
    return {"model": "deepseek-v4-pro", "input": [
        {"role": "user", "content": "go"}, *before_call,
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]}


def remember_responses(m: Memory, reasoning: str) -> None:
    m.start("f", "responses", {"model": "deepseek-v4-pro", "input": []}, b"s", None)
    m.saw_body("f", responses_tool_turn(reasoning), None)
    co = m.settle(Flow("f"))
    if co is not None:
        run(co)


def test_a_responses_turn_that_dropped_its_reasoning_item_gets_it_back():
    m = memory_with()
    remember_responses(m, "Plan the call.")
    req = responses_back()
    assert run(m.start("q", "responses", req, b"s", None)) == 1
    assert [it.get("type") for it in req["input"][1:3]] == ["reasoning", "function_call"]
    assert req["input"][1]["summary"] == [{"type": "summary_text", "text": "Plan the call."}]


@pytest.mark.parametrize("kept", [
    {"type": "item_reference", "id": "rs_1"},   # store: true (the Vercel AI SDK): the server keeps it
    {"role": "assistant", "content": "<think>\nPlan the call.\n</think>"},   # written out as text (Pydantic AI)
], ids=["item_reference", "as-text"])
def test_a_responses_turn_whose_client_kept_its_reasoning_another_way_is_left_alone(kept):
    m = memory_with()
    remember_responses(m, "Plan the call.")
    req = responses_back(kept)
    before = json.dumps(req)
    assert run(m.start("q", "responses", req, b"s", None) or _zero()) == 0
    assert json.dumps(req) == before


async def _zero() -> int:
    return 0
