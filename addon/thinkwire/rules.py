"""Splitting rules: the tag pairs and markers of one flow, and the lookups the splitter makes in them.

Pure. `Rules` is built once per distinct set (thinkwire.context caches them) and compiles what
every scan needs: the alternations of tags to look for in the answer and inside each kind of
block, the tags' prefixes (what may still become a tag at a text's end), their first characters
(what plain text never holds: the C part's table, thinkwire.hot), and which tags are special
tokens (`<|...|>`: they count wherever they stand outside code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

WS = " \t\r\n\f\v"   # whitespace, as trimming and the splitter read it


@dataclass(frozen=True, slots=True)
class TagPair:
    open: str
    close: str

    def __str__(self) -> str:
        return f"{self.open} {self.close}"


@dataclass(frozen=True, slots=True)
class Written(TagPair):
    """A reasoning block's markup as the model wrote it (thinkwire.splitter's END), where the
    answer after it starts with `added` characters thinkwire put there (a line break between answer
    text that would run together): the way back takes them out again."""

    added: int = 0


@dataclass(frozen=True, slots=True)
class _Scan:
    """What to look for inside a reasoning block: its closing tag(s), the markers that end it,
    and, in a block the template opened, the opening tag the model may write anyway."""

    regex: re.Pattern[str]
    prefixes: frozenset[str]
    first: re.Pattern[str]
    longest: int


@dataclass(frozen=True)
class Rules:
    """How to split: the tag pairs and the switches that apply to one flow."""

    pairs: tuple[TagPair, ...]
    trim: bool = True
    anywhere: bool = False
    # A model whose template opens the reasoning block in the prompt: output starts inside it.
    starts_inside: bool = False
    # Markers that leave the answer wherever they appear (answer wrappers, channel headers). A
    # marker that is also a closing tag closes a block, and is removed anywhere else.
    strip: tuple[str, ...] = ()
    # Markers that end an open reasoning block and stay in the output: a tool call the model
    # started before closing its reasoning, a new channel header. (vLLM and SGLang end
    # reasoning there too, so a tool parser finds the call in the content.)
    ends: tuple[str, ...] = ()
    # Pairs whose opening tag counts only at the very start of the output, and the markers that
    # end such a block: what a server leaves of a channel header when it drops special tokens
    # (gpt-oss: `analysis` ... `assistantfinal`). Words that prose uses: looked for nowhere else.
    start_pairs: tuple[TagPair, ...] = ()
    start_ends: tuple[str, ...] = ()
    # (marker that ends reasoning, marker that resumes it): a tool block inside reasoning that
    # goes to the answer, after which the reasoning goes on (Apertus: `<|tools_prefix|>` ...
    # `<|tools_suffix|>`). Both markers stay in the answer with the call.
    resumes: tuple[tuple[str, str], ...] = ()
    # (header, end marker): a tool call in the answer, from its header to its end marker, stays as
    # the model wrote it, strip markers and all, for a tool parser (gpt-oss:
    # `<|start|>assistant to=...` ... `<|call|>`; Muse: `<|start|>to=functions` ... `<|eom|>`).
    tools: tuple[tuple[str, str], ...] = ()
    # Compiled helpers, derived from the above.
    _content_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _resume_of: dict[str, str] = field(init=False, repr=False, compare=False)
    _tool_of: dict[str, _Scan] = field(init=False, repr=False, compare=False)   # header -> its end markers' scan
    _by_open: dict[str, TagPair] = field(init=False, repr=False, compare=False)
    _by_close: dict[str, TagPair] = field(init=False, repr=False, compare=False)
    _content_prefixes: frozenset[str] = field(init=False, repr=False, compare=False)
    _strip: frozenset[str] = field(init=False, repr=False, compare=False)
    _longer: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    _longest: int = field(init=False, repr=False, compare=False)
    _ws_lead: bool = field(init=False, repr=False, compare=False)
    _first_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    # The first character of every tag and marker.
    tag_starts: frozenset[str] = field(init=False, repr=False, compare=False)
    _plain_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _scans: dict[tuple[TagPair | None, bool], _Scan] = field(init=False, repr=False, compare=False)
    # Tags and markers shaped as special tokens (`<|...|>`, `<｜...｜>`, `<|channel>`): prose never
    # holds them, so they count outside code wherever they stand.
    _special: frozenset[str] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.pairs:
            raise ValueError("at least one tag pair is needed")
        opens = [p.open for p in self.pairs]
        closes = [p.close for p in self.pairs]
        strip = list(self.strip)
        resume = [r for _, r in self.resumes]
        heads = [h for h, _ in self.tools]
        every = opens + closes + strip + list(self.ends) + resume + heads + [e for _, e in self.tools]

        s = object.__setattr__
        # Rules key caches that every flow consults: hash the fields once, not on each lookup.
        s(self, "_hash", hash((self.pairs, self.trim, self.anywhere, self.starts_inside, self.strip, self.ends,
                               self.start_pairs, self.start_ends, self.resumes, self.tools)))
        # In the answer: opening tags, closing tags (stray, or paired with an opening tag kept as
        # text) and strip markers.
        s(self, "_content_re", _alternation(opens + closes + strip + resume + heads))
        s(self, "_by_open", {p.open: p for p in reversed(self.pairs)})
        s(self, "_by_close", {p.close: p for p in reversed(self.pairs)})
        s(self, "_content_prefixes", _prefixes(opens + closes + strip + resume + heads))
        s(self, "_resume_of", dict(self.resumes))
        s(self, "_tool_of", {h: _scan([e for g, e in self.tools if g == h]) for h in heads})
        s(self, "_strip", frozenset(strip))
        # A tag found whole may still be the start of a longer one (`<|channel>` of
        # `<|channel>thought`): it is decided only once the text can tell them apart.
        s(self, "_longer", {t: tuple(u for u in set(every) if len(u) > len(t) and u.startswith(t))
                            for t in set(every)})
        s(self, "_longest", max(len(t) for t in every))
        # Some tag begins with whitespace: held whitespace might be the start of a tag.
        s(self, "_ws_lead", any(t[:1] in WS for t in every))
        s(self, "tag_starts", frozenset(t[0] for t in every))
        s(self, "_first_re", _chars(every))
        # Answer text without these characters cannot hold a tag (nor a tool call's end marker).
        s(self, "_plain_re", _chars(opens + closes + strip + resume + heads + [e for _, e in self.tools]))
        s(self, "_scans", {})
        s(self, "_special", frozenset(t for t in every if is_special_token(t)))

    def __hash__(self) -> int:
        return self._hash

    def scan(self, pair: TagPair | None, lead_open: bool) -> _Scan:
        """Inside a block of `pair` (None: any pair's close ends it)."""
        key = (pair, lead_open)
        got = self._scans.get(key)
        if got is None:
            tags = [pair.close] if pair is not None else [p.close for p in self.pairs]
            tags += self.ends
            if pair in self.start_pairs:
                tags += self.start_ends
            if lead_open:
                tags += [p.open for p in self.pairs]
            got = self._scans[key] = _scan(tags)
        return got

    def may_hold_tag(self, text: str) -> bool:
        """Whether text holds the first character of any tag or marker of these rules."""
        return self._first_re.search(text) is not None

    def undecided(self, buf: str, j: int, tag: str) -> bool:
        """The tag found at j could still grow into a longer one: buf ends inside that one."""
        longer = self._longer.get(tag)
        if not longer:
            return False
        rest = buf[j:]
        return any(len(u) > len(rest) and u.startswith(rest) for u in longer)


def is_special_token(tag: str) -> bool:
    """A tag shaped as a tokenizer's special token: `<|...|>`, the full-width `<｜...｜>`, or
    half of one (Gemma's `<|channel>` and `<channel|>`)."""
    return tag.startswith(("<|", "<｜")) or tag.endswith(("|>", "｜>"))


_SPECIAL_HEAD = re.compile(r"<\|[^<>|\n]*\|>|<｜[^<>｜\n]*｜>")


def cut_off_marker(text: str, prefixes: frozenset[str], longest: int, first: re.Pattern[str]) -> int:
    """At the output's end: the length of a tag or marker cut off there (text that is only the
    start of one) when it begins with a whole special token (`<|close|>` of `<|close|>think<|sep|>`):
    markup, as prose never holds one, so it is dropped. Any other start of a tag stays text."""
    k = partial_tag_len(text, prefixes, longest, first)
    return k if k and _SPECIAL_HEAD.match(text, len(text) - k) else 0


def _scan(tags: list[str]) -> _Scan:
    return _Scan(_alternation(tags), _prefixes(tags), _chars(tags), max(len(t) for t in tags))


def _alternation(tags: list[str]) -> re.Pattern[str]:
    # Longest first, so `<thinking>` wins over a `<think` prefix of it.
    ordered = sorted(set(tags), key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in ordered))


def _prefixes(tags: list[str]) -> frozenset[str]:
    return frozenset(t[:k] for t in tags for k in range(1, len(t)))


def _chars(tags: list[str], extra: str = "") -> re.Pattern[str]:
    return re.compile("[" + re.escape("".join(sorted({t[0] for t in tags})) + extra) + "]")


def partial_tag_len(text: str, prefixes: frozenset[str], longest: int, first: re.Pattern[str] | None = None) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of a tag. `first` (the
    tags' first characters) says where such a suffix may start: only there is it looked up."""
    n = len(text)
    if first is not None:
        for m in first.finditer(text, max(0, n - longest + 1)):   # the longest suffix first
            if text[m.start():] in prefixes:
                return n - m.start()
        return 0
    for k in range(min(longest - 1, n), 0, -1):
        if text[-k:] in prefixes:
            return k
    return 0
