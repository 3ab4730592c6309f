"""Installing without a clone, as a user does: a wheel built from this tree (through its sdist,
as a release would be), installed with `uv tool install` into throwaway folders, runs the
proxy with `thinkwire run`; and a plain mitmproxy of another install loads the addon by
`thinkwire addon-path`. uv comes with the test extra; its cache keeps reruns to seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT
from harness import sse, sse_reply
from devtools.process import LISTENING, ToolProcess, child_env

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"


def chunk(delta: dict) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def run(args: list, env: dict, timeout: float = 300) -> str:
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, timeout=timeout)
    assert p.returncode == 0, f"{args}\n{p.stdout}\n{p.stderr}"
    return p.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        pytest.skip("uv is not installed in this environment (the test extra brings it: run ./scripts/test)")
    tmp = tmp_path_factory.mktemp("install")
    env = child_env({"UV_TOOL_DIR": str(tmp / "tools"), "UV_TOOL_BIN_DIR": str(tmp / "bin")})
    run([uv, "build", "--quiet", "--out-dir", tmp / "dist", ROOT], env)   # sdist, then the wheel from it
    wheel = next((tmp / "dist").glob("thinkwire-*.whl"))
    run([uv, "tool", "install", "--quiet", "--python", sys.executable, wheel], env)
    # Someone's own mitmproxy, in an environment that has never heard of thinkwire (nor pyyaml).
    run([uv, "tool", "install", "--quiet", "--python", sys.executable, "mitmproxy>=12,<13"], env)
    return {"bin": tmp / "bin", "tools": tmp / "tools", "wheel": wheel, "env": env}


def stream_through(port: int) -> bytes:
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("POST", CHAT, body=b'{"model": "m", "stream": true}', headers={"content-type": "application/json"})
    body = conn.getresponse().read()
    conn.close()
    return body


def route_thinking(up) -> None:
    up.route(CHAT, sse_reply(sse(chunk({"role": "assistant", "content": "<think>pack"}),
                                 chunk({"content": "aged</think>shipped"}), "[DONE]")))


def test_wheel_carries_the_addon_script_and_the_tag_sets(installed):
    with zipfile.ZipFile(installed["wheel"]) as z:
        assert z.read("thinkwire/tagsets.yaml") == (ROOT / "tagsets.yaml").read_bytes()
        assert z.read("thinkwire/script/think.py") == (ROOT / "addon" / "think.py").read_bytes()


def test_installed_tags_and_addon_path_are_the_installs_own(installed):
    tools = str(installed["tools"])
    out = run([installed["bin"] / "thinkwire", "tags"], installed["env"], 60)
    assert out.startswith(f"tag sets from {tools}") and "<think>  ...  </think>" in out
    path = run([installed["bin"] / "thinkwire", "addon-path"], installed["env"], 60).strip()
    assert path.startswith(tools) and path.endswith("thinkwire/script/think.py")


def test_installed_thinkwire_run_rewrites_a_stream(installed, up, tmp_path):
    route_thinking(up)
    p = ToolProcess([str(installed["bin"] / "thinkwire"), "run", "--mode", f"reverse:{up.url}",
                     "--set", "listen_port=0", "--set", f"confdir={tmp_path}"], installed["env"])
    try:
        port = int(p.wait_for(LISTENING, timeout=60).group(1))   # on 127.0.0.1: the default
        body = stream_through(port)
    finally:
        p.stop()
    assert b'"reasoning_content":"pack"' in body and b'"content":"shipped"' in body
    assert b"<think>" not in body


def test_installed_thinkwire_web_runs_mitmweb(installed):
    out = run([installed["bin"] / "thinkwire", "web", "--version"], installed["env"], 60)
    assert "Mitmproxy:" in out


def test_a_plain_mitmdump_of_another_install_loads_the_addon_by_path(installed, up, tmp_path):
    route_thinking(up)
    addon = run([installed["bin"] / "thinkwire", "addon-path"], installed["env"], 60).strip()
    p = ToolProcess([str(installed["bin"] / "mitmdump"), "-s", addon, "--mode", f"reverse:{up.url}",
                     "--listen-host", "127.0.0.1", "--set", "listen_port=0", "--set", f"confdir={tmp_path}"],
                    installed["env"])
    try:
        port = int(p.wait_for(LISTENING, timeout=60).group(1))
        body = stream_through(port)
    finally:
        p.stop()
    assert b'"reasoning_content":"pack"' in body and b'"content":"shipped"' in body
    assert "error" not in p.log().lower(), p.log()


def test_the_install_runs_its_own_copy_not_the_clones(installed):
    exe = installed["tools"] / "thinkwire" / "bin" / "python"
    out = run([exe, "-c", "import thinkwire, os; print(os.path.realpath(thinkwire.__file__))"],
              installed["env"], 60)
    assert not out.startswith(str(ROOT)) and os.path.exists(out.strip())


# -- the container image's steps, without an engine -------------------------------------------------
def test_the_containerfiles_install_entrypoint_and_health_check_run_in_a_clean_virtualenv(installed, up, tmp_path):
    """What the image runs, step by step, in a clean virtualenv: its install is the wheel with its
    dependencies, as `installed` made it (uv in place of pip, the same requirement); then its
    ENV, its ENTRYPOINT with the model server given the way `podman run IMAGE --mode ...` gives
    it (replacing CMD), its HEALTHCHECK command. The port is a free one instead of 8080, which
    may be taken on this machine; everything else is the file's. (Building the image itself:
    tests/test_container.py, where an engine is.)"""
    import json
    import socket
    from support.containerfile import final_stage, listen_port
    stage = final_stage()
    assert stage.base == "docker.io/library/python:3.12-slim"
    assert [r for r in stage.all("RUN") if "pip install" in r] == \
        ["pip install --no-cache-dir /wheels/thinkwire-*.whl && rm -rf /wheels"]
    venv = installed["tools"] / "thinkwire"   # `uv tool install WHEEL`: a virtualenv of its own
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(home), **stage.env()}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def here(argv: list[str]) -> list[str]:
        """The image's command on this port, its programs from the virtualenv."""
        out = [str(venv / "bin" / argv[0])] + argv[1:]
        return [str(port) if a == str(listen_port(stage)) else a.replace(f":{listen_port(stage)}", f":{port}")
                for a in out]

    entry, cmd = stage.exec_form("ENTRYPOINT"), stage.exec_form("CMD")
    assert entry[entry.index("--listen-host") + 1] == "0.0.0.0" and cmd[0] == "--mode"
    assert stage.one("USER") == "10001:10001" and stage.one("EXPOSE") == str(listen_port(stage))
    route_thinking(up)
    p = ToolProcess(here(entry) + ["--mode", f"reverse:{up.url}"], env)
    try:
        assert int(p.wait_for(r"listening at \*:(\d+)", timeout=60).group(1)) == port   # every address
        health = subprocess.run(here(stage.exec_form("HEALTHCHECK")), capture_output=True, text=True, env=env,
                                timeout=30)
        body = stream_through(port)
    finally:
        p.stop()
    assert health.returncode == 0 and json.loads(health.stdout)["status"] == "ok"
    assert b'"reasoning_content":"pack"' in body and b'"content":"shipped"' in body
    assert (home / ".mitmproxy" / "thinkwire-signing-key").exists()   # no key given: its own, in HOME
