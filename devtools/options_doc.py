"""docs/options.md, written from the options' declaration (thinkwire.settings.OPTIONS).

The options table has one source: the declaration's name, environment variable, default,
values and help. Each row links the pages that explain the option (every page of docs/ that
names it in backticks), so the table never repeats what a page says.

    python -m devtools.options_doc           # write docs/options.md
    python -m devtools.options_doc --check   # exit 1, saying so, when the file is out of date
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TARGET = DOCS / "options.md"

sys.path.insert(0, str(ROOT / "addon"))
from thinkwire import keys, settings  # noqa: E402

HEAD = """\
# Options

<!-- Written by `python -m devtools.options_doc` from addon/thinkwire/settings.py: edit the
declaration there, then run it again (tests/test_docs.py fails while this file is out of date). -->

Every option can be set with `--set name=value` or, as its default, with its environment
variable. Bad values stop the proxy at start with a message saying how to fix them.

A switch takes `on`/`off` and the usual spellings (`1`/`0`, `true`/`false`, `yes`/`no`) from
`--set` and its environment variable alike; thinkwire reads a `--set` value itself before
mitmproxy does, since mitmproxy 12 knows only `true`/`false` and would leave the addon silently
unconfigured on `off`. Switches are bool options (toggles in mitmweb's option editor), policies
list their values. `thinkwire run --options | grep -B3 think_` lists them with their help.

| option | env | default | values | what it does | explained in |
|---|---|---|---|---|---|
"""

# Read from the environment only, never an option: a key must not show in `--options` or in a
# saved option file. (What each means is said here, as no declaration carries help for them.)
ENV_ONLY = (
    (keys.ENV_KEY, "the key that seals marks, itself (any string); giving it and a key file "
                   "(`think_key_file`) stops the proxy with a message"),
    (keys.ENV_PREVIOUS, "previous keys, comma-separated: they open marks, never seal them (a key "
                        "with a comma in it goes in a file: `think_key_previous_files`)"),
    ("THINKWIRE_HOT", "`0` turns the C part off: everything runs in Python (about twice the CPU)"),
)

TAIL_HEAD = """
## Environment only

| variable | what it does |
|---|---|
"""


def _values(opt: settings.Option) -> str:
    if opt.kind == "bool":
        return "`on`, `off`"
    if opt.kind == "choice":
        return ", ".join(f"`{c}`" for c in opt.choices)
    return "text"


def _cell(text: str) -> str:
    """Help text as a table cell: tags in it shown, not read as HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _pages() -> list[tuple[str, str, str]]:
    """(file name, title, text) of every docs page but this one, in file-name order."""
    out = []
    for path in sorted(DOCS.glob("*.md")):
        if path == TARGET:
            continue
        text = path.read_text(encoding="utf-8")
        title = re.search(r"^# (.+)$", text, re.M)
        out.append((path.name, title.group(1).strip() if title else path.stem, text))
    return out


def _explained_in(opt: settings.Option, pages: list[tuple[str, str, str]]) -> str:
    named = re.compile(rf"(?<![\w-])(?:{re.escape(opt.name)}|{re.escape(opt.env)})(?!\w)")
    return ", ".join(f"[{title}]({file})" for file, title, text in pages if named.search(text))


def render() -> str:
    pages = _pages()
    rows = []
    for opt in settings.OPTIONS:
        default = f"`{opt.default}`" if opt.default else ""
        rows.append(f"| `{opt.name}` | `{opt.env}` | {default} | {_values(opt)} | {_cell(opt.help)} | "
                    f"{_explained_in(opt, pages)} |")
    env = [f"| `{name}` | {_cell(what)} |" for name, what in ENV_ONLY]
    return HEAD + "\n".join(rows) + "\n" + TAIL_HEAD + "\n".join(env) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if TARGET.exists() and TARGET.read_text(encoding="utf-8") == text:
            return 0
        print(f"{TARGET.relative_to(ROOT)} is out of date: run `python -m devtools.options_doc`",
              file=sys.stderr)
        return 1
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
