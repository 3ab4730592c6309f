"""`eval "$(thinkwire env)"` end to end: a shell set up only with that line sends the openai
SDK, curl and Node through a running forward proxy to an HTTPS model server, and they see the
reasoning moved, with no change to the clients.

The model server is a local TLS server whose self-signed certificate no client trusts: they
can only reach it through the proxy, which opens the TLS with mitmproxy's CA (trusted through
the exports) and trusts the server's certificate itself (`ssl_verify_upstream_trusted_ca`).
It listens on 127.0.0.2, not 127.0.0.1 or localhost: those are in NO_PROXY on purpose (a local
model server is reached directly), so a server there would bypass the proxy. 127.0.0.2 stands
for a remote API host, an address NO_PROXY does not name.
"""

from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from harness import ADDON, Upstream, sse, sse_reply
from devtools.process import LISTENING, ToolProcess, child_env, tool
from support.tls import self_signed

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
HOST = "127.0.0.2"
BIN = Path(sys.executable).parent   # thinkwire and python of this environment


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    for needed in ("bash", "curl"):
        if shutil.which(needed) is None:
            pytest.skip(f"{needed} is not installed")
    tmp = tmp_path_factory.mktemp("env")
    cert, key = self_signed(tmp, HOST)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    try:
        up = Upstream(HOST, ctx)
    except OSError as e:   # Linux answers on all of 127.0.0.0/8; macOS only on 127.0.0.1
        pytest.skip(f"cannot listen on {HOST}: {e}")
    up.route(CHAT, sse_reply(sse(chunk({"role": "assistant", "content": "<think>via the"}),
                                 chunk({"content": " proxy</think>hello"}), chunk({}, "stop"), "[DONE]")))
    conf = tmp / "confdir"
    # A bare shell: only PATH and HOME, so the exports are all that point it anywhere.
    shell_env = {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8"}
    # The exports come first: `thinkwire env` makes the CA, which the proxy then uses.
    probe = subprocess.run([str(BIN / "thinkwire"), "env", "--confdir", str(conf)], capture_output=True,
                           text=True, env=shell_env, timeout=60)
    assert probe.returncode == 0 and (conf / "mitmproxy-ca-cert.pem").exists(), probe.stderr
    ca_made = (conf / "mitmproxy-ca-cert.pem").read_bytes()
    proxy = ToolProcess([tool("mitmdump"), "--listen-host", "127.0.0.1", "--set", "listen_port=0",
                         "--set", f"confdir={conf}", "--set", f"ssl_verify_upstream_trusted_ca={cert}",
                         "-s", str(ADDON)], child_env())
    port = int(proxy.wait_for(LISTENING, timeout=30).group(1))
    assert (conf / "mitmproxy-ca-cert.pem").read_bytes() == ca_made   # the proxy took that CA
    yield {"up": up, "port": port, "conf": conf, "env": shell_env, "proxy": proxy, "tmp": tmp}
    proxy.stop()
    up.close()


def in_shell(setup, command: str) -> subprocess.CompletedProcess:
    """`command` in a bash set up only with `eval "$(thinkwire env ...)"`."""
    script = f'eval "$(thinkwire env --port {setup["port"]} --confdir {setup["conf"]})"\n{command}'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=setup["env"],
                          cwd=setup["tmp"], timeout=60)


def url(setup) -> str:
    return f"{setup['up'].url}{CHAT}"


def reasoning_and_content(sse_text: str) -> tuple[str, str]:
    r = c = ""
    for line in sse_text.splitlines():
        if line.startswith("data: {"):
            for ch in json.loads(line[6:])["choices"]:
                r += ch["delta"].get("reasoning_content") or ""
                c += ch["delta"].get("content") or ""
    return r, c


def test_the_clients_do_not_trust_the_server_directly(setup):
    r = in_shell(setup, f"curl -sS --noproxy '*' {url(setup)} -d '{{}}'")
    assert r.returncode == 60, r.stderr   # curl: the peer's certificate cannot be verified


