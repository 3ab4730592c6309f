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


def _requirements(extra: str | None) -> dict[str, str]:
    """name -> requirement, for the project's dependencies plus `extra`'s, following the extras
    that name the project itself (thinkwire[demo])."""
    import re
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out, todo, seen = {}, list(project["dependencies"]), set()
    extras = [extra] if extra else []
    while extras:
        e = extras.pop()
        if e in seen:
            continue
        seen.add(e)
        for req in project["optional-dependencies"][e]:
            m = re.fullmatch(r"thinkwire\[(\w+)\]", req)
            if m:
                extras.append(m.group(1))
            else:
                todo.append(req)
    for req in todo:
        out[re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower().replace("_", "-")] = req
    return out


def test_the_demo_bootstraps_only_what_it_needs(tmp_path):
    """`./scripts/demo` on a fresh clone asks pip for the demo extra (the proxy and the SDK
    clients), which holds no test-only package; and everything the demo imports is in it."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    for f in ("scripts/_bootstrap.sh", "scripts/demo", "pyproject.toml", "setup.py"):
        (clone / f).write_bytes((ROOT / f).read_bytes())
    (clone / "scripts" / "demo").chmod(0o755)
    calls = tmp_path / "calls"
    fake = clone / ".venv" / "bin" / "python"   # records what the bootstrap asks of it
    fake.parent.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("THINK_")}
    r = subprocess.run([str(clone / "scripts" / "demo"), "--help"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert calls.read_text().splitlines() == [
        "-m pip install -q --upgrade pip",
        f"-m pip install -q -e {clone}[demo]",
        "-m devtools.demo --help"]
    demo, test = _requirements("demo"), _requirements("test")
    assert sorted(demo) == ["anthropic", "mitmproxy", "openai", "prometheus-client", "pyyaml"]
    assert set(demo) < set(test)   # the test extra holds the demo's: a test install serves the demo
    # What devtools imports, beyond the standard library and the project, is in the demo's set.
    import ast
    import importlib.metadata
    import sys
    dists = importlib.metadata.packages_distributions()

    def imports(files) -> set[str]:
        imported = set()
        for f in files:
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.Import):
                    imported |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    imported.add(node.module.split(".")[0])
        # (devtools/review.py reads the test suite's own modules: first party, not installed.)
        tests_own = {f.stem for f in (ROOT / "tests").glob("*.py")} | {"support"}
        return imported - set(sys.stdlib_module_names) - {"devtools", "thinkwire"} - tests_own

    # The docs site's hook is loaded by mkdocs, not by the demo: its imports are the docs extra's.
    hook = ROOT / "devtools" / "mkdocs_hooks.py"
    third_party = imports(f for f in (ROOT / "devtools").glob("*.py") if f != hook)
    assert third_party and all({d.lower() for d in dists[m]} & set(demo) for m in third_party), third_party
    docs = _requirements("docs")
    assert all({d.lower() for d in dists[m]} & set(docs) for m in imports([hook])), imports([hook])
