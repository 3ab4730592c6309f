"""The sealed mark: how this proxy recognises reasoning it made when a client sends it back.

A mark is `tw1.` + base64url(nonce || AES-256-GCM(payload)), payload = the reasoning text and
the tag pair it came from. Only a holder of the key can make or read one, so a mark that opens
is ours and carries the exact text to restore; anything else (a real Anthropic signature, an
OpenAI `encrypted_content`, a forgery) fails to open and is not ours. No state is kept between
flows: a restart, or another proxy instance with the same key, opens the same marks.

The keys come from thinkwire.keys: the current key seals and opens, previous keys (a rotation)
only open. They are never logged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zlib
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Iterable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from . import keys
from .rules import TagPair, Written

PREFIX = "tw1."                   # format version 1; a later format gets another prefix
_AAD = b"thinkwire mark v1"
_NONCE = 12
_COMPRESS_OVER = 256              # bytes of payload above which zlib pays off


@dataclass(frozen=True)
class Opened:
    text: str
    pair: TagPair   # the markup as the model wrote it around the text (a Written: see `added`)


def _aead(secret: bytes) -> AESGCM:
    # Derive the AES key so any length or form of configured secret works.
    return AESGCM(hashlib.sha256(b"thinkwire-key\0" + secret).digest())


class Sealer:
    def __init__(self, secret: bytes, previous: Iterable[bytes] = ()) -> None:
        """`secret` seals and opens; each of `previous` only opens (marks from before a rotation)."""
        self._aead = _aead(secret)
        self._opening = [self._aead] + [_aead(p) for p in previous if p != secret]

    def seal(self, text: str, pair: TagPair, literal: str | None = None) -> str:
        """`literal`: the body of text's JSON literal, where the caller has it (a stream's
        reasoning, as it came): the text is not escaped again."""
        body = encode_basestring(text) if literal is None else '"' + literal + '"'
        # (A text may hold lone surrogates, from an upstream's `\ud800` escape or bytes that were
        # not UTF-8: they are carried as they are, and `open` reads them back the same way.)
        # (A Written pair's `added`, the characters thinkwire put after the block, goes last.)
        added = "," + str(pair.added) if isinstance(pair, Written) and pair.added else ""
        payload = ("[" + encode_basestring(pair.open) + "," + encode_basestring(pair.close) + "," + body
                   + added + "]").encode("utf-8", "surrogatepass")
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
            plain = self._decrypt(raw)
            flag, payload = plain[:1], plain[1:]
            if flag == b"z":
                payload = zlib.decompress(payload)
            elif flag != b"j":
                return None
            open_, close, text, *added = json.loads(payload.decode("utf-8", "surrogatepass"))
            if added:
                (n,) = added
                return Opened(text, Written(open_, close, n)) if type(n) is int and n > 0 else None
            return Opened(text, TagPair(open_, close))
        except Exception:  # bad base64, wrong key, tampered, garbage: not ours
            return None

    def _decrypt(self, raw: bytes) -> bytes:
        """The plain payload under the first key whose tag verifies; InvalidTag under none."""
        nonce, sealed = raw[:_NONCE], raw[_NONCE:]
        for aead in self._opening:
            try:
                return aead.decrypt(nonce, sealed, _AAD)
            except InvalidTag:
                continue
        raise InvalidTag


class LazySealer:
    """A Sealer whose keys are loaded (this instance's own key created) on first use, for tools
    that rarely need one; `config` defaults to what the environment says (thinkwire.keys)."""

    def __init__(self, confdir: str | os.PathLike | None, config: keys.KeyConfig | None = None) -> None:
        self._confdir = confdir
        self._config = config
        self._sealer: Sealer | None = None
        self._keyring: keys.Keyring | None = None

    @property
    def keyring(self) -> keys.Keyring:
        """The keys (loaded now if not yet); KeySetupError when they cannot be had."""
        self._get()
        return self._keyring  # type: ignore[return-value]

    def _get(self) -> Sealer:
        if self._sealer is None:
            config = self._config if self._config is not None else keys.KeyConfig.from_values({})
            ring = keys.load(config, self._confdir)
            self._sealer, self._keyring = Sealer(ring.current, ring.previous), ring
        return self._sealer

    def seal(self, text: str, pair: TagPair, literal: str | None = None) -> str:
        return self._get().seal(text, pair, literal)

    def open(self, mark: object) -> Opened | None:
        return self._get().open(mark)
