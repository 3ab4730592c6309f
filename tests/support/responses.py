"""OpenAI Responses: upstream bodies and event streams, the SDK's readers, and the stream rules it checks."""

import json
import httpx2 as httpx
import openai
from support import drive
from conftest import make_ctx
from thinkwire.sse import SSEParser
from thinkwire.surfaces import responses


MODEL = "qwen3"


RESP = {"id": "resp_1", "object": "response", "created_at": 1, "model": MODEL, "status": "in_progress",
        "output": [], "usage": None, "store": False, "custom_field": {"kept": True}}


USAGE = {"input_tokens": 3, "output_tokens": 9, "total_tokens": 12}


def msg(*parts, id="msg_1"):
    """A message item; each part is a list of output_text deltas."""
    return {"type": "message", "id": id, "parts": [list(p) for p in parts]}


def fn(*args, id="fc_1", name="get_weather"):
    return {"type": "function_call", "id": id, "call_id": "call_" + id, "name": name, "args": list(args)}


def native(summary="I thought", id="rs_up"):
    return {"type": "reasoning", "id": id, "summary": summary}


def _text_part(text):
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def final_item(spec, status="completed"):
    if spec["type"] == "message":
        return {"id": spec["id"], "type": "message", "role": "assistant", "status": status,
                "content": [_text_part("".join(p)) for p in spec["parts"]]}
    if spec["type"] == "function_call":
        return {"id": spec["id"], "type": "function_call", "status": status, "call_id": spec["call_id"],
                "name": spec["name"], "arguments": "".join(spec["args"])}
    return {"id": spec["id"], "type": "reasoning",
            "summary": [{"type": "summary_text", "text": spec["summary"]}]}


def final_response(items, status="completed", unclosed=False):
    out = [final_item(s) for s in items]
    if unclosed:
        out[-1]["status"] = "incomplete"
    extra = {"incomplete_details": {"reason": "max_output_tokens"}} if status == "incomplete" else {}
    return dict(RESP, status=status, output=out, usage=USAGE, **extra)


def upstream_events(items, status="completed", unclosed=False, seq=True):
    """The event dicts a Responses server streams for these items."""
    evs = []

    def e(t, **kw):
        evs.append({"type": t, **kw})

    e("response.created", response=RESP)
    e("response.in_progress", response=RESP)
    for i, spec in enumerate(items):
        last_open = unclosed and i == len(items) - 1
        done = final_item(spec)
        iid = spec["id"]
        if spec["type"] == "message":
            e("response.output_item.added", output_index=i, item=dict(done, status="in_progress", content=[]))
            for c, deltas in enumerate(spec["parts"]):
                e("response.content_part.added", item_id=iid, output_index=i, content_index=c,
                  part={"type": "output_text", "text": "", "annotations": [], "logprobs": []})
                for d in deltas:
                    e("response.output_text.delta", item_id=iid, output_index=i, content_index=c, delta=d,
                      logprobs=[])
                if last_open:
                    break
                text = "".join(deltas)
                e("response.output_text.done", item_id=iid, output_index=i, content_index=c, text=text,
                  logprobs=[])
                e("response.content_part.done", item_id=iid, output_index=i, content_index=c,
                  part=_text_part(text))
        elif spec["type"] == "function_call":
            e("response.output_item.added", output_index=i, item=dict(done, status="in_progress", arguments=""))
            for d in spec["args"]:
                e("response.function_call_arguments.delta", item_id=iid, output_index=i, delta=d)
            e("response.function_call_arguments.done", item_id=iid, output_index=i, arguments=done["arguments"])
        else:
            e("response.output_item.added", output_index=i, item=dict(done, summary=[]))
            e("response.reasoning_summary_part.added", item_id=iid, output_index=i, summary_index=0,
              part={"type": "summary_text", "text": ""})
            e("response.reasoning_summary_text.delta", item_id=iid, output_index=i, summary_index=0,
              delta=spec["summary"])
            e("response.reasoning_summary_text.done", item_id=iid, output_index=i, summary_index=0,
              text=spec["summary"])
            e("response.reasoning_summary_part.done", item_id=iid, output_index=i, summary_index=0,
              part={"type": "summary_text", "text": spec["summary"]})
        if not last_open:
            e("response.output_item.done", output_index=i, item=done)
    e(f"response.{status}", response=final_response(items, status, unclosed))
    if seq:
        for n, ev in enumerate(evs):
            ev["sequence_number"] = n
    return evs


def sse_bytes(evs, event_lines=True, eol="\n"):
    out = []
    for ev in evs:
        head = f"event: {ev['type']}{eol}" if event_lines else ""
        out.append(f"{head}data: {json.dumps(ev, ensure_ascii=False)}{eol}{eol}")
    return "".join(out).encode()


def stream_of(items, **kw):
    el = kw.pop("event_lines", True)
    return sse_bytes(upstream_events(items, **kw), event_lines=el)