def test_openai_sdk_goes_through_the_proxy_unchanged(setup):
    code = ("import openai, sys\n"
            "c = openai.OpenAI(base_url=sys.argv[1], api_key='x', max_retries=0, timeout=20)\n"
            "with c.chat.completions.stream(model='m', messages=[{'role': 'user', 'content': 'hi'}]) as s:\n"
            "    m = s.get_final_completion().choices[0].message\n"
            "print(m.model_extra['reasoning_content'] + '|' + m.content)\n")
    (setup["tmp"] / "client.py").write_text(code)
    r = in_shell(setup, f"python client.py {setup['up'].url}/v1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "via the proxy|hello"


def test_curl_goes_through_the_proxy_unchanged(setup):
    r = in_shell(setup, f"curl -sS -N {url(setup)} -H 'content-type: application/json' "
                        """-d '{"model": "m", "stream": true}'""")
    assert r.returncode == 0, r.stderr
    assert reasoning_and_content(r.stdout) == ("via the proxy", "hello")


def test_localhost_is_reached_directly(setup, up):
    # NO_PROXY: a local model server on 127.0.0.1 is not sent through the proxy.
    up.route(CHAT, sse_reply(sse(chunk({"content": "<think>direct</think>"}))))
    seen = len(setup["proxy"].log())
    r = in_shell(setup, f"curl -sS {up.url}{CHAT} -d '{{}}'")
    assert r.returncode == 0 and "<think>direct</think>" in r.stdout
    assert up.url.split("//")[1] not in setup["proxy"].log()[seen:]


NODE_FETCH = """
const r = await fetch(process.argv[2], {method: "POST", headers: {"content-type": "application/json"},
                                        body: JSON.stringify({model: "m", stream: true})});
process.stdout.write(await r.text());
"""

# A Node client that reads HTTPS_PROXY itself (as Claude Code does), over Node's own TLS: it
# trusts the proxy's CA only through NODE_EXTRA_CA_CERTS.
NODE_TUNNEL = """
const http = require("http"), tls = require("tls");
const proxy = new URL(process.env.HTTPS_PROXY), target = new URL(process.argv[2]);
const body = JSON.stringify({model: "m", stream: true});
http.request({host: proxy.hostname, port: proxy.port, method: "CONNECT", path: target.host})
  .on("connect", (res, socket) => {
    const s = tls.connect({socket, host: target.hostname}, () => {
      s.write(`POST ${target.pathname} HTTP/1.1\\r\\nHost: ${target.host}\\r\\nContent-Type: application/json\\r\\n` +
              `Content-Length: ${Buffer.byteLength(body)}\\r\\nConnection: close\\r\\n\\r\\n${body}`);
    });
    let out = "";
    s.on("data", d => out += d).on("end", () => process.stdout.write(out))
     .on("error", e => { console.error(e.message); process.exit(1); });
  }).end();
"""


def node_version() -> tuple[int, ...] | None:
    try:
        out = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return None
    m = re.match(r"v(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def node_reads_proxy_env(v: tuple[int, ...]) -> bool:
    """NODE_USE_ENV_PROXY=1 makes fetch use HTTPS_PROXY from Node 24 and 22.21 on."""
    return v >= (24, 0) or (v[0] == 22 and v >= (22, 21))


def test_node_trusts_the_proxy_ca_from_the_exports(setup):
    if node_version() is None:
        pytest.skip("node is not installed")
    (setup["tmp"] / "tunnel.js").write_text(NODE_TUNNEL)
    r = in_shell(setup, f"node tunnel.js {url(setup)}")
    assert r.returncode == 0, r.stderr
    assert "HTTP/1.1 200" in r.stdout and '"reasoning_content":"via the"' in r.stdout


def test_node_fetch_goes_through_the_proxy_unchanged(setup):
    v = node_version()
    if v is None:
        pytest.skip("node is not installed")
    if not node_reads_proxy_env(v):
        pytest.skip(f"node {'.'.join(map(str, v))}: its fetch ignores HTTPS_PROXY (NODE_USE_ENV_PROXY=1, "
                    "which thinkwire env exports, needs Node >= 22.21 or 24)")
    (setup["tmp"] / "fetch.mjs").write_text(NODE_FETCH)
    r = in_shell(setup, f"node fetch.mjs {url(setup)}")
    assert r.returncode == 0, r.stderr
    assert reasoning_and_content(r.stdout) == ("via the proxy", "hello")


def test_node_20_fetch_ignores_the_proxy_variables(setup):
    # What docs/proxy-modes.md says of older Nodes, checked: fetch goes direct (and fails on the server's
    # untrusted certificate) rather than through the proxy.
    v = node_version()
    if v is None or node_reads_proxy_env(v):
        pytest.skip("only for a Node whose fetch does not read HTTPS_PROXY")
    (setup["tmp"] / "fetch.mjs").write_text(NODE_FETCH)
    r = in_shell(setup, f"node fetch.mjs {url(setup)}")
    assert r.returncode != 0 and "fetch failed" in r.stderr


def test_undo_leaves_nothing_pointing_at_the_proxy(setup):
    r = in_shell(setup, 'eval "$(thinkwire env --undo)"; env')
    names = {line.split("=", 1)[0] for line in r.stdout.splitlines()}
    assert r.returncode == 0 and not names & {"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "NO_PROXY",
                                               "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                               "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY"}
