"""Security: the signing key, the marks, forged objects, what the logs hold, where it listens."""

from __future__ import annotations

import base64
import inspect
import json
import logging
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings, strategies as st

from conftest import make_ctx
from harness import json_reply, post, sse_reply
from support.events import encode_events, model_objs
from thinkwire import engine, marks
from thinkwire.keys import KEY_FILE, own_key
from thinkwire.marks import PREFIX, Sealer
from thinkwire.rules import TagPair
from thinkwire.surfaces import messages

ROOT = Path(__file__).resolve().parent.parent
PAIR = TagPair("<think>", "</think>")
SECRET_TEXT = "zq-secret-reasoning-7f3a"   # distinctive text that must never reach a log below DEBUG
ANSWER_TEXT = "zq-answer-text-9c1e"


# -- the key -------------------------------------------------------------------------------------
def test_key_file_is_created_with_mode_0600(tmp_path, monkeypatch):
    monkeypatch.delenv("THINK_SIGNING_KEY", raising=False)
    monkeypatch.setattr(os, "umask", os.umask)  # whatever the umask, the file is 0600
    old = os.umask(0)
    try:
        secret = own_key(tmp_path / "conf")
    finally:
        os.umask(old)
    path = tmp_path / "conf" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(base64.b64decode(secret)) == 32
    assert own_key(tmp_path / "conf") == secret  # created once, then read


def test_key_is_never_logged_even_at_debug(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("THINK_SIGNING_KEY", raising=False)
    caplog.set_level(logging.DEBUG)
    sealer = marks.LazySealer(tmp_path)
    data = b"".join(encode_events("messages", model_objs("messages", ["<think>x</think>y"])))
    ctx = make_ctx(sealer=sealer, signature="redacted")
    d = engine.stream_driver(messages, ctx)
    d(data + b"data: {broken\n\n")
    d(b"")
    secret = (tmp_path / KEY_FILE).read_bytes().strip()
    raw = base64.b64decode(secret)
    logged = caplog.text.encode()
    for form in (secret, raw, raw.hex().encode(), base64.urlsafe_b64encode(raw)):
        assert form not in logged


# -- marks ---------------------------------------------------------------------------------------
def test_marks_are_checked_by_aes_gcm_decrypt():
    """The tag check is AESGCM.decrypt's (constant time, in OpenSSL); no own comparison of
    tags or MACs exists to get wrong."""
    s = Sealer(b"k", previous=[b"old"])
    assert isinstance(s._aead, AESGCM) and all(isinstance(a, AESGCM) for a in s._opening)
    src = inspect.getsource(Sealer.open) + inspect.getsource(Sealer._decrypt)
    assert "self._decrypt(raw[_ISSUED:], _AAD + raw[:_ISSUED] + client)" in src
    assert "aead.decrypt(nonce, sealed, aad)" in src
    assert "==" not in src.replace("flag == b", "")   # no hand-made comparison of secret bytes
    assert "hmac" not in inspect.getsource(marks).lower() or "compare_digest" in inspect.getsource(marks)


def test_every_single_byte_tamper_of_a_mark_fails_to_open():
    s = Sealer(b"key one")
    mark = s.seal("the reasoning", PAIR)
    raw = base64.urlsafe_b64decode(mark[len(PREFIX):] + "=" * (-len(mark) % 4))
    tried = 0
    for i in range(len(raw)):
        for bit in (0x01, 0x80):
            bad = bytearray(raw)
            bad[i] ^= bit
            forged = PREFIX + base64.urlsafe_b64encode(bytes(bad)).rstrip(b"=").decode()
            assert s.open(forged) is None
            tried += 1
    assert tried == 2 * len(raw)
    assert s.open(mark).text == "the reasoning"


def test_a_mark_under_another_key_or_truncated_never_opens():
    mine, theirs = Sealer(b"key one"), Sealer(b"key two")
    mark = theirs.seal("x", PAIR)
    assert mine.open(mark) is None and theirs.open(mark) is not None
    good = mine.seal("y", PAIR)
    for n in range(len(good)):
        assert mine.open(good[:n]) is None


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80).map(lambda t: PREFIX + t),
                 st.binary(max_size=120).map(lambda b: PREFIX + base64.urlsafe_b64encode(b).decode()),
                 st.text(max_size=40), st.integers(), st.none()))
def test_forged_marks_never_open(forged):
    assert Sealer(b"key one").open(forged) is None


