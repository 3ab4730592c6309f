"""OpenAI Responses streams: the event rewriter (`StreamRewriter`), its numbering of
`output_index` and `sequence_number`; the hot `output_text.delta` event, declared for the one
fast path (thinkwire.shapes), is in shortcuts.py."""

from __future__ import annotations

from typing import Any

from ...context import LENGTH, FlowContext
from ...again import Again
from ...shapes import Plan, Shape
from ...splitter import CONTENT, REASONING, Splitter
from ...events import Event
from ...jsonio import LONG, OUT, dumps, loads_known, sharing_dumps
from ...jsonnum import loads
from .. import event_object, is_done
from .held import HeldText
from .items import Obj, Src, _ev, _Message, _MessagePiece, _ResponseState, ended
from .items import _UpstreamPart
from .shortcuts import Learned, Shortcuts, _State

_ABSENT = object()
_LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.queued"})
_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
UNNUMBERED_MAX = 4096   # items of one stream numbered by their id, ids of at most ID_MAX characters
ID_MAX = 256            # (docs/budget.md)
# A text's done event whose splitter holds the start of a tag waits for the response's status
# (the token limit makes that tail markup): it and the events after it are held, at most these
# many events and bytes (past them: decided as not cut off).
HELD_MAX = 64
HELD_BYTES_MAX = 1 << 20


class _Sequencer:
    """`sequence_number` for the events going out: strictly increasing, as the SDK requires. An
    event keeps its upstream number, shifted by `offset` (how many more events went out than came
    in so far); an event this proxy inserts takes the next free number."""

    __slots__ = ("offset", "last")

    def __init__(self) -> None:
        self.offset = 0                # our sequence_number minus the upstream's
        self.last: int | None = None   # the last sequence_number sent

    def number(self, seq: int, own: bool, count: int = 1) -> int:
        """The first number of `count` events of the fast path that an upstream event numbered
        `seq` becomes: its own (`own`, shifted) or the next free; the others follow it. (The
        rule C numbers by, SEQ_OWN and SEQ_NEW in _hot.c: the fast paths' one definition.)"""
        last = self.last
        assert last is not None
        n = seq + self.offset if own and seq + self.offset > last else last + 1
        self.last = last = n + count - 1
        if last - seq > self.offset:
            self.offset = last - seq
        return n

    def stamp(self, batch: list[tuple[Obj, Src | None]], seq: object) -> None:
        """Number a batch of (event, its upstream source or None) in place; `seq` is the upstream
        number of the event that produced the batch."""
        prev, offset = self.last, self.offset
        for ev, src in batch:
            if "sequence_number" not in ev:
                continue
            s0 = src[1].get("sequence_number") if src is not None else None
            want = s0 + offset if isinstance(s0, int) and not isinstance(s0, bool) else None
            if want is not None:
                prev = want if prev is None else max(prev + 1, want)
                ev["sequence_number"] = prev
            elif prev is not None:
                prev += 1
                ev["sequence_number"] = prev
            elif src is None:
                ev.pop("sequence_number")   # a stream without numbers gets none
        if isinstance(seq, int) and prev is not None:
            self.offset = max(self.offset, prev - seq)
        self.last = prev