def body_of(items, **kw):
    return json.dumps(final_response(items, **kw)).encode()


def run_stream(data, pieces=None, ctx=None, **opts):
    ctx = ctx or make_ctx(**opts)
    out, driver = drive(responses, ctx, data, pieces)
    assert driver.failure is None, driver.failure
    return out, ctx


def parse(data):
    p = SSEParser()
    return p.feed(data) + p.finish()


class _Served:
    """One openai client for the whole module; each call says what its server answers."""
    data = b""
    client = None

    @classmethod
    def handler(cls, request):
        ctype = "application/json" if cls.data.lstrip().startswith(b"{") else "text/event-stream"
        return httpx.Response(200, headers={"content-type": ctype}, content=cls.data)


def sdk_client(data):
    """An openai client whose server answers the next requests with `data` (SSE or JSON)."""
    _Served.data = data
    if _Served.client is None:
        _Served.client = openai.OpenAI(api_key="x", base_url="http://test/v1", max_retries=0,
                                       http_client=httpx.Client(transport=httpx.MockTransport(_Served.handler)))
    return _Served.client


def sdk_final(data, **kw):
    """The openai SDK's `responses.stream()` accumulation of a stream: get_final_response()."""
    with sdk_client(data).responses.stream(model=MODEL, input="q", **kw) as s:
        for _ in s:
            pass
        return s.get_final_response()


def shape(output):
    """Output items as (type, text) pairs, for reading."""
    out = []
    for it in output:
        it = it if isinstance(it, dict) else it.to_dict()
        if it["type"] == "reasoning":
            texts = [p["text"] for p in it.get("content") or []] or [p["text"] for p in it["summary"]]
            out.append(("reasoning", "".join(texts)))
        elif it["type"] == "message":
            out.append(("message", "|".join(p.get("text", "") for p in it["content"])))
        else:
            out.append((it["type"], it.get("arguments")))
    return out


def check_invariants(data):
    """The SDK's stream rules, on every event: numbering, identity, part order."""
    seqs, items, done, parts = [], {}, set(), set()
    for ev in parse(data):
        o = json.loads(ev.data)
        if ev.event is not None:
            assert ev.event == o["type"]
        if "sequence_number" in o:
            seqs.append(o["sequence_number"])
        t = o["type"]
        i = o.get("output_index")
        if t == "response.output_item.added":
            assert i == len(items), f"output_index {i} added out of order"
            items[i] = (o["item"]["type"], o["item"].get("id"))
        elif t == "response.output_item.done":
            assert items[i] == (o["item"]["type"], o["item"].get("id"))
            assert i not in done
            done.add(i)
        elif i is not None:
            assert i in items and i not in done, f"{t} for output_index {i}"
            if "item_id" in o:
                assert o["item_id"] == items[i][1]
            if t == "response.content_part.added":
                parts.add((i, o["content_index"]))
            elif "content_index" in o:
                assert (i, o["content_index"]) in parts, f"{t} before its content_part.added"
            if t == "response.output_text.delta":
                assert items[i][0] == "message"
            if t.startswith("response.reasoning"):
                assert items[i][0] == "reasoning"
        if t in ("response.completed", "response.incomplete", "response.failed"):
            out = o["response"]["output"]
            assert [(x["type"], x.get("id")) for x in out] == [items[k] for k in sorted(items)]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "sequence_number must strictly increase"
    return items


def llama_server_events(deltas, resp_id="resp_ll", mid="msg_ll"):
    """A message streamed as llama-server's /v1/responses streams it (tools/server/server-task.cpp,
    --reasoning-format none): its events carry no output_index, content_index or sequence_number
    (the item's id says which item), and response.created / in_progress have no output."""
    def life(t):
        return {"type": t, "response": {"id": resp_id, "object": "response", "status": "in_progress"}}
    text = "".join(deltas)
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    item = {"type": "message", "status": "completed", "id": mid, "content": [part], "role": "assistant"}
    return ([life("response.created"), life("response.in_progress"),
             {"type": "response.output_item.added",
              "item": {"content": [], "id": mid, "role": "assistant", "status": "in_progress", "type": "message"}},
             {"type": "response.content_part.added", "item_id": mid, "part": {"type": "output_text", "text": ""}}]
            + [{"type": "response.output_text.delta", "item_id": mid, "delta": d} for d in deltas]
            + [{"type": "response.output_text.done", "item_id": mid, "text": text},
               {"type": "response.content_part.done", "item_id": mid, "part": part},
               {"type": "response.output_item.done", "item": item},
               {"type": "response.completed", "response": {"id": resp_id, "object": "response", "created_at": 1,
                                                           "status": "completed", "model": "m", "output": [item],
                                                           "usage": {"input_tokens": 9, "output_tokens": 7,
                                                                     "total_tokens": 16}}}])
