"""Which models an Ollama server lets think natively: its `/api/show` answer, kept for a while.

Ollama lists a model's capabilities in `POST /api/show` (`"capabilities": ["completion",
"thinking", ...]`); "thinking" means its template reads `thinking` and Ollama separates the
reasoning itself. The Ollama surface's way back needs to know (thinkwire.surfaces.ollama). The
answer is asked of the same server the flow goes to, once per model while it is kept (`ttl`),
and a burst of requests for one model asks once. What is kept is an optimisation only: a
restarted proxy, or another instance, asks again and decides the same. Anything but a clear
answer (no server, an error status, a body without `capabilities`, a timeout) is "not known",
and the request then goes upstream as it came.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from typing import Callable

log = logging.getLogger(__name__)

TTL = 300.0        # seconds an answer is kept: a model re-created under its name is seen again after it
SIZE = 256         # answers kept (LRU)
TIMEOUT = 3.0      # seconds for one /api/show


def show_url(scheme: str, host: str, port: int, path: str) -> str:
    """The /api/show beside a request's /api/chat or /api/generate (any path prefix kept, as a
    gateway that serves Ollama under /ollama/ has it)."""
    path = path.split("?", 1)[0]
    prefix = path[:path.rfind("/api/")] if "/api/" in path else ""
    netloc = f"[{host}]" if ":" in host else host
    return f"{scheme}://{netloc}:{port}{prefix}/api/show"


def fetch(url: str, body: bytes, headers: dict[str, str], insecure: bool) -> tuple[int, bytes]:
    """One POST, straight to the server (no proxy from the environment: that may be this one)."""
    context = ssl._create_unverified_context() if insecure else ssl.create_default_context()  # noqa: S323
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
    req = urllib.request.Request(url, body, dict(headers, **{"content-type": "application/json"}), method="POST")
    try:
        with opener.open(req, timeout=TIMEOUT) as r:
            return r.status, r.read(1 << 20)
    except urllib.error.HTTPError as e:
        return e.code, b""


def thinks(status: int, body: bytes) -> bool | None:
    """What an /api/show answer says: True / False, or None when it says nothing clear."""
    if status != 200:
        return None
    try:
        caps = json.loads(body).get("capabilities")
    except (ValueError, AttributeError):
        return None
    return "thinking" in caps if isinstance(caps, list) else None


class Capabilities:
    """The kept answers, by (show URL, model)."""

    def __init__(self, fetch: Callable[[str, bytes, dict, bool], tuple[int, bytes]] = fetch,
                 ttl: float = TTL, size: int = SIZE, clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch, self._ttl, self._size, self._clock = fetch, ttl, size, clock
        self._known: OrderedDict[tuple[str, str], tuple[float, bool]] = OrderedDict()
        self._asking: dict[tuple[str, str], asyncio.Future] = {}
        self.asked = 0   # /api/show requests made (for tests and logs)

    async def native_thinking(self, url: str, model: str, headers: dict[str, str],
                              insecure: bool = False) -> bool | None:
        key = (url, model)
        got = self._known.get(key)
        if got is not None:
            if self._clock() < got[0]:
                self._known.move_to_end(key)
                return got[1]
            del self._known[key]
        pending = self._asking.get(key)
        if pending is None:
            pending = self._asking[key] = asyncio.ensure_future(self._ask(key, headers, insecure))
        return await asyncio.shield(pending)

    async def _ask(self, key: tuple[str, str], headers: dict[str, str], insecure: bool) -> bool | None:
        url, model = key
        self.asked += 1
        try:
            status, body = await asyncio.to_thread(self._fetch, url, json.dumps({"model": model}).encode(),
                                                   headers, insecure)
            answer = thinks(status, body)
        except Exception as e:   # no answer: not known, the request goes as it came
            log.info("thinkwire ollama: %s for model %r did not answer (%s)", url, model, type(e).__name__)
            answer = None
        finally:
            self._asking.pop(key, None)
        if answer is not None:
            self._known[key] = (self._clock() + self._ttl, answer)
            while len(self._known) > self._size:
                self._known.popitem(last=False)
        return answer

    def forget(self, url: str, model: str) -> None:
        """An answer the server has since contradicted (a 400 "does not support thinking")."""
        self._known.pop((url, model), None)
