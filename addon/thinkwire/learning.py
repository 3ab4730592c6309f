"""What the proxy learns of models no profile describes: which open their reasoning in the
prompt, so that their output starts inside a reasoning block and only the closing tag appears.

A stream cannot tell such output apart from an answer until the closing tag comes, and by then
the reasoning went out as answer. After a model (at one upstream, for one client) has sent a
closing tag with no opening tag, and text before it, in EVIDENCE responses in a row, its later
responses to that client start inside the block; an answer it gives complete with no tag at all
forgets that. Learning is per client (addon.client_key: a hash of the client's credential, else
its address), so one client's outputs never change what another client gets. Kept in memory
only, for at most SIZE (client, upstream, model) keys, each at most LONGEST characters of model
name and of upstream (the least recently seen go first): an optimisation a restart loses, never
needed for a correct result (a profile in tagsets.yaml makes it permanent, and the log line says
which).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict

EVIDENCE = 2
SIZE = 1024
LONGEST = 256   # longer model names and upstreams are not kept (a client's name, not a server's)

Key = tuple[str | None, str | None, str]   # (client, upstream, model)


class Learner:
    def __init__(self, evidence: int = EVIDENCE, size: int = SIZE) -> None:
        self.evidence = evidence
        self.size = size
        # (client, upstream, model) -> responses in a row with a stray closing tag after text (capped)
        self._strays: OrderedDict[Key, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._strays)

    def inside(self, client: str | None, upstream: str | None, model: str | None) -> bool:
        """Whether the model's output, for this client, is known to start inside a reasoning block."""
        return model is not None and self._strays.get((client, upstream, model), 0) >= self.evidence

    def observe(self, client: str | None, upstream: str | None, model: object, stray: bool,
                answered: bool) -> str | None:
        """A response of `model` to `client` that started where the learner said: `stray`, it had
        a closing tag with no opening tag and text before it; `answered`, it was an answer given
        complete with no tag at all. A message for the log when the model is learned or
        forgotten, else None."""
        if not isinstance(model, str) or not model or len(model) > LONGEST or len(upstream or "") > LONGEST \
                or len(client or "") > LONGEST:
            return None
        key = (client, upstream, model)
        n = self._strays.get(key, 0)
        if stray:
            self._strays[key] = min(n + 1, self.evidence)
            self._strays.move_to_end(key)
            while len(self._strays) > self.size:
                self._strays.popitem(last=False)
            return learned_message(upstream, model, self.evidence) if n + 1 == self.evidence else None
        if answered and n:
            del self._strays[key]
            if n >= self.evidence:
                return (f"model {model!r} at {upstream or 'its upstream'} answered with no tag at all: "
                        "its responses to this client no longer start inside a reasoning block "
                        "(what was learned is forgotten)")
        return None


def learned_message(upstream: str | None, model: str, evidence: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") or "my-model"
    glob = re.sub(r"([*?\[])", r"[\1]", model)   # the exact name, as a pattern
    return (f"model {model!r} at {upstream or 'its upstream'} wrote a closing tag with no opening tag in "
            f"{evidence} responses in a row: its template opens the reasoning block in the prompt, so its "
            "responses to this client now start inside it (learned in memory only, per client: a restart "
            "forgets it; think_learn=off turns learning off). To keep it, add this profile to a copy of "
            "tagsets.yaml (THINK_TAGSETS):\n"
            f"  - name: {slug}\n    models: [{json.dumps(glob)}]\n    starts_inside: true")
