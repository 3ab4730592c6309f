"""The one-command demo: a local reasoning-model upstream, the proxy in front, the official SDKs.

`python -m thinkwire.demo` (what `./scripts/demo` runs):
1. starts `DemoUpstream` on 127.0.0.1: it speaks /v1/chat/completions, /v1/responses and
   /v1/messages and answers like a reasoning model that writes `<think>...</think>` inline,
   as a JSON body or a stream cut into small chunks (tags split across them), with a tool call
   when the request offers tools;
2. starts `mitmdump -s addon/think.py` in reverse mode in front of it, saving the flows (`-w`);
3. runs the official openai and anthropic SDK clients through the proxy;
4. prints, side by side, what the upstream sent and what the client got, and how to open the
   same flows in mitmweb.

No API key, no network: everything stays on 127.0.0.1.

Other ways to run it:
  --serve PORT     only the demo upstream, in the foreground (put mitmweb in front of it)
  --proxy URL      use a proxy that is already running instead of starting mitmdump
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from devtools.process import LISTENING, ToolProcess, tool

MODEL = "demo-reasoner"
PLAIN = ("<think>The user asks for the capital of France. That is Paris; "
         "one short sentence is enough.</think>The capital of France is Paris.")
TOOL = ("<think>The user wants the weather in Paris. I have a get_weather tool: "
        "call it with city=Paris, then answer.</think>Let me check the weather in Paris.")
TOOL_NAME = "get_weather"
TOOL_ARGS = '{"city": "Paris"}'
CHUNK = 7   # characters per streamed text delta: tags land across chunks ("<thi" | "nk>")


# == the upstream =====================================================================================
@dataclass
class Sent:
    """What the demo upstream answered, for the side-by-side view."""
    path: str
    stream: bool
    text: str
    tool: tuple[str, str] | None
    chunks: int = 0


def _pieces(text: str, n: int = CHUNK) -> list[str]:
    return [text[i:i + n] for i in range(0, len(text), n)]


def _sse(obj: dict, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(obj)}\n\n".encode()


def chat_reply(text: str, tool: bool, stream: bool, usage: bool = True) -> list[bytes] | dict:
    base = {"id": "chatcmpl-demo", "object": "chat.completion", "created": 1700000000, "model": MODEL}
    call = {"id": "call_demo1", "type": "function", "function": {"name": TOOL_NAME, "arguments": TOOL_ARGS}}
    finish = "tool_calls" if tool else "stop"
    use = {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52}
    if not stream:
        msg = {"role": "assistant", "content": text}
        if tool:
            msg["tool_calls"] = [call]
        return dict(base, choices=[{"index": 0, "message": msg, "finish_reason": finish}], usage=use)
    base["object"] = "chat.completion.chunk"

    def chunk(delta: dict, fin: str | None = None) -> bytes:
        return _sse(dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": fin}]))
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": p}) for p in _pieces(text)]
    if tool:
        out.append(chunk({"tool_calls": [{"index": 0, "id": "call_demo1", "type": "function",
                                          "function": {"name": TOOL_NAME, "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]})
                for a in _pieces(TOOL_ARGS, 8)]
    out.append(chunk({}, finish))
    if usage:
        out.append(_sse(dict(base, choices=[], usage=use)))
    out.append(b"data: [DONE]\n\n")
    return out


def responses_reply(text: str, tool: bool, stream: bool) -> list[bytes] | dict:
    msg = {"id": "msg_demo1", "type": "message", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]}
    fc = {"id": "fc_demo1", "type": "function_call", "call_id": "call_demo1", "name": TOOL_NAME,
          "arguments": TOOL_ARGS, "status": "completed"}
    output = [msg] + ([fc] if tool else [])
    resp = {"id": "resp_demo1", "object": "response", "created_at": 1700000000, "status": "completed",
            "model": MODEL, "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "usage": {"input_tokens": 12, "output_tokens": 40, "total_tokens": 52,
                                   "input_tokens_details": {"cached_tokens": 0},
                                   "output_tokens_details": {"reasoning_tokens": 0}}}
    if not stream:
        return resp
    seq = iter(range(10_000))
    out: list[bytes] = []

    def ev(type_: str, **fields) -> None:
        obj = {"type": type_, "sequence_number": next(seq), **fields}
        out.append(_sse(obj, type_))
    pending = dict(resp, status="in_progress", output=[], usage=None)
    ev("response.created", response=pending)
    ev("response.in_progress", response=pending)
    ev("response.output_item.added", output_index=0,
       item=dict(msg, status="in_progress", content=[]))
    part = {"type": "output_text", "text": "", "annotations": []}
    ev("response.content_part.added", item_id="msg_demo1", output_index=0, content_index=0, part=part)
    for p in _pieces(text):
        ev("response.output_text.delta", item_id="msg_demo1", output_index=0, content_index=0,
           delta=p, logprobs=[])
    ev("response.output_text.done", item_id="msg_demo1", output_index=0, content_index=0, text=text,
       logprobs=[])
    ev("response.content_part.done", item_id="msg_demo1", output_index=0, content_index=0,
       part=dict(part, text=text))
    ev("response.output_item.done", output_index=0, item=msg)
    if tool:
        ev("response.output_item.added", output_index=1, item=dict(fc, arguments="", status="in_progress"))
        for a in _pieces(TOOL_ARGS, 8):
            ev("response.function_call_arguments.delta", item_id="fc_demo1", output_index=1, delta=a)
        ev("response.function_call_arguments.done", item_id="fc_demo1", output_index=1,
           arguments=TOOL_ARGS)
        ev("response.output_item.done", output_index=1, item=fc)
    ev("response.completed", response=resp)
    return out


def messages_reply(text: str, tool: bool, stream: bool) -> list[bytes] | dict:
    use = {"input_tokens": 12, "output_tokens": 40}
    blocks: list[dict] = [{"type": "text", "text": text}]
    if tool:
        blocks.append({"type": "tool_use", "id": "toolu_demo1", "name": TOOL_NAME,
                       "input": json.loads(TOOL_ARGS)})
    stop = "tool_use" if tool else "end_turn"
    msg = {"id": "msg_demo1", "type": "message", "role": "assistant", "model": MODEL,
           "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": use}
    if not stream:
        return msg
    out: list[bytes] = []

    def ev(obj: dict) -> None:
        out.append(_sse(obj, obj["type"]))
    ev({"type": "message_start", "message": dict(msg, content=[], stop_reason=None,
                                                 usage={"input_tokens": 12, "output_tokens": 1})})
    ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    ev({"type": "ping"})
    for p in _pieces(text):
        ev({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}})
    ev({"type": "content_block_stop", "index": 0})
    if tool:
        ev({"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_demo1", "name": TOOL_NAME, "input": {}}})
        for a in _pieces(TOOL_ARGS, 8):
            ev({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": a}})
        ev({"type": "content_block_stop", "index": 1})
    ev({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": 40}})
    ev({"type": "message_stop"})
    return out


class DemoUpstream:
    """A local model server that writes its reasoning inline. `sent` records every answer."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, delay: float = 0.0) -> None:
        self.sent: list[Sent] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
                           if self.path.rstrip("/").endswith("/models") else
                           {"error": {"message": "POST /v1/chat/completions, /v1/responses or /v1/messages"}})

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                try:
                    req = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    return self._json(400, {"error": {"message": "request body is not JSON"}})
                path = self.path.split("?", 1)[0].rstrip("/")
                tool = bool(req.get("tools"))
                text = TOOL if tool else PLAIN
                stream = bool(req.get("stream"))
                if path.endswith("/chat/completions"):
                    include_usage = bool((req.get("stream_options") or {}).get("include_usage", True))
                    reply = chat_reply(text, tool, stream, include_usage)
                elif path.endswith("/responses"):
                    reply = responses_reply(text, tool, stream)
                elif path.endswith("/messages"):
                    reply = messages_reply(text, tool, stream)
                else:
                    return self._json(404, {"error": {"message": f"no route for {path}"}})
                outer.sent.append(Sent(path, stream, text, (TOOL_NAME, TOOL_ARGS) if tool else None,
                                       len(reply) if isinstance(reply, list) else 1))
                if isinstance(reply, dict):
                    return self._json(200, reply)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for c in reply:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
                        self.wfile.flush()
                        if delay:
                            time.sleep(delay)
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _json(self, status: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer((host, port), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# == the proxy ==========================================================================================
ROOT = Path(__file__).resolve().parents[1]   # the repository
ADDON = ROOT / "addon" / "think.py"


class Mitmdump(ToolProcess):
    """`mitmdump -s addon/think.py` in reverse mode on a free loopback port, saving flows."""

    def __init__(self, upstream: str, save: Path, confdir: Path) -> None:
        exe = tool("mitmdump")
        if not os.path.exists(exe):
            raise SystemExit("mitmdump not found: run ./scripts/demo (it installs mitmproxy)")
        super().__init__([exe, "--mode", f"reverse:{upstream}", "--listen-host", "127.0.0.1",
                          "--set", "listen_port=0", "--set", f"confdir={confdir}", "-w", str(save),
                          "-s", str(ADDON)], env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            self.url = f"http://127.0.0.1:{self.wait_for(LISTENING, timeout=30).group(1)}"
        except RuntimeError as e:
            raise SystemExit(str(e)) from None


# == the clients ==========================================================================================
@dataclass
class Got:
    """What the client's SDK object holds, as (label, text) rows."""
    rows: list[tuple[str, str]] = field(default_factory=list)

    def add(self, label: str, text: object) -> None:
        if isinstance(text, str) and text:
            self.rows.append((label, text))


_CHAT_TOOL = {"type": "function", "function": {
    "name": TOOL_NAME, "description": "Current weather in a city", "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": False}}}
_RESP_TOOL = {"type": "function", "name": TOOL_NAME, "description": "Current weather in a city",
              "strict": True, "parameters": _CHAT_TOOL["function"]["parameters"]}
_ANTH_TOOL = {"name": TOOL_NAME, "description": "Current weather in a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]}}
ASK = "What is the capital of France?"
ASK_TOOL = "What is the weather in Paris?"


def _chat_got(msg) -> Got:
    g = Got()
    extra = getattr(msg, "model_extra", None) or {}
    for k in ("reasoning_content", "reasoning"):
        g.add(f"message.{k}", getattr(msg, k, None) or extra.get(k))
    g.add("message.content", msg.content)
    for tc in msg.tool_calls or []:
        g.add(f"tool_calls: {tc.function.name}", tc.function.arguments)
    return g


def _responses_got(resp) -> Got:
    g = Got()
    for item in resp.output:
        if item.type == "reasoning":
            # The summary holds the text by default; content too with think_responses_content=on.
            g.add("reasoning item", "\n\n".join(s.text for s in item.summary or []))
            g.add("reasoning item (content)", "\n\n".join(c.text for c in item.content or []))
        elif item.type == "message":
            g.add("message output_text", "".join(getattr(c, "text", "") or "" for c in item.content))
        elif item.type == "function_call":
            g.add(f"function_call: {item.name}", item.arguments)
    return g


def _messages_got(msg) -> Got:
    g = Got()
    for b in msg.content:
        if b.type == "thinking":
            g.add("thinking block", b.thinking)
        elif b.type == "text":
            g.add("text block", b.text)
        elif b.type == "tool_use":
            g.add(f"tool_use block: {b.name}", json.dumps(b.input))
    return g


@dataclass
class Case:
    surface: str
    title: str
    run: Callable[[str], Got]


def cases() -> list[Case]:
    import anthropic
    import openai

    def oai(url: str):
        return openai.OpenAI(base_url=url + "/v1", api_key="demo-no-key-needed", max_retries=0)

    def ant(url: str):
        return anthropic.Anthropic(base_url=url, api_key="demo-no-key-needed", max_retries=0)

    def chat_body(url):
        r = oai(url).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": ASK}])
        return _chat_got(r.choices[0].message)

    def chat_stream(url):
        with oai(url).chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": ASK}],
                                              stream_options={"include_usage": True}) as s:
            return _chat_got(s.get_final_completion().choices[0].message)

    def chat_tool_stream(url):
        with oai(url).chat.completions.stream(model=MODEL, tools=[_CHAT_TOOL],
                                              messages=[{"role": "user", "content": ASK_TOOL}]) as s:
            return _chat_got(s.get_final_completion().choices[0].message)

    def responses_body(url):
        return _responses_got(oai(url).responses.create(model=MODEL, input=ASK))

    def responses_stream(url):
        with oai(url).responses.stream(model=MODEL, input=ASK) as s:
            return _responses_got(s.get_final_response())

    def responses_tool_stream(url):
        with oai(url).responses.stream(model=MODEL, input=ASK_TOOL, tools=[_RESP_TOOL]) as s:
            return _responses_got(s.get_final_response())

    def messages_body(url):
        return _messages_got(ant(url).messages.create(
            model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": ASK}]))

    def messages_stream(url):
        with ant(url).messages.stream(model=MODEL, max_tokens=1024,
                                      messages=[{"role": "user", "content": ASK}]) as s:
            return _messages_got(s.get_final_message())

    def messages_tool_body(url):
        return _messages_got(ant(url).messages.create(
            model=MODEL, max_tokens=1024, tools=[_ANTH_TOOL],
            messages=[{"role": "user", "content": ASK_TOOL}]))

    return [
        Case("chat", "openai SDK · chat.completions.create", chat_body),
        Case("chat", "openai SDK · chat.completions.stream", chat_stream),
        Case("chat", "openai SDK · chat.completions.stream, with a tool", chat_tool_stream),
        Case("responses", "openai SDK · responses.create", responses_body),
        Case("responses", "openai SDK · responses.stream", responses_stream),
        Case("responses", "openai SDK · responses.stream, with a tool", responses_tool_stream),
        Case("messages", "anthropic SDK · messages.create", messages_body),
        Case("messages", "anthropic SDK · messages.stream", messages_stream),
        Case("messages", "anthropic SDK · messages.create, with a tool", messages_tool_body),
    ]


# == printing =============================================================================================
def _wrap(label: str, text: str, width: int) -> list[str]:
    out = [label + ":"]
    for para in text.split("\n"):
        out += textwrap.wrap(para, width - 2, break_long_words=True, replace_whitespace=False) or [""]
    return [out[0]] + ["  " + x for x in out[1:]]


def side_by_side(title: str, left: list[tuple[str, str]], right: list[tuple[str, str]],
                 width: int) -> str:
    col = (width - 3) // 2
    lcol = [ln for label, text in left for ln in _wrap(label, text, col)]
    rcol = [ln for label, text in right for ln in _wrap(label, text, col)]
    lines = [f"━━ {title} " + "━" * max(3, width - len(title) - 4)]
    lines.append(f"{'upstream sent'.ljust(col)} │ client got")
    lines.append(f"{'─' * col}─┼─{'─' * col}")
    for i in range(max(len(lcol), len(rcol))):
        a = lcol[i] if i < len(lcol) else ""
        b = rcol[i] if i < len(rcol) else ""
        lines.append(f"{a.ljust(col)} │ {b}")
    return "\n".join(lines)


def _upstream_rows(s: Sent) -> list[tuple[str, str]]:
    how = f"streamed in {s.chunks} events" if s.stream else "one JSON body"
    rows = [(f"text ({how})", s.text)]
    if s.tool:
        rows.append((f"tool call: {s.tool[0]}", s.tool[1]))
    return rows


def run(proxy_url: str, upstream: DemoUpstream | None, width: int, out=print) -> int:
    from thinkwire import engine
    failures = 0
    missing = [n for n in ("chat", "responses", "messages") if n not in engine.SURFACES]
    for case in cases():
        before = len(upstream.sent) if upstream else 0
        try:
            got = case.run(proxy_url)
            right = got.rows or [("(nothing)", "")]
        except Exception as e:  # show it and go on: the demo should show every surface it can
            failures += 1
            right = [("error", f"{type(e).__name__}: {e}")]
        if upstream and len(upstream.sent) > before:
            left = _upstream_rows(upstream.sent[-1])
        else:
            left = [("(see the upstream)", "")]
        title = case.title
        if case.surface in missing:
            title += f"  [{case.surface} surface not in this build: passed through]"
        out(side_by_side(title, left, right, width))
        out("")
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="demo", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--serve", type=int, metavar="PORT",
                    help="only run the demo upstream on 127.0.0.1:PORT until Ctrl-C")
    ap.add_argument("--proxy", metavar="URL", help="use this running proxy instead of starting mitmdump")
    ap.add_argument("--save", metavar="FILE", help="where to save the flows (default: a temp file)")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds between streamed events")
    a = ap.parse_args(argv)
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        os.environ.pop(k, None)   # the clients talk to 127.0.0.1 directly
    width = max(80, min(shutil.get_terminal_size((120, 40)).columns, 140))

    if a.serve is not None:
        up = DemoUpstream(port=a.serve, delay=a.delay or 0.02)
        print(f"demo upstream on {up.url} (chat completions, responses, messages); Ctrl-C stops it")
        print(f"put the proxy in front of it, e.g.:\n  mitmweb --mode reverse:{up.url} --listen-host 127.0.0.1 "
              f"--listen-port 8080 -s {ADDON}\nthen: ./scripts/demo --proxy http://127.0.0.1:8080")
        try:
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
        except KeyboardInterrupt:
            pass
        up.close()
        return 0

    if a.proxy:
        print(f"thinkwire demo: clients → {a.proxy} (a proxy you started)\n")
        return 1 if run(a.proxy.rstrip("/"), None, width) else 0

    up = DemoUpstream(delay=a.delay)
    tmp = Path(tempfile.mkdtemp(prefix="thinkwire-demo-"))
    save = Path(a.save).resolve() if a.save else tmp / "demo.flows"
    proxy = Mitmdump(up.url, save, tmp / "confdir")
    try:
        print(f"thinkwire demo: upstream {up.url} (a local reasoning model, <think> inline)")
        print(f"                proxy    {proxy.url} (mitmdump -s addon/think.py, reverse mode)\n")
        failures = run(proxy.url, up, width)
    finally:
        proxy.stop()
        up.close()
    log = [re.sub(r"^\[[\d:.]+\]\s*", "", ln.strip()) for ln in proxy.lines
           if "thinkwire" in ln and ("reasoning block" in ln or "passed through" in ln)]
    if log:
        print("the proxy's log, one line per flow:")
        for ln in log:
            print("  " + ln)
        print()
    rel = os.path.relpath(ADDON, Path.cwd())
    print(f"The flows are saved in {save}. Read them in mitmweb (-n: no proxy, so it runs beside one; open the URL with ?token= it prints):")
    print(f"  .venv/bin/mitmweb -n --set web_host=127.0.0.1 -r {save} -s {rel}")
    print("Click a flow: the Response tab shows the \"thinkwire\" view (model, reasoning, answer, tool")
    print("calls, usage); pick \"thinkwire upstream\" in its view menu to see what the upstream sent.")
    print("Or live: ./scripts/demo --serve 8000, mitmweb in front of it, ./scripts/demo --proxy URL")
    print("(the --serve output prints the exact commands).")
    if failures:
        print(f"\n{failures} case(s) failed (shown above).")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
