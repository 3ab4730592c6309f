"""When the reasoning memory is on for a request: from the model family and the upstream.

On (`auto`) for what needs the reasoning of earlier turns back:
- APIs that refuse a tool loop without it: DeepSeek's thinking mode answers 400 when an
  assistant turn with `tool_calls` lacks its `reasoning_content`; Kimi K2 thinking (Moonshot) and
  Xiaomi MiMo behave alike. Matched by model name and by the API's host.
- Interleaved-thinking templates, which render the reasoning of the assistant turns after the
  last user message when the client sends it (and lose it at every step when it does not):
  MiniMax-M2, GLM-4.5 and later, Kimi K2 thinking, gpt-oss, Qwen3 in tool loops.
Everywhere else off: a request that carries nothing of thinkwire's goes out byte-identical.
`every_turn`: the family reads the reasoning of answers without tool calls too (MiniMax's and
Kimi's documentation ask for every assistant turn back), so those are remembered as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

MODEL_CHARS = 200   # characters of a model name matched (names come from clients)


@dataclass(frozen=True)
class Family:
    name: str
    every_turn: bool = False   # remember answers without tool calls too


_FAMILIES: tuple[tuple[re.Pattern[str], Family], ...] = (
    (re.compile(r"deepseek"), Family("deepseek")),
    (re.compile(r"kimi-k2[\w.-]*thinking|k2-thinking|kimi-k2\.5"), Family("kimi-k2-thinking", every_turn=True)),
    (re.compile(r"mimo"), Family("mimo")),
    (re.compile(r"minimax-m\d"), Family("minimax-m2", every_turn=True)),
    (re.compile(r"glm-?(4\.[5-9]|[5-9](\.\d)?\b|z1)"), Family("glm")),
    (re.compile(r"gpt-oss"), Family("gpt-oss")),
    (re.compile(r"qwen3"), Family("qwen3")),
)
# The hosted APIs that refuse a loop without the reasoning, whatever the model is called there.
_HOSTS = {
    "api.deepseek.com": Family("deepseek"),
    "api.moonshot.ai": Family("kimi-k2-thinking", every_turn=True),
    "api.moonshot.cn": Family("kimi-k2-thinking", every_turn=True),
    "api.xiaomimimo.com": Family("mimo"),
    "api.minimax.io": Family("minimax-m2", every_turn=True),
    "api.minimaxi.com": Family("minimax-m2", every_turn=True),
}
FORCED = Family("forced")


def family(model: object, host: str | None) -> Family | None:
    """The family whose needs turn the memory on (auto), or None."""
    return _family(model[:MODEL_CHARS] if isinstance(model, str) else None, (host or "").lower())


@lru_cache(maxsize=1024)   # names of at most MODEL_CHARS characters: at most ~1 MiB kept
def _family(name: str | None, host: str) -> Family | None:
    if name:
        name = name.lower()
        for pattern, fam in _FAMILIES:
            if pattern.search(name):
                return fam
    return _HOSTS.get(host[:MODEL_CHARS])


def decide(mode: str, model: object, host: str | None) -> Family | None:
    """The memory's setting (`think_memory`: auto, on, off) for one request: the family it
    serves, or None when the memory stays out of the request."""
    if mode == "off":
        return None
    fam = family(model, host)
    if mode == "on":
        return fam or FORCED
    return fam
