"""The processes of the end-to-end runs: the upstream and mitmdump, and /proc readings of them."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
THINK_ADDON = ROOT / "addon" / "think.py"
PASS_ADDON = HERE / "passthrough_addon.py"
_TICK = os.sysconf("SC_CLK_TCK")

CONFIGS = {
    "a": ("mitmdump, streaming on, no addon", None),
    "b": ("mitmdump + pass-through stream callable", PASS_ADDON),
    "c": ("mitmdump + thinkwire", THINK_ADDON),
}


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def status_kb(pid: int, key: str) -> int:
    """A `VmRSS` / `VmHWM` line of /proc/PID/status, in kB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class _Proc:
    proc: subprocess.Popen

    def _start_drain(self) -> None:
        self.lines: list[str] = []
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if len(self.lines) < 2000:
                self.lines.append(line)
            self._q.put(line)
        self._q.put(None)

    def _wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"{self.name} exited:\n" + "\n".join(self.lines[-40:]))
            m = re.search(pattern, line)
            if m:
                return m
        self.stop()
        raise RuntimeError(f"{self.name} did not start:\n" + "\n".join(self.lines[-40:]))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _env() -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("THINK_")}
    e["PYTHONUNBUFFERED"] = "1"
    return e


class Upstream(_Proc):
    name = "upstream"

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "upstream.py")], env=_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._start_drain()
        self.port = int(self._wait_for(r"^PORT (\d+)").group(1))
        self.url = f"http://127.0.0.1:{self.port}"


class Mitmdump(_Proc):
    """`mitmdump --mode reverse:UPSTREAM` with one of the bench configurations (a, b, c)."""

    def __init__(self, config: str, upstream_url: str) -> None:
        self.config = config
        self.name = f"mitmdump ({config})"
        self._conf = tempfile.TemporaryDirectory(prefix="thinkwire-bench-")
        args = [str(Path(sys.executable).with_name("mitmdump")),
                "--mode", f"reverse:{upstream_url}", "--listen-host", "127.0.0.1",
                "--set", "listen_port=0", "--set", f"confdir={self._conf.name}",
                "--set", "stream_large_bodies=1"]
        addon = CONFIGS[config][1]
        if addon is not None:
            args += ["-s", str(addon)]
        self.proc = subprocess.Popen(args, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._start_drain()

    def wait_ready(self) -> "Mitmdump":
        self.port = int(self._wait_for(r"listening at 127\.0\.0\.1:(\d+)").group(1))
        return self

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

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
