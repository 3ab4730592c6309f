"""A real browser check: mitmweb with thinkwire, a streamed <think> response, headless Chromium.

Starts `mitmweb -s addon/think.py` (reverse mode, everything bound to 127.0.0.1, a web
password), sends a streamed chat completion whose upstream writes `<think>...</think>`, opens
mitmweb in Debian's headless Chromium, clicks the flow and its Response tab like a person, and
checks that the "thinkwire" view shows the reasoning and the answer as separate sections.
Chromium is driven over the DevTools protocol with a small websocket client (wsproto, which
mitmproxy already depends on). A screenshot is kept in test-artifacts/.

Skipped, with the reason, when Chromium is not installed (`apt-get install -y chromium`).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import (AcceptConnection, CloseConnection, Message, Ping, Request,
                            TextMessage)

from harness import ADDON, ROOT, json_reply, post, sse, sse_reply
from devtools.process import LISTENING, ToolProcess, tool

pytestmark = pytest.mark.e2e

CHROMIUM = next((p for p in (os.environ.get("THINKWIRE_CHROMIUM"), shutil.which("chromium"),
                             "/usr/bin/chromium") if p and os.access(p, os.X_OK)), None)
ARTIFACTS = ROOT / "test-artifacts"
REASONING = "Rayleigh scattering sends short blue wavelengths every way"
ANSWER = "The sky looks blue because air scatters blue light most."

if CHROMIUM is None:
    pytest.skip("Chromium is not installed: apt-get update && apt-get install -y chromium "
                "(or set THINKWIRE_CHROMIUM to its path)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mitmweb(ToolProcess):
    def __init__(self, upstream: str, confdir: Path, password: str) -> None:
        self.web_port = free_port()
        super().__init__([tool("mitmweb"), "--mode", f"reverse:{upstream}", "--listen-host", "127.0.0.1",
                          "--set", "listen_port=0", "--set", "web_host=127.0.0.1",
                          "--set", f"web_port={self.web_port}", "--set", "web_open_browser=false",
                          "--set", f"web_password={password}", "--set", f"confdir={confdir}",
                          "-s", str(ADDON)])
        self.port = None
        web_up = False
        while not (self.port and web_up):  # the proxy and the web server say so, in either order
            m = self.wait_for(f"{LISTENING}|(Web server listening)", timeout=40)
            if m.group(1):
                self.port = int(m.group(1))
            else:
                web_up = True
        self.url = f"http://127.0.0.1:{self.port}"
        self.web = f"http://127.0.0.1:{self.web_port}"


class CDP:
    """A minimal synchronous Chrome DevTools Protocol client over one websocket."""

    def __init__(self, ws_url: str) -> None:
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", ws_url)
        assert m, ws_url
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=30)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.sock.sendall(self.ws.send(Request(host=f"{m.group(1)}:{m.group(2)}", target=m.group(3))))
        self.next_id = 0
        self.buf = ""
        self.pending: list[dict] = []
        while not any(isinstance(e, AcceptConnection) for e in self._read_events()):
            pass

    def _read_events(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("DevTools closed the connection")
        self.ws.receive_data(data)
        events = list(self.ws.events())
        for e in events:
            if isinstance(e, Ping):
                self.sock.sendall(self.ws.send(e.response()))
            elif isinstance(e, TextMessage):
                self.buf += e.data
                if e.message_finished:
                    self.pending.append(json.loads(self.buf))
                    self.buf = ""
            elif isinstance(e, CloseConnection):
                raise ConnectionError("DevTools closed the websocket")
        return events

    def call(self, method: str, **params):
        self.next_id += 1
        mid = self.next_id
        self.sock.sendall(self.ws.send(Message(data=json.dumps({"id": mid, "method": method, "params": params}))))
        while True:
            for i, msg in enumerate(self.pending):
                if msg.get("id") == mid:
                    del self.pending[i]
                    if "error" in msg:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    return msg.get("result", {})
            self.pending = [m for m in self.pending if "id" in m]  # drop events
            self._read_events()

    def js(self, expression: str):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"JS failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20, what: str = ""):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.js(expression)
            if v:
                return v
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what or expression}")

    def click(self, selector_js: str) -> None:
        """A real mouse click at the middle of the element `selector_js` evaluates to."""
        box = self.js(f"(() => {{ const e = {selector_js}; if (!e) return null; e.scrollIntoView();"
                      f" const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()")
        assert box, f"nothing to click: {selector_js}"
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def close(self) -> None:
        try:
            self.sock.sendall(self.ws.send(CloseConnection(code=1000)))
        except OSError:
            pass
        self.sock.close()


class Chromium:
    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="thinkwire-chromium-")
        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-default-browser-check", "--disable-dev-shm-usage",
                f"--user-data-dir={self.profile}", "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0", "--window-size=1400,1000", "about:blank"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode("utf-8", "replace") if self.proc.poll() is not None else ""
                self.stop()
                raise RuntimeError(f"Chromium did not start: {err[-2000:]}")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split("\n")[0])

    def page(self) -> CDP:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as r:
            targets = json.load(r)
        page = next(t for t in targets if t.get("type") == "page")
        return CDP(page["webSocketDebuggerUrl"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: only the processes it started
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def _chat_stream() -> list[bytes]:
    base = {"id": "chatcmpl-sky", "object": "chat.completion.chunk", "model": "sky-reasoner"}
    text = f"<think>{REASONING}</think>{ANSWER}"
    pieces = [text[i:i + 6] for i in range(0, len(text), 6)]
    chunks = [dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                   "finish_reason": None}])]
    chunks += [dict(base, choices=[{"index": 0, "delta": {"content": p}, "finish_reason": None}])
               for p in pieces]
    chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    return sse(*chunks, "[DONE]")


def response_view(page: CDP, web: Mitmweb, password: str, screenshot: str) -> str:
    """The text of the chat flow's Response tab in mitmweb, as a user opens it (a screenshot
    kept in test-artifacts/)."""
    page.call("Page.enable")
    page.call("Page.navigate", url=f"{web.web}/?token={password}")
    row = "[...document.querySelectorAll('.flow-table tbody tr')].find(r => r.innerText.includes('/v1/chat/completions'))"
    page.wait_for(f"!!({row})", what="the flow in mitmweb's flow list")
    page.click(row)
    tab = "[...document.querySelectorAll('.flow-detail nav a')].find(a => a.innerText.trim() === 'Response')"
    page.wait_for(f"!!({tab})", what="the flow's Response tab")
    page.click(tab)
    body = page.wait_for(
        f"(() => {{ const t = document.querySelector('.flow-detail')?.innerText || '';"
        f" return t.includes({json.dumps(ANSWER)}) && t.includes('reasoning') ? t : ''; }})()",
        what="the thinkwire view of the response")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = page.call("Page.captureScreenshot", format="png")
    (ARTIFACTS / screenshot).write_bytes(base64.b64decode(shot["data"]))
    return body


def _stop(web, browser, page) -> None:
    """What a browser test started, stopped whatever happened (browser and page may not be yet)."""
    if page:
        page.close()
    if browser:
        browser.stop()
    web.stop()


def test_mitmweb_shows_reasoning_and_answer_of_a_streamed_flow(up, tmp_path):
    password = secrets.token_hex(12)
    up.route("/chat/completions", sse_reply(_chat_stream()))
    web = Mitmweb(up.url, tmp_path / "confdir", password)
    browser = None
    page = None
    try:
        got = post(web.url + "/v1/chat/completions",
                   {"model": "sky-reasoner", "stream": True,
                    "messages": [{"role": "user", "content": "Why is the sky blue?"}]})
        assert got.status == 200
        assert b"reasoning_content" in got.content and b"<think>" not in got.content

        browser = Chromium()
        page = browser.page()
        body = response_view(page, web, password, "mitmweb-thinkwire-view.png")

        assert "thinkwire" in body                                # the view mitmweb picked
        assert "Content is missing" not in body                   # the streamed body is kept
        assert re.search(r"── reasoning ─+\s*\n\s*" + re.escape(REASONING), body), body
        assert re.search(r"── answer ─+\s*\n\s*" + re.escape(ANSWER), body), body
        assert body.index(REASONING) < body.index(ANSWER)
        assert "<think>" not in body

        # The upstream's original stays available to compare, in the "thinkwire upstream" view.
        req = urllib.request.Request(f"{web.web}/flows", headers={"Authorization": f"Bearer {password}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            [flow] = json.load(r)
        req = urllib.request.Request(f"{web.web}/flows/{flow['id']}/response/content/thinkwire%20upstream.json",
                                     headers={"Authorization": f"Bearer {password}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            original = json.load(r)["text"]
        assert f"<think>{REASONING}</think>{ANSWER}" in " ".join(original.split())   # (folded at 80 columns)
    finally:
        _stop(web, browser, page)


LONG_REASONING = ("Air molecules are much smaller than the wavelength of visible light, so they scatter it by "
                  "Rayleigh scattering, whose strength goes as the inverse fourth power of the wavelength, "
                  "which means blue light at about 450 nm is scattered several times more than red light at "
                  "about 700 nm, and the scattered blue reaches the eye from every part of the sky.")


def test_mitmweb_wraps_a_long_line_of_reasoning_inside_the_pane(up, tmp_path):
    """One paragraph of reasoning is one line: mitmweb shows views unwrapped (white-space: pre),
    so the view folds it; no element of the flow's detail pane scrolls sideways."""
    password = secrets.token_hex(12)
    base = {"id": "chatcmpl-long", "object": "chat.completion", "model": "sky-reasoner"}
    up.route("/chat/completions", json_reply(dict(base, choices=[
        {"index": 0, "message": {"role": "assistant", "content": f"<think>{LONG_REASONING}</think>{ANSWER}"},
         "finish_reason": "stop"}])))
    web = Mitmweb(up.url, tmp_path / "confdir", password)
    browser = page = None
    try:
        assert post(web.url + "/v1/chat/completions", {"model": "sky-reasoner", "messages": []}).status == 200
        browser = Chromium()
        page = browser.page()
        body = response_view(page, web, password, "mitmweb-thinkwire-long-line.png")
        reasoning = body.split("── reasoning ", 1)[1].split("── answer", 1)[0].split("\n", 1)[1].strip()
        assert " ".join(reasoning.split()) == LONG_REASONING and reasoning.count("\n") >= 3
        overflow = page.js(
            "[...document.querySelectorAll('.flow-detail *')].filter(e => e.clientWidth > 0)"
            ".map(e => e.scrollWidth - e.clientWidth).reduce((a, b) => Math.max(a, b), 0)")
        assert overflow <= 1
    finally:
        _stop(web, browser, page)
