"""What a user reads in the log: how much mitmproxy says, and thinkwire's start-up lines.

By default (think_log=flows) the log is the start-up lines, one line per flow thinkwire handled
(report.finish) and warnings. mitmproxy's own lines (client/server connect and disconnect,
"Streaming response from ...", and mitmdump's two-line summary of every flow, which reads
"(content missing)" for each stream it did not keep) come back with think_log=all, or when the
user gives mitmproxy's own verbosity: `-v` (termlog_verbosity) or `--flow-detail N`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mitmproxy.optmanager import OptManager
    from mitmproxy.proxy.mode_specs import ProxyMode

CONNECTION_LOGGER = "mitmproxy.proxy.server"   # connects, disconnects, "Streaming response from ..."
REVERSE_HINT_PORT = 8081                # the port the hints suggest beside a forward proxy on 8080
REVERSE_HINT = (f"run `thinkwire run --mode reverse:http://127.0.0.1:PORT --listen-port {REVERSE_HINT_PORT}` "
                f"and give clients http://127.0.0.1:{REVERSE_HINT_PORT} as their base URL")


class Verbosity:
    """Applies think_log to mitmproxy's options and loggers, leaving alone what the user set."""

    def __init__(self) -> None:
        self._flow_detail_was: int | None = None   # the value we replaced, to put back

    def apply(self, options: OptManager, think_log: str) -> None:
        quiet = think_log == "flows"
        told_verbose = getattr(options, "termlog_verbosity", "info") in ("debug",)
        logging.getLogger(CONNECTION_LOGGER).setLevel(
            logging.WARNING if quiet and not told_verbose else logging.NOTSET)
        if "flow_detail" not in options:   # mitmweb has no flow summaries to quieten
            return
        if quiet and self._flow_detail_was is None and not options.has_changed("flow_detail"):
            self._flow_detail_was = options.flow_detail
            options.update(flow_detail=0)
        elif not quiet and self._flow_detail_was is not None:
            was, self._flow_detail_was = self._flow_detail_was, None
            options.update(flow_detail=was)

    def done(self) -> None:
        logging.getLogger(CONNECTION_LOGGER).setLevel(logging.NOTSET)


def _parsed_modes(specs: Iterable[str] | None) -> list[ProxyMode]:
    from mitmproxy.proxy import mode_specs
    modes = []
    for spec in specs or ():
        try:
            modes.append(mode_specs.ProxyMode.parse(spec))
        except ValueError:   # mitmproxy refuses it itself
            continue
    return modes


def startup_lines(specs: Iterable[str] | None) -> list[str]:
    """The lines for the modes the proxy runs in: where clients point, and (forward proxy) that
    local servers bypass it under the NO_PROXY `thinkwire env` sets."""
    from mitmproxy.proxy.mode_specs import RegularMode, ReverseMode
    lines = []
    for mode in _parsed_modes(specs):
        if isinstance(mode, RegularMode):
            lines.append(
                "thinkwire: clients that go through this proxy (HTTPS_PROXY, or `eval \"$(thinkwire env)\"`) get "
                f"reasoning apart; local servers (localhost, 127.0.0.1) bypass it (NO_PROXY): in front of one, "
                f"{REVERSE_HINT}")
        elif isinstance(mode, ReverseMode):
            upstream = f"{mode.scheme}://{mode.address[0]}:{mode.address[1]}"
            lines.append(f"thinkwire: clients get reasoning apart when their base URL is this proxy's address "
                         f"where it was {upstream} (the path stays, e.g. /v1)")
    return lines


def _not_thinkwire(record: logging.LogRecord) -> bool:
    return not record.name.startswith("thinkwire")


def skip_legacy_log_event() -> None:
    """Keep thinkwire's log lines out of mitmproxy's deprecated `add_log` event (for addons that
    do not use Python's logging yet). It wakes the event loop and offers each line to every
    addon: measured, that was most of what a flow cost thinkwire outside its stream callable.
    The lines still reach the terminal and mitmweb's event log (their own handlers)."""
    from mitmproxy import log as mitmproxy_log
    legacy = getattr(mitmproxy_log, "LegacyLogEvents", None)   # (a mitmproxy without it: nothing to do)
    for h in logging.getLogger().handlers:
        if legacy is not None and isinstance(h, legacy) and not any(getattr(f, "__name__", "") == _not_thinkwire.__name__
                                                      for f in h.filters):
            h.addFilter(_not_thinkwire)
