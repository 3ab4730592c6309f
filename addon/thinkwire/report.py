"""What a handled flow says about itself, once, as its rewrite ends: the flow's comment and marker
(mitmproxy's UI and saved flows), its record (thinkwire.record), one log line and its counts
(thinkwire.metrics). Never any body text: a model's output is the user's, and logs travel.
"""

from __future__ import annotations

import logging

from mitmproxy import http

from .context import NO_PROFILE, PROFILE, FlowContext, shown_model
from .memory import KEY as MEMORY_KEY
from .metrics import Metrics
from .record import RESTORED_KEY, FlowRecord

log = logging.getLogger("thinkwire.addon")   # (the addon's logger: userlog shows its lines)

MARK_REWRITTEN = ":brain:"
MARK_FELL_BACK = ":warning:"


def finish(metrics: Metrics, flow: http.HTTPFlow, surface: str, fctx: FlowContext, fell_back: str | None,
           ended: str = "", reason: str = "rewrite_error") -> None:
    """One comment, marker, INFO line and count (metrics) per handled flow; never any body
    text. `reason`: why it fell back, when it did, for the metrics (metrics.REASONS)."""
    stats = fctx.stats
    restored = flow.metadata.get(RESTORED_KEY, 0)
    learned = None if fell_back else fctx.learn()
    if learned:
        log.info("thinkwire: %s", learned)
    profile = fctx.profile.name
    if fell_back:
        summary = f"thinkwire {surface}: passed through unchanged ({fell_back})"
        flow.marked = MARK_FELL_BACK
    else:
        summary = (f"thinkwire {surface} [{profile}]: {stats.blocks} reasoning block(s), "
                   f"{stats.reasoning_chars} chars moved")
        if stats.native:
            summary += "; upstream sent native reasoning (left as is)"
        if stats.stray_closes:
            summary += (f"; a closing tag with no opening tag was removed: if model {shown_model(fctx.model)} "
                        "opens its reasoning in the prompt, add a profile with starts_inside: true "
                        "to tagsets.yaml")
        plan = fctx.plan
        if plan is not None and (plan.how not in (NO_PROFILE, PROFILE) or fctx.inside_because):
            summary += f"; {plan.describe()}"
        if stats.malformed_events:
            summary += f"; {stats.malformed_events} malformed event(s) passed unchanged"
        if stats.broken:
            summary += f"; {stats.broken}: the client got what decoded, then the end"
        if stats.blocks:
            flow.marked = MARK_REWRITTEN
    if restored:
        summary += f"; {restored} object(s) restored on the request"
    put_back = flow.metadata.get(MEMORY_KEY, {}).get("put_back")
    if put_back:
        summary += f"; reasoning of {put_back} turn(s) put back from memory"
    summary += ended
    flow.comment = summary
    record = FlowRecord(surface, profile, stats.blocks, stats.reasoning_chars, restored, fell_back,
                        stats.broken, fctx.plan.describe() if fctx.plan is not None else None)
    record.put(flow)
    metrics.flow(record, reason if fell_back else None, ended_early=bool(ended))
    where = f"{flow.request.method} {flow.request.path.split('?', 1)[0]}"
    (log.warning if fell_back else log.info)("%s: %s", where, summary)
