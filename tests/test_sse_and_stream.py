"""SSE framing and the stream driver: framing at any boundary, decoders, fail-open."""

import gzip
import json
import zlib

import pytest
from hypothesis import given, settings, strategies as st

from harness import ENCODINGS, compress_events, decoded_before_error, rechunk
from thinkwire.events import Event
from thinkwire.sse import SSEParser, encode
from thinkwire.stream import StreamDriver, decoder_for


def parse_all(chunks):
    p = SSEParser()
    out = []
    for c in chunks:
        out += p.feed(c)
    return out + p.finish()


# -- framing ------------------------------------------------------------------------------
def test_events_keep_their_original_bytes():
    data = b"event: a\ndata: 1\n\n: comment\n\ndata: x\ndata: y\nid: 7\n\n"
    evs = parse_all([data])
    assert b"".join(e.raw for e in evs) == data
    assert [(e.event, e.data) for e in evs] == [("a", "1"), (None, None), (None, "x\ny")]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_frames_events(eol):
    data = eol.join([b"data: 1", b"", b"event: e", b"data: 2", b"", b""])
    evs = parse_all(rechunk(data, [1]))
    assert [(e.event, e.data, e.eol) for e in evs] == [(None, "1", eol), ("e", "2", eol)]
    assert b"".join(e.raw for e in evs) == data


def test_crlf_split_between_cr_and_lf_is_one_line_end():
    evs = parse_all([b"data: 1\r", b"\n\r", b"\n"])
    assert [(e.data, e.raw) for e in evs] == [("1", b"data: 1\r\n\r\n")]


def test_bom_at_stream_start_is_ignored_for_parsing_but_kept():
    data = b"\xef\xbb\xbfdata: 1\n\n"
    evs = parse_all([data])
    assert evs[0].data == "1" and evs[0].raw == data


def test_field_without_space_after_colon():
    assert parse_all([b"data:1\nevent:x\n\n"])[0].data == "1"


def test_unterminated_last_event_is_returned_at_finish():
    evs = parse_all([b"data: 1\n\ndata: tail"])
    assert [e.data for e in evs] == ["1", "tail"] and evs[-1].raw == b"data: tail"


def test_utf8_split_mid_character_is_decoded_whole():
    data = "data: é𝄞\n\n".encode()
    assert parse_all(rechunk(data, [1]))[0].data == "é𝄞"


def test_invalid_utf8_survives_a_round_trip():
    data = b"data: \xff\xfe ok\n\n"
    ev = parse_all([data])[0]
    assert encode(ev.data) == data


def test_encode_multiline_data_and_event_name():
    assert encode("a\nb", "e", b"\r\n") == b"event: e\r\ndata: a\r\ndata: b\r\n\r\n"


def test_pending_hands_over_unparsed_bytes():
    p = SSEParser()
    p.feed(b"data: 1\n\ndata: par")
    assert p.pending() == b"data: par" and p.finish() == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"data: x", b"data: {\"a\": 1}", b"event: e", b": c", b"", b"id: 1",
                                 b"data:", "data: é".encode()]), max_size=20),
       st.sampled_from([b"\n", b"\r\n", b"\r"]), st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_framing_is_independent_of_chunking(lines, eol, sizes):
    data = eol.join(lines) + eol
    whole = parse_all([data])
    pieces = parse_all(rechunk(data, sizes))
    assert [(e.raw, e.event, e.data) for e in pieces] == [(e.raw, e.event, e.data) for e in whole]
    assert b"".join(e.raw for e in pieces) == data


# -- the driver ---------------------------------------------------------------------------
class Upper:
    """A toy rewriter: upper-cases data, holds nothing."""

    def __init__(self, fail_on=None):
        self.fail_on = fail_on
        self.aborted = False

    def on_event(self, ev: Event):
        if self.fail_on is not None and ev.data == self.fail_on:
            raise RuntimeError("boom")
        return [encode(ev.data.upper())] if ev.data else [ev.raw]

    def finish(self):
        return [b": end\n\n"]

    def abort(self):
        self.aborted = True
        return [b": held\n\n"]


def drive(driver, chunks):
    out = []
    for c in chunks:
        got = driver(c)
        assert all(got)
        out += got
    return b"".join(out + driver(b""))


def test_driver_rewrites_and_flushes_at_the_end():
    assert drive(StreamDriver(Upper()), [b"data: a\n\nda", b"ta: b\n\n"]) == b"data: A\n\ndata: B\n\n: end\n\n"


def test_driver_never_returns_an_empty_chunk_mid_stream():
    d = StreamDriver(Upper())
    assert d(b"data: partial") == []


def test_driver_fails_open_with_held_text_then_original_bytes():
    reasons = []
    d = StreamDriver(Upper(fail_on="b"), on_fail=reasons.append)
    out = drive(d, [b"data: a\n\ndata: b\n\ndata: c\n\nda", b"ta: d\n\n"])
    assert out == b"data: A\n\n: held\n\ndata: b\n\ndata: c\n\ndata: d\n\n"
    assert reasons == ["the rewrite raised RuntimeError"] and d.failure == "the rewrite raised RuntimeError"


