"""(3) End to end through real mitmdump processes, and (4) memory per open stream."""

from __future__ import annotations

import asyncio
import functools
import os
import statistics
import tempfile
import time

import client
import workload
from procs import CONFIGS, Mitmdump, Upstream, start_proxies


def _pct(sorted_vals: list[int], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * q))] / 1e6  # ns -> ms


def _plan(shapes: list, streams: int, query: str) -> list:
    return [(shapes[i % len(shapes)], f"{query}&seed={i}") for i in range(streams)]


def _sent_events(plan: list, n: int) -> int:
    """Events the upstream writes: each shape's head and tail plus n text deltas (with
    `--workload spaced`, the deltas n tokens are cut into)."""
    total = 0
    for shape, query in plan:
        st: dict = {}
        deltas = n
        if workload.SPACED:
            seed = dict(kv.split("=", 1) for kv in query.split("&")).get("seed", "0")
            deltas = len(_deltas(n, int(seed)))
        total += len(shape.head(st)) + deltas + len(shape.tail(st, ""))
    return total


@functools.lru_cache(maxsize=64)
def _deltas(n: int, seed: int) -> list:
    return workload.tokens(n, seed=seed)


def _one(p: Mitmdump, plan: list, n: int) -> dict:
    t0, k0 = p.callable_time()
    c0 = p.cpu()
    r = asyncio.run(client.run(p.port, plan))
    return _measured(p, r, p.cpu() - c0, (t0, k0), plan, n)


def _side_by_side(pb: Mitmdump, pc: Mitmdump, plan: list, n: int) -> tuple[dict, dict]:
    """(b) and (c) at once, each with its own clients for the same plan: both go through the same
    window of the machine's noise (another process, a stolen core, the clock), which a paced round,
    mostly idle, feels more than its own work. A paced proxy uses about a quarter of a core, so
    the two hardly meet; a burst one wants a whole core, so burst rounds stay one after the other."""
    t0 = pc.callable_time()
    c0 = (pb.cpu(), pc.cpu())

    async def both() -> list:
        return await asyncio.gather(client.run(pb.port, plan), client.run(pc.port, plan))

    rb, rc = asyncio.run(both())
    cb, cc = pb.cpu() - c0[0], pc.cpu() - c0[1]
    return _measured(pb, rb, cb, (0.0, 0), plan, n), _measured(pc, rc, cc, t0, plan, n)


def _measured(p: Mitmdump, r: client.RunResult, cpu: float, timed0: tuple[float, int], plan: list, n: int) -> dict:
    t0, k0 = timed0
    t1, k1 = p.callable_time()
    events = _sent_events(plan, n)
    d = sorted(r.delays_ns)
    by_surface: dict = {}
    for s in r.streams:
        b = by_surface.setdefault(s.surface, {"streams": 0, "rewritten": 0, "tags_left": 0})
        b["streams"] += 1
        b["rewritten"] += s.rewritten
        b["tags_left"] += s.tags_left
    return {"cpu_s": cpu, "wall_s": r.wall, "events": events, "client_events": r.events, "client_bytes": r.bytes,
            "stamps": len(d), "p50_ms": _pct(d, 0.50), "p99_ms": _pct(d, 0.99), "max_ms": _pct(d, 1.0),
            "errors": r.errors[:5], "surfaces": by_surface,
            "callable_us_per_call": (t1 - t0) / (k1 - k0) * 1e6 if k1 > k0 else None}


def _summarise(runs: list[dict]) -> dict:
    """Several runs of one configuration: CPU and throughput summed, delays from the best run."""
    cpu = sum(r["cpu_s"] for r in runs)
    ev = sum(r["events"] for r in runs)
    wall = sum(r["wall_s"] for r in runs)
    return {"runs": len(runs), "events": ev, "cpu_s": cpu,
            "cpu_ms_per_1k_events": cpu / ev * 1e6 if ev else float("nan"),
            "events_per_s": ev / wall if wall else float("nan"),
            "p50_ms": min(r["p50_ms"] for r in runs), "p99_ms": min(r["p99_ms"] for r in runs),
            "max_ms": min(r["max_ms"] for r in runs),
            "client_bytes_per_round": sum(r["client_bytes"] for r in runs) / len(runs),
            "errors": [e for r in runs for e in r["errors"]][:5],
            "surfaces": runs[-1]["surfaces"]}


