"""Results stored in the repository that a test compares exactly, and how to rewrite them.

`THINKWIRE_WRITE_RESULTS=1 ./scripts/test tests/test_conformance.py tests/test_corpus.py ...`
runs the tests without comparing: each records what the code gives now, and the files are
rewritten when the session ends (only the entries of the tests that ran change). Read the diff,
and the review (`.venv/bin/python -m devtools.review`), before committing it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

WRITE = bool(os.environ.get("THINKWIRE_WRITE_RESULTS"))
HOW = "THINKWIRE_WRITE_RESULTS=1 ./scripts/test <the test module>, then review the diff"

_OPEN: dict[Path, "Stored"] = {}


def _show(value) -> str:
    return json.dumps(value, ensure_ascii=False)


class Stored:
    """A JSON object in a file: key -> stored value."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        self.changed = False

    def get(self, key: str):
        return self.data.get(key)

    def put(self, key: str, value) -> None:
        if self.data.get(key) != value:
            self.data[key] = value
            self.changed = True

    def drop(self, key: str) -> None:
        if key in self.data:
            del self.data[key]
            self.changed = True

    def check(self, key: str, got) -> None:
        """Write mode: store `got`. Otherwise `got` must equal the stored value exactly."""
        if WRITE:
            self.put(key, got)
            return
        want = self.get(key)
        assert want is not None, f"no stored result for {key!r} in {self.path.name}: {HOW}"
        assert got == want, (f"{key}: the result changed ({self.path.name})\n  stored: {_show(want)}\n"
                             f"  now:    {_show(got)}\nif it is right now: {HOW}")

    def save(self) -> None:
        if self.changed:
            text = json.dumps(dict(sorted(self.data.items())), indent=1, ensure_ascii=False)
            self.path.write_text(text + "\n", encoding="utf-8")
            self.changed = False


def stored(path: Path) -> Stored:
    """The one Stored per file in this session (tests that share a file share it)."""
    if path not in _OPEN:
        _OPEN[path] = Stored(path)
    return _OPEN[path]


def save_all() -> None:
    """Write what write mode recorded (conftest calls this when the session ends)."""
    for s in _OPEN.values():
        s.save()
