"""OpenAI Responses (`/responses`): reasoning becomes native `reasoning` output items.

Whole bodies: each `message` output item whose `output_text` carries reasoning becomes, in
the order the text had them, reasoning item(s) and message item(s). Streams are rewritten event
by event, never buffered: while a message's `response.output_text.delta` events carry reasoning,
a reasoning item is streamed instead (`output_item.added`, `content_part.added` with a
`reasoning_text` part, `reasoning_text.delta` ..., the `.done` events, `output_item.done`), then
a message item for the answer. Items open lazily, on their first text, so no empty item appears.

Both paths run the same state machine (`_Message`): the body path feeds it whole texts and
keeps the items it builds, the stream path also sends the events it makes. So a stream,
accumulated, and the body rewrite of the same output agree by construction.

Stream bookkeeping (`StreamRewriter`):
- `output_index` is renumbered on every event, so items run 0, 1, 2 ... in the order they are
  added, across the items this proxy inserts.
- `sequence_number` stays strictly increasing: an event held back lends its number to the
  events sent later, and only when more events go out than came in do later numbers shift.
  An event that comes out as it came in goes out as its original bytes.
- The final `response.completed` / `incomplete` / `failed` gets an `output` array with the
  items as they were streamed (the SDK takes its final response from there).

Ids are deterministic: reasoning items are `rs_<message id without "msg_">_<position>`; the first
message piece keeps the message's id, later ones are `<message id>_<position>` (position = the
item's place among those the message became). A message without an id uses `<response id>_<index>`.

What the request asks for (`reasoning.summary` auto/concise/detailed), or the option
`think_responses_summary` (on by default: some clients read only the summary), adds the text as
a `summary_text` part, streamed as
`reasoning_summary_part.added` / `reasoning_summary_text.delta` ... `.done` / `part.done`;
`think_responses_content=off` leaves `content` out (only when the summary carries the text).
`include: ["reasoning.encrypted_content"]` puts the proxy's sealed mark in `encrypted_content`.

A response in which the upstream already sends reasoning items is native: it passes untouched.
The way back (a client sending these items, or references to them, back) is in restore.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json.decoder import scanstring
from json.encoder import encode_basestring

from ...context import FlowContext
from ...fastpath import ASCII_SLOT, NUMBER_SLOT, ByteShape, canonical_head, text_slot
from ...splitter import CONTENT, END, REASONING, Splitter, TagPair
from ...sse import Event, dumps
from .restore import restore_request  # noqa: F401  (the way back: restore.py)



NAME = "responses"
SHAPE = "'output' item list (object 'response') or response.* events"

_SUMMARY_ASKED = frozenset({"auto", "concise", "detailed"})
_ENCRYPTED = "reasoning.encrypted_content"
_LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.queued"})
_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_NOT_AN_ID = frozenset({"input_items", "cancel", "input_tokens", "compact"})


def matches(path: str) -> bool:
    """`.../responses` (create) and `.../responses/{id}` (retrieve); not input_items, cancel."""
    p = path.split("?", 1)[0].rstrip("/")
    head, _, last = p.rpartition("/")
    if last == "responses":
        return True
    return head.rpartition("/")[2] == "responses" and last not in _NOT_AN_ID


def looks_like(obj: dict) -> bool:
    t = obj.get("type")
    return (obj.get("object") == "response" or isinstance(obj.get("output"), list)
            or (isinstance(t, str) and t.startswith("response.")))


@dataclass(frozen=True)
class _Channel:
    """One place a reasoning item carries its text, and the events that stream it there."""

    key: str           # the item's list of parts
    part_type: str
    part_event: str    # <part_event>.added / .done
    text_event: str    # <text_event>.delta / .done
    index: str         # the events' index key


SUMMARY_CHANNEL = _Channel("summary", "summary_text", "response.reasoning_summary_part",
                           "response.reasoning_summary_text", "summary_index")
CONTENT_CHANNEL = _Channel("content", "reasoning_text", "response.content_part", "response.reasoning_text",
                           "content_index")


@dataclass(frozen=True)
class _Mode:
    summary: bool      # reasoning items carry their text as a summary_text part
    content: bool      # ... and as a reasoning_text content part
    encrypted: bool    # ... and the sealed mark as encrypted_content

    @property
    def channels(self) -> tuple[_Channel, ...]:
        """The channels in use, in the order their events go out (summary first)."""
        return tuple(c for c, on in ((SUMMARY_CHANNEL, self.summary), (CONTENT_CHANNEL, self.content)) if on)


def _mode(ctx: FlowContext) -> _Mode:
    req = ctx.request if isinstance(ctx.request, dict) else {}
    reasoning = req.get("reasoning")
    asked = isinstance(reasoning, dict) and reasoning.get("summary") in _SUMMARY_ASKED
    summary = asked or ctx.settings.responses_summary
    include = req.get("include")
    encrypted = (ctx.sealer is not None and isinstance(include, list) and _ENCRYPTED in include)
    # Content may be left out only when the summary carries the text: nothing is lost.
    return _Mode(summary, ctx.settings.responses_content or not summary, encrypted)


def _ev(type_: str, **fields) -> dict:
    return {"type": type_, "sequence_number": 0, **fields}


def _empty_part(part: dict) -> dict:
    """What a `content_part.added` shows of an output_text part: no text, no annotations yet."""
    p = dict(part, text="")
    for k in ("annotations", "logprobs"):
        if k in p:
            p[k] = []
    return p


def _is_text_part(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "output_text"


# -- the state machine both paths share --------------------------------------------------------
class _Owner:
    """What a `_Message` needs from the response around it."""

    def __init__(self, ctx: FlowContext) -> None:
        self.ctx = ctx
        self.mode = _mode(ctx)
        self.resp_id: str | None = None
        self.model: object = None
        self.next_index = 0
        self.unrouted_text = False   # text events for an item never added went out as they came

    def alloc(self) -> int:
        d = self.next_index
        self.next_index += 1
        return d

    def emit(self, ev: dict, src: tuple | None = None) -> None:  # the body path discards events
        pass


class _UPart:
    """An upstream output_text part being read."""
    __slots__ = ("c", "template", "added", "splitter", "fed", "made", "reasoned")

    def __init__(self, c: object, template: dict, added: tuple, splitter: Splitter | None) -> None:
        self.c = c
        self.template = template      # the part as `content_part.added` showed it
        self.added = added            # (obj, src) of that event, for reuse
        self.splitter = splitter      # None once finished (and on the body path)
        self.fed = False
        self.made = 0                 # downstream parts made from it so far
        self.reasoned = False         # some of its text became reasoning


class _Text:
    """Text that arrives in pieces, held about once: pieces are joined in groups of 64 (and
    groups of groups ...), so a long stream of small deltas costs about its characters, not a
    string object per delta. Each character is copied a few times (log64 of the count)."""
    __slots__ = ("tail", "levels")

    def __init__(self) -> None:
        self.tail: list[str] = []
        self.levels: list[list[str]] = []   # levels[k]: joined groups of 64**(k+1) pieces; older first

    def add(self, s: str) -> None:
        tail = self.tail
        tail.append(s)
        if len(tail) >= 64:
            self._carry()

    def _carry(self) -> None:
        s = "".join(self.tail)
        self.tail = []
        for lvl in self.levels:
            lvl.append(s)
            if len(lvl) < 64:
                return
            s = "".join(lvl)
            lvl.clear()
        self.levels.append([s])

    def value(self) -> str:
        parts = [x for lvl in reversed(self.levels) for x in lvl]
        parts += self.tail
        text = "".join(parts)
        self.tail = [text]
        self.levels = []
        return text


class _DPart:
    """A downstream output_text part being written."""
    __slots__ = ("dc", "text", "text_done", "upart", "first", "tpl")

    def __init__(self, dc: int, upart: _UPart) -> None:
        self.dc = dc
        self.text = _Text()
        self.tpl: tuple | None = None  # (shape, framed cuts, unchanged, (event lines, eol)) for the fast path
        self.text_done = False
        self.upart = upart
        self.first = upart.made == 0


class _Seg:
    """A downstream message item being written."""
    __slots__ = ("d", "id", "content", "cmap", "next_c", "dpart")

    def __init__(self, d: int, id_: str | None) -> None:
        self.d = d
        self.id = id_
        self.content: list = []
        self.cmap: dict = {}          # upstream content_index -> ours
        self.next_c = 0
        self.dpart: _DPart | None = None


class _Reason:
    """A reasoning item being written."""
    __slots__ = ("d", "id", "text", "tpl")

    def __init__(self, d: int, id_: str) -> None:
        self.d = d
        self.id = id_
        self.text = _Text()
        self.tpl: tuple | None = None  # ((event lines, eol), the delta events cut), for the fast path


class _Message:
    """One upstream message item, becoming reasoning and message items in order."""

    def __init__(self, owner: _Owner, u: int, item: dict, added: tuple) -> None:
        self.o = owner
        self.u = u
        self.item = item                      # the item as output_item.added showed it
        mid = item.get("id")
        self.mid = mid if isinstance(mid, str) and mid else None
        self.added = added                    # (obj, src) of output_item.added
        self.pending: list | None = [added]   # events held while nothing is open yet
        self.opened = False
        self.saw_part = False
        self.pos = 0                          # items made so far (for ids)
        self.segs = 0                         # message items made so far
        self.cur: _Seg | _Reason | None = None
        self.part: _UPart | None = None
        self.built: list[dict] = []           # the items made, as done

    # -- ids -----------------------------------------------------------------------------------
    def _base(self) -> str:
        if self.mid:
            return self.mid[4:] if self.mid.startswith("msg_") else self.mid
        return f"{self.o.resp_id or 'resp'}_{self.u}"

    def _opened(self) -> None:
        self.opened = True
        self.pending = None

    # -- upstream input ------------------------------------------------------------------------
    def part_added(self, obj: dict, src: tuple | None, whole: bool = False) -> None:
        self.saw_part = True
        part = obj.get("part")
        if _is_text_part(part):
            if self.part is not None:
                self._end_part()
            splitter = None if whole else self.o.splitter()  # type: ignore[attr-defined]
            self.part = _UPart(obj.get("content_index"), part, (obj, src), splitter)
            if self.pending is not None:
                self.pending.append((obj, src))
            return
        seg = self._ensure_seg()
        dc = seg.next_c
        seg.next_c += 1
        seg.cmap[obj.get("content_index")] = dc
        self._emit_on(seg, obj, src, content_index=dc)

    def delta(self, obj: dict, src: tuple | None) -> None:
        text = obj.get("delta")
        p = self.part
        if not isinstance(text, str) or p is None or p.splitter is None:
            self.other(obj, src)
            return
        if text:
            p.fed = True
            self.pieces(p.splitter.feed(text), obj, src)

    def text_done(self, obj: dict | None, src: tuple | None) -> None:
        p = self.part
        if p is None:
            self.other(obj, src)
            return
        text = obj.get("text") if obj is not None else None
        if p.splitter is not None:
            sp, p.splitter = p.splitter, None
            pieces = sp.feed(text) if not p.fed and isinstance(text, str) and text else []
            self.pieces(pieces + sp.finish(), None, None)
        if not p.made and not p.reasoned and (p.fed or (isinstance(text, str) and text)):
            # Its text was markup only (`<think></think>`): the part stays, empty.
            self._open_dpart(self._ensure_seg())
        seg = self.cur
        if isinstance(seg, _Seg) and seg.dpart is not None and seg.dpart.upart is p:
            if obj is not None and not seg.dpart.text_done:
                self._text_done_event(seg, obj, src)
        elif self.pending is not None and obj is not None:
            self.pending.append((obj, src))

    def part_done(self, obj: dict, src: tuple | None) -> None:
        part = obj.get("part")
        if self.part is None or not _is_text_part(part):
            seg = self._ensure_seg()
            if isinstance(part, dict):
                seg.content.append(part)
            self._emit_on(seg, obj, src, content_index=seg.cmap.get(obj.get("content_index"),
                                                                    obj.get("content_index")))
            return
        self._end_part(obj, src)

    def _end_part(self, obj: dict | None = None, src: tuple | None = None) -> None:
        p = self.part
        assert p is not None
        if p.splitter is not None:      # the upstream skipped output_text.done
            self.text_done(None, None)
        seg = self.cur
        if isinstance(seg, _Seg) and seg.dpart is not None and seg.dpart.upart is p:
            self._close_dpart(seg, obj, src)
        elif self.pending is not None and obj is not None:
            self.pending.append((obj, src))
        self.part = None

    def item_done(self, obj: dict, src: tuple | None) -> bool:
        """Close everything; the items made are in `built`. True when they differ from the item."""
        item = obj.get("item")
        item = item if isinstance(item, dict) else dict(self.item, status="completed")
        if (not self.saw_part and not self.opened and isinstance(item.get("content"), list)
                and not self.o.unrouted_text):
            # No part events at all (the item came whole): split what the done item holds.
            _drive_parts(self, item, lambda text: _split_pieces(self.o, text))
        if self.part is not None:
            self._end_part()
        if not self.opened:
            d = self.o.alloc()
            for pobj, psrc in self.pending or ():
                self.o.emit(dict(pobj, output_index=d), psrc)
            self.o.emit(dict(obj, output_index=d), src)
            self._opened()
            self.built = [item]
            return False
        # A reasoning block cannot be open here: a part's end closes it (the splitter's END).
        if isinstance(self.cur, _Seg):
            self._close_seg(item, obj, src)
        return self.built != [item]

    def other(self, obj: dict, src: tuple | None) -> None:
        """Any other event of this item (annotations, refusals): on the current message piece."""
        seg = self._ensure_seg()
        c = obj.get("content_index")
        if seg.dpart is None and self.part is not None and c == self.part.c and c is not None:
            self._open_dpart(seg)   # e.g. an annotation for the part being read
        fields = {"content_index": seg.cmap[c]} if c in seg.cmap else {}
        self._emit_on(seg, obj, src, **fields)

    def flush(self) -> None:
        """The stream ended early: send what is held (text the splitter kept, held events)."""
        p = self.part
        if p is not None and p.splitter is not None:
            sp, p.splitter = p.splitter, None
            self.pieces(sp.finish(), None, None)
        if not self.opened:
            d = self.o.alloc()
            for pobj, psrc in self.pending or ():
                self.o.emit(dict(pobj, output_index=d), psrc)
            self._opened()

    # -- pieces of text ------------------------------------------------------------------------
    def pieces(self, pieces: list, obj: dict | None, src: tuple | None) -> None:
        for kind, value in pieces:
            if kind == REASONING:
                self.part.reasoned = True   # type: ignore[union-attr]  (pieces come from the part being read)
                if not isinstance(self.cur, _Reason):
                    self._open_reason()
                self._reason_delta(value)
            elif kind == CONTENT:
                self._content(value, obj, src)
            elif kind == END and isinstance(self.cur, _Reason):
                self._close_reason(value)

    # -- message pieces ------------------------------------------------------------------------
    def _emit_on(self, seg: _Seg, obj: dict, src: tuple | None, **fields) -> None:
        ev = dict(obj, output_index=seg.d, **fields)
        if seg.id is not None and "item_id" in ev:
            ev["item_id"] = seg.id
        self.o.emit(ev, src)

    def _reuse_or_make(self, seg: _Seg, obj: dict | None, src: tuple | None, type_: str,
                       made_only: dict, **fields) -> None:
        """An event on the message piece `seg`: the upstream's own (`obj`), moved onto `seg` with
        `fields` set, when there is one; else one made from scratch, with the fields only a made
        event needs (`made_only`). Item events carry no item_id."""
        if obj is not None:
            self._emit_on(seg, obj, src, **fields)
            return
        ids = {} if type_.startswith("response.output_item.") else {"item_id": seg.id}
        self.o.emit(_ev(type_, **ids, output_index=seg.d, **fields, **made_only))

    def _ensure_seg(self) -> _Seg:
        if isinstance(self.cur, _Seg):
            return self.cur
        if isinstance(self.cur, _Reason):
            self._close_reason(None)
        self._opened()
        d = self.o.alloc()
        p = self.pos
        self.pos += 1
        if self.segs == 0:
            sid = self.mid
        else:
            sid = f"{self.mid}_{p}" if self.mid else f"msg_{self._base()}_{p}"
        self.segs += 1
        item = dict(self.item)
        if sid is not None:
            item["id"] = sid
        seg = self.cur = _Seg(d, sid)
        aobj, asrc = self.added
        self.o.emit(dict(aobj, output_index=d, item=item), asrc)
        return seg

    def _content(self, text: str, obj: dict | None, src: tuple | None) -> None:
        seg = self._ensure_seg()
        dp = seg.dpart or self._open_dpart(seg)
        dp.text.add(text)
        self._reuse_or_make(seg, obj, src, "response.output_text.delta", {"logprobs": []},
                            content_index=dp.dc, delta=text)

    def _open_dpart(self, seg: _Seg) -> _DPart:
        up = self.part
        assert up is not None
        dp = seg.dpart = _DPart(seg.next_c, up)
        seg.next_c += 1
        seg.cmap[up.c] = dp.dc
        up.made += 1
        aobj, asrc = up.added
        self._emit_on(seg, aobj, asrc if dp.first else None, content_index=dp.dc, part=dict(up.template))
        return dp

    def _text_done_event(self, seg: _Seg, obj: dict | None, src: tuple | None) -> None:
        dp = seg.dpart
        assert dp is not None
        text = dp.text.value()
        dp.text_done = True
        self._reuse_or_make(seg, obj, src, "response.output_text.done", {"logprobs": []},
                            content_index=dp.dc, text=text)

    def _close_dpart(self, seg: _Seg, obj: dict | None = None, src: tuple | None = None) -> None:
        dp = seg.dpart
        assert dp is not None
        if not dp.text_done:
            self._text_done_event(seg, None, None)
        # The piece the upstream's content_part.done closes keeps that part's other fields
        # (annotations, logprobs); a piece closed earlier, by a reasoning block, has them empty.
        base = obj.get("part") if obj is not None else None
        part = dict(base if _is_text_part(base) else dp.upart.template, text=dp.text.value())
        self._reuse_or_make(seg, obj, src, "response.content_part.done", {}, content_index=dp.dc, part=part)
        seg.content.append(part)
        seg.dpart = None

    def _close_seg(self, done_item: dict | None = None, obj: dict | None = None,
                   src: tuple | None = None) -> None:
        seg = self.cur
        assert isinstance(seg, _Seg)
        if seg.dpart is not None:
            self._close_dpart(seg)
        item = dict(done_item) if done_item is not None else dict(self.item, status="completed")
        if seg.id is not None:
            item["id"] = seg.id
        item["content"] = seg.content
        self._reuse_or_make(seg, obj, src, "response.output_item.done", {}, item=item)
        self.built.append(item)
        self.cur = None

    # -- reasoning items -----------------------------------------------------------------------
    def _open_reason(self) -> None:
        if isinstance(self.cur, _Seg):
            self._close_seg()
        self._opened()
        mode = self.o.mode
        r = self.cur = _Reason(self.o.alloc(), f"rs_{self._base()}_{self.pos}")
        self.pos += 1
        item: dict = {"id": r.id, "type": "reasoning", "summary": []}
        for ch in mode.channels:
            item[ch.key] = []
        emit = self.o.emit
        emit(_ev("response.output_item.added", output_index=r.d, item=item))
        for ch in mode.channels:
            emit(_ev(f"{ch.part_event}.added", item_id=r.id, output_index=r.d, **{ch.index: 0},
                     part={"type": ch.part_type, "text": ""}))

    def _reason_delta(self, text: str) -> None:
        r = self.cur
        assert isinstance(r, _Reason)
        r.text.add(text)
        for ch in self.o.mode.channels:
            self.o.emit(_ev(f"{ch.text_event}.delta", item_id=r.id, output_index=r.d, **{ch.index: 0},
                            delta=text))

    def _close_reason(self, pair: TagPair | None) -> None:
        r = self.cur
        assert isinstance(r, _Reason)
        text = r.text.value()
        mode = self.o.mode
        emit = self.o.emit
        item: dict = {"id": r.id, "type": "reasoning", "summary": []}
        for ch in mode.channels:
            part = {"type": ch.part_type, "text": text}
            emit(_ev(f"{ch.text_event}.done", item_id=r.id, output_index=r.d, **{ch.index: 0}, text=text))
            emit(_ev(f"{ch.part_event}.done", item_id=r.id, output_index=r.d, **{ch.index: 0}, part=part))
            item[ch.key] = [part]
        if mode.encrypted:
            ctx = self.o.ctx
            item["encrypted_content"] = ctx.sealer.seal(text, pair or ctx.rules().pairs[0])
        item["status"] = "completed"
        emit(_ev("response.output_item.done", output_index=r.d, item=item))
        self.built.append(item)
        self.cur = None


def _split_pieces(owner: _Owner, text: str) -> list:
    return owner.ctx.split(text, owner.model).pieces


def _drive_parts(m: _Message, item: dict, split) -> None:
    """Feed a whole message item's parts through `m`, as a stream of them would."""
    u = m.u
    for c, part in enumerate(item.get("content") or ()):
        if _is_text_part(part) and isinstance(part.get("text"), str):
            m.part_added(_ev("response.content_part.added", output_index=u, content_index=c,
                             part=_empty_part(part)), None, whole=True)
            m.pieces(split(part["text"]), None, None)
            m.text_done(_ev("response.output_text.done", output_index=u, content_index=c,
                            text=part["text"]), None)
            m.part_done(_ev("response.content_part.done", output_index=u, content_index=c,
                            part=part), None)
        else:
            m.part_added(_ev("response.content_part.added", output_index=u, content_index=c,
                             part=part), None)
            m.part_done(_ev("response.content_part.done", output_index=u, content_index=c,
                            part=part), None)


