"""The set-up scripts as a user runs them (with the .venv the test run itself uses)."""

import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT


@pytest.mark.e2e
def test_scripts_run_passes_mitmdump_arguments_through_and_listens_on_loopback(tmp_path):
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("./scripts/run bootstraps .venv; run the suite through ./scripts/test")
    env = {k: v for k, v in os.environ.items() if not k.startswith("THINK_")}
    r = subprocess.run([str(ROOT / "scripts" / "run"), "--version"], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Mitmproxy:" in r.stdout
    assert "installing dependencies" not in r.stderr  # no argument taken for an extra
