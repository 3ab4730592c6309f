"""Where the memory lives: in the proxy (default), a SQLite file (kept across restarts), or a
Redis / Valkey server (shared by a fleet). One interface: `get_many(keys)` and `put(key, value)`,
both async, both bounded in time; a store that fails or is slow gives a miss, never an error.

- LocalStore: an ordered dict with a lifetime and bounds on entries and bytes (the oldest go
  first). Never blocks.
- SqliteStore: the same bounds in a file, through the stdlib's sqlite3 on a thread of its own
  (never the event loop, never asyncio's default executor, which mitmproxy uses for DNS); at
  most PENDING_MAX calls wait for it, past that a call is a miss at once.
- RedisStore: redis-py's asyncio client (`redis.asyncio`); entries expire with Redis's own
  lifetime (SET ... EX); the server's `maxmemory` with an LRU policy bounds the total (the fleet
  docs say how). A refused connection fails at once (a miss); a call that timed out makes the
  store skipped for RETRY_AFTER seconds, so a server that hangs costs each request nothing, not a
  timeout. A pooled connection a restarted server dropped is reconnected once, in the call.
Every call is wrapped in `asyncio.wait_for(..., timeout)`.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Union

from ..settings import SettingError

log = logging.getLogger(__name__)

PENDING_MAX = 64      # calls waiting for the file store's thread; past it, a miss at once
RETRY_AFTER = 2.0     # seconds a failed Redis is skipped before it is tried again


class Unavailable(Exception):
    """The store could not answer (down, slow, full queue): a miss."""


class LocalStore:
    name = "memory"

    def __init__(self, entries: int, max_bytes: int, ttl: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.entries, self.max_bytes, self.ttl, self._clock = entries, max_bytes, ttl, clock
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        return [self.get(k) for k in keys]

    async def put(self, key: str, value: bytes) -> None:
        self.set(key, value)

    def get(self, key: str) -> bytes | None:
        got = self._items.get(key)
        if got is None:
            return None
        if got[0] <= self._clock():
            self._drop(key)
            return None
        return got[1]

    def set(self, key: str, value: bytes) -> None:
        if len(value) > self.max_bytes:
            return
        if key in self._items:
            self._drop(key)
        self._items[key] = (self._clock() + self.ttl, value)
        self.bytes += len(value)
        now = self._clock()
        # Oldest first (insertion order = expiry order: one lifetime for all).
        while self._items and (len(self._items) > self.entries or self.bytes > self.max_bytes
                               or next(iter(self._items.values()))[0] <= now):
            self._drop(next(iter(self._items)))

    def _drop(self, key: str) -> None:
        self.bytes -= len(self._items.pop(key)[1])

    async def close(self) -> None:
        self._items.clear()
        self.bytes = 0


class SqliteStore:
    name = "sqlite"

    def __init__(self, path: str, entries: int, max_bytes: int, ttl: int, timeout: float,
                 clock: Callable[[], float] = time.time, table: str = "memory") -> None:
        self.path, self.entries, self.max_bytes, self.ttl, self.timeout = path, entries, max_bytes, ttl, timeout
        assert table.isidentifier()   # (ours: "memory", "written"; never a client's)
        self.table = table
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thinkwire-memory")
        self._db: sqlite3.Connection | None = None
        self._pending = 0
        self.count = self.bytes = 0

    # -- on the store's own thread --------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(Path(self.path).expanduser()), timeout=self.timeout, isolation_level=None,
                                 check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, value BLOB NOT NULL, "
                       "expires REAL NOT NULL, size INTEGER NOT NULL)")
            db.execute(f"DELETE FROM {self.table} WHERE expires <= ?", (self._clock(),))
            self.count, self.bytes = db.execute(f"SELECT COUNT(*), COALESCE(SUM(size), 0) FROM {self.table}").fetchone()
            self._db = db
            self._trim()
        return self._db

    def _get_many(self, keys: list[str]) -> list[bytes | None]:
        db = self._open()
        marks = ",".join("?" * len(keys))
        rows = dict(db.execute(f"SELECT key, value FROM {self.table} WHERE key IN ({marks}) AND expires > ?",
                               (*keys, self._clock())).fetchall())
        return [rows.get(k) for k in keys]

    def _put(self, key: str, value: bytes) -> None:
        db = self._open()
        old = db.execute(f"SELECT size FROM {self.table} WHERE key = ?", (key,)).fetchone()
        db.execute(f"INSERT OR REPLACE INTO {self.table} (key, value, expires, size) VALUES (?, ?, ?, ?)",
                   (key, value, self._clock() + self.ttl, len(value)))
        if old is not None:
            self.count, self.bytes = self.count - 1, self.bytes - old[0]
        self.count, self.bytes = self.count + 1, self.bytes + len(value)
        self._trim()

    def _trim(self) -> None:
        """Expired rows, then the oldest (by rowid: insertion order) until within the bounds."""
        db = self._db
        assert db is not None
        gone = db.execute(f"DELETE FROM {self.table} WHERE expires <= ? RETURNING size", (self._clock(),)).fetchall()
        self.count -= len(gone)
        self.bytes -= sum(s for (s,) in gone)
        while self.count > self.entries or self.bytes > self.max_bytes:
            over = max(self.count - self.entries, 1)
            gone = db.execute(f"DELETE FROM {self.table} WHERE rowid IN (SELECT rowid FROM {self.table} ORDER BY rowid "
                              "LIMIT ?) "
                              "RETURNING size", (over,)).fetchall()
            if not gone:
                self.count = self.bytes = 0
                break
            self.count -= len(gone)
            self.bytes -= sum(s for (s,) in gone)

    # -- from the event loop --------------------------------------------------------------
    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._pending >= PENDING_MAX:
            raise Unavailable("the file store's queue is full")
        self._pending += 1
        try:
            fut = asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
            return await asyncio.wait_for(fut, self.timeout)
        except (TimeoutError, sqlite3.Error, OSError) as e:
            raise Unavailable(f"{type(e).__name__}: {e}") from None
        finally:
            self._pending -= 1

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        got: list[bytes | None] = await self._call(self._get_many, keys)
        return got

    async def put(self, key: str, value: bytes) -> None:
        if len(value) <= self.max_bytes:
            await self._call(self._put, key, value)

    async def close(self) -> None:
        def shut() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None
        self._pool.submit(shut)
        self._pool.shutdown(wait=False)


class RedisStore:
    name = "redis"

    def __init__(self, url: str, ttl: int, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        import redis.asyncio   # the optional extra: thinkwire[redis]
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError
        url = "redis://" + url.removeprefix("valkey://") if url.startswith("valkey://") else url
        self.ttl, self.timeout, self._clock = ttl, timeout, clock
        self._redis = redis.asyncio.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=0,
            retry=Retry(NoBackoff(), 1), retry_on_error=[RedisConnectionError], retry_on_timeout=False)
        self._down_until = 0.0

    async def _call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        if self._clock() < self._down_until:
            raise Unavailable("down a moment ago")
        try:
            return await asyncio.wait_for(fn(*args, **kw), self.timeout)
        except Exception as e:   # connection refused, timeout, a server error: a miss
            if isinstance(e, TimeoutError) or "Timeout" in type(e).__name__:
                self._down_until = self._clock() + RETRY_AFTER
            raise Unavailable(f"{type(e).__name__}: {e}") from None

    async def get_many(self, keys: list[str]) -> list[bytes | None]:
        return list(await self._call(self._redis.mget, keys))

    async def put(self, key: str, value: bytes, ttl: int | None = None) -> None:
        await self._call(self._redis.set, key, value, ex=max(1, self.ttl if ttl is None else ttl))

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self._redis.aclose(), self.timeout)
        except Exception:
            pass


Store = Union[LocalStore, SqliteStore, RedisStore]


def open_store(settings: Any) -> Store:
    """The store `think_memory_store` names (settings: thinkwire.settings.Settings)."""
    where = settings.memory_store
    ttl = settings.memory_ttl or 86400
    if where.startswith("sqlite:"):
        return SqliteStore(where.removeprefix("sqlite:").removeprefix("//"), settings.memory_entries,
                           settings.memory_bytes, ttl, settings.memory_timeout)
    if where.startswith(("redis://", "rediss://", "unix://", "valkey://")):
        try:
            return RedisStore(where, ttl, settings.memory_timeout)
        except ImportError:
            raise SettingError("think_memory_store names a Redis, and the redis library is not installed: "
                               "pip install 'thinkwire[redis]' (or redis), or use memory or sqlite:PATH") from None
    return LocalStore(settings.memory_entries, settings.memory_bytes, ttl)
