"""Faults end to end, through a real mitmdump: the upstream or the client misbehaves; the flow
ends cleanly, every other flow keeps working, nothing crashes, and what the client got is a
prefix of the correct rewrite (computed offline from the upstream's bytes with the same engine).
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import ssl
import threading
import time
import zlib

import pytest

from conftest import make_ctx
from harness import ENCODINGS, Reply, compress_events, decoded_before_error, rechunk, sse_reply
from support.e2e import PATHS, fetch
from support.events import encode_events, model_objs, parse_events, text_sequence
from thinkwire import engine
from thinkwire.surfaces import chat, messages, responses

pytestmark = pytest.mark.e2e

SURFACES = {"chat": chat, "messages": messages, "responses": responses}
TEXT = "<think>\nthe reasoning, \u00e9 \U0001d11e\n</think>\n\nthe answer, done."
FIGURES: dict[str, int] = {}


def upstream_bytes(surface: str, text: str = TEXT, step: int = 4) -> bytes:
    deltas = [text[i:i + step] for i in range(0, len(text), step)]
    return b"".join(encode_events(surface, model_objs(surface, deltas)))


@pytest.fixture(scope="module")
def proxy(proxy_factory):
    # These tests compare the client's bytes with the offline rewrite of the same stream. The
    # default thinking signature is a mark, sealed with a random nonce: both sides use unsigned.
    return proxy_factory(options={"think_signature": "unsigned"})


def offline(surface: str, data: bytes) -> bytes:
    d = engine.stream_driver(SURFACES[surface], make_ctx({"model": "m", "stream": True}, signature="unsigned"))
    return b"".join(d(data) + d(b""))


def is_prefix_of_rewrite(got: bytes, *candidates: bytes) -> bool:
    """The client's events, but for a last partial one, are the first events of a candidate
    rewrite; a last partial event is a byte prefix of the candidate's next event."""
    g = parse_events(got)
    for full in candidates:
        f = parse_events(full)
        complete = [e for e in g if e.complete]
        if [e.raw for e in complete] != [e.raw for e in f[:len(complete)]]:
            continue
        partial = [e for e in g if not e.complete]
        if not partial or (len(f) > len(complete) and f[len(complete)].raw.startswith(partial[0].raw)):
            return True
    return False


def assert_healthy(proxy, up, surface: str = "chat") -> None:
    """The proxy still serves: a normal stream right after gets the full correct rewrite."""
    data = upstream_bytes(surface)
    up.route(PATHS[surface], sse_reply([data]))
    status, got, err = fetch(proxy, surface)
    assert (status, err) == (200, None)
    assert got == offline(surface, data)
    assert proxy.alive()
    log = proxy.log()
    assert "Traceback" not in log and "addon error" not in log.lower(), log[-3000:]


def tally(name: str) -> None:
    FIGURES[name] = FIGURES.get(name, 0) + 1


