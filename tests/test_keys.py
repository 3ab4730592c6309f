"""The keys for marks: from a file or the environment, rotation (the current key seals, previous
keys still open), key ids, and a replica that refuses to start with a key the fleet does not have."""

import hashlib
import hmac
import dataclasses
import json
import logging
import os
import stat
import subprocess
import sys

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons

from conftest import ROOT, make_ctx
from harness import start_fails
from thinkwire import keys
from thinkwire.addon import ThinkWire
from thinkwire.keys import KEY_FILE, KeyConfig, KeySetupError, Keyring, key_id, load
from thinkwire.marks import LazySealer, Sealer
from thinkwire.settings import SettingError
from thinkwire.rules import TagPair

PAIR = TagPair("<think>", "</think>")


def run_cli(args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("THINK_")}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "thinkwire.cli", *args], capture_output=True, env=e, cwd=ROOT,
                          timeout=60)


def k(name: str) -> str:
    """A key for a test, named for what it is: long enough to be one (32 bytes or more)."""
    return f"{name} - a test key of 32 bytes or more"


def K(name: str) -> bytes:
    return k(name).encode()


def key_file(tmp_path, name: str, text: str):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# -- where the current key comes from -----------------------------------------------------------
def test_a_key_file_gives_the_key_without_its_final_newline(tmp_path):
    path = key_file(tmp_path, "current", k("fleet key one") + "\n")
    ring = load(KeyConfig(key_file=path), tmp_path / "conf")
    assert ring == Keyring(K("fleet key one"), (), path, own=False)
    assert not (tmp_path / "conf").exists()   # no key of its own made beside it


def test_the_environment_key_and_key_files_come_from_the_environment(tmp_path):
    cur, old = key_file(tmp_path, "cur", k("k2")), key_file(tmp_path, "old", k("k1"))
    env = {"THINK_KEY_FILE": cur, "THINK_KEY_PREVIOUS_FILES": f" {old} ,", "THINK_KEY_ID": key_id(K("k2")).upper(),
           "THINK_SIGNING_KEY_PREVIOUS": f"{k('k0')}, {k('k00')}"}
    cfg = KeyConfig.from_values({}, env)
    assert cfg == KeyConfig(cur, (old,), key_id(K("k2")), None, (K("k0"), K("k00")))
    assert load(cfg, tmp_path).previous == (K("k1"), K("k0"), K("k00"))
    assert KeyConfig.from_values({}, {"THINK_SIGNING_KEY": k("k9")}).env_key == K("k9")


def test_with_nothing_configured_the_instance_makes_its_own_key_once(tmp_path):
    cfg = KeyConfig.from_values({}, {})
    assert not cfg.given
    ring = load(cfg, tmp_path)
    assert ring.own and ring.source == str(tmp_path / KEY_FILE)
    assert ring.current == (tmp_path / KEY_FILE).read_bytes().strip() == load(cfg, tmp_path).current


def test_a_key_given_twice_is_refused(tmp_path):
    path = key_file(tmp_path, "k", k("a"))
    with pytest.raises(KeySetupError, match=r"the key is given twice, by think_key_file \(.*/k\) and by "
                                            r"THINK_SIGNING_KEY; keep one of them"):
        load(KeyConfig(key_file=path, env_key=K("b")), tmp_path)


@pytest.mark.parametrize("make,problem", [
    (lambda d: d / "missing", r"think_key_file: .*/missing does not exist; write a key there "
                              r"\(`thinkwire key new --out .*/missing`\) or mount the Secret that holds it"),
    (lambda d: (d / "empty").write_text("\n") and d / "empty", r"think_key_file: .*/empty is empty; write a key "
                                                                r"into it \(`thinkwire key new --out .*/empty`\)"),
    (lambda d: d, r"think_key_file: .* is a directory; name the file in it that holds the key"),
])
def test_key_file_problems_say_how_to_fix_them(tmp_path, make, problem):
    with pytest.raises(KeySetupError, match=problem):
        load(KeyConfig(key_file=str(make(tmp_path))), tmp_path)


def test_a_previous_key_file_that_is_missing_is_refused_too(tmp_path):
    with pytest.raises(KeySetupError, match=r"think_key_previous_files: .*/gone does not exist"):
        load(KeyConfig(env_key=K("k"), previous_files=(str(tmp_path / "gone"),)), tmp_path)


# -- rotation ------------------------------------------------------------------------------------
def test_the_current_key_seals_and_previous_keys_still_open():
    before = Sealer(K("k1")).seal("sealed before the rotation", PAIR)
    rotated = Sealer(K("k2"), previous=[K("k1")])
    after = rotated.seal("sealed after", PAIR)
    assert rotated.open(before).text == "sealed before the rotation"
    assert rotated.open(after).text == "sealed after"
    assert Sealer(K("k1")).open(after) is None           # new marks are k2's: sealed with the current key
    assert Sealer(K("k2")).open(after).text == "sealed after"
    assert Sealer(K("k2")).open(before) is None          # once k1 is dropped, its marks no longer open


