"""The proxy's own endpoints, for load balancers, Kubernetes probes and Prometheus.

They live under `/.well-known/thinkwire/` (RFC 8615 keeps `/.well-known/` for site metadata, so
no model API has a path there) and are answered only for requests addressed to the proxy
itself (`to_the_proxy`): in reverse mode every request (the proxy is the server its clients
see); in any other mode (regular, upstream, SOCKS, transparent ...) one whose host and port are
the address the client connected to. A request for another host under that path, in an
intercepted HTTPS tunnel or not, is that host's and goes on to it: a web page visited through a
forward proxy cannot read the proxy's metrics.

With think_metrics_port (a port the proxy also listens on, e.g. a second `--mode ...@PORT`),
the metrics are answered only on connections to that port, so a Service or load balancer that
exposes the other port keeps them from clients; health is answered on every port.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any, Callable

from mitmproxy import http
from mitmproxy.proxy.mode_specs import ReverseMode

PREFIX = "/.well-known/thinkwire/"
HEALTH = PREFIX + "health"
METRICS = PREFIX + "metrics"
_READ = ("GET", "HEAD")


def to_the_proxy(flow: http.HTTPFlow) -> bool:
    """Whether `flow`'s request is addressed to the proxy itself (see the module's docstring)."""
    client = flow.client_conn
    if isinstance(client.proxy_mode, ReverseMode):
        return True
    local = client.sockname
    if not local or flow.request.port != local[1]:
        return False
    return _same_host(flow.request.host, local[0])


def _same_host(host: str, ip: str) -> bool:
    """Whether the request's host names the address `ip` the client connected to: that address
    itself, or `localhost` for a loopback one. Another name is another host's, whatever it
    resolves to (DNS rebinding cannot make it the proxy's)."""
    listening = _ip(ip)
    if listening is None:
        return False
    if host.lower() == "localhost":
        return listening.is_loopback
    return _ip(host) == listening


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        a = ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    return (a.ipv4_mapped or a) if isinstance(a, ipaddress.IPv6Address) else a


def answer(flow: http.HTTPFlow, health: Callable[[], dict[str, Any]],
           metrics: Callable[[str | None], tuple[bytes, str]], metrics_port: int | None = None) -> bool:
    """Answer `flow` when it is addressed to the proxy and its path is one of ours (True); False
    leaves it to go on its way. `health()`: the health document; `metrics(accept)`: the
    exposition and its content type; `metrics_port`: the only local port metrics are answered on
    (None: every port)."""
    path = flow.request.path.split("?", 1)[0]
    if not path.startswith(PREFIX) or not to_the_proxy(flow):
        return False
    local = flow.client_conn.sockname
    here = (HEALTH, METRICS) if metrics_port is None or (local and local[1] == metrics_port) else (HEALTH,)
    if path not in here:
        flow.response = _json(404, {"error": f"no such endpoint: {path}; try {' or '.join(here)}"})
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


def _json(status: int, obj: dict[str, Any]) -> http.Response:
    return http.Response.make(status, json.dumps(obj).encode() + b"\n",
                              {"content-type": "application/json", "cache-control": "no-store"})
