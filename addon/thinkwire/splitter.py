"""The streaming tag splitter: text in, reasoning and content pieces out.

Pure and I/O-free. One `Splitter` per stream and per choice; `feed(text)` returns the
pieces it can decide now, holding back only what could still become a tag (and, when
trimming, whitespace that might turn out to sit at the edge of a block); `finish()` flushes.
A whole body goes through the same object (`split_text`), so streams and bodies agree.

Pieces are tuples `(kind, value)`:
  (REASONING, text)  reasoning text, in order
  (CONTENT, text)    answer text, in order
  (END, TagPair)     a reasoning block ended (closed, or cut off by the end of output)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

REASONING = 0
CONTENT = 1
END = 2

_WS = " \t\r\n\f\v"
_HSPACE = " \t"
_HELD_WS = " \t\r\n\f"   # the whitespace thinkwire.hot carries: its JSON escapes are short
_FENCES = ("```", "~~~")


@dataclass(frozen=True, slots=True)
class TagPair:
    open: str
    close: str

    def __str__(self) -> str:
        return f"{self.open} {self.close}"


@dataclass(frozen=True, slots=True)
class _Scan:
    """What to look for inside a reasoning block: its closing tag(s), the markers that end it,
    and, in a block the template opened, the opening tag the model may write anyway."""

    regex: re.Pattern
    prefixes: frozenset
    first: re.Pattern
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
    # Compiled helpers, derived from the above.
    _content_re: re.Pattern = field(init=False, repr=False, compare=False)
    _by_open: dict = field(init=False, repr=False, compare=False)
    _by_close: dict = field(init=False, repr=False, compare=False)
    _content_prefixes: frozenset = field(init=False, repr=False, compare=False)
    _strip_prefixes: frozenset = field(init=False, repr=False, compare=False)
    _strip: frozenset = field(init=False, repr=False, compare=False)
    _longer: dict = field(init=False, repr=False, compare=False)
    _longest: int = field(init=False, repr=False, compare=False)
    _ws_lead: bool = field(init=False, repr=False, compare=False)
    _first_re: re.Pattern = field(init=False, repr=False, compare=False)
    # The first character of every tag and marker.
    tag_starts: frozenset = field(init=False, repr=False, compare=False)
    _plain_re: re.Pattern = field(init=False, repr=False, compare=False)
    _scans: dict = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.pairs:
            raise ValueError("at least one tag pair is needed")
        opens = [p.open for p in self.pairs]
        closes = [p.close for p in self.pairs]
        strip = list(self.strip)
        every = opens + closes + strip + list(self.ends)

        s = object.__setattr__
        # Rules key caches that every flow consults: hash the fields once, not on each lookup.
        s(self, "_hash", hash((self.pairs, self.trim, self.anywhere, self.starts_inside, self.strip, self.ends)))
        # In the answer: opening tags, closing tags (stray, or paired with an opening tag kept as
        # text) and strip markers.
        s(self, "_content_re", _alternation(opens + closes + strip))
        s(self, "_by_open", {p.open: p for p in reversed(self.pairs)})
        s(self, "_by_close", {p.close: p for p in reversed(self.pairs)})
        s(self, "_content_prefixes", _prefixes(opens + closes + strip))
        s(self, "_strip_prefixes", _prefixes(strip))
        s(self, "_strip", frozenset(strip))
        # A tag found whole may still be the start of a longer one (`<|channel>` of
        # `<|channel>thought`): it is decided only once the text can tell them apart.
        s(self, "_longer", {t: tuple(u for u in set(every) if len(u) > len(t) and u.startswith(t))
                            for t in set(every)})
        s(self, "_longest", max(len(t) for t in every))
        # Some tag begins with whitespace: held whitespace might be the start of a tag.
        s(self, "_ws_lead", any(t[:1] in _WS for t in every))
        s(self, "tag_starts", frozenset(t[0] for t in every))
        s(self, "_first_re", _chars(every))
        # Answer text without these characters cannot hold a tag.
        s(self, "_plain_re", _chars(opens + closes + strip))
        s(self, "_scans", {})

    def __hash__(self) -> int:
        return self._hash

    def scan(self, pair: TagPair | None, lead_open: bool) -> _Scan:
        """Inside a block of `pair` (None: any pair's close ends it)."""
        key = (pair, lead_open)
        got = self._scans.get(key)
        if got is None:
            tags = [pair.close] if pair is not None else [p.close for p in self.pairs]
            tags += self.ends
            if lead_open:
                tags += [p.open for p in self.pairs]
            got = self._scans[key] = _Scan(_alternation(tags), _prefixes(tags), _chars(tags),
                                           max(len(t) for t in tags))
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


def _alternation(tags: list[str]) -> re.Pattern:
    # Longest first, so `<thinking>` wins over a `<think` prefix of it.
    ordered = sorted(set(tags), key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in ordered))