def test_a_staged_next_key_opens_the_marks_of_replicas_already_rotated():
    """Step 1 of a rolling rotation: the next key is listed as a previous key everywhere first."""
    staged = Sealer(K("k1"), previous=[K("k2")])
    assert staged.open(Sealer(K("k2"), previous=[K("k1")]).seal("from a rotated replica", PAIR)).text == \
        "from a rotated replica"
    assert Sealer(K("k2"), previous=[K("k1")]).open(staged.seal("from a staged one", PAIR)).text == "from a staged one"


def test_previous_keys_equal_to_the_current_one_or_each_other_are_listed_once(tmp_path):
    a = key_file(tmp_path, "a", k("k1"))
    ring = load(KeyConfig(env_key=K("k2"), previous_files=(a, a), env_previous=(K("k2"), K("k1"), K("k0"))), tmp_path)
    assert ring.previous == (K("k1"), K("k0"))


# -- key ids -------------------------------------------------------------------------------------
def test_a_key_id_is_a_short_one_way_name_of_the_key():
    """An HMAC of a fixed label under the key: equal keys (one key across replicas) have equal ids,
    and an id is no test of a guessed key without the key itself."""
    assert key_id(K("fleet key")) == hmac.new(K("fleet key"), b"thinkwire key id", hashlib.sha256).hexdigest()[:16]
    assert key_id(K("fleet key")) != key_id(K("fleet key ")) and len(key_id(K("fleet key"))) == 16
    assert Keyring(K("fleet key")).key_id == key_id(K("fleet key"))


def test_a_key_id_is_not_a_hash_of_the_key():
    """Finding 8: the id was sha256(label + key)[:16], published on /health: a short key was
    found offline by hashing guesses. No hash of the key alone, labelled or not, gives it."""
    secret = K("fleet key")
    for guess in (hashlib.sha256(b"thinkwire key id\0" + secret), hashlib.sha256(secret),
                  hashlib.sha256(b"thinkwire key id" + secret)):
        assert guess.hexdigest()[:16] != key_id(secret)


def test_a_replica_whose_key_is_not_the_fleets_refuses(tmp_path):
    path = key_file(tmp_path, "k", k("not the fleet's"))
    with pytest.raises(KeySetupError) as e:
        load(KeyConfig(key_file=path, expected_id=key_id(K("fleet"))), tmp_path)
    assert str(e.value) == (
        f"the key from {path} has id {key_id(K("not the fleet's"))}, but think_key_id says "
        f"the fleet's key is {key_id(K("fleet"))}: its marks would not open on the other replicas; give this "
        "instance the fleet's key, or set think_key_id to the new key's id if you are rotating (see "
        "`thinkwire key id`)")
    assert load(KeyConfig(env_key=K("fleet"), expected_id=key_id(K("fleet"))), tmp_path).key_id == key_id(K("fleet"))


def test_a_replica_with_no_key_but_a_fleet_id_refuses(tmp_path):
    with pytest.raises(KeySetupError, match=r"think_key_id is [0-9a-f]{16}, but no key is given: this instance "
                                            r"would seal marks with its own key \(.*thinkwire-signing-key, id "
                                            r"[0-9a-f]{16}\) that no other replica opens; give it the fleet's "
                                            r"key with think_key_file or THINK_SIGNING_KEY"):
        load(KeyConfig(expected_id=key_id(K("fleet"))), tmp_path)


@pytest.mark.parametrize("value", ["xyz", "0123", "0123456789abcdefg", "0123456789abcdeg"])
def test_a_key_id_that_cannot_be_one_is_refused(value):
    with pytest.raises(SettingError, match=r"think_key_id \(env THINK_KEY_ID\) is .*; use the 16 hex digits "
                                           r"that `thinkwire key id` prints for the fleet's key, or nothing"):
        KeyConfig.from_values({"think_key_id": value}, {})


def test_the_start_up_line_names_ids_and_sources_never_keys(tmp_path):
    ring = Keyring(K("secret-current"), (K("secret-old"),), "/etc/thinkwire/key")
    line = keys.describe(ring)
    assert line == (f"marks are sealed with key {key_id(K('secret-current'))} (/etc/thinkwire/key); 1 previous "
                    f"key(s) still open marks ({key_id(K('secret-old'))})")
    own = load(KeyConfig(), tmp_path)
    assert keys.describe(own) == f"marks are sealed with this instance's own key {own.key_id} ({own.source})"


