"""What the memory keeps of one assistant turn, and under which key.

An entry holds the reasoning exactly as the upstream gave it:
- `inline`: the model wrote it into the text (`<think>x</think>answer`, thinkwire split it):
  `text` is the whole text as the model wrote it, markup and whitespace included, and `answer`
  the text the client got without it. Put back, the turn's text becomes `text` again, byte for
  byte, when the client's text is still `answer`.
- `native`: the upstream sent it in a field of its own (`reasoning_content`, `reasoning`,
  Ollama's `thinking`): `text` is that field's value, `field` its name.
- `objects`: Messages thinking blocks or Responses reasoning items as the client got them (the
  JSON list, in `text`): thinkwire's carry marks, an upstream's its own signatures or ids.

Keys never hold the text: a hash of the client's scope (a hash of its credential), the surface,
and what the client sends back of the turn (its tool call ids, else its answer text).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

INLINE, NATIVE, OBJECTS = "inline", "native", "objects"
PREFIX = "thinkwire:mem:1:"   # a store's keys (a shared Redis may hold others)


@dataclass(frozen=True)
class Entry:
    form: str          # INLINE or NATIVE
    text: str
    answer: str = ""   # INLINE: the text the client got
    field: str = ""    # NATIVE: the field it came in

    def encode(self) -> bytes:
        return json.dumps([self.form, self.text, self.answer, self.field], ensure_ascii=False).encode(
            "utf-8", "surrogatepass")

    @classmethod
    def decode(cls, raw: bytes) -> Entry | None:
        """An entry from a store's bytes; None for anything that is not one (a store is not
        trusted to hold only ours)."""
        try:
            form, text, answer, field = json.loads(bytes(raw).decode("utf-8", "surrogatepass"))
        except Exception:
            return None
        if form not in (INLINE, NATIVE, OBJECTS) or not all(isinstance(x, str) for x in (text, answer, field)):
            return None
        return cls(form, text, answer, field)


def key(scope: bytes, surface: str, ids: tuple[str, ...] = (), answer: str | None = None) -> str | None:
    """The store key of a turn: by its tool call ids when it has any, else by its answer text
    (None when it has neither: nothing to find it by)."""
    if ids:
        material = b"ids\0" + "\0".join(ids).encode("utf-8", "surrogatepass")
    elif answer:
        material = b"text\0" + answer.encode("utf-8", "surrogatepass")
    else:
        return None
    h = hashlib.blake2b(digest_size=20, person=b"thinkwire-mem1")
    for part in (scope, surface.encode(), material):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return PREFIX + h.hexdigest()
