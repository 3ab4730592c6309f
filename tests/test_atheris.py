"""The coverage-guided fuzz target (fuzz/fuzz_splitter_sse.py), run for a bounded time.

THINKWIRE_ATHERIS_SECONDS sets the budget (default 30); the run count is printed for the
report. Skipped, with the reason, where atheris is not installed.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

atheris = pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris; needs a "
                                                "prebuilt wheel or clang with libFuzzer)")

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "fuzz" / "fuzz_splitter_sse.py"


def test_fuzz_target_runs_clean_for_its_time_budget(tmp_path):
    seconds = int(os.environ.get("THINKWIRE_ATHERIS_SECONDS", "30"))
    p = subprocess.run([sys.executable, str(TARGET), f"-max_total_time={seconds}", "-rss_limit_mb=2048",
                        "-timeout=10", f"-artifact_prefix={tmp_path}/"],
                       cwd=tmp_path, capture_output=True, timeout=seconds + 120)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    crashes = list(tmp_path.glob("crash-*")) + list(tmp_path.glob("timeout-*")) + list(tmp_path.glob("oom-*"))
    assert p.returncode == 0 and not crashes, out[-4000:]
    m = re.search(r"Done (\d+) runs in (\d+) second", out)
    assert m, out[-2000:]
    print(f"\natheris: {m.group(1)} executions in {m.group(2)} s, no crash")
