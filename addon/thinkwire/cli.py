"""`thinkwire`: the proxy, and tools around it on the same code path.

  thinkwire run [MITMDUMP ARGS]                            mitmdump with thinkwire loaded
  thinkwire web [MITMWEB ARGS]                             mitmweb with thinkwire and its views
  thinkwire addon-path                                     the script for `mitmdump -s`
  thinkwire env [--port N] [--confdir D] [--shell sh|fish] [--undo]
                                                           exports that point a shell at the proxy
  thinkwire rewrite [--surface S] [--model NAME] [FILE]    what the proxy would send (S: chat, messages,
                                                           responses, ollama; default: from the input)
  thinkwire tags [--model NAME]                            the effective tag sets / a model's profile
  thinkwire key new [--out FILE]                           a fresh random key for marks (FILE: mode 0600)
  thinkwire key id [--file F] [--confdir D]                the id of a key (for think_key_id)
  thinkwire health [--url URL]                             ask a running proxy's health endpoint

Options come from the same THINK_* environment variables as the addon.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import socket
import ssl
import sys
from pathlib import Path
from typing import Any

from . import endpoints, engine, keys, userlog
from .ndjson import NDJSONParser
from .settings import SettingError, Settings
from .sse import SSEParser
from .surfaces import Surface
from .tagsets import Profile


class InputError(Exception):
    pass


def detect(data: bytes) -> str:
    """'json' for a JSON body, 'sse' for an event stream, 'ndjson' for lines of JSON objects
    (Ollama's streams); InputError for anything else."""
    text = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith((b"{", b"[")):
        try:
            json.loads(text)
            return "json"
        except ValueError:
            if _json_objects(text.split(b"\n", 1)[0]):
                return "ndjson"
    parser = SSEParser()
    events = parser.feed(data) + parser.finish()
    if any(ev.data is not None for ev in events):
        return "sse"
    raise InputError("the input is neither a JSON body nor an SSE stream (no 'data:' lines) nor NDJSON (lines of JSON)")


def _json_objects(line: bytes) -> list[dict[str, Any]]:
    try:
        obj = json.loads(line)
    except ValueError:
        return []
    return [obj] if isinstance(obj, dict) else []


STREAM_KINDS = {"sse": "text/event-stream", "ndjson": "application/x-ndjson"}


def _objects(data: bytes, kind: str) -> list[dict[str, Any]]:
    """The JSON objects of a body, or of a stream's events or lines."""
    if kind == "json":
        objs = [json.loads(data)]
    elif kind == "ndjson":
        parser = NDJSONParser()
        objs = [o for ev in parser.feed(data) + parser.finish() if ev.data for o in _json_objects(ev.data.encode())]
    else:
        sse = SSEParser()
        objs = []
        for ev in sse.feed(data) + sse.finish():
            try:
                objs.append(json.loads(ev.data)) if ev.data else None
            except ValueError:
                continue
    return [o for o in objs if isinstance(o, dict)]


def _streams_as(surface: Surface, kind: str) -> bool:
    return kind == "json" or STREAM_KINDS[kind] == surface.STREAM_TYPE


def _check_surface(surface: Surface, data: bytes, kind: str) -> None:
    if not _streams_as(surface, kind):
        fits = [n for n, m in engine.SURFACES.items() if _streams_as(m, kind)]
        raise InputError(f"the input is an {kind.upper()} stream, which {surface.NAME} does not stream "
                         f"(--surface {' or '.join(fits)})")
    if not any(surface.looks_like(o) for o in _objects(data, kind)):
        raise InputError(f"the input is not a {surface.NAME} response "
                         f"({'body' if kind == 'json' else 'stream'} has no {surface.SHAPE})")


def detect_surface(data: bytes) -> str:
    """The API a saved response is from, by its shape (SSE event types, object types, NDJSON
    lines); InputError naming the choices when none or several fit."""
    kind = detect(data)
    objs = _objects(data, kind)
    fits = sorted(n for n, m in engine.SURFACES.items() if _streams_as(m, kind) and any(m.looks_like(o) for o in objs))
    if len(fits) == 1:
        return fits[0]
    what = "body" if kind == "json" else f"{kind.upper()} stream"
    if fits:
        raise InputError(f"the {what} could be a {' or a '.join(fits)} response; say which with "
                         f"--surface {'|'.join(fits)}")
    shapes = "; ".join(f"{n}: {m.SHAPE}" for n, m in sorted(engine.SURFACES.items()) if _streams_as(m, kind))
    raise InputError(f"cannot tell which API the {what} is from (none of: {shapes}); say which with "
                     f"--surface {'|'.join(sorted(engine.SURFACES))}")


def rewrite(data: bytes, surface_name: str, settings: Settings, model: str | None = None,
            request: dict[str, Any] | None = None, confdir: str | None = None) -> bytes:
    surface = engine.SURFACES[surface_name]
    kind = detect(data)
    _check_surface(surface, data, kind)
    if request is None and model:
        request = {"model": model}
    ctx = engine.new_context(settings, request, engine.offline_sealer(confdir), surface=surface_name)
    if kind == "json":
        new = surface.rewrite_body(data, ctx)
        return data if new is None else new
    driver = engine.stream_driver(surface, ctx)
    return b"".join(driver(data) + driver(b""))


def _cmd_rewrite(args: argparse.Namespace) -> int:
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
    out = rewrite(data, args.surface or detect_surface(data), settings, args.model, request, args.confdir)
    sys.stdout.buffer.write(out if out.endswith(b"\n") else out + b"\n")   # a shell prompt starts on its own line
    sys.stdout.flush()
    return 0


def _cmd_tags(args: argparse.Namespace) -> int:
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


def _print_profile(p: Profile) -> None:
    for pair in p.declared or p.pairs:
        print(f"  {pair.open}  ...  {pair.close}")
    if p.declared:
        print("  and the default pairs")
    if p.starts_inside:
        reads = ("every switch" if p.switches is None else ", ".join(p.switches) if p.switches
                 else "no switch (it always thinks)")
        print(f"  output starts inside the reasoning block when thinking is on; the template reads {reads}; "
              f"a silent request {'thinks' if p.thinking_default else 'does not think'}")
        print(f"  with no closing tag, a body that does not say how it ended is {p.tagless_means}")
    if p.strip:
        print(f"  removed from the answer: {'  '.join(p.strip)}")
    if p.ends:
        print(f"  end reasoning, kept in the answer: {'  '.join(p.ends)}")


# -- keys and health, for running a fleet -----------------------------------------------------
def _cmd_key(args: argparse.Namespace) -> int:
    if args.action == "new":
        if args.out:
            print(f"thinkwire: a new key is in {args.out} (mode 0600), id {keys.write_new_key(args.out)}",
                  file=sys.stderr)
        else:
            print(keys.new_key())
        return 0
    if args.file:
        secret = keys.read_key_file(args.file, "--file")
    else:   # what a proxy started in this environment (and with this confdir) seals with
        config = dataclasses.replace(keys.KeyConfig.from_values({}), expected_id="")   # the id is what we print
        secret = keys.load(config, args.confdir).current
    print(keys.key_id(secret))
    return 0


def _cmd_health(args: argparse.Namespace) -> int:
    """GET the health endpoint directly (never through HTTP_PROXY): 0 when it answers 200."""
    import http.client
    from urllib.parse import urlsplit
    u = urlsplit(args.url if "://" in args.url else "http://" + args.url)
    conn_type = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(u.hostname or "127.0.0.1", u.port, timeout=args.timeout)
    try:
        conn.request("GET", endpoints.HEALTH)
        r = conn.getresponse()
        body = r.read().decode("utf-8", "replace").strip()
    except OSError as e:
        print(f"thinkwire health: {args.url} does not answer ({e})", file=sys.stderr)
        return 1
    finally:
        conn.close()
    print(body)
    return 0 if r.status == 200 else 1


# -- the proxy ------------------------------------------------------------------------------
def addon_path() -> Path:
    """The script mitmproxy loads: addon/think.py in a clone, the copy an install ships."""
    return (Path(__file__).parent / "script" / "think.py").resolve()


def proxy_argv(tool: str, args: list[str]) -> list[str]:
    """mitmdump / mitmweb of this environment with thinkwire loaded, on 127.0.0.1 unless the
    arguments choose a listen host; every argument goes on as given."""
    exe = str(Path(sys.executable).with_name(tool))  # the mitmproxy of this environment
    head = [exe] if os.path.exists(exe) else [  # an install whose scripts are not beside python
        sys.executable, "-c", f"import sys; from mitmproxy.tools.main import {tool}; "
                              f"sys.argv[0] = {tool!r}; sys.exit({tool}())"]
    if not any(a == "--listen-host" or a.startswith(("--listen-host=", "listen_host=")) for a in args):
        args = ["--listen-host", "127.0.0.1", *args]
    return [*head, "-s", str(addon_path()), *args]


def _exec_proxy(tool: str, args: list[str]) -> int:
    argv = proxy_argv(tool, args)
    os.execv(argv[0], argv)
    return 1  # pragma: no cover - execv does not return


# -- pointing a shell at the proxy ------------------------------------------------------------
CA_CERT = "mitmproxy-ca-cert.pem"        # what mitmproxy writes into its confdir
CA_BUNDLE = "thinkwire-ca-bundle.pem"    # that CA, then the CAs this machine trusts
ENV_NAMES = ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "NO_PROXY", "no_proxy",
             "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
             "NODE_USE_ENV_PROXY"]


