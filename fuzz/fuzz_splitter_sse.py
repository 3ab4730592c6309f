"""Coverage-guided fuzz target (atheris / libFuzzer) for the splitter, the SSE and NDJSON layers
and the stream driver with each surface's rewriter.

    python fuzz/fuzz_splitter_sse.py -max_total_time=30      # or -runs=N; corpus dirs optional

One input drives: the splitter fed in pieces (checking that chunking does not matter and that
nothing but tag markup is lost), the SSE parser fed in pieces (events reassemble to the exact
bytes), the NDJSON parser likewise (lines reassemble to the exact bytes), and a StreamDriver
per surface (never raises, never returns an empty chunk). Any
failed check raises, which libFuzzer reports as a crash with the input saved.
"""

from __future__ import annotations

import os
import sys

import atheris

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "addon"))

with atheris.instrument_imports():
    from thinkwire import engine
    from thinkwire.settings import Settings
    from thinkwire.splitter import CONTENT, REASONING, Splitter, split_text
    from thinkwire.ndjson import NDJSONParser
    from thinkwire.sse import SSEParser
    from thinkwire.surfaces import chat, messages, ollama, responses

SETTINGS = {trim: Settings.from_values({"think_trim": trim}) for trim in ("on", "off")}
SURFACES = (chat, messages, responses, ollama)
_WS = " \t\r\n\f\v"


def _pieces(fdp: atheris.FuzzedDataProvider, data, n: int):
    out, i = [], 0
    while i < len(data):
        k = fdp.ConsumeIntInRange(1, max(1, n))
        out.append(data[i:i + k])
        i += k
    return out


def _check_splitter(fdp, text: str, trim: str) -> None:
    ctx = engine.new_context(SETTINGS[trim], None)
    rules = ctx.rules()
    whole = Splitter(rules)
    a = whole.feed(text) + whole.finish()
    part = Splitter(rules)
    b = []
    for p in _pieces(fdp, text, 9):
        b += part.feed(p)
    b += part.finish()
    join = lambda ps, k: "".join(v for kk, v in ps if kk == k)  # noqa: E731
    assert join(a, REASONING) == join(b, REASONING) and join(a, CONTENT) == join(b, CONTENT), "chunking mattered"
    kept = join(a, REASONING) + join(a, CONTENT)
    if trim == "off":
        # Only markup goes: as many characters as the tags it removed, and every kept
        # character in the input's order.
        assert len(text) - len(kept) == whole.markup_chars, "text lost or added"
    else:  # trimming may remove whitespace too, and put line breaks between words; nothing else
        assert len(kept) - whole.added_chars + whole.markup_chars <= len(text), "text added"
        assert kept.count("\n") >= whole.added_chars
    split_text(text, rules)  # the whole-body path never raises either


def _check_framing(fdp, data: bytes, parser) -> None:
    evs = []
    for piece in _pieces(fdp, data, 17):
        evs += parser.feed(piece)
    evs += parser.finish()
    assert b"".join(e.raw for e in evs) == data, f"{type(parser).__name__} lost or added bytes"


def _check_driver(fdp, data: bytes) -> None:
    surface = SURFACES[fdp.ConsumeIntInRange(0, len(SURFACES) - 1)]
    ctx = engine.new_context(SETTINGS["off"], None)
    driver = engine.stream_driver(surface, ctx)
    for piece in _pieces(fdp, data, 64):
        got = driver(piece)
        assert isinstance(got, list) and all(isinstance(x, bytes) and x for x in got)
    driver(b"")


def TestOneInput(raw: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(raw)
    mode = fdp.ConsumeIntInRange(0, 4)
    trim = "on" if fdp.ConsumeBool() else "off"
    if mode == 0:
        _check_splitter(fdp, fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes()), trim)
    elif mode == 1:
        _check_framing(fdp, fdp.ConsumeBytes(fdp.remaining_bytes()), SSEParser())
    elif mode == 4:
        _check_framing(fdp, fdp.ConsumeBytes(fdp.remaining_bytes()), NDJSONParser())
    else:
        # SSE-shaped input helps the fuzzer reach the surfaces' JSON handling.
        body = fdp.ConsumeBytes(fdp.remaining_bytes())
        if mode == 3:
            body = b"".join(b"data: " + line + b"\n\n" for line in body.split(b"\n"))
        _check_driver(fdp, body)


SEEDS = [
    b"<think>a</think>b", "<thinking>\n\u00e9\U0001d11e</thinking>\n\nanswer".encode(),
    b'{"choices":[{"index":0,"delta":{"content":"<think>x</think>y"}}]}',
    b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n'
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"<think>x</thi"}}',
    b'{"type":"response.output_item.added","output_index":0,"item":{"id":"m","type":"message","content":[]}}\n'
    b'{"type":"response.content_part.added","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}\n'
    b'{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"<think>r</think>a"}',
    b'{"model":"m","created_at":"2025-08-20T13:48:22.1Z","message":{"role":"assistant","content":"\\u003cthink\\u003ex"},'
    b'"done":false}\n{"model":"m","created_at":"2025-08-20T13:48:22.2Z","response":"y</think>z","done":true}\n',
]


def main() -> None:
    args = list(sys.argv)
    corpus = [a for a in args[1:] if not a.startswith("-")]
    if not corpus:  # seed a temporary corpus so the run starts from shapes that matter
        import tempfile
        d = tempfile.mkdtemp(prefix="thinkwire-fuzz-")
        for k, s in enumerate(SEEDS):
            for mode in (0, 2, 3, 4):
                with open(os.path.join(d, f"seed{k}_{mode}"), "wb") as f:
                    f.write(bytes([mode, 0]) + s)
        args.append(d)
    atheris.Setup(args, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