def _prefixes(tags: list[str]) -> frozenset:
    return frozenset(t[:k] for t in tags for k in range(1, len(t)))


def _chars(tags: list[str], extra: str = "") -> re.Pattern:
    return re.compile("[" + re.escape("".join(sorted({t[0] for t in tags})) + extra) + "]")


def _partial_tag_len(text: str, prefixes: frozenset, longest: int, first: re.Pattern | None = None) -> int:
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


class Splitter:
    """Incremental splitter for one stream of model output text."""

    __slots__ = (
        "rules", "_held", "_pair", "_inside", "_skip_ws", "_at_start", "_boundary",
        "_line_head", "_line_blank", "_ticks", "_fence", "_seen_tag", "_lead_open", "_fresh",
        "_literal", "blocks", "reasoning_chars", "stray_closes", "markup_chars", "_ws_hold", "_ws_more",
    )

    def __init__(self, rules: Rules, starts_inside: bool | None = None) -> None:
        self.rules = rules
        inside = rules.starts_inside if starts_inside is None else starts_inside
        self._held = ""          # undecided text, carried into the next feed
        self._inside = inside    # inside a reasoning block
        self._pair: TagPair | None = None  # the pair whose block is open (None: any close)
        self._skip_ws = rules.trim and inside  # drop leading whitespace of a block / of content after it
        self._at_start = not inside  # nothing but whitespace has been written yet
        self._boundary = True    # start of output or just after a block: an opening tag counts here
        self._line_head = ""     # first characters of the current content line after its indent (fences)
        self._line_blank = True  # the current content line holds only spaces so far
        self._ticks = 0          # odd: inside an inline `code span` on this line
        self._fence = False      # inside a fenced code block of the content
        self._seen_tag = inside  # a block was opened or closed: a stray closing tag no longer counts
        # Starting inside, until the block closes: an opening tag written anyway is dropped.
        self._lead_open = inside
        self._fresh = inside     # the open block has no text yet
        self._literal: dict[str, int] = {}  # closing tag -> opening tags of its pair kept as text
        self.blocks = 1 if inside else 0
        self.reasoning_chars = 0
        self.stray_closes = 0
        self.markup_chars = 0    # characters of tags removed (for accounting: nothing else goes)
        # Only whitespace is held, and more whitespace would only be held too (trimming: at the
        # start of the output, or at the end of a reasoning block so far). More whitespace then
        # goes to _ws_more without re-reading what is held: linear in a long whitespace run.
        self._ws_hold = False
        self._ws_more: list[str] = []

    # -- public API ---------------------------------------------------------------------
    def feed(self, text: str) -> list:
        if not text:
            return []
        if not self._held and not self._skip_ws:
            # The common case, a token in the middle of a block or of the answer: nothing held,
            # no character that could start a tag: it goes out as it is.
            if self._inside:
                if (self.rules.scan(self._pair, self._lead_open).first.search(text) is None
                        and not (self.rules.trim and text[-1] in _WS)):
                    return [self._plain_reasoning(text)]
            elif not self._at_start:
                if self.rules._plain_re.search(text) is None:
                    self._observe(text, 0, len(text))   # only the line and code state move
                    return [(CONTENT, text)]
        elif self._ws_hold and not text.strip(_WS):
            self._ws_more.append(text)
            return []
        out: list = []
        held = self._take_held()
        self._run(held + text if held else text, out, final=False)
        return out

    def plain(self, text: str) -> tuple[int, str] | None:
        """`feed(text)` for a non-empty text with no character that could start any tag or
        marker of the rules (`Rules.may_hold_tag`; the byte fast path checks that): the one
        piece it gives, with the state `feed` leaves. None, with nothing changed, where `feed`
        must decide: text held other than trailing whitespace, whitespace being trimmed at a
        block's start or the output's, or nothing to give yet."""
        if self._skip_ws:
            return None
        if not self._inside:
            if self._held or self._at_start:
                return None
            self._observe(text, 0, len(text))   # only the line and code state move
            return (CONTENT, text)
        trim = self.rules.trim
        if self._held:
            if not self._ws_hold:
                return None   # a partial tag
            if trim and not text.strip(_WS):
                return None   # whitespace only: feed holds it and gives nothing
            text = self._take_held() + text
        if trim:
            kept = text.rstrip(_WS)
            if not kept:
                return None
            if len(kept) < len(text):   # held for now: it is dropped if the block ends next
                self._held = text[len(kept):]
                self._ws_hold = not self.rules._ws_lead
                text = kept
        return self._plain_reasoning(text)

    def steady(self) -> int | None:
        """CONTENT or REASONING when `plain` takes any plain text (one that holds no character a
        tag or marker starts with: `Rules.tag_starts`), whatever plain texts it took before in
        this state, and gives it as it is, with what is held in front: in reasoning, the
        whitespace `held_ws` gives, which trimming holds again at the text's end; in the answer,
        nothing. thinkwire.hot takes such texts in C; `took` folds them in. None: `feed` decides
        each text."""
        if self._skip_ws:
            return None
        if self._inside:
            return None if self.held_ws() is None else REASONING
        return None if self._at_start or self._held else CONTENT

    def held_ws(self) -> str | None:
        """In a block: the whitespace held at its end so far, which goes out in front of the
        next text unless the block ends first ("" for none); None when something else is held
        (a partial tag, or more than a short run of whitespace)."""
        if not self._held:
            return ""
        ok = self._ws_hold and not self._ws_more and len(self._held) <= 32 and not self._held.strip(_HELD_WS)
        return self._held if ok else None

    def took(self, kind: int, text: str) -> str:
        """Plain texts taken elsewhere (thinkwire.hot, in C) in a steady state of `kind`
        (`steady`), folded in: `text` is those texts one after the other (not empty; no character
        of `Rules.tag_starts`, which the caller checked, as for `plain`). Gives what
        `feed` gave for them, joined, and leaves the state it left. This is the one place where
        what C took becomes the splitter's state: every piece of it (the whitespace held, the
        counts, the answer's line, code spans and fences) is derived from the text by `plain`,
        the step `feed` takes for a plain text, which leaves the same state for texts joined as
        one after the other (a line reads the same wherever it was cut)."""
        piece = self.plain(text)
        if piece is None or piece[0] != kind:
            raise ValueError("took: a text the splitter must decide, or not of the steady kind")
        return piece[1]

    def _plain_reasoning(self, text: str) -> tuple[int, str]:
        self.reasoning_chars += len(text)
        self._fresh = False
        return (REASONING, text)

    def finish(self) -> list:
        out: list = []
        held = self._take_held()
        if held:
            self._run(held, out, final=True)
        if self._inside:
            out.append((END, self._pair or self.rules.pairs[0]))
            self._inside = False
        return out

    def _run(self, buf: str, out: list, final: bool) -> None:
        i = 0
        n = len(buf)
        while i < n:
            i = self._reasoning(buf, i, out, final) if self._inside else self._content(buf, i, out, final)
            if i < 0:  # the rest was held back (or, at the end, written)
                break

    def _take_held(self) -> str:
        held = self._held
        if self._ws_more:
            held += "".join(self._ws_more)
            self._ws_more.clear()
        self._held = ""
        self._ws_hold = False
        return held

    # -- inside a reasoning block -------------------------------------------------------
    def _reasoning(self, buf: str, i: int, out: list, final: bool) -> int:
        rules = self.rules
        n = len(buf)
        if self._skip_ws:
            j = i
            while j < n and buf[j] in _WS:
                j += 1
            if j == n:
                return -1  # all whitespace so far: dropped
            i = j
            self._skip_ws = False
        scan = rules.scan(self._pair, self._lead_open)
        m = scan.regex.search(buf, i)
        hold = -1
        if m is not None and not final and rules.undecided(buf, m.start(), m.group()):
            hold = n - m.start()   # a tag that may still grow into a longer one: wait
            m = None
        if m is not None:
            j, tag = m.start(), m.group()
            close = self._pair.close if self._pair is not None else (tag if tag in rules._by_close else None)
            if tag == close:
                self._end_block(buf[i:j], rules._by_close[tag] if self._pair is None else self._pair, out)
                self.markup_chars += len(tag)
                return j + len(tag)
            if self._lead_open and tag in rules._by_open:
                # The template opened the block, and the model wrote the tag anyway: drop it.
                self._emit_reasoning(buf[i:j], out)
                self._skip_ws = rules.trim and self._fresh   # nothing written yet: trim as at the start
                self._pair = rules._by_open[tag]
                self._lead_open = False
                self.markup_chars += len(tag)
                return j + len(tag)
            # A marker that ends reasoning (a tool call, a channel header): it stays in the output.
            self._end_block(buf[i:j], self._pair or rules.pairs[0], out)
            return j
        # No tag yet: emit all but a possible partial tag (and trailing whitespace).
        rest = buf[i:]
        if final:
            hold = 0
        elif hold < 0:
            hold = _partial_tag_len(rest, scan.prefixes, scan.longest, scan.first)
        body = rest[: len(rest) - hold]
        if rules.trim:
            kept = body.rstrip(_WS)
            self._held = "" if final else body[len(kept):] + rest[len(body):]
            self._ws_hold = not hold and bool(self._held) and not rules._ws_lead
            body = kept
        else:
            self._held = rest[len(body):]
        self._emit_reasoning(body, out)
        return -1

    def _end_block(self, text: str, pair: TagPair, out: list) -> None:
        if self.rules.trim:
            text = text.rstrip(_WS)
        self._emit_reasoning(text, out)
        out.append((END, pair))
        self._inside = False
        self._pair = None
        self._lead_open = False
        self._seen_tag = True
        self._new_line(boundary=True)
        self._skip_ws = self.rules.trim

    def _emit_reasoning(self, text: str, out: list) -> None:
        if text:
            self._fresh = False
            self.reasoning_chars += len(text)
            if out and out[-1][0] == REASONING:
                out[-1] = (REASONING, out[-1][1] + text)
            else:
                out.append((REASONING, text))

    # -- in the answer ------------------------------------------------------------------
    def _content(self, buf: str, i: int, out: list, final: bool) -> int:
        rules = self.rules
        n = len(buf)
        if self._skip_ws:  # right after a block: drop whitespace, an opening tag still counts
            j = i
            while j < n and buf[j] in _WS:
                j += 1
            if j == n:
                return -1
            i = j
            self._skip_ws = False
        pattern = rules._content_re
        pos = i
        seen = i       # line and fence state are up to date to here
        kept: list[str] = []  # answer text between removed markers, emitted as one piece
        cut = -1       # where an undecided tag starts
        while True:
            m = pattern.search(buf, pos)
            if m is None:
                break
            j = m.start()
            tag = m.group()
            if not final and rules.undecided(buf, j, tag):
                cut = j
                break
            self._observe(buf, seen, j)  # line and fence state up to the candidate
            seen = j
            if tag in rules._strip:
                kept.append(buf[i:j])
                self.markup_chars += len(tag)
                if self._boundary:  # a wrapper opening the answer: trim after it as after a block
                    self._emit_kept(kept, out)
                    self._skip_ws = rules.trim
                    return j + len(tag)
                i = pos = seen = j + len(tag)
                continue
            pair = rules._by_open.get(tag)
            if pair is not None:
                if self._opening_counts():
                    self._emit_kept(kept, out)
                    self._emit_content(buf[i:j], out, before_block=True)
                    self._inside = True
                    self._pair = pair
                    self._fresh = True
                    self._seen_tag = True
                    self._literal.clear()
                    self._skip_ws = rules.trim
                    self.blocks += 1
                    self.markup_chars += len(tag)
                    return j + len(tag)
                if not self._in_code():
                    # An opening tag kept as text (mid-sentence): its closing tag is text too.
                    self._literal[pair.close] = self._literal.get(pair.close, 0) + 1
            elif tag in rules._by_close and not self._in_code():
                if self._literal.get(tag):
                    self._literal[tag] -= 1          # closes a pair written as text: text
                elif not self._seen_tag:
                    # A closing tag with no opening tag: the block was opened in the prompt.
                    self._emit_kept(kept, out)
                    self._emit_content(buf[i:j], out, before_block=False)
                    self.stray_closes += 1
                    self.markup_chars += len(tag)
                    self._seen_tag = True
                    self._new_line(boundary=True)
                    self._skip_ws = rules.trim
                    return j + len(tag)
                else:
                    # A closing tag with no block open, after one: markup, removed.
                    kept.append(buf[i:j])
                    self.markup_chars += len(tag)
                    i = pos = seen = j + len(tag)
                    continue
            # A tag that does not count here is answer text: keep scanning, emit it all at once
            # (emitting piece by piece would copy the growing piece each time).
            pos = j + 1
        self._emit_kept(kept, out)
        # No tag in the rest: hold back a partial tag (or one still undecided).
        rest_start = i
        if final:
            cut = n
        elif cut < 0:
            cut = n - _partial_tag_len(buf[rest_start:] if rest_start else buf, rules._content_prefixes,
                                       rules._longest, rules._first_re)
        self._observe(buf, seen, cut)
        if cut < n and self._in_code():
            # In code only a strip marker counts: no need to wait for anything else.
            hold = _partial_tag_len(buf[cut:], rules._strip_prefixes, rules._longest) if rules._strip else 0
            self._observe(buf, cut, n - hold)
            cut = n - hold
        if not final and self._at_start and rules.trim and buf[rest_start:cut].strip(_WS) == "":
            # Only whitespace so far: wait, it is dropped if a block opens next.
            self._held = buf[rest_start:]
            self._ws_hold = cut == n and bool(self._held) and not rules._ws_lead
            return -1
        self._emit_content(buf[rest_start:cut], out, before_block=False)
        self._held = buf[cut:]
        return -1

    def _in_code(self) -> bool:
        return bool(self._fence or self._ticks)

    def _opening_counts(self) -> bool:
        """Where a model writes an opening tag: at the start, at a line start, or, once it
        has closed a block (interleaved thinking), anywhere; never inside code."""
        if self.rules.anywhere:
            return True
        if self._fence or self._ticks:
            return False
        return self._boundary or self._line_blank or self.blocks > 0

    def _new_line(self, boundary: bool) -> None:
        self._boundary = boundary
        self._line_head = ""
        self._line_blank = True
        self._ticks = 0

    def _observe(self, buf: str, i: int, j: int) -> None:
        """Track line starts, fenced code blocks and the start boundary over buf[i:j]."""
        if i >= j:
            return
        seg = buf[i:j]
        if self._boundary and seg.strip(_WS):
            self._boundary = False
        if seg.find("\n") < 0:
            if len(self._line_head) < 8:   # (the indent does not count: a line cut anywhere reads the same)
                self._line_head = (self._line_head + seg).lstrip(" ")[:8]
            if self._line_blank and seg.strip(_HSPACE):
                self._line_blank = False
            if "`" in seg:
                self._ticks ^= seg.count("`") & 1
            return
        # Each completed line may open or close a fence.
        lines = seg.split("\n")
        first = (self._line_head + lines[0]).lstrip(" ")
        if first.startswith(_FENCES):
            self._fence = not self._fence
        for line in lines[1:-1]:
            if line.lstrip(" ").startswith(_FENCES):
                self._fence = not self._fence
        last = lines[-1]
        self._line_head = last.lstrip(" ")[:8]
        self._line_blank = not last.strip(_HSPACE)
        self._ticks = last.count("`") & 1

    def _emit_kept(self, kept: list[str], out: list) -> None:
        if kept:
            self._emit_content("".join(kept), out, before_block=False)
            kept.clear()

    def _emit_content(self, text: str, out: list, before_block: bool) -> None:
        if not text:
            return
        if self._at_start:
            if before_block and self.rules.trim and text.strip(_WS) == "":
                return  # whitespace ahead of the first block is trimmed
            if text.strip(_WS):
                self._at_start = False
        if out and out[-1][0] == CONTENT:
            out[-1] = (CONTENT, out[-1][1] + text)
        else:
            out.append((CONTENT, text))


