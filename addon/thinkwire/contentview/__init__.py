"""mitmweb / mitmproxy content views: a reader's view of LLM requests and responses.

`thinkwire` renders a request or response of any of the four surfaces (chat completions,
Responses, Anthropic Messages, Ollama's native API), JSON body or stream (SSE, NDJSON), as a
person reads it: the model, then
reasoning and answer as separate sections in the order they came, tool calls, the finish
reason, usage. It parses the wire format generically (it does not use the rewriters), so it
shows exactly what the bytes say, whoever produced them.

`thinkwire upstream` renders the response as the upstream sent it, before thinkwire rewrote it,
when the addon kept a copy (see `bodies.py`), followed by the raw original bytes. Pick it from
the view menu to compare.

The `thinkwire` view wins over the JSON view only for flows the addon handled (they carry its
`record.FlowRecord`); deciding that costs a dict lookup and no parsing. Which surface a flow or a
body belongs to is decided by the surfaces' own `matches` / `looks_like`.
"""
from __future__ import annotations

from typing import Any, Sequence

from mitmproxy import contentviews, http
from mitmproxy.contentviews import Contentview, Metadata

from ..record import MEMORY_KEY, UPSTREAM_KEY, FlowRecord, handled
from .read import READERS, read_request, read_response, surface_of_path  # noqa: F401 (re-exported)
from .reading import Reading

PRIORITY = 2.0                        # above the JSON view (1)
WRAP = 80                             # columns a section's lines fold at: fits mitmweb's detail pane

_SURFACE_TITLES = {"chat": "OpenAI chat completions", "responses": "OpenAI responses",
                   "messages": "Anthropic messages", "ollama": "Ollama native API"}
_RULE = "─"


# -- rendering --------------------------------------------------------------------------------------
def render(r: Reading, extra: Sequence[tuple[str, str]] = (), request: bool = False) -> str:
    lines: list[str] = []
    kind = _SURFACE_TITLES.get(r.surface, r.surface or "?")
    how = f"stream, {r.events} events" if r.streamed and not request else (
        "request" if request else "body")
    head = [("surface", f"{kind} ({how})")] + [(k, v) for k, v in r.head if v] + list(extra)
    width = max(len(k) for k, _ in head + r.tail) if head + r.tail else 0
    lines += [line for k, v in head for line in _field(k, v, width)]
    for name, secs in r.groups:
        if name:
            lines += ["", f"══ {name} " + "═" * max(3, 60 - len(name))]
        for s in secs:
            if s.kind == "note":
                lines.append(f"({s.text})")
                continue
            if s.kind == "text" and not s.label:  # a request message's text: under its heading
                lines += [""] + _wrapped(s.text)
                continue
            title = s.kind + (f": {s.label}" if s.label else "")
            lines += ["", f"── {title} " + _RULE * max(3, 60 - len(title))]
            lines += _wrapped(s.text) if s.text else ["(empty)"]
    if not any(secs for _, secs in r.groups):
        lines += ["", "(no content)"]
    if r.tail:
        lines.append("")
        lines += [line for k, v in r.tail for line in _field(k, v, width)]
    return "\n".join(lines) + "\n"


def _field(key: str, value: str, width: int) -> list[str]:
    """A `key  value` line, its value folded to fit WRAP columns beside the keys (the flow's
    summary says much: blocks, how the start was decided, what failed)."""
    pad = width + 2
    first, *rest = _wrapped(value, max(20, WRAP - pad))
    return [f"{key.ljust(width)}  {first}"] + [" " * pad + line for line in rest]


def _wrapped(text: str, wrap: int = WRAP) -> list[str]:
    """`text`'s lines folded at WRAP columns, at spaces where there are any: mitmweb shows a
    view's text unwrapped (white-space: pre), and one paragraph of reasoning is one long line."""
    out: list[str] = []
    for line in text.split("\n"):
        while len(line) > wrap:
            cut = line.rfind(" ", 0, wrap + 1)
            cut = cut if cut > 0 else wrap
            out.append(line[:cut])
            line = line[cut + 1:] if line[cut:cut + 1] == " " else line[cut:]
        out.append(line)
    return out