# -- the upstream breaks off ------------------------------------------------------------------
def _cut_points(data: bytes) -> dict[str, int]:
    tag = data.index(b"\n\n", data.index(b"<\"", 20)) + 2   # after an event ending in the "<" of "</think>"
    ev = data.index(b"\n\n", len(data) // 2) - 10      # inside an event
    between = data.index(b"\n\n", len(data) // 3) + 2  # between two events
    return {"mid-tag": tag, "mid-event": ev, "between events": between}


@pytest.mark.parametrize("surface", list(SURFACES))
@pytest.mark.parametrize("where", ["mid-tag", "mid-event", "between events"])
@pytest.mark.parametrize("framing", ["chunked", "content-length"])
def test_upstream_closes_mid_stream(proxy, up, surface, where, framing):
    data = upstream_bytes(surface)
    at = _cut_points(data)[where]
    sent = data[:at]
    if framing == "chunked":
        reply = sse_reply([sent, data[at:]], close_after=1)
    else:   # announces the whole length, sends part of it, closes
        reply = sse_reply([sent, data[at:]], chunked=False, content_length=len(data), close_after=1)
    up.route(PATHS[surface], reply)
    status, got, err = fetch(proxy, surface)
    assert status == 200
    assert is_prefix_of_rewrite(got, offline(surface, data), offline(surface, sent)), got[-500:]
    tally("upstream closed mid-stream")
    assert_healthy(proxy, up, surface)


@pytest.mark.parametrize("surface", list(SURFACES))
def test_upstream_stalls_then_resumes(proxy, up, surface):
    data = upstream_bytes(surface)
    k = len(data) // 3
    up.route(PATHS[surface], sse_reply([data[:k], data[k:2 * k], data[2 * k:]], delay=0.7))
    status, got, err = fetch(proxy, surface)
    assert (status, err) == (200, None) and got == offline(surface, data)
    tally("upstream stalled and resumed")


@pytest.mark.parametrize("surface", list(SURFACES))
def test_upstream_content_length_larger_than_the_body(proxy, up, surface):
    data = upstream_bytes(surface)
    up.route(PATHS[surface], sse_reply([data, b"-"], chunked=False, content_length=len(data) + 100, close_after=1))
    status, got, err = fetch(proxy, surface, timeout=15)
    assert status == 200 and is_prefix_of_rewrite(got, offline(surface, data))
    tally("content-length larger than the body")
    assert_healthy(proxy, up, surface)


@pytest.mark.parametrize("surface", list(SURFACES))
def test_upstream_content_length_smaller_than_the_body(proxy, up, surface):
    data = upstream_bytes(surface)
    short = len(data) // 2
    up.route(PATHS[surface], sse_reply([data], chunked=False, content_length=short))
    status, got, err = fetch(proxy, surface)
    # The proxy reads what was announced: the client gets the rewrite of those bytes.
    assert status == 200 and is_prefix_of_rewrite(got, offline(surface, data[:short]), offline(surface, data))
    tally("content-length smaller than the body")
    assert_healthy(proxy, up, surface)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("surface", list(SURFACES))
def test_compressed_stream_cut_mid_frame(proxy, up, surface, encoding):
    data = upstream_bytes(surface)
    comp = gzip.compress(data) if encoding == "gzip" else zlib.compress(data)
    at = len(comp) * 2 // 3
    up.route(PATHS[surface], sse_reply([comp[:at], comp[at:]], close_after=1,
                                       headers={"content-encoding": encoding}))
    status, got, err = fetch(proxy, surface)
    assert status == 200
    sent = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS).decompress(comp[:at])
    assert is_prefix_of_rewrite(got, offline(surface, data), offline(surface, sent)), got[-300:]
    tally("compressed stream cut mid-frame")
    assert_healthy(proxy, up, surface)


# -- broken compressed streams: what decoded, then a clean end, never raw bytes ----------------
# The upstream compresses per event (as servers that flush their compressor for SSE do), then
# breaks the stream: cut short with a proper end of body, or plain bytes where compressed
# ones belong. Content-Encoding is gone from what the client gets, so raw compressed bytes
# would be garbage to it; it must get the rewrite of what decoded and a clean end.
JUNK = b'data: {"error": "gateway wrote plain text"}\n\n'
BROKEN = ["cut mid-event", "cut before the end marker", "plain text after an event", "plain text for the header"]


def raw_fetch(proxy, surface: str) -> tuple[int, dict, bytes, str | None]:
    """(status, headers, body, read error) with no decoding by the client."""
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=20)
    conn.request("POST", PATHS[surface], body=b'{"model": "m", "stream": true, "messages": [], "input": "q"}',
                 headers={"content-type": "application/json", "accept-encoding": "gzip, deflate, br, zstd"})
    r = conn.getresponse()
    err = None
    try:
        body = r.read()
    except http.client.IncompleteRead as e:
        body, err = e.partial, "IncompleteRead"
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body, err


def broken_upstream(encoding: str, surface: str, where: str) -> tuple[list[bytes], list[bytes]]:
    """(what the upstream writes, one write per item, paused between; what the client may get:
    the first is the whole decodable prefix)."""
    events = encode_events(surface, model_objs(surface, [TEXT[i:i + 8] for i in range(0, len(TEXT), 8)]))
    pieces = compress_events(encoding, events)
    k = len(pieces) // 2
    if where.startswith("cut"):
        whole = b"".join(pieces)
        at = sum(map(len, pieces[:k])) + len(pieces[k]) // 2 if where == "cut mid-event" else len(whole) - len(pieces[-1])
        # No error to stop at: the decoder gives the same bytes whatever the reads.
        return rechunk(whole[:at], [7, 30]), [offline(surface, decoded_before_error(encoding, [whole[:at]]))]
    writes = [JUNK] + pieces[1:] if where == "plain text for the header" else pieces[:k] + [JUNK] + pieces[k:]
    # The proxy may read the last good piece together with the junk (one read it cannot decode):
    # then it ends one piece earlier. Every earlier end is accepted; the first is the expected one.
    bad = writes.index(JUNK)
    return writes, [offline(surface, decoded_before_error(encoding, writes[:j])) for j in range(bad, -1, -1)]


def _broken_cases():
    surfaces = list(SURFACES)
    return [(enc, where, surfaces[(i + j) % 3]) for i, enc in enumerate(ENCODINGS) for j, where in enumerate(BROKEN)]


