"""The field's reasoning-parser cases (vLLM, SGLang, llama.cpp, the Vercel AI SDK, LiteLLM), run
through thinkwire.

The cases live in tests/conformance/<peer>.json, ported from each project's own tests (each case
names its repository, file, commit and test). Every case runs on all three surfaces, as a body and
as a stream (the peer's own chunks where it has them, and random chunkings), and:

1. the three surfaces, bodies and streams alike, give the same reasoning and answer (no exception);
2. that result agrees with the peer's expectation, or differs for a reason thinkwire chose on
   purpose. Each such reason is a RULE below (and a line of the README section "Where thinkwire
   differs from vLLM and SGLang"); a rule is a check that the difference is of its kind, not a
   pass. tests/conformance/differences.json records which rule each differing case falls under,
   so a case that starts or stops agreeing, or differs another way, fails.

`THINKWIRE_CONFORMANCE_WRITE=1 ./scripts/test tests/test_conformance.py` rewrites that file from
the current results (read the diff before committing it).
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest

from conftest import make_ctx
from thinkwire import engine
from thinkwire.splitter import END, REASONING, split_text
from thinkwire.surfaces import chat, messages, responses

HERE = Path(__file__).parent / "conformance"
PEERS = ("vllm", "sglang", "llamacpp", "vercel-ai", "litellm")
DIFFERENCES = HERE / "differences.json"


def load_cases() -> list[dict]:
    out = []
    for peer in PEERS:
        data = json.loads((HERE / f"{peer}.json").read_text(encoding="utf-8"))
        for case in data["cases"]:
            out.append(dict(case, peer=peer))
    return out


CASES = load_cases()


# -- what the case asks thinkwire to be -----------------------------------------------------------
def _args(case: dict) -> dict:
    return case.get("detector_args") or {}


def opened_in_prompt(case: dict) -> bool | None:
    """Whether the peer's test says the prompt opened the reasoning block (True), says it did
    not (False), or leaves it to the model (None)."""
    a = _args(case)
    for key in ("force_reasoning", "thinking_forced_open", "startWithReasoning", "started_reasoning_content"):
        if isinstance(a.get(key), bool):
            return a[key]
    if (case.get("initial_state") or {}).get("_in_reasoning"):
        return True
    return None


def custom_pair(case: dict) -> tuple[str, str] | None:
    """The tag pair a test sets itself, when it is not one thinkwire ships for every model."""
    a = _args(case)
    if case.get("markers"):
        return case["markers"]["start"], case["markers"]["end"]
    if a.get("think_start_token") and a.get("think_end_token"):
        return a["think_start_token"], a["think_end_token"]
    if a.get("end_tag"):
        return "<" + a["end_tag"][2:], a["end_tag"]
    if a.get("tagName"):
        return f"<{a['tagName']}>", f"</{a['tagName']}>"
    return None


def settings_for(case: dict) -> tuple[dict, dict]:
    """(request, option values) that put thinkwire where the peer's test puts its parser."""
    request = {"model": case.get("model") or "custom-model", **(case.get("request") or {})}
    values: dict = {}
    pair = custom_pair(case)
    if pair is not None and pair != ("<think>", "</think>"):
        values["tags"] = f"{pair[0]} {pair[1]}"
    opened = opened_in_prompt(case)
    if opened:
        values["starts_inside"] = "on"
    elif opened is False:
        # The prompt did not open the block: what a request that turns thinking off tells a profile.
        kwargs = dict(request.get("chat_template_kwargs") or {}, enable_thinking=False)
        request["chat_template_kwargs"] = kwargs
    return request, values


# -- running one case on each surface --------------------------------------------------------------
def _blocks_and_answer(reasoning: list[str], content: str) -> tuple[tuple[str, ...], str]:
    return tuple(r for r in reasoning if r), content


