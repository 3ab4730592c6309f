"""The container image, built from the shipped Containerfile and streamed through, where a
container engine answers and the base image can be had. Elsewhere (no engine, as on the machines
this project is developed on; no registry to pull the base image from) it skips saying which;
tests/test_install.py runs the Containerfile's steps in a clean virtualenv all the same."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import ROOT
from harness import post, sse, sse_reply
from support.containerfile import final_stage, listen_port
from thinkwire.endpoints import HEALTH

pytestmark = pytest.mark.e2e

TAG = "localhost/thinkwire-test:latest"


def engine() -> str:
    """podman or docker, when one is installed and its engine answers; else the test skips."""
    found = [e for e in ("podman", "docker") if shutil.which(e)]
    if not found:
        pytest.skip("no container engine: neither podman nor docker is installed")
    reasons = []
    for e in found:
        p = subprocess.run([e, "info"], capture_output=True, text=True, timeout=60)
        if p.returncode == 0:
            return e
        reasons.append(f"{e} info: {(p.stderr.strip().splitlines() or ['exit ' + str(p.returncode)])[-1]}")
    pytest.skip("no container engine answers (" + "; ".join(reasons) + ")")


def chunk(delta: dict) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def test_the_image_builds_runs_as_non_root_and_streams(up):
    e = engine()
    base = final_stage().base
    have = subprocess.run([e, "image", "inspect", base], capture_output=True, timeout=60).returncode == 0
    if not have:
        pulled = subprocess.run([e, "pull", base], capture_output=True, text=True, timeout=600)
        if pulled.returncode != 0:
            pytest.skip(f"the base image {base} is not here and cannot be pulled: "
                        f"{(pulled.stderr.strip().splitlines() or ['?'])[-1]}")
    port = listen_port(final_stage())
    with socket.socket() as s:   # the image listens on 8080; host networking keeps it on loopback
        if s.connect_ex(("127.0.0.1", port)) == 0:
            pytest.skip(f"port {port}, where the image listens, is taken on this machine")
    built = subprocess.run([e, "build", "-f", str(ROOT / "Containerfile"), "-t", TAG, str(ROOT)],
                           capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    name = f"thinkwire-test-{os.getpid()}"
    up.route("/chat/completions", sse_reply(sse(chunk({"role": "assistant", "content": "<think>pack"}),
                                                chunk({"content": "aged</think>shipped"}), "[DONE]")))
    run = subprocess.run([e, "run", "-d", "--rm", "--network", "host", "--name", name, TAG,
                          "--mode", f"reverse:{up.url}"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if post(url + HEALTH, method="GET", timeout=2).status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, subprocess.run([e, "logs", name], capture_output=True, text=True).stdout
            time.sleep(0.5)
        body = post(url + "/v1/chat/completions", {"model": "m", "stream": True}).content
        uid = subprocess.run([e, "exec", name, "id", "-u"], capture_output=True, text=True, timeout=60).stdout
        check = subprocess.run([e, "exec", name, *final_stage().exec_form("HEALTHCHECK")], capture_output=True,
                               timeout=60)
    finally:
        subprocess.run([e, "rm", "-f", name], capture_output=True, timeout=120)
    assert b'"reasoning_content":"pack"' in body and b'"content":"shipped"' in body and b"<think>" not in body
    assert uid.strip() == "10001" and check.returncode == 0
