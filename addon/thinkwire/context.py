"""What one flow's rewrite knows: the settings, the model's profile, the request, the tallies."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from .marks import PREFIX
from .settings import Settings
from .splitter import Rules, Split, Splitter, TagPair, split_text
from .tagsets import Profile


@dataclass
class Stats:
    """Per-flow tallies for the log line and the mitmweb comment (never any body text)."""

    blocks: int = 0
    reasoning_chars: int = 0
    stray_closes: int = 0
    malformed_events: int = 0
    restored: int = 0
    refused: int = 0              # marks (tw1.) in a request that no key of this proxy opens
    native: bool = False          # the upstream already sent native reasoning
    fell_back: str | None = None  # why the rewrite stopped and passed bytes through
    broken: str | None = None     # why a compressed stream stopped decoding part way (ended there)


@dataclass
class FlowContext:
    settings: Settings
    model: str | None = None            # from the request; else the response's first `model`
    request: dict | None = None         # the parsed request body, when it was JSON
    stats: Stats = field(default_factory=Stats)
    sealer: object | None = None        # marks.Sealer, for thinking signatures / encrypted content
    _profile: Profile | None = None
    _rules: Rules | None = None
    _splitters: list = field(default_factory=list)

    def rules(self, response_model: object = None) -> Rules:
        """The flow's splitting rules, from its model's profile and the request's thinking switch."""
        if self._rules is None:
            model = self.model or (response_model if isinstance(response_model, str) else None)
            self.model = model
            s = self.settings
            p = self._profile = s.tagsets.profile_for(model)
            inside = p.starts_inside or s.starts_inside
            switch = thinking_switch(self.request)
            if switch is False:
                inside = False   # thinking turned off: the template closed the block in the prompt
            elif inside and not s.starts_inside and p.tagless_means == "content" and switch is not True:
                # Output without a closing tag would be an answer. A stream cannot take back text
                # it sent as reasoning, so it starts as answer; a closing tag still ends reasoning
                # (whole bodies: the text before it becomes reasoning).
                inside = False
            self._rules = _rules(p.pairs, s.trim, s.tags_anywhere, inside, p.strip, p.ends)
        return self._rules

    @property
    def profile(self) -> Profile:
        self.rules()
        return self._profile  # type: ignore[return-value]

    def splitter(self, response_model: object = None, starts_inside: bool | None = None) -> Splitter:
        sp = Splitter(self.rules(response_model), starts_inside)
        self._splitters.append(sp)
        return sp

    def split(self, text: str, response_model: object = None, count: bool = True,
              starts_inside: bool | None = None) -> Split:
        rules = self.rules(response_model)
        if starts_inside is not None and starts_inside != rules.starts_inside:
            rules = _rules(rules.pairs, rules.trim, rules.anywhere, starts_inside, rules.strip, rules.ends)
        result = split_text(text, rules)
        if not count:
            return result
        blocks = result.reasoning
        self.stats.stray_closes += result.stray_closes
        self.stats.blocks += len(blocks)
        self.stats.reasoning_chars += sum(len(b) for b in blocks)
        return result

    def open_mark(self, mark: object) -> tuple[str, TagPair] | None:
        """(text, pair) sealed in `mark` when it is this proxy's (opens with its key), else None."""
        if self.sealer is None:
            return None
        opened = self.sealer.open(mark)
        if opened is None:
            if isinstance(mark, str) and mark.startswith(PREFIX):
                self.stats.refused += 1   # another key's (a replica's, a retired one's), or tampered
            return None
        return opened.text, opened.pair

    def tally(self) -> Stats:
        """Fold the stream splitters' counts into the stats (call once, at the end)."""
        for sp in self._splitters:
            self.stats.blocks += sp.blocks
            self.stats.reasoning_chars += sp.reasoning_chars
            self.stats.stray_closes += sp.stray_closes
        self._splitters.clear()
        return self.stats


@lru_cache(maxsize=256)
def _rules(pairs, trim, anywhere, starts_inside, strip, ends) -> Rules:
    # Rules compile their patterns: build each distinct set once, not per flow.
    return Rules(pairs, trim=trim, anywhere=anywhere, starts_inside=starts_inside, strip=strip, ends=ends)


def thinking_switch(request: dict | None) -> bool | None:
    """Whether the request explicitly turns thinking on (True) or off (False); None if silent.

    Read from what servers honour: `chat_template_kwargs.enable_thinking` / `.thinking`
    (vLLM, SGLang, llama.cpp), top-level `enable_thinking`, Anthropic's `thinking.type`, and
    OpenAI's `reasoning_effort` / `reasoning.effort` ("none" turns it off).
    """
    if not isinstance(request, dict):
        return None
    kwargs = request.get("chat_template_kwargs")
    if isinstance(kwargs, dict):
        for key in ("enable_thinking", "thinking"):
            if isinstance(kwargs.get(key), bool):
                return kwargs[key]
        if kwargs.get("thinking_mode") in ("enabled", "disabled"):  # MiniMax-M3
            return kwargs["thinking_mode"] == "enabled"
    if isinstance(request.get("enable_thinking"), bool):
        return request["enable_thinking"]
    thinking = request.get("thinking")
    if isinstance(thinking, bool):
        return thinking
    if isinstance(thinking, dict) and isinstance(thinking.get("type"), str):
        return thinking["type"] != "disabled"
    effort = request.get("reasoning_effort")
    reasoning = request.get("reasoning")
    if effort is None and isinstance(reasoning, dict):
        effort = reasoning.get("effort")
    if isinstance(effort, str):
        return effort != "none"
    return None
