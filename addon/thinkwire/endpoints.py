"""The proxy's own endpoints, for load balancers, Kubernetes probes and Prometheus.

They live under `/.well-known/thinkwire/` (RFC 8615 keeps `/.well-known/` for site metadata, so
no model API has a path there) and are answered by the proxy in every mode, whatever the host:
a request under that prefix is never forwarded.
"""

from __future__ import annotations

import json
from typing import Callable

from mitmproxy import http

PREFIX = "/.well-known/thinkwire/"
HEALTH = PREFIX + "health"
METRICS = PREFIX + "metrics"
_READ = ("GET", "HEAD")


def answer(flow: http.HTTPFlow, health: Callable[[], dict],
           metrics: Callable[[str | None], tuple[bytes, str]]) -> bool:
    """Answer `flow` when its path is one of ours (True); False leaves it to go on its way.
    `health()`: the health document; `metrics(accept)`: the exposition and its content type."""
    path = flow.request.path.split("?", 1)[0]
    if not path.startswith(PREFIX):
        return False
    if path not in (HEALTH, METRICS):
        flow.response = _json(404, {"error": f"no such endpoint: {path}; try {HEALTH} or {METRICS}"})
    elif flow.request.method not in _READ:
        flow.response = _json(405, {"error": f"{path} answers GET and HEAD"})
        flow.response.headers["allow"] = ", ".join(_READ)
    elif path == HEALTH:
        flow.response = _json(200, health())
    else:
        body, content_type = metrics(flow.request.headers.get("accept"))
        flow.response = http.Response.make(200, body, {"content-type": content_type, "cache-control": "no-store"})
    if flow.request.method == "HEAD":
        flow.response.content = b""   # (mitmproxy sets content-length 0 for it; the headers stay)
    return True


def _json(status: int, obj: dict) -> http.Response:
    return http.Response.make(status, json.dumps(obj).encode() + b"\n",
                              {"content-type": "application/json", "cache-control": "no-store"})
