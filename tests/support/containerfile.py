"""The shipped Containerfile, read the way a builder reads it: its final stage's instructions, so
the tests run (and check) exactly the steps it ships."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CONTAINERFILE = ROOT / "Containerfile"


@dataclass
class Stage:
    base: str
    steps: list[tuple[str, str]] = field(default_factory=list)   # (INSTRUCTION, its arguments)

    def all(self, instruction: str) -> list[str]:
        return [args for ins, args in self.steps if ins == instruction]

    def one(self, instruction: str) -> str:
        found = self.all(instruction)
        assert len(found) == 1, f"{instruction}: {found}"
        return found[0]

    def exec_form(self, instruction: str) -> list[str]:
        """ENTRYPOINT / CMD in exec (JSON) form; HEALTHCHECK's command after its options."""
        args = self.one(instruction)
        if instruction == "HEALTHCHECK":
            args = args.split(" CMD ", 1)[1]
        return json.loads(args)

    def env(self) -> dict[str, str]:
        out = {}
        for args in self.all("ENV"):
            k, _, v = args.partition("=")
            out[k.strip()] = v.strip()
        return out


def final_stage(path: Path = CONTAINERFILE) -> Stage:
    text = re.sub(r"\\\n", " ", path.read_text())   # continuation lines
    args: dict[str, str] = {}
    stage = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        ins, _, rest = line.partition(" ")
        ins, rest = ins.upper(), " ".join(rest.split())
        if ins == "ARG" and stage is None:
            k, _, v = rest.partition("=")
            args[k] = v
        elif ins == "FROM":
            base = rest.split(" AS ")[0]
            stage = Stage(re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), base))
        elif stage is not None:
            stage.steps.append((ins, rest))
    assert stage is not None, f"{path} has no FROM"
    return stage


def listen_port(stage: Stage) -> int:
    """The port the entrypoint listens on (its --listen-port)."""
    entry = stage.exec_form("ENTRYPOINT")
    return int(entry[entry.index("--listen-port") + 1])