def ensure_ca(confdir: Path) -> Path:
    """mitmproxy's CA certificate in `confdir`, created the way mitmproxy creates it when missing."""
    cert = confdir / CA_CERT
    if not cert.exists():
        from mitmproxy.certs import CertStore
        from mitmproxy.options import CONF_BASENAME, KEY_SIZE
        store = CertStore.from_store(confdir, CONF_BASENAME, KEY_SIZE)  # makes the CA if it has none
        if not cert.exists():  # a CA key with its certificate file deleted
            cert.write_bytes(store.default_ca.to_pem())
    return cert


def write_bundle(confdir: Path, ca: Path) -> Path:
    """The proxy's CA followed by the machine's trusted CAs: Python and curl clients read only
    the file they are given, and hosts the proxy does not open (`allow_hosts`, NO_PROXY) still
    show their real certificates."""
    system = ssl.get_default_verify_paths().openssl_cafile
    if not os.path.isfile(system):
        import certifi
        system = certifi.where()
    bundle = confdir / CA_BUNDLE
    tmp = bundle.with_suffix(".tmp")
    tmp.write_bytes(ca.read_bytes().rstrip(b"\n") + b"\n" + Path(system).read_bytes())
    tmp.replace(bundle)
    return bundle


def env_values(port: int, confdir: Path) -> dict[str, str]:
    ca = ensure_ca(confdir)
    bundle = write_bundle(confdir, ca)
    proxy = f"http://127.0.0.1:{port}"
    local = "localhost,127.0.0.1,::1"  # local model servers are reached directly
    return {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "https_proxy": proxy, "http_proxy": proxy,
            "NO_PROXY": local, "no_proxy": local,
            "SSL_CERT_FILE": str(bundle), "REQUESTS_CA_BUNDLE": str(bundle), "CURL_CA_BUNDLE": str(bundle),
            "NODE_EXTRA_CA_CERTS": str(ca),
            # Node's own fetch reads HTTPS_PROXY only with this (Node >= 22.21 / 24; older: no effect).
            "NODE_USE_ENV_PROXY": "1"}


