"""mkdocs hooks (mkdocs.yml `hooks:`): links from docs/ to the repository's other files, and
pipes in the code spans of tables.

A page links `../bench/results.md` or `../tests/test_clients.py` so that the link works where
the Markdown is read in the repository. The site holds docs/ only, so mkdocs would report such a
link as not found; this hook checks that the file exists (a missing one fails the build, as any
broken link does) and writes it as a link to the repository's copy when `repo_url` is set, else
as the path in code.

A `|` in a code span of a table row is written `\\|` so that GitHub does not end the cell there;
Python-Markdown's tables already keep a code span's pipes, and would show the backslash.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError

_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    page_dir = (docs / page.file.src_uri).parent
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def repl(m: re.Match) -> str:
        text, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        path = (page_dir / target).resolve()
        if docs in path.parents:
            return m.group(0)          # inside docs/: mkdocs checks it
        if root not in path.parents or not path.exists():
            raise PluginError(f"{page.file.src_uri}: the link {target!r} names no file of the repository")
        rel = path.relative_to(root).as_posix()
        if repo_url:
            return f"[{text}]({repo_url}/blob/HEAD/{rel}{anchor})"
        if text.strip("`") in (rel, path.name):
            return f"`{rel}`"
        return f"{text} (`{rel}`)"

    markdown = _LINK.sub(repl, markdown)
    return "\n".join(_CODE.sub(lambda m: m.group(0).replace("\\|", "|"), line) if line.startswith("|") else line
                     for line in markdown.split("\n"))