def _flow_surface(flow: Any, message: Any) -> str | None:
    rec = FlowRecord.of(flow)
    if rec is not None and rec.surface in READERS:
        return rec.surface
    req = getattr(flow, "request", None)
    return surface_of_path(req.path) if isinstance(req, http.Request) else None


def _summary(flow: Any) -> list[tuple[str, str]]:
    rec = FlowRecord.of(flow)
    return ([("thinkwire", rec.summary())] if rec is not None else []) + _memory(flow)


def _memory(flow: Any) -> list[tuple[str, str]]:
    """What the reasoning memory did for the flow (thinkwire.memory): put back, remembered."""
    md = getattr(flow, "metadata", None)
    kept = md.get(MEMORY_KEY) if isinstance(md, dict) else None
    if not isinstance(kept, dict):
        return []
    said = [f"reasoning of {kept[k]} turn(s) {what}" for k, what in (("put_back", "put back into the request"),
                                                                      ("remembered", "remembered"))
            if isinstance(kept.get(k), int) and kept[k]]
    return [("memory", "; ".join(said) + f" ({kept.get('store', '?')})")] if said else []


def prettify_message(data: bytes, metadata: Metadata) -> str:
    flow = metadata.flow
    surface = _flow_surface(flow, metadata.http_message)
    if isinstance(metadata.http_message, http.Request):
        return render(read_request(data, surface), _memory(flow), request=True)
    return render(read_response(data, surface, metadata.content_type), _summary(flow))


class ThinkwireContentview(Contentview):
    """Model, reasoning, answer, tool calls, finish reason and usage, as a reader wants them."""

    name = "thinkwire"
    syntax_highlight = "none"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        return prettify_message(data, metadata)

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        # Cheap: a dict lookup on the flow, no parsing. Only flows the addon handled.
        flow = metadata.flow
        if flow is None or not data or metadata.http_message is None:
            return 0
        if not handled(flow):
            return 0
        ct = metadata.content_type
        if ct in ("application/json", "text/event-stream", "application/x-ndjson") or (ct is None and data[:1] == b"{"):
            return PRIORITY
        return 0


class UpstreamContentview(Contentview):
    """The response as the upstream sent it (kept by the addon), read and raw."""

    name = "thinkwire upstream"
    syntax_highlight = "none"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        flow = metadata.flow
        if isinstance(metadata.http_message, http.Request):
            return "thinkwire upstream: the request went upstream as shown in the other views.\n"
        kept = flow.metadata.get(UPSTREAM_KEY) if flow is not None else None
        if not isinstance(kept, dict) or not isinstance(kept.get("text"), str):
            if isinstance(kept, dict) and kept.get("same"):
                note = "The upstream sent exactly what the client got (thinkwire changed nothing)"
            else:
                note = ("No upstream copy kept for this flow. thinkwire keeps one for the flows it "
                        "rewrites when store_streamed_bodies is on, when flows are saved (-w), "
                        "or under mitmweb / mitmproxy's console")
            return f"{note}. The body as the client got it:\n\n" + data.decode("utf-8", "replace")
        text: str = kept["text"]
        original = text.encode("utf-8")
        surface = _flow_surface(flow, metadata.http_message)
        try:
            reading = render(read_response(original, surface, kept.get("content_type") or metadata.content_type))
        except Exception as e:  # noqa: BLE001 - show the raw bytes whatever they are
            reading = f"(cannot read it as an LLM response: {e})\n"
        return ("as the upstream sent it, before thinkwire rewrote it\n\n" + reading
                + "\n══ raw " + "═" * 60 + "\n" + text)

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        return -1  # only when picked by name


def register() -> None:
    """Add both views to mitmproxy (re-adding replaces them by name)."""
    contentviews.add(ThinkwireContentview)
    contentviews.add(UpstreamContentview)