def run_chat_body(text, request, values):
    body = json.dumps({"model": request["model"], "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
    new = chat.rewrite_body(body.encode(), make_ctx(request, **values))
    msg = json.loads(new)["choices"][0]["message"] if new else {"content": text}
    r = msg.get("reasoning_content") or ""
    return _blocks_and_answer(r.split(chat.BLOCK_JOIN) if r else [], msg["content"])


def run_chat_stream(chunks, request, values):
    driver = engine.stream_driver(chat, make_ctx(request, **values))
    out = []
    for c in chunks:
        ev = {"model": request["model"], "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
        out += driver(b"data: " + json.dumps(ev).encode() + b"\n\n")
    out += driver(b"data: [DONE]\n\n") + driver(b"")
    assert driver.failure is None, driver.failure
    cur, content = "", ""
    for line in b"".join(out).split(b"\n"):
        if line.startswith(b"data: {"):
            d = json.loads(line[6:])["choices"][0]["delta"]
            if d.get("reasoning_content"):
                cur += d["reasoning_content"]
            if d.get("content"):
                content += d["content"]
    r = cur
    return _blocks_and_answer(r.split(chat.BLOCK_JOIN) if r else [], content)


def _messages_result(content_blocks):
    thinking = [b["thinking"] for b in content_blocks if b["type"] == "thinking"]
    text = "".join(b["text"] for b in content_blocks if b["type"] == "text")
    return _blocks_and_answer(thinking, text)


def run_messages_body(text, request, values):
    body = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": request["model"],
                       "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"})
    new = messages.rewrite_body(body.encode(), make_ctx(request, **values))
    return _messages_result(json.loads(new or body)["content"])


def run_messages_stream(chunks, request, values):
    evs = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                 "model": request["model"], "content": []}},
           {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
    evs += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": c}} for c in chunks]
    evs += [{"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
            {"type": "message_stop"}]
    driver = engine.stream_driver(messages, make_ctx(request, **values))
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
    return _messages_result(blocks)


def _responses_result(output):
    reasoning, text = [], ""
    for it in output:
        if it["type"] == "reasoning":
            parts = it.get("content") or it.get("summary") or []
            reasoning.append("".join(p["text"] for p in parts))
        elif it["type"] == "message":
            text += "".join(p.get("text", "") for p in it["content"])
    return _blocks_and_answer(reasoning, text)


def _response(request, output, status):
    return {"id": "resp_1", "object": "response", "model": request["model"], "status": status, "output": output}


def run_responses_body(text, request, values):
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}
    body = json.dumps(_response(request, [item], "completed"))
    new = responses.rewrite_body(body.encode(), make_ctx(request, **values))
    return _responses_result(json.loads(new or body)["output"])


def run_responses_stream(chunks, request, values):
    text = "".join(chunks)
    part = {"type": "output_text", "text": "", "annotations": []}
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    done = dict(item, status="completed", content=[dict(part, text=text)])
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
            {"type": "response.completed", "response": _response(request, [done], "completed")}]
    driver = engine.stream_driver(responses, make_ctx(request, **values))
    out = []
    for n, ev in enumerate(evs):
        out += driver(f"data: {json.dumps(dict(ev, sequence_number=n))}\n\n".encode())
    out += driver(b"")
    assert driver.failure is None, driver.failure
    final = [json.loads(line[6:]) for line in b"".join(out).split(b"\n") if line.startswith(b"data: ")][-1]
    assert final["type"] == "response.completed"
    return _responses_result(final["response"]["output"])


BODIES = {"chat": run_chat_body, "messages": run_messages_body, "responses": run_responses_body}
STREAMS = {"chat": run_chat_stream, "messages": run_messages_stream, "responses": run_responses_stream}


def chunkings(case: dict) -> dict[str, list[str]]:
    text = case["output"]
    out = {"whole": [text], "per character": list(text) or [""]}
    if case.get("chunks"):
        out["the peer's chunks"] = case["chunks"]
    rnd = random.Random(case["id"])
    for k in range(2):
        cuts = sorted(rnd.sample(range(1, len(text)), min(len(text) - 1, rnd.randint(1, 12)))) if len(text) > 1 else []
        out[f"random {k}"] = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    return out


def thinkwire_result(case: dict) -> tuple[tuple[str, ...], str]:
    request, values = settings_for(case)
    return run_messages_body(case["output"], request, values)   # blocks kept apart


