"""Bench configuration (d): thinkwire, with a timer around its stream callable.

Loads the same addon as (c) and wraps each stream callable thinkwire installs: the time spent
inside it (perf_counter) and the number of calls, summed, are written to the file named by
THINKWIRE_BENCH_TIMES after each flow. That is the callable's own cost inside mitmdump, where
it runs between mitmproxy's steps (colder caches than in process). The timer adds two
perf_counter calls per call (~0.1 us). Load with `mitmdump -s bench/timed_addon.py`.
"""

import os
import sys
import time
from pathlib import Path

from mitmproxy import http

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "addon"))
from thinkwire.addon import ThinkWire  # noqa: E402

_OUT = os.environ.get("THINKWIRE_BENCH_TIMES")
_total = [0.0, 0]


class CallableTimer:
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        inner = flow.response.stream if flow.response else None
        if not callable(inner):
            return
        clock = time.perf_counter

        def timed(chunk: bytes):
            t0 = clock()
            try:
                return inner(chunk)
            finally:
                _total[0] += clock() - t0
                _total[1] += 1
        flow.response.stream = timed

    def response(self, flow: http.HTTPFlow) -> None:
        if _OUT:
            with open(_OUT, "w") as f:
                f.write(f"{_total[0]!r} {_total[1]}\n")

    error = response


addons = [ThinkWire(), CallableTimer()]
