"""Where the keys for marks come from: one current key that seals (and opens) and previous keys
that only open, so a key can be rotated without breaking conversations in flight.

The current key, from exactly one of:
  think_key_file / THINK_KEY_FILE   a file holding it (a Kubernetes Secret mounted as a file)
  THINK_SIGNING_KEY                 the key itself, from the environment only: an option's value
                                    shows in `--options` and in saved option files
  neither                           a random key created once in mitmproxy's confdir: this
                                    instance's own, which no other instance has
Previous keys, from both:
  think_key_previous_files / THINK_KEY_PREVIOUS_FILES   files, separated by commas
  THINK_SIGNING_KEY_PREVIOUS                            keys separated by commas (environment only)

Every key is at least MIN_KEY_BYTES long (a shorter one is refused, saying so): a mark opens
for whoever has the key, so a key must not be guessable. A key file that others can read, or a
group or others can write, is used with a warning.

A key id (`key_id`) names a key without revealing it: an HMAC of a fixed label under the key,
so equal keys have equal ids (across replicas) and the id is no help in finding the key. A fleet declares the id of its current key
with think_key_id / THINK_KEY_ID: a replica whose key has another id, or that is given no key
(and would seal with its own), refuses to start rather than make marks the other replicas
cannot open.
Keys are never logged; ids are.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from .settings import BY_NAME, KEY_ID_DIGITS

KEY_FILE = "thinkwire-signing-key"          # this instance's own key, in mitmproxy's confdir
ENV_KEY = "THINK_SIGNING_KEY"
ENV_PREVIOUS = "THINK_SIGNING_KEY_PREVIOUS"
OPTIONS = ("think_key_file", "think_key_previous_files", "think_key_id")
MIN_KEY_BYTES = 32
_LOOSE = stat.S_IROTH | stat.S_IWOTH | stat.S_IWGRP   # who else may read or change a key file

log = logging.getLogger(__name__)


class KeySetupError(ValueError):
    """A key that cannot be had as configured; the message says how to fix it."""


def key_id(secret: bytes) -> str:
    """A short public name of a key: equal ids, equal keys. An HMAC under the key (not a hash of
    it): without the key, the id is no test of a guess."""
    return hmac.new(secret, b"thinkwire key id", hashlib.sha256).hexdigest()[:KEY_ID_DIGITS]


def checked(secret: bytes, source: str) -> bytes:
    """`secret`, when it is long enough to be a key; KeySetupError saying so otherwise."""
    if len(secret) < MIN_KEY_BYTES:
        raise KeySetupError(f"the key from {source} is {len(secret)} bytes; a key needs at least {MIN_KEY_BYTES} "
                            "(make one with `thinkwire key new --out FILE`)")
    return secret


def new_key() -> str:
    """A fresh random key (32 bytes, base64url): what `thinkwire key new` prints."""
    return base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()


@dataclass(frozen=True)
class Keyring:
    # Keys are left out of repr: a keyring in a log line or a traceback shows none.
    current: bytes = field(repr=False)                            # seals new marks, and opens
    previous: tuple[bytes, ...] = field(default=(), repr=False)   # open marks from before a rotation (or the next key's)
    source: str = ""       # where the current key came from, for the start-up line
    own: bool = False      # the confdir key: this instance's alone

    @property
    def key_id(self) -> str:
        return key_id(self.current)


@dataclass(frozen=True)
class KeyConfig:
    """What the options and the environment say about keys (nothing read from disk yet)."""

    key_file: str = ""
    previous_files: tuple[str, ...] = ()
    expected_id: str = ""
    env_key: bytes | None = field(default=None, repr=False)
    env_previous: tuple[bytes, ...] = field(default=(), repr=False)

    @classmethod
    def from_values(cls, values: dict[str, str], environ: dict[str, str] | None = None) -> "KeyConfig":
        """From raw option strings (missing ones take their environment default) and the
        environment-only keys (`environ`: os.environ unless given). Raises SettingError for an
        option value that cannot be right."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str:
            opt = BY_NAME[name]
            raw = values.get(name)
            value: str = opt.parse(env.get(opt.env, opt.default) if raw is None else raw)
            return value

        return cls(key_file=get("think_key_file").strip(),
                   previous_files=tuple(p.strip() for p in get("think_key_previous_files").split(",") if p.strip()),
                   expected_id=get("think_key_id"),
                   env_key=env[ENV_KEY].encode() if env.get(ENV_KEY) else None,
                   env_previous=tuple(k.strip().encode() for k in env.get(ENV_PREVIOUS, "").split(",")
                                      if k.strip()))

    @property
    def given(self) -> bool:
        """Anything configured at all: then the keys are loaded, and checked, at start."""
        return bool(self.key_file or self.previous_files or self.expected_id or self.env_key
                    or self.env_previous)