@pytest.mark.parametrize("encoding,where,surface", _broken_cases())
def test_broken_compressed_stream_ends_cleanly_with_what_decoded(proxy, up, encoding, where, surface):
    writes, candidates = broken_upstream(encoding, surface, where)
    pause = 0 if where.startswith("cut") else 0.02   # a cut needs no pauses: reads do not matter
    up.route(PATHS[surface], sse_reply(writes, delay=pause, headers={"content-encoding": encoding}))
    warned = proxy.log().count("the client gets what was decoded")
    status, headers, got, err = raw_fetch(proxy, surface)
    assert (status, err) == (200, None)                     # a clean end of the body
    assert "content-encoding" not in headers
    assert got in candidates, (got[-300:], candidates[0][-300:])
    got.decode("utf-8")                                     # text: no compressed bytes in it
    assert JUNK not in got
    if where.startswith("cut"):
        assert got == candidates[0]                         # exact, whatever the reads
    if where != "plain text for the header":
        assert text_sequence(surface, got)[0][0] == "r"     # the reasoning came out as reasoning
    deadline = time.monotonic() + 5   # the proxy's log line comes a moment after the body
    while proxy.log().count("the client gets what was decoded") == warned and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proxy.log().count("the client gets what was decoded") == warned + 1   # one warning
    tally("broken compressed stream")
    assert_healthy(proxy, up, surface)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_sdk_reads_a_broken_compressed_stream_to_a_clean_end(proxy, up, encoding):
    import openai
    writes, candidates = broken_upstream(encoding, "chat", "plain text after an event")
    up.route(PATHS["chat"], sse_reply(writes, delay=0.02, headers={"content-encoding": encoding}))
    c = openai.OpenAI(base_url=proxy.url + "/v1", api_key="x", max_retries=0, timeout=20)
    with c.chat.completions.stream(model="m", messages=[]) as s:
        m = s.get_final_completion().choices[0].message
    # Cut inside "</think>": the open block stays reasoning, with the partial tag as text.
    assert m.model_extra["reasoning_content"] in [
        "".join(t for kind, t in text_sequence("chat", c) if kind == "r") for c in candidates]
    assert m.model_extra["reasoning_content"].startswith("the reasoning") and not m.content


# -- the client breaks off --------------------------------------------------------------------
@pytest.mark.parametrize("surface", list(SURFACES))
def test_client_disconnects_mid_stream(proxy, up, surface):
    data = upstream_bytes(surface)
    pieces = [data[i:i + 40] for i in range(0, len(data), 40)]
    up.route(PATHS[surface], sse_reply(pieces, delay=0.05))
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    body = b'{"model":"m","stream":true}'
    s.sendall(b"POST " + PATHS[surface].encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    assert s.recv(200).startswith(b"HTTP/1.1 200")
    s.close()   # mid-stream: the upstream is still sending
    time.sleep(0.5)
    tally("client disconnected mid-stream")
    assert_healthy(proxy, up, surface)


def test_other_flows_keep_working_while_one_breaks(proxy, up):
    """A flow broken off mid-stream alongside healthy ones: the healthy ones are whole."""
    good = upstream_bytes("chat")
    bad = upstream_bytes("messages")
    up.route(PATHS["chat"], sse_reply([good[i:i + 50] for i in range(0, len(good), 50)], delay=0.02))
    up.route(PATHS["messages"], sse_reply([bad[:len(bad) // 2], bad[len(bad) // 2:]], close_after=1, delay=0.2))
    results: dict = {}

    def run(k, surface):
        results[k] = (surface, fetch(proxy, surface))
    threads = [threading.Thread(target=run, args=(k, "messages" if k % 3 == 0 else "chat")) for k in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for surface, (status, got, err) in results.values():
        if surface == "chat":
            assert (status, err, got) == (200, None, offline("chat", good))
        else:
            assert is_prefix_of_rewrite(got, offline("messages", bad), offline("messages", bad[:len(bad) // 2]))
    assert len(results) == 9


# -- HTTP/2 over TLS to the proxy --------------------------------------------------------------
def test_http2_client_over_tls_gets_the_rewrite(proxy_factory, up, tmp_path):
    import httpx2
    conf = tmp_path / "conf"
    p = proxy_factory(confdir=conf)
    ca = conf / "mitmproxy-ca-cert.pem"
    deadline = time.monotonic() + 10
    while not ca.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    data = upstream_bytes("chat")
    up.route(PATHS["chat"], sse_reply([data[i:i + 30] for i in range(0, len(data), 30)]))
    ctx = ssl.create_default_context(cafile=str(ca))
    with httpx2.Client(http2=True, verify=ctx, timeout=20) as c:
        with c.stream("POST", f"https://localhost:{p.port}{PATHS['chat']}",
                      json={"model": "m", "stream": True, "messages": []}) as r:
            assert r.http_version == "HTTP/2"
            assert "transfer-encoding" not in r.headers
            got = b"".join(r.iter_raw())
    assert got == offline("chat", data)
    seq = text_sequence("chat", got)
    assert "".join(t for k, t in seq if k == "r") == "the reasoning, \u00e9 \U0001d11e"
    tally("HTTP/2 over TLS")
    assert "Traceback" not in p.log()
