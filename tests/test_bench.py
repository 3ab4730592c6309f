"""The benchmark's quick mode runs end to end and writes every part of its JSON (no timings checked)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.e2e
def test_bench_quick_runs_and_writes_every_section(tmp_path):
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--json", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads(out.read_text())
    assert {"machine", "splitter", "surfaces", "e2e", "memory", "capacity", "targets"} <= res.keys()
    assert {"rows", "flatness"} <= res["splitter"].keys()
    assert {"chat", "messages", "responses"} & res["surfaces"].keys()
    for kinds in res["surfaces"].values():
        assert {"plain", "reasoning", "answer", "boundary"} <= kinds.keys()
        for row in kinds.values():
            assert {"pass_us", "json_us", "driver_us"} <= row.keys()
            assert row["fell_back"] is None
    assert set(res["e2e"]["surfaces"]) == {"chat", "messages", "responses", "ollama"}
    for mode in ("burst", "paced"):
        for name in res["e2e"]["surfaces"]:
            e = res["e2e"][mode][name]
            for c in ("a", "b", "c"):
                assert {"cpu_ms_per_1k_events", "events_per_s", "p50_ms", "p99_ms"} <= e[c].keys()
                assert e[c]["errors"] == []
            # thinkwire really rewrote every stream; the pass-through passed the markup through
            assert all(v["rewritten"] == v["streams"] for v in e["c"]["surfaces"].values())
            assert not any(v["rewritten"] for v in e["b"]["surfaces"].values())
            assert e["d"]["errors"] == [] and all(v["rewritten"] == v["streams"] for v in e["d"]["surfaces"].values())
            for k in ("cpu_c_over_a", "cpu_c_over_b", "thinkwire_us_per_event", "added_p99_ms", "callable_us_per_call"):
                assert {"median", "min", "max", "rounds"} <= e["ratios"][k].keys()
    for name in res["e2e"]["surfaces"]:
        for c in ("a", "c"):
            assert {"kb_per_stream_at_n1", "kb_per_stream_at_n2"} <= res["memory"][name][c].keys()
    assert "Targets" in p.stdout
    # (6) capacity: each surface measured at one rate or more through thinkwire, streams rewritten
    cap = res["capacity"]
    assert set(cap) - {"params"} == set(res["e2e"]["surfaces"])
    for name in res["e2e"]["surfaces"]:
        for step in cap[name]["steps"]:
            assert {"rate", "streams", "ok", "added_p99_ms", "cpu_share", "rss_mb"} <= step.keys()
            assert step["proxy"]["not_rewritten"] == 0 and step["proxy"]["flows"] >= step["streams"]
    assert "6. Capacity of one proxy process" in p.stdout


@pytest.mark.e2e
def test_bench_runs_one_mode_of_the_surfaces_asked(tmp_path):
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--only", "e2e", "--modes", "paced",
                        "--surfaces", "ollama,chat", "--side-by-side", "--json", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    e = json.loads(out.read_text())["e2e"]
    assert e["surfaces"] == ["chat", "ollama"] and "burst" not in e
    assert set(e["paced"]) - {"streams", "events_per_stream", "interval_ms", "side_by_side"} == {"chat", "ollama"}
    # Side by side, (b) and (c) each ran the round, and both were counted.
    assert e["paced"]["side_by_side"] is True and "(b) and (c) side by side" in p.stdout
    for name in ("chat", "ollama"):
        row = e["paced"][name]
        assert row["b"]["runs"] == row["c"]["runs"] == 1 and row["b"]["cpu_s"] > 0 and row["c"]["cpu_s"] > 0
        assert row["ratios"]["cpu_c_over_b"]["rounds"] == 1
    for opts, says in ((["--modes", "fast"], "--modes takes burst and/or paced"),
                       (["--surfaces", "chat,grpc"], "--surfaces: unknown surface")):
        p = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", *opts],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert p.returncode == 2 and says in p.stderr


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("THINKWIRE_BENCH_CALLGRIND") != "1",
                    reason="runs mitmdump under valgrind (a minute): set THINKWIRE_BENCH_CALLGRIND=1")
def test_bench_instructions_counts_both_proxies():
    # The opt-in part 5, tiny: one stream of 20 events through (b) and (c) under callgrind.
    script = ("import json, sys; sys.path[:0] = [sys.argv[1] + '/bench', sys.argv[1]]; import instructions\n"
              "if not instructions.available(): print('null'); raise SystemExit\n"
              "print(json.dumps(instructions.run(['chat'], lambda *a: None, {'burst': (20, 0.0)}, 1)))")
    p = subprocess.run([sys.executable, "-c", script, str(ROOT)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads(p.stdout.splitlines()[-1])
    if res is None:
        pytest.skip("valgrind is not installed")
    r = res["burst"]["chat"]
    assert r["b"] > 1e6 and r["c"] > r["b"] and r["c_over_b"] == r["c"] / r["b"]


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("THINKWIRE_BENCH_CALLGRIND") != "1",
                    reason="runs Python under valgrind (a minute): set THINKWIRE_BENCH_CALLGRIND=1")
def test_flowcost_splits_a_flow_into_its_stretches():
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "flowcost.py"), "chat", "--events", "20", "--flows", "2"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)
    if p.returncode == 2 and "not installed" in p.stderr:
        pytest.skip("valgrind is not installed")
    assert p.returncode == 0, p.stdout + p.stderr
    rows = dict(re.findall(r"^  (\w[\w ]*?)\s+\d+ chunks\s+(-?[\d.]+)M$", p.stdout, re.M))
    assert list(rows) == ["opening events", "first delta", "reasoning deltas", "boundary", "answer deltas",
                          "final events and end", "whole flow"]
    # (A smoke test: it runs and reports every stretch. With so few flows the stretches are not
    # exact; the whole is a fraction of a million instructions.)
    assert 0.1 < float(rows["whole flow"]) < 5
