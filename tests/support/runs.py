"""One model output through every surface, as a body and as a stream, read back as a client sees
it: the conformance cases, the corpus texts and the real outputs all run through here.

A run gives (reasoning, answer): reasoning as the surface shows it (chat: its one field, several
blocks joined with chat.BLOCK_JOIN; Messages and Responses: one entry per block). A stored result
keeps the blocks apart ({"reasoning": [...], "content": "..."}); SHOWS says how each surface shows
them. A new surface plugs in with its body and stream runners in BODIES and STREAMS and its view
in SHOWS. A runner takes the flow's context (`ctx`, else one made from the request) and, for
Messages and Responses, a list to `keep` the output's blocks or items in, as a client got them.
"""

from __future__ import annotations

import json
import random

from conftest import make_ctx
from thinkwire import engine
from thinkwire.surfaces import chat, messages, ollama, responses

Run = tuple[tuple[str, ...], str]


def _model(request: dict | None) -> str:
    return (request or {}).get("model") or "m"


# -- chat completions ------------------------------------------------------------------------------
def _chat_run(reasoning: str | None, content: str | None) -> Run:
    return ((reasoning,) if reasoning else ()), content or ""


# How an output ended: `STOP` (complete) or `LENGTH` (cut off at the token limit), as each
# surface says it.
STOP, LENGTH = "stop", "length"
_MESSAGES_STOP = {STOP: "end_turn", LENGTH: "max_tokens"}


def run_chat_body(text: str, request: dict | None, values: dict, finish: str = STOP, ctx=None, keep=None) -> Run:
    body = json.dumps({"model": _model(request), "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}]})
    new = chat.rewrite_body(body.encode(), (ctx or make_ctx(request, surface="chat", **values)))
    msg = json.loads(new)["choices"][0]["message"] if new else {"content": text}
    return _chat_run(msg.get("reasoning_content"), msg["content"])


def run_chat_stream(chunks: list[str], request: dict | None, values: dict, finish: str = STOP, ctx=None, keep=None) -> Run:
    driver = engine.stream_driver(chat, (ctx or make_ctx(request, surface="chat", **values)))
    out = []
    for c in chunks:
        ev = {"model": _model(request), "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
        out += driver(b"data: " + json.dumps(ev).encode() + b"\n\n")
    last = {"model": _model(request), "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    out += driver(b"data: " + json.dumps(last).encode() + b"\n\n")
    out += driver(b"data: [DONE]\n\n") + driver(b"")
    assert driver.failure is None, driver.failure
    reasoning, content = "", ""
    for line in b"".join(out).split(b"\n"):
        if line.startswith(b"data: {"):
            d = json.loads(line[6:])["choices"][0]["delta"]
            reasoning += d.get("reasoning_content") or ""
            content += d.get("content") or ""
    return _chat_run(reasoning, content)


# -- Anthropic Messages ----------------------------------------------------------------------------
def _messages_run(content_blocks: list[dict]) -> Run:
    thinking = tuple(b["thinking"] for b in content_blocks if b["type"] == "thinking")
    return thinking, "".join(b["text"] for b in content_blocks if b["type"] == "text")


def run_messages_body(text: str, request: dict | None, values: dict, finish: str = STOP, ctx=None, keep=None) -> Run:
    body = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": _model(request),
                       "content": [{"type": "text", "text": text}], "stop_reason": _MESSAGES_STOP[finish]})
    new = messages.rewrite_body(body.encode(), (ctx or make_ctx(request, surface="messages", **values)))
    if keep is not None:
        keep += json.loads(new or body)["content"]
    return _messages_run(json.loads(new or body)["content"])


def run_messages_stream(chunks: list[str], request: dict | None, values: dict, finish: str = STOP, ctx=None, keep=None) -> Run:
    evs = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                 "model": _model(request), "content": []}},
           {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    evs += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": c}} for c in chunks]
    evs += [{"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": _MESSAGES_STOP[finish]}, "usage": {"output_tokens": 1}},
            {"type": "message_stop"}]
    driver = engine.stream_driver(messages, (ctx or make_ctx(request, surface="messages", **values)))
    out = []
    for ev in evs:
        out += driver(f"event: {ev['type']}\ndata: {json.dumps(ev)}\n\n".encode())
    out += driver(b"")
    assert driver.failure is None, driver.failure
    blocks: list[dict] = []
    for line in b"".join(out).split(b"\n"):
        if not line.startswith(b"data: "):
            continue
        ev = json.loads(line[6:])
        if ev["type"] == "content_block_start":
            assert ev["index"] == len(blocks)
            blocks.append(dict(ev["content_block"]))
        elif ev["type"] == "content_block_delta":
            d, b = ev["delta"], blocks[ev["index"]]
            if d["type"] == "text_delta":
                b["text"] += d["text"]
            elif d["type"] == "thinking_delta":
                b["thinking"] += d["thinking"]
    if keep is not None:
        keep += blocks
    return _messages_run(blocks)


