"""Work counted, not timed: the instructions a piece of code runs, under valgrind's callgrind.

A count does not depend on the machine's load, so "linear" is asserted on counts: a workload is
counted at sizes n, 2n and 4n, and the cost of a byte from 2n to 4n is compared with its cost
from n to 2n (`linear`): 1 for linear work, 2 where quadratic work dominates.

How: the call is run inside `functools.reduce`, with callgrind collecting only there
(`--toggle-collect`) and writing a dump each time it returns (`--dump-after`), so one valgrind
process counts many calls and nothing around them (imports, building the input). That needs
valgrind and a Python whose symbols callgrind can see (a build from source, as pyenv makes; a
stripped distribution Python hides `functools_reduce`): `Unavailable` says which is missing.

Workloads are registered by name in support.worst (`WORKLOADS`): a function of the size that
builds its input and returns (a callable to count, the bytes it reads).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from devtools.process import untraced

ANCHOR = "functools_reduce"
_TESTS = Path(__file__).resolve().parent.parent


class Unavailable(RuntimeError):
    """Counting cannot run here (the reason)."""


def _child(jobs: list) -> None:
    """Under callgrind: each job (workload, size) built, then its call counted."""
    import gc
    from support.worst import WORKLOADS
    sizes = []
    for name, n in jobs:
        WORKLOADS[name](2)[0]()   # one-time work (imports, compiled patterns, caches) is not the workload's
        fn, nbytes = WORKLOADS[name](n)
        gc.collect()
        gc.disable()   # (a collection falling in one call and not another would not add up)
        functools.reduce(lambda a, b: fn(), (0, 0))
        gc.enable()
        sizes.append(nbytes)
    print(json.dumps(sizes))


def _start(jobs: list, tmp: str) -> subprocess.Popen:
    env = dict(untraced(dict(os.environ)), PYTHONHASHSEED="0", PYTHONPATH=os.pathsep.join(
        [str(_TESTS), str(_TESTS.parent / "addon"), str(_TESTS.parent)]))
    return subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg",
                             f"--toggle-collect={ANCHOR}", f"--dump-after={ANCHOR}", sys.executable, "-c",
                             "import sys, json; from support import work; work._child(json.loads(sys.argv[1]))",
                             json.dumps(jobs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _read(p: subprocess.Popen, jobs: list, tmp: str) -> list[tuple[int, int]]:
    out, err = p.communicate(timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"counting failed:\n{err[-3000:]}")
    sizes = json.loads(out.strip().splitlines()[-1])
    counts = {}
    for path in glob.glob(f"{tmp}/cg*"):
        part = total = None
        with open(path) as f:
            for line in f:
                if line.startswith("part:"):
                    part = int(line.split()[1])
                elif line.startswith("summary:"):
                    total = int(line.split()[1])
        counts[part] = total
    # One dump per counted call, numbered from 1 in order, and the rest at exit.
    if len(counts) != len(jobs) + 1:
        raise RuntimeError(f"{len(counts)} dumps for {len(jobs)} calls: something else called {ANCHOR}")
    return [(counts[k + 1], sizes[k]) for k in range(len(jobs))]


def count(jobs: list[tuple[str, int]], processes: int = 2, group: int = 1) -> list[tuple[int, int]]:
    """(instructions, bytes read) of each job's call, in order; the jobs shared among
    `processes` valgrind processes run side by side, `group` jobs in a row in the same one."""
    if shutil.which("valgrind") is None:
        raise Unavailable("valgrind is not installed (apt-get install valgrind)")
    groups = [jobs[i:i + group] for i in range(0, len(jobs), group)]
    shares = [[("probe", 1000)] + [j for g in groups[k::processes] for j in g] for k in range(processes)]
    with tempfile.TemporaryDirectory(prefix="thinkwire-work-") as tmp:
        dirs = [os.path.join(tmp, str(k)) for k in range(processes)]
        for d in dirs:
            os.mkdir(d)
        procs = [_start(share, d) for share, d in zip(shares, dirs)]
        got = [_read(p, share, d) for p, share, d in zip(procs, shares, dirs)]
    if any(g[0][0] == 0 for g in got):
        raise Unavailable(f"callgrind cannot see {ANCHOR} in {sys.executable} (a stripped Python)")
    out: list = [None] * len(groups)
    for k, g in enumerate(got):
        rest = g[1:]
        out[k::processes] = [rest[i:i + group] for i in range(0, len(rest), group)]
    return [r for g in out for r in g]


def linear(jobs: list[tuple[str, int]]) -> dict[str, tuple[float, float]]:
    """Each workload counted at n, 2n and 4n: {name: (growth, instructions per byte)}. The
    instructions per byte are those from 2n to 4n; `growth` is that over the same from n to 2n."""
    # (A workload's three sizes run in one process: what earlier jobs left there, a warm cache or
    # the allocator's state, changed a byte's cost by 15% from one process to the other.)
    got = count([(name, k * n) for name, n in jobs for k in (1, 2, 4)], group=3)
    out = {}
    for i, (name, _) in enumerate(jobs):
        (a, ba), (b, bb), (c, bc) = got[3 * i:3 * i + 3]
        late, early = (c - b) / max(1, bc - bb), (b - a) / max(1, bb - ba)
        out[name] = (late / max(early, 1e-9), late)
    return out