# -- whole bodies -------------------------------------------------------------------------------
def rewrite_body(data: bytes, ctx: FlowContext) -> bytes | None:
    """The rewritten body, or None when nothing changes. Raises ValueError on non-JSON."""
    obj = json.loads(data)
    if not isinstance(obj, dict) or not isinstance(obj.get("output"), list):
        return None
    output = obj["output"]
    if any(isinstance(it, dict) and it.get("type") == "reasoning" for it in output):
        ctx.stats.native = True
        return None
    owner = _Owner(ctx)
    owner.resp_id = obj.get("id") if isinstance(obj.get("id"), str) else None
    owner.model = obj.get("model")
    new: list = []
    changed = False
    for u, item in enumerate(output):
        if isinstance(item, dict) and item.get("type") == "message" and isinstance(item.get("content"), list):
            added = dict(item, content=[])
            m = _Message(owner, u, added, (_ev("response.output_item.added", output_index=u, item=added), None))
            _drive_parts(m, item, lambda text: _split_pieces(owner, text))
            if m.item_done(_ev("response.output_item.done", output_index=u, item=item), None):
                new.extend(m.built)
                changed = True
                continue
        new.append(item)
    return dumps(dict(obj, output=new)).encode() if changed else None


# -- streams --------------------------------------------------------------------------------------
# The hot event, `response.output_text.delta`, is handled without a JSON parse when it is shaped
# like the last one parsed in full: servers send the same bytes around every token delta but for
# a few values that change each time (the slots: `sequence_number`, `delta`, and `obfuscation`,
# OpenAI's random padding). A shape is the text between the slots; an event that has that text
# around values of the slots' kinds is the learned event with other values (checked when learned,
# by parsing a probe). Events go out from templates: compact JSON cut at the slots.
_SEQ, _TEXT, _STR = 0, 1, 2
_SLOTS = {"sequence_number": _SEQ, "delta": _TEXT, "obfuscation": _STR}
_SLOT_KEY = re.compile(r'"(sequence_number|delta|obfuscation)"\s*:\s*')  # keys only (a quote in a string is escaped)
_INT = re.compile(r"0|[1-9][0-9]*")


