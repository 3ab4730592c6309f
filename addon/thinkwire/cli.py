"""`thinkwire`: offline tools around the addon, on the same code path.

  thinkwire rewrite --surface chat [--model NAME] [FILE]   what the proxy would send
  thinkwire tags [--model NAME]                            the effective tag sets / a model's profile

Options come from the same THINK_* environment variables as the addon.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import engine
from .settings import SettingError, Settings
from .sse import SSEParser


class InputError(Exception):
    pass


def detect(data: bytes) -> str:
    """'json' for a JSON body, 'sse' for an event stream; InputError for anything else."""
    text = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith((b"{", b"[")):
        try:
            json.loads(text)
            return "json"
        except ValueError:
            pass
    parser = SSEParser()
    events = parser.feed(data) + parser.finish()
    if any(ev.data is not None for ev in events):
        return "sse"
    raise InputError("the input is neither a JSON body nor an SSE stream (no 'data:' lines)")


def _check_surface(surface, data: bytes, kind: str) -> None:
    if kind == "json":
        objs = [json.loads(data)]
    else:
        parser = SSEParser()
        objs = []
        for ev in parser.feed(data) + parser.finish():
            try:
                objs.append(json.loads(ev.data)) if ev.data else None
            except ValueError:
                continue
    if not any(isinstance(o, dict) and surface.looks_like(o) for o in objs):
        raise InputError(f"the input is not a {surface.NAME} response "
                         f"({'body' if kind == 'json' else 'stream'} has no {surface.SHAPE})")


def rewrite(data: bytes, surface_name: str, settings: Settings, model: str | None = None,
            request: dict | None = None, confdir: str | None = None) -> bytes:
    surface = engine.SURFACES[surface_name]
    kind = detect(data)
    _check_surface(surface, data, kind)
    if request is None and model:
        request = {"model": model}
    ctx = engine.new_context(settings, request, engine.offline_sealer(confdir))
    if kind == "json":
        new = surface.rewrite_body(data, ctx)
        return data if new is None else new
    driver = engine.stream_driver(surface, ctx)
    return b"".join(driver(data) + driver(b""))


def _cmd_rewrite(args) -> int:
    settings = Settings.from_values({})
    if args.file in (None, "-"):
        data = sys.stdin.buffer.read()
    else:
        with open(args.file, "rb") as f:
            data = f.read()
    request = None
    if args.request:
        with open(args.request, "rb") as f:
            request = engine.parse_request(f.read())
    out = rewrite(data, args.surface, settings, args.model, request, args.confdir)
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    return 0


def _cmd_tags(args) -> int:
    settings = Settings.from_values({})
    ts = settings.tagsets
    if args.model:
        p = ts.profile_for(args.model)
        print(f"{args.model}: profile {p.name!r}"
              + (" (no profile matched: the default tag set)" if p is ts.default else ""))
        _print_profile(p)
        return 0
    print(f"tag sets from {ts.source}")
    print("default:")
    _print_profile(ts.default)
    for p in ts.profiles:
        print(f"profile {p.name}: models {', '.join(p.models)}")
        _print_profile(p)
    return 0


def _print_profile(p) -> None:
    for pair in p.pairs:
        print(f"  {pair.open}  ...  {pair.close}")
    if p.starts_inside:
        print(f"  output starts inside the reasoning block; with no closing tag it is {p.tagless_means}")
    if p.strip:
        print(f"  removed from the answer: {'  '.join(p.strip)}")
    if p.ends:
        print(f"  end reasoning, kept in the answer: {'  '.join(p.ends)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="thinkwire", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rw = sub.add_parser("rewrite", help="rewrite a saved response (JSON body or SSE stream) as the proxy would")
    rw.add_argument("--surface", required=True, choices=sorted(engine.SURFACES))
    rw.add_argument("--model", help="model name, to pick its tag profile")
    rw.add_argument("--request", metavar="FILE", help="the request body that produced it (for request flags)")
    rw.add_argument("--confdir", help="mitmproxy confdir holding the proxy's key (default ~/.mitmproxy); "
                    "THINK_SIGNING_KEY wins when set")
    rw.add_argument("file", nargs="?", help="the saved response; stdin when omitted or '-'")
    rw.set_defaults(func=_cmd_rewrite)
    tg = sub.add_parser("tags", help="print the effective tag sets and profiles")
    tg.add_argument("--model", help="show which profile this model name gets")
    tg.set_defaults(func=_cmd_tags)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except (InputError, SettingError, OSError) as e:
        print(f"thinkwire: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
