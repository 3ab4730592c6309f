"""The coverage-guided fuzz targets, run for a bounded time: fuzz/fuzz_splitter_sse.py (the
splitter, SSE framing, the stream rewriters) and fuzz/fuzz_hot.py (the C part where it runs).

THINKWIRE_ATHERIS_SECONDS sets the budget, shared between the two (default 30); the run counts
are printed for the report. Skipped, with the reason, where atheris is not installed (and the C
part's target where the C part is not built).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

atheris = pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris; needs a "
                                                "prebuilt wheel or clang with libFuzzer)")

from thinkwire import hot  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"fuzz_splitter_sse": 0.5, "fuzz_hot": 0.5}   # each one's share of the budget


@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_target_runs_clean_for_its_time_budget(tmp_path, target):
    if target == "fuzz_hot" and not hot.available():
        pytest.skip("the C part is not built (or THINKWIRE_HOT=0)")
    seconds = max(1, round(int(os.environ.get("THINKWIRE_ATHERIS_SECONDS", "30")) * TARGETS[target]))
    p = subprocess.run([sys.executable, str(ROOT / "fuzz" / f"{target}.py"), f"-max_total_time={seconds}",
                        "-rss_limit_mb=2048", "-timeout=10", f"-artifact_prefix={tmp_path}/"],
                       cwd=tmp_path, capture_output=True, timeout=seconds + 120)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    crashes = list(tmp_path.glob("crash-*")) + list(tmp_path.glob("timeout-*")) + list(tmp_path.glob("oom-*"))
    assert p.returncode == 0 and not crashes, out[-4000:]
    m = re.search(r"Done (\d+) runs in (\d+) second", out)
    assert m, out[-2000:]
    print(f"\natheris ({target}): {m.group(1)} executions in {m.group(2)} s, no crash")
