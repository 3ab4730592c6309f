"""The request's way back run (`surface.restore_request`) and what it leaves on the flow.

Apart from the addon's hooks because of the shared layout store (thinkwire.memory.layouts): a
run that missed layouts in the proxy asks the store once, then runs again from the request as it
came. Whatever it does, a request is never blocked: on a bug it goes upstream unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

from mitmproxy import http

from . import engine, written
from .context import FlowContext, Stats
from .jsonio import OUT, dumps
from .memory import KEY as MEMORY_KEY, Memory
from .metrics import Metrics
from .record import RESTORED_KEY
from .surfaces import Surface

log = logging.getLogger("thinkwire.addon")   # (the addon's logger: userlog shows its lines)


class WayBack:
    def __init__(self, written: written.Memory, memory: Memory, metrics: Metrics) -> None:
        self.written, self.memory, self.metrics = written, memory, metrics

    def restore(self, flow: http.HTTPFlow, surface: Surface, body: bytes, fctx: FlowContext,
                 filled: int = 0) -> Coroutine[Any, Any, None] | None:
        """The way back. With a shared layout store (thinkwire.memory.layouts), a run that missed
        layouts in the proxy returns a coroutine: one store call for them, then the way back again
        from the request as it was (the first run's result is dropped)."""
        shared = self.written.shared is not None
        # (The memory's fill changed the parsed request: the second run starts from a copy of it.)
        pristine = (dumps(fctx.request).encode("utf-8", OUT) if filled else body) if shared else None
        new: bytes | None | Exception
        try:
            new = surface.restore_request(body, fctx)
        except Exception as e:  # never block a request: it goes upstream as it came
            new = e
        if pristine is not None and fctx.recall.wanted:
            return self._fetch_then_restore(flow, surface, pristine, fctx, filled)
        self._restored(flow, surface, fctx, new, filled)
        return None

    async def _fetch_then_restore(self, flow: http.HTTPFlow, surface: Surface, body: bytes, fctx: FlowContext,
                                  filled: int) -> None:
        await fctx.recall.fetch()
        fctx.stats, fctx.request = Stats(), engine.parse_request(body)
        new: bytes | None | Exception
        try:
            new = surface.restore_request(body, fctx)
        except Exception as e:  # never block a request: it goes upstream as it came
            new = e
        self._restored(flow, surface, fctx, new, filled)

    def _restored(self, flow: http.HTTPFlow, surface: Surface, fctx: FlowContext, new: bytes | None | Exception,
                  filled: int) -> None:
        if isinstance(new, Exception):
            log.warning("thinkwire %s: request left unchanged (%s)", surface.NAME, type(new).__name__,
                        exc_info=(type(new), new, new.__traceback__) if log.isEnabledFor(logging.DEBUG) else None)
            new = None
            if not filled:
                return
        self.metrics.way_back(surface.NAME, fctx.stats.restored, fctx.stats.refused)
        if filled:   # the memory changed the parsed request: it goes as the way back left it
            store = self.memory.store   # (it filled: it is open)
            flow.metadata[MEMORY_KEY] = {"put_back": filled, "store": store.name if store is not None else None}
            if new is None:
                new = dumps(fctx.request).encode("utf-8", OUT)
        if new is not None:
            flow.request.content = new
            if fctx.stats.restored:
                flow.metadata[RESTORED_KEY] = fctx.stats.restored
