"""The reasoning a stream sent, sent again as the answer at its end, where a body of the same
output would give that text as the answer (docs/behaviour.md, "Reasoning and no answer"):

- an output that started inside a reasoning block (the template opened it: a profile, the
  server's template, learning, the option; not a prefill), wrote no tag at all and ended
  complete (`stop`): an answer given without thinking (the body path: `FlowContext.split`);
- a request with `chat_template_kwargs.force_nonempty_content: true` (vLLM's switch) whose
  output has reasoning and no answer.

A stream cannot take back what went out as reasoning, so the client gets both: the reasoning,
then the same text as the answer (vLLM's own streams do this for force_nonempty_content). The
text is kept only while one of these can still hold, up to KEEP_MAX characters
(docs/budget.md); past that it is not sent again. Several reasoning blocks are joined with a
blank line, as a body joins them: chat's and Ollama's one reasoning field carries it already;
Messages and Responses say where each of their blocks (a thinking block, a reasoning item) ends.

On the way back the model wrote that text once: the output's layout is filed under the texts the
client got, and gives back what the model wrote from the reasoning alone (written.Echoed).
"""

from __future__ import annotations

from .context import STOP, FlowContext
from .recorder import RecordingSplitter
from .splitter import CONTENT, REASONING, Splitter
from .written import JOIN

KEEP_MAX = 1 << 20   # characters of reasoning one output keeps to send again


class Again:
    __slots__ = ("force", "tagless", "kept", "size", "answered", "stats", "gap")

    def __init__(self, ctx: FlowContext, splitter: Splitter) -> None:
        f = ctx.facts
        self.stats = ctx.stats
        self.force = f is not None and f.force_nonempty
        self.tagless = splitter.inside and ctx.inside_because not in (None, "prefill")
        self.kept: list[str] | None = [] if self.force or self.tagless else None
        self.size = 0
        self.answered = False
        self.gap = False   # a block with text ended: the next block's text goes after JOIN

    def said(self, kind: int, text: str) -> None:
        """Text that went out to the client as `kind`."""
        if kind == CONTENT:
            if text.strip():
                self.answered = True
                self.kept = None
        elif kind == REASONING and self.kept is not None and text:
            if self.gap:
                self.gap = False
                text = JOIN + text
            self.size += len(text)
            if self.size > KEEP_MAX:
                self.kept = None
            else:
                self.kept.append(text)

    def ended(self) -> None:
        """The client's reasoning block ended (a Messages thinking block, a Responses reasoning
        item): a later block's text is joined to it with a blank line."""
        if self.kept:
            self.gap = True

    def text(self, splitter: Splitter, finish: str | None) -> str | None:
        """At the output's end (its splitter finished, `finish` as the response said it ended):
        the text to send as the answer, or None."""
        if self.kept is None or self.answered or not self.kept:
            return None
        # (Started inside and no tag removed: the block never closed.)
        tagless = self.tagless and finish == STOP and splitter.markup_chars == 0 and splitter.stray_closes == 0
        if not (tagless or self.force):
            return None
        text = "".join(self.kept)
        if not text.strip():
            return None
        self.stats.again_chars += len(text)
        if isinstance(splitter, RecordingSplitter):   # the way back: the model did not write it twice
            splitter.transcript.echoed(text, bare=tagless)
        return text
