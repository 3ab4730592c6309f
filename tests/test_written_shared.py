"""thinkwire.memory.layouts: the written layouts on the memory's file or Redis store. Keys of the
client's credential (the same for every replica), what the store holds (markup and numbers),
its bounds, garbage and a store that is down (a miss, the guess as before)."""

from __future__ import annotations

import asyncio
import dataclasses

from conftest import make_settings
from thinkwire import engine, written
from thinkwire.memory import Memory, layouts, stores
from thinkwire.rules import TagPair

TEXT = "\n<think>\n  a\n\n</think>\n\n  b<think> c </think>\n\nd"


def run(coro):
    return asyncio.run(coro)


def shared_memory(tmp_path, name="m.db") -> tuple[written.Memory, Memory]:
    m = Memory()
    m.configure(make_settings(memory_store=f"sqlite:{tmp_path / name}"))
    w = written.Memory()
    w.shared = m.layouts
    return w, m


def ctx(w: written.Memory, client: str = "process salt 1", binding: bytes = b"A" * 32):
    from thinkwire.marks import Bound
    c = engine.new_context(make_settings(), {"model": "m"}, None, client=client, upstream="http://up:8000", written=w)
    c.sealer = Bound(None, binding, 0)   # type: ignore[arg-type]  (only its binding is read)
    return c


def split_and_write(w: written.Memory, text: str = TEXT, **kw) -> tuple[str, str]:
    c = ctx(w, **kw)
    r = c.split(text, finish="stop")
    c.tally()
    assert w.shared is not None
    run(w.shared.put_all(c.written_puts))
    return "\n\n".join(r.reasoning), r.content


def recall(w: written.Memory, reasoning: str, answer: str, **kw) -> tuple[str | None, TagPair]:
    """The way back as the addon runs it: a first run, the store asked once, a second run."""
    rc = ctx(w, **kw).recall
    assert rc.written(reasoning, answer) is None or not rc.wanted
    rc.guess(TagPair("<think>", "</think>"))

    async def go():
        await rc.fetch()
    run(go())
    return rc.written(reasoning, answer), rc.guess(TagPair("<think>", "</think>"))


def test_the_file_store_has_the_layouts_own_bounds_in_a_table_of_their_own(tmp_path):
    _, m = shared_memory(tmp_path)
    s = m.layouts.store
    assert isinstance(s, stores.SqliteStore) and s.table == "written" and s.path == m.store.path
    assert (s.entries, s.max_bytes, s.ttl) == (written.ENTRIES, written.BYTES, written.LIFETIME) == \
        (4096, 8 << 20, 24 * 3600)
    assert layouts.open_for(make_settings(), stores.LocalStore(1, 1, 1)) is None   # in-process: none


def test_another_process_restores_the_layout_from_the_file(tmp_path):
    w1, _ = shared_memory(tmp_path)
    reasoning, answer = split_and_write(w1)
    w2, _ = shared_memory(tmp_path)                     # a restart: another process salt
    got, guess = recall(w2, reasoning, answer, client="process salt 2")
    assert got == TEXT
    assert guess == TagPair("\n<think>\n  ", "\n\n</think>\n\n  ")
    # Kept in that process now: the next turn asks the store nothing.
    rc = ctx(w2, client="process salt 2").recall
    assert rc.written(reasoning, answer) == TEXT and rc.wanted == {}


def test_another_process_restores_a_forced_answer_from_the_file(tmp_path):
    # force_nonempty_content: the client got the reasoning as the answer, and no reasoning (a body).
    w1, _ = shared_memory(tmp_path)
    c = ctx(w1)
    c.facts = dataclasses.replace(c.facts, force_nonempty=True)
    assert c.split("<think>\nplan\n</think>\n\n", finish="stop").content == "plan"
    c.tally()
    assert w1.shared is not None
    run(w1.shared.put_all(c.written_puts))
    w2, _ = shared_memory(tmp_path)
    assert recall(w2, "", "plan", client="process salt 2")[0] == "<think>\nplan\n</think>\n\n"


def test_another_credential_finds_nothing_in_the_store(tmp_path):
    w1, _ = shared_memory(tmp_path)
    reasoning, answer = split_and_write(w1)
    w2, _ = shared_memory(tmp_path)
    got, guess = recall(w2, reasoning, answer, binding=b"B" * 32)
    assert got is None and guess == TagPair("<think>", "</think>")


