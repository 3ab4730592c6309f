"""The Prometheus metrics: counted in one place, from each flow's tallies (never any body text).

Surfaces are label values, taken from whatever `engine.SURFACES` holds, so a new surface is
counted without a change here. Each proxy has its own registry: a reloaded script starts
again from zero instead of clashing with the metrics of the instance it replaces.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from prometheus_client import (CollectorRegistry, Counter, GCCollector, Info, PlatformCollector,
                               ProcessCollector, disable_created_metrics)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder

from .keys import Keyring, key_id
from .record import FlowRecord

# No `_created` series beside each counter (the library's process-wide switch; nothing else in a
# mitmdump process uses it): a restart shows as counters falling to zero, which rate() handles.
disable_created_metrics()

# A flow's outcome: reasoning moved; handled with nothing to move; passed through unchanged.
OUTCOMES = ("rewritten", "unchanged", "fell_back")
# Why a flow fell back, or (undecodable_stream) ended where its compressed stream broke.
REASONS = ("unsupported_encoding", "invalid_body", "rewrite_error", "undecodable_stream")
# What the reasoning memory did (thinkwire.memory), counted in assistant turns.
MEMORY = ("remembered", "put_back", "missed", "unavailable")


class Metrics:
    def __init__(self, surfaces: Iterable[str], open_streams: Callable[[], Iterable[str]]) -> None:
        """`surfaces`: the names to show from the start (at zero); `open_streams`: the surface
        name of each stream being rewritten right now, read at each scrape."""
        r = self.registry = CollectorRegistry()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=r)   # the process's CPU, memory, file descriptors; Python's GC
        self._flows = Counter("thinkwire_flows", "Responses handled, by surface and outcome: rewritten "
                              "(reasoning moved), unchanged (nothing to move), fell_back (passed through "
                              "unchanged)", ["surface", "outcome"], registry=r)
        self._fallbacks = Counter("thinkwire_fallbacks", "Responses passed through unchanged, or streams ended "
                                  "where their compressed bytes broke, by reason", ["surface", "reason"], registry=r)
        self._blocks = Counter("thinkwire_reasoning_blocks", "Reasoning blocks moved into the native field",
                               ["surface"], registry=r)
        self._chars = Counter("thinkwire_reasoning_chars", "Characters of reasoning moved", ["surface"], registry=r)
        self._restored = Counter("thinkwire_restored_objects", "Reasoning objects this proxy made, restored "
                                 "on the way back (requests)", ["surface"], registry=r)
        self._refused = Counter("thinkwire_marks_refused", "Marks in requests this proxy does not open for them "
                                "(another replica's key, a retired key, another client's credential, too old, "
                                "format 1, tampering); they go upstream as they came", ["surface"], registry=r)
        self._ended_early = Counter("thinkwire_streams_ended_early", "Streams that ended before their end "
                                    "(client gone, upstream cut)", ["surface"], registry=r)
        self._memory = Counter("thinkwire_memory_turns", "Assistant turns the reasoning memory handled: "
                               "remembered (a response's), put_back (into a request that came without it), "
                               "missed (looked up, not found), unavailable (the store did not answer)",
                               ["surface", "outcome"], registry=r)
        self._key = Info("thinkwire_key", "The key that seals marks (its id, never the key) and how many "
                         "previous keys still open them", registry=r)
        r.register(_OpenStreams(open_streams, tuple(surfaces)))
        for s in surfaces:   # every series present from the start: rate() needs its zero
            for o in OUTCOMES:
                self._flows.labels(s, o)
            for why in REASONS:
                self._fallbacks.labels(s, why)
            for m in MEMORY:
                self._memory.labels(s, m)
            for c in (self._blocks, self._chars, self._restored, self._refused, self._ended_early):
                c.labels(s)

    def flow(self, record: FlowRecord, reason: str | None, ended_early: bool = False) -> None:
        """One handled response, as its record says; `reason` (one of REASONS) when it fell back."""
        s = record.surface
        if record.fell_back:
            outcome = "fell_back"
        else:
            outcome = "rewritten" if record.blocks else "unchanged"
        self._flows.labels(s, outcome).inc()
        if record.fell_back and reason:
            self._fallbacks.labels(s, reason).inc()
        if record.broken:
            self._fallbacks.labels(s, "undecodable_stream").inc()
        if record.blocks:
            self._blocks.labels(s).inc(record.blocks)
            self._chars.labels(s).inc(record.reasoning_chars)
        if ended_early:
            self._ended_early.labels(s).inc()

    def way_back(self, surface: str, restored: int, refused: int) -> None:
        """One request: objects restored, marks no key opened."""
        if restored:
            self._restored.labels(surface).inc(restored)
        if refused:
            self._refused.labels(surface).inc(refused)

    def memory(self, surface: str, outcome: str, n: int = 1) -> None:
        """Turns the reasoning memory remembered, put back, missed, or could not reach its store for."""
        self._memory.labels(surface, outcome).inc(n)

    def keys(self, ring: Keyring) -> None:
        self._key.info({"key_id": ring.key_id, "previous_keys": str(len(ring.previous)),
                        "previous_key_ids": ",".join(key_id(k) for k in ring.previous),
                        "own": "true" if ring.own else "false"})

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The text a scraper asked for (Prometheus text, or OpenMetrics by its Accept header)
        and its content type."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class _OpenStreams:
    """thinkwire_open_streams, counted at each scrape from what the addon holds: no count to
    drift from the streams themselves."""

    def __init__(self, open_streams: Callable[[], Iterable[str]], surfaces: tuple[str, ...]) -> None:
        self._open = open_streams
        self._surfaces = surfaces

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = dict.fromkeys(self._surfaces, 0)
        for s in self._open():
            counts[s] = counts.get(s, 0) + 1
        g = GaugeMetricFamily("thinkwire_open_streams", "Streams being rewritten right now", labels=["surface"])
        for s, n in counts.items():
            g.add_metric([s], n)
        yield g
