"""(6) One proxy process's capacity: the events per second one thinkwire mitmdump sustains, per
surface, while the delay it adds stays under 5 ms at p99. A fleet is sized from it (docs/operations.md,
"Sizing": streams x tokens per second / capacity = replicas).

The load is what a team's clients put on a proxy: `streams` streams open at any moment, each of
`tps` tokens a second (one event per token, stamped by the upstream) and `length_s` long, one
after another in each of `streams` slots, so new flows keep being set up as old ones end. The
slots start over the first half second and their first streams are cut short so that the ends
(and so the new flows) spread evenly from the start. After `settle_s`, the delays of the stamps
that arrive in the next `window_s` are measured; then every stream is dropped. A rate of R
events/s is R / tps open streams.

A rate passes when no stream fails, the client receives at least 97% of the offered events in
the window, every stream that got going came out rewritten, and the p99 delay through the proxy
exceeds the p99 delay of the same load sent straight to the upstream (the client's and the
upstream's own share) by less than 5 ms. (The straight run is skipped while the proxy's own p99
is under 5 ms: it cannot add more than that.) Rates double from `start` until one fails (or halve
until one passes), then the gap between the highest that passed and the lowest that failed is
halved until they are 15% apart.
"""

from __future__ import annotations

import asyncio
import time

import client
import workload
from procs import Mitmdump, Upstream

ADDED_P99_MS = 5.0    # the delay budget
DELIVERED = 0.97      # of the offered events, in the window


class _Arrivals(list):
    """The client's list of delays, each kept with when it arrived (to keep the window's)."""

    def append(self, delay_ns: int) -> None:
        super().append((time.monotonic_ns(), delay_ns))


def _p(vals: list[int], q: float) -> float:
    return vals[min(len(vals) - 1, int(len(vals) * q))] / 1e6 if vals else float("nan")


async def _load(port: int, shape, streams: int, tps: float, length_s: float, settle_s: float,
                window_s: float, on_window=None) -> dict:
    iv, full = 1 / tps, max(2, round(length_s * tps))
    delays = _Arrivals()
    results: list = []
    t0 = time.monotonic()

    async def slot(i: int) -> None:
        start = 0.5 * i / streams
        await asyncio.sleep(start)
        n = max(2, round((length_s * (i + 1) / streams - start) * tps))   # the ends spread evenly
        seed = i
        while True:
            r = client.StreamResult(shape.name)
            results.append(r)
            await client.one_stream(port, shape, f"n={n}&iv={iv}&seed={seed}", delays, r)
            n, seed = full, seed + streams

    async def window() -> dict:
        await asyncio.sleep(max(0.0, t0 + settle_s - time.monotonic()))
        start = on_window() if on_window else None
        await asyncio.sleep(window_s)
        return {"start": start, "end": on_window() if on_window else None}

    slots = [asyncio.create_task(slot(i)) for i in range(streams)]
    marks = await window()
    for t in slots:
        t.cancel()
    await asyncio.gather(*slots, return_exceptions=True)
    lo, hi = int((t0 + settle_s) * 1e9), int((t0 + settle_s + window_s) * 1e9)
    d = sorted(x for t, x in delays if lo <= t < hi)
    errors = [f"{r.error}" for r in results if r.error]
    return {"delivered_per_s": len(d) / window_s, "p50_ms": _p(d, 0.5), "p99_ms": _p(d, 0.99),
            "errors": errors[:3], "error_count": len(errors), "marks": marks, "flows": len(results),
            # (stamps are counted when a stream completes: the completed ones must be rewritten)
            "not_rewritten": sum(1 for r in results if r.stamps >= 3 and not r.rewritten)}


def _step(proxy: Mitmdump, up: Upstream, shape, rate: float, p: dict, log) -> dict:
    tps = p["tps"]
    streams = max(1, round(rate / tps))
    offered = streams * tps
    load = (streams, tps, p["length_s"], p["settle_s"], p["window_s"])

    def reading() -> tuple[float, int]:
        return proxy.cpu(), proxy.rss_kb()

    r = asyncio.run(_load(proxy.port, shape, *load, reading))
    (c0, _), (c1, rss) = r.pop("marks").values()
    row = {"rate": offered, "streams": streams, "proxy": r, "cpu_share": (c1 - c0) / p["window_s"], "rss_mb": rss / 1024}
    ok = not r["error_count"] and r["delivered_per_s"] >= DELIVERED * offered and not r["not_rewritten"]
    if ok and r["p99_ms"] >= ADDED_P99_MS:   # only then can the straight run's share decide it
        direct = asyncio.run(_load(up.port, shape, *load))
        direct.pop("marks")
        row["direct"] = direct
        ok = r["p99_ms"] - direct["p99_ms"] < ADDED_P99_MS
    row["added_p99_ms"] = r["p99_ms"] - row.get("direct", {}).get("p99_ms", 0.0)
    row["ok"] = ok
    log(f"  capacity {shape.name:>9}: {offered:7.0f} events/s ({streams} streams): p99 {r['p99_ms']:6.2f} ms"
        + (f" (straight {row['direct']['p99_ms']:.2f})" if "direct" in row else "")
        + f", delivered {r['delivered_per_s'] / offered:6.1%}, proxy CPU {row['cpu_share']:.0%}"
        + f", RSS {row['rss_mb']:.0f} MB: {'ok' if ok else 'over'}"
        + (f"  ERRORS {r['errors']}" if r["errors"] else ""))
    return row