class _Shape:
    __slots__ = ("event", "consts", "kinds", "keys", "obj", "u", "seq_i", "text_i", "str_i", "segs", "tail")

    def __init__(self, event: str | None, consts: list[str], keys: list[str], obj: dict) -> None:
        self.event = event
        self.consts = consts          # len(keys) + 1 strings around the slots
        self.keys = keys              # the slots' keys, in the order they come
        self.kinds = [_SLOTS[k] for k in keys]
        self.obj = obj                # the event it was learned from
        self.u = obj["output_index"]
        self.seq_i = keys.index("sequence_number")
        self.text_i = keys.index("delta")
        self.str_i = [i for i, k in enumerate(self.kinds) if k == _STR]
        # One pattern per run of text and numbers up to a string slot's opening quote (the
        # string is read by scanstring) and one for the rest, to the end. Once per shape.
        # (The one number slot is the run's group.)
        segs: list = []
        rx, number = re.escape(consts[0]), False
        for kind, c in zip(self.kinds, consts[1:]):
            if kind == _SEQ:
                rx += "(0|[1-9][0-9]*)" + re.escape(c)
                number = True
            else:
                segs.append((re.compile(rx + '"').match, number, kind == _TEXT))
                rx, number = re.escape(c), False
        self.segs = segs
        self.tail = re.compile(rx).fullmatch, number

    def match(self, data: str) -> list | None:
        """The slots' values (int, decoded text, the raw literal) when `data` has this shape."""
        vals: list = []
        pos = 0
        for rx, number, decoded in self.segs:
            m = rx(data, pos)
            if m is None:
                return None
            if number:
                vals.append(int(m.group(1)))
            start = m.end()
            try:
                v, pos = scanstring(data, start)
            except ValueError:
                return None
            vals.append(v if decoded else data[start - 1:pos])
        rx, number = self.tail
        m = rx(data, pos)
        if m is None:
            return None
        if number:
            vals.append(int(m.group(1)))
        return vals

    def event_obj(self, vals: list) -> dict:
        """The event `match` read, as json.loads would give it."""
        obj = dict(self.obj)
        for key, kind, v in zip(self.keys, self.kinds, vals):
            obj[key] = json.loads(v) if kind == _STR else v
        return obj


