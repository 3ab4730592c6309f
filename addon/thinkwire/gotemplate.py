"""Ollama's Go chat templates, rendered for one short question: how a model's prompt ends with
`think` unset, off and on (thinkwire.serverstart reads the end; thinkwire.capabilities keeps it).

Ollama renders a model's Go text/template with `.Messages`, `.System`, `.Tools`, `.Think` and
`.IsThinkSet` (ollama template/template.go `Values`). Templates of thinking models decide the
generation prompt at run time: Qwen3's and DeepSeek-R1's close an empty block only when `think`
is false (`{{ if and $.IsThinkSet (not $.Think) }}<think>\\n\\n</think>\\n\\n{{ end }}`), which no
literal reading of the template can tell. So the subset of text/template these templates use is
rendered here: text, `{{- -}}` trimming, comments, `if`/`else if`/`else`, `range` (with `$i, $m
:=`), `with`, variables (`:=`, `=`), fields, pipelines and parentheses, literals, and the
functions and, or, not, eq, ne, lt, le, gt, ge, len, slice, index, print, json. Anything else
(another function, `template`, `block`, a method) is not guessed at: the reading is None and
the model's profile decides.

Bounded: templates longer than TEMPLATE_MAX characters are not read, and a rendering stops
(None) past STEPS evaluated nodes, DEPTH nested blocks or OUTPUT_MAX characters of output.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

TEMPLATE_MAX = 16 << 10   # characters of a template read (Ollama's qwen3 one is 1.7 KiB)
STEPS = 2_000             # nodes evaluated per rendering (Ollama's qwen3 template takes 60)
DEPTH = 32                # nested blocks (and parentheses)
OUTPUT_MAX = 64 << 10     # characters a rendering may write
TAIL = 512                # characters of a rendered prompt's end kept


class Unsupported(Exception):
    """Something outside the subset (or past a bound): no reading."""


_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<raw>`[^`]*`)|(?P<num>-?\d+)|(?P<op>:=|=|\(|\)|\||,)'
                    r"|(?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)|(?P<field>(?:\.[A-Za-z0-9_]+)+|\.)"
                    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*))")


@dataclass
class _Node:
    kind: str                                   # text, out, set, if, range, with
    text: str = ""
    pipe: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)   # range's / set's variables
    declare: bool = False
    body: list[_Node] = field(default_factory=list)
    orelse: list[_Node] = field(default_factory=list)


def _lex(template: str) -> list[tuple[str, str]]:
    """("text", s) and ("action", s) in order, trimming done as Go does (`{{- ` and ` -}}`)."""
    out: list[tuple[str, str]] = []
    at, trim_next = 0, False
    for m in _ACTION.finditer(template):
        text = template[at:m.start()]
        if trim_next:
            text = text.lstrip(" \t\r\n")
        if m.group(1):
            text = text.rstrip(" \t\r\n")
        if text:
            out.append(("text", text))
        body = m.group(2).strip()
        if not (body.startswith("/*") and body.endswith("*/")):
            out.append(("action", body))
        trim_next, at = bool(m.group(3)), m.end()
    text = template[at:]
    if trim_next:
        text = text.lstrip(" \t\r\n")
    if text:
        out.append(("text", text))
    return out


def _tokens(action: str) -> list[str]:
    toks: list[str] = []
    at = depth = 0
    while at < len(action):
        if action[at:].strip() == "":
            break
        m = _TOKEN.match(action, at)
        if m is None or m.end() == at:
            raise Unsupported(action[at:at + 20])
        tok = m.group(m.lastgroup or "").strip()
        depth += {"(": 1, ")": -1}.get(tok, 0)
        if depth > DEPTH:
            raise Unsupported("parentheses too deep")
        toks.append(tok)
        at = m.end()
    return toks


def parse(template: str) -> list[_Node]:
    items = _lex(template)
    pos = 0

    def block(depth: int) -> tuple[list[_Node], str]:
        nonlocal pos
        if depth > DEPTH:
            raise Unsupported("too deep")
        nodes: list[_Node] = []
        while pos < len(items):
            kind, s = items[pos]
            pos += 1
            if kind == "text":
                nodes.append(_Node("text", s))
                continue
            toks = _tokens(s)
            if not toks:
                continue
            head = toks[0]
            if head in ("end", "else"):
                return nodes, s
            if head in ("if", "with"):
                nodes.append(branch(head, toks[1:], depth))
            elif head == "range":
                names, pipe = _range_vars(toks[1:])
                n = _Node("range", pipe=pipe, names=names)
                n.body, stop = block(depth + 1)
                if stop == "else":
                    n.orelse, stop = block(depth + 1)
                if stop != "end":
                    raise Unsupported("range without end")
                nodes.append(n)
            elif head in ("template", "block", "define", "break", "continue"):
                raise Unsupported(head)
            elif len(toks) > 2 and head.startswith("$") and toks[1] in (":=", "="):
                nodes.append(_Node("set", pipe=toks[2:], names=[head], declare=toks[1] == ":="))
            else:
                nodes.append(_Node("out", pipe=toks))
        return nodes, ""

    def branch(head: str, pipe: list[str], depth: int) -> _Node:
        n = _Node(head, pipe=pipe)
        n.body, stop = block(depth + 1)
        if stop.startswith("else"):
            rest = _tokens(stop)[1:]
            if rest and rest[0] in ("if", "with"):   # else if: a branch in the else
                n.orelse = [branch(rest[0], rest[1:], depth + 1)]
                return n
            n.orelse, stop = block(depth + 1)
        if stop != "end":
            raise Unsupported(f"{head} without end")
        return n

    nodes, stop = block(0)
    if stop:
        raise Unsupported(f"stray {stop}")
    return nodes


def _range_vars(toks: list[str]) -> tuple[list[str], list[str]]:
    if ":=" in toks:
        at = toks.index(":=")
        names = [t for t in toks[:at] if t != ","]
        return names, toks[at + 1:]
    return [], toks


class _Render:
    def __init__(self, data: dict[str, Any]) -> None:
        self.root = data
        self.steps = 0
        self.out: list[str] = []
        self.size = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > STEPS:
            raise Unsupported("too many steps")

    def write(self, s: str) -> None:
        self.size += len(s)
        if self.size > OUTPUT_MAX:
            raise Unsupported("too much output")
        self.out.append(s)

    def run(self, nodes: list[_Node], dot: Any, scope: list[dict[str, Any]]) -> None:
        for n in nodes:
            self.step()
            if n.kind == "text":
                self.write(n.text)
            elif n.kind == "out":
                self.write(_show(self.pipe(n.pipe, dot, scope)))
            elif n.kind == "set":
                value = self.pipe(n.pipe, dot, scope)
                name = n.names[0]
                if n.declare:
                    scope[-1][name] = value
                else:
                    for outer in reversed(scope):
                        if name in outer:
                            outer[name] = value
                            break
                    else:
                        raise Unsupported(f"{name} undeclared")
            elif n.kind in ("if", "with"):
                value = self.pipe(n.pipe, dot, scope)
                if _truth(value):
                    self.run(n.body, value if n.kind == "with" else dot, [*scope, {}])
                else:
                    self.run(n.orelse, dot, [*scope, {}])
            else:   # range
                seq = self.pipe(n.pipe, dot, scope)
                items = list(enumerate(seq)) if isinstance(seq, list) else []
                if not items:
                    self.run(n.orelse, dot, [*scope, {}])
                for i, item in items:
                    frame: dict[str, Any] = {}
                    if len(n.names) == 1:
                        frame[n.names[0]] = item
                    elif len(n.names) == 2:
                        frame[n.names[0]], frame[n.names[1]] = i, item
                    self.run(n.body, item, [*scope, frame])

    def pipe(self, toks: list[str], dot: Any, scope: list[dict[str, Any]]) -> Any:
        value: Any = _NOTHING
        for cmd in _split(toks, "|"):
            args = [*cmd, value] if value is not _NOTHING else cmd
            value = self.command(args, dot, scope)
        return value

    def command(self, toks: list[Any], dot: Any, scope: list[dict[str, Any]]) -> Any:
        args = self.args(toks, dot, scope)
        if not args:
            raise Unsupported("empty command")
        head = args[0]
        if isinstance(head, _Func):
            return _call(head.name, args[1:])
        if len(args) > 1:
            raise Unsupported("arguments to a value")
        return head

    def args(self, toks: list[Any], dot: Any, scope: list[dict[str, Any]]) -> list[Any]:
        out: list[Any] = []
        i = 0
        while i < len(toks):
            self.step()
            t = toks[i]
            if not isinstance(t, str):   # a value piped in
                out.append(t)
            elif t == "(":
                depth, j = 1, i + 1
                while j < len(toks) and depth:
                    depth += {"(": 1, ")": -1}.get(toks[j], 0) if isinstance(toks[j], str) else 0
                    j += 1
                if depth:
                    raise Unsupported("parentheses")
                out.append(self.pipe(toks[i + 1:j - 1], dot, scope))
                i = j
                continue
            else:
                out.append(self.atom(t, dot, scope))
            i += 1
        return out

    def atom(self, t: str, dot: Any, scope: list[dict[str, Any]]) -> Any:
        if t.startswith('"'):
            if "\\x" in t or "\\'" in t:
                raise Unsupported("a Go-only escape")
            return json.loads(t)
        if t.startswith("`"):
            return t[1:-1]
        if re.fullmatch(r"-?\d+", t):
            return int(t)
        if t in ("true", "false"):
            return t == "true"
        if t == "nil":
            return None
        if t.startswith("$"):
            name, _, path = t.partition(".")
            if name == "$":
                base: Any = self.root
            else:
                for frame in reversed(scope):
                    if name in frame:
                        base = frame[name]
                        break
                else:
                    raise Unsupported(f"{name} undeclared")
            return _fields(base, path.split(".") if path else [])
        if t.startswith("."):
            return _fields(dot, [p for p in t.split(".") if p])
        if t in _FUNCS:
            return _Func(t)
        raise Unsupported(t)


@dataclass(frozen=True)
class _Func:
    name: str


_NOTHING = object()
_FUNCS = ("and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "slice", "index", "print", "json")


def _split(toks: list[str], sep: str) -> list[list[Any]]:
    parts: list[list[Any]] = [[]]
    depth = 0
    for t in toks:
        depth += {"(": 1, ")": -1}.get(t, 0)
        if t == sep and depth == 0:
            parts.append([])
        else:
            parts[-1].append(t)
    return parts


def _fields(value: Any, path: list[str]) -> Any:
    for name in path:
        if isinstance(value, dict):
            value = value.get(name)   # (missingkey=zero; a field a message lacks is its zero)
        elif value is None:
            return None
        else:
            raise Unsupported(f"field {name} of {type(value).__name__}")
    return value


def _truth(v: Any) -> bool:
    return not (v is None or v is False or v == 0 and not isinstance(v, bool) or v == "" or v == [] or v == {})


def _call(name: str, args: list[Any]) -> Any:
    if name == "and":
        v: Any = True
        for v in args:
            if not _truth(v):
                return v
        return v
    if name == "or":
        v = False
        for v in args:
            if _truth(v):
                return v
        return v
    if name == "not" and len(args) == 1:
        return not _truth(args[0])
    if name == "eq" and len(args) >= 2:
        return any(_same(args[0], b) for b in args[1:])
    if name == "ne" and len(args) == 2:
        return not _same(args[0], args[1])
    if name in ("lt", "le", "gt", "ge") and len(args) == 2:
        a, b = args
        if isinstance(a, bool) or isinstance(b, bool) or type(a) is not type(b) or not isinstance(a, (int, str)):
            raise Unsupported(f"{name} of {a!r}, {b!r}")
        order = (a > b) - (a < b)
        return {"lt": order < 0, "le": order <= 0, "gt": order > 0, "ge": order >= 0}[name]
    if name == "len" and len(args) == 1 and isinstance(args[0], (list, str, dict)):
        return len(args[0])
    if name == "slice" and 1 <= len(args) <= 3 and isinstance(args[0], (list, str)) \
            and all(isinstance(a, int) for a in args[1:]):
        seq, bounds = args[0], args[1:]
        lo, hi = (bounds + [len(seq)])[:2] if bounds else (0, len(seq))
        if not 0 <= lo <= hi <= len(seq):
            raise Unsupported("slice out of range")
        return seq[lo:hi]   # (Go's slice x i j k: k is a capacity, nothing a template sees)
    if name == "index" and len(args) == 2:
        seq, i = args
        if isinstance(seq, list) and isinstance(i, int) and 0 <= i < len(seq) or isinstance(seq, dict):
            return seq[i] if isinstance(seq, list) else seq.get(i)
    if name == "print":
        return "".join(_show(a) for a in args)
    if name == "json" and len(args) == 1:
        return json.dumps(args[0], separators=(",", ":"))
    raise Unsupported(f"{name}{tuple(args)!r}"[:80])


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b) and not (a is None or b is None):
        raise Unsupported("eq of different kinds")
    return bool(a == b)


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int)):
        return str(v)
    if v == []:
        return "[]"
    raise Unsupported(f"printing {type(v).__name__}")


def render(template: str, think: bool | str | None, system: str = "") -> str | None:
    """The prompt Ollama renders for one user turn ("Hi"), after a system prompt when `system`
    is given, with `think` unset (None), off, on or a level; None where the template is past the
    subset or a bound."""
    nodes = _parsed(template)
    return _render(nodes, think, system) if nodes is not None else None


def _parsed(template: str) -> tuple[list[_Node], bool] | None:
    """The template's nodes (a legacy one's cut after .Response) and whether it is legacy."""
    if len(template) > TEMPLATE_MAX:
        return None
    legacy = _LEGACY.search(template) is None
    try:
        nodes = parse(template)
    except (Unsupported, RecursionError, ValueError):
        return None
    return (_cut(nodes)[0] if legacy else nodes), legacy


def _render(parsed: tuple[list[_Node], bool], think: bool | str | None, system: str) -> str | None:
    nodes, legacy = parsed
    messages: list[dict[str, Any]] = ([{"role": "system", "content": system}] if system else []) + \
        [{"role": "user", "content": "Hi"}]
    data: dict[str, Any] = {
        "System": system, "Messages": [_message(m) for m in messages], "Tools": [], "Response": "",
        "Think": think is not None and think is not False, "IsThinkSet": think is not None,
        "ThinkLevel": think if isinstance(think, str) else "", "Prompt": "Hi" if legacy else "", "Suffix": "",
    }
    r = _Render(data)
    try:
        r.run(nodes, data, [{"$": data}])
    except (Unsupported, RecursionError, ValueError):
        return None
    return "".join(r.out)


# A template that names no .Messages is a legacy one (Prompt, System, Response): Ollama renders
# its last turn up to `{{ .Response }}` and drops what follows (template.go Execute, deleteNode).
_LEGACY = re.compile(r"\{\{[^}]*\b(?:Messages|Document)\b")


def _cut(nodes: list[_Node]) -> tuple[list[_Node], bool]:
    """The nodes up to and with the first that reads .Response (in the template's order)."""
    out: list[_Node] = []
    for n in nodes:
        if any(t.endswith(".Response") for t in n.pipe):
            out.append(_Node(n.kind, n.text, n.pipe, n.names, n.declare) if n.body or n.orelse else n)
            return out, True
        body, cut = _cut(n.body)
        if not cut:
            orelse, cut = _cut(n.orelse)
            if cut:
                out.append(_Node(n.kind, n.text, n.pipe, n.names, n.declare, n.body, orelse))
                return out, True
        else:
            out.append(_Node(n.kind, n.text, n.pipe, n.names, n.declare, body, []))
            return out, True
        out.append(n)
    return out, False


def _message(m: dict[str, Any]) -> dict[str, Any]:
    """An api.Message as a template sees it (fields by their Go names; absent ones zero)."""
    return {"Role": m["role"], "Content": m["content"], "Thinking": "", "ToolCalls": [], "Images": [],
            "ToolName": ""}


def prompt_ends(template: str) -> tuple[str | None, str | None, str | None] | None:
    """The ends (TAIL characters) of the prompt rendered with `think` unset, false and true (one
    parse, three renderings); None when the template cannot be rendered here (each end None
    where that one failed)."""
    parsed = _parsed(template)
    if parsed is None:
        return None
    ends = [p[-TAIL:] if p is not None else None for p in (_render(parsed, t, "") for t in (None, False, True))]
    return None if all(e is None for e in ends) else (ends[0], ends[1], ends[2])