def run(surfaces: list[str], params: dict, log=print) -> dict:
    """`params`: tps, length_s, settle_s, window_s, start (events/s), max (events/s), precision
    (the ratio of the last rate that passed to the first that failed, to stop at)."""
    up = Upstream()
    out: dict = {"params": dict(params, added_p99_ms=ADDED_P99_MS, delivered=DELIVERED)}
    try:
        for name in surfaces:
            shape = workload.SHAPES[name]
            proxy = Mitmdump("c", up.url).wait_ready()
            try:
                asyncio.run(client.run(proxy.port, [(shape, f"n=50&seed={i}") for i in range(4)]))   # warm-up
                steps: list[dict] = []
                lo = hi = None
                rate = params["start"]
                while params["tps"] <= rate <= params["max"]:
                    row = _step(proxy, up, shape, rate, params, log)
                    steps.append(row)
                    if row["ok"]:
                        lo = row
                    else:
                        hi = row
                    if hi is None:
                        rate *= 2
                    elif lo is None:
                        rate /= 2
                    else:
                        rate = (lo["rate"] + hi["rate"]) / 2
                        if hi["rate"] / lo["rate"] <= params["precision"] or \
                                round(rate / params["tps"]) in (lo["streams"], hi["streams"]):
                            break
                out[name] = {"steps": steps, "capacity": lo, "over": hi,
                             "proxy_warnings": proxy.warnings()[:3]}
            finally:
                proxy.stop()
        return out
    finally:
        up.stop()


def table(cap: dict) -> list[str]:
    p = cap["params"]
    lines = ["", f"6. Capacity of one proxy process (thinkwire): events/s sustained with < {p['added_p99_ms']:g} ms "
                 f"added at p99; streams of {p['tps']:g} tokens/s, {p['length_s']:g} s each, new ones as they end",
             "   ceiling = events/s / the proxy's CPU share at that rate: where one core would run out (no delay budget)",
             f"   {'surface':>9} {'events/s':>9} {'streams':>8} {'p99 ms':>7} {'added':>6} {'proxy CPU':>9} "
             f"{'ceiling':>8} {'RSS MB':>7}  first over (why)"]
    for name, row in cap.items():
        if name == "params":
            continue
        c, h = row["capacity"], row["over"]
        why = "-"
        if h is not None:
            r = h["proxy"]
            why = (f"{h['rate']:.0f}/s (" + ("errors" if r["error_count"] else
                                             f"delivered {r['delivered_per_s'] / h['rate']:.0%}"
                                             if r["delivered_per_s"] < DELIVERED * h["rate"] else
                                             f"added p99 {h['added_p99_ms']:.1f} ms") + ")")
        if c is None:
            lines.append(f"   {name:>9} {'-':>9}: no rate passed, down to one stream ({why})")
            continue
        added = ("" if "direct" in c else "<=") + f"{c['added_p99_ms']:.2f}"   # (no straight run: at most)
        lines.append(f"   {name:>9} {c['rate']:>9.0f} {c['streams']:>8} {c['proxy']['p99_ms']:>7.2f} "
                     f"{added:>6} {c['cpu_share']:>9.0%} {c['rate'] / c['cpu_share']:>8.0f} {c['rss_mb']:>7.0f}  {why}")
    busy = [f"{name} {s['rate']:.0f}/s: {s['direct']['p99_ms']:.1f} ms" for name, row in cap.items() if name != "params"
            for s in row["steps"] if s.get("direct", {}).get("p99_ms", 0) >= p["added_p99_ms"]]
    if busy:
        lines.append("   the load sent straight to the upstream already waited >= the budget at p99 (" + "; ".join(busy)
                     + "): the machine is busy, and these figures are not the proxy's alone")
    return lines
