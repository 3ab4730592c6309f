"""Counts, not timings: what mitmdump does per event, with the pass-through (b) and thinkwire (c).

    python bench/syscounts.py [--surfaces chat,ollama] [--streams 8] [--events 4000] [--rounds 3]
                              [--workload spaced] [--configs b,c] [--addon NAME=PATH ...] [--sizes]

The end-to-end CPU ratio (bench/e2e.py) moves with the machine's load, and callgrind
(bench/instructions.py) counts no kernel work; this counts what the kernel sees in the same
burst rounds as the bench: per round and configuration, `perf stat -p` on mitmdump with the
syscall tracepoints (sends, receives, reads, writes, epoll waits, connects: a connect is a
connection to the upstream, the proxy's own asks included), its task-clock, context switches
and page faults; utime and stime from /proc/PID/stat (10 ms ticks); the connections the upstream
accepted (every request); and the bytes and events the client got. Printed per upstream event,
each configuration beside the first and over it, and the task-clock ratio per round (median
and range), the configurations of a round back to back, each in each place in turn.
`--addon o=PATH` adds a configuration (`mitmdump -s PATH`): another build of thinkwire, or a
pass-through that sends what thinkwire's output would cost (more bytes, fewer writes).
`--sizes` also runs one round of each under strace and prints how many sends of which size
went to the client and to the upstream (strace slows the proxy: calls whose count depends on
timing, reads and epoll waits, are not the un-traced ones).

The syscall tracepoints cost mitmdump CPU themselves, not in proportion to its syscalls (on this
VM they added ~2 us an event to the pass-through and ~1 to thinkwire): read the counts from a
traced run, and CPU ratios from `--no-trace`, which reads only the scheduler's CPU time
(procs.cpu_seconds, as the bench does) and the /proc ticks and switches.

Needs perf with tracepoints (root, or perf_event_paranoid -1) and, for --sizes, strace.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "addon"))
sys.path.insert(0, str(HERE.parent))  # devtools/

EVENTS = ["task-clock", "context-switches", "page-faults", "raw_syscalls:sys_enter",
          "syscalls:sys_enter_sendto", "syscalls:sys_enter_recvfrom", "syscalls:sys_enter_write",
          "syscalls:sys_enter_read", "syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_connect",
          "syscalls:sys_enter_getsockopt", "syscalls:sys_enter_setsockopt"]


class Perf:
    """`perf stat -p PID` over a stretch of time: start, then `stop()` returns {event: count}."""

    def __init__(self, pid: int, events: list[str], filter: str | None = None) -> None:
        self.out = tempfile.NamedTemporaryFile(prefix="thinkwire-perf-", suffix=".csv", delete=False)
        self.proc = subprocess.Popen(["perf", "stat", "-x", ",", "-o", self.out.name,
                                      "-e", ",".join(events), *(["--filter", filter] if filter else []),
                                      "-p", str(pid)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)   # perf attaches before the round starts

    def stop(self) -> dict[str, float]:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(10)
        counts: dict[str, float] = {}
        with open(self.out.name) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) > 2 and parts[0] and not line.startswith("#"):
                    try:
                        counts[parts[2]] = float(parts[0])
                    except ValueError:
                        counts[parts[2]] = float("nan")
        os.unlink(self.out.name)
        return counts


def proc_times(pid: int) -> tuple[float, float, int, int, int]:
    """utime, stime (s), voluntary and involuntary context switches (all threads), the threads."""
    from procs import user_system
    vol = invol = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    vol += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    invol += int(line.split()[1])
    return *user_system(pid), vol, invol, len(os.listdir(f"/proc/{pid}/task"))


def one_round(proxy, upstream_pid: int, plan: list, n: int, trace: bool) -> dict[str, float]:
    import client
    from e2e import _sent_events
    from procs import cpu_seconds
    if trace:
        perf = Perf(proxy.pid, EVENTS)
        up = Perf(upstream_pid, ["syscalls:sys_exit_accept4"], "ret >= 0")   # connections accepted
    c0 = cpu_seconds(proxy.pid)
    u0, s0, v0, i0, _ = proc_times(proxy.pid)
    r = asyncio.run(client.run(proxy.port, plan))
    u1, s1, v1, i1, threads = proc_times(proxy.pid)
    cpu_ms = (cpu_seconds(proxy.pid) - c0) * 1e3
    counts, accepted = (perf.stop(), up.stop()) if trace else ({"task-clock": cpu_ms}, {})
    row = {k.split(":")[-1].removeprefix("sys_enter_").replace("sys_enter", "syscalls"): v
           for k, v in counts.items()}
    row.update({"utime_s": u1 - u0, "stime_s": s1 - s0, "vol_switches": v1 - v0,
                "invol_switches": i1 - i0, "threads": threads,
                "client_bytes": r.bytes,
                "client_events": r.events, "events": _sent_events(plan, n), "wall_s": r.wall})
    if trace:
        row["upstream_accepts"] = sum(accepted.values())
    if r.errors:
        row["errors"] = len(r.errors)
    return row


PER_EVENT = ("task-clock", "syscalls", "sendto", "recvfrom", "write", "read", "epoll_wait",
             "context-switches", "vol_switches", "invol_switches", "page-faults", "getsockopt", "setsockopt")
PER_ROUND = ("threads", "connect", "upstream_accepts", "utime_s", "stime_s", "client_bytes", "events", "wall_s", "errors")


def report(name: str, rows: dict[str, list[dict[str, float]]]) -> None:
    """Per event (and per round) for each configuration, and each over the first (the base):
    totals over the rounds, and for the CPU (perf's task-clock) the median and range of the
    per-round ratios, as the bench gives them (each round's configurations ran back to back)."""
    configs = list(rows)
    base = configs[0]

    def total(c: str, k: str) -> float:
        return sum(r.get(k, 0.0) for r in rows[c])
    ev = {c: total(c, "events") for c in configs}
    rounds = len(rows[base])
    print(f"\n{name}: {rounds} rounds each, {ev[base] / rounds:.0f} upstream events a round")
    others = configs[1:]
    print(f"  {'per event':<18}" + "".join(f"{c:>12}" for c in configs) + "".join(f"{c + '/' + base:>9}" for c in others))
    for k in PER_EVENT:
        if not any(k in r for c in configs for r in rows[c]):
            continue   # (perf's, with --no-trace)
        v = {c: total(c, k) / ev[c] for c in configs}
        print(f"  {k:<18}" + "".join(f"{v[c]:>12.4f}" for c in configs)
              + "".join(f"{(v[c] / v[base] if v[base] else float('nan')):>9.3f}" for c in others))
    print(f"  {'per round':<18}")
    for k in PER_ROUND:
        if not any(k in r for c in configs for r in rows[c]):
            continue
        v = {c: total(c, k) / rounds for c in configs}
        print(f"  {k:<18}" + "".join(f"{v[c]:>12.3f}" for c in configs)
              + "".join(f"{(v[c] / v[base] if v[base] else float('nan')):>9.3f}" for c in others))
    for c in others:
        r = sorted(y["task-clock"] / y["events"] / (x["task-clock"] / x["events"])
                   for x, y in zip(rows[base], rows[c]))
        print(f"  task-clock {c}/{base} per round: median {statistics.median(r):.3f} [{r[0]:.3f}-{r[-1]:.3f}]")
    for c in configs:
        u, s = total(c, "utime_s"), total(c, "stime_s")
        print(f"  {c}: user {u / ev[c] * 1e6:.2f} us/event, sys {s / ev[c] * 1e6:.2f} us/event (ticks)")


_CALL = re.compile(r"^\d+\s+(sendto|write)\((\d+)<(.*?)>, .*\)\s+=\s+(-?\d+)")


def sizes(proxy, upstream_port: int, plan: list) -> None:
    """One round under strace (`-yy`: each socket's addresses): the sends and writes, by where
    they went (the client: from the proxy's port; the upstream: to its port), in sizes."""
    import client
    out = tempfile.NamedTemporaryFile(prefix="thinkwire-strace-", delete=False)
    st = subprocess.Popen(["strace", "-f", "-qq", "-yy", "-e", "trace=sendto,write", "-e", "signal=none",
                           "-s", "0", "-o", out.name, "-p", str(proxy.pid)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    asyncio.run(client.run(proxy.port, plan))
    st.send_signal(signal.SIGINT)
    st.wait(10)
    calls: collections.Counter = collections.Counter()
    sent: collections.Counter = collections.Counter()
    hist: collections.Counter = collections.Counter()
    with open(out.name) as f:
        for line in f:
            m = _CALL.match(line)
            if not m or int(m[4]) <= 0:
                continue
            where = ("client" if f":{proxy.port}->" in m[3] else
                     "upstream" if m[3].endswith(f":{upstream_port}]") else "other")
            calls[where] += 1
            sent[where] += int(m[4])
            hist[(where, int(m[4]).bit_length())] += 1
    os.unlink(out.name)
    for where in sorted(calls):
        print(f"  to the {where}: {calls[where]} writes, {sent[where]} bytes; sizes (< 2^k bytes): "
              + ", ".join(f"<{1 << k}: {v}" for (w, k), v in sorted(hist.items()) if w == where))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--surfaces", default="chat,ollama")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--events", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workload", choices=("words", "spaced"), default="spaced")
    ap.add_argument("--sizes", action="store_true", help="one more round of each under strace: writes by peer and size")
    ap.add_argument("--no-trace", action="store_true",
                    help="no perf: the CPU (task-clock: the scheduler's, as the bench reads it) undisturbed")
    ap.add_argument("--configs", default="b,c", help="bench configurations (procs.CONFIGS), the first the base")
    ap.add_argument("--addon", action="append", default=[], metavar="NAME=PATH",
                    help="one more configuration: mitmdump -s PATH, named NAME (for --configs)")
    args = ap.parse_args()
    os.environ["THINKWIRE_BENCH_WORKLOAD"] = "spaced" if args.workload == "spaced" else ""
    import client
    import workload
    from e2e import _plan
    from procs import CONFIGS, Upstream, start_proxies
    for extra in args.addon:
        name, _, path = extra.partition("=")
        CONFIGS[name] = (f"mitmdump -s {path}", Path(path).resolve())
    configs = args.configs.split(",")
    up = Upstream()
    proxies: dict = {}
    try:
        proxies = start_proxies(configs, up.url)
        names = args.surfaces.split(",")
        for p in proxies.values():   # warm-up, as the bench does
            asyncio.run(client.run(p.port, _plan([workload.SHAPES[s] for s in names], len(names), "n=50")))
        print(f"load average at start: {os.getloadavg()}")
        for k, name in enumerate(names):
            plan = _plan([workload.SHAPES[name]], args.streams, f"n={args.events}&iv=0.0")
            rows: dict = {c: [] for c in configs}
            for rnd in range(args.rounds):
                turn = (rnd + k) % len(configs)   # each configuration in each place in turn
                order = configs[turn:] + configs[:turn]
                for c in order:
                    rows[c].append(one_round(proxies[c], up.pid, plan, args.events, not args.no_trace))
            report(name, rows)
            if args.sizes:
                for c in configs:
                    print(f"  strace, one round of ({c}):")
                    sizes(proxies[c], up.port, plan)
        print(f"load average at end: {os.getloadavg()}")
    finally:
        for p in proxies.values():
            p.stop()
        up.stop()


if __name__ == "__main__":
    main()
