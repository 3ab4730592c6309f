"""(5) mitmdump's instructions under callgrind, thinkwire (c) over the pass-through (b).

The CPU ratios of (3) move from round to round with whatever else the machine runs. An
instruction count does not: the same streams through the same proxy count the same to within a
few hundredths of a percent. It leaves out what makes a real run slower than its instructions
(code and data running cold between the other's steps), so it is the floor of (3)'s ratio, and
the figure that shows a change to thinkwire's cost. Opt-in (`--only instructions`): valgrind
runs mitmdump some 50 times slower, so the streams are few (2) and paced ones slow (40 ms).
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import client
import workload
from devtools.process import LISTENING, ToolProcess, child_env, tool, untraced
from procs import CONFIGS, Upstream

STREAMS = 2
MODES = {"burst": (1000, 0.0), "paced": (500, 0.04)}   # events per stream, seconds between events


def available() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


class _Counted(ToolProcess):
    """mitmdump under callgrind, counting only between `zero` and `count`."""

    def __init__(self, config: str, upstream_url: str) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="thinkwire-callgrind-")
        args = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={self.dir.name}/cg.%p", sys.executable, tool("mitmdump"),
                "--mode", f"reverse:{upstream_url}", "--listen-host", "127.0.0.1",
                "--set", "listen_port=0", "--set", f"confdir={self.dir.name}", "--set", "stream_large_bodies=1"]
        addon = CONFIGS[config][1]
        if addon is not None:
            args += ["-s", str(addon)]
        super().__init__(args, env=untraced(child_env()), name=f"mitmdump ({config}, callgrind)")
        self.port = int(self.wait_for(LISTENING, timeout=300).group(1))

    def _control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)], capture_output=True, check=True)

    def zero(self) -> None:
        self._control("-i", "on")
        self._control("-z")

    def count(self) -> int:
        """Instructions since `zero` (callgrind_control -d writes them to a numbered dump)."""
        self._control("-d")
        for path in sorted(glob.glob(f"{self.dir.name}/cg.{self.proc.pid}.*"), key=os.path.getmtime,
                           reverse=True):
            with open(path) as f:
                for line in f:
                    if line.startswith(("summary:", "totals:")):
                        return int(line.split()[1])
        raise RuntimeError("callgrind wrote no count")

    def stop(self) -> None:
        super().stop()
        self.dir.cleanup()


def _plan(shape, n: int, iv: float, seed0: int, streams: int) -> list:
    return [(shape, f"n={n}&iv={iv}&seed={seed0 + i}") for i in range(streams)]


def run(surfaces: list[str], log=print, modes: dict = MODES, streams: int = STREAMS) -> dict:
    """Per mode and surface: (b) and (c)'s instructions for the same streams, and c/b."""
    up = Upstream()
    out: dict = {"streams": streams, "modes": {m: {"events": n, "interval_s": iv} for m, (n, iv) in modes.items()}}
    try:
        for c in ("b", "c"):
            p = _Counted(c, up.url)
            try:
                for name in surfaces:
                    shape = workload.SHAPES[name]
                    asyncio.run(client.run(p.port, _plan(shape, 50, 0.0, 100, streams)))   # warm, not counted
                    p._control("-i", "on")
                    asyncio.run(client.run(p.port, _plan(shape, 50, 0.0, 200, streams)))   # warm what callgrind runs
                    for mode, (n, iv) in modes.items():
                        p.zero()
                        asyncio.run(client.run(p.port, _plan(shape, n, iv, 0, streams)))
                        got = p.count()
                        out.setdefault(mode, {}).setdefault(name, {})[c] = got
                        log(f"  instructions {mode:>5} {name:>9} ({c}): {got / 1e6:.1f}M")
            finally:
                p.stop()
    finally:
        up.stop()
    for mode in modes:
        for name, r in out.get(mode, {}).items():
            r["c_over_b"] = r["c"] / r["b"]
            r["c_minus_b_per_flow"] = (r["c"] - r["b"]) / streams
    return out
