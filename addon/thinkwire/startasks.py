"""The asks of flows' servers about where their output starts (thinkwire.serverstart), one per
flow in flight: begun in the request hook, concurrently with forwarding the request, and
waited for when the response comes, at most think_start_wait from the request. Forgotten when
the flow ends; an ask whose flow ended runs on to its own deadline and fills the kept answers."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Awaitable

from .rules import TagPair
from .serverstart import Told
from .tagsets import Tagsets


class FlowAsks:
    def __init__(self) -> None:
        self._asks: dict[str, tuple[asyncio.Future[Told | None], float]] = {}   # flow id -> (the ask, when it began)

    def __len__(self) -> int:
        return len(self._asks)

    def begin(self, flow_id: str, ask: Awaitable[Told | None]) -> None:
        """Start `ask` for a flow (on mitmproxy's event loop; outside one, nothing is asked)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:   # (a hook called outside mitmproxy's loop: a test's)
            if inspect.iscoroutine(ask):
                ask.close()   # never awaited: closed, so it says nothing
            return
        task = asyncio.ensure_future(ask)
        task.add_done_callback(_quiet)
        self._asks[flow_id] = (task, time.monotonic())

    def left(self, flow_id: str, wait: float) -> float | None:
        """Seconds left to wait for the flow's ask (`wait` from when it began); None when there is
        nothing to wait for."""
        got = self._asks.get(flow_id)
        if got is None or got[0].done():
            return None
        left = wait - (time.monotonic() - got[1])
        return left if left > 0 else None

    async def wait(self, flow_id: str, left: float) -> None:
        got = self._asks.get(flow_id)
        if got is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(got[0]), left)
        except Exception:  # noqa: S110 (past the wait the profile decides; a failed ask is "not known")
            pass

    def told(self, flow_id: str) -> Told | None:
        """What the flow's server said, if it said by now (and the ask is forgotten)."""
        got = self._asks.pop(flow_id, None)
        if got is None or not got[0].done() or got[0].cancelled() or got[0].exception() is not None:
            return None
        return got[0].result()

    def forget(self, flow_id: str) -> None:
        self._asks.pop(flow_id, None)


def known_pairs(tagsets: Tagsets | None) -> tuple[TagPair, ...]:
    """Every tag pair the tag sets know (what a rendered prompt may leave open)."""
    if tagsets is None:
        return ()
    return tuple(dict.fromkeys(p for prof in (tagsets.default, *tagsets.profiles) for p in prof.pairs))


def _quiet(task: asyncio.Future[Told | None]) -> None:
    """An ask nobody awaited any more (its flow ended first) says nothing of its end."""
    if not task.cancelled():
        task.exception()