def _per_1k(r: dict) -> float:
    return r["cpu_s"] / r["events"] * 1e6


def _stat(vals: list[float]) -> dict:
    v = sorted(vals)
    return {"median": statistics.median(v), "min": v[0], "max": v[-1], "rounds": len(v)}


def _ratios(runs: dict) -> dict:
    """Per round, (b) and (c) ran back to back on the same load: the figures are the medians
    (and ranges) of the per-round ratios and differences."""
    b, c = runs["b"], runs["c"]
    out = {"cpu_c_over_b": _stat([_per_1k(y) / _per_1k(x) for x, y in zip(b, c)]),
           "thinkwire_us_per_event": _stat([_per_1k(y) - _per_1k(x) for x, y in zip(b, c)]),
           "added_p50_ms": _stat([y["p50_ms"] - x["p50_ms"] for x, y in zip(b, c)]),
           "added_p99_ms": _stat([y["p99_ms"] - x["p99_ms"] for x, y in zip(b, c)])}
    if runs.get("a"):
        out["cpu_c_over_a"] = _stat([_per_1k(c[0]) / _per_1k(runs["a"][0])])
    timed = [r["callable_us_per_call"] for r in runs.get("d", []) if r["callable_us_per_call"] is not None]
    if timed:
        out["callable_us_per_call"] = _stat(timed)
    return out


def run_e2e(modes: dict, log=print, side_by_side: bool = False) -> dict:
    """`modes`: {"burst"|"paced": (streams, events per stream, interval in ms, rounds)}. Each
    surface on its own: per round (b) and (c) run one after the other, the order alternating
    between rounds (and surfaces), or, paced with `side_by_side`, at once (`_side_by_side`);
    (a), mitmproxy with no addon, and (d), thinkwire with its callable timed, run in the first
    round only."""
    names = _surfaces()
    up = Upstream()
    proxies = {}
    try:
        proxies = start_proxies(list(CONFIGS), up.url)
        # Warm up: imports, caches and the first flow's set-up are not what is measured.
        shapes = [workload.SHAPES[name] for name in names]
        for p in proxies.values():
            asyncio.run(client.run(p.port, _plan(shapes, len(shapes), "n=50")))
        out: dict = {"surfaces": names, "config": {k: v[0] for k, v in CONFIGS.items()}}
        for mode, (streams, n, interval_ms, rounds) in modes.items():
            iv = interval_ms / 1000
            side = side_by_side and mode == "paced"
            res: dict = {"streams": streams, "events_per_stream": n, "interval_ms": interval_ms, "side_by_side": side}
            for k, name in enumerate(names):
                plan = _plan([workload.SHAPES[name]], streams, f"n={n}&iv={iv}")
                runs: dict = {"a": [], "b": [], "c": [], "d": []}
                for rnd in range(rounds):
                    order = ["b", "c"] if (rnd + k) % 2 == 0 else ["c", "b"]
                    if rnd == 0:
                        order = ["a"] + order + ["d"]
                    for c in order:
                        if side and c == "b":
                            continue   # (taken with (c))
                        got = ({c: _one(proxies[c], plan, n)} if not side or c != "c"
                               else dict(zip("bc", _side_by_side(proxies["b"], proxies["c"], plan, n))))
                        for cfg, r in got.items():
                            runs[cfg].append(r)
                            log(f"  {mode:>5} {name:>9} ({cfg}) round {rnd + 1}: {_per_1k(r):.1f} cpu ms/1k events, "
                                f"{r['events'] / r['wall_s']:.0f} events/s, delay p50 {r['p50_ms']:.2f} ms "
                                f"p99 {r['p99_ms']:.2f} ms" + (f"  ERRORS {r['errors']}" if r["errors"] else ""))
                row = {c: _summarise(v) for c, v in runs.items() if v}
                row["ratios"] = _ratios(runs)
                res[name] = row
            out[mode] = res
        for c, p in proxies.items():
            out.setdefault("peak_rss_mb", {})[c] = p.hwm_kb() / 1024
            out.setdefault("log_warnings", {})[c] = p.warnings()[:5]
        return out
    finally:
        for p in proxies.values():
            p.stop()
        up.stop()


