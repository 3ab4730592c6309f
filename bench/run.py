"""thinkwire benchmark: `./scripts/bench [--quick] [--json FILE] [--only PARTS]`.

Measures, side by side in one run (see bench/README.md for what each figure means):
  1. splitter  throughput by stream size and chunk size, beside the rescan baseline
  2. surfaces  per-event cost of each surface's stream rewrite, beside JSON and pass-through
  3. e2e       each surface through real mitmdump, burst and paced: (a) no addon, (b) pass-through
               stream callable, (c) thinkwire; (b)/(c) alternated over 25 (burst) and 13 (paced)
               rounds: CPU ratio, delay
  4. memory    RSS per open stream with 256 held-open streams, at two stream lengths
  5. instructions (opt-in, `--only instructions`, needs valgrind) mitmdump's instructions under
               callgrind, (c) over (b): the noise-free floor of the CPU ratio of 3
  6. capacity  events/s one thinkwire process sustains with < 5 ms added at p99, per surface
  7. ttfb      the time to first byte the server ask adds (think_ask_template): uncached and cached,
               beside the pass-through (b) and thinkwire with the ask off
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "addon"))
sys.path.insert(0, str(HERE.parent))  # devtools/

PARTS = ("splitter", "surfaces", "e2e", "memory", "capacity", "ttfb")
EXTRA = ("instructions",)   # opt-in: needs valgrind, ~8 minutes

FULL = {
    "sizes": [10_000, 100_000, 1_000_000, 10_000_000], "rescan_budget": 6.0, "min_total": 0.3,
    "surface_events": 2000, "surface_reps": 5,
    # End to end, per surface: (streams, events per stream, ms between a stream's events, rounds).
    "burst": (16, 1000, 0.0, 25), "paced": (16, 500, 10.0, 13),
    "mem_streams": 256, "mem_n1": 20, "mem_n2": 100, "mem_interval_ms": 40.0,
    "held_lengths": [100, 1000, 2000, 10000], "mem_configs": ["a", "c"],
    "settle": 0.5,
    # (6): streams of 60 tokens/s lasting 8 s (480 tokens), 4 s measured per rate after 1 s;
    # rates from 2,000 events/s.
    "capacity": {"tps": 60.0, "length_s": 8.0, "settle_s": 1.0, "window_s": 4.0, "start": 2000.0, "max": 64000.0,
                 "precision": 1.15},
    "ttfb_rounds": 60,   # (7) requests per configuration
}
QUICK = {
    "sizes": [10_000, 30_000], "rescan_budget": 1.0, "min_total": 0.0,
    "surface_events": 100, "surface_reps": 1,
    "burst": (4, 40, 0.0, 1), "paced": (4, 20, 2.0, 1),
    "mem_streams": 6, "mem_n1": 5, "mem_n2": 20, "mem_interval_ms": 2.0, "held_lengths": [10, 100], "mem_configs": ["a", "c"],
    "settle": 0.05,
    "capacity": {"tps": 60.0, "length_s": 1.0, "settle_s": 0.4, "window_s": 0.4, "start": 240.0, "max": 240.0,
                 "precision": 2.0},
    "ttfb_rounds": 3,
}

TARGETS = {
    "e2e_cpu_c_over_b (burst)": 1.10,  # mitmdump's CPU with thinkwire / with a pass-through callable
    "e2e_cpu_c_over_b (paced)": 1.05,
    "e2e_added_p99_ms (paced)": 1.0,   # at most 1 ms added at p99
    "splitter_flatness": 1.3,          # ns/char from 10 KB to 10 MB within 1.3x
    "splitter_speedup_at_100k": 50.0,  # beats the rescan baseline by 50x at 100 KB
}


def machine() -> dict:
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import mitmproxy.version
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "mitmproxy": mitmproxy.version.VERSION, "loadavg_start": os.getloadavg()}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def targets(res: dict) -> dict:
    out = {}
    e = res.get("e2e", {})
    for mode in ("burst", "paced"):
        for name in e.get("surfaces", []):
            q = e.get(mode, {}).get(name, {}).get("ratios")
            if not q:
                continue
            out[f"e2e_cpu_c_over_b ({mode}, {name}, median)"] = (q["cpu_c_over_b"]["median"],
                                                                  TARGETS[f"e2e_cpu_c_over_b ({mode})"])
            if mode == "paced":
                out[f"e2e_added_p99_ms (paced, {name}, median)"] = (q["added_p99_ms"]["median"],
                                                                     TARGETS["e2e_added_p99_ms (paced)"])
    sp = res.get("splitter", {})
    for label, v in sp.get("flatness", {}).items():
        out[f"splitter_flatness ({label} chunks)"] = (v, TARGETS["splitter_flatness"])
    for label, v in sp.get("flatness_within_stream", {}).items():
        out[f"splitter_flatness within one stream ({label} chunks)"] = (v, TARGETS["splitter_flatness"])
    for label, v in sp.get("speedup_at_100k", {}).items():
        if label == "1-8":  # token-sized deltas: the case streaming proxies live in
            out[f"splitter_speedup_at_100k ({label} chunks)"] = (v, TARGETS["splitter_speedup_at_100k"])
    return {k: {"value": v, "target": t, "met": (v >= t) if "speedup" in k else (v <= t)}
            for k, (v, t) in out.items()}


# -- the printed table ---------------------------------------------------------------------
def _f(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def table(res: dict) -> str:
    lines: list[str] = []
    m = res["machine"]
    lines.append(f"thinkwire bench  ({'quick' if res['quick'] else 'full'})  {m['nproc']} x {m['cpu']}, "
                 f"Python {m['python']}, mitmproxy {m['mitmproxy']}, load avg at start "
                 f"{m['loadavg_start'][0]:.2f}, at end {m.get('loadavg_end', [0])[0]:.2f}, "
                 f"{res['seconds']:.0f} s")
    sp = res.get("splitter")
    if sp:
        lines += ["", "1. Splitter (ns per character; rescan = append + re-parse the buffer each chunk)",
                  f"   {'chunks':>7} {'size':>9} {'splitter':>9} {'ns/chunk':>9} {'rescan':>10} {'speedup':>8}"]
        for r in sp["rows"]:
            lines.append(f"   {r['chunking']:>7} {r['size'] / 1e3:>7.0f}KB {r['splitter_ns_per_char']:>9.1f} "
                         f"{r['splitter_ns_per_chunk']:>9.0f} {_f(r['rescan_ns_per_char']):>10} "
                         f"{_f(r['speedup'], '{:.0f}x'):>8}")
        lines.append("   flatness (max/min ns per char over sizes): " +
                     ", ".join(f"{k} chunks {v:.2f}x" for k, v in sp["flatness"].items()))
        for r in sp["rows"]:
            if r.get("segments"):
                lines.append(f"   inside one {r['size'] / 1e6:g} MB stream ({r['chunking']} chunks), ns/char by position: " +
                             ", ".join(f"{g['from'] / 1e3:.0f}-{g['to'] / 1e3:.0f} KB {g['ns_per_char']:.0f}"
                                       for g in r["segments"]))
    su = res.get("surfaces")
    if su:
        lines += ["", "2. Per event, one event per call (us/event); callable = what mitmproxy calls (the C part in "
                      "front of the driver, where built), driver = the Python driver alone",
                  f"   {'surface':>9} {'kind':>9} {'pass':>6} {'sse':>6} {'json rt':>8} {'surface':>8} "
                  f"{'driver':>7} {'drv/json':>8} {'callable':>8}"]
        for name, kinds in su.items():
            for kind, r in kinds.items():
                lines.append(f"   {name:>9} {kind:>9} {r['pass_us']:>6.2f} {r['sse_us']:>6.1f} {r['json_us']:>8.1f} "
                             f"{r['surface_us']:>8.1f} {r['driver_us']:>7.1f} {r['driver_vs_json']:>7.1f}x "
                             f"{r.get('callable_us', float('nan')):>8.2f}"
                             + ("  FELL BACK" if r.get("fell_back") else ""))
    e = res.get("e2e")
    if e:
        lines += ["", "3. End to end, each surface on its own through mitmdump: (a) no addon, (b) a pass-through "
                      "stream callable, (c) thinkwire; (b) and (c) alternate, round by round",
                  "   c/b = mitmdump CPU per event, (c) over (b): median [range] of the rounds; us/ev = (c) - (b); "
                  "call us = time inside thinkwire's callable per call, in mitmdump (d); added delay = (c) - (b) delay"]
        for mode in ("burst", "paced"):
            m = e.get(mode)
            if not m:
                continue
            lines.append(f"   {mode}: {m['streams']} streams x {m['events_per_stream']} events"
                         + (f", one event per {m['interval_ms']:g} ms per stream" if m["interval_ms"] else
                            ", each event its own chunk, as fast as the proxy reads")
                         + ("; (b) and (c) side by side, at once each round" if m.get("side_by_side") else ""))
            lines.append(f"   {'surface':>9} {'rounds':>6} {'c/b':>5} {'range':>11} {'c/a':>5} {'us/ev':>6} {'call us':>7} "
                         f"{'cpu ms/1k ev a/b/c':>19} {'added p50 ms':>12} {'added p99 ms':>12} "
                         f"{'p99 ms b/c':>11} {'bytes c/b':>9}  rewritten")
            for name in e["surfaces"]:
                row = m.get(name)
                if not row:
                    continue
                q = row["ratios"]
                cb, us, p50, p99 = q["cpu_c_over_b"], q["thinkwire_us_per_event"], q["added_p50_ms"], q["added_p99_ms"]
                ca = q.get("cpu_c_over_a", {}).get("median")
                call = q.get("callable_us_per_call", {}).get("median")
                cpu = "/".join(_f(row[c]["cpu_ms_per_1k_events"], "{:.0f}") if c in row else "-" for c in "abc")
                rw = ", ".join(f"{c} {sum(v['rewritten'] for v in row[c]['surfaces'].values())}/"
                               f"{sum(v['streams'] for v in row[c]['surfaces'].values())}" for c in "bc")
                errs = [x for c in "abcd" if c in row for x in row[c]["errors"]]
                by = row["c"]["client_bytes_per_round"] / row["b"]["client_bytes_per_round"]
                lines.append(f"   {name:>9} {cb['rounds']:>6} {cb['median']:>5.2f} "
                             f"{cb['min']:>5.2f}-{cb['max']:<5.2f} {_f(ca, '{:.2f}'):>5} {us['median']:>6.1f} {_f(call):>7} "
                             f"{cpu:>19} {p50['median']:>+12.2f} {p99['median']:>+12.2f} "
                             f"{row['b']['p99_ms']:>5.1f}/{row['c']['p99_ms']:<5.1f} {by:>9.3f}  {rw}"
                             + (f"  ERRORS {errs[:2]}" if errs else ""))
        for c, w in e.get("log_warnings", {}).items():
            if w:
                lines.append(f"   mitmdump ({c}) log: {w[:2]}")
    mem = res.get("memory")
    if mem:
        lines += ["", f"4. Memory: {mem['streams']} open streams (one event per {mem['interval_ms']:g} ms each), "
                      f"RSS over an idle (warmed-up) mitmdump, after {mem['n1']} and after {mem['n2']} events per stream",
                  f"   {'surface':>9} {'cfg':>3} {'idle MB':>8} {'KB/stream@n1':>13} {'KB/stream@n2':>13} "
                  f"{'growth KB':>10}"]
        for name, cfgs in mem.items():
            if not isinstance(cfgs, dict):
                continue
            for c, r in cfgs.items():
                lines.append(f"   {name:>9} {c:>3} {r['idle_rss_mb']:>8.1f} {r['kb_per_stream_at_n1']:>13.1f} "
                             f"{r['kb_per_stream_at_n2']:>13.1f} {r['growth_kb_per_stream']:>+10.1f}"
                             + (f"  ERRORS {r['errors'][:2]}" if r["errors"] else ""))
    mh = res.get("memory_held")
    if mh:
        lines.append("   held by one stream's rewriter (tracemalloc, in process), by events passed:")
        for name, row in mh.items():
            lines.append(f"   {name:>9}  " + ", ".join(f"{k}: {v:.1f} KB" for k, v in row.items()))
    ins = res.get("instructions")
    if ins:
        lines += ["", f"5. Instructions under callgrind, mitmdump: {ins['streams']} streams; c/b = (c) over (b); "
                      "c-b per flow, in millions"]
        for mode, m in ins["modes"].items():
            lines.append(f"   {mode} ({m['events']} events per stream, {m['interval_s'] * 1e3:g} ms apart): " +
                         ", ".join(f"{name} {r['c_over_b']:.3f} ({r['c_minus_b_per_flow'] / 1e6:.1f}M)"
                                   for name, r in ins.get(mode, {}).items()))
    if res.get("capacity"):
        import capacity
        lines += capacity.table(res["capacity"])
    tt = res.get("ttfb")
    if tt:
        lines += ["", "7. Time to first byte: the server ask (think_ask_template), ms; added = median - (b)'s"]
        for name, r in tt.items():
            lines.append(f"   {name:<26} median {r['median_ms']:7.2f}  p90 {r['p90_ms']:7.2f}  "
                         f"added {r['added_median_ms']:+7.2f}")
    t = res.get("targets")
    if t:
        lines += ["", "Targets"]
        for k, v in t.items():
            lines.append(f"   {'met   ' if v['met'] else 'MISSED'} {k}: {v['value']:.2f} (target "
                         f"{'>=' if 'speedup' in k else '<='} {v['target']:g})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test (seconds)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--only", default=",".join(PARTS),
                    help=f"comma-separated subset of {','.join(PARTS + EXTRA)} (default: all but {','.join(EXTRA)})")
    ap.add_argument("--streams", type=int, help="end-to-end concurrent streams, both modes (default 16)")
    ap.add_argument("--events", type=int, help="end-to-end text events per stream, both modes, and the "
                                               "instruction counts' (default 1000 burst, 500 paced)")
    ap.add_argument("--interval-ms", type=float, help="paced mode: ms between events of a stream (default 10)")
    ap.add_argument("--rounds", type=int, help="end-to-end rounds per mode and surface (default 25 burst, 13 paced)")
    ap.add_argument("--modes", default="burst,paced",
                    help="end-to-end and instruction-count modes to run, comma-separated (default burst,paced); paced with "
                         "--events 7500 takes 75 s a round, so larger-delta runs take burst only")
    ap.add_argument("--side-by-side", action="store_true",
                    help="paced mode: run (b) and (c) at once each round, so both see the same noise of the "
                         "machine (a paced round is mostly idle and feels it most); their delays then meet too")
    ap.add_argument("--surfaces", help="comma-separated surfaces for the end-to-end, memory, capacity and "
                                       "instruction parts (default all: chat,messages,responses,ollama)")
    ap.add_argument("--delta-chars", type=int, help="larger deltas: --events tokens joined into deltas of up to N "
                                                    "characters, as servers that flush several tokens at once")
    ap.add_argument("--workload", choices=("words", "spaced"), default="words",
                    help="words (default): one word a delta, compact JSON; spaced: issue 34's chat shape, deltas "
                         "of 1-6 characters on every surface and chat written as Python's json.dumps writes it")
    args = ap.parse_args(argv)
    if args.workload == "spaced":   # (read by workload.py, here and in the upstream process)
        if args.delta_chars:
            ap.error("--workload spaced cuts its own deltas: without --delta-chars")
        os.environ["THINKWIRE_BENCH_WORKLOAD"] = "spaced"
    if args.delta_chars:   # (read by workload.py, here and in the upstream process)
        os.environ["THINKWIRE_BENCH_DELTA_CHARS"] = str(args.delta_chars)
    p = dict(QUICK if args.quick else FULL)
    for mode in ("burst", "paced"):
        streams, n, iv, rounds = p[mode]
        p[mode] = (args.streams or streams, args.events or n,
                   args.interval_ms if args.interval_ms is not None and mode == "paced" else iv,
                   args.rounds or rounds)
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    modes = [x.strip() for x in args.modes.split(",") if x.strip()]
    if not modes or set(modes) - {"burst", "paced"}:
        ap.error(f"--modes takes burst and/or paced, not {args.modes!r}")
    unknown = set(only) - set(PARTS + EXTRA)
    if unknown:
        ap.error(f"unknown part(s) {sorted(unknown)}; choose from {', '.join(PARTS + EXTRA)}")

    if args.surfaces:   # (read by e2e._surfaces)
        os.environ["THINKWIRE_BENCH_SURFACES"] = args.surfaces
    for k in list(os.environ):  # the defaults, whatever THINK_* the shell has
        if k.startswith("THINK_"):
            del os.environ[k]

    import e2e
    if args.surfaces and set(args.surfaces.split(",")) - set(e2e._surfaces()):
        ap.error(f"--surfaces: unknown surface in {args.surfaces!r}")
    import split_bench
    import surface_bench
    from thinkwire.settings import Settings

    t0 = time.monotonic()
    res: dict = {"quick": args.quick, "machine": machine(), "params": p}
    if "splitter" in only:
        log("1. splitter")
        # The rules a streamed flow for the workload's model gets (the default tag pairs).
        from thinkwire import engine
        from workload import MODEL
        r = engine.new_context(Settings.from_values({}), {"model": MODEL}).rules()
        res["splitter"] = split_bench.run(r, p["sizes"], p["rescan_budget"], p["min_total"], log)
    if "surfaces" in only:
        log("2. surfaces")
        res["surfaces"] = surface_bench.run(p["surface_events"], p["surface_reps"], log)
    if "e2e" in only:
        log("3. end to end")
        res["e2e"] = e2e.run_e2e({m: p[m] for m in modes}, log, args.side_by_side)
    if "memory" in only:
        log("4. memory")
        res["memory_held"] = surface_bench.held(p["held_lengths"], log)
        res["memory"] = e2e.run_memory(p["mem_streams"], p["mem_n1"], p["mem_n2"], p["mem_interval_ms"],
                                       p["mem_configs"], p["settle"], log)
    if "capacity" in only:
        import capacity
        log("6. capacity")
        res["capacity"] = capacity.run(e2e._surfaces(), p["capacity"], log)
    if "ttfb" in only:
        import ttfb
        log("7. time to first byte (server ask)")
        res["ttfb"] = ttfb.run(p["ttfb_rounds"], log)
    if "instructions" in only:
        import instructions
        if instructions.available():
            log("5. instructions (callgrind)")
            counted = {m: (args.events or n, iv) for m, (n, iv) in instructions.MODES.items() if m in modes}
            res["instructions"] = instructions.run(e2e._surfaces(), log, counted)
        else:
            log("5. instructions: valgrind (with callgrind_control) is not installed; skipped")
    res["targets"] = targets(res)
    res["seconds"] = time.monotonic() - t0
    res["machine"]["loadavg_end"] = os.getloadavg()
    print(table(res), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
