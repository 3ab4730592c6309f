"""Coverage-guided fuzz target (atheris / libFuzzer) for the C part, thinkwire._hot, where it runs:
in front of the stream driver, as mitmproxy calls it.

    python fuzz/fuzz_hot.py -max_total_time=15      # or -runs=N; corpus dirs optional

One input is a stream the fuzzer shapes: a surface, its tag pairs, whether to trim, the fields
around the text (ids, an event name, Responses' first sequence number, at the limits, Ollama's
created_at, a timestamp or a string of the fuzzer's), and the text deltas, each a string of the
fuzzer's choosing (NULs, controls, lone surrogates, tags' first characters, long runs), sent an
event per chunk and then cut where the fuzzer says. The
bytes through the C callable must be those of the Python byte path, and the events those of the
full path; and the C type is also called straight, armed with specs and chunks made of the
input, where it must never crash and keep at most its cap. Any failed check raises, which
libFuzzer reports as a crash with the input saved. (Built with sanitizers, as devtools/sanitize.py
builds it, the same run looks for memory errors.)
"""

from __future__ import annotations

import json
import os
import sys

import atheris

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "addon"), ROOT]

with atheris.instrument_imports():
    from thinkwire import engine, hot
    from thinkwire.ndjson import NDJSONParser
    from thinkwire.settings import Settings
    from thinkwire.sse import SSEParser
    from thinkwire.stream import StreamDriver
    from thinkwire.surfaces import chat, messages, ollama, responses

if hot.Hot is None:   # pragma: no cover - nothing to fuzz
    raise SystemExit("thinkwire._hot is not built")

SURFACES = (chat, messages, responses, ollama)
TAGS = ["<think> </think>", "`T` `/T`", '"q" "/q"', "\\[ \\]", "x< x>", "\u00e9< \u00e9>", "<think> </think>,[T] [/T]"]
SETTINGS = {(t, trim): Settings.from_values({"think_tags": t, "think_trim": trim})
            for t in TAGS for trim in ("on", "off")}
NUMBERS = [0, 7, 10**18 - 2, 2**63 - 3, 2**64, 10**25]
WORDS = [" word", " so", "\n", " `x`", "a<", "<", "\x00", "\\", '"', "\ud800", "</think>", "<think>", "`/T`", " ",
         " a>b&c"]
STAMP = b"-+.:0123456789TZ"   # (the bytes of Ollama's created_at)
_GO = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _d(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _lines(texts: list[str], odd: str, stamps: list[str], go: bool) -> list[bytes]:
    """Ollama's lines: created_at a timestamp, or on every third line one of `stamps`; written as
    its Go server writes them (`go`: `<`, `>`, `&` escaped), or as json.dumps does."""
    def line(k, t, done):
        stamp = stamps[k % len(stamps)] if stamps and k % 3 == 2 else f"2025-08-20T13:48:{k % 60:02d}.{k}Z"
        data = _d({"model": odd, "created_at": stamp, "message": {"role": "assistant", "content": t}, "done": done})
        return (data.decode("utf-8", "surrogatepass").translate(_GO).encode("utf-8", "surrogatepass")
                if go else data) + b"\n"
    return [line(k, t, False) for k, t in enumerate(texts)] + [line(len(texts), "", True)]


def _stream(surface, texts: list[str], odd: str, name: bytes | None, seq0: int) -> list[bytes]:
    def ev(obj, own=None):
        n = name if name is not None else own
        return (b"event: " + n + b"\n" if n is not None else b"") + b"data: " + _d(obj) + b"\n\n"
    if surface is chat:
        head = {"id": odd, "object": "chat.completion.chunk", "model": odd}
        return ([ev(dict(head, choices=[{"index": 0, "delta": {"content": t}, "finish_reason": None}])) for t in texts]
                + [b"data: [DONE]\n\n"])
    if surface is messages:
        objs = [{"type": "message_start", "message": {"id": odd, "type": "message", "role": "assistant", "model": odd,
                                                      "content": []}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
        objs += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}} for t in texts]
        objs += [{"type": "content_block_stop", "index": 0}, {"type": "message_stop"}]
        return [ev(o, o["type"].encode()) for o in objs]
    objs = [{"type": "response.output_item.added", "output_index": 0,
             "item": {"id": odd, "type": "message", "role": "assistant", "content": []}},
            {"type": "response.content_part.added", "item_id": odd, "output_index": 0, "content_index": 0,
             "part": {"type": "output_text", "text": ""}}]
    objs += [{"type": "response.output_text.delta", "item_id": odd, "output_index": 0, "content_index": 0, "delta": t}
             for t in texts]
    objs += [{"type": "response.completed", "response": {"id": odd, "status": "completed", "output": []}}]
    return [ev({"type": o["type"], "sequence_number": seq0 + k, **o}, o["type"].encode()) for k, o in enumerate(objs)]


def _through(path: str, surface, settings, chunks: list[bytes]) -> bytes:
    d = StreamDriver(surface.StreamRewriter(engine.new_context(settings, None), fast=path != "full"),
                     parser=engine.PARSERS[surface.STREAM_TYPE]())
    call = d.callable() if path == "c" else d
    out = []
    for c in chunks:
        got = call(c)
        assert isinstance(got, list) and all(isinstance(b, bytes) and b for b in got), "bad output"
        out += got
    out += call(b"")
    assert d.failure is None, d.failure
    return b"".join(out)


def _events(data: bytes, surface) -> list:
    p = NDJSONParser() if surface is ollama else SSEParser()
    out = []
    for e in p.feed(data) + p.finish():
        try:
            out.append((e.event, json.loads(e.data)))
        except (TypeError, ValueError):
            out.append((e.event, e.data))
    return out