# -- OpenAI Responses ------------------------------------------------------------------------------
def _responses_run(output: list[dict]) -> Run:
    reasoning, text = [], ""
    for it in output:
        if it["type"] == "reasoning":
            parts = it.get("content") or it.get("summary") or []
            reasoning.append("".join(p["text"] for p in parts))
        elif it["type"] == "message":
            text += "".join(p.get("text", "") for p in it["content"])
    return tuple(reasoning), text


def _response(request, output, status):
    out = {"id": "resp_1", "object": "response", "model": _model(request), "status": status, "output": output}
    if status == "incomplete":
        out["incomplete_details"] = {"reason": "max_output_tokens"}
    return out


_RESPONSES_STATUS = {STOP: "completed", LENGTH: "incomplete"}


def run_responses_body(text: str, request: dict | None, values: dict, finish: str = STOP, ctx=None, keep=None) -> Run:
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": _RESPONSES_STATUS[finish],
            "content": [{"type": "output_text", "text": text, "annotations": []}]}
    body = json.dumps(_response(request, [item], _RESPONSES_STATUS[finish]))
    new = responses.rewrite_body(body.encode(), (ctx or make_ctx(request, surface="responses", **values)))
    if keep is not None:
        keep += json.loads(new or body)["output"]
    return _responses_run(json.loads(new or body)["output"])


def run_responses_stream(chunks: list[str], request: dict | None, values: dict, finish: str = STOP, ctx=None, keep=None) -> Run:
    text = "".join(chunks)
    status = _RESPONSES_STATUS[finish]
    part = {"type": "output_text", "text": "", "annotations": []}
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    done = dict(item, status=status, content=[dict(part, text=text)])
    evs = [{"type": "response.created", "response": _response(request, [], "in_progress")},
           {"type": "response.output_item.added", "output_index": 0, "item": item},
           {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
            "part": part}]
    evs += [{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
             "delta": c} for c in chunks]
    evs += [{"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
             "text": text},
            {"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0, "content_index": 0,
             "part": dict(part, text=text)},
            {"type": "response.output_item.done", "output_index": 0, "item": done},
            {"type": f"response.{status}", "response": _response(request, [done], status)}]
    driver = engine.stream_driver(responses, (ctx or make_ctx(request, surface="responses", **values)))
    out = []
    for n, ev in enumerate(evs):
        out += driver(f"data: {json.dumps(dict(ev, sequence_number=n))}\n\n".encode())
    out += driver(b"")
    assert driver.failure is None, driver.failure
    final = [json.loads(line[6:]) for line in b"".join(out).split(b"\n") if line.startswith(b"data: ")][-1]
    assert final["type"] == f"response.{status}"
    if keep is not None:
        keep += final["response"]["output"]
    return _responses_run(final["response"]["output"])


# -- Ollama (a generate body, a chat stream) ------------------------------------------------------------
_CREATED = "2025-08-20T13:48:22.164615Z"


def _ollama_run(thinking: str, content: str) -> Run:
    return ((thinking,) if thinking else ()), content


def run_ollama_body(text: str, request: dict | None, values: dict, finish: str = STOP, ctx=None, keep=None) -> Run:
    body = json.dumps({"model": _model(request), "created_at": _CREATED, "response": text,
                       "done": True, "done_reason": finish, "context": [1, 2], "eval_count": 9})
    obj = json.loads(ollama.rewrite_body(body.encode(), (ctx or make_ctx(request, surface="ollama", **values))) or body)
    return _ollama_run(obj.get("thinking", ""), obj["response"])


