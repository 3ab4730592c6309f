"""Bench configuration (b): the floor for any stream-rewriting addon.

Installs a stream callable that returns each chunk untouched, on the same flows thinkwire
would touch (text/event-stream responses, and Ollama's application/x-ndjson), so (c) - (b) is
thinkwire's own cost.
Load with `mitmdump -s bench/passthrough_addon.py`.
"""

from mitmproxy import http


def _passthrough(chunk: bytes) -> bytes:
    return chunk


class PassThrough:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        ct = flow.response.headers.get("content-type", "") if flow.response else ""
        if ct.split(";", 1)[0].strip().lower() in ("text/event-stream", "application/x-ndjson"):
            flow.response.stream = _passthrough


addons = [PassThrough()]
