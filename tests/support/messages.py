"""Anthropic Messages: upstream bodies and streams, and what the client got (the SDK's readers)."""

import json
import anthropic
import httpx2
from support import drive
from conftest import make_ctx
from thinkwire.marks import Sealer
from thinkwire.surfaces import messages


SEALER = Sealer(b"test key")


def text(*chunks, **extra):
    return {"type": "text", "chunks": list(chunks), **extra}


def tool(id_="toolu_1", name="get_weather", *json_chunks):
    return {"type": "tool_use", "id": id_, "name": name, "chunks": list(json_chunks) or ['{"city"', ': "Paris"}']}


def native_thinking(thinking="genuine", signature="EqQBsig=="):
    return {"type": "thinking", "thinking": thinking, "signature": signature}


def redacted(data="EmwKredacted=="):
    return {"type": "redacted_thinking", "data": data}


def final_block(b):
    """A block as the whole body holds it."""
    if b["type"] == "text":
        return {k: v for k, v in b.items() if k != "chunks"} | {"text": "".join(b["chunks"])}
    if b["type"] == "tool_use":
        return {"type": "tool_use", "id": b["id"], "name": b["name"], "input": json.loads("".join(b["chunks"]))}
    return dict(b)


def body(*blocks, stop="end_turn", model="m"):
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                       "content": [final_block(b) for b in blocks], "stop_reason": stop,
                       "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 9}}).encode()


def sse_event(obj, name=True, eol="\n"):
    head = f"event: {obj['type']}{eol}" if name else ""
    return f"{head}data: {json.dumps(obj)}{eol}{eol}".encode()


def stream_objs(*blocks, stop="end_turn", model="m", ping=True):
    objs = [{"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}}]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            start = {k: v for k, v in b.items() if k != "chunks"} | {"text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in b["chunks"]]
        elif b["type"] == "tool_use":
            start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in b["chunks"]]
        elif b["type"] == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": b["thinking"]},
                      {"type": "signature_delta", "signature": b["signature"]}]
        else:
            start, deltas = dict(b), []
        objs.append({"type": "content_block_start", "index": i, "content_block": start})
        if ping and i == 0:
            objs.append({"type": "ping"})
        objs += [{"type": "content_block_delta", "index": i, "delta": d} for d in deltas]
        objs.append({"type": "content_block_stop", "index": i})
    objs.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                 "usage": {"output_tokens": 9}})
    objs.append({"type": "message_stop"})
    return objs


def stream(*blocks, eol="\n", names=True, **kw):
    return b"".join(sse_event(o, names, eol) for o in stream_objs(*blocks, **kw))


def ctx_for(request=None, sealer=SEALER, **opts):
    # Tests of where blocks go compare them whole, so they read them without a (random) mark:
    # under `off`. The default, `signed`, has its own tests below.
    opts.setdefault("signature", "off")
    return make_ctx(request, sealer, **opts)


def run_stream(data, pieces=None, ctx=None, **opts):
    ctx = ctx or ctx_for(**opts)
    return drive(messages, ctx, data, pieces)[0], ctx


def run_body(data, ctx=None, **opts):
    ctx = ctx or ctx_for(**opts)
    new = messages.rewrite_body(data, ctx)
    return (data if new is None else new), new is not None, ctx


def _client(status, content_type, content):
    def handler(request):
        return httpx2.Response(status, headers={"content-type": content_type}, content=content)
    return anthropic.Anthropic(api_key="k", base_url="http://upstream.test", max_retries=0,
                               http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


ASK = dict(model="m", max_tokens=1024, messages=[{"role": "user", "content": "hi"}])


def sdk_stream(data):
    """The message the SDK's stream helper accumulates from these stream bytes."""
    with _client(200, "text/event-stream", data).messages.stream(**ASK) as s:
        return s.get_final_message().to_dict()


def sdk_body(data):
    return _client(200, "application/json", data).messages.create(**ASK).to_dict()