# -- the peer's expectation ------------------------------------------------------------------------
def expectations(case: dict) -> dict[str, tuple[str | None, str | None]]:
    """mode -> (reasoning, content) the peer asserts; None where a field is not asserted."""
    out = {}
    for mode in ("body", "stream"):
        exp = case.get(mode)
        if not isinstance(exp, dict):
            continue
        got = []
        for field in ("reasoning", "content"):
            v = exp.get(field)
            if v is None and case["peer"] != "vllm":
                got.append(None)          # a field the peer's test leaves unchecked
            else:
                got.append(v or "")       # vLLM's parsers return None for "no text"
        if got != [None, None]:
            out[mode] = tuple(got)
    return out


def broken_relations(case: dict, ours) -> list[str]:
    """The peer's substring checks (`body.content` contains ...) that thinkwire's result fails.
    Its other relations (stream equals body, the same result at another chunking) are what
    test_every_surface_body_and_stream_agree checks for every case."""
    fields = {"reasoning": _joined(ours), "content": ours[1]}
    broken = []
    for kind, check in (("assert_in", lambda v, x: x in v), ("assert_not_in", lambda v, x: x not in v),
                        ("assert_prefix", lambda v, x: v.startswith(x))):
        for key, wanted in (case.get(kind) or {}).items():
            scope, _, field = key.partition(".")
            if scope not in ("body", "stream") or field not in fields:
                continue     # per-chunk checks (stream_chunks[n]): a finished result cannot tell
            for x in (wanted if isinstance(wanted, list) else [wanted]):
                if not check(fields[field], x):
                    broken.append((kind, field, x))
    for key in case.get("assert_nonempty") or []:
        field = key.partition(".")[2]
        if field in fields and not fields[field]:
            broken.append(("assert_nonempty", field, ""))
    return broken


def _value(ours, field: str) -> str:
    return _joined(ours) if field == "reasoning" else ours[1]


def _all_tags(case: dict) -> list[str]:
    rules = _rules(case)
    return [t for p in rules.pairs for t in (p.open, p.close)] + list(rules.strip) + list(rules.ends)


# Where a peer's substring check fails on thinkwire's result, one of the rules below must say why.
RELATION_RULES = {
    # The output was cut off inside a marker: the start of it stays text.
    "partial-tag-kept": lambda case, ours, kind, field, x: (
        kind == "assert_not_in" and _value(ours, field).endswith(x)
        and any(t.startswith(x) and t != x for t in _all_tags(case))),
    # The peer expects whitespace that thinkwire trims at a block's edge.
    "whitespace": lambda case, ours, kind, field, x: (
        kind == "assert_in" and _bare(x) in _bare(_value(ours, field))),
    # The peer keeps a tool call in the reasoning; it ended the reasoning and is in the answer.
    "tool-call-ends-reasoning": lambda case, ours, kind, field, x: (
        kind == "assert_in" and field == "reasoning" and x in _rules(case).ends and x in ours[1]),
}


# -- the rules: where thinkwire differs on purpose -------------------------------------------------
def _rules(case: dict):
    request, values = settings_for(case)
    return make_ctx(request, **values).rules()


def _tags(case: dict) -> list[str]:
    rules = _rules(case)
    tags = {t for p in rules.pairs for t in (p.open, p.close)} | set(rules.strip)
    return sorted(tags, key=len, reverse=True)


