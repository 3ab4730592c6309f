"""The options, declared once: name, environment variable, default, help, how to parse.

The addon registers them with mitmproxy (the environment variable is the default, so
`--set` overrides it); the CLI reads the same table. Parsing errors say how to fix the value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from . import tagsets as tagsets_mod


class SettingError(ValueError):
    pass


_TRUE = {"1", "true", "on", "yes"}
_FALSE = {"0", "false", "off", "no"}


def _bool(name: str, env: str) -> Callable[[str | bool], bool]:
    def parse(v: str | bool) -> bool:
        if isinstance(v, bool):   # what mitmproxy holds for a bool option
            return v
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise SettingError(f"{name} (env {env}) is {v!r}; use on or off (also 1/0, true/false, yes/no)")
    return parse


def _choice(name: str, env: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(v: str) -> str:
        s = v.strip().lower()
        if s in choices:
            return s
        raise SettingError(f"{name} (env {env}) is {v!r}; use one of: {', '.join(choices)}")
    return parse


def _seconds(name: str, env: str, most: float) -> Callable[[str], float]:
    def parse(v: str) -> float:
        try:
            x = float(v.strip())
        except ValueError:
            x = -1.0
        if not 0 < x <= most:   # (NaN fails too)
            raise SettingError(f"{name} (env {env}) is {v!r}; use a number of seconds above 0 and at most "
                               f"{most:g}, e.g. 2 or 0.5")
        return x
    return parse


KEY_ID_DIGITS = 16   # a key id's length in hex digits (thinkwire.keys.key_id)


def _key_id(v: str) -> str:
    s = v.strip().lower()
    if s == "" or (len(s) == KEY_ID_DIGITS and all(c in "0123456789abcdef" for c in s)):
        return s
    raise SettingError(f"think_key_id (env THINK_KEY_ID) is {v!r}; use the {KEY_ID_DIGITS} hex digits that "
                       "`thinkwire key id` prints for the fleet's key, or nothing")


_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(name: str, env: str) -> Callable[[str], int]:
    def parse(v: str) -> int:
        s = v.strip().lower()
        number, unit = s.rstrip("smhd"), s[len(s.rstrip("smhd")):]
        if number.isdigit() and unit in _UNITS:
            return int(number) * _UNITS[unit]
        raise SettingError(f"{name} (env {env}) is {v!r}; use a whole number of seconds, or with a unit: "
                           "30d, 12h, 90m, 600s (0: no maximum)")
    return parse


_SIZES = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _size(name: str, env: str) -> Callable[[str], int]:
    def parse(v: str) -> int:
        s = v.strip().lower().removesuffix("ib").removesuffix("b")
        number, unit = s.rstrip("kmg"), s[len(s.rstrip("kmg")):]
        if number.isdigit() and unit in _SIZES and int(number) > 0:
            return int(number) * _SIZES[unit]
        raise SettingError(f"{name} (env {env}) is {v!r}; use a whole number of bytes above 0, or with a unit: "
                           "64m, 512k, 1g")
    return parse


def _count(name: str, env: str) -> Callable[[str], int]:
    def parse(v: str) -> int:
        s = v.strip()
        if s.isdigit() and int(s) > 0:
            return int(s)
        raise SettingError(f"{name} (env {env}) is {v!r}; use a whole number above 0, e.g. 10000")
    return parse


def _store(v: str) -> str:
    s = v.strip()
    if s in ("", "memory") or s.startswith(("sqlite:", "redis://", "rediss://", "unix://", "valkey://")):
        return s or "memory"
    raise SettingError(f"think_memory_store (env THINK_MEMORY_STORE) is {v!r}; use memory (in the proxy), "
                       "sqlite:PATH (a file, kept across restarts) or redis://HOST:PORT/DB (a fleet's shared "
                       "Redis or Valkey; rediss:// for TLS)")


def _port(v: str) -> int | None:
    s = v.strip()
    if s == "":
        return None
    if s.isdigit() and 1 <= int(s) <= 65535:
        return int(s)
    raise SettingError(f"think_metrics_port (env THINK_METRICS_PORT) is {v!r}; use a port from 1 to 65535 the "
                       "proxy also listens on (e.g. --mode reverse:URL@9090), or nothing to answer metrics "
                       "on every port")


@dataclass(frozen=True)
class Option:
    name: str
    env: str
    default: str
    help: str
    parse: Callable[[str], Any]
    # "bool": a mitmproxy bool option (a toggle in mitmweb); "choice": a str option whose values
    # mitmproxy lists (--options, mitmweb's editor); "str": free text. Choices are advisory in
    # mitmproxy, so `configure` parses every value here, with errors that say how to fix it.
    kind: str = "str"
    choices: tuple[str, ...] = ()


def _opt(name: str, default: str, help: str, kind: str = "bool", choices: tuple[str, ...] = ()) -> Option:
    env = name.upper()
    parse: Callable[[str], Any]
    if kind == "bool":
        parse = _bool(name, env)
    elif kind == "choice":
        parse = _choice(name, env, choices)
    else:
        parse = str
    return Option(name, env, default, help, parse, kind, choices)


OPTIONS: tuple[Option, ...] = (
    _opt("think_chat", "on", "Rewrite /chat/completions responses"),
    _opt("think_chat_field", "reasoning_content",
         "Where chat reasoning goes", "choice", ("reasoning_content", "reasoning", "both")),
    _opt("think_messages", "on", "Rewrite Anthropic /messages responses"),
    _opt("think_signature", "signed",
         "Signature on thinking blocks this proxy makes", "choice", ("signed", "unsigned", "off", "redacted")),
    _opt("think_responses", "on", "Rewrite /responses responses"),
    _opt("think_responses_summary", "on",
         "Also put reasoning into reasoning items' summary, even when the request does not ask"),
    _opt("think_responses_content", "off",
         "Also put reasoning text into reasoning items' content (reasoning_text), beside the summary: "
         "clients that render both (llm) show it twice"),
    _opt("think_ollama", "on", "Rewrite Ollama's native /api/chat and /api/generate responses"),
    _opt("think_tags", "", "Tag pairs replacing the tag sets, e.g. '<think> </think>,<reasoning> </reasoning>'", "str"),
    _opt("think_tagsets", "", "Path of a tag sets YAML file replacing the shipped tagsets.yaml", "str"),
    _opt("think_trim", "on", "Trim whitespace at the edges of reasoning blocks and after them"),
    _opt("think_tags_anywhere", "off", "Count opening tags anywhere, not only at the start or a line start"),
    _opt("think_starts_inside", "off",
         "Treat every model's output as starting inside a reasoning block (custom model names)"),
    _opt("think_learn", "on",
         "Learn which models open their reasoning in the prompt (closing tags with no opening tag) "
         "and start their later responses inside; in memory only"),
    _opt("think_ask_template", "on",
         "Ask the flow's server what prompt its chat template renders for the request (llama-server "
         "/apply-template, vLLM /tokenize, Ollama's template from /api/show) and which model it runs "
         "(/props, /v1/models, SGLang's /get_model_info, LM Studio's model list), to know where the "
         "output starts; a server that cannot say leaves it to the profile"),
    _opt("think_restore", "inline", "What to do with reasoning this proxy made when a client sends it back",
         "choice", ("inline", "drop", "keep")),
    _opt("think_chat_restore", "keep", "What to do with reasoning_content/reasoning in chat requests",
         "choice", ("keep", "inline", "drop")),
    _opt("think_log", "flows", "What the log shows: flows (start-up lines, one line per flow thinkwire "
         "handled, warnings) or all (mitmproxy's own lines too: connections and a summary of every flow)",
         "choice", ("flows", "all")),
    # The keys for marks (thinkwire.keys). Paths and an id only: a key itself is never an option.
    _opt("think_key_file", "", "File holding the key that seals marks (else THINK_SIGNING_KEY, else "
         "this instance's own key in the confdir)", "str"),
    _opt("think_key_previous_files", "", "Files holding previous keys, comma-separated: they open marks, "
         "never seal them (key rotation)", "str"),
    Option("think_ask_timeout", "THINK_ASK_TIMEOUT", "2",
           "Seconds an ask of the flow's server (Ollama's /api/show) may take, all of it; past it the "
           "answer is not known and the request goes as it came", _seconds("think_ask_timeout", "THINK_ASK_TIMEOUT", 60)),
    Option("think_start_wait", "THINK_START_WAIT", "0.3",
           "Seconds the first response byte may wait for the server's answer about where the output "
           "starts (think_ask_template), counted from the request; past it the profile decides (the "
           "answer is kept for the next request)", _seconds("think_start_wait", "THINK_START_WAIT", 10)),
    Option("think_key_id", "THINK_KEY_ID", "", "The id of the fleet's key (`thinkwire key id`): a replica "
           "whose key has another id refuses to start", _key_id, "str"),
    Option("think_mark_max_age", "THINK_MARK_MAX_AGE", "30d", "How long a mark this proxy made opens (the way "
           "back): seconds, or 30d, 12h, 90m; 0: no maximum. An older one passes as the client sent it",
           _duration("think_mark_max_age", "THINK_MARK_MAX_AGE"), "str"),
    # The reasoning memory (thinkwire.memory): reasoning a client dropped, put back.
    _opt("think_memory", "auto", "Put back reasoning a client dropped from its history (tool loops): auto "
         "(for the model families and APIs that need it, docs/memory.md), on (every model), off",
         "choice", ("auto", "on", "off")),
    Option("think_memory_store", "THINK_MEMORY_STORE", "memory", "Where the reasoning memory lives: memory "
           "(in the proxy), sqlite:PATH (a file: kept across restarts), redis://HOST:PORT/DB (shared by a "
           "fleet; Valkey too)", _store, "str"),
    Option("think_memory_ttl", "THINK_MEMORY_TTL", "24h", "How long a remembered reasoning is kept: seconds, or "
           "24h, 90m, 7d", _duration("think_memory_ttl", "THINK_MEMORY_TTL"), "str"),
    Option("think_memory_entries", "THINK_MEMORY_ENTRIES", "10000", "Most entries the in-proxy or file memory "
           "holds (the oldest go first)", _count("think_memory_entries", "THINK_MEMORY_ENTRIES"), "str"),
    Option("think_memory_bytes", "THINK_MEMORY_BYTES", "64m", "Most bytes the in-proxy or file memory holds "
           "(the oldest go first): 64m, 512k, 1g", _size("think_memory_bytes", "THINK_MEMORY_BYTES"), "str"),
    Option("think_memory_timeout", "THINK_MEMORY_TIMEOUT", "0.25", "Seconds a call of the memory's store may "
           "take (a file or Redis); past it, a miss and the request goes as the client sent it",
           _seconds("think_memory_timeout", "THINK_MEMORY_TIMEOUT", 10), "str"),
    Option("think_metrics_port", "THINK_METRICS_PORT", "", "The local port the metrics endpoint is answered on "
           "(a port the proxy also listens on, kept from clients); empty: every port", _port, "str"),
)

BY_NAME = {o.name: o for o in OPTIONS}


def env_default(opt: Option) -> str:
    return os.environ.get(opt.env, opt.default)


@dataclass(frozen=True)
class Settings:
    chat: bool
    chat_field: str
    messages: bool
    signature: str
    responses: bool
    responses_summary: bool
    responses_content: bool
    ollama: bool
    trim: bool
    tags_anywhere: bool
    starts_inside: bool
    learn: bool
    restore: str
    chat_restore: str
    ask_timeout: float
    log: str
    tagsets: tagsets_mod.Tagsets
    mark_max_age: int = 30 * 86400   # seconds (0: no maximum)
    metrics_port: int | None = None  # the only local port metrics are answered on (None: every port)
    ask_template: bool = True        # ask the server where its output starts (thinkwire.serverstart)
    start_wait: float = 0.3          # seconds a response waits for that answer
    memory: str = "auto"             # the reasoning memory: auto, on, off (thinkwire.memory)
    memory_store: str = "memory"     # memory, sqlite:PATH, redis://...
    memory_ttl: int = 86400          # seconds an entry is kept
    memory_entries: int = 10000      # most entries (in-proxy and file stores)
    memory_bytes: int = 64 << 20     # most bytes (in-proxy and file stores)
    memory_timeout: float = 0.25     # seconds per store call

    @classmethod
    def from_values(cls, values: dict[str, str]) -> "Settings":
        """Build from raw option strings (missing ones take their environment default)."""
        def get(name: str) -> Any:
            opt = BY_NAME[name]
            raw = values.get(name)
            return opt.parse(env_default(opt) if raw is None else raw)

        tags = get("think_tags").strip()
        path = get("think_tagsets").strip()
        try:
            if tags:
                ts = tagsets_mod.from_tags_string(tags)
            else:
                ts = tagsets_mod.load(path or tagsets_mod.SHIPPED)
        except tagsets_mod.TagsetError as e:
            raise SettingError(str(e)) from None
        return cls(
            chat=get("think_chat"), chat_field=get("think_chat_field"),
            messages=get("think_messages"), signature=get("think_signature"),
            responses=get("think_responses"), responses_summary=get("think_responses_summary"),
            responses_content=get("think_responses_content"), ollama=get("think_ollama"),
            trim=get("think_trim"), tags_anywhere=get("think_tags_anywhere"),
            starts_inside=get("think_starts_inside"), learn=get("think_learn"),
            restore=get("think_restore"), chat_restore=get("think_chat_restore"),
            ask_timeout=get("think_ask_timeout"), log=get("think_log"),
            tagsets=ts, mark_max_age=get("think_mark_max_age"), metrics_port=get("think_metrics_port"),
            ask_template=get("think_ask_template"), start_wait=get("think_start_wait"),
            memory=get("think_memory"), memory_store=get("think_memory_store"), memory_ttl=get("think_memory_ttl"),
            memory_entries=get("think_memory_entries"), memory_bytes=get("think_memory_bytes"),
            memory_timeout=get("think_memory_timeout"),
        )
