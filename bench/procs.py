"""The processes of the end-to-end runs: the upstream and mitmdump, and /proc readings of them."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from devtools.process import LISTENING, ToolProcess, child_env, tool

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
THINK_ADDON = ROOT / "addon" / "think.py"
PASS_ADDON = HERE / "passthrough_addon.py"
TIMED_ADDON = HERE / "timed_addon.py"
_TICK = os.sysconf("SC_CLK_TCK")

CONFIGS = {
    "a": ("mitmdump, streaming on, no addon", None),
    "b": ("mitmdump + pass-through stream callable", PASS_ADDON),
    "c": ("mitmdump + thinkwire", THINK_ADDON),
    "d": ("mitmdump + thinkwire, its stream callable timed", TIMED_ADDON),
}


def cpu_seconds(pid: int) -> float:
    """CPU time of the whole process (all its threads), in ns from the scheduler's account
    (/proc/PID/task/*/schedstat) where the kernel has it; else utime + stime from /proc/PID/stat,
    which come in clock ticks (10 ms): a paced round uses ~1.2 s, so one tick is ~1% of it."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    return sum(user_system(pid))


def user_system(pid: int) -> tuple[float, float]:
    """utime and stime of the whole process, in seconds (10 ms ticks), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / _TICK, int(fields[12]) / _TICK


def status_kb(pid: int, key: str) -> int:
    """A `VmRSS` / `VmHWM` line of /proc/PID/status, in kB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class Upstream(ToolProcess):
    def __init__(self) -> None:
        super().__init__([sys.executable, str(HERE / "upstream.py")], name="upstream")
        self.port = int(self.wait_for(r"^PORT (\d+)").group(1))
        self.url = f"http://127.0.0.1:{self.port}"


class Mitmdump(ToolProcess):
    """`mitmdump --mode reverse:UPSTREAM` with one of the bench configurations (a, b, c, d)."""

    def __init__(self, config: str, upstream_url: str, options: dict[str, str] | None = None) -> None:
        self.config = config
        self._conf = tempfile.TemporaryDirectory(prefix="thinkwire-bench-")
        self.times = os.path.join(self._conf.name, "callable-times")   # (d) writes it
        args = [tool("mitmdump"),
                "--mode", f"reverse:{upstream_url}", "--listen-host", "127.0.0.1",
                "--set", "listen_port=0", "--set", f"confdir={self._conf.name}",
                "--set", "stream_large_bodies=1"]
        addon = CONFIGS[config][1]
        if addon is not None:
            args += ["-s", str(addon)]
        for k, v in (options or {}).items():
            args += ["--set", f"{k}={v}"]
        super().__init__(args, env=child_env({"THINKWIRE_BENCH_TIMES": self.times}), name=f"mitmdump ({config})")

    def wait_ready(self) -> "Mitmdump":
        self.port = int(self.wait_for(LISTENING).group(1))
        return self

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def callable_time(self) -> tuple[float, int]:
        """(d): seconds inside thinkwire's stream callables so far, and the calls."""
        try:
            with open(self.times) as f:
                secs, calls = f.read().split()
            return float(secs), int(calls)
        except (OSError, ValueError):
            return 0.0, 0

    def rss_kb(self) -> int:
        return status_kb(self.pid, "VmRSS")

    def hwm_kb(self) -> int:
        return status_kb(self.pid, "VmHWM")

    def warnings(self) -> list[str]:
        return [ln for ln in self.lines if "rewrite failed" in ln or "Traceback" in ln
                or "passed through unchanged" in ln or "error" in ln.lower()]

    def stop(self) -> None:
        super().stop()
        self._conf.cleanup()


def start_proxies(configs: list[str], upstream_url: str) -> dict[str, Mitmdump]:
    started = {c: Mitmdump(c, upstream_url) for c in configs}
    try:
        for p in started.values():
            p.wait_ready()
    except Exception:
        for p in started.values():
            p.stop()
        raise
    return started
