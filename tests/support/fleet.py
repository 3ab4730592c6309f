"""Replicas behind a real HAProxy, configured by the shipped deploy/haproxy/haproxy.cfg itself
(its addresses from the environment): tests/test_fleet_e2e.py (keys) and
tests/test_memory_fleet_e2e.py (a shared reasoning memory)."""

from __future__ import annotations

import csv
import io
import shutil
import time

import httpx

from conftest import ROOT
from devtools.process import ToolProcess, child_env

HAPROXY = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
CONFIG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
MISSING = "haproxy is not installed (Debian/Ubuntu: apt-get install haproxy; .ci/run installs it)"


class Balancer:
    """HAProxy in front of replica1 and replica2 (ports), round robin, up when both are."""

    def __init__(self, ports: dict, lb: int, stats: int) -> None:
        self.url, self.stats = f"http://127.0.0.1:{lb}", f"http://127.0.0.1:{stats}"
        self.proc = ToolProcess([HAPROXY, "-db", "-f", str(CONFIG)], child_env({
            "THINKWIRE_LB_BIND": f"127.0.0.1:{lb}", "THINKWIRE_LB_STATS_BIND": f"127.0.0.1:{stats}",
            "THINKWIRE_REPLICA_1": f"127.0.0.1:{ports['replica1']}",
            "THINKWIRE_REPLICA_2": f"127.0.0.1:{ports['replica2']}"}), name="haproxy")
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.status() == {"replica1": "UP", "replica2": "UP", "BACKEND": "UP"}:
                    break
            except httpx.HTTPError:
                pass
            assert self.proc.alive() and time.monotonic() < deadline, self.proc.log(20)
            time.sleep(0.1)

    def status(self) -> dict:
        text = httpx.get(self.stats + "/stats;csv", timeout=5).text.lstrip("# ")
        return {r["svname"]: r["status"] for r in csv.DictReader(io.StringIO(text)) if r["pxname"] == "thinkwire"}

    def wait(self, name: str, status: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while self.status().get(name) != status:
            assert time.monotonic() < deadline, f"HAProxy never saw {name} {status}: {self.status()}\n" + \
                self.proc.log(20)
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.stop()
