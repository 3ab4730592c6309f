"""A child process whose output is read as it comes: mitmdump and mitmweb for the demo, the
tests and the benchmark. Its lines are drained in the background (a full pipe would block
it), `wait_for` waits for a line such as mitmdump's "listening at ...", `stop` sends SIGTERM.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

KEEP_LINES = 5000  # the process's last lines, for logs in error messages and tests
LISTENING = r"listening at 127\.0\.0\.1:(\d+)"


def tool(name: str) -> str:
    """A mitmproxy command (mitmdump, mitmweb) of the running Python's environment."""
    return str(Path(sys.executable).with_name(name))


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without THINK_* (so only what a caller sets applies), unbuffered."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("THINK_")}
    env.update(extra or {})
    env["PYTHONUNBUFFERED"] = "1"  # otherwise the lines to wait for come only at exit
    return env


def untraced(env: dict[str, str]) -> dict[str, str]:
    """`env` without what hands pytest-cov's tracer to a child process: for a child whose
    instructions are counted (bench/instructions.py, bench/flowcost.py)."""
    return {k: v for k, v in env.items() if not k.startswith(("COV_CORE_", "COVERAGE_"))}


class ToolProcess:
    def __init__(self, args: list[str], env: dict[str, str] | None = None, name: str | None = None) -> None:
        self.name = name or Path(args[0]).name
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=child_env() if env is None else env)
        self.lines: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            self._q.put(line)
        self._q.put(None)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        """The first new line matching `pattern`; RuntimeError (with the log) if none comes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"{self.name} exited:\n{self.log(40)}")
            m = re.search(pattern, line)
            if m:
                return m
        self.stop()
        raise RuntimeError(f"{self.name} did not start:\n{self.log(40)}")

    def log(self, last: int | None = None) -> str:
        lines = list(self.lines)
        return "\n".join(lines[-last:] if last else lines)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
