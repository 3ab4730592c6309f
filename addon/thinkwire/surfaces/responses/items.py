"""OpenAI Responses: the items a message becomes, and the state machine that builds them
(`_Message`), shared by the body path and the stream path, so the two agree by construction."""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Callable, Protocol, TypeGuard

from ...context import LENGTH, OTHER, STOP, FlowContext
from ...events import Event
from ...rules import TagPair
from ...splitter import CONTENT, END, REASONING, Piece, Splitter
from .held import HeldText

Obj = dict[str, Any]       # a JSON object: an event, an item, a part
Src = tuple[Event, Obj]    # an upstream event and its parse, for reuse as it came

_SUMMARY_ASKED = frozenset({"auto", "concise", "detailed"})


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
    # Where reasoning items carry their text (summary_text and/or reasoning_text parts), in the
    # order their events go out: summary first.
    channels: tuple[_Channel, ...]
    encrypted: bool    # ... and the sealed mark as encrypted_content


def _mode(ctx: FlowContext) -> _Mode:
    f = ctx.facts
    asked = f is not None and f.summary in _SUMMARY_ASKED
    summary = asked or ctx.settings.responses_summary
    encrypted = ctx.sealer is not None and f is not None and f.include_encrypted
    # Content may be left out only when the summary carries the text: nothing is lost.
    content = ctx.settings.responses_content or not summary
    channels = tuple(c for c, on in ((SUMMARY_CHANNEL, summary), (CONTENT_CHANNEL, content)) if on)
    return _Mode(channels, encrypted)


def _ev(type_: str, **fields: Any) -> Obj:
    return {"type": type_, "sequence_number": 0, **fields}


def _empty_part(part: Obj) -> Obj:
    """What a `content_part.added` shows of an output_text part: no text, no annotations yet."""
    p = dict(part, text="")
    for k in ("annotations", "logprobs"):
        if k in p:
            p[k] = []
    return p


def _is_text_part(part: object) -> TypeGuard[Obj]:
    return isinstance(part, dict) and part.get("type") == "output_text"


# -- the state machine both paths share --------------------------------------------------------
class Owner(Protocol):
    """What a `_Message` needs from the response around it: the body path's `_ResponseState`, or
    the stream's `StreamRewriter` (which also sends the events a message emits)."""

    ctx: FlowContext
    mode: _Mode
    resp_id: str | None
    model: object
    unrouted_text: bool
    literals: bool         # its texts keep their JSON literals (`HeldText`)
    ending: str | None     # how the response ended, once known (`ended`)
    cut_off: bool          # a text finished now ends at the token limit

    def alloc(self) -> int:
        """The next output_index."""

    def emit(self, ev: Obj, src: Src | None = None) -> None:
        """An event the message produced (`src`: the upstream event and its parse, when reused)."""

    def splitter(self) -> Splitter:
        """A splitter for a part read as a stream."""

    def known(self, text: str, t: HeldText) -> None:
        """`text` is about to go out in events whole: `t` (literals kept) has its literal."""


class _ResponseState:
    """The response-wide state every owner keeps; on the body path, the owner itself (it
    discards the events: the body path keeps only the items built)."""

    literals = False   # its texts keep their JSON literals (`HeldText`): a stream's owner writes events

    def __init__(self, ctx: FlowContext) -> None:
        self.ctx = ctx
        self.mode = _mode(ctx)
        self.resp_id: str | None = None
        self.model: object = None
        self.ending: str | None = None   # how the response ended, once known (`ended`)
        self.cut_off = False   # a text finished now ends at the token limit (its tail of a tag is markup)
        self.next_index = 0
        self.unrouted_text = False   # text events for an item never added went out as they came

    def alloc(self) -> int:
        d = self.next_index
        self.next_index += 1
        return d

    def emit(self, ev: Obj, src: Src | None = None) -> None:  # the body path discards events
        pass

    def known(self, text: str, t: HeldText) -> None:
        """`text` is about to go out in events whole: `t` (literals kept) has its literal."""

    def splitter(self) -> Splitter:
        return self.ctx.splitter(self.model)


HOLD_MAX = 1 << 20   # characters of one upstream text part a stream holds (its done events repeat it)