def load(cfg: KeyConfig, confdir: str | os.PathLike[str] | None) -> Keyring:
    """The keyring `cfg` describes; KeySetupError, saying how to fix it, when it cannot be had or
    its current key is not the one think_key_id names."""
    if cfg.key_file and cfg.env_key:
        raise KeySetupError(f"the key is given twice, by think_key_file ({cfg.key_file}) and by {ENV_KEY}; "
                            "keep one of them")
    if cfg.key_file:
        ring = Keyring(read_key_file(cfg.key_file, "think_key_file"), source=cfg.key_file)
    elif cfg.env_key:
        ring = Keyring(checked(cfg.env_key, ENV_KEY), source=ENV_KEY)
    else:
        folder = Path(os.path.expanduser(str(confdir or "~/.mitmproxy")))
        ring = Keyring(checked(own_key(folder), str(folder / KEY_FILE)), source=str(folder / KEY_FILE), own=True)
    previous = ([read_key_file(p, "think_key_previous_files") for p in cfg.previous_files]
                + [checked(k, ENV_PREVIOUS) for k in cfg.env_previous])
    # A previous key equal to the current one adds nothing (a rotation's configs may list it).
    ring = Keyring(ring.current, tuple(dict.fromkeys(k for k in previous if k != ring.current)),
                   ring.source, ring.own)
    if cfg.expected_id and ring.key_id != cfg.expected_id:
        if ring.own:
            raise KeySetupError(
                f"think_key_id is {cfg.expected_id}, but no key is given: this instance would seal marks with "
                f"its own key ({ring.source}, id {ring.key_id}) that no other replica opens; give it the "
                f"fleet's key with think_key_file or {ENV_KEY}")
        raise KeySetupError(
            f"the key from {ring.source} has id {ring.key_id}, but think_key_id says the fleet's key is "
            f"{cfg.expected_id}: its marks would not open on the other replicas; give this instance the "
            f"fleet's key, or set think_key_id to the new key's id if you are rotating (see `thinkwire key id`)")
    return ring


def read_key_file(path: str, option: str) -> bytes:
    """A key from a file: its whole content, surrounding whitespace (a final newline) removed;
    a warning when others may read it or others than its owner may change it."""
    p = Path(os.path.expanduser(path))
    try:
        data = p.read_bytes().strip()
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise KeySetupError(f"{option}: {p} does not exist; write a key there "
                            f"(`thinkwire key new --out {p}`) or mount the Secret that holds it") from None
    except IsADirectoryError:
        raise KeySetupError(f"{option}: {p} is a directory; name the file in it that holds the key") from None
    except OSError as e:
        raise KeySetupError(f"{option}: cannot read {p} ({e.strerror}); make it readable by this user") from None
    if not data:
        raise KeySetupError(f"{option}: {p} is empty; write a key into it (`thinkwire key new --out {p}`)")
    if mode & _LOOSE:
        log.warning("thinkwire: the key file %s has mode %s: others can read it or change it, and so read or "
                    "forge marks; make it private (chmod 600 %s, or 0440 for a group)", p,
                    oct(stat.S_IMODE(mode))[2:].rjust(4, "0"), p)
    return checked(data, f"{option} {p}")


def write_new_key(path: str) -> str:
    """A fresh key written to a new file `path`, readable by its owner only (mode 0600); its id.
    An existing file is never overwritten (it may hold the fleet's key)."""
    p = Path(os.path.expanduser(path))
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeySetupError(f"--out: {p} exists; it may hold a key in use: remove it first or name another "
                            "file") from None
    key = new_key()
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)   # whatever the umask
        f.write(key + "\n")
    return key_id(key.encode())


def own_key(folder: Path) -> bytes:
    """This instance's own key: the key file in `folder`, created once with mode 0600."""
    path = folder / KEY_FILE
    try:
        return _own_key(folder, path)
    except OSError as e:
        raise KeySetupError(f"cannot read or create this instance's key {path} ({e.strerror or e}); give a "
                            "key with think_key_file or THINK_SIGNING_KEY, or a confdir it can write") from None


def _own_key(folder: Path, path: Path) -> bytes:
    for _ in range(50):
        try:
            secret = path.read_bytes().strip()
        except FileNotFoundError:
            secret = b""
        if secret:
            return secret
        if path.exists():  # being written by another instance, or left empty by a crash
            if time.time() - path.stat().st_mtime > 5:
                path.unlink(missing_ok=True)
            time.sleep(0.1)
            continue
        folder.mkdir(parents=True, exist_ok=True)
        # Write a private temporary file, then link it into place: the key file appears whole
        # or not at all, and the first instance to link it wins.
        tmp = folder / f".{KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64encode(os.urandom(32)) + b"\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    raise KeySetupError(f"cannot read or create the signing key {path}")


def describe(ring: Keyring) -> str:
    """The start-up line: which key seals (by id and source), how many others open; never a key."""
    if ring.own:   # one person's proxy: no word of fleets (the docs' operations page has them)
        return f"marks are sealed with this instance's own key {ring.key_id} ({ring.source})"
    text = f"marks are sealed with key {ring.key_id} ({ring.source})"
    if ring.previous:
        text += f"; {len(ring.previous)} previous key(s) still open marks ({', '.join(key_id(k) for k in ring.previous)})"
    return text