# -- the way back counts marks it refuses --------------------------------------------------------
def test_marks_no_key_opens_are_counted_as_refused_and_other_strings_are_not():
    ctx = make_ctx(sealer=Sealer(K("k2"), previous=[K("k1")]))
    assert ctx.open_mark(Sealer(K("k1")).seal("old", PAIR)) == ("old", PAIR)
    assert ctx.open_mark(Sealer(K("k3")).seal("a stranger's", PAIR)) is None
    for not_a_mark in ("EqSig-real-anthropic", "gAAAAencrypted", None, 7, ""):
        assert ctx.open_mark(not_a_mark) is None
    assert ctx.stats.refused == 1


# -- the addon -----------------------------------------------------------------------------------
def test_the_addon_loads_a_fleets_keys_at_configure_and_says_which(tmp_path, caplog):
    cur, old = key_file(tmp_path, "cur", k("k2") + "\n"), key_file(tmp_path, "old", k("k1") + "\n")
    tw = ThinkWire()
    caplog.set_level(logging.INFO)
    with taddons.context(tw) as tctx:
        tctx.configure(tw, confdir=str(tmp_path / "conf"), think_key_file=cur, think_key_previous_files=old,
                       think_key_id=key_id(K("k2")))
        assert tw.sealer.open(Sealer(K("k1")).seal("x", PAIR)).text == "x"
        assert tw._health() == {"status": "ok", "version": "0.1.0", "key_id": key_id(K("k2"))}
        with pytest.raises(exceptions.OptionsError, match=r"^thinkwire: the key from .*/cur has id "):
            tctx.configure(tw, think_key_id=key_id(K("k1")))
        assert tw.sealer.keyring.key_id == key_id(K("k2"))   # the refused change left the keys as they were
    assert f"thinkwire: marks are sealed with key {key_id(K("k2"))} ({cur}); 1 previous key(s)" in caplog.text
    assert k("k2") not in caplog.text and not (tmp_path / "conf").exists()


def test_the_addon_with_nothing_configured_makes_its_key_only_once_running(tmp_path, monkeypatch):
    monkeypatch.setattr("gc.freeze", lambda: None)
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw, confdir=str(tmp_path))
        assert not (tmp_path / KEY_FILE).exists()
        tw.running()
        assert tw._health()["key_id"] == key_id((tmp_path / KEY_FILE).read_bytes().strip())