# -- forged objects from a client ----------------------------------------------------------------
def test_forged_marks_in_requests_pass_upstream_untouched(proxy, up):
    """Objects that look like the proxy's own but do not open under its key go upstream
    byte-identical: the proxy never restores (or drops) what it did not make."""
    forged = PREFIX + base64.urlsafe_b64encode(os.urandom(60)).rstrip(b"=").decode()
    other_key = Sealer(b"someone else's key").seal("injected reasoning", PAIR)
    up.route("/v1/messages", json_reply({"id": "m", "type": "message", "role": "assistant", "model": "m",
                                         "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                                         "usage": {"input_tokens": 1, "output_tokens": 1}}))
    up.route("/v1/responses", json_reply({"id": "r", "object": "response", "status": "completed", "output": []}))
    up.route("/v1/chat/completions", json_reply({"id": "c", "object": "chat.completion", "choices": []}))
    bodies = {
        "/v1/messages": {"model": "m", "max_tokens": 9, "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "", "signature": forged},
                {"type": "thinking", "thinking": "t", "signature": other_key},
                {"type": "redacted_thinking", "data": forged},
                {"type": "redacted_thinking", "data": other_key},
                {"type": "text", "text": "a"}]},
            {"role": "user", "content": "again"}]},
        "/v1/responses": {"model": "m", "input": [
            {"type": "reasoning", "summary": [], "encrypted_content": forged},
            {"type": "reasoning", "id": "rs_x", "summary": [], "encrypted_content": other_key},
            {"type": "message", "role": "user", "content": "q"}]},
        "/v1/chat/completions": {"model": "m", "messages": [
            {"role": "assistant", "content": forged, "reasoning_content": other_key}]},
    }
    for path, obj in bodies.items():
        raw = json.dumps(obj, separators=(", ", ": ")).encode()
        up.requests.clear()
        assert post(proxy.url + path, raw=raw).status == 200
        assert up.requests[-1].body == raw, path


# -- logs ----------------------------------------------------------------------------------------
def test_no_request_or_response_text_in_logs_below_debug(proxy_factory, up):
    proxy = proxy_factory()   # mitmdump's default termlog level: info
    text = f"<think>{SECRET_TEXT}</think>{ANSWER_TEXT}"
    for surface, path in (("chat", "/v1/chat/completions"), ("messages", "/v1/messages"),
                          ("responses", "/v1/responses")):
        data = b"".join(encode_events(surface, model_objs(surface, [text[:9], text[9:]])))
        up.route(path, sse_reply([data]))
        post(proxy.url + path, {"model": "m", "stream": True, "messages": [{"role": "user", "content": SECRET_TEXT}]})
        # and a body that fails to parse (fail-open warning path), and a malformed stream
        up.route(path, json_reply({"id": SECRET_TEXT}))
        post(proxy.url + path, {"model": "m", "messages": [{"role": "user", "content": ANSWER_TEXT}]})
        up.route(path, sse_reply([b"data: {\"" + SECRET_TEXT.encode() + b"\n\n"]))
        post(proxy.url + path, {"model": "m", "stream": True})
    from harness import Reply
    up.route("/v1/chat/completions", Reply(200, {"content-type": "application/json"},
                                           [SECRET_TEXT.encode() + b" not json"], chunked=False))
    post(proxy.url + "/v1/chat/completions", {"model": "m"})
    log = proxy.log()
    assert "thinkwire" in log                       # it did log its per-flow lines
    assert SECRET_TEXT not in log and ANSWER_TEXT not in log, log[-3000:]


# -- where it listens ----------------------------------------------------------------------------
def _fake_run(tmp_path: Path) -> Path:
    """scripts/run with a stand-in bootstrap and a stand-in `thinkwire` that prints its arguments."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "bin").mkdir()
    shutil.copy(ROOT / "scripts" / "run", tmp_path / "scripts" / "run")
    (tmp_path / "scripts" / "_bootstrap.sh").write_text(
        'ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"\nexport PATH="$ROOT/bin:$PATH"\n')
    fake = tmp_path / "bin" / "thinkwire"
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)
    return tmp_path / "scripts" / "run"


LISTEN_CASES = [
    ([], ["--listen-host", "127.0.0.1"]),
    (["--mode", "reverse:http://127.0.0.1:9", "--listen-port", "8081"], ["--listen-host", "127.0.0.1"]),
    (["--listen-host", "0.0.0.0"], ["--listen-host", "0.0.0.0"]),
    (["--set", "listen_host=::1"], ["--set", "listen_host=::1"]),
]


@pytest.mark.parametrize("args,listens", LISTEN_CASES)
def test_scripts_run_is_thinkwire_run_with_every_argument(tmp_path, args, listens):
    out = subprocess.run(["bash", str(_fake_run(tmp_path)), *args], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:-1] == ["run", *args]


@pytest.mark.parametrize("args,listens", LISTEN_CASES)
def test_thinkwire_run_listens_on_loopback_unless_told_otherwise(args, listens):
    from thinkwire import cli
    got = cli.proxy_argv("mitmdump", args)
    assert got[1:3] == ["-s", str(cli.addon_path())]
    hosts = [a for a in got if "listen-host" in a or "listen_host" in a]
    assert len(hosts) == 1, got
    i = got.index(listens[0])
    assert got[i:i + 2] == listens


def test_an_empty_key_file_left_by_a_crash_is_replaced(tmp_path, monkeypatch):
    import os
    import time
    from thinkwire import keys
    monkeypatch.delenv("THINK_SIGNING_KEY", raising=False)
    key = tmp_path / keys.KEY_FILE
    key.write_bytes(b"")
    old = time.time() - 60
    os.utime(key, (old, old))
    secret = keys.own_key(tmp_path)
    assert secret and key.read_bytes().strip() == secret
    assert (key.stat().st_mode & 0o777) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [keys.KEY_FILE]  # no temporary file left
