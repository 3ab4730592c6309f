"""(7) The time to first byte thinkwire's ask of the server adds (thinkwire.serverstart).

One bench upstream (upstream.py) that also answers as a llama-server under /tplN/ (`/props`,
`/apply-template`), and side by side: mitmdump with the pass-through stream callable (b), and
thinkwire (c) with think_ask_template off, then on. With it on, "uncached" requests go each to a
new path prefix (a server never seen: /props, then /apply-template, then the request's answer),
"cached" ones to one prefix already asked. Reported: the median and p90 time from sending the
request to the first byte of the response, in ms, and the added time against (b).
"""

from __future__ import annotations

import http.client
import json
import statistics
import time

from procs import Mitmdump, Upstream

PATH = "/v1/chat/completions"


def _first_byte(port: int, path: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"model": "local-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    t0 = time.perf_counter()
    conn.request("POST", path + "?n=20", body=body, headers={"content-type": "application/json"})
    r = conn.getresponse()
    r.read1(1)
    got = (time.perf_counter() - t0) * 1000
    r.read()
    conn.close()
    return got


def _stat(vals: list[float]) -> dict:
    s = sorted(vals)
    return {"median_ms": statistics.median(s), "p90_ms": s[int(0.9 * (len(s) - 1))]}


def run(rounds: int, log=print) -> dict:
    up = Upstream()
    out: dict = {}
    try:
        runs = {"pass-through (b)": ("b", {}, "same"), "thinkwire, ask off": ("c", {"think_ask_template": "off"}, "same"),
                "thinkwire, ask uncached": ("c", {}, "new"), "thinkwire, ask cached": ("c", {}, "kept")}
        for name, (config, options, prefix) in runs.items():
            p = Mitmdump(config, up.url, options).wait_ready()
            try:
                for _ in range(5):   # warm up: imports, the first flow's set-up (and the kept answer)
                    _first_byte(p.port, "/tpl0" + PATH)
                # (every configuration on the same upstream paths: only the ask differs)
                vals = [_first_byte(p.port, (f"/tpl{n + 1}" if prefix == "new" else "/tpl0") + PATH)
                        for n in range(rounds)]
            finally:
                p.stop()
            out[name] = _stat(vals)
            log(f"  {name}: median {out[name]['median_ms']:.2f} ms, p90 {out[name]['p90_ms']:.2f} ms")
        base = out["pass-through (b)"]["median_ms"]
        for name in out:
            out[name]["added_median_ms"] = out[name]["median_ms"] - base
    finally:
        up.stop()
    return out