def _learn(ev: Event, obj: dict) -> _Shape | None:
    """The shape of a fully parsed output_text.delta event, or None when it has none we use."""
    data = ev.data
    assert data is not None
    seq, text, u = obj.get("sequence_number"), obj.get("delta"), obj.get("output_index")
    if (type(seq) is not int or seq < 0 or not isinstance(text, str) or type(u) is not int
            or any(v for v in obj.values() if isinstance(v, (dict, list)))):
        return None   # only flat events (`logprobs: []`): every key the pattern finds is top level
    spans: list = []
    for m in _SLOT_KEY.finditer(data):
        key, pos = m.group(1), m.end()
        v = obj.get(key)
        if _SLOTS[key] == _SEQ:
            n = _INT.match(data, pos)
            if n is None or int(n.group()) != v:
                return None
            spans.append((pos, n.end(), key))
        elif isinstance(v, str) and data[pos:pos + 1] == '"':
            got, end = scanstring(data, pos + 1)
            if got != v:
                return None
            spans.append((pos, end, key))
        else:
            return None
    keys = [k for _, _, k in spans]
    if keys != [k for k in obj if k in _SLOTS] or "sequence_number" not in keys or "delta" not in keys:
        return None   # each slot exactly once, in the order the parsed event has its keys
    consts = [data[:spans[0][0]]]
    consts += [data[a[1]:b[0]] for a, b in zip(spans, spans[1:])]
    consts.append(data[spans[-1][1]:])
    shape = _Shape(ev.event, consts, keys, obj)
    # The probe: other values in the slots must read back as exactly those values.
    probe_vals = [seq + 1 if k == _SEQ else text + "\x01" if k == _TEXT else encode_basestring(obj[key] + "\x01")
                  for k, key in zip(shape.kinds, keys)]
    parts = [consts[0]]
    for k, v, c in zip(shape.kinds, probe_vals, consts[1:]):
        parts.append(str(v) if k == _SEQ else encode_basestring(v) if k == _TEXT else v)
        parts.append(c)
    probe = "".join(parts)
    if shape.match(probe) != probe_vals or json.loads(probe) != shape.event_obj(probe_vals):
        return None
    return shape


