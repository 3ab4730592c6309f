"""The one-command demo runs offline and shows every surface's reasoning moved."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.e2e


def test_demo_shows_upstream_and_client_side_by_side_for_every_surface(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("THINK_")}
    env["COLUMNS"] = "120"
    p = subprocess.run([sys.executable, "-m", "devtools.demo", "--save", str(tmp_path / "demo.flows")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    for label in ("message.reasoning_content:", "reasoning item:", "thinking block:",
                  "tool_calls: get_weather:", "function_call: get_weather:", "tool_use block: get_weather:"):
        assert label in out, out
    assert out.count("│ client got") == 9 and "error:" not in out
    assert "not in this build" not in out
    assert (tmp_path / "demo.flows").stat().st_size > 0
    assert f"-r {tmp_path / 'demo.flows'} -s addon/think.py" in out
    # The command it prints runs beside a proxy (-n: mitmweb listens for no traffic).
    line = f"  .venv/bin/mitmweb -n --set web_host=127.0.0.1 -r {tmp_path / 'demo.flows'} -s addon/think.py"
    assert line in out.splitlines(), out