# -- mitmdump refuses to start ---------------------------------------------------------------------
def test_mitmdump_with_a_key_that_is_not_the_fleets_does_not_start(tmp_path):
    out = start_fails({"think_key_id": key_id(K("the fleet's key"))}, tmp_path,
                      env={"THINK_SIGNING_KEY": k("another key")})
    assert (f"thinkwire: the key from THINK_SIGNING_KEY has id {key_id(K("another key"))}, but think_key_id says the "
            f"fleet's key is {key_id(K("the fleet's key"))}") in out
    assert "[exit 0]" not in out and k("another key") not in out.replace("the key from", "")


# -- the CLI ---------------------------------------------------------------------------------------
def test_cli_key_new_prints_fresh_random_keys_and_key_id_names_them(tmp_path):
    a, b = (run_cli(["key", "new"]).stdout.decode().strip() for _ in range(2))
    assert a != b and len(a) == len(b) == 43
    path = key_file(tmp_path, "k", a + "\n")
    assert run_cli(["key", "id", "--file", path]).stdout.decode() == key_id(a.encode()) + "\n"
    assert run_cli(["key", "id"], env={"THINK_SIGNING_KEY": a}).stdout.decode() == key_id(a.encode()) + "\n"
    r = run_cli(["key", "id", "--file", str(tmp_path / "none")])
    assert r.returncode == 2 and b"--file: " in r.stderr and b"does not exist" in r.stderr


def test_cli_health_exits_nonzero_when_nothing_answers():
    r = run_cli(["health", "--url", "http://127.0.0.1:9", "--timeout", "2"])
    assert r.returncode == 1 and r.stderr.startswith(b"thinkwire health: http://127.0.0.1:9 does not answer")


def test_cli_health_prints_the_document_of_a_running_proxy(proxy):
    r = run_cli(["health", "--url", proxy.url])
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "ok"


def test_lazy_sealer_from_the_environment_reads_previous_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("THINK_SIGNING_KEY", k("k2"))
    monkeypatch.setenv("THINK_SIGNING_KEY_PREVIOUS", k("k1"))
    assert LazySealer(tmp_path).open(Sealer(K("k1")).seal("old", PAIR)).text == "old"


def test_keys_never_show_in_the_repr_of_what_holds_them(tmp_path):
    cfg = KeyConfig(env_key=K("zq-env-key"), env_previous=(K("zq-old-key"),))
    ring = load(cfg, tmp_path)
    assert "zq-" not in repr(cfg) + repr(ring) and ring.previous == (K("zq-old-key"),)


def test_an_unwritable_confdir_says_how_to_give_a_key(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(KeySetupError, match=r"cannot read or create this instance's key .*file/thinkwire-signing-key "
                                            r"\(.*\); give a key with think_key_file or THINK_SIGNING_KEY, or a "
                                            r"confdir it can write"):
        load(KeyConfig(), tmp_path / "file")


def test_cli_key_id_prints_the_id_even_when_the_environment_expects_another(tmp_path):
    r = run_cli(["key", "id"], env={"THINK_SIGNING_KEY": k("k"), "THINK_KEY_ID": key_id(K("other"))})
    assert r.returncode == 0 and r.stdout.decode() == key_id(K("k")) + "\n"


# -- key length and key files (issue 33, finding 8) -------------------------------------------------
@pytest.mark.parametrize("where", ["file", "env", "previous file", "env previous", "own"])
def test_a_key_shorter_than_32_bytes_is_refused_wherever_it_comes_from(tmp_path, where):
    short = b"x" * 31
    (tmp_path / "short").write_bytes(short + b"\n")
    os.chmod(tmp_path / "short", 0o600)
    cfg, source = {
        "file": (KeyConfig(key_file=str(tmp_path / "short")), f"think_key_file {tmp_path / 'short'}"),
        "env": (KeyConfig(env_key=short), "THINK_SIGNING_KEY"),
        "previous file": (KeyConfig(env_key=K("current"), previous_files=(str(tmp_path / "short"),)),
                          f"think_key_previous_files {tmp_path / 'short'}"),
        "env previous": (KeyConfig(env_key=K("current"), env_previous=(short,)), "THINK_SIGNING_KEY_PREVIOUS"),
        "own": (KeyConfig(), str(tmp_path / "conf" / KEY_FILE)),
    }[where]
    if where == "own":
        (tmp_path / "conf").mkdir()
        (tmp_path / "conf" / KEY_FILE).write_bytes(short)
    with pytest.raises(KeySetupError) as e:
        load(cfg, tmp_path / "conf")
    assert str(e.value) == (f"the key from {source} is 31 bytes; a key needs at least 32 (make one with "
                            "`thinkwire key new --out FILE`)")
    assert load(dataclasses.replace(cfg, env_key=K("current")) if where == "env" else
                KeyConfig(env_key=K("current")), tmp_path / "conf").current == K("current")


def test_mitmdump_with_a_one_byte_key_does_not_start(tmp_path):
    out = start_fails({}, tmp_path, env={"THINK_SIGNING_KEY": "k"})
    assert ("thinkwire: the key from THINK_SIGNING_KEY is 1 bytes; a key needs at least 32 (make one with "
            "`thinkwire key new --out FILE`)") in out
    assert "[exit 0]" not in out


@pytest.mark.parametrize("mode,warned", [(0o600, False), (0o400, False), (0o440, False), (0o640, False),
                                         (0o644, True), (0o660, True), (0o666, True), (0o602, True)])
def test_a_key_file_others_can_read_or_change_is_used_with_a_warning(tmp_path, caplog, mode, warned):
    path = key_file(tmp_path, "k", k("fleet"))
    os.chmod(path, mode)
    caplog.set_level(logging.WARNING)
    assert load(KeyConfig(key_file=path), tmp_path).current == K("fleet")
    line = (f"thinkwire: the key file {path} has mode {mode:04o}: others can read it or change it, and so read or "
            f"forge marks; make it private (chmod 600 {path}, or 0440 for a group)")
    assert (line in caplog.text) is warned
    assert k("fleet") not in caplog.text


def test_cli_key_new_out_writes_a_file_only_its_owner_can_read(tmp_path):
    old = os.umask(0)
    try:
        r = run_cli(["key", "new", "--out", str(tmp_path / "key")])
    finally:
        os.umask(old)
    path = tmp_path / "key"
    key = path.read_text()
    assert r.returncode == 0 and r.stdout == b"" and key.endswith("\n") and len(key.strip()) == 43
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert r.stderr.decode() == f"thinkwire: a new key is in {path} (mode 0600), id {key_id(key.strip().encode())}\n"
    assert load(KeyConfig(key_file=str(path)), tmp_path).current == key.strip().encode()


def test_cli_key_new_out_never_overwrites_a_file(tmp_path):
    path = key_file(tmp_path, "key", k("the fleet's key in use"))
    r = run_cli(["key", "new", "--out", path])
    assert r.returncode == 2 and r.stderr.decode() == (
        f"thinkwire: --out: {path} exists; it may hold a key in use: remove it first or name another file\n")
    assert open(path).read() == k("the fleet's key in use")