def test_driver_failure_in_finish_still_sends_held_text():
    class BadFinish(Upper):
        def finish(self):
            raise ValueError("late")
    d = StreamDriver(BadFinish())
    assert drive(d, [b"data: a\n\n"]) == b"data: A\n\n: held\n\n" and d.failure == "the rewrite raised ValueError"


def test_driver_survives_abort_failing_too():
    class BadAbort(Upper):
        def abort(self):
            raise ValueError("worse")
    d = StreamDriver(BadAbort(fail_on="a"))
    assert drive(d, [b"data: a\n\n"]) == b"data: a\n\n"


@pytest.mark.parametrize("encoding,compress", [
    ("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", zlib.compress),
    ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send it
])
def test_driver_decodes_compressed_streams_at_any_boundary(encoding, compress):
    data = b"data: a\n\ndata: b\n\n"
    comp = compress(data)
    for size in (1, 3, len(comp)):
        assert drive(StreamDriver(Upper(), decoder_for(encoding)), rechunk(comp, [size])) == \
            b"data: A\n\ndata: B\n\n: end\n\n"


def test_driver_decodes_concatenated_gzip_members():
    comp = gzip.compress(b"data: a\n\n") + gzip.compress(b"data: b\n\n")
    assert drive(StreamDriver(Upper(), decoder_for("gzip")), [comp]) == b"data: A\n\ndata: B\n\n: end\n\n"


def test_driver_decodes_brotli_and_zstd():
    import brotli
    from backports import zstd
    data = b"data: a\n\n"
    assert drive(StreamDriver(Upper(), decoder_for("br")), rechunk(brotli.compress(data), [2])).startswith(b"data: A")
    two_frames = zstd.compress(data) + zstd.compress(b"data: b\n\n")
    assert drive(StreamDriver(Upper(), decoder_for("zstd")), rechunk(two_frames, [3])).startswith(b"data: A\n\ndata: B")


def test_identity_and_unknown_encodings():
    assert decoder_for(None) is None and decoder_for("identity") is None
    with pytest.raises(KeyError):
        decoder_for("compress")


# -- broken compressed streams: what decoded, then a clean end, one warning ----------------
EVENTS = [b"data: e%d\n\n" % i for i in range(6)]


def plain(decoded: bytes) -> bytes:
    """What the client gets for `decoded` sent uncompressed, ending there."""
    return drive(StreamDriver(Upper()), [decoded])


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def cut_points(pieces: list[bytes]) -> dict[str, int]:
    ends = [sum(map(len, pieces[:i + 1])) for i in range(len(pieces))]
    return {"after one byte": 1, "inside the header": min(5, ends[0] - 1), "mid-event": ends[2] + len(pieces[3]) // 2,
            "between events": ends[2], "before the end marker": ends[-2]}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("where", ["after one byte", "inside the header", "mid-event", "between events",
                                   "before the end marker"])
def test_compressed_stream_cut_short_ends_cleanly_with_what_decoded(encoding, where, caplog):
    pieces = compress_events(encoding, EVENTS)
    sent = b"".join(pieces)[:cut_points(pieces)[where]]
    want = plain(decoded_before_error(encoding, [sent]))
    for size in (1, 7, len(sent)):   # the reads the proxy happens to make do not matter
        caplog.clear()
        d = StreamDriver(Upper(), decoder_for(encoding))
        assert drive(d, rechunk(sent, [size])) == want
        assert d.broken == "the compressed stream ended before its end marker" and d.failure is None
        assert len(warnings(caplog)) == 1


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_whole_compressed_stream_ends_without_a_warning(encoding, caplog):
    d = StreamDriver(Upper(), decoder_for(encoding))
    assert drive(d, compress_events(encoding, EVENTS)) == plain(b"".join(EVENTS))
    assert d.broken is None and not warnings(caplog)


