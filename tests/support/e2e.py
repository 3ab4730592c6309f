"""Requests through a running proxy, as the fault and load tests send them."""

from __future__ import annotations

import http.client
import json

PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}


def fetch(proxy, surface: str, timeout: float = 20) -> tuple[int | None, bytes, str | None]:
    """POST through the proxy; (status, body bytes received, error if the read broke off)."""
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    body = json.dumps({"model": "m", "stream": True, "messages": [], "input": "q", "max_tokens": 9})
    got, err, status = b"", None, None
    try:
        conn.request("POST", PATHS[surface], body=body, headers={"content-type": "application/json"})
        r = conn.getresponse()
        status = r.status
        while True:
            piece = r.read1(65536)
            if not piece:
                break
            got += piece
    except (http.client.HTTPException, OSError) as e:
        err = type(e).__name__
    finally:
        conn.close()
    return status, got, err
