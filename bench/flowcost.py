"""thinkwire's instructions per flow, in process, by stretch of the bench's stream (needs valgrind).

    .venv/bin/python bench/flowcost.py responses [--events 1000] [--flows 10] [--delta-chars 40] [--workload spaced]

Runs the bench workload's stream (workload.py) through what mitmproxy calls
(`StreamDriver.callable()`), in this process, under callgrind: for each stretch (the opening
events, the first delta, the reasoning deltas, the boundary, the answer deltas, the final events)
the flows are cut after it (each where its own stretch ends: with larger deltas the boundary
falls at another delta in each), and the instructions of `--flows` flows over those of none, per
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


STRETCHES = ["opening events", "first delta", "reasoning deltas", "boundary", "answer deltas", "final events and end"]


def _streams(surface: str, events: int, flows: int) -> list[tuple[list[bytes], list[int]]]:
    """Each flow's chunks, and where each stretch of it ends (each flow its own: with larger
    deltas the boundary falls at another delta in each)."""
    import workload
    shape = workload.SHAPES[surface]
    out = []
    for seed in range(flows + 1):
        toks = workload.tokens(events, seed=seed)
        chunks = shape.stream([workload.render(t, 1_700_000_000_000_000_000 + k) for k, t in enumerate(toks)])
        head = len(shape.head({}))
        boundary = head + next(k for k, t in enumerate(toks) if "</think>" in t[0] + t[1])
        out.append((chunks, [head, head + 1, boundary, boundary + 1, head + len(toks), len(chunks)]))
    return out


def _child(surface: str, events: int, flows: int, cut: int) -> None:
    """Under callgrind: a warm flow, then `flows` flows cut after stretch `cut` (none for a cut
    below 0). The streams are made first, the same in every run."""
    from thinkwire import engine
    from thinkwire.marks import LazySealer
    from thinkwire.settings import Settings
    import workload
    settings, sealer = Settings.from_values({}), LazySealer(tempfile.mkdtemp())
    module, request = engine.SURFACES[surface], workload.SHAPES[surface].request()
    streams = _streams(surface, events, flows)

    def run(chunks: list[bytes], whole: bool) -> None:
        call = engine.stream_driver(module, engine.new_context(settings, request, sealer)).callable()
        for c in chunks:
            call(c)
        if whole:
            call(b"")

    run(streams[-1][0], True)   # warm: imports, caches, regular expressions
    gc.collect()
    gc.disable()   # (a collection falls in one run and not another: counts would not add up)
    for chunks, ends in streams[:flows] if cut >= 0 else []:
        run(chunks[:ends[cut]], cut == len(ends) - 1)


def _count(surface: str, events: int, flows: int, cut: int) -> int:
    env = dict(untraced(dict(os.environ)), PYTHONHASHSEED="0")
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
                        "--child", surface, "--events", str(events), "--flows", str(flows), "--cut", str(cut)],
                       capture_output=True, text=True, env=env, check=True)
    return int(re.search(r"I\s+refs:\s+([\d,]+)", p.stderr).group(1).replace(",", ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("surface", choices=["chat", "messages", "responses", "ollama"])
    ap.add_argument("--events", type=int, default=1000, help="text deltas per stream (default 1000, as burst)")
    ap.add_argument("--flows", type=int, default=10)
    ap.add_argument("--delta-chars", type=int, help="tokens joined into deltas of up to N characters (workload.py)")
    ap.add_argument("--workload", choices=("words", "spaced"), default="words",
                    help="the bench's workload (workload.py): spaced is issue 34's chat shape, 1-6 character deltas")
    ap.add_argument("--cut", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.delta_chars:   # (the children read it from the environment, as the workload does)
        os.environ["THINKWIRE_BENCH_DELTA_CHARS"] = str(a.delta_chars)
    if a.workload == "spaced":   # (read by workload.py at import, here and in the children)
        os.environ["THINKWIRE_BENCH_WORKLOAD"] = "spaced"
    if a.child:
        _child(a.surface, a.events, a.flows, a.cut)
        return 0
    if shutil.which("valgrind") is None:
        print("flowcost: valgrind is not installed", file=sys.stderr)
        return 2
    streams = _streams(a.surface, a.events, a.flows)
    base = _count(a.surface, a.events, a.flows, -1)
    before, start = 0, 0
    print(f"{a.surface}: {sum(e[4] - e[0] for _, e in streams[:a.flows]) / a.flows:.0f} deltas, instructions per "
          f"flow ({a.flows} flows, in process)")
    for k, name in enumerate(STRETCHES):
        per = (_count(a.surface, a.events, a.flows, k) - base) / a.flows
        end = sum(e[k] for _, e in streams[:a.flows]) / a.flows   # (the stretch's chunks, on average)
        print(f"  {name:<22} {end - start:>5.0f} chunks {(per - before) / 1e6:>7.2f}M")
        before, start = per, end
    print(f"  {'whole flow':<22} {start:>5.0f} chunks {before / 1e6:>7.2f}M")
    return 0


if __name__ == "__main__":
    sys.exit(main())