def _template(ev: dict) -> tuple[str, ...]:
    """dumps(ev) cut where the values of its slot keys go (in its key order)."""
    out: list[str] = []
    cur = "{"
    for n, (k, v) in enumerate(ev.items()):
        cur += ("," if n else "") + encode_basestring(k) + ":"
        if k in _SLOTS:
            out.append(cur)
            cur = ""
        else:
            cur += dumps(v)
    out.append(cur + "}")
    return tuple(out)


class StreamRewriter(_Owner):
    """One Responses stream. `on_event` per SSE event; `finish` at the end; `abort` on failure."""

    def __init__(self, ctx: FlowContext, fast: bool = True) -> None:
        super().__init__(ctx)
        self.fast = fast               # False: no shortcut, every event parsed in full
        self.passthrough = False
        self.map: dict = {}            # upstream output_index -> ours, for items passed through
        self.active: dict = {}         # upstream output_index -> _Message still open
        self.records: dict = {}        # message key -> the items it became (changed ones only)
        self.offset = 0                # our sequence_number minus the upstream's
        self.last: int | None = None   # the last sequence_number sent
        self.dirty = False             # something went out other than it came in
        self.event_lines = False
        self.eol = b"\n"
        self._batch: list = []
        self._shape: _Shape | None = None  # of the last output_text.delta parsed in full
        self._bytes: ByteShape | None = None  # the same, as bytes, for on_chunk
        self._hits = self._misses = 0      # deltas the shape read / learned shapes that failed

    # -- the Owner side ------------------------------------------------------------------------
    def emit(self, ev: dict, src: tuple | None = None) -> None:
        self._batch.append((ev, src))

    def splitter(self) -> Splitter:
        return self.ctx.splitter(self.model)

    # -- events --------------------------------------------------------------------------------
    def on_chunk(self, chunk: bytes) -> list[bytes] | None:
        """The byte fast path (see thinkwire.fastpath): an output_text.delta shaped like the last,
        its text plain."""
        b = self._bytes
        if b is None or self.passthrough:
            return None
        m = b.match(chunk)
        if m is None:
            return None
        shape = self._shape
        assert shape is not None
        vals = [g.decode("ascii") for g in m.groups()]
        vals[shape.seq_i] = int(vals[shape.seq_i])
        out = self._fast(Event(chunk, shape.event, None), shape, vals, plain=True)
        self._hits += out is not None
        return out

    def on_event(self, ev: Event) -> list[bytes]:
        if self.passthrough or ev.data is None:
            return [ev.raw]
        learn = True
        shape = self._shape
        if shape is not None and self.fast and ev.event == shape.event:
            vals = shape.match(ev.data)
            if vals is None:
                self._misses += 1
            else:
                self._hits += 1
                out = self._fast(ev, shape, vals)
                if out is not None:
                    return out
                learn = False
        if len(ev.data) < 16 and ev.data.strip() == "[DONE]":
            return self._flush() + [ev.raw]
        try:
            obj = json.loads(ev.data)
        except ValueError:
            self.ctx.stats.malformed_events += 1
            return [ev.raw]
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            return [ev.raw]
        self.event_lines = ev.event is not None
        self.eol = ev.eol
        if learn and obj["type"] == "response.output_text.delta":
            # A server whose deltas differ in more than the slots is not learned from for long.
            self._shape = _learn(ev, obj) if self._misses < 16 or self._misses * 4 < self._hits else None
            self._bytes = self._learn_bytes(ev, self._shape) if self._shape is not None and self.fast else None
        self._batch = []
        self._dispatch(obj, (ev, obj))
        return self._send(obj.get("sequence_number"))

    def _learn_bytes(self, ev: Event, shape: _Shape) -> ByteShape | None:
        head = canonical_head(ev.raw, ev.data, ev.event, ev.eol)  # type: ignore[arg-type]
        if head is None:
            return None
        text = text_slot(self.ctx.rules(self.model))   # the rules the parts' splitters have
        consts = [c.encode("utf-8", "surrogateescape") for c in shape.consts]
        consts[0], consts[-1] = head + consts[0], consts[-1] + b"\n\n"
        return ByteShape(consts, [NUMBER_SLOT if k == _SEQ else text if k == _TEXT else ASCII_SLOT
                                  for k in shape.kinds])

    def _fast(self, ev: Event, shape: _Shape, vals: list, plain: bool = False) -> list[bytes] | None:
        """An output_text.delta shaped like the last one: `_dispatch` without the JSON parse.
        Its text is fed to the splitter once; one answer or reasoning piece goes out from a
        template (or as the original bytes, when nothing changes), anything else takes the
        full path with the pieces. None (before anything is fed): take the full path."""
        m = self.active.get(shape.u)
        p = m.part if m is not None else None
        last = self.last
        if p is None or p.splitter is None or last is None:
            return None
        seq, text = vals[shape.seq_i], vals[shape.text_i]
        if plain:   # a plain text (the byte path): the splitter's plain step, or the full path
            piece = p.splitter.plain(text)
            if piece is None:
                return None
            pieces = [piece]
        else:
            pieces = p.splitter.feed(text) if text else []
        self.event_lines = ev.event is not None
        self.eol = ev.eol
        p.fed = p.fed or bool(text)
        cur = m.cur   # type: ignore[union-attr]
        if len(pieces) == 1:
            kind, value = pieces[0]
            if kind == CONTENT and type(cur) is _Seg and cur.dpart is not None and cur.dpart.upart is p:
                dp = cur.dpart
                dp.text.add(value)
                n = self._number(seq, last, True)
                tpl = dp.tpl
                if tpl is None or tpl[0] is not shape or tpl[3] != (self.event_lines, self.eol):
                    tpl = dp.tpl = self._delta_template(shape, cur, dp)
                if tpl[2] and n == seq and value == text:
                    return [ev.raw]    # as it came: the original bytes
                out = list(vals)
                out[shape.seq_i] = str(n)
                out[shape.text_i] = encode_basestring(value)
                for i in shape.str_i:   # a raw literal is its own dumps unless it has escapes
                    if "\\" in out[i]:
                        out[i] = encode_basestring(json.loads(out[i]))
                self.dirty = True
                cuts = tpl[1]
                parts = [cuts[0]]
                for v, c in zip(out, cuts[1:]):
                    parts.append(v.encode("utf-8", "surrogateescape"))
                    parts.append(c)
                return [b"".join(parts)]
            if kind == REASONING and type(cur) is _Reason:
                cur.text.add(value)
                tpl = cur.tpl
                if tpl is None or tpl[0] != (self.event_lines, self.eol):
                    tpl = cur.tpl = ((self.event_lines, self.eol), self._reason_templates(cur))
                lit = encode_basestring(value).encode("utf-8", "surrogateescape")
                frames = []
                for head, mid, tail in tpl[1]:
                    n = self._number(seq, last, False)
                    last = n
                    frames.append(b"%s%d%s%s%s" % (head, n, mid, lit, tail))
                self.dirty = True
                return frames
        obj = shape.event_obj(vals)
        self._batch = []
        m.pieces(pieces, obj, (ev, obj))   # type: ignore[union-attr]
        return self._send(seq)

    def _number(self, seq: int, last: int, own: bool) -> int:
        """The number `_send` gives one event: its own (own=True) or the next free one."""
        n = seq + self.offset if own and seq + self.offset > last else last + 1
        self.last = n
        if n - seq > self.offset:
            self.offset = n - seq
        return n

    def _delta_template(self, shape: _Shape, seg: _Seg, dp: _DPart) -> tuple:
        ev = dict(shape.obj, output_index=seg.d, content_index=dp.dc)
        if seg.id is not None and "item_id" in ev:
            ev["item_id"] = seg.id
        # What _frame gives for _template(ev) filled with values, cut where the values go.
        cuts = [x.encode("utf-8", "surrogateescape") for x in _template(ev)]
        head, tail = self._frame("response.output_text.delta", "\0").split(b"\0")
        cuts[0], cuts[-1] = head + cuts[0], cuts[-1] + tail
        return shape, cuts, ev == shape.obj, (self.event_lines, self.eol)

    def _reason_templates(self, r: _Reason) -> tuple:
        """The events `_reason_delta` sends for a piece of text, as framed bytes cut where the
        sequence number and the text literal go."""
        evs = [_ev(f"{ch.text_event}.delta", item_id=r.id, output_index=r.d, **{ch.index: 0}, delta="")
               for ch in self.mode.channels]
        cuts = []
        for e in evs:
            pre, mid, post = (x.encode("utf-8", "surrogateescape") for x in _template(e))
            head, tail = self._frame(e["type"], "\0").split(b"\0")
            cuts.append((head + pre, mid, post + tail))
        return tuple(cuts)

    def _frame(self, type_: str, data: str) -> bytes:
        """sse.encode for compact JSON (it has no line breaks)."""
        e = "\n" if self.eol == b"\n" else self.eol.decode()
        head = f"event: {type_}{e}data: " if self.event_lines else "data: "
        return f"{head}{data}{e}{e}".encode("utf-8", "surrogateescape")

    def _dispatch(self, obj: dict, src: tuple) -> None:
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
            del self.active[m.u]
            self._record(m, m.item_done(obj, src))
        else:
            m.other(obj, src)

    def _by_item_id(self, item_id: object) -> _Message | None:
        if isinstance(item_id, str):
            for m in self.active.values():
                if m.mid == item_id:
                    return m
        return None

    def _added(self, u: int, obj: dict, src: tuple) -> None:
        item = obj["item"]
        kind = item.get("type")
        if kind == "reasoning":
            self.ctx.stats.native = True
            if not self.dirty and not self.active:
                self.passthrough = True   # nothing changed so far: the rest goes as it comes
        if kind == "message" and u not in self.active:
            self.active[u] = _Message(self, u, item, (obj, src))
            return
        d = self.map[u] = self.alloc()
        self.emit(dict(obj, output_index=d), src)

    def _record(self, m: _Message, changed: bool) -> None:
        if changed:
            self.records[("id", m.mid) if m.mid else ("pos", m.u)] = m.built

    def _final(self, obj: dict, src: tuple) -> None:
        resp = obj.get("response")
        output = resp.get("output") if isinstance(resp, dict) else None
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
        if not isinstance(output, list) or not self.records:
            self.emit(dict(obj), src)
            return
        new: list = []
        for i, it in enumerate(output):
            if isinstance(it, dict) and it.get("type") == "message":
                key = ("id", it["id"]) if isinstance(it.get("id"), str) and it["id"] else ("pos", i)
                built = self.records.get(key)
                if built is not None:
                    new.extend(built)
                    continue
            new.append(it)
        self.emit(dict(obj, response=dict(resp, output=new)), src)

    # -- out -----------------------------------------------------------------------------------
    def _send(self, seq: object) -> list[bytes]:
        """Number and encode the batch. Events keep their upstream number (plus the offset
        insertions caused) where they can; inserted ones take the next free number."""
        batch, self._batch = self._batch, []
        prev = self.last
        offset = self.offset
        out: list[bytes] = []
        for ev, src in batch:
            if "sequence_number" in ev:
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
            if src is not None and ev == src[1]:
                out.append(src[0].raw)
                continue
            self.dirty = True
            out.append(self._frame(ev["type"], dumps(ev)))
        if isinstance(seq, int) and prev is not None:
            self.offset = max(self.offset, prev - seq)
        self.last = prev
        return out

    def _flush(self) -> list[bytes]:
        self._batch = []
        for m in self.active.values():
            m.flush()
        return self._send(None)

    def finish(self) -> list[bytes]:
        if self.passthrough:
            return []
        return self._flush()

    def abort(self) -> list[bytes]:
        if self.passthrough:
            return []
        self.passthrough = True
        return self._flush()
