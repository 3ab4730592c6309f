"""The sealed mark: how this proxy recognises reasoning it made when a client sends it back.

A mark is `tw1.` + base64url(nonce || AES-256-GCM(payload)), payload = the reasoning text and
the tag pair it came from. Only a holder of the key can make or read one, so a mark that opens
is ours and carries the exact text to restore; anything else (a real Anthropic signature, an
OpenAI `encrypted_content`, a forgery) fails to open and is not ours. No state is kept between
flows: a restart, or another proxy instance with the same key, opens the same marks.

The key comes from THINK_SIGNING_KEY (any string, shared by instances that must agree), else
from a random key created once in mitmproxy's confdir with mode 0600. It is never logged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import zlib
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .splitter import TagPair

PREFIX = "tw1."                   # format version 1; a later format gets another prefix
KEY_FILE = "thinkwire-signing-key"
_AAD = b"thinkwire mark v1"
_NONCE = 12
_COMPRESS_OVER = 256              # bytes of payload above which zlib pays off


@dataclass(frozen=True)
class Opened:
    text: str
    pair: TagPair


class Sealer:
    def __init__(self, secret: bytes) -> None:
        # Derive the AES key so any length or form of configured secret works.
        self._aead = AESGCM(hashlib.sha256(b"thinkwire-key\0" + secret).digest())

    def seal(self, text: str, pair: TagPair, literal: str | None = None) -> str:
        """`literal`: the body of text's JSON literal, where the caller has it (a stream's
        reasoning, as it came): the text is not escaped again."""
        body = encode_basestring(text) if literal is None else '"' + literal + '"'
        # (A text may hold lone surrogates, from an upstream's `\ud800` escape or bytes that were
        # not UTF-8: they are carried as they are, and `open` reads them back the same way.)
        payload = ("[" + encode_basestring(pair.open) + "," + encode_basestring(pair.close) + "," + body
                   + "]").encode("utf-8", "surrogatepass")
        if len(payload) > _COMPRESS_OVER:
            # Level 1: a third of level 6's time, for a mark ~10% larger (more on repetitive text).
            flag, payload = b"z", zlib.compress(payload, 1)
        else:
            flag = b"j"
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, flag + payload, _AAD)
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode()

    def open(self, mark: object) -> Opened | None:
        """The sealed text and pair, or None if `mark` is not a mark made with this key."""
        if not isinstance(mark, str) or not mark.startswith(PREFIX):
            return None
        try:
            body = mark[len(PREFIX):]
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            if len(raw) < _NONCE + 17:
                return None
            plain = self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _AAD)  # verifies the tag
            flag, payload = plain[:1], plain[1:]
            if flag == b"z":
                payload = zlib.decompress(payload)
            elif flag != b"j":
                return None
            open_, close, text = json.loads(payload.decode("utf-8", "surrogatepass"))
            return Opened(text, TagPair(open_, close))
        except Exception:  # bad base64, wrong key, tampered, garbage: not ours
            return None


def load_secret(confdir: str | os.PathLike | None) -> bytes:
    """THINK_SIGNING_KEY if set, else the key file in confdir (created once, mode 0600)."""
    env = os.environ.get("THINK_SIGNING_KEY")
    if env:
        return env.encode()
    folder = Path(os.path.expanduser(str(confdir or "~/.mitmproxy")))
    path = folder / KEY_FILE
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
    raise OSError(f"cannot read or create the signing key {path}")


class LazySealer:
    """A Sealer whose key is loaded (or created) on first use, for tools that rarely need it."""

    def __init__(self, confdir: str | os.PathLike | None) -> None:
        self._confdir = confdir
        self._sealer: Sealer | None = None

    def _get(self) -> Sealer:
        if self._sealer is None:
            self._sealer = Sealer(load_secret(self._confdir))
        return self._sealer

    def seal(self, text: str, pair: TagPair, literal: str | None = None) -> str:
        return self._get().seal(text, pair, literal)

    def open(self, mark: object) -> Opened | None:
        return self._get().open(mark)