class HeldTooLong(Exception):
    """A text part longer than HOLD_MAX: the stream fails open there (thinkwire.stream), the
    rest reaching the client as it comes, on the client's numbers."""
    reason = f"a text part longer than {HOLD_MAX >> 20} Mi characters"


class _UpstreamPart:
    """An upstream output_text part being read."""
    __slots__ = ("content_index", "template", "added", "splitter", "fed", "made", "reasoned", "brought", "size")

    def __init__(self, content_index: object, template: Obj, added: tuple[Obj, Src | None],
                 splitter: Splitter | None) -> None:
        self.content_index = content_index   # the upstream's
        self.template = template      # the part as `content_part.added` showed it
        self.added = added            # (obj, src) of that event, for reuse
        self.splitter = splitter      # None once finished (and on the body path)
        self.fed = False
        self.made = 0                 # downstream parts made from it so far
        self.reasoned = False         # some of its text became reasoning
        # The JSON literal (body) of the text its deltas brought (a stream's), as it came: its
        # done events repeat that text whole, and are parsed without reading it again.
        self.brought = HeldText()
        self.size = 0                 # its characters

    def came(self, text: str) -> None:
        """A delta's text, where the caller does not have its literal as it came."""
        self.came_literal(encode_basestring(text)[1:-1])

    def came_literal(self, lit: str) -> None:
        """The body of a delta's literal, as it came. HeldTooLong past HOLD_MAX (raised before
        the text is fed anywhere, or after all of it was: no text is lost or sent twice)."""
        self.brought.add(lit)
        self.size += len(lit)
        if self.size > HOLD_MAX:
            raise HeldTooLong()

    def known(self) -> tuple[str, str]:
        """(the literal, the text) of what its deltas brought, for fastpath.loads_known: the text
        read once from the literal (the done events that carry it are several)."""
        lit = '"' + self.brought.value() + '"'
        return lit, json.loads(lit)


class _OutputPart:
    """A downstream output_text part being written."""
    __slots__ = ("content_index", "text", "text_done", "upart", "first")

    def __init__(self, content_index: int, upart: _UpstreamPart, escaped: bool = False) -> None:
        self.content_index = content_index   # ours
        self.text = HeldText(escaped)
        self.text_done = False
        self.upart = upart
        self.first = upart.made == 0


class _MessagePiece:
    """A downstream message item being written."""
    __slots__ = ("output_index", "id", "content", "content_index_map", "next_c", "dpart")

    def __init__(self, output_index: int, id_: str | None) -> None:
        self.output_index = output_index     # ours
        self.id = id_
        self.content: list[Obj] = []
        self.content_index_map: dict[object, int] = {}   # upstream content_index -> ours
        self.next_c = 0
        self.dpart: _OutputPart | None = None


class _ReasoningItem:
    """A reasoning item being written."""
    __slots__ = ("output_index", "id", "text")

    def __init__(self, output_index: int, id_: str, escaped: bool = False) -> None:
        self.output_index = output_index     # ours
        self.id = id_
        self.text = HeldText(escaped)