def _check_paths(fdp: atheris.FuzzedDataProvider) -> None:
    surface = SURFACES[fdp.ConsumeIntInRange(0, len(SURFACES) - 1)]
    settings = SETTINGS[(TAGS[fdp.ConsumeIntInRange(0, len(TAGS) - 1)], "on" if fdp.ConsumeBool() else "off")]
    odd = fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 8))
    name = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 6)).replace(b"\r", b"").replace(b"\n", b"")
    name = name if fdp.ConsumeBool() else None
    seq0 = NUMBERS[fdp.ConsumeIntInRange(0, len(NUMBERS) - 1)]
    texts = ["<think>" if fdp.ConsumeBool() else "ok"]
    for _ in range(fdp.ConsumeIntInRange(0, 24)):
        texts.append(WORDS[fdp.ConsumeIntInRange(0, len(WORDS) - 1)] if fdp.ConsumeBool()
                     else fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 12)) * fdp.ConsumeIntInRange(1, 3))
    if surface is ollama:
        stamps = [fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 6)) for _ in range(fdp.ConsumeIntInRange(0, 2))]
        events = _lines(texts, odd, stamps, fdp.ConsumeBool())
    else:
        events = _stream(surface, texts, odd, name, seq0)
    data = b"".join(events)
    cuts = sorted({fdp.ConsumeIntInRange(1, max(1, len(data) - 1)) for _ in range(fdp.ConsumeIntInRange(0, 4))})
    for chunks in (events, [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)]) if a < b]):
        c = _through("c", surface, settings, chunks)
        assert c == _through("byte", surface, settings, chunks), "C and the byte path differ"
        assert _events(c, surface) == _events(_through("full", surface, settings, chunks), surface), \
            "C and the full path differ"


def _check_direct(fdp: atheris.FuzzedDataProvider) -> None:
    """The C type called straight: specs and chunks of the input. Never a crash; what it keeps
    stays under its cap; its output is one bytes object or the fallback's."""
    rules = engine.new_context(SETTINGS[(TAGS[fdp.ConsumeIntInRange(0, len(TAGS) - 1)], "on")], None).rules()
    pre, post, mid = (fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 6)) for _ in range(3))
    slot_pos = fdp.ConsumeIntInRange(0, 2)
    # The second slot: a number (numbered), or a string literal of `chars` (the fuzzer's, maybe refused).
    string = slot_pos > 0 and fdp.ConsumeBool()
    seq_mode = (hot.SEQ_NONE if not slot_pos or string else hot.SEQ_OWN if fdp.ConsumeBool() else hot.SEQ_NEW)
    chars = (fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 6)) if fdp.ConsumeBool() else STAMP) if string else None
    channels = fdp.ConsumeIntInRange(1, 2) if seq_mode == hot.SEQ_NEW else 1
    trim = fdp.ConsumeBool()
    out = None
    if trim or seq_mode or fdp.ConsumeBool():
        parts = [fdp.ConsumeBytes(3) if fdp.ConsumeBool() else fdp.ConsumeIntInRange(0, 3)
                 for _ in range(fdp.ConsumeIntInRange(1, 6))]
        out = tuple(p for p in parts if isinstance(p, bytes) or p == hot.PART_BODY
                    or (string if p == hot.PART_STR else seq_mode and (p != hot.PART_N1 or channels == 2)))
    fallback = []
    h = hot.Hot(lambda chunk: fallback.append(chunk) or [b"F"])
    try:
        h.arm(hot.spec(rules, pre, post, out, trim=trim, slot_pos=slot_pos, mid=mid, seq_mode=seq_mode,
                       channels=channels, pass_same=fdp.ConsumeBool(), chars=chars),
              NUMBERS[fdp.ConsumeIntInRange(0, 3)], NUMBERS[fdp.ConsumeIntInRange(0, 3)])
    except ValueError:
        return   # a spec it refuses (a held text with no template, ...)
    for _ in range(fdp.ConsumeIntInRange(1, 12)):
        body = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 40)) * fdp.ConsumeIntInRange(1, 600)
        seq = (str(fdp.ConsumeIntInRange(0, 10**19)).encode() if chars is None
               else b'"' + fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 12)) * fdp.ConsumeIntInRange(1, 600) + b'"')
        slot = (seq + mid if slot_pos == 1 else b"") + b'"' + body + b'"' + (mid + seq if slot_pos == 2 else b"")
        chunk = pre + slot + post
        got = h(chunk)
        assert isinstance(got, list) and len(got) == 1 and isinstance(got[0], bytes)
    hits, changed, lit, offset, last = h.take()
    assert 0 <= changed <= hits and (lit is None) == (hits == 0) and (lit is None or len(lit) <= hot.CAP)
    assert offset >= 0 and last >= 0


def TestOneInput(raw: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(raw)
    if fdp.ConsumeIntInRange(0, 3):
        _check_paths(fdp)
    else:
        _check_direct(fdp)


SEEDS = [b"\x01\x00\x01\x05\x00\x00\x06word word word", b"\x02\x01\x00\x00\x03\x05a<a<a<a<", b"\x00" * 8 + b"xyz" * 20]


def main() -> None:
    args = list(sys.argv)
    corpus = [a for a in args[1:] if not a.startswith("-")]
    if not corpus:  # seed a temporary corpus so the run starts from shapes that matter
        import tempfile
        d = tempfile.mkdtemp(prefix="thinkwire-fuzz-hot-")
        for k, s in enumerate(SEEDS):
            with open(os.path.join(d, f"seed{k}"), "wb") as f:
                f.write(s)
        args.append(d)
    atheris.Setup(args, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
