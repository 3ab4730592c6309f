"""The way back of every designed case (tests/cases_designed.json: each of issue 32's classes), on
every surface, body and stream: the output split as test_designed.py splits it, the turn sent back
as a client sends it (chat: `reasoning_content` and `content` under think_chat_restore=inline;
Ollama: `thinking` and `content` for a template that does not read `thinking`; Messages: the blocks
as received, with no signature (`off`); Responses: the items without ids or `encrypted_content`, as
Codex echoes them), restored from what the proxy remembers: the upstream reads the model's output
byte for byte (behind the template's opening tag where the output started inside a block)."""

from __future__ import annotations

import json

import pytest

from conftest import make_settings
from support import runs
from test_designed import CASES, _request
from thinkwire import engine, written
from thinkwire.surfaces import chat, messages, ollama, responses

USER = {"role": "user", "content": "q"}
OPTIONS = {"chat_restore": "inline", "signature": "off"}


def _ctx(mem, request: dict, values: dict, surface: str):
    return engine.new_context(make_settings(**dict(values, **OPTIONS)), request, None, surface=surface,
                              client="client A", upstream="http://up:8000", written=mem)


def _echo(surface: str, request: dict, got: runs.Run, kept: list) -> dict:
    """The next request, with the turn as the client got it."""
    reasoning, content = got
    if surface == "chat":
        turn = {"role": "assistant", "content": content, "reasoning_content": "\n\n".join(reasoning)}
        return dict(request, messages=[USER, turn, {"role": "user", "content": "go on"}])
    if surface == "ollama":
        turn = {"role": "assistant", "content": content, "thinking": "\n\n".join(reasoning)}
        return dict(request, messages=[USER, turn, {"role": "user", "content": "go on"}])
    if surface == "messages":
        blocks = [b for b in kept if b["type"] != "text" or b["text"]]
        return dict(request, max_tokens=64, messages=[USER, {"role": "assistant", "content": blocks},
                                                      {"role": "user", "content": "go on"}])
    items = [{k: v for k, v in it.items() if k not in ("id", "status")} for it in kept]
    return dict(request, input=[USER] + items + [{"role": "user", "content": "go on"}])


def _restore(surface: str, data: dict, ctx) -> str | None:
    """The assistant turn's text as the upstream reads it (None: the request went as it came)."""
    if surface == "ollama":
        ctx.native_thinking = False
    mod = {"chat": chat, "ollama": ollama, "messages": messages, "responses": responses}[surface]
    new = mod.restore_request(json.dumps(data).encode(), ctx)
    if new is None:
        return None
    out = json.loads(new)
    if surface == "responses":
        return "".join(p["text"] for it in out["input"] if it.get("role") == "assistant" for p in it["content"])
    (turn,) = [m for m in out["messages"] if m["role"] == "assistant"]
    if isinstance(turn["content"], str):
        return turn["content"]
    assert all(b["type"] == "text" for b in turn["content"]), turn
    return "".join(b["text"] for b in turn["content"])


@pytest.mark.parametrize("mode", ["body", "stream"])
@pytest.mark.parametrize("surface", sorted(runs.BODIES))
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_way_back_gives_the_model_output_back_byte_for_byte(case, surface, mode):
    request, values = _request(case)
    if surface == "responses":
        request = dict(request, input=[USER])
    else:
        request = dict(request, messages=[USER])
    mem = written.Memory()
    ctx = _ctx(mem, request, values, surface)
    kept: list = []
    finish = case.get("finish", runs.STOP)
    if mode == "body":
        got = runs.BODIES[surface](case["output"], request, values, finish, ctx=ctx, keep=kept)
    else:
        text = case["output"]
        got = runs.STREAMS[surface]([text[k:k + 3] for k in range(0, len(text), 3)], request, values, finish,
                                    ctx=ctx, keep=kept)
    ctx.tally()
    data = _echo(surface, request, got, kept)
    back = _restore(surface, data, _ctx(mem, data, values, surface))
    if back is None:   # nothing of the proxy's in the turn: it goes as the client sent it
        assert got == ((), case["output"])
        return
    opens = {p.open for p in ctx.rules().pairs} | {p.open for p in ctx.rules().start_pairs}
    assert back == case["output"] or back.endswith(case["output"]) and back[:-len(case["output"])] in opens, back
