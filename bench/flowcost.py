"""thinkwire's instructions per flow, in process, by stretch of the bench's stream (needs valgrind).

    .venv/bin/python bench/flowcost.py responses [--events 1000] [--flows 10] [--delta-chars 40]

Runs the bench workload's stream (workload.py) through what mitmproxy calls
(`StreamDriver.callable()`), in this process, under callgrind: for each stretch (the opening
events, the first delta, the reasoning deltas, the boundary, the answer deltas, the final events)
the flows are cut after it, and the instructions of `--flows` flows over those of none, per
flow, give what the stretch costs. Python's hash seed is fixed and its cycle collector off while
counting; still, from run to run the whole flow moves by about 1%, and a stretch by up to 0.2M
(where some one-time work falls). About 2 minutes per surface.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "addon"), str(HERE.parent)]   # (devtools/)

from devtools.process import untraced  # noqa: E402


def _streams(surface: str, events: int, flows: int) -> list[list[bytes]]:
    import workload
    shape = workload.SHAPES[surface]
    return [shape.stream([workload.render(t, 1_700_000_000_000_000_000 + k)
                          for k, t in enumerate(workload.tokens(events, seed=seed))])
            for seed in range(flows + 1)]


def _child(surface: str, events: int, flows: int, cut: int) -> None:
    """Under callgrind: a warm flow, then `flows` flows cut after `cut` chunks (whole if past the
    end; none for a cut below 0). The streams are made first, the same in every run."""
    from thinkwire import engine
    from thinkwire.marks import LazySealer
    from thinkwire.settings import Settings
    import workload
    settings, sealer = Settings.from_values({}), LazySealer(tempfile.mkdtemp())
    module, request = engine.SURFACES[surface], workload.SHAPES[surface].request()
    streams = _streams(surface, events, flows)

    def run(chunks: list[bytes]) -> None:
        call = engine.stream_driver(module, engine.new_context(settings, request, sealer)).callable()
        for c in chunks:
            call(c)
        if len(chunks) == len(streams[0]):
            call(b"")

    run(streams[-1])   # warm: imports, caches, regular expressions
    gc.collect()
    gc.disable()   # (a collection falls in one run and not another: counts would not add up)
    for s in streams[:flows] if cut >= 0 else []:
        run(s[:cut])


def _count(surface: str, events: int, flows: int, cut: int) -> int:
    env = dict(untraced(dict(os.environ)), PYTHONHASHSEED="0")
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
                        "--child", surface, "--events", str(events), "--flows", str(flows), "--cut", str(cut)],
                       capture_output=True, text=True, env=env, check=True)
    return int(re.search(r"I\s+refs:\s+([\d,]+)", p.stderr).group(1).replace(",", ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("surface", choices=["chat", "messages", "responses"])
    ap.add_argument("--events", type=int, default=1000, help="text deltas per stream (default 1000, as burst)")
    ap.add_argument("--flows", type=int, default=10)
    ap.add_argument("--delta-chars", type=int, help="tokens joined into deltas of up to N characters (workload.py)")
    ap.add_argument("--cut", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.delta_chars:   # (the children read it from the environment, as the workload does)
        os.environ["THINKWIRE_BENCH_DELTA_CHARS"] = str(a.delta_chars)
    if a.child:
        _child(a.surface, a.events, a.flows, a.cut)
        return 0
    if shutil.which("valgrind") is None:
        print("flowcost: valgrind is not installed", file=sys.stderr)
        return 2
    import workload
    shape = workload.SHAPES[a.surface]
    head = len(shape.head({}))
    toks = workload.tokens(a.events, seed=0)   # (fewer than --events with --delta-chars)
    boundary = head + next(k for k, t in enumerate(toks) if "</think>" in "".join(t))
    end = head + len(toks)
    stretches = [("opening events", head), ("first delta", head + 1), ("reasoning deltas", boundary),
                 ("boundary", boundary + 1), ("answer deltas", end), ("final events and end", 10**9)]
    base = _count(a.surface, a.events, a.flows, -1)
    before, start = 0, 0
    print(f"{a.surface}: {len(toks)} deltas, instructions per flow ({a.flows} flows, in process)")
    for name, cut in stretches:
        per = (_count(a.surface, a.events, a.flows, cut) - base) / a.flows
        n = (min(cut, end + len(shape.tail({}, ""))) - start)
        print(f"  {name:<22} {n:>5} chunks {(per - before) / 1e6:>7.2f}M")
        before, start = per, min(cut, end + len(shape.tail({}, "")))
    print(f"  {'whole flow':<22} {start:>5} chunks {before / 1e6:>7.2f}M")
    return 0


if __name__ == "__main__":
    sys.exit(main())
