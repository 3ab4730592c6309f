"""What one flow's rewrite knows: the settings, the model's profile, the request, the tallies."""

from __future__ import annotations

from dataclasses import dataclass, field

from .settings import Settings
from .splitter import Rules, Split, Splitter, split_text
from .tagsets import Profile


@dataclass
class Stats:
    """Per-flow tallies for the log line and the mitmweb comment (never any body text)."""

    blocks: int = 0
    reasoning_chars: int = 0
    stray_closes: int = 0
    malformed_events: int = 0
    restored: int = 0
    native: bool = False          # the upstream already sent native reasoning
    fell_back: str | None = None  # why the rewrite stopped and passed bytes through


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
        if self._rules is None:
            model = self.model or (response_model if isinstance(response_model, str) else None)
            self.model = model
            s = self.settings
            self._profile, self._rules = s.tagsets.rules_for(
                model, s.trim, s.tags_anywhere, s.starts_inside)
        return self._rules

    @property
    def profile(self) -> Profile:
        self.rules()
        return self._profile  # type: ignore[return-value]

    def splitter(self, response_model: object = None) -> Splitter:
        sp = Splitter(self.rules(response_model))
        self._splitters.append(sp)
        return sp

    def split(self, text: str, response_model: object = None, count: bool = True) -> Split:
        result = split_text(text, self.rules(response_model))
        if not count:
            return result
        blocks = result.reasoning
        self.stats.blocks += len(blocks)
        self.stats.reasoning_chars += sum(len(b) for b in blocks)
        return result

    def tally(self) -> Stats:
        """Fold the stream splitters' counts into the stats (call once, at the end)."""
        for sp in self._splitters:
            self.stats.blocks += sp.blocks
            self.stats.reasoning_chars += sp.reasoning_chars
            self.stats.stray_closes += sp.stray_closes
        self._splitters.clear()
        return self.stats