def _without_markup(case: dict, s: str) -> str:
    for t in _tags(case):
        s = s.replace(t, "")
    return s


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _bare(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _joined(ours) -> str:
    return chat.BLOCK_JOIN.join(ours[0])


def _agrees(ours, peer, norm=lambda s: s, first_block_only=False) -> bool:
    r = ours[0][0] if first_block_only and ours[0] else _joined(ours)
    pr, pc = peer
    return (pr is None or norm(pr) == norm(r)) and (pc is None or norm(pc) == norm(ours[1]))


RULES: dict = {}


def rule(name: str):
    def add(fn):
        RULES[name] = fn
        return fn
    return add


@rule("whitespace")
def _whitespace(case, ours, peer):
    """Only whitespace differs: thinkwire trims it at the edges of a reasoning block and at the start
    of the answer after one, joins several blocks with a blank line and the answer around them with
    nothing (the peer may keep the model's newlines, or join with its own separator)."""
    return _agrees(ours, peer, _bare)


@rule("no-markup")
def _no_markup(case, ours, peer):
    """No tag reaches the client: the peer leaves a tag (a second closing tag, an opening tag written
    inside a prompt-opened block, a prepended `<think>`) in its reasoning or answer."""
    pr, pc = peer
    leaked = any(t in (pr or "") + (pc or "") for t in _tags(case))
    return leaked and _agrees(ours, peer, lambda s: _norm(_without_markup(case, s)))


@rule("stray-close")
def _stray_close(case, ours, peer):
    """For a model whose template opens the block in the prompt, a closing tag with no opening tag
    ends reasoning even where the peer's test sets no "forced open" switch; the peer keeps it all
    as answer text, tag included."""
    pr, pc = peer
    closes = [t for t in _tags(case) if t.startswith(("</", "[/", "<|END", "◁/"))]
    return (not pr and pc is not None and any(t in pc for t in closes)
            and _bare(_without_markup(case, pc)) == _bare(_joined(ours) + ours[1]))


@rule("stream-equals-body")
def _stream_equals_body(case, ours, peer, mode):
    """The peer's own stream and body disagree on this output; thinkwire gives the same result for
    both, the one the peer's body gives."""
    body = expectations(case).get("body")
    return mode == "stream" and body is not None and _agrees(ours, body, _bare)


@rule("ended-as-answer")
def _ended_as_answer(case, ours, peer):
    """An output that started inside a block the template opened and has no closing tag, from a
    response that says it ended complete (finish_reason stop, end_turn), is an answer the model
    gave without thinking; the peer's test says nothing of how the output ended and takes it as
    reasoning cut off. (A stream cannot know in time: it gives the peer's reasoning.)"""
    pr, pc = peer
    rules = _rules(case)
    return (rules.starts_inside and not ours[0] and bool(pr) and not pc
            and not any(p.close in case["output"] for p in rules.pairs)
            and _bare(ours[1]).startswith(_bare(pr)))


@rule("every-block")
def _every_block(case, ours, peer):
    """Every reasoning block is moved, in order; the peer takes only the first."""
    pr, pc = peer
    return len(ours[0]) >= 2 and (pr is None or _norm(pr) == _norm(ours[0][0]))


@rule("no-extraction-asked")
def _no_extraction(case, ours, peer):
    """The peer's test turns reasoning extraction off (llama.cpp reasoning_format none or
    reasoning_in_content, SGLang/vLLM force_nonempty_content copying reasoning into the answer);
    thinkwire has no such switch per request: a proxy always moves reasoning."""
    a = _args(case)
    req = (case.get("request") or {}).get("chat_template_kwargs") or {}
    pr, pc = peer
    if _bare(_without_markup(case, pc or "")).find(_bare(_joined(ours))) < 0:
        return False      # the peer must have left the reasoning in its answer
    if case["peer"] == "llamacpp" and "reasoning_format" not in a and "template" not in a:
        return True   # test-chat.cpp parses with the default syntax: reasoning_format none
    return ("append_think" in case.get("parser", "") or "append-think" in case.get("parser", "")
            or a.get("reasoning_format") == "none" or a.get("reasoning_in_content") is True
            or a.get("force_nonempty_content") is True or req.get("force_nonempty_content") is True)


@rule("tool-calls-parsed")
def _tool_calls(case, ours, peer):
    """The peer also parses tool calls out of the answer; thinkwire moves reasoning only, and a tool
    call stays in the answer as the model wrote it, for a tool parser."""
    pc = peer[1] or ""
    ended_at_call = any(ours[1].startswith(e) for e in _rules(case).ends)
    kept_as_answer = not ours[0] and _bare(ours[1]).startswith(_bare(peer[0] or ""))  # answer-before-stray-close
    if peer[0] is not None and _bare(peer[0]) != _bare(_joined(ours)) and not (ended_at_call or kept_as_answer):
        return False      # the reasoning must agree (or have ended at the call): the tool calls differ
    return (bool(case.get("tool_calls")) or bool(_args(case).get("parse_tool_calls"))
            or bool(_args(case).get("tool_call_parser_active"))
            or ("to=functions." in ours[1] and "to=functions." not in pc))


@rule("tool-call-ends-reasoning")
def _tool_call_ends(case, ours, peer):
    """A tool call the model starts inside an unclosed reasoning block ends the block and stays in
    the answer (as vLLM and SGLang do); this peer keeps it, or what follows it, in the reasoning."""
    ends = _rules(case).ends
    pr = peer[0] or ""
    # The same text, placed differently.
    return any(e in ours[1] for e in ends) and sorted(_bare(pr + (peer[1] or ""))) == sorted(_bare(_joined(ours) + ours[1]))


@rule("partial-tag-kept")
def _partial_tag_kept(case, ours, peer):
    """Text that is only the start of a tag (an output cut off mid-tag, a marker missing its last
    token) stays text: nothing is dropped that might not be markup; the peer drops it."""
    rules = _rules(case)
    tags = [t for p in rules.pairs for t in (p.open, p.close)] + list(rules.strip) + list(rules.ends)

    def cut(s):
        for k in range(min(len(s), max(map(len, tags))), 0, -1):
            if any(t.startswith(s[-k:]) and len(t) > k for t in tags):
                return s[:-k]
        return s
    return _agrees((tuple(cut(r) for r in ours[0]), cut(ours[1])), peer, _bare)


@rule("mid-line-opening-tag")
def _mid_line(case, ours, peer):
    """An opening tag counts at the start of the output, at a line start, or after a block; in
    the middle of a sentence it is text (prose about tags stays prose); the peer counts it there."""
    rules = _rules(case)
    text = case["output"]
    first = min((text.find(p.open) for p in rules.pairs if p.open in text), default=-1)
    mid = first > 0 and text[:first].rsplit("\n", 1)[-1].strip() != ""
    return mid and not ours[0] and sorted(_bare(_without_markup(case, (peer[0] or "") + (peer[1] or "")))) == sorted(
        _bare(_without_markup(case, ours[1])))


@rule("response-format")
def _response_format(case, ours, peer):
    """The peer's test also applies a JSON response format to the answer (strips its code fence);
    thinkwire leaves the answer's text as the model wrote it."""
    return "json_schema" in _args(case)


@rule("continued-message")
def _continued(case, ours, peer):
    """The peer continues an assistant message the request prefilled (continue_final_message) and
    carries its parser state over; thinkwire splits each response on its own."""
    return bool(_args(case).get("continue_final_message") or (case.get("request") or {}).get("continue_final_message"))


@rule("partial-output")
def _partial(case, ours, peer, mode):
    """The peer's test stops mid-output (llama.cpp parses a cut output as still being generated;
    SGLang's stream tests that never call finish() assert what is held back so far); thinkwire's
    result is for a finished output (its stream holds back exactly such a tail until the text
    decides it)."""
    return bool(case.get("partial")) or (case["peer"] == "sglang" and mode == "stream" and not case.get("finish"))


@rule("tagless-is-answer")
def _tagless(case, ours, peer):
    """An output with no tag at all, from a model whose template does not open the block in the
    prompt (hybrid Qwen3, GLM-4.5), is an answer; the peer assumes thinking was on."""
    text = case["output"]
    for e in _rules(case).ends:          # a tool call after it is not reasoning markup
        text = text.split(e, 1)[0]
    # (A test that declares its own tags may feed look-alikes of them: those are text.)
    return (case.get("markers") or _MARKUP.search(text) is None) and not ours[0]


# Anything shaped like a tag or a special token, known to thinkwire or not.
_MARKUP = re.compile(r"<[|/]?[A-Za-z_:|.-]+\|?>|<\|[^>]*>|\[/?[A-Z_]+\]|◁/?think▷")


def classify(case: dict) -> str:
    """'agrees', a rule name, or 'UNEXPLAINED: ...'."""
    ours = thinkwire_result(case)
    exp = expectations(case)
    if not exp:
        broken = broken_relations(case, ours)
        if not broken:
            return "relations-only"
        for name, explains in RELATION_RULES.items():
            if all(explains(case, ours, *b) for b in broken):
                return name
        return f"UNEXPLAINED: relations {broken} thinkwire={(_joined(ours), ours[1])!r}"
    bad = {mode: peer for mode, peer in exp.items() if not _agrees(ours, peer)}
    if not bad:
        return "agrees"
    for name, check in RULES.items():
        takes_mode = check.__code__.co_argcount == 4
        if all(check(case, ours, peer, mode) if takes_mode else check(case, ours, peer)
               for mode, peer in bad.items()):
            return name
    mode, peer = next(iter(bad.items()))
    return f"UNEXPLAINED: {mode} peer={peer!r} thinkwire={(_joined(ours), ours[1])!r}"


# -- the tests ----------------------------------------------------------------------------------------
IDS = [c["id"] for c in CASES]


def test_case_ids_are_unique():
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_surface_body_and_stream_agree(case):
    """Every surface gives one result for a body and one for a stream at any chunking: the
    splitter's over the whole text. They differ only where the body knows more than its stream
    could (README, "What it does, exactly"): a closing tag with no opening tag, which makes the
    text before it reasoning in a body; an output that started inside a block and has no tag
    at all, which a body that ended complete (finish_reason stop) makes an answer."""
    request, values = settings_for(case)

    def joined(result):   # chat carries several blocks as one text: compare them that way
        return chat.BLOCK_JOIN.join(result[0]), result[1]
    body = joined(run_chat_body(case["output"], request, values))
    rules = make_ctx(request, **values).rules()
    split = split_text(case["output"], rules)
    stream = joined(_blocks_and_answer(split.reasoning, split.content))
    for surface in BODIES:
        assert joined(BODIES[surface](case["output"], request, values)) == body, surface
        for how, chunks in chunkings(case).items():
            assert joined(STREAMS[surface](chunks, request, values)) == stream, (surface, how)
    if body != stream:
        unclosed = rules.starts_inside and split.pieces[-1:] == [(END, split.pieces[-1][1])] and sum(
            k == END for k, _ in split.pieces) == 1 and not any(t in case["output"] for t in _all_tags(case))
        # (The answer keeps its trailing whitespace; a reasoning block's edges are trimmed.)
        assert split.stray_closes or (unclosed and body[0] == "" and body[1].rstrip() == stream[0]), (body, stream)


_RECORDED = json.loads(DIFFERENCES.read_text()) if DIFFERENCES.exists() else {}
_SEEN: dict = {}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_agrees_with_the_peer_or_differs_by_a_stated_rule(case):
    got = classify(case)
    _SEEN[case["id"]] = got
    assert not got.startswith("UNEXPLAINED"), got
    if os.environ.get("THINKWIRE_CONFORMANCE_WRITE"):
        return
    assert got == _RECORDED.get(case["id"], "agrees"), f"recorded {_RECORDED.get(case['id'], 'agrees')!r}, now {got!r}"


def test_write_the_recorded_differences():
    """With THINKWIRE_CONFORMANCE_WRITE=1: record the classification of every case (run last)."""
    if not os.environ.get("THINKWIRE_CONFORMANCE_WRITE"):
        pytest.skip("set THINKWIRE_CONFORMANCE_WRITE=1 to rewrite tests/conformance/differences.json")
    missing = [c["id"] for c in CASES if c["id"] not in _SEEN]
    assert not missing, "run the whole module"
    diff = {k: v for k, v in sorted(_SEEN.items()) if v != "agrees"}
    DIFFERENCES.write_text(json.dumps(diff, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def test_every_rule_is_stated_in_the_readme():
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Where thinkwire differs from vLLM and SGLang", 1)[1].split("\n## ", 1)[0]
    for name in RULES:
        assert f"`{name}`" in section, name
