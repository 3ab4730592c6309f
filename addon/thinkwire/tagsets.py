"""Tag sets: which reasoning markup to look for, per model.

Loaded from `tagsets.yaml` (or the file named by THINK_TAGSETS), or replaced wholesale by a
THINK_TAGS string. Loading is strict: a problem names the file, the line and what is wrong.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from .rules import TagPair

# The repository's tagsets.yaml; the package holds a link to it, which a wheel carries as a copy.
SHIPPED = Path(__file__).parent / "tagsets.yaml"

_TOP_KEYS = {"default", "profiles"}
_DEFAULT_KEYS = {"pairs", "starts_inside", "ends_reasoning", "resumes_reasoning"}
_PROFILE_KEYS = {"name", "models", "pairs", "starts_inside", "tagless_means", "thinking_default", "switches",
                 "strip", "ends_reasoning", "start_pairs", "start_ends", "resumes_reasoning", "tool_calls"}
_SWITCH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


FOUND_NAMES = 4096   # model names whose profile is kept (Tagsets.profile_for)


class TagsetError(ValueError):
    """A tag set file or string that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Profile:
    name: str
    models: tuple[str, ...]          # case-insensitive globs, anchored to words (see Glob)
    pairs: tuple[TagPair, ...]       # its own pairs, then the default pairs it does not repeat
    starts_inside: bool = False
    # With starts_inside, what an output with no closing tag at all means when the response does
    # not say how it ended: "reasoning" (cut off while thinking) or "content" (an answer).
    tagless_means: str = "reasoning"
    strip: tuple[str, ...] = ()      # markers that leave the answer (wrappers, channel headers)
    # Markers that end an open reasoning block and stay in the output (tool calls, headers).
    ends: tuple[str, ...] = ()
    # With starts_inside: whether the template opens the block when the request says nothing.
    thinking_default: bool = True
    # The request switches the template reads (template variables: enable_thinking, thinking,
    # thinking_mode, reasoning_effort ...); None: every switch thinkwire knows counts.
    switches: tuple[str, ...] | None = None
    declared: tuple[TagPair, ...] = ()   # the pairs the profile names itself, if any (display, tests)
    # Pairs whose opening tag counts only at the very start of the output, and the markers that
    # end their blocks (what a server leaves of gpt-oss's headers when it drops special tokens).
    start_pairs: tuple[TagPair, ...] = ()
    start_ends: tuple[str, ...] = ()
    # (marker that ends reasoning, marker after which the reasoning goes on): a tool block
    # inside reasoning (Apertus).
    resumes: tuple[tuple[str, str], ...] = ()
    # (header, end marker): a tool call in the answer that stays as written, strip markers and all.
    tools: tuple[tuple[str, str], ...] = ()
    _globs: tuple[Glob, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_globs", tuple(Glob(g) for g in self.models))

    def matches(self, model: str) -> bool:
        """Whether one of the profile's globs matches the name's first MODEL_CHARS characters."""
        name = model[:MODEL_CHARS].lower()
        return any(g.match(name) for g in self._globs)


# Only the first MODEL_CHARS characters of a model name are matched (and cached): names come
# from clients, and no served name is longer.
MODEL_CHARS = 256


def _glob_items(glob: str) -> list[tuple[str, str]]:
    """A glob (lower case) as items (kind, regex): "lit" one literal character, "any" `?` or a
    `[...]` set (fnmatch's), "star" a run of `*`."""
    g = glob.lower()
    items: list[tuple[str, str]] = []
    i, n = 0, len(g)
    while i < n:
        c = g[i]
        if c == "*":
            while i < n and g[i] == "*":
                i += 1
            items.append(("star", ""))
            continue
        if c == "?":
            items.append(("any", "."))
        elif c == "[":
            j = i + 1
            if j < n and g[j] == "!":
                j += 1
            if j < n and g[j] == "]":
                j += 1
            while j < n and g[j] != "]":
                j += 1
            if j >= n:
                items.append(("lit", "\\["))
            else:
                body = re.sub(r"([\\\[&~|])", r"\\\1", g[i + 1:j])   # no nested sets or set operations
                if body.startswith("!"):
                    body = "^" + body[1:]
                elif body.startswith("^"):
                    body = "\\" + body
                items.append(("any", f"[{body}]"))
                i = j
        else:
            items.append(("lit", re.escape(c)))
        i += 1
    return items


def _edge(name: str, at: int) -> bool:
    """Whether no word or number of `name` goes on across position `at`: the characters on its
    two sides are not both letters, nor both digits (regex `[^\\W\\d_]` and `\\d`)."""
    if at <= 0 or at >= len(name):
        return True
    a, b = name[at - 1], name[at]
    return not ((a.isdecimal() and b.isdecimal()) or
                (a.isalnum() and b.isalnum() and not a.isdecimal() and not b.isdecimal()))


class Glob:
    """A model glob, matched in time linear in the name. `?` and `[...]` are fnmatch's; `*` is
    any text, but it never cuts into a word or a number of the name: where the text a `*` stands
    for meets a literal character of the pattern (or, empty, where the two sides meet), the
    name's letters or digits do not go on across it. So `*step3*` matches `stepfun-ai/step3` and
    `step3-fp8` but not `qwen-grpo-step3000`, and `*mimo*` matches `xiaomimimo/mimo-7b` but not
    `mimosa`. (Next to `?` or `[...]` a `*` is fnmatch's.)

    How: the pieces between stars have a fixed length and no repetition (star-free regular
    expressions); each is placed at its leftmost position that fits after the one before (and
    the first at the start, the last at the end). Whether a piece fits at a position depends on
    that position alone, so the leftmost fit never loses a match a later one would give, and
    nothing backtracks: at most one search per position of the name and piece."""

    def __init__(self, glob: str) -> None:
        self.glob = glob
        pieces: list[list[tuple[str, str]]] = [[]]
        for item in _glob_items(glob):
            if item[0] == "star":
                pieces.append([])
            else:
                pieces[-1].append(item)
        self.stars = len(pieces) - 1
        self.lengths = [len(p) for p in pieces]
        self.pieces = [re.compile("".join(rx for _, rx in p), re.S) for p in pieces]
        # A star's edges are checked where its neighbour is a literal (or the name's start or end).
        self.edge_before = [not p or p[-1][0] == "lit" for p in pieces[:-1]]
        self.edge_after = [not p or p[0][0] == "lit" for p in pieces[1:]]

    def match(self, name: str) -> bool:
        """`name` in lower case (and cut to MODEL_CHARS by the caller)."""
        if not self.stars:
            return self.pieces[0].fullmatch(name) is not None
        n, last = len(name), self.stars
        if self.pieces[0].match(name) is None:
            return False
        at = self.lengths[0]
        if self.edge_before[0] and not _edge(name, at):
            return False
        for k in range(1, last):
            at = self._place(name, k, at, n - self.lengths[last])
            if at < 0:
                return False
        start = n - self.lengths[last]
        return (start >= at and self.pieces[last].match(name, start) is not None
                and (not self.edge_after[last - 1] or _edge(name, start)))

    def _place(self, name: str, k: int, at: int, limit: int) -> int:
        """Where piece k (between stars k-1 and k) ends at its leftmost fit from `at`, with the
        last piece's room (`limit`) left; -1 when it fits nowhere."""
        piece, length = self.pieces[k], self.lengths[k]
        while at <= limit - length:
            m = piece.search(name, at, limit)
            if m is None:
                return -1
            start = m.start()
            if ((not self.edge_after[k - 1] or _edge(name, start))
                    and (not self.edge_before[k] or _edge(name, start + length))):
                return start + length
            at = start + 1
        return -1


@dataclass(frozen=True)
class Tagsets:
    default: Profile
    profiles: tuple[Profile, ...]
    source: str

    # A model name's first MODEL_CHARS characters -> its profile: every flow asks, and matching
    # tries every glob of every profile. Bounded (names come from clients): FOUND_NAMES names of
    # at most MODEL_CHARS characters each.
    _found: dict[str, Profile] = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def switch_names(self) -> tuple[str, ...]:
        """Every template variable a profile reads (`switches`)."""
        return tuple(dict.fromkeys(n for p in (self.default, *self.profiles) for n in p.switches or ()))

    def profile_for(self, model: str | None) -> Profile:
        if not model:
            return self.default
        name = model[:MODEL_CHARS]
        got = self._found.get(name)
        if got is None:
            got = next((p for p in self.profiles if p.matches(name)), self.default)
            if len(self._found) < FOUND_NAMES:
                self._found[name] = got
        return got


def parse_tags_string(value: str) -> tuple[TagPair, ...]:
    """`"<think> </think>,<reasoning> </reasoning>"`: pairs by comma, open/close by whitespace."""
    pairs = []
    for n, item in enumerate(value.split(","), 1):
        parts = item.split()
        if len(parts) != 2:
            raise TagsetError(
                f"THINK_TAGS pair {n} ({item.strip()!r}) must be an opening and a closing tag "
                f"separated by whitespace, e.g. '<think> </think>'")
        pairs.append(TagPair(parts[0], parts[1]))
    _check_pairs(pairs, "THINK_TAGS")
    return tuple(pairs)


def from_tags_string(value: str) -> Tagsets:
    """Tag pairs that replace the tag sets; the shipped markers that end reasoning still apply."""
    pairs = parse_tags_string(value)
    return Tagsets(Profile("THINK_TAGS", (), pairs, ends=load(SHIPPED).default.ends), (), "THINK_TAGS")


def _check_pairs(pairs: list[TagPair], where: str) -> None:
    if not pairs:
        raise TagsetError(f"{where}: no tag pairs")
    for p in pairs:
        if not p.open or not p.close:
            raise TagsetError(f"{where}: empty tag in pair {p.open!r} {p.close!r}")
        if p.open == p.close:
            raise TagsetError(f"{where}: opening and closing tag are the same ({p.open!r})")
    closes = {p.close for p in pairs}
    for p in pairs:
        if p.open in closes:
            raise TagsetError(f"{where}: {p.open!r} is both an opening and a closing tag")
    for a in pairs:
        for b in pairs:
            # Inside a block only its closing tag is looked for, and in the answer only opening
            # (and stray closing) tags: a closing tag that starts with an opening tag would be
            # read as a new block in the answer.
            if b.close.startswith(a.open):
                raise TagsetError(
                    f"{where}: closing tag {b.close!r} starts with opening tag {a.open!r}, "
                    f"so it would be read as an opening tag")


def load(path: str | os.PathLike[str]) -> Tagsets:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TagsetError(f"{path}: cannot read tag sets: {e.strerror or e}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise TagsetError(f"{path}{line}: not valid YAML: {getattr(e, 'problem', e)}") from None
    return _build(root, str(path))


def _where(src: str, node: yaml.Node) -> str:
    return f"{src}:{node.start_mark.line + 1}"


def _mapping(node: yaml.Node, src: str, what: str, allowed: set[str]) -> dict[str, yaml.Node]:
    if not isinstance(node, yaml.MappingNode):
        raise TagsetError(f"{_where(src, node)}: {what} must be a mapping")
    out: dict[str, yaml.Node] = {}
    for k, v in node.value:
        key = k.value if isinstance(k, yaml.ScalarNode) else None
        if key not in allowed:
            raise TagsetError(
                f"{_where(src, k)}: unknown key {key!r} in {what} (allowed: {', '.join(sorted(allowed))})")
        out[key] = v
    return out


def _string(node: yaml.Node, src: str, what: str) -> str:
    if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str":
        raise TagsetError(f"{_where(src, node)}: {what} must be a string")
    if node.value == "":
        raise TagsetError(f"{_where(src, node)}: {what} is empty")
    value: str = node.value
    return value


def _bool(node: yaml.Node, src: str, what: str) -> bool:
    if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
        raise TagsetError(f"{_where(src, node)}: {what} must be true or false")
    value: bool = yaml.safe_load(node.value)
    return value


def _pairs(node: yaml.Node, src: str, what: str) -> tuple[TagPair, ...]:
    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise TagsetError(f"{_where(src, node)}: {what} must be a non-empty list of [open, close] pairs")
    pairs = []
    for item in node.value:
        if not isinstance(item, yaml.SequenceNode) or len(item.value) != 2:
            raise TagsetError(f"{_where(src, item)}: each pair in {what} must be [open, close]")
        pairs.append(TagPair(_string(item.value[0], src, "an opening tag"),
                             _string(item.value[1], src, "a closing tag")))
    try:
        _check_pairs(pairs, what)
    except TagsetError as e:
        raise TagsetError(f"{_where(src, node)}: {e}") from None
    return tuple(pairs)


def _build(root: yaml.Node | None, src: str) -> Tagsets:
    if root is None:
        raise TagsetError(f"{src}: the file is empty")
    top = _mapping(root, src, "the top level", _TOP_KEYS)
    if "default" not in top:
        raise TagsetError(f"{_where(src, root)}: a 'default' section with 'pairs' is required")
    d = _mapping(top["default"], src, "'default'", _DEFAULT_KEYS)
    if "pairs" not in d:
        raise TagsetError(f"{_where(src, top['default'])}: 'default' needs 'pairs'")
    dpairs = _pairs(d["pairs"], src, "default pairs")
    dends = _markers(d, "ends_reasoning", src, "default", dpairs, ())
    default = Profile("default", (), dpairs,
                      _bool(d["starts_inside"], src, "starts_inside") if "starts_inside" in d else False,
                      ends=dends, resumes=_resumes(d, src, "default", dends, ()))
    profiles = []
    pnode = top.get("profiles")
    if pnode is not None and not (isinstance(pnode, yaml.ScalarNode) and pnode.value in ("", "null")):
        if not isinstance(pnode, yaml.SequenceNode):
            raise TagsetError(f"{_where(src, pnode)}: 'profiles' must be a list")
        for item in pnode.value:
            p = _mapping(item, src, "a profile", _PROFILE_KEYS)
            for need in ("name", "models"):
                if need not in p:
                    raise TagsetError(f"{_where(src, item)}: a profile needs '{need}'")
            name = _string(p["name"], src, "a profile name")
            mnode = p["models"]
            if not isinstance(mnode, yaml.SequenceNode) or not mnode.value:
                raise TagsetError(f"{_where(src, mnode)}: 'models' of {name!r} must be a non-empty list of globs")
            models = tuple(_string(m, src, "a model pattern") for m in mnode.value)
            own = _pairs(p["pairs"], src, f"pairs of {name!r}") if "pairs" in p else ()
            pairs = _with_defaults(own, default.pairs, src, p.get("pairs", item), name)
            inside = _bool(p["starts_inside"], src, "starts_inside") if "starts_inside" in p else False
            tagless = "reasoning"
            if "tagless_means" in p:
                tagless = _string(p["tagless_means"], src, "tagless_means")
                if tagless not in ("reasoning", "content"):
                    raise TagsetError(f"{_where(src, p['tagless_means'])}: tagless_means must be 'reasoning' or 'content'")
            # Unless it says, a profile whose tagless output is an answer thinks only when asked.
            thinks = (_bool(p["thinking_default"], src, "thinking_default") if "thinking_default" in p
                      else tagless != "content")
            switches = _switches(p, src, name)
            strip = _markers(p, "strip", src, name, pairs, (), closes_allowed=True)
            ends = _markers(p, "ends_reasoning", src, name, pairs, default.ends)
            start_pairs = _pairs(p["start_pairs"], src, f"start_pairs of {name!r}") if "start_pairs" in p else ()
            start_ends = _markers(p, "start_ends", src, name, pairs + start_pairs, ())
            if start_ends and not start_pairs:
                raise TagsetError(f"{_where(src, p['start_ends'])}: 'start_ends' of {name!r} needs 'start_pairs'")
            # (A profile that takes the default's markers takes their resume markers too.)
            resumes = _resumes(p, src, name, ends, default.resumes if "ends_reasoning" not in p else ())
            profiles.append(Profile(name, models, pairs, inside, tagless, strip, ends, thinks, switches, own,
                                    start_pairs, start_ends, resumes, _tool_calls(p, src, name)))
    return Tagsets(default, tuple(profiles), src)


def _resumes(section: dict[str, yaml.Node], src: str, name: str, ends: tuple[str, ...],
             default: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """`resumes_reasoning`: [end marker, resume marker] pairs; the end marker must be one of the
    profile's `ends_reasoning`."""
    node = section.get("resumes_reasoning")
    if node is None:
        return default
    if not isinstance(node, yaml.SequenceNode):
        raise TagsetError(f"{_where(src, node)}: 'resumes_reasoning' of {name!r} must be a list of [end, resume] pairs")
    out = []
    for item in node.value:
        if not isinstance(item, yaml.SequenceNode) or len(item.value) != 2:
            raise TagsetError(f"{_where(src, item)}: each of 'resumes_reasoning' must be [end marker, resume marker]")
        end, resume = (_string(v, src, "a resumes_reasoning marker") for v in item.value)
        if end not in ends:
            raise TagsetError(f"{_where(src, item)}: {end!r} is not one of the 'ends_reasoning' markers of {name!r}")
        out.append((end, resume))
    return tuple(out)


def _tool_calls(section: dict[str, yaml.Node], src: str, name: str) -> tuple[tuple[str, str], ...]:
    """`tool_calls`: [header, end marker] pairs (a header may have several end markers)."""
    node = section.get("tool_calls")
    if node is None:
        return ()
    if not isinstance(node, yaml.SequenceNode):
        raise TagsetError(f"{_where(src, node)}: 'tool_calls' of {name!r} must be a list of [header, end] pairs")
    out = []
    for item in node.value:
        if not isinstance(item, yaml.SequenceNode) or len(item.value) != 2:
            raise TagsetError(f"{_where(src, item)}: each of 'tool_calls' must be [header, end marker]")
        head, end = (_string(v, src, "a tool_calls marker") for v in item.value)
        if not head or not end:
            raise TagsetError(f"{_where(src, item)}: a tool_calls marker is empty")
        out.append((head, end))
    return tuple(out)


def _with_defaults(own: tuple[TagPair, ...], defaults: tuple[TagPair, ...], src: str, node: yaml.Node, name: str
                   ) -> tuple[TagPair, ...]:
    """A profile's pairs, then the default pairs: the defaults hold for every model."""
    pairs = own + tuple(d for d in defaults if d not in own)
    try:
        _check_pairs(list(pairs), f"pairs of {name!r} with the default pairs")
    except TagsetError as e:
        raise TagsetError(f"{_where(src, node)}: {e}") from None
    return pairs


def _switches(section: dict[str, yaml.Node], src: str, name: str) -> tuple[str, ...] | None:
    node = section.get("switches")
    if node is None:
        return None
    if not isinstance(node, yaml.SequenceNode):
        raise TagsetError(f"{_where(src, node)}: 'switches' of {name!r} must be a list of names")
    names = tuple(_string(m, src, "a switch") for m in node.value)
    for m, mnode in zip(names, node.value):
        if not _SWITCH_NAME.match(m):
            raise TagsetError(f"{_where(src, mnode)}: switch {m!r} of {name!r} is not a template variable name")
    return names


def _markers(section: dict[str, yaml.Node], key: str, src: str, name: str, pairs: tuple[TagPair, ...],
             default: tuple[str, ...], closes_allowed: bool = False) -> tuple[str, ...]:
    """A list of markers (`strip`, `ends_reasoning`) that must not be tags of the profile. A
    strip marker may be a closing tag: it then closes a block and is removed everywhere else."""
    node = section.get(key)
    if node is None:
        return default
    if not isinstance(node, yaml.SequenceNode):
        raise TagsetError(f"{_where(src, node)}: '{key}' of {name!r} must be a list of strings")
    markers = tuple(_string(m, src, f"a {key} marker") for m in node.value)
    tags = {p.open for p in pairs} | (set() if closes_allowed else {p.close for p in pairs})
    for m, mnode in zip(markers, node.value):
        if m in tags:
            raise TagsetError(f"{_where(src, mnode)}: {key} marker {m!r} is also a tag of {name!r}")
    return markers
