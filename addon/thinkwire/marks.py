"""The sealed mark: how this proxy recognises reasoning it made when a client sends it back.

A mark is `tw2.` + base64url(issued || nonce || AES-256-GCM(payload, AD)), payload = the
reasoning text and the tag pair it came from; `issued` the time it was sealed (8 bytes, seconds,
big-endian). Only a holder of the key can make or read one, so a mark that opens is ours and
carries the exact text to restore; anything else (a real Anthropic signature, an OpenAI
`encrypted_content`, a forgery) fails to open and is not ours. No state is kept between flows:
a restart, or another proxy instance with the same key, opens the same marks.

A mark is bound, through the AEAD's associated data (AD), to its issue time and to the client's
credential (`client_binding`: a hash of the request's Authorization header, else its x-api-key,
else its api-key, else nothing): it opens only for a request with the same credential, and only while younger than
the maximum age (think_mark_max_age). So one user's block pasted into another user's
conversation is not theirs to restore. A mark is read only when it is strict base64url of at
most MAX_MARK_CHARS characters, checked before anything is decoded or decrypted.

Format 1 marks (`tw1.`, bound to nothing) are refused: counted as refused, they pass as the
client sent them.

The keys come from thinkwire.keys: the current key seals and opens, previous keys (a rotation)
only open. They are never logged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
import zlib
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Callable, Iterable, Mapping

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from . import keys
from .rules import TagPair, Written

PREFIX = "tw2."                   # format 2; a later format gets another prefix
REFUSED_PREFIXES = ("tw1.",)      # earlier formats: marks of this proxy that are no longer opened
_AAD = b"thinkwire mark v2\0"
_ISSUED = 8                       # bytes of the issue time
_NONCE = 12
_TAG = 16
_COMPRESS_OVER = 256              # bytes of payload above which zlib pays off
MAX_MARK_CHARS = 4 << 20          # a longer mark is not read (4 MiB of base64: ~3 MiB sealed)
SKEW = 300                        # seconds a mark may seem to come from the future (replicas' clocks)
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


# The headers a client's credential comes in, in the order one is taken to tell clients apart
# (OpenAI-style Authorization, Anthropic's x-api-key, Azure OpenAI's api-key).
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key")


def client_binding(headers: Mapping[str, str]) -> bytes:
    """What marks are bound to: a hash of the client's credential (the first of
    CREDENTIAL_HEADERS it sends), b"" when it sends none. `headers`: a mapping with a `get`."""
    for name in CREDENTIAL_HEADERS:
        value = headers.get(name)
        if value:
            return hashlib.sha256(b"thinkwire client\0" + value.encode("utf-8", "surrogateescape")).digest()
    return b""


def is_mark(value: object) -> bool:
    """Whether `value` says it is a mark of this proxy (of this format or a refused earlier one),
    whether or not it opens."""
    return isinstance(value, str) and value.startswith((PREFIX,) + REFUSED_PREFIXES)


@dataclass(frozen=True)
class Opened:
    text: str
    pair: TagPair   # the markup as the model wrote it around the text (a Written: see `added`)


def _aead(secret: bytes) -> AESGCM:
    # Derive the AES key so any length or form of configured secret works.
    return AESGCM(hashlib.sha256(b"thinkwire-key\0" + secret).digest())


class Sealer:
    def __init__(self, secret: bytes, previous: Iterable[bytes] = (), clock: Callable[[], float] = time.time) -> None:
        """`secret` seals and opens; each of `previous` only opens (marks from before a rotation).
        `clock`: seconds since the epoch (the issue time sealed in, the age checked)."""
        self._aead = _aead(secret)
        self._opening = [self._aead] + [_aead(p) for p in previous if p != secret]
        self._clock = clock

    def seal(self, text: str, pair: TagPair, literal: str | None = None, client: bytes = b"") -> str:
        """`literal`: the body of text's JSON literal, where the caller has it (a stream's
        reasoning, as it came): the text is not escaped again. `client`: what the mark is bound
        to (`client_binding`)."""
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
        issued = max(0, int(self._clock())).to_bytes(_ISSUED, "big")
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, flag + payload, _AAD + issued + client)
        return PREFIX + base64.urlsafe_b64encode(issued + nonce + sealed).rstrip(b"=").decode()

    def open(self, mark: object, client: bytes = b"", max_age: int = 0) -> Opened | None:
        """The sealed text and pair, or None if `mark` is not a mark made with this key for
        `client`, or is older than `max_age` seconds (0: any age)."""
        raw = _envelope(mark)
        if raw is None:
            return None
        issued = int.from_bytes(raw[:_ISSUED], "big")
        now = self._clock()
        if issued > now + SKEW or (max_age and now - issued > max_age):
            return None
        try:
            plain = self._decrypt(raw[_ISSUED:], _AAD + raw[:_ISSUED] + client)
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

    def _decrypt(self, raw: bytes, aad: bytes) -> bytes:
        """The plain payload under the first key whose tag verifies; InvalidTag under none."""
        nonce, sealed = raw[:_NONCE], raw[_NONCE:]
        for aead in self._opening:
            try:
                return aead.decrypt(nonce, sealed, aad)
            except InvalidTag:
                continue
        raise InvalidTag


def _envelope(mark: object) -> bytes | None:
    """A mark's bytes (issued || nonce || sealed) when it is one of this format: at most
    MAX_MARK_CHARS, strict base64url (no padding, no other characters, canonical), long
    enough; else None. Checked before anything is decoded."""
    if not isinstance(mark, str) or not mark.startswith(PREFIX) or len(mark) > len(PREFIX) + MAX_MARK_CHARS:
        return None
    body = mark[len(PREFIX):]
    if len(body) % 4 == 1 or not _BASE64URL.fullmatch(body):
        return None
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != body or len(raw) < _ISSUED + _NONCE + _TAG + 1:
        return None   # (spare bits set in the last character: not what seal writes)
    return raw


class Bound:
    """A flow's sealer: marks sealed for its client, and opened only for it and while young."""

    def __init__(self, sealer: Sealer | LazySealer, client: bytes, max_age: int) -> None:
        self.sealer, self.client, self.max_age = sealer, client, max_age

    def seal(self, text: str, pair: TagPair, literal: str | None = None) -> str:
        return self.sealer.seal(text, pair, literal, client=self.client)

    def open(self, mark: object) -> Opened | None:
        return self.sealer.open(mark, client=self.client, max_age=self.max_age)


class LazySealer:
    """A Sealer whose keys are loaded (this instance's own key created) on first use, for tools
    that rarely need one; `config` defaults to what the environment says (thinkwire.keys)."""

    def __init__(self, confdir: str | os.PathLike[str] | None, config: keys.KeyConfig | None = None) -> None:
        self._confdir = confdir
        self._config = config
        self._sealer: Sealer | None = None
        self._keyring: keys.Keyring | None = None

    @property
    def keyring(self) -> keys.Keyring:
        """The keys (loaded now if not yet); KeySetupError when they cannot be had."""
        self._get()
        assert self._keyring is not None   # (_get loads it with the sealer)
        return self._keyring

    def _get(self) -> Sealer:
        if self._sealer is None:
            config = self._config if self._config is not None else keys.KeyConfig.from_values({})
            ring = keys.load(config, self._confdir)
            self._sealer, self._keyring = Sealer(ring.current, ring.previous), ring
        return self._sealer

    def seal(self, text: str, pair: TagPair, literal: str | None = None, client: bytes = b"") -> str:
        return self._get().seal(text, pair, literal, client)

    def open(self, mark: object, client: bytes = b"", max_age: int = 0) -> Opened | None:
        return self._get().open(mark, client, max_age)
