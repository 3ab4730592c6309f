"""What a user reads in a real mitmdump's log: by default the start-up lines and one line per
flow thinkwire handled; mitmproxy's own lines (connections, a summary of every flow that says
"content missing" for streams) only under think_log=all or mitmproxy's own -v."""

from __future__ import annotations

import re

import pytest

from thinkwire import keys

from harness import json_reply, post, sse, sse_reply

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
FLOW_LINE = "POST /v1/chat/completions: thinkwire chat [default]: 1 reasoning block(s), 2 chars moved"


def _chunk(text: str) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def _route(up) -> None:
    up.route(CHAT, sse_reply(sse(_chunk("<think>hm</think>"), _chunk("hi"), "[DONE]")))
    up.route("/v1/models", json_reply({"data": []}))


def _run(proxy, flows: int) -> list[str]:
    """`flows` chat streams and one GET thinkwire does not handle; the log after, untimestamped."""
    for _ in range(flows):
        assert post(proxy.url + CHAT, {"model": "m", "stream": True, "messages": []}).status == 200
    assert post(proxy.url + "/v1/models", method="GET").status == 200
    for _ in range(flows):
        proxy.wait_for(re.escape(FLOW_LINE))
    proxy.stop()
    return [re.sub(r"^\[[\d:.]+\](\[[\d.:]+\])? ?", "", line) for line in proxy.lines]


def test_the_default_log_is_the_start_up_lines_and_one_line_per_handled_flow(up, proxy_factory, tmp_path):
    _route(up)
    p = proxy_factory(confdir=tmp_path)
    lines = _run(p, 5)
    own = keys.load(keys.KeyConfig(), tmp_path)   # the key it made
    assert lines == [
        f"Loading script {p.proc.args[p.proc.args.index('-s') + 1]}",
        f"reverse proxy to {up.url} listening at 127.0.0.1:{p.port}.",
        f"thinkwire: clients get reasoning apart when their base URL is this proxy's address where it was "
        f"{up.url} (the path stays, e.g. /v1)",
        f"thinkwire: marks are sealed with this instance's own key {own.key_id} ({own.source})",
        *[FLOW_LINE] * 5,
    ]
    assert not any("content missing" in line for line in lines)


@pytest.mark.parametrize("ask", [{"options": {"think_log": "all"}}, {"extra_args": ["-v"]}])
def test_mitmproxy_s_own_lines_come_back_when_asked(up, proxy_factory, ask):
    _route(up)
    lines = _run(proxy_factory(**ask), 2)
    assert lines.count(FLOW_LINE) == 2
    assert sum(line.endswith("client connect") for line in lines) == 3   # every connection is said again
    if "options" in ask:   # mitmdump's own summary of each flow, the GET too
        assert sum(line.endswith("<< 200 OK 12b") for line in lines) == 1
