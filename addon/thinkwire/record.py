"""What the addon keeps on a flow (`flow.metadata`), written and read in one place.

`flow.metadata` must stay plain data (mitmproxy saves it with the flow), so the record goes in as
a dict and comes back out through `FlowRecord.of`. The mitmweb views and the `-r` reload check
read it from here; the addon writes it once per handled flow.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

KEY = "thinkwire"                    # the record of a handled flow
RESTORED_KEY = "thinkwire_restored"  # objects restored on the request (the request hook's count)
UPSTREAM_KEY = "thinkwire_upstream"  # the response as the upstream sent it (bodies.py)
MEMORY_KEY = "thinkwire_memory"      # what the reasoning memory did: {"put_back": n, "remembered": n, "store": name}


@dataclass(frozen=True)
class FlowRecord:
    surface: str
    profile: str
    blocks: int = 0
    reasoning_chars: int = 0
    restored: int = 0
    fell_back: str | None = None   # why the rewrite stopped and passed the rest through
    broken: str | None = None      # why a compressed stream stopped decoding part way
    start: str | None = None       # where the output started and how that was decided (context.StartPlan)

    def put(self, flow: Any) -> None:
        flow.metadata[KEY] = asdict(self)

    @classmethod
    def of(cls, flow: Any) -> FlowRecord | None:
        """The flow's record, or None for a flow thinkwire did not handle (or a malformed one)."""
        md = getattr(flow, "metadata", None)
        raw = md.get(KEY) if isinstance(md, dict) else None
        if not isinstance(raw, dict):
            return None
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in raw.items() if k in known})
        except TypeError:  # a saved flow missing a required field
            return None

    def summary(self) -> str:
        if self.fell_back:
            return f"passed through unchanged ({self.fell_back})"
        text = f"{self.blocks} reasoning block(s), {self.reasoning_chars} chars moved"
        text += f"; {self.start}" if self.start else ""
        return text + (f"; the stream ended early: {self.broken}" if self.broken else "")


def handled(flow: Any) -> bool:
    md = getattr(flow, "metadata", None)
    return isinstance(md, dict) and KEY in md