def test_the_store_holds_markup_and_numbers_under_hashed_keys(tmp_path):
    w, m = shared_memory(tmp_path)
    c = ctx(w)
    c.split(TEXT, finish="stop")
    c.tally()
    assert [(k.split(":")[3], v) for k, v in c.written_puts] == [
        ("last", b'["\\n<think>\\n  ", "\\n\\n</think>\\n\\n  "]'),
        ("layout", b'[[0,1,"\\n<think>\\n  ","\\n\\n</think>\\n\\n  ",0],[1,1,"<think> "," </think>",0]]')]
    assert all(k.startswith("thinkwire:written:1:") and len(k.rsplit(":", 1)[1]) == 40 for k, _ in c.written_puts)


def test_garbage_in_the_store_is_a_miss(tmp_path):
    w, _ = shared_memory(tmp_path)
    reasoning, answer = "a\n\nc", "b\n\nd"
    k = layouts.layout_key(b"A" * 32, reasoning, answer)
    last = layouts.last_key(b"A" * 32, "http://up:8000", "m")
    too_much = b'[[0,1,"' + b"\\n" * (written.LAYOUT_MAX + 1) + b'","</think>",0]]'
    for value in (b"\xff", b"{}", b'[[0,99,"<think>","</think>",0]]', too_much):
        run(w.shared.put_all([(k, value), (last, value)]))
        got, guess = recall(w, reasoning, answer)
        assert got is None and guess == TagPair("<think>", "</think>")


def test_a_store_that_is_down_is_a_miss_and_the_guess_as_before(tmp_path):
    w = written.Memory()
    w.shared = layouts.Shared(stores.RedisStore("redis://127.0.0.1:9/0", ttl=60, timeout=0.2), own=True)
    reasoning, answer = split_and_write(w)   # (the write fails: kept in the process only)
    assert recall(w, reasoning, answer) == (TEXT, TagPair("\n<think>\n  ", "\n\n</think>\n\n  "))
    assert recall(w, reasoning, answer, client="another process") == (None, TagPair("<think>", "</think>"))


def test_layouts_never_push_reasoning_out_of_the_file(tmp_path):
    """A flood of layouts fills their table to its bound and leaves the memory's alone."""
    path = str(tmp_path / "m.db")
    mem = stores.SqliteStore(path, entries=10, max_bytes=10_000, ttl=60, timeout=5)
    lay = stores.SqliteStore(path, entries=20, max_bytes=10_000, ttl=60, timeout=5, table="written")

    async def go():
        for i in range(10):
            await mem.put(f"mem{i}", b"r" * 100)
        for i in range(500):
            await lay.put(f"lay{i}", b"[]" * 40)
        return await mem.get_many([f"mem{i}" for i in range(10)]), await lay.get_many(["lay0", "lay499"])
    kept, flooded = run(go())
    assert kept == [b"r" * 100] * 10 and flooded == [None, b"[]" * 40] and lay.count == 20
    run(mem.close())
    run(lay.close())


def test_at_most_WRITES_MAX_writes_wait(tmp_path):
    w, m = shared_memory(tmp_path)

    async def go():
        started = [w.shared.put_soon([("k", b"[]")]) for _ in range(layouts.WRITES_MAX + 10)]
        await asyncio.gather(*(t for t in started if t is not None))
        return sum(t is not None for t in started)
    assert run(go()) == layouts.WRITES_MAX == 256


def test_a_request_asks_the_store_once_for_its_newest_FETCH_MAX_turns(tmp_path):
    w, _ = shared_memory(tmp_path)
    rc = ctx(w).recall
    for i in range(written.FETCH_MAX + 10):
        assert rc.written(f"r{i}", f"a{i}") is None
    rc.guess(TagPair("<think>", "</think>"))   # (the guess is asked for too, whatever the turns)
    asked = []
    real = w.shared.get_many

    async def counted(keys):
        asked.append(keys)
        return await real(keys)
    w.shared.get_many = counted   # type: ignore[method-assign]
    run(rc.fetch())
    assert len(asked) == 1 and len(asked[0]) == written.FETCH_MAX == 64
    assert asked[0][-2] == layouts.layout_key(b"A" * 32, f"r{written.FETCH_MAX + 9}", f"a{written.FETCH_MAX + 9}")
    assert asked[0][0] == layouts.layout_key(b"A" * 32, "r11", "a11")
    assert asked[0][-1] == layouts.last_key(b"A" * 32, "http://up:8000", "m")