class StreamRewriter(Shortcuts, _ResponseState):
    """One Responses stream. `on_event` per SSE event; `finish` at the end; `abort` on failure."""

    literals = True

    def __init__(self, ctx: FlowContext, fast: bool = True) -> None:
        super().__init__(ctx)
        self.fast = fast               # False: no shortcut, every event parsed in full
        self.passthrough = False
        self.translating = False       # failed open with numbers moved (abort, translate)
        self.map: dict[int, int] = {}  # upstream output_index -> ours, for items passed through
        self.active: dict[int, _Message] = {}   # upstream output_index -> _Message still open
        self.records: dict[tuple[object, ...], list[Obj]] = {}   # message key -> the items it became (changed ones only)
        self.seq = _Sequencer()
        self.dirty = False             # something went out other than it came in
        self.event_lines = False
        self.eol = b"\n"
        self._batch: list[tuple[Obj, Src | None]] = []
        self._dumps = sharing_dumps()   # an item's text goes out in several events at its end
        # The last output_text.delta parsed in full (shortcuts.py), and its shape: the fast path's
        # (thinkwire.shapes), on a chunk or on an event the driver framed (thinkwire.stream).
        self._learned: Learned | None = None
        self._shape_c: Shape | None = None
        self._hits = self._misses = 0      # deltas the shape read / learned shapes that failed
        self._same = False                 # on_event's event has the learned shape (nothing to learn)
        self._plan: Plan | None = None     # the fast path's plan for the current state (_make_plan)
        self._state: _State | None = None  # ... and what _decide needs of that state
        self._plans: dict[tuple[Shape, object, object, _UpstreamPart], _State] = {}   # made for a state, kept
        self._armed: tuple[Plan, int] | None = None   # the plan the C callable was last armed for
        self._known: tuple[_UpstreamPart, int, str, str] | None = None   # (part, its size, literal, text): what loads_known skips
        self._unnumbered: dict[str, int] = {}   # item id -> the output_index its events lack (_numbered)
        self._again: tuple[Again, Splitter] | None = None   # (Again, the output's first splitter): thinkwire.again
        # Events held from a text's done event whose splitter holds the start of a tag until the
        # response's final event says whether the output was cut off there (`_hold`).
        self._held: list[Event] | None = None
        self._held_bytes = 0
        self._replaying = False            # the held events going on, decided

    # -- the Owner side ------------------------------------------------------------------------
    def emit(self, ev: Obj, src: Src | None = None) -> None:
        self._batch.append((ev, src))

    def splitter(self) -> Splitter:
        sp = super().splitter()
        if self._again is None:
            self._again = (Again(self.ctx, sp), sp)
        return sp

    def known(self, text: str, t: HeldText) -> None:
        if len(text) >= LONG:   # (sharing_dumps keeps long strings only)
            self._dumps.known(text, t.literal())

    def on_event(self, ev: Event) -> list[bytes]:
        same, self._same = self._same, False
        if self.passthrough or ev.data is None:
            return [ev.raw]
        if self._held is not None:
            return self._hold(ev)
        self._plan = None
        if is_done(ev.data):
            return self._flush() + [ev.raw]
        obj = self._parse(ev.data)
        if obj is None or not isinstance(obj.get("type"), str):
            return [ev.raw]
        self.event_lines = ev.event is not None
        self.eol = ev.eol
        if obj["type"] == "response.output_text.delta" and self.fast and not same:
            self._learn_from(ev, obj, self.ctx.rules(self.model))   # (the rules the parts' splitters have)
        self._batch = []
        src = (ev, obj)
        if "output_index" not in obj and obj["type"] not in _LIFECYCLE and obj["type"] not in _FINAL:
            obj = self._numbered(obj)
        if obj["type"] == "response.output_text.done" and not self._replaying and self._holds_tag(obj):
            self._held, self._held_bytes = [ev], len(ev.raw)
            return []
        self._dispatch(obj, src)
        return self._send(obj.get("sequence_number"))

    def _pass_all(self) -> None:
        """From here on every event goes as it came (the fast path's too: no shape)."""
        self.passthrough = True
        self._learned = self._shape_c = None

    def _holds_tag(self, obj: Obj) -> bool:
        """Whether the text this done event ends has the start of a tag held in its splitter."""
        u = obj.get("output_index")
        m = self.active.get(u) if type(u) is int else self._by_item_id(obj.get("item_id"))
        p = m.part if m is not None else None
        return p is not None and p.fed and p.splitter is not None and p.splitter.holds_tag()

    def _hold(self, ev: Event | None) -> list[bytes]:
        """An event while a text's end is held: held too, until the response's final event (or
        the stream's end, or the bounds) says how the output ended; then the held events go on,
        the text's tail decided by it (a start of a tag at the token limit is markup)."""
        held = self._held
        assert held is not None
        final = None
        if ev is not None and ev.data is not None and not is_done(ev.data):
            try:   # (not counted as malformed here: on_event reads it again when it goes on)
                obj = loads(ev.data) if '"response.' in ev.data else None
            except (ValueError, RecursionError):
                obj = None
            t = obj.get("type") if isinstance(obj, dict) else None
            if t in _FINAL and isinstance(obj, dict):
                final = obj
            elif len(held) < HELD_MAX and self._held_bytes + len(ev.raw) <= HELD_BYTES_MAX:
                held.append(ev)
                self._held_bytes += len(ev.raw)
                return []
        self._held, self._held_bytes = None, 0
        self.cut_off = final is not None and ended(final.get("response")) == LENGTH
        out: list[bytes] = []
        self._replaying = True
        try:
            for h in held:
                out += self.on_event(h)
        finally:
            self._replaying = False
        return out + (self.on_event(ev) if ev is not None else [])

    def _numbered(self, obj: Obj) -> Obj:
        """An item's event without an output_index (llama-server's carry none, nor content_index
        or sequence_number), numbered as the upstream's items come: by the order they were added,
        found by the item's id; a message's one text part is its content_index 0. The events go
        out numbered. An event of an item never added passes as it came."""
        t = obj["type"]
        item = obj.get("item")
        iid = obj.get("item_id", item.get("id") if isinstance(item, dict) else None)
        if not isinstance(iid, str) or len(iid) > ID_MAX:
            return obj
        if t == "response.output_item.added":
            if isinstance(item, dict) and item.get("type") == "reasoning" and not self.dirty and not self.active:
                self.ctx.stats.native = True
                self._pass_all()   # native reasoning: the rest goes as it comes
                return obj
            if len(self._unnumbered) >= UNNUMBERED_MAX:
                return obj
            u = self._unnumbered.setdefault(iid, len(self._unnumbered))
        elif iid in self._unnumbered:
            u = self._unnumbered[iid]
        else:
            return obj
        new = dict(obj, output_index=u)
        if "content_index" not in obj and t.startswith(("response.output_text.", "response.content_part.")):
            new["content_index"] = 0
        return new

    def _parse(self, data: str) -> Obj | None:
        """event_object, but an event that repeats the whole text the deltas of a part brought
        (its done events, the final one) is parsed without reading that text again."""
        if len(data) > LONG:
            for m in self.active.values():   # (a part being read: its text is about to be done)
                p = m.part
                k = self._known
                if (p is not None and LONG <= p.size < len(data)
                        and (k is None or k[0] is not p or k[1] != p.size)):
                    self._known = (p, p.size) + p.known()
            k = self._known
            if k is not None:
                obj = loads_known(data, k[2], k[3])
                if type(obj) is dict:
                    return obj
        return event_object(data, self.ctx)

    def _frame(self, type_: str, data: str, lines: bool | None = None, eol: bytes | None = None) -> bytes:
        """sse.encode for compact JSON (it has no line breaks), framed as this stream's events are
        so far, or with `lines` (an event: line) and `eol`."""
        eol = self.eol if eol is None else eol
        e = "\n" if eol == b"\n" else eol.decode()
        head = f"event: {type_}{e}data: " if (self.event_lines if lines is None else lines) else "data: "
        return f"{head}{data}{e}{e}".encode("utf-8", OUT)

    def _dispatch(self, obj: Obj, src: Src) -> None:
        t = obj["type"]
        if t in _LIFECYCLE:
            resp = obj.get("response")
            if isinstance(resp, dict) and self.resp_id is None:
                self.resp_id = resp.get("id") if isinstance(resp.get("id"), str) else None
                self.model = resp.get("model")
            self.emit(dict(obj), src)
            return
        if t in _FINAL:
            self._final(obj, src)
            return
        u = obj.get("output_index")
        if t == "response.output_item.added" and isinstance(u, int) and isinstance(obj.get("item"), dict):
            self._added(u, obj, src)
            return
        m = self.active.get(u) if type(u) is int else None
        if m is None and type(u) is int and u not in self.map:
            # An upstream that sends an item's events under another output_index: its item_id says
            # which message they belong to. Text for an item never added passes as it came; a
            # message closed without text events is then not split from its final item, which
            # would send that text a second time.
            item = obj.get("item")
            m = self._by_item_id(obj.get("item_id", item.get("id") if isinstance(item, dict) else None))
            if m is None and t.startswith("response.output_text."):
                self.unrouted_text = True
        if m is None:
            if type(u) is int and u in self.map:
                self.emit(dict(obj, output_index=self.map[u]), src)
            else:
                self.emit(dict(obj), src)
            return
        c = obj.get("content_index")
        if c is not None and type(c) is not int:
            # Raised before any text is fed, so failing open loses and repeats nothing.
            raise TypeError(f"{t}: content_index is a {type(c).__name__}, not a number")  # no body text
        if t == "response.output_text.delta":
            m.delta(obj, src)
        elif t == "response.content_part.added":
            m.part_added(obj, src)
        elif t == "response.output_text.done":
            m.text_done(obj, src)
        elif t == "response.content_part.done":
            m.part_done(obj, src)
        elif t == "response.output_item.done":
            del self.active[m.upstream_index]
            self._record(m, m.item_done(obj, src))
        else:
            m.other(obj, src)

    def _by_item_id(self, item_id: object) -> _Message | None:
        if isinstance(item_id, str):
            for m in self.active.values():
                if m.mid == item_id:
                    return m
        return None

    def _added(self, u: int, obj: Obj, src: Src) -> None:
        item = obj["item"]
        kind = item.get("type")
        if kind == "reasoning":
            self.ctx.stats.native = True
            if not self.dirty and not self.active:
                self._pass_all()   # nothing changed so far: the rest goes as it comes
        if kind == "message" and u not in self.active:
            self.active[u] = _Message(self, u, item, (obj, src))
            return
        d = self.map[u] = self.alloc()
        self.emit(dict(obj, output_index=d), src)

    def _record(self, m: _Message, changed: bool) -> None:
        if changed:
            self.records[("id", m.mid) if m.mid else ("pos", m.upstream_index)] = m.built

    def _final(self, obj: Obj, src: Src) -> None:
        resp = obj.get("response")
        output = resp.get("output") if isinstance(resp, dict) else None
        self.ending = ended(resp)
        self.ctx.ended(self.ending)
        self.cut_off = self.cut_off or self.ending == LENGTH   # (messages closed here end cut off)
        # Messages the upstream never closed: close them now, as the final output shows them.
        for u, m in list(self.active.items()):
            del self.active[u]
            item = None
            for i, it in enumerate(output if isinstance(output, list) else ()):
                if isinstance(it, dict) and it.get("type") == "message" and (
                        it.get("id") == m.mid if m.mid else i == u):
                    item = it
            if item is None:
                status = resp.get("status") if isinstance(resp, dict) else None
                item = dict(m.item, status="completed" if status == "completed" else "incomplete")
            self._record(m, m.item_done(_ev("response.output_item.done", output_index=u, item=item), None))
        extra = self._answer_again()
        if extra is not None and isinstance(output, list):
            self.records.setdefault(("again",), [])
        if not isinstance(output, list) or not self.records:
            self.emit(dict(obj), src)
            return
        new: list[Any] = []
        for i, it in enumerate(output):
            if isinstance(it, dict) and it.get("type") == "message":
                key = ("id", it["id"]) if isinstance(it.get("id"), str) and it["id"] else ("pos", i)
                built = self.records.get(key)
                if built is not None:
                    new.extend(built)
                    continue
            new.append(it)
        if extra is not None:
            new.append(extra)
        assert isinstance(resp, dict)   # (it has an output list)
        self.emit(dict(obj, response=dict(resp, output=new)), src)

    def _answer_again(self) -> Obj | None:
        """The reasoning that went out, again as a message item of its own, when a body of this
        output would give it as the answer (thinkwire.again): its events, and the item."""
        again, self._again = self._again, None
        text = again[0].text(again[1], self.ending) if again is not None else None
        if text is None:
            return None
        d, mid = self.alloc(), f"msg_{self.resp_id or 'resp'}_answer"
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {"id": mid, "type": "message", "role": "assistant", "status": "completed", "content": [part]}
        ids = dict(item_id=mid, output_index=d, content_index=0)
        for ev in (_ev("response.output_item.added", output_index=d, item=dict(item, status="in_progress", content=[])),
                   _ev("response.content_part.added", **ids, part=dict(part, text="")),
                   _ev("response.output_text.delta", **ids, delta=text),
                   _ev("response.output_text.done", **ids, text=text),
                   _ev("response.content_part.done", **ids, part=part),
                   _ev("response.output_item.done", output_index=d, item=item)):
            self.emit(ev)
        return item

    # -- out -----------------------------------------------------------------------------------
    def _send(self, seq: object) -> list[bytes]:
        """Number and encode the batch. Events keep their upstream number (plus the offset
        insertions caused) where they can; inserted ones take the next free number."""
        batch, self._batch = self._batch, []
        self.seq.stamp(batch, seq)
        out: list[bytes] = []
        again = self._again[0] if self._again is not None else None
        for ev, src in batch:
            if again is not None:   # (the text that goes out: one reasoning channel's, the answer's)
                t = ev["type"]
                if t == "response.output_text.delta":
                    again.said(CONTENT, ev.get("delta") or "")
                elif t == self.mode.channels[0].text_event + ".delta":
                    again.said(REASONING, ev.get("delta") or "")
                elif t == self.mode.channels[0].text_event + ".done":   # (a reasoning item's text ended)
                    again.ended()
            if src is not None and ev == src[1]:
                out.append(src[0].raw)
                continue
            self.dirty = True
            t = ev["type"]   # (an item's whole text is in its done events and the final one)
            out.append(self._frame(t, (self._dumps if t.endswith(".done") or t in _FINAL else dumps)(ev)))
        return out

    def _flush(self) -> list[bytes]:
        self._plan = None
        self._batch = []
        for m in self.active.values():
            m.flush()
        return self._send(None)

    def finish(self) -> list[bytes]:
        if self.passthrough:
            return []
        out = self._hold(None) if self._held is not None else []
        return out + self._flush()

    def abort(self) -> list[bytes]:
        """Fail open: what is held goes out, and each message still open is left on a message
        item with its text part open: the upstream's next events of it land there (`translate`)."""
        if self.passthrough:
            return []
        held, self._held = self._held or [], None   # (they go on as events after failing open)
        self._pass_all()
        out = self._flush()
        for m in self.active.values():
            seg = m._ensure_seg()
            if m.part is not None and seg.dpart is None:
                m._open_dpart(seg)
        out += self._send(None)
        # Items or event numbers moved: the rest needs the client's numbers (or the SDK files
        # answer text under a reasoning item).
        self.translating = self.dirty
        for h in held:
            out += self.translate(h) if self.translating else [h.raw]
        return out

    def translate(self, ev: Event) -> list[bytes]:
        """An event after failing open: as it came, on the client's numbers (`renumbered`)."""
        obj = event_object(ev.data, self.ctx) if ev.data is not None and not is_done(ev.data) else None
        new = self.renumbered(obj) if obj is not None else {}
        if obj is None or not new:
            return [ev.raw]
        out = dict(obj, **new)
        return [self._frame(out["type"], dumps(out), ev.event is not None, ev.eol)]

    def renumbered(self, obj: Obj) -> Obj:
        """The fields of an event after failing open that the client has otherwise: its
        output_index, content_index, item_id and sequence_number (and a done item's id)."""
        t = obj.get("type")
        if not isinstance(t, str):
            return {}
        new: Obj = {}
        u = obj.get("output_index")
        m = self.active.get(u) if type(u) is int else None
        seg = m.cur if m is not None else None
        if isinstance(seg, _MessagePiece):
            new["output_index"] = seg.output_index
            if seg.id is not None and "item_id" in obj:
                new["item_id"] = seg.id
            c = obj.get("content_index")
            if type(c) is int:
                if t == "response.content_part.added" and c not in seg.content_index_map:
                    seg.content_index_map[c] = seg.next_c
                    seg.next_c += 1
                new["content_index"] = seg.content_index_map.get(c, c)
            item = obj.get("item")
            if t == "response.output_item.done":
                if isinstance(item, dict) and seg.id is not None:
                    new["item"] = dict(item, id=seg.id)
                assert type(u) is int   # (m was found by it)
                del self.active[u]
                self.map[u] = seg.output_index
        elif type(u) is int:
            if t == "response.output_item.added" and u not in self.map:
                self.map[u] = self.alloc()
            if u in self.map:
                new["output_index"] = self.map[u]
        n = obj.get("sequence_number")
        if type(n) is int and self.seq.last is not None:
            new["sequence_number"] = self.seq.number(n, True)
        return {k: v for k, v in new.items() if obj.get(k, _ABSENT) != v}
