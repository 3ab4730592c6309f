"""The reasoning memory: reasoning a client dropped from the history it sends back, put back.

Many clients do not send an assistant turn's reasoning back (LangChain's ChatOpenAI drops
`reasoning_content`; agents and UIs rebuild turns from text). APIs that need it refuse the next
turn of a tool loop, and models with interleaved-thinking templates lose their chain of thought
at every step. thinkwire sees each turn go out, so it remembers the reasoning of the turns that
end in tool calls (and, for families that read it, of every turn), keyed by what the client sends
back (thinkwire.memory.entry), scoped to a hash of the client's credential, and puts it back when
a later request carries that turn without it (thinkwire.memory.sides). When it is on:
thinkwire.memory.policy. Where it lives: thinkwire.memory.stores.

The addon calls it at one point on each side:
- request: `start(...)` registers the flow and returns, when the request carries turns without
  their reasoning, a coroutine that fills them in (in the client's own format) before the way
  back runs;
- response: `tap` (streams) or `saw_body` (bodies) keep what the upstream sent and what the
  client got, and `settle` remembers the turn (awaited in the response hook, with the store's
  timeout, so the next request of the loop finds it).
A miss (expired, evicted, a store that is down) leaves the request as the client sent it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Coroutine

from ..decoding import decode_body
from ..jsonnum import loads
from ..ndjson import NDJSONParser
from ..record import MEMORY_KEY as KEY   # flow.metadata: what the memory did for the flow
from ..sse import SSEParser
from . import layouts, policy, stores
from .entry import Entry
from .sides import SIDES, Side

log = logging.getLogger(__name__)

ENTRY_MAX = 1 << 20      # bytes of one remembered turn at most (a larger one is not remembered)
TAP_MAX = 2 * ENTRY_MAX  # bytes of a stream kept, each way, to read the turn from (past it: not remembered)
WRITES_MAX = 256          # streams' writes under way at once; past it, a turn is not remembered


@dataclass
class Pending:
    """A flow the memory serves, from its request to its response."""
    side: Side
    scope: bytes
    family: policy.Family
    upstream: bytearray | None = None    # a stream's bytes as the upstream sent them
    client: bytearray | None = None      # ... and as the client got them
    encoding: str | None = None
    bodies: tuple[bytes, bytes] | None = None   # a whole body: upstream's, client's
    over: bool = False


class Memory:
    def __init__(self, metrics: Any = None) -> None:
        self.metrics = metrics
        self.store: stores.Store | None = None
        self.layouts: layouts.Shared | None = None   # thinkwire.written's layouts, on a file or Redis store
        self._where: tuple[object, ...] | None = None
        self.settings: Any = None
        self._flows: dict[str, Pending] = {}
        self._writing: set[asyncio.Task[None]] = set()   # writes of streams' turns under way (at most WRITES_MAX)

    def configure(self, settings: Any) -> None:
        """(Re)open the store when its options changed (the old one is closed)."""
        self.settings = settings
        where = (settings.memory_store, settings.memory_ttl, settings.memory_entries, settings.memory_bytes,
                 settings.memory_timeout)
        if where != self._where:
            old, old_layouts = self.store, self.layouts
            self.store, self._where = stores.open_store(settings), where
            self.layouts = layouts.open_for(settings, self.store)
            if old is not None:
                _close_later(old.close())
            if old_layouts is not None:
                _close_later(old_layouts.close())

    # -- the request side -------------------------------------------------------------------
    def start(self, flow_id: str, surface: str, request: dict[str, Any], scope: bytes,
              host: str | None) -> Coroutine[Any, Any, int] | None:
        """Register a request the memory serves; a coroutine filling in what came back without
        its reasoning (it returns how many turns it filled), or None when there is nothing to
        look up."""
        side = SIDES.get(surface)
        if side is None or self.settings is None or self.store is None:
            return None
        fam = policy.decide(self.settings.memory, request.get("model"), host)
        if fam is None:
            return None
        self._flows[flow_id] = Pending(side, scope, fam)
        wanting = side.wanting(request, scope, fam.every_turn)
        return self._recall(self.store, surface, side, wanting) if wanting else None

    async def _recall(self, store: stores.Store, surface: str, side: Side, wanting: list[tuple[Any, str]]) -> int:
        try:
            got = await store.get_many([k for _, k in wanting])
        except stores.Unavailable as why:
            self._count(surface, "unavailable", len(wanting))
            log.debug("thinkwire memory: %s store unavailable (%s)", store.name, why)
            return 0
        filled = 0
        for (m, _), raw in zip(wanting, got):
            e = Entry.decode(raw) if raw is not None else None
            if e is not None and side.fill(m, e):
                filled += 1
        self._count(surface, "put_back", filled)
        self._count(surface, "missed", len(wanting) - filled)
        return filled

    # -- the response side ------------------------------------------------------------------
    def serves(self, flow_id: str) -> bool:
        return flow_id in self._flows

    def tap(self, flow: Any, stream: Callable[[bytes], Any], encoding: str | None) -> Callable[[bytes], Any]:
        """The stream callable, keeping (up to TAP_MAX each way) what went in and came out. The
        turn is remembered as the stream ends (the client's last event, or the upstream's end),
        before the client has it: a client that reads `[DONE]` and sends the next turn at once
        must find it."""
        p = self._flows.get(flow.id)
        if p is None:
            return stream
        p.upstream, p.client, p.encoding = bytearray(), bytearray(), encoding
        ended = p.side.ended

        def tapped(chunk: bytes) -> Any:
            out = stream(chunk)
            if p.over:
                return out
            assert p.upstream is not None and p.client is not None
            p.upstream += chunk
            for piece in out:
                p.client += piece
            if len(p.upstream) > TAP_MAX or len(p.client) > TAP_MAX:
                p.over, p.upstream, p.client = True, None, None
            elif not chunk or (out and ended(out[-1])):
                p.over = True   # read once
                self._remember_soon(flow, p)
            return out
        return tapped

    def _remember_soon(self, flow: Any, p: Pending) -> None:
        try:
            puts = self._entries(p)
        except Exception as e:   # a shape the readers do not know: nothing remembered
            log.debug("thinkwire memory: response not read (%s)", type(e).__name__)
            return
        finally:
            p.upstream = p.client = None
        if not puts:
            return
        store = self.store
        if store is None:
            return
        if isinstance(store, stores.LocalStore):   # no wait: kept before this event goes out
            for k, v in puts:
                store.set(k, v)
            self._noted(flow, p.side.name, len(puts))
            return
        if len(self._writing) >= WRITES_MAX:
            self._count(p.side.name, "unavailable", len(puts))
            return
        # Started now, so the write goes to the store ahead of any later request's read.
        task = asyncio.get_running_loop().create_task(self._remember(store, flow, p.side.name, puts))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)

    def saw_body(self, flow_id: str, upstream: bytes, client: bytes | None) -> None:
        p = self._flows.get(flow_id)
        if p is not None and len(upstream) <= TAP_MAX:
            p.bodies = (upstream, upstream if client is None else client)

    def drop(self, flow_id: str) -> None:
        self._flows.pop(flow_id, None)

    def settle(self, flow: Any) -> Coroutine[Any, Any, None] | None:
        """A coroutine remembering a whole body's turns (the client gets the body once it is
        done), or None when there is nothing (more) to keep."""
        p = self._flows.pop(flow.id, None)
        if p is None or p.over or p.bodies is None or flow.response is None or \
                not 200 <= flow.response.status_code < 300:
            return None
        try:
            puts = self._entries(p)
        except Exception as e:   # a shape the readers do not know: nothing remembered
            log.debug("thinkwire memory: response not read (%s)", type(e).__name__)
            return None
        return self._remember(self.store, flow, p.side.name, puts) if puts and self.store is not None else None

    def _entries(self, p: Pending) -> list[tuple[str, bytes]]:
        """The store writes for the flow's turns. Reading a stream costs one parse of it each way
        (bounded by TAP_MAX), so a response without a tool call, of a family that keeps only
        those, is not read at all (one search of the bytes the client got: decoded)."""
        got = p.bodies[1] if p.bodies is not None else p.client or b""
        if not p.family.every_turn and p.side.calls not in got:
            return []
        if p.bodies is not None:
            up, cl = p.side.read_body(loads(p.bodies[0])), p.side.read_body(loads(p.bodies[1]))
        elif p.upstream is not None:
            raw = decode_body(bytes(p.upstream), p.encoding, TAP_MAX, partial=True) if p.encoding else bytes(p.upstream)
            if raw is None:
                return []
            up = p.side.read_stream(_objects(raw, p.side.name))
            cl = p.side.read_stream(_objects(bytes(p.client or b""), p.side.name))
        else:
            return []
        puts = []
        for idx, said in up.items():
            seen = cl.get(idx)
            e = p.side.entry(said, seen)
            k = p.side.turn_key(p.scope, seen or said, p.family.every_turn) if e is not None else None
            if e is not None and k is not None:
                value = e.encode()
                if len(value) <= ENTRY_MAX:
                    puts.append((k, value))
        return puts

    async def _remember(self, store: stores.Store, flow: Any, surface: str, puts: list[tuple[str, bytes]]) -> None:
        done = 0
        for k, v in puts:
            try:
                await store.put(k, v)
                done += 1
            except stores.Unavailable as why:
                self._count(surface, "unavailable", 1)
                log.debug("thinkwire memory: %s store unavailable (%s)", store.name, why)
                break
        self._noted(flow, surface, done)

    def _noted(self, flow: Any, surface: str, done: int) -> None:
        self._count(surface, "remembered", done)
        if done:
            kept = flow.metadata.setdefault(KEY, {})
            kept["remembered"] = kept.get("remembered", 0) + done
            kept["store"] = name = self.store.name if self.store is not None else "?"
            flow.comment = (flow.comment + "; " if flow.comment else "") + \
                f"reasoning of {done} turn(s) remembered ({name})"

    def _count(self, surface: str, outcome: str, n: int) -> None:
        if n and self.metrics is not None:
            self.metrics.memory(surface, outcome, n)


def _objects(raw: bytes, surface: str) -> list[Any]:
    """The JSON objects of a stream's events (SSE, or Ollama's NDJSON), skipping what is not."""
    parser: NDJSONParser | SSEParser = NDJSONParser() if surface == "ollama" else SSEParser()
    out = []
    for ev in parser.feed(raw) + parser.finish():
        if ev.data and ev.data.strip() != "[DONE]":
            try:
                out.append(loads(ev.data))
            except (ValueError, RecursionError):
                continue
    return out


def _close_later(closing: Coroutine[Any, Any, None]) -> None:
    try:
        asyncio.get_running_loop().create_task(closing)
    except RuntimeError:   # no loop (tools, tests): nothing waits on it
        closing.close()


__all__ = ["Memory", "KEY"]