def corrupt(pieces: list[bytes], where: str) -> list[bytes]:
    """The stream as read, one piece per read, broken at `where`."""
    junk = b'data: {"error": "not compressed"}\n\n'   # a gateway writing plain text mid-stream
    if where == "the header":
        return [junk] + pieces[1:]
    if where == "after an event":
        return pieces[:3] + [junk] + pieces[3:]
    if where == "inside an event":  # flipped bits: what decodes before the check fails may be junk
        bad = bytearray(pieces[3])
        for i in range(len(bad) // 3, len(bad)):
            bad[i] ^= 0x5A
        return pieces[:3] + [bytes(bad)] + pieces[4:]
    assert where == "a member ends, then junk"
    return pieces + [b"\xff" * 12]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("where", ["the header", "after an event", "inside an event", "a member ends, then junk"])
def test_corrupt_compressed_stream_ends_cleanly_with_what_decoded(encoding, where, caplog):
    chunks = corrupt(compress_events(encoding, EVENTS), where)
    d = StreamDriver(Upper(), decoder_for(encoding))
    got = [d(c) for c in chunks] + [d(b"")]
    assert all(piece for out in got for piece in out)          # never an empty chunk mid-stream
    out = b"".join(piece for out in got for piece in out)
    assert out == plain(decoded_before_error(encoding, chunks))
    assert b"not compressed" not in out and not any(c in out for c in chunks if len(c) > 4)
    assert out.endswith(b": end\n\n") and d.ended                # the rewriter's clean end
    assert d.failure is None and len(warnings(caplog)) == (d.broken is not None)
    if where != "inside an event":   # flipped bits need not be detected (zstd here has no checksum)
        assert d.broken.startswith("cannot decode the compressed stream")
    if where == "a member ends, then junk":
        assert out == plain(b"".join(EVENTS))   # everything before the junk


def test_after_a_break_the_rest_is_dropped_and_the_end_comes_once():
    d = StreamDriver(Upper(), decoder_for("gzip"))
    assert d(compress_events("gzip", EVENTS[:1])[0]) == [b"data: E0\n\n"]
    assert d(b"not gzip") == [b": end\n\n"]
    assert d(b"more") == [] and d(b"") == []


def test_a_broken_stream_in_pass_through_after_a_rewrite_failure_ends_too():
    d = StreamDriver(Upper(fail_on="e1"), decoder_for("gzip"))
    pieces = compress_events("gzip", EVENTS)
    out = b"".join(d(pieces[0]) + d(pieces[1]) + d(b"\xff\xff") + d(pieces[2]) + d(b""))
    assert out == b"data: E0\n\n: held\n\ndata: e1\n\n" and d.failure and d.broken


def test_broken_stream_flushes_the_held_text_of_a_real_surface():
    from conftest import make_ctx
    from thinkwire import engine
    from thinkwire.surfaces import chat

    def delta(t):
        return b'data: {"choices":[{"index":0,"delta":{"content":%s}}]}\n\n' % json.dumps(t).encode()
    events = [delta("<think>why"), delta("</think>ok <thi")]   # "<thi" is held: it may open a tag
    ctx = make_ctx({"model": "m", "stream": True})
    d = engine.stream_driver(chat, ctx, decoder_for("br"))
    out = b"".join(b"".join(d(c)) for c in compress_events("br", events)[:2] + [b"\xff\xff", b""])
    ref = engine.stream_driver(chat, make_ctx({"model": "m", "stream": True}))
    assert out == b"".join(ref(b"".join(events)) + ref(b""))
    assert b'"content":"<thi"' in out
    assert ctx.stats.broken and ctx.stats.broken.startswith("cannot decode") and ctx.stats.fell_back is None


def test_deflate_cut_after_one_byte_gives_nothing_and_no_error():
    d = decoder_for("deflate")
    assert d.decompress(b"x") == b""
    assert d.flush() == b""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"data: x", b"data: {\"a\": 1}", b"event: e", b": c", b"", b"id: 1",
                                 b"data:", "data: é".encode(), b"\r"]), max_size=20),
       st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_whole_event_reads_frame_like_any_other_chunking(lines, sizes):
    """After the first event, a read of whole LF events takes a shortcut: same events."""
    first = b"data: first\n\n"
    rest = b"\n".join(lines) + b"\n\n"
    whole = parse_all([first, rest])
    pieces = parse_all([first] + rechunk(rest, sizes))
    assert [(e.raw, e.event, e.data) for e in whole] == [(e.raw, e.event, e.data) for e in pieces]


def test_a_long_read_of_whole_events_frames_like_any_other_chunking():
    """A read over 4 KB goes line by line (memchr), not through the bytes.split shortcut."""
    long = b'event: response.output_text.done\ndata: {"text":"' + b"w \\n" * 2000 + b'"}\n\n'
    for rest in [long, long + b"data: 2\n\n", b"data: 1\n\n" * 500]:
        assert len(rest) > 4096
        whole = parse_all([b"data: first\n\n", rest])
        pieces = parse_all([b"data: first\n\n"] + rechunk(rest, [997]))
        assert [(e.raw, e.event, e.data) for e in whole] == [(e.raw, e.event, e.data) for e in pieces]
        assert len(whole) == 1 + rest.count(b"\n\n")


def test_whole_event_read_shortcut_is_taken():
    p = SSEParser()
    p.feed(b"data: 1\n\n")
    evs = p.feed(b"event: e\ndata: 2\n\ndata: 3\n\n")
    assert [(e.raw, e.event, e.data) for e in evs] == [(b"event: e\ndata: 2\n\n", "e", "2"), (b"data: 3\n\n", None, "3")]


def test_encode_splits_data_lines_only_at_cr_and_lf():
    data = "a\u2028b\x0bc\nd\n"
    ev = parse_all([encode(data)])[0]
    assert ev.data == data
