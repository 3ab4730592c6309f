"""JSON numbers kept as the upstream wrote them, through a parse and a re-serialization.

json.loads reads every number with a fraction or an exponent as a float, and a float goes out as
Python writes it: `1e400` becomes `Infinity` (which strict JSON parsers refuse), `1E5` becomes
`100000.0`, `-1.5e-4` becomes `-0.00015`. thinkwire owns no float of any surface, so `loads`
keeps each number a float would not write back the same as a string holding a mark and the
number's text, and every `dumps` (thinkwire.jsonio) writes such a string back as that text.
Numbers a float writes back the same (most: `0.5`, `1e-07`) stay floats; integers stay ints.
The mark holds a NUL and a random key made at start-up, so no text an upstream sends is one.
"""

from __future__ import annotations

import json
import re
import secrets

_KEY = secrets.token_hex(8)
_MARK = "\x00" + _KEY + ":"                 # a kept number's string starts with this ...
_END = "\x00"                               # ... and ends with this
_WRITTEN = "\\u0000" + _KEY + ":"           # how dumps writes _MARK in a string literal
_KEPT = re.compile(r'"\\u0000' + _KEY + r':([^"\\]*)\\u0000"')


def _number(text: str) -> float | str:
    f = float(text)
    return f if repr(f) == text else _MARK + text + _END


def _constant(text: str) -> str:   # Infinity, -Infinity, NaN: not JSON, kept as they came
    return _MARK + text + _END


_DECODE = json.JSONDecoder(parse_float=_number, parse_constant=_constant).decode


def loads(data: str | bytes) -> object:
    """json.loads, numbers kept as written (see the module docstring)."""
    if not isinstance(data, str):
        data = data.decode(json.detect_encoding(data), "surrogatepass")
    return _DECODE(data)


def written(text: str) -> str:
    """JSON text from dumps with each kept number back as it came."""
    return _KEPT.sub(r"\1", text) if _WRITTEN in text else text
