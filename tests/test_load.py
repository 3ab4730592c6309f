"""Load and soak through a real mitmdump: many concurrent streams, each checked for exactly its
own reasoning and answer; then a bounded soak with the proxy's memory sampled for a trend.

THINKWIRE_LOAD_STREAMS (default 100) and THINKWIRE_SOAK_SECONDS (default 60) scale them.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time

import pytest

from harness import Seen, sse_reply
from support.e2e import PATHS, fetch
from support.events import encode_events, model_objs, text_sequence

pytestmark = pytest.mark.e2e
SURFACES = ["chat", "messages", "responses"]


def _token(seen: Seen) -> str:
    return re.search(r"tok-[0-9a-z]+", seen.body.decode()).group()


def _reply(seen: Seen):
    """A stream whose reasoning and answer carry the request's own token, in small deltas."""
    tok = _token(seen)
    surface = "chat" if "chat" in seen.path else "messages" if "messages" in seen.path else "responses"
    text = f"<think>\nreasoning of {tok} \U0001d11e\n</think>\n\nanswer of {tok}."
    deltas = [text[i:i + 5] for i in range(0, len(text), 5)]
    data = b"".join(encode_events(surface, model_objs(surface, deltas)))
    return sse_reply([data[i:i + 97] for i in range(0, len(data), 97)], delay=0.01)


def _fetch_own(proxy, surface: str, tok: str) -> tuple[str, str, str | None]:
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=60)
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": tok}]})
    try:
        conn.request("POST", PATHS[surface], body=body, headers={"content-type": "application/json"})
        r = conn.getresponse()
        got = r.read()
        if r.status != 200:
            return "", "", f"status {r.status}: {got[:200]!r}"
    except Exception as e:  # noqa: BLE001 - reported as the failure
        return "", "", f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    seq = text_sequence(surface, got)
    return "".join(t for k, t in seq if k == "r"), "".join(t for k, t in seq if k == "c"), None


def _route(up):
    up.server.socket.listen(512)   # the scripted upstream's default backlog (5) refuses a burst
    for s in SURFACES:
        up.route(PATHS[s], _reply)


def test_concurrent_streams_each_get_exactly_their_own_text(proxy_factory, up):
    n = int(os.environ.get("THINKWIRE_LOAD_STREAMS", "100"))
    _route(up)
    proxy = proxy_factory()
    results: dict[int, tuple] = {}
    barrier = threading.Barrier(n)

    def one(k: int) -> None:
        surface = SURFACES[k % 3]
        tok = f"tok-{k:03d}x{os.urandom(3).hex()}"
        barrier.wait(30)
        results[k] = (tok,) + _fetch_own(proxy, surface, tok)

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    elapsed = time.monotonic() - t0
    assert len(results) == n
    bad = {k: v for k, v in results.items()
           if v[3] is not None or v[1] != f"reasoning of {v[0]} \U0001d11e" or v[2] != f"answer of {v[0]}."}
    assert not bad, f"{len(bad)} of {n} streams wrong, e.g. {list(bad.items())[:3]}"
    assert "Traceback" not in proxy.log()
    print(f"\nload: {n} concurrent streams (3 surfaces), each exactly its own text, in {elapsed:.1f} s")


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc to read the proxy's memory")
def test_soak_memory_shows_no_growth_trend(proxy_factory, up):
    seconds = float(os.environ.get("THINKWIRE_SOAK_SECONDS", "60"))
    _route(up)
    proxy = proxy_factory()
    pid = proxy.proc.pid
    samples: list[tuple[float, int]] = []
    served = failures = 0
    stop = time.monotonic() + seconds
    next_sample = time.monotonic()
    k = 0
    while time.monotonic() < stop:
        batch: list = []

        def one(i: int) -> None:
            tok = f"tok-{i:06d}s"
            batch.append((tok,) + _fetch_own(proxy, SURFACES[i % 3], tok))
        threads = [threading.Thread(target=one, args=(k + j,)) for j in range(12)]
        k += 12
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for tok, r, c, err in batch:
            served += 1
            if err or r != f"reasoning of {tok} \U0001d11e" or c != f"answer of {tok}.":
                failures += 1
        if time.monotonic() >= next_sample:
            samples.append((time.monotonic(), _rss_kib(pid)))
            next_sample += 3
    assert failures == 0, f"{failures} of {served} soak streams wrong"
    warm = samples[len(samples) // 4:]        # the first quarter is warm-up (imports, caches)
    third = max(1, len(warm) // 3)
    first = sum(r for _, r in warm[:third]) / third
    last = sum(r for _, r in warm[-third:]) / third
    print(f"\nsoak: {seconds:.0f} s, {served} streams, RSS {samples[0][1] // 1024} MiB at start, "
          f"{first / 1024:.1f} MiB -> {last / 1024:.1f} MiB (first -> last third after warm-up), "
          f"{len(samples)} samples")
    assert last <= first * 1.10 + 4096, f"RSS grew from {first:.0f} KiB to {last:.0f} KiB"
    assert "Traceback" not in proxy.log()
