"""Client applications for the tests (opencode, aider, llm), each installed once into its own
environment in a cache outside the repository: they pin libraries the test environment pins
otherwise (aider-chat its own litellm). A test skips, saying why, when the registry cannot be
reached."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The versions tried (tests/test_apps.py); a new pin makes a fresh install beside the old one.
LLM = "llm==0.36"
AIDER = "aider-chat==0.86.2"
OPENCODE = "opencode-ai@1.18.33"
INSTALL_SECONDS = 1200


def cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thinkwire" / "clients"


def _once(folder: Path, install) -> None:
    """Run `install(folder)` unless a finished install is there; one at a time across test runs."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if (folder / ".thinkwire-ok").exists():
            return
        shutil.rmtree(folder, ignore_errors=True)
        install(folder)
        (folder / ".thinkwire-ok").touch()


def python_app(requirement: str, command: str) -> Path:
    """`command` of `requirement` installed with pip into a virtualenv of this Python."""
    name = requirement.replace("==", "-")

    def install(folder: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=120)
        p = subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet",
                            "--disable-pip-version-check", requirement],
                           capture_output=True, text=True, timeout=INSTALL_SECONDS)
        if p.returncode:
            shutil.rmtree(folder, ignore_errors=True)
            pytest.skip(f"pip install {requirement} failed (no registry?): {p.stderr.strip()[-300:]}")

    folder = cache() / name
    _once(folder, install)
    return folder / "bin" / command


def npm_app(package: str, command: str) -> Path:
    """`command` of the npm `package` (name@version), installed with npm."""
    npm = shutil.which("npm")
    if not npm or not shutil.which("node"):
        pytest.skip("node is not installed: apt-get install -y nodejs npm")

    def install(folder: Path) -> None:
        folder.mkdir(parents=True)
        p = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", package],
                           cwd=folder, capture_output=True, text=True, timeout=INSTALL_SECONDS)
        if p.returncode:
            shutil.rmtree(folder, ignore_errors=True)
            pytest.skip(f"npm install {package} failed (no registry?): {p.stderr.strip()[-300:]}")

    folder = cache() / package.replace("@", "-").lstrip("-")
    _once(folder, install)
    return folder / "node_modules" / ".bin" / command
