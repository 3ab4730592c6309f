"""What one flow's rewrite knows: the settings, the model's profile, the request, the tallies,
and where the model's output starts (inside a reasoning block or in the answer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from .learning import Learner
from .marks import Bound, is_mark
from .serverstart import Told
from .request import Facts
from .settings import Settings
from .rules import Rules, TagPair
from .splitter import CONTENT, END, Piece, Split, Splitter, Text, merge
from .tagsets import MODEL_CHARS, Profile
from . import recorder, written as _written

# How an output ended, as each surface says it: an answer given in full, or something else (cut
# off at the token limit, a tool call, a filter). Only a complete answer tells a tagless output
# of a model that starts inside apart from one cut off while thinking.
STOP = "stop"
OTHER = "other"
LENGTH = "length"   # cut off at the token limit (one of the OTHER endings): a tag cut short there is markup


# How a flow's start was decided, as the log line and mitmweb say it.
PREFILL = "prefill"
STRUCTURED = "structured output"
SERVER_TEMPLATE = "server template"
SWITCH = "request switch"
OPTION = "option"
PROFILE = "profile"
SERVER_MODEL = "server model identity"
LEARNED = "learned"
NO_PROFILE = "no profile"
_SAID = {PREFILL: "the prefill's text", STRUCTURED: "structured output", SERVER_TEMPLATE: "the server's chat template",
         SWITCH: "a request switch", OPTION: "think_starts_inside", PROFILE: "the profile",
         SERVER_MODEL: "the profile of the model the server runs", LEARNED: "learned of this model",
         NO_PROFILE: "no profile"}
# Starts the learner may learn from: nothing but names (and the learner itself) decided them.
_LEARNABLE = (NO_PROFILE, PROFILE, SERVER_MODEL, LEARNED)


class StartPlan(NamedTuple):
    """Where a flow's output starts, as decided: inside a reasoning block (`pair` open, when
    known) or in the answer; the profile; and how it was decided."""

    inside: bool
    pair: TagPair | None
    profile: Profile
    how: str

    def describe(self) -> str:
        where = (f"inside {self.pair.open}" if self.pair else "inside the reasoning block") if self.inside \
            else "in the answer"
        return f"started {where} ({_SAID[self.how]})"


class FlowPlan(NamedTuple):
    """How one flow splits, decided once, when its model (and its server's answer) is known, and
    never changed after: the profile, the rules, where the output starts and how that was
    decided, the prefill it continues, and why it starts inside (None: in the answer; a prefill
    that leaves its block open says PREFILL though its start plan says the answer)."""

    profile: Profile
    rules: Rules
    start: StartPlan
    prefill: str | None
    inside_because: str | None

    @property
    def how(self) -> str:
        return self.start.how

    @property
    def inside(self) -> bool:
        return self.start.inside

    def describe(self) -> str:
        return self.start.describe()


@dataclass
class Stats:
    """Per-flow tallies for the log line and the mitmweb comment (never any body text)."""

    blocks: int = 0
    reasoning_chars: int = 0
    stray_closes: int = 0
    stray_after_text: int = 0     # ... with text before them: evidence the template opened the block
    malformed_events: int = 0
    restored: int = 0
    refused: int = 0              # marks (tw2., tw1.) in a request this proxy does not open for it
    native: bool = False          # the upstream already sent native reasoning
    again_chars: int = 0          # reasoning sent again as the answer (thinkwire.again)
    fell_back: str | None = None  # why the rewrite stopped and passed bytes through
    broken: str | None = None     # why a compressed stream stopped decoding part way (ended there)


@dataclass
class FlowContext:
    settings: Settings
    model: str | None = None            # from the request (else the response's first `model`)
    # The parsed request body, when it was JSON: on the way back only (the request hook's
    # context); what the response side reads of it is `facts`.
    request: dict[str, Any] | None = None
    facts: Facts | None = None
    stats: Stats = field(default_factory=Stats)
    sealer: Bound | None = None         # the client's, for thinking signatures / encrypted content
    # Ollama: whether the model's template reads thinking itself (its /api/show capabilities);
    # None when not known. The request hook sets it; the Ollama surface's way back reads it.
    native_thinking: bool | None = None
    surface: str | None = None          # the surface the request came to (what a prefill is)
    learner: Learner | None = None      # models learned to start inside
    upstream: str | None = None         # where the flow went (the learner's key, with the model)
    client: str | None = None           # who sent it (the learner's key too: addon.client_key)
    finish: str | None = None           # how the output ended (STOP, OTHER), once a response says
    # What the flow's server said of its start (serverstart.Told), when it said in time.
    told: Told | None = None
    plan: FlowPlan | None = None        # decided once, on first use of the rules (`rules`)
    tagged: bool = False                # a tag or marker was removed (or a stray closing tag seen)
    # thinkwire.written.Memory: the markup each split output was written with, for the way back
    # of surfaces where no mark carries it (None: not kept).
    written: _written.Memory | None = None
    _transcripts: list[recorder.Transcript] = field(default_factory=list)
    written_puts: list[tuple[str, bytes]] = field(default_factory=list)   # layouts for the shared store, once recorded
    _recall: _written.Recall | None = None
    _splitters: list[Splitter] = field(default_factory=list)

    def rules(self, response_model: object = None) -> Rules:
        """The flow's splitting rules: its model's profile (the request's model name, else the
        response's, else the real model its server names), and where the output starts (the
        start plan, see `_start`). Decided on the first call, with what is known then; later
        calls get the same plan."""
        plan = self.plan
        if plan is None:
            self.plan = plan = self._plan(response_model)
        return plan.rules

    def _plan(self, response_model: object) -> FlowPlan:
        profile, by_server = self._pick_profile(response_model)
        s, f = self.settings, self.facts or _NO_FACTS
        start = self._decide(profile, by_server, s, f)
        pairs = profile.pairs
        if start.pair is not None and all((q.open, q.close) != (start.pair.open, start.pair.close) for q in pairs):
            pairs = (start.pair, *pairs)   # the pair the server's template opens (by its tags: a
            # Written pair is no TagPair to ==)
        rules = _profile_rules(profile, s, start.inside, pairs)
        return FlowPlan(profile, rules, start, f.prefill, self._inside_because(start, profile, f.prefill))

    @property
    def inside_because(self) -> str | None:
        """Why the output starts inside a reasoning block: "option", "profile", "learned",
        "prefill", "server template", "server model identity"; None when it starts in the answer
        (or nothing decided yet)."""
        return self.plan.inside_because if self.plan is not None else None

    def _pick_profile(self, response_model: object) -> tuple[Profile, bool]:
        """The profile, and whether it is the one of the real model the server named."""
        tagsets = self.settings.tagsets
        # (Only the first MODEL_CHARS characters of a name are matched, learned of or logged.)
        answered = response_model[:MODEL_CHARS] if isinstance(response_model, str) and response_model else None
        p = tagsets.profile_for(self.model)
        if p is tagsets.default and answered is not None:
            # An alias the server maps (llama-server's `a`, a client's own name): the response
            # names the model it ran.
            by_response = tagsets.profile_for(answered)
            if by_response is not tagsets.default or self.model is None:
                self.model = self.model or answered
                p = by_response
        self.model = self.model or answered
        real = self.told.model if self.told is not None else None
        if p is tagsets.default and real:
            by_server = tagsets.profile_for(real)
            if by_server is not tagsets.default:
                return by_server, True
        return p, False

    def _inside_because(self, plan: StartPlan, p: Profile, prefill: str | None) -> str | None:
        if plan.inside:
            return plan.how
        if plan.how == PREFILL and prefill is not None:
            sp = Splitter(_profile_rules(p, self.settings, False))
            sp.resume(prefill)
            if sp.inside:
                return PREFILL
        return None

    def _decide(self, p: Profile, by_server: bool, s: Settings, f: Facts) -> StartPlan:
        """Where the output starts, as the prompt left it. In order: a prefill continues from the
        state its own text leaves (from the answer: the template adds no generation prompt); a
        request for structured output is constrained from the first token, so it starts in the
        answer; what the server's template renders for this request (its switches included);
        a switch that turns thinking off never starts inside; then `think_starts_inside`, the
        profile (with the switches its template reads, else its default; the profile of the
        real model the server names, where the client sent an alias), and what was learned of
        the model."""
        if f.prefill is not None:
            return StartPlan(False, None, p, PREFILL)   # the prefill's own text leaves its state
        if f.structured:
            return StartPlan(False, None, p, STRUCTURED)
        told = self.told
        if told is not None and told.inside is not None:
            return StartPlan(told.inside, told.pair if told.inside else None, p, SERVER_TEMPLATE)
        switch = f.switch(p.switches)
        if switch is False:
            return StartPlan(False, None, p, SWITCH)
        if s.starts_inside:
            return StartPlan(True, None, p, OPTION)
        named = SERVER_MODEL if by_server else PROFILE if p is not s.tagsets.default else NO_PROFILE
        if p.starts_inside and (switch if switch is not None else p.thinking_default):
            return StartPlan(True, None, p, named)
        if self.learner is not None and self.learner.inside(self.client, self.upstream, self.model):
            return StartPlan(True, None, p, LEARNED)
        return StartPlan(False, None, p, named)

    @property
    def profile(self) -> Profile:
        self.rules()
        assert self.plan is not None   # (rules() decides it)
        return self.plan.profile

    @property
    def prefill(self) -> str | None:
        """The text the output continues (the request's prefill), once the plan is decided."""
        return self.plan.prefill if self.plan is not None else None

    def splitter(self, response_model: object = None, starts_inside: bool | None = None) -> Splitter:
        """A stream's splitter. starts_inside None: the output's start (prefill included);
        False: a later text block of the same output (Messages), which starts in the answer."""
        rules = self.rules(response_model)
        sp = (Splitter if self.written is None else recorder.RecordingSplitter)(rules, starts_inside)
        if starts_inside is None and self.prefill is not None:
            sp.resume(self.prefill)
        self._splitters.append(sp)
        return sp

    def split(self, text: str, response_model: object = None, count: bool = True,
              starts_inside: bool | None = None, finish: str | None = None) -> Split:
        """A whole text, split. Where the body knows more than a stream of it could, it is used:
        a closing tag with no opening tag makes the text before it reasoning, for every model;
        an output that started inside and has no tag at all is an answer when the response says
        it ended complete (`finish` STOP; unknown: the profile's `tagless_means`)."""
        rules = self.rules(response_model)
        first = starts_inside is None
        inside = rules.starts_inside if starts_inside is None else starts_inside
        prefill = self.prefill
        prefilled = first and prefill is not None
        cut = finish == LENGTH
        pieces, sp = self._run(text, rules, inside, prefill if prefilled else None, cut)
        strays, tagged = sp.stray_closes, sp.markup_chars > 0 or sp.stray_closes > 0
        counts = sp
        if strays and not prefilled:
            # The template opened the block: split again from inside it.
            pieces, sp = self._run(text, rules, True, None, cut)
        elif (inside and not (first and self.inside_because == "prefill") and not tagged
              and _unclosed(pieces) and self._answered(finish)):
            # No tag at all, and the response ended complete: an answer given without thinking.
            pieces, sp = self._run(text, rules, False, None, cut)
        result = Split(pieces, strays)
        moved = first and (self.facts or _NO_FACTS).force_nonempty and bool(result.reasoning) and \
            not result.content.strip()
        if moved:
            # force_nonempty_content: reasoning and no answer, so the reasoning is the answer.
            result = Split([Text(CONTENT, "\n\n".join(result.reasoning))], strays)
        if not count:
            return result
        if self.written is not None and isinstance(sp, recorder.RecordingSplitter):
            split = Split(pieces, 0)
            t = recorder.checked(sp, text, "\n\n".join(split.reasoning), split.content)
            if moved:
                t.echoed(result.content, moved=True)
            self._transcripts.append(t)
        if finish is not None:
            self.finish = finish
        self.tagged |= tagged
        blocks = result.reasoning
        self.stats.stray_closes += strays
        self.stats.stray_after_text += counts.stray_after_text
        self.stats.blocks += len(blocks)
        self.stats.reasoning_chars += sum(len(b) for b in blocks)
        return result

    def _run(self, text: str, rules: Rules, inside: bool, prefill: str | None,
             cut: bool = False) -> tuple[list[Any], Splitter]:
        """The split pieces (splitter's `(kind, value)`s) and the splitter; `prefill`: the text
        the output continues, resumed first. A recording splitter where layouts are kept."""
        sp = (Splitter if self.written is None else recorder.RecordingSplitter)(rules, inside)
        if prefill is not None:
            sp.resume(prefill)
        return merge(sp.feed(text) + sp.finish(cut)), sp

    def _answered(self, finish: str | None) -> bool:
        if finish is not None:
            return finish == STOP
        return self.profile.tagless_means == "content"

    def ended(self, finish: str | None) -> None:
        """A stream said how its output ended (the last choice's finish_reason, the stop reason,
        the final response status)."""
        if finish is not None:
            self.finish = finish

    def open_mark(self, mark: object) -> tuple[str, TagPair] | None:
        """(text, pair) sealed in `mark` when it is this proxy's for this client (opens with its
        key, the client's credential, young enough), else None."""
        if self.sealer is None:
            return None
        opened = self.sealer.open(mark)
        if opened is None:
            if is_mark(mark):
                # Another key's (a replica's, a retired one's), another client's, too old, a
                # format-1 mark, or tampered.
                self.stats.refused += 1
            return None
        return opened.text, opened.pair

    def tally(self) -> Stats:
        """Fold the stream splitters' counts into the stats (call once, at the end)."""
        for sp in self._splitters:
            self.stats.blocks += sp.blocks
            self.stats.reasoning_chars += sp.reasoning_chars
            self.stats.stray_closes += sp.stray_closes
            self.stats.stray_after_text += sp.stray_after_text
            self.tagged |= sp.markup_chars > 0 or sp.stray_closes > 0
        self.written_puts += self.record_written(final=True)
        self._splitters.clear()
        self._transcripts.clear()
        return self.stats

    def record_written(self, final: bool = False) -> list[tuple[str, bytes]]:
        """The layouts of the outputs split so far recorded (thinkwire.written; streams' once their
        splitter finished, all of them when `final`); what to write to the shared store."""
        if self.written is None or self.stats.fell_back:
            return []
        ts = self._transcripts + [sp.transcript for sp in self._splitters if isinstance(sp, recorder.RecordingSplitter)
                                  and (final or sp.finished)]
        return [put for t in ts for put in recorder.record(self.written, t, self.client, self.scope, self.binding)]

    @property
    def binding(self) -> bytes:
        """What the client's marks are bound to (a hash of its credential, the same on every replica)."""
        return self.sealer.client if self.sealer is not None else b""

    @property
    def scope(self) -> _written.Scope:
        """Whose model writes the guess of the way back is kept for: client, upstream, model."""
        return (self.client, self.upstream, self.model)

    @property
    def recall(self) -> _written.Recall:
        """The way back's memory of what this client's model wrote (thinkwire.written)."""
        if self._recall is None:
            self._recall = _written.Recall(self.written, self.client, self.scope, self.binding)
        return self._recall

    def guess_pair(self) -> TagPair:
        """The markup to restore a block of ours with when nothing recorded its layout."""
        return self.recall.guess(self.rules().pairs[0])

    def learn(self) -> str | None:
        """Tell the learner what this flow showed about its model, for its client (after `tally`):
        a closing tag with no opening tag, and text before it, in output that started in the
        answer (a closing tag first of all is no evidence: nothing was said inside the block), or
        an answer given complete with no tag at all. Only flows whose start nothing but the
        learner decided count (not the server's template, a switch, a prefill, the option, a
        profile that starts inside). A message to log when what is known of the model changes."""
        plan = self.plan
        if self.learner is None or plan is None or plan.how not in _LEARNABLE or \
                plan.inside and plan.how != LEARNED:
            return None
        f = self.facts or _NO_FACTS
        answered = not self.tagged and self.finish == STOP and not f.structured
        return self.learner.observe(self.client, self.upstream, self.model,
                                    self.stats.stray_after_text > 0, answered)


_NO_FACTS = Facts()   # a request that was not JSON (or not seen)
SHOWN_CHARS = 80      # characters of a model name a log line or a flow's comment shows


def shown_model(name: str | None) -> str:
    """A model name as log lines and comments show it: at most its first SHOWN_CHARS characters,
    quoted (names come from clients)."""
    if name is None or len(name) <= SHOWN_CHARS:
        return repr(name)
    return f"{name[:SHOWN_CHARS]!r}... (a name of more than {SHOWN_CHARS} characters)"


def _unclosed(pieces: list[Piece]) -> bool:
    """Split pieces of an output that started inside and never left its block (one END, last)."""
    ends = [p for p in pieces if p.kind == END]
    return len(ends) == 1 and pieces[-1].kind == END


def _profile_rules(p: Profile, s: Settings, inside: bool, pairs: tuple[TagPair, ...] | None = None) -> Rules:
    """A profile's rules under the settings, starting `inside` or not (`pairs`: in place of its own)."""
    return _rules(p.pairs if pairs is None else pairs, s.trim, s.tags_anywhere, inside, p.strip, p.ends,
                  p.start_pairs, p.start_ends, p.resumes, p.tools)


@lru_cache(maxsize=256)
def _rules(pairs: tuple[TagPair, ...], trim: bool, anywhere: bool, starts_inside: bool, strip: tuple[str, ...],
           ends: tuple[str, ...], start_pairs: tuple[TagPair, ...] = (), start_ends: tuple[str, ...] = (),
           resumes: tuple[tuple[str, str], ...] = (), tools: tuple[tuple[str, str], ...] = ()) -> Rules:
    # Rules compile their patterns: build each distinct set once, not per flow.
    return Rules(pairs, trim=trim, anywhere=anywhere, starts_inside=starts_inside, strip=strip, ends=ends,
                 start_pairs=start_pairs, start_ends=start_ends, resumes=resumes, tools=tools)