def _surfaces() -> list[str]:
    from thinkwire import engine
    chosen = os.environ.get("THINKWIRE_BENCH_SURFACES")   # run.py's --surfaces
    return [name for name in engine.SURFACES if name in workload.SHAPES
            and (not chosen or name in chosen.split(","))]


# -- (4) memory per open stream ------------------------------------------------------------
async def _hold_run(p: Mitmdump, shape, streams: int, n1: int, n2: int, iv: float,
                    gates: tuple[str, str], settle: float, timeout: float) -> dict:
    progress = [0] * streams
    q = f"n={n2}&iv={iv}&n1={n1}&g1={gates[0]}&g2={gates[1]}"
    plan = [(shape, f"{q}&seed={i}") for i in range(streams)]
    readings: dict = {}

    async def watch() -> None:
        for key, target, gate in (("n1", n1, gates[0]), ("n2", n2, gates[1])):
            deadline = time.monotonic() + timeout
            while min(progress) < target - 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            readings[f"reached_{key}"] = min(progress)
            await asyncio.sleep(settle)
            readings[f"rss_at_{key}_kb"] = p.rss_kb()
            open(gate, "w").close()

    r = await client.run(p.port, plan, progress, watch)
    readings["errors"] = r.errors[:5]
    readings["rewritten_streams"] = sum(s.rewritten for s in r.streams)
    return readings


def run_memory(streams: int, n1: int, n2: int, interval_ms: float, configs: list[str], settle: float,
               log=print) -> dict:
    """Streams trickle (one event per `interval_ms`) so nothing queues inside the proxy: what is
    measured is what an open stream holds, not a backlog. All streams are held open at n1
    events, RSS read; then at n2 events, RSS read; then they finish."""
    shapes = [workload.SHAPES[name] for name in _surfaces()]
    up = Upstream()
    started: dict = {}
    tmp = tempfile.TemporaryDirectory(prefix="thinkwire-bench-gates-")
    out: dict = {"streams": streams, "n1": n1, "n2": n2, "interval_ms": interval_ms}
    try:
        # A fresh mitmdump per (surface, config): freed memory is not given back, so reusing one
        # would hide the second run's streams in the first one's freed blocks.
        for shape in shapes:
            for c in configs:
                started[(shape.name, c)] = Mitmdump(c, up.url)
        for p in started.values():
            p.wait_ready()
        for (name, c), p in started.items():
            shape = workload.SHAPES[name]
            asyncio.run(client.run(p.port, [(s, "n=20") for s in shapes]))   # warm-up
            idle = p.rss_kb()
            gates = (os.path.join(tmp.name, f"{name}-{c}-1"), os.path.join(tmp.name, f"{name}-{c}-2"))
            r = asyncio.run(_hold_run(p, shape, streams, n1, n2, interval_ms / 1000, gates, settle,
                                      timeout=120))
            per1 = (r["rss_at_n1_kb"] - idle) / streams
            per2 = (r["rss_at_n2_kb"] - idle) / streams
            row = {"idle_rss_mb": idle / 1024, "rss_at_n1_mb": r["rss_at_n1_kb"] / 1024,
                   "rss_at_n2_mb": r["rss_at_n2_kb"] / 1024,
                   "kb_per_stream_at_n1": per1, "kb_per_stream_at_n2": per2,
                   "growth_kb_per_stream": per2 - per1,
                   "peak_rss_mb": p.hwm_kb() / 1024, "errors": r["errors"],
                   "rewritten_streams": r["rewritten_streams"]}
            out.setdefault(name, {})[c] = row
            log(f"  memory {name:>9} ({c}): {per1:6.1f} KB/stream after {n1} events, "
                f"{per2:6.1f} KB/stream after {n2} (growth {per2 - per1:+.1f} KB)"
                + (f"  ERRORS {r['errors']}" if r["errors"] else ""))
            p.stop()
        return out
    finally:
        for p in started.values():
            p.stop()
        up.stop()
        tmp.cleanup()