@dataclass(slots=True)
class Split:
    """A whole text, split: reasoning blocks and content, in order."""

    pieces: list
    stray_closes: int = 0   # closing tags with no opening tag (the template may open the block)

    @property
    def reasoning(self) -> list[str]:
        blocks, cur, open_ = [], [], False
        for kind, value in self.pieces:
            if kind == REASONING:
                cur.append(value)
                open_ = True
            elif kind == END:
                if open_:
                    blocks.append("".join(cur))
                cur, open_ = [], False
        return blocks

    @property
    def content(self) -> str:
        return "".join(v for k, v in self.pieces if k == CONTENT)


def split_text(text: str, rules: Rules) -> Split:
    """Split a whole output exactly as a stream of it is split. (A closing tag with no opening
    tag is removed, and the text before it stays answer, as a stream has already sent it: only a
    profile that starts inside makes that text reasoning, in bodies and streams alike.)"""
    s = Splitter(rules)
    return Split(merge(s.feed(text) + s.finish()), s.stray_closes)


def merge(pieces: list) -> list:
    """Join adjacent pieces of the same text kind."""
    out: list = []
    for p in pieces:
        if out and p[0] != END and out[-1][0] == p[0]:
            out[-1] = (p[0], out[-1][1] + p[1])
        else:
            out.append(p)
    return out
