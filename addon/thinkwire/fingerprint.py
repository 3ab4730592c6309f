"""Fingerprints of texts that compose: the stream's layout check (thinkwire.written).

A stream's text is not kept, so its layout cannot be checked by rebuilding the text and
comparing. But the text the layout gives back is a concatenation of parts the recorder sees
go by (the answer's runs, each block's text, the markup), only not in that order (a block's
opening markup is known when it ends). A fingerprint of a concatenation is made from its parts'
fingerprints (`cat`), and that of a run of a growing text from the prefixes' (`Running`), so the
recorder compares the fingerprint of what the layout gives back with that of what the model wrote.

The fingerprint of a text is (its UTF-8 bytes read as a base-256 number, modulo Q; the count of
bytes). Q is a prime of 127 bits (in [2**126, 2**127)) drawn at random once a process, so two
different texts of n bytes agree with a chance under n / 2**119 whatever their bytes are: they
agree when Q divides the difference of the two numbers, a number under 2**(8n) with at most
8n / 126 prime factors that large, and there are about 2**119.5 primes to draw from. (The
upstream that writes the text does not know Q.) So a layout that does not give the text back
is a miss, never a wrong text, but for that chance. The text is not kept: a fingerprint is two
numbers; time is linear in the text.
"""

from __future__ import annotations

import secrets
from bisect import bisect_left

Fp = tuple[int, int]   # (value mod Q, bytes)
EMPTY: Fp = (0, 0)


def _probably_prime(n: int) -> bool:
    if n % 2 == 0:
        return False
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for _ in range(40):   # Miller-Rabin: a composite passes all 40 with a chance under 2**-80
        x = pow(secrets.randbelow(n - 3) + 2, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _draw() -> int:
    while True:
        n = secrets.randbits(127) | (1 << 126) | 1
        if _probably_prime(n):
            return n


Q = _draw()


def of(text: str) -> Fp:
    b = text.encode("utf-8", "surrogatepass")
    return int.from_bytes(b, "big") % Q, len(b)


def cat(x: Fp, y: Fp) -> Fp:
    """The fingerprint of x's text followed by y's."""
    return (x[0] * pow(256, y[1], Q) + y[0]) % Q, x[1] + y[1]


def between(x: Fp, y: Fp) -> Fp:
    """From the fingerprints of a text's prefixes x and y (x the shorter): that of y's rest."""
    n = y[1] - x[1]
    return (y[0] - x[0] * pow(256, n, Q)) % Q, n


FOLD = 4096   # characters a Running (and the recorder's fingerprint of what the model wrote) holds before folding them in


class Running:
    """A growing text's fingerprint, and its prefixes' at the character offsets asked for
    (`add`'s `want`) as the text goes past them. Texts are folded in a few Ki characters at a
    time (FOLD): a token's cost is a list append."""

    __slots__ = ("_fp", "chars", "at", "_buf", "_held")

    def __init__(self) -> None:
        self._fp = EMPTY
        self.chars = 0
        self.at: dict[int, Fp] = {}
        self._buf: list[str] = []
        self._held = 0   # characters in _buf

    @property
    def fp(self) -> Fp:
        self._fold()
        return self._fp

    def _fold(self) -> None:
        if self._buf:
            self._fp = cat(self._fp, of("".join(self._buf)))
            self._buf.clear()
            self._held = 0

    def add(self, text: str, want: list[int]) -> None:
        """`text` appended; `want` sorted: the prefixes at its offsets that `text` reaches are kept."""
        n0 = self.chars
        n1 = n0 + len(text)
        k = bisect_left(want, n0)
        if k == len(want) or want[k] > n1:
            self._buf.append(text)
            self._held += len(text)
            if self._held >= FOLD:
                self._fold()
        else:
            pos = n0
            for w in want[k:]:
                if w > n1:
                    break
                if w > pos:
                    self._buf.append(text[pos - n0:w - n0])
                    pos = w
                self._fold()
                self.at[w] = self._fp
            if pos < n1:
                self._buf.append(text[pos - n0:])
                self._held += n1 - pos
        self.chars = n1

    def prefix(self, chars: int) -> Fp | None:
        """The prefix of `chars` characters' fingerprint, when it was kept (or is the whole)."""
        return self.fp if chars == self.chars else EMPTY if chars == 0 else self.at.get(chars)

    def part(self, start: int, end: int) -> Fp | None:
        """text[start:end]'s fingerprint, when both prefixes were kept."""
        x, y = self.prefix(start), self.prefix(end)
        return None if x is None or y is None or start > end else between(x, y)
