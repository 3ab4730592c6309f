"""(1) Splitter throughput by stream size and chunk size, beside the rescan baseline."""

from __future__ import annotations

import gc
import random
import time

from thinkwire.rules import Rules
from thinkwire.splitter import CONTENT, REASONING, Splitter

import workload


def _partial(buf: str, tag: str) -> int:
    for k in range(min(len(tag) - 1, len(buf)), 0, -1):
        if buf.endswith(tag[:k]):
            return k
    return 0


class RescanSplitter:
    """The common approach this project avoids: append every chunk to one buffer, re-parse the
    whole buffer from the start, and send what is new since the last chunk.

    This is its strongest form: one tag pair, the scans are `str.find` (C speed), no regex. It
    does the same job (reasoning vs content, a partial tag at the end held back); its cost per
    chunk grows with what came before, so a stream costs O(n^2).
    """

    def __init__(self, open_: str = "<think>", close: str = "</think>") -> None:
        self.open, self.close = open_, close
        self.buf = ""
        self.sent_r = 0
        self.sent_c = 0

    def feed(self, chunk: str) -> list:
        self.buf += chunk
        return self._diff(False)

    def finish(self) -> list:
        return self._diff(True)

    def _diff(self, final: bool) -> list:
        r, c = self._parse(self.buf, final)
        out = []
        if len(r) > self.sent_r:
            out.append((REASONING, r[self.sent_r:]))
            self.sent_r = len(r)
        if len(c) > self.sent_c:
            out.append((CONTENT, c[self.sent_c:]))
            self.sent_c = len(c)
        return out

    def _parse(self, buf: str, final: bool) -> tuple[str, str]:
        o, cl = self.open, self.close
        reasoning, content = [], []
        i, n = 0, len(buf)
        while i < n:
            j = buf.find(o, i)
            if j < 0:
                content.append(buf[i:n if final else n - _partial(buf, o)])
                break
            content.append(buf[i:j])
            k = buf.find(cl, j + len(o))
            if k < 0:
                reasoning.append(buf[j + len(o):n if final else n - _partial(buf, cl)])
                break
            reasoning.append(buf[j + len(o):k])
            i = k + len(cl)
        return "".join(reasoning), "".join(content)


def _sizes(n: int, rng: tuple[int, int], seed: int = 1) -> list[int]:
    """Chunk lengths covering n characters (the chunks themselves are sliced while timing:
    millions of pre-cut strings scattered over memory would measure cache misses, not code)."""
    lo, hi = rng
    if lo == hi:
        return [lo] * (n // lo) + ([n % lo] if n % lo else [])
    r = random.Random(seed)
    out, i = [], 0
    while i < n:
        k = r.randint(lo, hi)
        out.append(k)
        i += k
    return out


def _time_once(make, text: str, sizes: list[int]) -> float:
    sp = make()
    feed = sp.feed
    i = 0
    t0 = time.process_time()
    for k in sizes:
        feed(text[i:i + k])
        i += k
    sp.finish()
    return time.process_time() - t0


def _best(make, text: str, sizes: list[int], min_total: float, min_runs: int = 1) -> float:
    """The fastest of several runs (at least one, and enough to fill `min_total` seconds)."""
    best = _time_once(make, text, sizes)
    spent, runs = best, 1
    while (spent < min_total or runs < min_runs) and runs < 20:
        t = _time_once(make, text, sizes)
        best = min(best, t)
        spent += t
        runs += 1
    return best


def _segments(make, text: str, sizes: list[int], bounds: list[int]) -> list[dict]:
    """One long stream, timed piece by piece: ns/char of [0, b0), [b0, b1) ... as it grows."""
    sp = make()
    feed = sp.feed
    out, i, j, start = [], 0, 0, 0
    perf = time.process_time
    for b in bounds:
        t0 = perf()
        while j < len(sizes) and i < b:
            k = sizes[j]
            feed(text[i:i + k])
            i += k
            j += 1
        t = perf() - t0
        out.append({"from": start, "to": i, "ns_per_char": t / max(1, i - start) * 1e9})
        start = i
    sp.finish()
    return out


CHUNKINGS = {"1-8": (1, 8), "4096": (4096, 4096)}


def run(rules: Rules, sizes: list[int], rescan_budget: float, min_total: float,
        log=print) -> dict:
    rows = []
    gc.collect()
    for label, rng in CHUNKINGS.items():
        rescan_last: tuple[int, float] | None = None
        for size in sizes:
            text = workload.text(size)
            pieces = _sizes(len(text), rng)
            t = _best(lambda: Splitter(rules), text, pieces, min_total, 2 if size <= 1_000_000 else 1)
            row = {"size": size, "chunking": label, "chunks": len(pieces),
                   "splitter_s": t, "splitter_ns_per_char": t / size * 1e9,
                   "splitter_ns_per_chunk": t / len(pieces) * 1e9,
                   "rescan_ns_per_char": None, "speedup": None}
            # The rescan baseline is quadratic: skip a size its growth says would take too long.
            est = None if rescan_last is None else rescan_last[1] * (size / rescan_last[0]) ** 2
            if est is None or est < rescan_budget:
                tr = _best(RescanSplitter, text, pieces, min_total if size <= 100_000 else 0)
                rescan_last = (size, tr)
                row["rescan_ns_per_char"] = tr / size * 1e9
                row["speedup"] = tr / t
            else:
                row["rescan_skipped"] = f"would take ~{est:.0f} s (quadratic)"
            rows.append(row)
            log(f"  splitter {label:>5} chunks {size / 1e3:>8.0f} KB: {row['splitter_ns_per_char']:7.1f} ns/char"
                + (f", rescan {row['rescan_ns_per_char']:9.1f} ns/char ({row['speedup']:.0f}x)"
                   if row["speedup"] else ""))
            if size == sizes[-1] and len(sizes) > 1:
                # The same question inside one stream: does a character cost more later on?
                row["segments"] = _segments(lambda: Splitter(rules), text, pieces, sizes)
                log("    within that stream: " + ", ".join(
                    f"{g['from'] / 1e3:.0f}-{g['to'] / 1e3:.0f} KB {g['ns_per_char']:.0f}" for g in row["segments"]))
            del pieces, text
            gc.collect()
    out: dict = {"rows": rows, "flatness": {}, "flatness_within_stream": {}, "speedup_at_100k": {}}
    for label in CHUNKINGS:
        r = [x for x in rows if x["chunking"] == label]
        if len(r) >= 2:
            per = [x["splitter_ns_per_char"] for x in r]
            out["flatness"][label] = max(per) / min(per)   # 1.0 = perfectly flat
        seg = [x for x in r if x.get("segments")]
        if seg:
            per = [g["ns_per_char"] for g in seg[0]["segments"]]
            out["flatness_within_stream"][label] = max(per) / min(per)
        at = [x for x in r if x["size"] == 100_000]
        if at and at[0]["speedup"]:
            out["speedup_at_100k"][label] = at[0]["speedup"]
    return out
