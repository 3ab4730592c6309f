"""(2) Per-event cost of each surface's stream rewrite, beside JSON and pass-through floors.

For every surface in engine.SURFACES that the workload knows how to stream, and for four kinds
of text delta, the same N events (one event per call, as tokens arrive) are timed through:
  pass      a stream callable that returns the bytes untouched (the bench's (b) addon)
  sse       thinkwire's framing alone (SSEParser.feed; Ollama: NDJSONParser.feed)
  json      json.loads + compact json.dumps of the event's data (a naive rewrite's floor)
  surface   the surface's StreamRewriter.on_event on pre-framed events
  driver    the whole stream callable thinkwire installs (StreamDriver: framing + rewrite + join)
Kinds: plain (a stream with no reasoning markup at all), reasoning (inside a block), answer
(after the block closed), boundary (every delta carries an opening or closing tag).
"""

from __future__ import annotations

import json
import tempfile
import time

from thinkwire import engine
from thinkwire.marks import LazySealer
from thinkwire.settings import Settings

import workload

STAMP = 1_700_000_000_000_000_000  # a realistic 19-digit stamp in every delta


def _answer_toks(n: int) -> list[str]:
    w = workload._ANSWER_WORDS
    return [f"{w[k % len(w)]}@{STAMP + k}" for k in range(n)]


def _reason_toks(n: int) -> list[str]:
    w = workload._REASONING_WORDS
    return [f"{w[k % len(w)]}@{STAMP + k}" for k in range(n)]


def _boundary_toks(n: int) -> list[str]:
    return [f" x@{STAMP + k}</think>\n\nSo" if k % 2 == 0 else f" y@{STAMP + k}<think>\nHm" for k in range(n)]


KINDS = {
    # kind: (text deltas before the timed ones, timed deltas)
    "plain": (lambda: [], _answer_toks),
    "reasoning": (lambda: ["<think>\nOkay"], _reason_toks),
    "answer": (lambda: ["<think>\nOkay", " done.</think>\n\nSo"], _answer_toks),
    "boundary": (lambda: ["<think>\nOkay", " done.</think>\n\nSo", " x<think>\nHm"], _boundary_toks),
}


def _per_event(fn, events: list, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        f = fn()
        t0 = time.process_time()
        for e in events:
            f(e)
        best = min(best, time.process_time() - t0)
    return best / len(events) * 1e6


def run(n: int, reps: int, log=print) -> dict:
    settings = Settings.from_values({})
    confdir = tempfile.TemporaryDirectory(prefix="thinkwire-bench-")
    sealer = LazySealer(confdir.name)
    out: dict = {}
    try:
        for name, module in engine.SURFACES.items():
            shape = workload.SHAPES.get(name)
            if shape is None:
                log(f"  surface {name}: no workload shape for it in the bench, skipped")
                continue
            out[name] = {}
            for kind, (pre_f, timed_f) in KINDS.items():
                st: dict = {}
                prelude = shape.head(st) + [shape.delta(st, t) for t in pre_f()]
                timed = [shape.delta(st, t) for t in timed_f(n)]
                parser = engine.PARSERS[module.STREAM_TYPE]   # (SSE; Ollama: NDJSON)
                framed = [parser().feed(e)[0] for e in timed]
                datas = [ev.data for ev in framed]

                def driver():
                    ctx = engine.new_context(settings, shape.request(), sealer)
                    d = engine.stream_driver(module, ctx)
                    for e in prelude:
                        d(e)
                    driver.last = d
                    return d

                def callable_():   # what mitmproxy calls: the C callable in front, where built
                    return driver().callable()

                def surface():
                    ctx = engine.new_context(settings, shape.request(), sealer)
                    rw = module.StreamRewriter(ctx)
                    p = parser()
                    for e in prelude:
                        for ev in p.feed(e):
                            rw.on_event(ev)
                    return rw.on_event

                def sse():   # (the surface's framing)
                    return parser().feed

                def pass_():
                    return lambda b: b

                def json_rt():
                    loads, dumps = json.loads, json.dumps
                    return lambda s: dumps(loads(s), ensure_ascii=False, separators=(",", ":"))

                row = {
                    "pass_us": _per_event(pass_, timed, reps),
                    "sse_us": _per_event(sse, timed, reps),
                    "json_us": _per_event(json_rt, datas, reps),
                    "surface_us": _per_event(surface, framed, reps),
                    "driver_us": _per_event(driver, timed, reps),
                    "callable_us": _per_event(callable_, timed, reps),
                }
                d = driver.last
                row["fell_back"] = d.failure
                row["driver_vs_json"] = row["driver_us"] / row["json_us"]
                out[name][kind] = row
                log(f"  {name:>9} {kind:>9}: callable {row['callable_us']:6.2f}, driver {row['driver_us']:6.1f} us/event "
                    f"(surface {row['surface_us']:5.1f}, sse {row['sse_us']:4.1f}, json rt {row['json_us']:5.1f}, "
                    f"pass {row['pass_us']:.2f})" + (f"  FELL BACK: {d.failure}" if d.failure else ""))
    finally:
        confdir.cleanup()
    return out


def held(lengths: list[int], log=print) -> dict:
    """Bytes one stream's rewriter holds (tracemalloc, after a gc) once it has passed each of
    `lengths` text events: what an open stream costs thinkwire, without the allocator's noise
    that RSS carries. Flat = memory does not grow with the stream."""
    import gc
    import tracemalloc

    settings = Settings.from_values({})
    confdir = tempfile.TemporaryDirectory(prefix="thinkwire-bench-")
    out: dict = {}
    try:
        for name, module in engine.SURFACES.items():
            shape = workload.SHAPES.get(name)
            if shape is None:
                continue
            st: dict = {}
            toks = workload.tokens(max(lengths))
            events = shape.head(st) + [shape.delta(st, workload.render(t, STAMP + k)) for k, t in enumerate(toks)]
            h = len(events) - len(toks)
            # Imports and caches a first flow fills are not per stream: run one flow before tracing.
            warm = engine.stream_driver(module, engine.new_context(settings, shape.request(), LazySealer(confdir.name)))
            for e in events[:h + 50]:
                warm(e)
            gc.collect()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            d = engine.stream_driver(module, engine.new_context(settings, shape.request(), LazySealer(confdir.name)))
            row = {}
            for i, e in enumerate(events):
                d(e)
                if i - h + 1 in lengths:
                    gc.collect()
                    row[str(i - h + 1)] = (tracemalloc.get_traced_memory()[0] - base) / 1024
            tracemalloc.stop()
            out[name] = row
            log(f"  held by one {name} stream: " + ", ".join(f"{k} events {v:.1f} KB" for k, v in row.items()))
    finally:
        confdir.cleanup()
    return out
