"""Which models an Ollama server lets think natively: its `/api/show` answer, kept for a while.

Ollama lists a model's capabilities in `POST /api/show` (`"capabilities": ["completion",
"thinking", ...]`); "thinking" means its template reads `thinking` and Ollama separates the
reasoning itself. The Ollama surface's way back needs to know (thinkwire.surfaces.ollama). The
answer is asked of the same server the flow goes to, with the client's credentials, by
thinkwire.outbound (a deadline, no redirects, a cap on bytes and on asks in flight). It is kept
per server, model and client (`ttl`; "not known" for `failure_ttl`), and a burst of requests asks
once. What is kept is an optimisation only: a restarted proxy, or another instance, asks again
and decides the same. Anything but a clear answer (no server, an error or redirect status, a
body without `capabilities`, the deadline) is "not known", and the request then goes upstream as
it came.
"""

from __future__ import annotations

import json
from typing import Callable, NamedTuple

from mitmproxy import http

from . import gotemplate
from .decoding import BodyError, decode_body
from .outbound import Answer, Asker, Kept, Route, Server

TTL = 300.0         # seconds an answer is kept: a model re-created under its name is seen again after it
FAILURE_TTL = 30.0  # seconds "not known" is kept: a server that does not answer is not asked by every request
SIZE = 1024         # answers kept (LRU): (server, path prefix, model, client) keys
LONGEST = 256       # longer model names and show paths are not asked about (not known): a key stays small


def show_path(path: str) -> str:
    """The /api/show beside a request's /api/chat or /api/generate (any path prefix kept, as a
    gateway that serves Ollama under /ollama/ has it)."""
    path = path.split("?", 1)[0]
    prefix = path[:path.rfind("/api/")] if "/api/" in path else ""
    return f"{prefix}/api/show"


TEMPLATE_TAIL = 2048   # characters of a model's template kept (its generation prompt; thinkwire.serverstart)
NAME_CHARS = 256       # characters of its model_info name kept


class Shown(NamedTuple):
    """What is kept of an /api/show answer: whether the model thinks natively, the model's
    name in its model_info (`general.basename`, else `general.name`), and how its template's
    prompt ends for one question with `think` unset, false and true (thinkwire.gotemplate; each
    at most gotemplate.TAIL characters), else (a template past what gotemplate renders) the
    template's own end when it does not read `.Think`."""

    thinks: bool | None
    name: str | None = None
    template_tail: str | None = None
    ends: tuple[str | None, str | None, str | None] | None = None


def shown(answer: Answer | None) -> Shown | None:
    """What an /api/show answer says; None when it says nothing clear (an error, a redirect, no
    JSON, neither capabilities nor a model name)."""
    if answer is None or answer.status != 200:
        return None
    try:
        got = json.loads(answer.body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(got, dict):
        return None
    caps = got.get("capabilities")
    info = got.get("model_info")
    name = (info.get("general.basename") or info.get("general.name")) if isinstance(info, dict) else None
    name = name[:NAME_CHARS] if isinstance(name, str) and name.strip() else None
    template = got.get("template")
    ends = gotemplate.prompt_ends(template) if isinstance(template, str) else None
    tail = template[-TEMPLATE_TAIL:] if isinstance(template, str) and ".Think" not in template and ends is None \
        else None
    think = "thinking" in caps if isinstance(caps, list) else None
    if think is None and name is None:
        return None
    return Shown(think, name, tail, ends)


def thinks(answer: Answer | None) -> bool | None:
    """What an /api/show answer says: True / False, or None when it says nothing clear."""
    if answer is None or answer.status != 200:
        return None
    try:
        caps = json.loads(answer.body).get("capabilities")
    except (ValueError, AttributeError, RecursionError):
        return None
    return "thinking" in caps if isinstance(caps, list) else None


class Capabilities:
    """The kept answers, by (server, show path, model, client)."""

    def __init__(self, asker: Asker | None = None, ttl: float = TTL, failure_ttl: float = FAILURE_TTL,
                 size: int = SIZE, clock: Callable[[], float] | None = None) -> None:
        self.asker = asker or Asker()
        self._kept: Kept[tuple[Server, str, str, str], Shown] = (
            Kept(ttl, failure_ttl, size, clock) if clock else Kept(ttl, failure_ttl, size))
        self.asked = 0   # /api/show asks started (for tests and logs)

    def __len__(self) -> int:
        return len(self._kept)

    async def native_thinking(self, server: Server, path: str, model: str, client: str,
                              credentials: dict[str, str], route: Route = Route()) -> bool | None:
        """Whether `model` at `server` thinks natively; None when not known. `path`: the flow's
        (its /api/show is beside it); `client`: who asks (answers are kept per client, as the
        server may answer each credential its own way)."""
        got = await self.show(server, path, model, client, credentials, route)
        return got.thinks if got is not None else None

    async def show(self, server: Server, path: str, model: str, client: str,
                   credentials: dict[str, str], route: Route = Route()) -> Shown | None:
        """What is kept of `model`'s /api/show at `server` (asked once for both what reads it:
        the way back, and where the output starts); None when not known."""
        show = show_path(path)
        if len(model) > LONGEST or len(show) > LONGEST or len(server.host) > LONGEST:
            return None

        async def ask() -> Shown | None:
            self.asked += 1
            body = json.dumps({"model": model}).encode()
            return shown(await self.asker.ask(server, "POST", show, body, credentials, route))
        return await self._kept.get((server, show, model, client), ask)

    def forget(self, server: Server, path: str, model: str, client: str) -> None:
        """An answer the server has since contradicted (a 400 "does not support thinking" for a
        model said to think; "not known" stays kept its while)."""
        key = (server, show_path(path), model, client)
        got = self._kept.peek(key)
        if got is not None and got.thinks is True:
            self._kept.forget(key)


REFUSAL_MAX = 64 * 1024   # bytes of a 400 body read for Ollama's refusal (it is one short line)


def refuses_thinking(response: http.Response) -> bool:
    """Whether a 400 is Ollama's "does not support thinking", read with a cap: the body is the
    upstream's, and mitmproxy's get_content would decode any size."""
    try:
        body = decode_body(response.raw_content or b"", response.headers.get("content-encoding"), REFUSAL_MAX)
    except BodyError:
        return False
    return body is not None and b"does not support thinking" in body