def _fish_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def shell_lines(values: dict[str, str] | None, shell: str) -> str:
    """`export`s (sh) or `set -gx` (fish); `values` None: the lines that undo them."""
    if values is None:
        cmd = "unset" if shell == "sh" else "set -e"
        return "".join(f"{cmd} {name}\n" for name in ENV_NAMES)
    if shell == "sh":
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in values.items())
    return "".join(f"set -gx {k} {_fish_quote(v)}\n" for k, v in values.items())


# A comment line (sh and fish skip it when the output is eval'd or sourced).
LOCAL_BYPASS = ("# thinkwire: local servers (localhost, 127.0.0.1, ::1) are reached directly (NO_PROXY), not "
                f"through the proxy; for one, put thinkwire in front of it in reverse mode: {userlog.REVERSE_HINT}\n")


def _cmd_env(args: argparse.Namespace) -> int:
    if args.undo:
        sys.stdout.write(shell_lines(None, args.shell))
        return 0
    confdir = Path(os.path.expanduser(args.confdir))
    values = env_values(args.port, confdir)
    undo = 'eval "$(thinkwire env --undo)"' if args.shell == "sh" else "thinkwire env --shell fish --undo | source"
    sys.stdout.write(f"# thinkwire: clients go through the proxy at {values['HTTPS_PROXY']}; undo: {undo}\n"
                     + LOCAL_BYPASS + shell_lines(values, args.shell))
    try:
        socket.create_connection(("127.0.0.1", args.port), timeout=0.3).close()
    except OSError:
        print(f"thinkwire: nothing listens on 127.0.0.1:{args.port} yet; start the proxy with "
              f"`thinkwire run --listen-port {args.port}`", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("run", "web"):  # everything after goes to mitmproxy, --help too
        return _exec_proxy("mitmdump" if argv[0] == "run" else "mitmweb", argv[1:])
    ap = argparse.ArgumentParser(prog="thinkwire", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="run mitmdump with thinkwire loaded (every argument goes to mitmdump)")
    sub.add_parser("web", help="run mitmweb with thinkwire and its views (every argument goes to mitmweb)")
    ad = sub.add_parser("addon-path", help="print the addon script's path, for mitmdump -s")
    ad.set_defaults(func=lambda _args: print(addon_path()) or 0)
    en = sub.add_parser("env", help="print the exports that point this shell's clients at a running proxy: "
                        'eval "$(thinkwire env)"')
    en.add_argument("--port", type=int, default=8080, help="the proxy's port on 127.0.0.1 (default 8080)")
    en.add_argument("--confdir", default="~/.mitmproxy", help="mitmproxy's confdir, where its CA is (default ~/.mitmproxy)")
    en.add_argument("--shell", choices=["sh", "fish"], default="sh", help="sh (bash, zsh, ...; default) or fish")
    en.add_argument("--undo", action="store_true", help="print the lines that undo them")
    en.set_defaults(func=_cmd_env)
    rw = sub.add_parser("rewrite", help="rewrite a saved response (JSON body, SSE or NDJSON stream) as the proxy would")
    rw.add_argument("--surface", choices=sorted(engine.SURFACES),
                    help="the API the response is from (default: told from the input's shape)")
    rw.add_argument("--model", help="model name, to pick its tag profile")
    rw.add_argument("--request", metavar="FILE", help="the request body that produced it (for request flags)")
    rw.add_argument("--confdir", help="mitmproxy confdir holding the proxy's key (default ~/.mitmproxy); "
                    "THINK_SIGNING_KEY wins when set")
    rw.add_argument("file", nargs="?", help="the saved response; stdin when omitted or '-'")
    rw.set_defaults(func=_cmd_rewrite)
    tg = sub.add_parser("tags", help="print the effective tag sets and profiles")
    tg.add_argument("--model", help="show which profile this model name gets")
    tg.set_defaults(func=_cmd_tags)
    ky = sub.add_parser("key", help="keys for marks: `key new` prints a fresh key, `key id` the id of one "
                        "(the value of think_key_id)")
    ky.add_argument("action", choices=["new", "id"])
    ky.add_argument("--file", help="id: the key in this file (else the key THINK_KEY_FILE or THINK_SIGNING_KEY "
                    "gives, else this confdir's own key)")
    ky.add_argument("--confdir", default="~/.mitmproxy", help="id: mitmproxy's confdir (default ~/.mitmproxy)")
    ky.add_argument("--out", help="new: write the key to this new file, readable by its owner only (mode 0600), "
                    "instead of printing it")
    ky.set_defaults(func=_cmd_key)
    he = sub.add_parser("health", help=f"ask a running proxy's health endpoint ({endpoints.HEALTH}); exit 0 "
                        "when it answers 200 (for container health checks)")
    he.add_argument("--url", default="http://127.0.0.1:8080", help="the proxy (default http://127.0.0.1:8080)")
    he.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")
    he.set_defaults(func=_cmd_health)
    args = ap.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except (InputError, SettingError, keys.KeySetupError, OSError) as e:
        print(f"thinkwire: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
