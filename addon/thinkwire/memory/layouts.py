"""The written layouts (thinkwire.written) on the memory's store, when that store is a file or a
Redis: a restarted proxy, or another replica of a fleet, restores a turn it did not split as the
model wrote it, instead of guessing its markup.

What goes there is what the in-process store keeps, and only that: a layout's markup and numbers
(`written.dump`), and the last block's pair per client, upstream and model. Keys are hashes of
the client's credential (marks.client_binding: the same for every replica, unlike the salted
addon.client_key the in-process store files under) and of the texts the client sends back; they
never hold the text. The bounds are the layouts' own (written.ENTRIES, BYTES, LIFETIME): the file
keeps them in a table of its own (`written`), so layouts never push reasoning out, nor reasoning
layouts; Redis expires each after LIFETIME, and its `maxmemory` bounds the total (as for the
memory).

The in-process store stays in front of it: a turn this proxy split is found there without a
store call. A request whose turns miss there asks the store once for all of them (`fetch`); a
store that is down or slow is a miss (its timeout, and the Redis client's skip-after-timeout,
as for the memory): the way back guesses, as it did before any store.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import Any, Callable

from .. import written
from ..rules import TagPair
from . import stores

log = logging.getLogger(__name__)

PREFIX = "thinkwire:written:1:"   # keys on a shared store (a Redis may hold others)
WRITES_MAX = 256                  # writes under way at once; past it, a layout stays in the proxy only


def layout_key(binding: bytes, reasoning: str, answer: str) -> str:
    """A layout's key: the client's credential hash and the texts' digests (as a Transcript has
    them: recorder.Transcript.shared_key)."""
    return _key(b"layout", binding, written._digest(reasoning), written._digest(answer))


def last_key(binding: bytes, upstream: str | None, model: str | None) -> str:
    return _key(b"last", binding, (upstream or "").encode("utf-8", "surrogateescape"),
                (model or "").encode("utf-8", "surrogateescape"))


def _key(kind: bytes, *parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=20, person=b"thinkwire-wl1")
    for part in (kind, *parts):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return PREFIX + kind.decode() + ":" + h.hexdigest()


def dump_pair(pair: TagPair) -> bytes:
    return json.dumps([pair.open, pair.close], ensure_ascii=False).encode("utf-8", "surrogatepass")


def load_pair(raw: bytes | None) -> TagPair | None:
    """A pair from a store's bytes; None for anything that is not one (a store is not trusted)."""
    if raw is None:
        return None
    try:
        got = json.loads(bytes(raw).decode("utf-8", "surrogatepass"))
    except (ValueError, TypeError):
        return None
    if not (isinstance(got, list) and len(got) == 2 and all(isinstance(x, str) for x in got)) or \
            len(got[0]) + len(got[1]) > written.LAYOUT_MAX:
        return None
    return TagPair(got[0], got[1])


class Shared:
    """The layouts' part of a file or Redis store: `get_many` and `put`, a miss when it fails."""

    def __init__(self, store: stores.SqliteStore | stores.RedisStore, own: bool) -> None:
        self.store, self.own, self.name = store, own, store.name   # own: opened for layouts (closed with them)
        self._writing: set[asyncio.Task[None]] = set()

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        try:
            return await self.store.get_many(keys)
        except stores.Unavailable as why:
            log.debug("thinkwire written: %s store unavailable (%s)", self.name, why)
            return [None] * len(keys)

    async def put_all(self, puts: list[tuple[str, bytes]]) -> None:
        for k, v in puts:
            try:
                if isinstance(self.store, stores.RedisStore):
                    await self.store.put(k, v, written.LIFETIME)
                else:
                    await self.store.put(k, v)
            except stores.Unavailable as why:
                log.debug("thinkwire written: %s store unavailable (%s)", self.name, why)
                return

    def put_soon(self, puts: list[tuple[str, bytes]]) -> asyncio.Task[None] | None:
        """The writes started now (ahead of any later request's read), or None when there is
        nothing to write, no loop, or WRITES_MAX writes are under way already."""
        if not puts or len(self._writing) >= WRITES_MAX:
            return None
        try:
            task = asyncio.get_running_loop().create_task(self.put_all(puts))
        except RuntimeError:   # no loop (tools, tests): nothing to write with
            return None
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)
        return task

    async def close(self) -> None:
        if self.own:
            await self.store.close()


def open_for(settings: Any, store: stores.Store | None) -> Shared | None:
    """The layouts' store beside the memory's `store`: its own table of the same file, the same
    Redis client; None for the in-process memory (the layouts stay in written.Memory)."""
    if isinstance(store, stores.RedisStore):
        return Shared(store, own=False)
    if isinstance(store, stores.SqliteStore):
        return Shared(stores.SqliteStore(store.path, written.ENTRIES, written.BYTES, written.LIFETIME,
                                         settings.memory_timeout, table="written"), own=True)
    return None


def tap(stream: Callable[[bytes], Any], settle: Callable[[], object], ended: Callable[[bytes], bool]) -> Callable[[bytes], Any]:
    """A stream callable that calls `settle` (the flow's layouts recorded and written) once, as
    the stream's last event goes to the client (`ended`), or at its end: before the client has
    it, so a client that sends the next turn at once, to any replica, finds the layout."""
    done = False

    def tapped(chunk: bytes) -> Any:
        nonlocal done
        out = stream(chunk)
        if not done and (not chunk or (out and ended(out[-1]))):
            done = True
            settle()
        return out
    return tapped