def run_ollama_stream(chunks: list[str], request: dict | None, values: dict, finish: str = STOP, ctx=None, keep=None) -> Run:
    def line(text: str, done: bool) -> bytes:
        obj = {"model": _model(request), "created_at": _CREATED,
               "message": {"role": "assistant", "content": text}, "done": done}
        if done:
            obj["done_reason"] = finish
        return json.dumps(obj).encode() + b"\n"
    driver = engine.stream_driver(ollama, (ctx or make_ctx(request, surface="ollama", **values)))
    out = []
    for c in chunks:
        out += driver(line(c, False))
    out += driver(line("", True)) + driver(b"")
    assert driver.failure is None, driver.failure
    thinking = content = ""
    for raw in b"".join(out).splitlines():
        m = json.loads(raw)["message"]
        thinking += m.get("thinking", "")
        content += m["content"]
    return _ollama_run(thinking, content)


BODIES = {"chat": run_chat_body, "messages": run_messages_body, "responses": run_responses_body,
          "ollama": run_ollama_body}
STREAMS = {"chat": run_chat_stream, "messages": run_messages_stream, "responses": run_responses_stream,
           "ollama": run_ollama_stream}
# How a surface shows a result's reasoning blocks (a run's first element).
_JOINED = lambda blocks: (chat.BLOCK_JOIN.join(blocks),) if blocks else ()  # noqa: E731
SHOWS = {"chat": _JOINED, "messages": tuple, "responses": tuple, "ollama": _JOINED}
assert ollama.BLOCK_JOIN == chat.BLOCK_JOIN
CANONICAL = "messages"   # its blocks are the stored result; the other surfaces are checked through SHOWS


# -- chunkings and stored results --------------------------------------------------------------------
PER_CHARACTER_UP_TO = 4000   # longer texts (a few corpus samples) get random chunkings only


def chunkings(text: str, seed: str, given: list[str] | None = None, randoms: int = 2) -> dict[str, list[str]]:
    """Named ways to cut `text` into stream deltas: whole, per character, `given` (a peer's or a
    server's own chunks), and `randoms` random cuttings seeded by `seed`."""
    out = {"whole": [text]}
    if len(text) <= PER_CHARACTER_UP_TO:
        out["per character"] = list(text) or [""]
    if given:
        assert "".join(given) == text, "the given chunks must make the text"
        out["given chunks"] = given
    rnd = random.Random(seed)
    for k in range(randoms):
        n = min(len(text) - 1, rnd.randint(1, 12)) if len(text) > 1 else 0
        cuts = sorted(rnd.sample(range(1, len(text)), n)) if n else []
        out[f"random {k}"] = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    return out


def as_stored(run: Run) -> dict:
    return {"reasoning": list(run[0]), "content": run[1]}


def observe(text: str, request: dict | None, values: dict, cuts: dict[str, list[str]],
            finish: str = STOP) -> dict:
    """What every surface gives for `text` (an output that ended as `finish` says), as a stored
    result: {"body": result, "stream": result},
    the blocks as CANONICAL gives them, plus "surfaces": {surface: {mode: run}} for a surface
    whose result is not SHOWS of those blocks. Every chunking of a stream must give the same run
    (not a stored fact: a stream that depends on its chunking fails here)."""
    runs: dict[tuple[str, str], Run] = {}
    for surface in BODIES:
        runs[surface, "body"] = BODIES[surface](text, request, values, finish)
        first = None
        for how, chunks in cuts.items():
            got = STREAMS[surface](chunks, request, values, finish)
            if first is None:
                first = (how, got)
            assert got == first[1], (f"{surface} stream: cut {how!r} gives {got!r}, "
                                     f"cut {first[0]!r} gives {first[1]!r}")
        runs[surface, "stream"] = first[1]
    out: dict = {mode: as_stored(runs[CANONICAL, mode]) for mode in ("body", "stream")}
    for (surface, mode), run in runs.items():
        if run != (SHOWS[surface](runs[CANONICAL, mode][0]), runs[CANONICAL, mode][1]):
            out.setdefault("surfaces", {}).setdefault(surface, {})[mode] = as_stored(run)
    return out