class _Message:
    """One upstream message item, becoming reasoning and message items in order."""

    def __init__(self, owner: Owner, upstream_index: int, item: Obj, added: tuple[Obj, Src | None]) -> None:
        self.owner = owner
        self.upstream_index = upstream_index
        self.item = item                      # the item as output_item.added showed it
        mid = item.get("id")
        self.mid = mid if isinstance(mid, str) and mid else None
        self.added = added                    # (obj, src) of output_item.added
        self.pending: list[tuple[Obj, Src | None]] | None = [added]   # events held while nothing is open yet
        self.opened = False
        self.saw_part = False
        self.pos = 0                          # items made so far (for ids)
        self.segs = 0                         # message items made so far
        self.cur: _MessagePiece | _ReasoningItem | None = None
        self.part: _UpstreamPart | None = None
        self.built: list[Obj] = []           # the items made, as done

    # -- ids -----------------------------------------------------------------------------------
    def _base(self) -> str:
        if self.mid:
            return self.mid[4:] if self.mid.startswith("msg_") else self.mid
        return f"{self.owner.resp_id or 'resp'}_{self.upstream_index}"

    def _opened(self) -> None:
        self.opened = True
        self.pending = None

    # -- upstream input ------------------------------------------------------------------------
    def part_added(self, obj: Obj, src: Src | None, whole: bool = False) -> None:
        self.saw_part = True
        part = obj.get("part")
        if _is_text_part(part):
            if self.part is not None:
                self._end_part()
            splitter = None if whole else self.owner.splitter()
            self.part = _UpstreamPart(obj.get("content_index"), part, (obj, src), splitter)
            if self.pending is not None:
                self.pending.append((obj, src))
            return
        seg = self._ensure_seg()
        dc = seg.next_c
        seg.next_c += 1
        seg.content_index_map[obj.get("content_index")] = dc
        self._emit_on(seg, obj, src, content_index=dc)

    def delta(self, obj: Obj, src: Src | None) -> None:
        text = obj.get("delta")
        p = self.part
        if not isinstance(text, str) or p is None or p.splitter is None:
            self.other(obj, src)
            return
        if text:
            p.fed = True
            p.came(text)
            self.pieces(p.splitter.feed(text), obj, src)

    def text_done(self, obj: Obj | None, src: Src | None) -> None:
        p = self.part
        if p is None:
            assert obj is not None   # (None comes only from _end_part, with a part open)
            self.other(obj, src)
            return
        text = obj.get("text") if obj is not None else None
        if p.splitter is not None:
            sp, p.splitter = p.splitter, None
            pieces = sp.feed(text) if not p.fed and isinstance(text, str) and text else []
            self.pieces(pieces + sp.finish(self.owner.cut_off), None, None)
        if not p.made and not p.reasoned and (p.fed or (isinstance(text, str) and text)):
            # Its text was markup only (`<think></think>`): the part stays, empty.
            self._open_dpart(self._ensure_seg())
        seg = self.cur
        if isinstance(seg, _MessagePiece) and seg.dpart is not None and seg.dpart.upart is p:
            if obj is not None and not seg.dpart.text_done:
                self._text_done_event(seg, obj, src)
        elif self.pending is not None and obj is not None:
            self.pending.append((obj, src))

    def part_done(self, obj: Obj, src: Src | None) -> None:
        part = obj.get("part")
        if self.part is None or not _is_text_part(part):
            seg = self._ensure_seg()
            if isinstance(part, dict):
                seg.content.append(part)
            self._emit_on(seg, obj, src, content_index=seg.content_index_map.get(obj.get("content_index"),
                                                                    obj.get("content_index")))
            return
        self._end_part(obj, src)

    def _end_part(self, obj: Obj | None = None, src: Src | None = None) -> None:
        p = self.part
        assert p is not None
        if p.splitter is not None:      # the upstream skipped output_text.done
            self.text_done(None, None)
        seg = self.cur
        if isinstance(seg, _MessagePiece) and seg.dpart is not None and seg.dpart.upart is p:
            self._close_dpart(seg, obj, src)
        elif self.pending is not None and obj is not None:
            self.pending.append((obj, src))
        self.part = None

    def item_done(self, obj: Obj, src: Src | None) -> bool:
        """Close everything; the items made are in `built`. True when they differ from the item."""
        item = obj.get("item")
        item = item if isinstance(item, dict) else dict(self.item, status="completed")
        if (not self.saw_part and not self.opened and isinstance(item.get("content"), list)
                and not self.owner.unrouted_text):
            # No part events at all (the item came whole): split what the done item holds.
            _drive_parts(self, item, lambda text: _split_pieces(self.owner, text))
        if self.part is not None:
            self._end_part()
        if not self.opened:
            d = self.owner.alloc()
            for pobj, psrc in self.pending or ():
                self.owner.emit(dict(pobj, output_index=d), psrc)
            self.owner.emit(dict(obj, output_index=d), src)
            self._opened()
            self.built = [item]
            return False
        # A reasoning block cannot be open here: a part's end closes it (the splitter's END).
        if isinstance(self.cur, _MessagePiece):
            self._close_seg(item, obj, src)
        return self.built != [item]

    def other(self, obj: Obj, src: Src | None) -> None:
        """Any other event of this item (annotations, refusals): on the current message piece."""
        seg = self._ensure_seg()
        c = obj.get("content_index")
        if seg.dpart is None and self.part is not None and c == self.part.content_index and c is not None:
            self._open_dpart(seg)   # e.g. an annotation for the part being read
        fields = {"content_index": seg.content_index_map[c]} if c in seg.content_index_map else {}
        self._emit_on(seg, obj, src, **fields)

    def flush(self) -> None:
        """The stream ended early: send what is held (text the splitter kept, held events)."""
        p = self.part
        if p is not None and p.splitter is not None:
            sp, p.splitter = p.splitter, None
            self.pieces(sp.finish(self.owner.cut_off), None, None)
        if not self.opened:
            d = self.owner.alloc()
            for pobj, psrc in self.pending or ():
                self.owner.emit(dict(pobj, output_index=d), psrc)
            self._opened()

    # -- pieces of text ------------------------------------------------------------------------
    def pieces(self, pieces: list[Piece], obj: Obj | None, src: Src | None) -> None:
        for p in pieces:
            if p.kind == REASONING:
                part = self.part
                assert part is not None   # (pieces come from the part being read)
                part.reasoned = True
                if not isinstance(self.cur, _ReasoningItem):
                    self._open_reason()
                self._reason_delta(p.text)
            elif p.kind == CONTENT:
                self._content(p.text, obj, src)
            elif p.kind == END and isinstance(self.cur, _ReasoningItem):
                self._close_reason(p.pair)

    # -- message pieces ------------------------------------------------------------------------
    def _emit_on(self, seg: _MessagePiece, obj: Obj, src: Src | None, **fields: Any) -> None:
        ev = dict(obj, output_index=seg.output_index, **fields)
        if seg.id is not None and "item_id" in ev:
            ev["item_id"] = seg.id
        self.owner.emit(ev, src)

    def _reuse_or_make(self, seg: _MessagePiece, obj: Obj | None, src: Src | None, type_: str,
                       made_only: Obj, **fields: Any) -> None:
        """An event on the message piece `seg`: the upstream's own (`obj`), moved onto `seg` with
        `fields` set, when there is one; else one made from scratch, with the fields only a made
        event needs (`made_only`). Item events carry no item_id."""
        if obj is not None:
            self._emit_on(seg, obj, src, **fields)
            return
        ids = {} if type_.startswith("response.output_item.") else {"item_id": seg.id}
        self.owner.emit(_ev(type_, **ids, output_index=seg.output_index, **fields, **made_only))

    def _ensure_seg(self) -> _MessagePiece:
        if isinstance(self.cur, _MessagePiece):
            return self.cur
        if isinstance(self.cur, _ReasoningItem):
            self._close_reason(None)
        self._opened()
        d = self.owner.alloc()
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
        seg = self.cur = _MessagePiece(d, sid)
        aobj, asrc = self.added
        self.owner.emit(dict(aobj, output_index=d, item=item), asrc)
        return seg

    def _content(self, text: str, obj: Obj | None, src: Src | None) -> None:
        seg = self._ensure_seg()
        dp = seg.dpart or self._open_dpart(seg)
        dp.text.add(text)
        self._reuse_or_make(seg, obj, src, "response.output_text.delta", {"logprobs": []},
                            content_index=dp.content_index, delta=text)

    def _open_dpart(self, seg: _MessagePiece) -> _OutputPart:
        up = self.part
        assert up is not None
        dp = seg.dpart = _OutputPart(seg.next_c, up, self.owner.literals)
        seg.next_c += 1
        seg.content_index_map[up.content_index] = dp.content_index
        up.made += 1
        aobj, asrc = up.added
        self._emit_on(seg, aobj, asrc if dp.first else None, content_index=dp.content_index, part=dict(up.template))
        return dp

    def _text_done_event(self, seg: _MessagePiece, obj: Obj | None, src: Src | None) -> None:
        dp = seg.dpart
        assert dp is not None
        text = dp.text.value()
        self.owner.known(text, dp.text)
        dp.text_done = True
        self._reuse_or_make(seg, obj, src, "response.output_text.done", {"logprobs": []},
                            content_index=dp.content_index, text=text)

    def _close_dpart(self, seg: _MessagePiece, obj: Obj | None = None, src: Src | None = None) -> None:
        dp = seg.dpart
        assert dp is not None
        if not dp.text_done:
            self._text_done_event(seg, None, None)
        # The piece the upstream's content_part.done closes keeps that part's other fields
        # (annotations, logprobs); a piece closed earlier, by a reasoning block, has them empty.
        base = obj.get("part") if obj is not None else None
        part = dict(base if _is_text_part(base) else dp.upart.template, text=dp.text.value())
        self._reuse_or_make(seg, obj, src, "response.content_part.done", {}, content_index=dp.content_index, part=part)
        seg.content.append(part)
        seg.dpart = None

    def _close_seg(self, done_item: Obj | None = None, obj: Obj | None = None,
                   src: Src | None = None) -> None:
        seg = self.cur
        assert isinstance(seg, _MessagePiece)
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
        if isinstance(self.cur, _MessagePiece):
            self._close_seg()
        self._opened()
        mode = self.owner.mode
        r = self.cur = _ReasoningItem(self.owner.alloc(), f"rs_{self._base()}_{self.pos}", self.owner.literals)
        self.pos += 1
        item: Obj = {"id": r.id, "type": "reasoning", "summary": []}
        for ch in mode.channels:
            item[ch.key] = []
        emit = self.owner.emit
        emit(_ev("response.output_item.added", output_index=r.output_index, item=item))
        for ch in mode.channels:
            emit(_ev(f"{ch.part_event}.added", item_id=r.id, output_index=r.output_index, **{ch.index: 0},
                     part={"type": ch.part_type, "text": ""}))

    def _reason_delta(self, text: str) -> None:
        r = self.cur
        assert isinstance(r, _ReasoningItem)
        r.text.add(text)
        for ch in self.owner.mode.channels:
            self.owner.emit(_ev(f"{ch.text_event}.delta", item_id=r.id, output_index=r.output_index, **{ch.index: 0},
                            delta=text))

    def _close_reason(self, pair: TagPair | None) -> None:
        r = self.cur
        assert isinstance(r, _ReasoningItem)
        text = r.text.value()
        self.owner.known(text, r.text)
        mode = self.owner.mode
        emit = self.owner.emit
        item: Obj = {"id": r.id, "type": "reasoning", "summary": []}
        for ch in mode.channels:
            part = {"type": ch.part_type, "text": text}
            emit(_ev(f"{ch.text_event}.done", item_id=r.id, output_index=r.output_index, **{ch.index: 0}, text=text))
            emit(_ev(f"{ch.part_event}.done", item_id=r.id, output_index=r.output_index, **{ch.index: 0}, part=part))
            item[ch.key] = [part]
        if mode.encrypted:
            ctx = self.owner.ctx
            assert ctx.sealer is not None   # (mode.encrypted: there is one)
            lit = r.text.esc.value() if r.text.esc is not None else None   # (a stream's: not escaped again)
            item["encrypted_content"] = ctx.sealer.seal(text, pair or ctx.rules().pairs[0], lit)
        item["status"] = "completed"
        emit(_ev("response.output_item.done", output_index=r.output_index, item=item))
        self.built.append(item)
        self.cur = None


def _split_pieces(owner: Owner, text: str) -> list[Piece]:
    return owner.ctx.split(text, owner.model, finish=owner.ending).pieces


def ended(resp: object) -> str | None:
    """How a response ended: STOP when it completed with an answer (no tool call in its output),
    LENGTH when it is incomplete at the token limit (`max_output_tokens`), OTHER when it is
    otherwise incomplete, failed or calls a tool, None when it does not say."""
    if not isinstance(resp, dict):
        return None
    status = resp.get("status")
    if status == "completed":
        output = resp.get("output")
        calls = isinstance(output, list) and any(
            isinstance(it, dict) and isinstance(it.get("type"), str) and it["type"].endswith("_call")
            for it in output)
        return OTHER if calls else STOP
    if status == "incomplete":
        details = resp.get("incomplete_details")
        return LENGTH if isinstance(details, dict) and details.get("reason") == "max_output_tokens" else OTHER
    return OTHER if status in ("failed", "cancelled") else None


def _drive_parts(m: _Message, item: Obj, split: Callable[[str], list[Piece]]) -> None:
    """Feed a whole message item's parts through `m`, as a stream of them would."""
    u = m.upstream_index
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
