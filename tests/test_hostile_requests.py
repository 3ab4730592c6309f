"""Hostile requests, in process (issue 33): compressed bodies decoded with a cap, what is kept of
a request while its stream is open, what is logged of a model name."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
from mitmproxy.test import tutils

from thinkwire import decoding
from thinkwire.decoding import read_request

try:
    from compression import zstd
except ImportError:
    from backports import zstd

BODY = b'{"model":"m","messages":[{"role":"user","content":"' + b"x" * 300_000 + b'"}]}'
ENCODE = {"gzip": gzip.compress, "x-gzip": gzip.compress, "deflate": zlib.compress,
          "br": brotli.compress, "zstd": zstd.compress}


def _request(raw: bytes, encoding: str | None):
    r = tutils.treq(content=b"")
    r.raw_content = raw
    if encoding:
        r.headers["content-encoding"] = encoding
    return r


@pytest.mark.parametrize("encoding", sorted(ENCODE))
def test_a_compressed_body_under_the_cap_is_decoded(encoding):
    assert read_request(_request(ENCODE[encoding](BODY), encoding)) == (BODY, None)


class _Recording:
    """A decompressor whose every output is counted (bytes made, whatever the caller keeps)."""

    def __init__(self, real, made: list[int]) -> None:
        self._real, self._made = real, made

    def __getattr__(self, name):
        attr = getattr(self._real, name)
        if name not in ("decompress", "process", "flush"):
            return attr

        def call(*args, **kwargs):
            out = attr(*args, **kwargs)
            self._made.append(len(out))
            return out
        return call


@pytest.fixture
def made(monkeypatch) -> list[int]:
    """The sizes of every output the zlib, brotli and zstd decompressors make, in order."""
    made: list[int] = []
    for module, name in ((zlib, "decompressobj"), (brotli, "Decompressor"), (zstd, "ZstdDecompressor")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, **k: _Recording(_real(*a, **k), made))
    return made


@pytest.mark.parametrize("encoding", sorted(ENCODE))
def test_a_body_that_decodes_past_the_cap_is_not_read(encoding, made):
    cap = 1000
    got = read_request(_request(ENCODE[encoding](BODY), encoding), cap=cap)
    assert got[0] is None and got[1].startswith(f"its {encoding} body decodes to more than 0 MiB")
    # Decoding stopped at the cap's first byte over it (brotli's output buffer may grow to twice
    # the room it is given, and starts at 32 KiB).
    assert sum(made) <= 2 * (cap + 1) + (32 << 10) < len(BODY) // 4


def test_a_bomb_makes_at_most_the_cap_and_one_step(made):
    bomb = brotli.compress(b"a" * (200 << 20), quality=5)
    body, why = read_request(_request(bomb, "br"))
    assert body is None and why == f"its br body decodes to more than 32 MiB ({len(bomb)} bytes sent); it goes upstream unread"
    assert sum(made) <= decoding.REQUEST_MAX + (2 << 20) and max(made) <= 2 << 20


def test_gzip_members_one_after_another_are_all_read():
    assert read_request(_request(gzip.compress(b"ab") + gzip.compress(b"cd"), "gzip")) == (b"abcd", None)


def test_raw_deflate_is_read_as_mitmproxy_reads_it():
    c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw = c.compress(BODY) + c.flush()
    assert read_request(_request(raw, "deflate")) == (BODY, None)


@pytest.mark.parametrize("raw,encoding,why", [
    (gzip.compress(BODY)[:-10], "gzip", "its gzip body does not decode (truncated)"),
    (gzip.compress(BODY)[:-4], "gzip", "its gzip body does not decode (truncated)"),
    (brotli.compress(BODY)[:-3], "br", "its br body does not decode (truncated)"),
    (zstd.compress(BODY)[:-3], "zstd", "its zstd body does not decode (truncated)"),
    (gzip.compress(BODY)[:10] + b"garbage", "gzip", "its gzip body does not decode (error)"),
    (b"not brotli", "br", "its br body does not decode (error)"),
    (BODY, "compress", "content-encoding 'compress' is not decoded"),
    (BODY, "x" * 100, f"content-encoding {'x' * 40 + '...'!r} is not decoded"),
], ids=["gzip-cut-in-its-data", "gzip-cut-in-its-trailer", "br-cut", "zstd-cut", "gzip-garbage", "not-brotli",
        "compress", "a-long-encoding"])
def test_a_body_that_does_not_decode_is_not_read(raw, encoding, why):
    assert read_request(_request(raw, encoding)) == (None, why)


def test_a_plain_body_is_read_as_it_came():
    assert read_request(_request(BODY, None)) == (BODY, None)
    assert read_request(_request(BODY, "identity")) == (BODY, None)


# -- what is kept of a request while its stream is open (finding 11) ---------------------------------
def deep_size(obj, seen=None) -> int:
    """Bytes an object holds, with what it refers to (tuples, strings, a dataclass's fields)."""
    import dataclasses
    import sys
    seen = set() if seen is None else seen
    if id(obj) in seen or obj is None or isinstance(obj, (bool, int)):
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, (tuple, list)):
        size += sum(deep_size(x, seen) for x in obj)
    elif isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif dataclasses.is_dataclass(obj):
        size += sum(deep_size(getattr(obj, f.name), seen) for f in dataclasses.fields(obj))
    return size


KEPT_MAX = 2048   # bytes kept of a request while its stream is open, but for a prefill's text


def test_an_open_stream_keeps_a_small_record_of_its_2_mib_request_not_the_parsed_body():
    """Finding 11: the parsed request was kept for a stream's whole life (~4.4 MiB per open
    stream with 2 MiB requests). Now only its facts (request.Facts) are, a few hundred bytes."""
    import json
    from mitmproxy.test import taddons, tflow, tutils
    from thinkwire.addon import ThinkWire
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": "x" * 2100} for i in range(1000)]
    body = json.dumps({"model": "qwen3:8b" * 100, "stream": True, "messages": history + [{"role": "user", "content": "q"}],
                       "chat_template_kwargs": {"enable_thinking": True, **{f"k{i}": True for i in range(1000)}},
                       "reasoning_effort": "high"}).encode()
    assert len(body) > 2 << 20
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = tflow.tflow(req=tutils.treq(method=b"POST", path=b"/v1/chat/completions", content=body),
                        resp=tutils.tresp(headers=((b"content-type", b"text/event-stream"),), content=b""))
        tw.request(f)
        tw.responseheaders(f)
        kept = tw._requests[f.id]
        fctx = tw._streams[f.id][1]
        assert fctx.request is None and fctx.facts is kept
        size = deep_size(kept)
        print(f"\nwork figure: kept of a {len(body) >> 10} KiB request while its stream is open: {size} bytes")
        assert size <= KEPT_MAX
        assert len(kept.model) == 256 and kept.switch(("enable_thinking",)) is True and kept.said == (
            ("enable_thinking", True),)
        tw.response(f)
        assert f.id not in tw._requests
