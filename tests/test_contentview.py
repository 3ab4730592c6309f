"""The mitmweb content views and the bodies kept for inspection.

The "thinkwire" view reads any of the three surfaces, JSON body or SSE stream, request or
response, from the wire format alone; it wins over the JSON view only for flows the addon
handled, without parsing anything to decide. The addon keeps a rewritten streamed body, and the
upstream's original, only when the user asked mitmproxy to keep flows.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mitmproxy import contentviews, flow, io
from mitmproxy.contentviews import Metadata
from mitmproxy.test import taddons, tflow, tutils

from conftest import make_ctx, make_settings
from harness import ADDON, post, sse, sse_reply
from devtools import demo
from thinkwire import bodies, contentview, engine
from thinkwire.addon import ThinkWire
from thinkwire.contentview import UPSTREAM_KEY, ThinkwireContentview, _wrapped, read_request, read_response, render

SSE = "text/event-stream"
JSON = "application/json"


def sections(text: str) -> list[tuple[str, str]]:
    """(section title, its text) in order, from a rendered view."""
    out = []
    for m in re.finditer(r"^── (.+?) ─+\n(.*?)(?=\n\n|\Z)", text, re.S | re.M):
        out.append((m.group(1), m.group(2)))
    return out


def view(data: bytes, content_type: str = JSON, surface: str | None = None) -> str:
    return render(read_response(data, surface, content_type))


def flow_for(path: str, data: bytes, content_type: str, handled: bool = True, request: dict | None = None):
    f = tflow.tflow(req=tutils.treq(path=path.encode(), content=json.dumps(request or {"model": "m"}).encode()),
                    resp=tutils.tresp(content=data))
    f.response.headers["content-type"] = content_type
    if handled:
        f.metadata["thinkwire"] = {"surface": contentview.surface_of_path(path), "blocks": 1,
                                   "reasoning_chars": 1, "fell_back": None}
    return f


# -- chat completions --------------------------------------------------------------------------
def test_chat_body_shows_model_reasoning_answer_tool_call_finish_and_usage():
    body = {"id": "c1", "model": "qwen3", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "hi", "reasoning_content": "x",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "f", "arguments": "{\"a\":1}"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}
    text = view(json.dumps(body).encode())
    assert re.search(r"^model\s+qwen3$", text, re.M)
    assert sections(text) == [("reasoning", "x"), ("answer", "hi"),
                              ("tool call: f · call_1", '{\n  "a": 1\n}')]
    assert re.search(r"^finish reason\s+tool_calls$", text, re.M)
    assert "prompt_tokens=3 completion_tokens=4 total_tokens=7" in text


def test_chat_stream_accumulates_deltas_in_order():
    chunks = [{"model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "thin"}}]},
              {"model": "m", "choices": [{"index": 0, "delta": {"reasoning_content": "king"}}]},
              {"model": "m", "choices": [{"index": 0, "delta": {"content": "an"}}]},
              {"model": "m", "choices": [{"index": 0, "delta": {"content": "swer"}}]},
              {"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
                  {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{\"a\""}}]}}]},
              {"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
                  {"index": 0, "function": {"arguments": ":1}"}}]}, "finish_reason": "tool_calls"}]},
              {"model": "m", "choices": [], "usage": {"total_tokens": 9}}]
    text = view(b"".join(sse(*chunks, "[DONE]")), SSE)
    assert "(stream, 8 events)" in text
    assert sections(text) == [("reasoning", "thinking"), ("answer", "answer"),
                              ("tool call: f · call_1", '{\n  "a": 1\n}')]
    assert re.search(r"^finish reason\s+tool_calls$", text, re.M) and "total_tokens=9" in text


def test_chat_stream_reasoning_field_named_reasoning_and_blocks_in_order():
    chunks = [{"choices": [{"index": 0, "delta": {"reasoning": "a"}}]},
              {"choices": [{"index": 0, "delta": {"content": "b"}}]},
              {"choices": [{"index": 0, "delta": {"reasoning": "c"}}]},
              {"choices": [{"index": 0, "delta": {"content": "d"}, "finish_reason": "stop"}]}]
    text = view(b"".join(sse(*chunks)), SSE)
    assert sections(text) == [("reasoning", "a"), ("answer", "b"), ("reasoning", "c"), ("answer", "d")]


def test_chat_stream_with_several_choices_groups_them():
    chunks = [{"choices": [{"index": 0, "delta": {"content": "zero"}}, {"index": 1, "delta": {"reasoning_content": "one"}}]},
              {"choices": [{"index": 1, "delta": {"content": "uno"}, "finish_reason": "stop"}]}]
    text = view(b"".join(sse(*chunks)), SSE)
    assert text.index("══ choice 0") < text.index("zero") < text.index("══ choice 1") < text.index("one") < text.index("uno")
    assert re.search(r"^choice 1 finish reason\s+stop$", text, re.M)


# -- Responses -----------------------------------------------------------------------------------
RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "model": "m", "output": [
    {"id": "rs_1", "type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "x"}]},
    {"id": "msg_1", "type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "hi", "annotations": []}]},
    {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}],
    "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}}


def test_responses_body_shows_items_in_order():
    text = view(json.dumps(RESPONSE).encode())
    assert "OpenAI responses (body)" in text and re.search(r"^status\s+completed$", text, re.M)
    assert sections(text) == [("reasoning", "x"), ("answer", "hi"), ("tool call: f · call_1", "{}")]
    assert "input_tokens=1 output_tokens=2 total_tokens=3" in text


def _responses_events() -> list[bytes]:
    evs = [("response.created", {"response": dict(RESPONSE, status="in_progress", output=[])}),
           ("response.output_item.added", {"output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": []}}),
           ("response.reasoning_summary_text.delta", {"output_index": 0, "summary_index": 0, "delta": "sum"}),
           ("response.reasoning_text.delta", {"output_index": 0, "content_index": 0, "delta": "thin"}),
           ("response.reasoning_text.delta", {"output_index": 0, "content_index": 0, "delta": "king"}),
           ("response.output_item.added", {"output_index": 1, "item": {"id": "msg_1", "type": "message"}}),
           ("response.output_text.delta", {"output_index": 1, "content_index": 0, "delta": "hi"}),
           ("response.output_item.added", {"output_index": 2, "item": {"type": "function_call", "name": "f"}}),
           ("response.function_call_arguments.delta", {"output_index": 2, "delta": "{}"}),
           ("response.output_item.done", {"output_index": 2, "item": RESPONSE["output"][2]}),
           ("response.completed", {"response": RESPONSE})]
    return sse(*[dict(body, type=t, sequence_number=i) for i, (t, body) in enumerate(evs)], event=True)


def test_responses_stream_reads_deltas_by_output_index():
    text = view(b"".join(_responses_events()), SSE)
    assert "OpenAI responses (stream, 11 events)" in text
    assert sections(text) == [("reasoning summary", "sum"), ("reasoning", "thinking"), ("answer", "hi"),
                              ("tool call: f · call_1", "{}")]
    assert re.search(r"^model\s+m$", text, re.M) and "total_tokens=3" in text


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_responses_reasoning_in_both_summary_and_content_is_shown_once(stream):
    # The same text in both (think_responses_content=on). A differing summary still shows (test above).
    ctx = make_ctx({"model": "m"}, responses_content="on")
    out = demo.responses_reply("<think>plan it</think>done", False, stream)
    if stream:
        driver = engine.stream_driver(engine.SURFACES["responses"], ctx)
        data = b"".join(b"".join(driver(c)) for c in out) + b"".join(driver(b""))
    else:
        data = engine.SURFACES["responses"].rewrite_body(json.dumps(out).encode(), ctx)
    assert b"reasoning_summary" in data or b"summary_text" in data
    assert sections(view(data, SSE if stream else JSON)) == [("reasoning", "plan it"), ("answer", "done")]


# -- Anthropic Messages ---------------------------------------------------------------------------
def test_messages_body_shows_blocks_in_order_and_stop_reason():
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [
        {"type": "thinking", "thinking": "x", "signature": "sig"},
        {"type": "redacted_thinking", "data": "EmwK"},
        {"type": "text", "text": "hi"},
        {"type": "tool_use", "id": "tu_1", "name": "f", "input": {"a": 1}}],
        "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 9}}
    text = view(json.dumps(body).encode())
    assert "Anthropic messages (body)" in text and re.search(r"^model\s+claude$", text, re.M)
    assert [t for t, _ in sections(text)] == ["reasoning", "reasoning (redacted)", "answer", "tool call: f · tu_1"]
    assert "(signature: 3 chars)" in text
    assert re.search(r"^stop reason\s+tool_use$", text, re.M) and "input_tokens=3 output_tokens=9" in text


def test_messages_stream_accumulates_blocks_by_index():
    evs = [{"type": "message_start", "message": {"id": "msg_1", "model": "claude", "content": [],
                                                 "usage": {"input_tokens": 3, "output_tokens": 1}}},
           {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
           {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "thin"}},
           {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "king"}},
           {"type": "content_block_stop", "index": 0},
           {"type": "ping"},
           {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
           {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "hi"}},
           {"type": "content_block_stop", "index": 1},
           {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "tu_1", "name": "f", "input": {}}},
           {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}},
           {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "1}"}},
           {"type": "content_block_stop", "index": 2},
           {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
           {"type": "message_stop"}]
    text = view(b"".join(sse(*evs, event=True)), SSE)
    assert sections(text) == [("reasoning", "thinking"), ("answer", "hi"), ("tool call: f · tu_1", '{\n  "a": 1\n}')]
    assert re.search(r"^stop reason\s+tool_use$", text, re.M) and "input_tokens=3 output_tokens=9" in text


# -- what the rewriters make, read back --------------------------------------------------------------
@pytest.mark.parametrize("surface,reply", [("chat", demo.chat_reply), ("responses", demo.responses_reply),
                                           ("messages", demo.messages_reply)])
@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_each_surface_rewritten_shows_reasoning_before_answer_and_the_tool_call(surface, reply, stream):
    mod = engine.SURFACES.get(surface)
    if mod is None:
        pytest.skip(f"the {surface} surface is not registered yet")
    out = reply(demo.TOOL, True, stream)
    ctx = make_ctx({"model": demo.MODEL})
    if stream:
        driver = engine.stream_driver(mod, ctx)
        data = b"".join(b"".join(driver(c)) for c in out) + b"".join(driver(b""))
    else:
        data = mod.rewrite_body(json.dumps(out).encode(), ctx)
    text = view(data, SSE if stream else JSON)
    reasoning, _, rest = demo.TOOL.removeprefix("<think>").partition("</think>")
    # By default Responses reasoning is in the summary only (think_responses_content=off); the
    # view folds long lines at WRAP columns (mitmweb does not wrap them).
    label = "reasoning summary" if surface == "responses" else "reasoning"
    assert sections(text)[:3] == [(label, "\n".join(_wrapped(reasoning))), ("answer", rest),
                                  (sections(text)[2][0], json.dumps(json.loads(demo.TOOL_ARGS), indent=2))]
    assert demo.TOOL_NAME in sections(text)[2][0]


# -- requests ---------------------------------------------------------------------------------
def test_chat_request_shows_messages_with_roles_reasoning_and_tools():
    req = {"model": "m", "stream": True, "reasoning_effort": "high",
           "tools": [{"type": "function", "function": {"name": "f"}}],
           "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q"},
                        {"role": "assistant", "content": "a", "reasoning_content": "r",
                         "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "c1", "content": "42"}]}
    text = render(read_request(json.dumps(req).encode(), "chat"), request=True)
    assert "(request)" in text and re.search(r"^tools\s+f$", text, re.M)
    assert re.search(r"^reasoning_effort\s+high$", text, re.M)
    order = ["══ #0 system", "be brief", "══ #1 user", "══ #2 assistant", "── reasoning", "── tool call: f · c1",
             "══ #3 tool", "── tool result: c1"]
    assert [text.index(s) for s in order] == sorted(text.index(s) for s in order)


def test_responses_and_messages_requests_show_their_inputs():
    r = render(read_request(json.dumps({"model": "m", "instructions": "sys", "input": [
        {"role": "user", "content": "q"}, RESPONSE["output"][0],
        {"type": "function_call_output", "call_id": "call_1", "output": "42"}]}).encode(), "responses"), request=True)
    assert "══ instructions" in r and "══ #0 user" in r and "── reasoning" in r and "── tool result: call_1" in r
    m = render(read_request(json.dumps({"model": "m", "max_tokens": 9, "system": "sys", "messages": [
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "tw1.x"},
                                          {"type": "text", "text": "a"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "42"}]}]}).encode(),
        "messages"), request=True)
    assert "Anthropic messages (request)" in m and "── reasoning" in m and "── tool result: tu_1" in m


# -- choosing the view ---------------------------------------------------------------------------
def test_render_priority_is_zero_for_flows_thinkwire_did_not_handle():
    v = ThinkwireContentview()
    f = flow_for("/v1/chat/completions", b'{"choices": []}', JSON, handled=False)
    assert v.render_priority(f.response.content, Metadata(flow=f, http_message=f.response, content_type=JSON)) == 0
    assert v.render_priority(b"{}", Metadata(content_type=JSON)) == 0   # no flow at all


def test_render_priority_beats_json_for_handled_flows_without_parsing():
    v = ThinkwireContentview()
    f = flow_for("/v1/chat/completions", b"not even json", JSON)
    for ct in (JSON, SSE):
        assert v.render_priority(b"not even json", Metadata(flow=f, http_message=f.response, content_type=ct)) > 1
    assert v.render_priority(b"<html>", Metadata(flow=f, http_message=f.response, content_type="text/html")) == 0


def test_mitmproxy_picks_thinkwire_for_handled_flows_and_json_for_others():
    body = json.dumps({"model": "m", "choices": [{"index": 0, "message": {"content": "hi", "reasoning_content": "x"}}]}).encode()
    with taddons.context(ThinkWire()):   # loading the addon registers the views
        assert "thinkwire" in contentviews.registry and "thinkwire upstream" in contentviews.registry
        handled = flow_for("/v1/chat/completions", body, JSON)
        other = flow_for("/v1/chat/completions", body, JSON, handled=False)
        assert contentviews.prettify_message(handled.response, handled).view_name == "thinkwire"
        assert contentviews.prettify_message(handled.request, handled).view_name == "thinkwire"
        assert contentviews.prettify_message(other.response, other).view_name == "JSON"


def test_a_body_the_view_cannot_read_falls_back_to_raw():
    with taddons.context(ThinkWire()):
        f = flow_for("/v1/chat/completions", b"<html>oops</html>", JSON)
        r = contentviews.prettify_message(f.response, f)
        assert r.view_name == "Raw" and "oops" in r.text


def test_upstream_view_shows_the_kept_original_then_its_raw_bytes():
    original = b"".join(sse({"choices": [{"index": 0, "delta": {"content": "<think>x</think>hi"}}]}))
    with taddons.context(ThinkWire()):
        f = flow_for("/v1/chat/completions", b"data: {}\n\n", SSE)
        f.metadata[UPSTREAM_KEY] = {"text": original.decode(), "content_type": SSE}
        text = contentviews.prettify_message(f.response, f, "thinkwire upstream").text
        assert "as the upstream sent it" in text and sections(text) == [("answer", "<think>x</think>hi")]
        assert text.rstrip().endswith(original.decode().rstrip())
        f.metadata[UPSTREAM_KEY] = {"same": True}
        assert "exactly what the client got" in contentviews.prettify_message(f.response, f, "thinkwire upstream").text
        del f.metadata[UPSTREAM_KEY]
        assert "No upstream copy kept" in contentviews.prettify_message(f.response, f, "thinkwire upstream").text


# -- keeping bodies ----------------------------------------------------------------------------
class _Opts:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __contains__(self, k):
        return k in self.__dict__


@pytest.mark.parametrize("opts,want", [
    (_Opts(store_streamed_bodies=False, save_stream_file=None), False),   # plain mitmdump
    (_Opts(store_streamed_bodies=True, save_stream_file=None), True),
    (_Opts(store_streamed_bodies=False, save_stream_file="flows"), True),  # -w
    (_Opts(store_streamed_bodies=False, save_stream_file=None, web_port=8081), True),   # mitmweb
    (_Opts(store_streamed_bodies=False, save_stream_file=None, console_layout="single"), True),
])
def test_bodies_are_kept_only_when_the_user_keeps_flows(opts, want):
    assert bodies.wanted(opts) is want


def _streamed_flow(chunks: list[bytes], encoding: str | None = None):
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.options.add_option("store_streamed_bodies", bool, False, "")
        tctx.options.add_option("save_stream_file", str | None, None, "")
        tctx.configure(tw, store_streamed_bodies=True)
        f = flow_for("/v1/chat/completions", b"", SSE, handled=False)
        f.response.raw_content = None
        if encoding:
            f.response.headers["content-encoding"] = encoding
        tw.responseheaders(f)
        assert isinstance(f.response.stream, bodies.Recorder)
        sent = b"".join(b"".join(f.response.stream(c)) for c in chunks + [b""])
        tw.response(f)
    return f, sent


def test_a_streamed_flow_keeps_the_body_the_client_got_and_the_upstreams():
    up = b"".join(sse({"choices": [{"index": 0, "delta": {"content": "<think>x</think>hi"}}]}, "[DONE]"))
    f, sent = _streamed_flow([up[:9], up[9:]])
    assert f.response.raw_content == sent and b"reasoning_content" in sent
    assert f.metadata[UPSTREAM_KEY] == {"text": up.decode(), "content_type": SSE}
    json.dumps(f.metadata)   # metadata stays serializable


def test_a_compressed_stream_keeps_the_upstream_body_decoded():
    up = b"".join(sse({"choices": [{"index": 0, "delta": {"content": "<think>x</think>hi"}}]}))
    z = gzip.compress(up)
    f, sent = _streamed_flow([z[:5], z[5:]], "gzip")
    assert f.metadata[UPSTREAM_KEY]["text"] == up.decode() and f.response.raw_content == sent


def test_a_compressed_stream_bomb_is_not_decoded_past_the_keep_limit(monkeypatch):
    """The kept upstream stream is decoded with the cap the two copies share (before: with
    mitmproxy's decoder, to whatever size it makes: 800 bytes of brotli make 100 MiB)."""
    import brotli
    monkeypatch.setattr(bodies, "KEEP_LIMIT", 16 << 20)   # the client's copy: the stream's 8 MiB read
    made = []
    real = brotli.Decompressor

    class Counting:
        def __init__(self):
            self._d = real()

        def __getattr__(self, name):
            return getattr(self._d, name)

        def process(self, *a, **k):
            out = self._d.process(*a, **k)
            made.append(len(out))
            return out
    monkeypatch.setattr(brotli, "Decompressor", Counting)
    bomb = brotli.compress(b"data: " + b"a" * (100 << 20) + b"\n\n", quality=5)
    f, sent = _streamed_flow([bomb], "br")
    assert len(sent) == 8 << 20
    assert f.metadata[UPSTREAM_KEY] == {"note": f"not kept: larger than {16 << 20} bytes decoded"}
    # The stream's capped read, then the rest of the keep cap, each past its cap by a step at most.
    assert sum(made) <= (8 << 20) + (8 << 20) + 2 * (2 << 20)


def test_a_compressed_stream_cut_short_keeps_what_decodes():
    up = b"".join(sse({"choices": [{"index": 0, "delta": {"content": "<think>x</think>hi"}}]}))
    z = gzip.compress(up)[:-4]
    f, sent = _streamed_flow([z], "gzip")
    assert f.metadata[UPSTREAM_KEY]["text"] == up.decode()


def test_a_stream_the_rewrite_did_not_change_is_marked_same():
    up = b"".join(sse({"choices": [{"index": 0, "delta": {"content": "plain"}}]}))
    f, _ = _streamed_flow([up])
    assert f.metadata[UPSTREAM_KEY] == {"same": True}


def test_a_stream_over_the_limit_is_not_kept(monkeypatch):
    monkeypatch.setattr(bodies, "KEEP_LIMIT", 10)
    up = b"".join(sse({"choices": [{"index": 0, "delta": {"content": "<think>x</think>hi"}}]}))
    f, _ = _streamed_flow([up])
    assert f.response.raw_content is None and "not kept" in f.metadata[UPSTREAM_KEY]["note"]


def test_plain_mitmdump_keeps_nothing():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = flow_for("/v1/chat/completions", b"", SSE, handled=False)
        tw.responseheaders(f)
        assert not isinstance(f.response.stream, bodies.Recorder)
        body = flow_for("/v1/chat/completions", json.dumps({"choices": [{"index": 0, "message": {
            "content": "<think>x</think>hi"}}]}).encode(), JSON, handled=False)
        tw.response(body)
        assert UPSTREAM_KEY not in body.metadata and "thinkwire" in body.metadata


# -- end to end: saved flows ------------------------------------------------------------------------
@pytest.mark.e2e
def test_saved_flows_carry_both_bodies_and_survive_loading_again(proxy_factory, up, tmp_path):
    saved = tmp_path / "flows"
    stream = sse({"model": "m", "choices": [{"index": 0, "delta": {"content": "<think>x</think>hi"}}]},
                 {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, "[DONE]")
    up.route("/chat/completions", sse_reply(stream))
    p = proxy_factory(extra_args=["-w", str(saved)])
    got = post(p.url + "/v1/chat/completions", {"model": "m", "stream": True, "messages": []})
    p.stop()
    [f] = list(io.FlowReader(saved.open("rb")).stream())
    assert f.response.raw_content == got.content
    assert f.metadata[UPSTREAM_KEY]["text"] == b"".join(stream).decode()
    # Loading the file again (what `mitmweb -r` does) runs the hooks again: the flow stays as recorded.
    again = tmp_path / "again"
    subprocess.run([str(Path(sys.executable).with_name("mitmdump")), "-n", "-r", str(saved), "-s", str(ADDON),
                    "--set", f"confdir={tmp_path / 'conf'}", "-w", str(again)], check=True, capture_output=True, timeout=60)
    [g] = list(io.FlowReader(again.open("rb")).stream())
    assert g.comment == f.comment and "1 reasoning block(s)" in g.comment
    assert g.metadata[UPSTREAM_KEY] == f.metadata[UPSTREAM_KEY] and g.response.raw_content == f.response.raw_content


def test_a_stream_the_client_left_early_keeps_what_was_sent():
    tw = ThinkWire()
    up = b"".join(sse({"choices": [{"index": 0, "delta": {"content": "<think>x</think>hi"}}]}))
    with taddons.context(tw) as tctx:
        tctx.options.add_option("store_streamed_bodies", bool, True, "")
        tctx.configure(tw)
        f = flow_for("/v1/chat/completions", b"", SSE, handled=False)
        f.response.raw_content = None
        tw.responseheaders(f)
        sent = b"".join(f.response.stream(up))
        f.error = flow.Error("client disconnected")
        tw.error(f)
    assert f.response.raw_content == sent and b"reasoning_content" in sent
    assert f.metadata[UPSTREAM_KEY]["text"] == up.decode()


# -- detection through the surfaces, the flow record ----------------------------------------------
@pytest.mark.parametrize("path,surface", [
    ("/v1/responses/resp_123", "responses"), ("/v1/messages?beta=true", "messages"),
    ("/openai/deployments/x/chat/completions?api-version=1", "chat"), ("/v1/responses/resp_1/input_items", None),
    ("/v1/messages/count_tokens", None)])
def test_the_view_detects_a_surface_as_the_surfaces_themselves_do(path, surface):
    assert contentview.surface_of_path(path) == surface
    assert surface == engine.surface_for_path(path, make_settings()).NAME if surface else \
        engine.surface_for_path(path, make_settings()) is None


def test_the_flow_record_round_trips_and_a_malformed_one_is_ignored():
    from thinkwire.record import FlowRecord
    f = tflow.tflow(resp=True)
    FlowRecord("chat", "default", 2, 10, 1, None).put(f)
    assert FlowRecord.of(f) == FlowRecord("chat", "default", 2, 10, 1, None)
    assert FlowRecord.of(f).summary() == "2 reasoning block(s), 10 chars moved"
    f.metadata["thinkwire"] = {"blocks": 1}          # no surface: not a record this version reads
    assert FlowRecord.of(f) is None
    f.metadata["thinkwire"] = "garbage"
    assert FlowRecord.of(f) is None


def test_a_long_line_of_reasoning_is_folded_at_spaces_and_a_long_word_is_cut():
    words = " ".join(["scattering"] * 20)                        # 219 columns
    text = view(json.dumps({"choices": [{"index": 0, "message": {
        "reasoning_content": words + "\n" + "x" * 170, "content": "hi"}}]}).encode())
    [(_, reasoning), _answer] = sections(text)
    assert reasoning.split("\n") == [" ".join(["scattering"] * 7)] * 2 + [" ".join(["scattering"] * 6),
                                                                         "x" * 80, "x" * 80, "x" * 10]


def test_the_view_says_what_the_reasoning_memory_did_for_a_flow():
    from mitmproxy.test import tflow
    from thinkwire.contentview import _memory
    f = tflow.tflow(resp=True)
    assert _memory(f) == []
    f.metadata["thinkwire_memory"] = {"put_back": 2, "store": "redis"}
    assert _memory(f) == [("memory", "reasoning of 2 turn(s) put back into the request (redis)")]
    f.metadata["thinkwire_memory"] = {"put_back": 1, "remembered": 1, "store": "memory"}
    assert _memory(f) == [("memory", "reasoning of 1 turn(s) put back into the request; reasoning of 1 turn(s) "
                                     "remembered (memory)")]


def test_a_long_summary_line_folds_beside_its_key():
    summary = ("1 reasoning block(s), 348 chars moved; started inside <think> (the server's chat "
               "template); the rewrite fell back")
    body = json.dumps({"id": "c", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}).encode()
    text = render(read_response(body, "chat", "application/json"), [("thinkwire", summary)])
    head = text.split("\n\n", 1)[0].splitlines()
    # (the keys are as wide as "finish reason", below: the value folds at 80 columns in all)
    assert head[-2:] == ["thinkwire      1 reasoning block(s), 348 chars moved; started inside <think>",
                         "               (the server's chat template); the rewrite fell back"]
