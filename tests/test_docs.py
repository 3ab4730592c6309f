"""The documentation: the site builds strictly, the options page is the declaration's, and the
commands in the shell blocks of README.md and docs/ work when pasted (or name what to replace).

What the command check can know without running a model server: every `thinkwire` subcommand
and flag exists (`thinkwire SUB --help`; `run`/`web` flags are mitmdump's and mitmweb's), every
`--set` names an option that exists (thinkwire's values parsed as the proxy parses them), every
`--mode` parses as mitmproxy parses it, scripts and repository paths exist, a wheel's glob
matches the name the build makes, and a placeholder names what to replace (`<your-server-url>`).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from devtools import options_doc  # noqa: E402
from thinkwire.settings import BY_NAME  # noqa: E402

VENV_BIN = Path(sys.executable).parent
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
DEADLINE = 120   # seconds for one child process (a site build takes a few)

# Commands the docs may use that are not the project's: what a user has, or installs, themselves.
EXTERNAL = {"uv", "pipx", "git", "cd", "eval", "curl", "claude", "codex", "ollama", "podman", "docker",
            "kubectl", "haproxy", "redis-server", "source", "cat",
            "aider", "llm", "opencode"}   # the client applications docs/clients-tested.md sets up
# Top-level entries of the repository: a word starting with one of these is a path to check.
REPO_TOP = ("addon/", "bench/", "deploy/", "devtools/", "docs/", "fuzz/", "scripts/", "tests/", "Containerfile",
            "tagsets.yaml", "mkdocs.yml", "pyproject.toml", "setup.py", "CONTRIBUTING.md")
PLACEHOLDER = re.compile(r"<([a-z][a-z0-9]*(?:-[a-z0-9]+)*)>")


def _run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=DEADLINE,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


# -- the site ---------------------------------------------------------------------------------
def _build(config_dir: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return _run(sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site"),
                cwd=config_dir)


def _copy_site(tmp_path: Path) -> Path:
    """The site's sources in a folder of their own, to break on purpose."""
    work = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", work / "docs")
    shutil.copy(ROOT / "mkdocs.yml", work)
    linked = {m for page in (ROOT / "docs").glob("*.md")
              for m in re.findall(r"\]\(\.\./([^)\s#]+)", page.read_text(encoding="utf-8"))}
    for rel in linked | {"devtools/mkdocs_hooks.py"}:   # what the pages link outside docs/, and the hook
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, work / rel)
    return work


def test_the_site_builds_strictly(tmp_path):
    r = _build(ROOT, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "architecture" / "index.html").exists()
    # A table's code spans show their pipes as written (`<|channel|>`), not GitHub's escapes.
    tagsets = (tmp_path / "site" / "tagsets" / "index.html").read_text(encoding="utf-8")
    assert "<code>&lt;|channel|&gt;analysis&lt;|message|&gt;</code>" in tagsets
    assert not [p for p in (tmp_path / "site").rglob("*.html") if "\\|" in p.read_text(encoding="utf-8")]
    # A tag named in prose outside code would be read as HTML, and vanish from the page.
    raw = re.compile(r"</?(?:think|thinking|reasoning|reason|thought|tool_call|answer|response)>")
    site = tmp_path / "site"
    assert not [str(p.relative_to(site)) for p in site.rglob("*.html") if raw.search(p.read_text(encoding="utf-8"))]


def test_the_copied_site_builds_as_the_real_one(tmp_path):
    """The control for the breakages below: the copy builds, so what fails them is the break."""
    work = _copy_site(tmp_path)
    r = _build(work, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("break_it, says", [
    ("link", "contains a link 'no-such-page.md', but the target is not found among documentation files"),
    ("anchor", "does not contain an anchor '#no-such-section'"),
    ("nav", "The following pages exist in the docs directory, but are not included in the \"nav\" configuration"),
    ("repo-file", "the link '../no/such/file.md' names no file of the repository"),
])
def test_a_broken_site_fails_the_build(tmp_path, break_it, says):
    work = _copy_site(tmp_path)
    page = work / "docs" / "install.md"
    if break_it == "link":
        page.write_text(page.read_text() + "\nSee [nothing](no-such-page.md).\n")
    elif break_it == "anchor":
        page.write_text(page.read_text() + "\nSee [nothing](clients.md#no-such-section).\n")
    elif break_it == "nav":
        (work / "docs" / "forgotten.md").write_text("# Forgotten\n\nA page no one put in the nav.\n")
    else:
        page.write_text(page.read_text() + "\nSee [nothing](../no/such/file.md).\n")
    r = _build(work, tmp_path)
    assert r.returncode != 0
    assert says in " ".join((r.stdout + r.stderr).split()), r.stdout + r.stderr


def test_every_page_of_docs_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        assert re.search(rf":\s+{re.escape(page.name)}\s*$", nav, re.M), page.name


# -- the options page -------------------------------------------------------------------------
def test_the_options_page_is_written_from_the_declaration():
    assert (ROOT / "docs" / "options.md").read_text(encoding="utf-8") == options_doc.render(), (
        "docs/options.md is out of date: run `.venv/bin/python -m devtools.options_doc`")
    for opt in BY_NAME.values():
        assert f"| `{opt.name}` | `{opt.env}` |" in options_doc.render()


def test_the_options_check_fails_on_a_stale_page(tmp_path, monkeypatch):
    stale = tmp_path / "options.md"
    stale.write_text(options_doc.render().replace("think_trim", "think_trimmed", 1))
    monkeypatch.setattr(options_doc, "TARGET", stale)
    monkeypatch.setattr(options_doc, "ROOT", tmp_path)
    assert options_doc.main(["--check"]) == 1
    stale.write_text(options_doc.render())
    assert options_doc.main(["--check"]) == 0


# -- links outside the site (README.md, CONTRIBUTING.md, bench/) ---------------------------------
def _slug(heading: str) -> str:
    """Python-Markdown's toc slug, as mkdocs makes a heading's anchor."""
    text = re.sub(r"[^\w\s-]", "", re.sub(r"`", "", heading)).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)}


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "bench" / "README.md",
                                  ROOT / "bench" / "results.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_links_of_pages_outside_the_site_lead_somewhere(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{page.name}: {target}"


# -- commands ---------------------------------------------------------------------------------
def _shell_blocks(page: Path) -> list[str]:
    return re.findall(r"^```(?:sh|bash)\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S)


def _commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments cut, `$( )` contents added."""
    out: list[str] = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.shlex(line, posix=True)
        words.whitespace_split = True
        try:
            if not list(words):   # (shlex drops a comment: a line of one is empty)
                continue
        except ValueError as e:
            raise AssertionError(f"not a shell line: {line!r} ({e})") from e
        code = line.split(" #", 1)[0]
        out.extend(part for part in re.split(r"\s(?:&&|\|\||;|\||&)\s|\s&$", code) if part.strip())
        out.extend(re.findall(r"\$\(([^()]*)\)", code))
    return [c.strip() for c in out]


ALL = [(page, cmd) for page in PAGES for block in _shell_blocks(page) for cmd in _commands(block)]


@functools.cache
def _help(*argv: str) -> str:
    r = _run(*argv)
    assert r.returncode == 0 or r.stdout.startswith("usage:"), r.stderr   # mitmdump --help exits 1
    return r.stdout


def _flags(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", help_text))


@functools.cache
def _options() -> set[str]:
    """Every option a proxy with thinkwire has: mitmproxy's and the addon's."""
    text = _help(str(VENV_BIN / "thinkwire"), "run", "--options")
    return set(re.findall(r"^([a-z_]+):", text, re.M))


def _words(cmd: str) -> list[str]:
    words = shlex.split(re.sub(r"\$\([^()]*\)", "SUBSTITUTED", cmd))   # `$( )`: checked on its own
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):   # VAR=value before the command
        words.pop(0)
    return words


def _check_set(value: str) -> None:
    name, _, setting = value.partition("=")
    assert name in _options(), f"--set {name}: no such option"
    if name in BY_NAME:
        BY_NAME[name].parse(setting)   # raises, saying how to fix it, on a value the proxy refuses


def _check_mode(spec: str) -> None:
    from mitmproxy.proxy.mode_specs import ProxyMode
    example = PLACEHOLDER.sub(lambda m: "http://127.0.0.1:8000" if m.group(1).endswith("url") else "example",
                              spec)
    example = example.replace("http://http://127.0.0.1:8000", "http://127.0.0.1:8000")
    ProxyMode.parse(example)


def _check_thinkwire(args: list[str]) -> None:
    top = _help(str(VENV_BIN / "thinkwire"), "--help")
    subs = re.search(r"\{([a-z,-]+)\}", top).group(1).split(",")
    assert args and args[0] in subs, f"thinkwire {args[:1]}: not one of {subs}"
    sub, rest = args[0], args[1:]
    if sub == "web" and {"-r", "--rfile"} & set(rest):
        assert {"-n", "--no-server"} & set(rest), (
            "thinkwire web -r: without -n it opens a proxy on 8080 too, \"address already in use\" next to a "
            "running proxy: add -n")
    if sub in ("run", "web"):
        known = _flags(_help(str(VENV_BIN / ("mitmdump" if sub == "run" else "mitmweb")), "--help"))
    else:
        text = _help(str(VENV_BIN / "thinkwire"), sub, "--help")
        known = _flags(text)
        positional = re.search(r"\{([a-z,]+)\}", text)
        if positional and rest and not rest[0].startswith("-"):
            assert rest[0] in positional.group(1).split(","), f"thinkwire {sub} {rest[0]}"
    _check_args(rest, known)


def _check_args(args: list[str], known: set[str]) -> None:
    for i, word in enumerate(args):
        if word.startswith("-") and not re.match(r"^-\d", word):
            flag = word.split("=", 1)[0]
            assert flag in known, f"{flag}: no such flag"
            if flag == "--set":
                _check_set(args[i + 1])
            if flag in ("--mode", "-m"):
                _check_mode(args[i + 1])


def _check_paths(cmd: str) -> None:
    for word in shlex.split(cmd):
        word = word.split("=", 1)[-1]
        if word.startswith(REPO_TOP) and not PLACEHOLDER.search(word):
            assert list(ROOT.glob(word.rstrip("/"))) or (ROOT / word).exists(), f"{word}: not in the repository"


def _check_placeholders(cmd: str) -> None:
    unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", cmd)
    assert "..." not in unquoted, f"{cmd!r}: '...' does not say what to write there; name it, <like-this>"
    for token in re.findall(r"<[^>\s]*>?", unquoted):
        assert PLACEHOLDER.fullmatch(token), f"{cmd!r}: {token} is no placeholder naming what to replace"
    for old in ("OWNER", "MODEL-SERVER"):
        assert old not in cmd, f"{cmd!r}: {old} (write <what-to-put-here>)"


def check_command(cmd: str) -> None:
    """Raise AssertionError, saying why, for a command that would not work as written."""
    _check_placeholders(cmd)
    _check_paths(cmd)
    words = _words(cmd)
    if not words:
        return
    prog, args = words[0], words[1:]
    if prog.startswith(".venv/bin/"):
        prog = prog.removeprefix(".venv/bin/")
    if prog == "thinkwire":
        _check_thinkwire(args)
    elif prog in ("mitmdump", "mitmweb"):
        _check_args(args, _flags(_help(str(VENV_BIN / prog), "--help")))
    elif prog.startswith("./scripts/"):
        script = ROOT / prog
        assert script.exists(), f"{prog}: no such script"
        if prog == "./scripts/demo":
            _check_args(args, _flags(_help(sys.executable, "-m", "devtools.demo", "--help")))
        elif prog == "./scripts/bench":
            _check_args(args, _flags(_help(sys.executable, str(ROOT / "bench" / "run.py"), "--help")))
    elif prog in ("python", "python3"):
        if args[:1] == ["-m"]:
            assert (ROOT / args[1].replace(".", "/")).with_suffix(".py").exists(), args[1]
    elif prog == "mkdocs":
        assert args[:1] in (["serve"], ["build"]), args
    elif prog == "pipx":
        assert "--python" in args, f"{cmd!r}: pipx uses its own default Python, maybe 3.11: add --python python3.12"
    elif prog == "uv":
        for word in args:
            if word.endswith(".whl"):
                _check_wheel(word)
    else:
        assert prog in EXTERNAL, f"{prog}: neither the project's command nor one of {sorted(EXTERNAL)}"


def _built_wheel_name() -> str:
    """The name `uv build` gives the wheel here: it has a C part, so it is tagged for this Python."""
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"thinkwire-{version}-{tag}-{tag}-{platform}.whl"


def _check_wheel(word: str) -> None:
    assert fnmatch.fnmatch(_built_wheel_name(), Path(word).name), (
        f"{word}: the build makes {_built_wheel_name()}")


@pytest.mark.parametrize("page, cmd", ALL, ids=[f"{p.relative_to(ROOT)}: {c[:60]}" for p, c in ALL])
def test_a_documented_command_works_as_written(page, cmd):
    check_command(cmd)


def test_the_shell_blocks_are_found():
    """The check above reads what it should: every page's shell blocks, commands and all."""
    by_page = {p.relative_to(ROOT).as_posix(): [c for q, c in ALL if q == p] for p in PAGES}
    assert "./scripts/test" in by_page["README.md"] and "./scripts/demo" in by_page["README.md"]
    assert 'thinkwire env' in by_page["docs/proxy-modes.md"]       # from inside $( )
    assert any(c.startswith("thinkwire run --mode reverse:") for c in by_page["README.md"])
    assert len(ALL) >= 40


@pytest.mark.parametrize("cmd, why", [
    ("uv tool install git+https://github.com/OWNER/thinkwire", "OWNER"),
    ("uv tool install thinkwire-0.1.0-py3-none-any.whl", "the build makes"),
    ("pipx install git+<repository-url>", "--python"),
    ("thinkwire serve --mode reverse:http://127.0.0.1:8000", "not one of"),
    ("thinkwire run --listen-prot 8080", "--listen-prot: no such flag"),
    ("thinkwire web -n --rfile x.flows --no-such-flag", "--no-such-flag: no such flag"),
    ("thinkwire run --set think_trimm=off", "--set think_trimm: no such option"),
    ("thinkwire run --set think_trim=maybe", "use on or off"),
    ("thinkwire run --mode reverse:ftp://127.0.0.1:8000", "Invalid server scheme"),
    ("thinkwire key rotate", "thinkwire key rotate"),
    ("thinkwire web -r llm.flows", "add -n"),
    ("./scripts/serve", "no such script"),
    ("./scripts/demo --port 8000", "--port: no such flag"),
    ("haproxy -f deploy/haproxy/missing.cfg", "not in the repository"),
    ("curl -s ... | thinkwire rewrite --surface chat", "'...' does not say"),
    ("thinkwire run --mode reverse:http://MODEL:8000", None),
    ("thinkwire run --mode reverse:<server>", None),
    ("thinkwire run --mode reverse:<Server URL>", "no placeholder naming"),
    ("wget https://example.com", "neither the project's command"),
])
def test_the_command_check_catches_what_fails_when_pasted(cmd, why):
    """Each wrong command the issue found (and a few more) is caught, saying why; the two with no
    reason given pass (a model name in capitals is no placeholder the check can tell; `<server>`
    names what to put there)."""
    if why is None:
        check_command(cmd)
        return
    with pytest.raises(Exception) as e:
        check_command(cmd)
    assert why in str(e.value), str(e.value)


def test_the_mitmweb_url_the_docs_quote_is_the_one_mitmweb_prints():
    """mitmweb answers only its token URL; the docs quote the line it prints with it."""
    import mitmproxy.tools.web.master as master
    import mitmproxy.tools.web.webaddons as webaddons
    assert 'f"Web server listening at {self.web_url}"' in Path(master.__file__).read_text()
    assert 'f"?token={self._password}"' in Path(webaddons.__file__).read_text()
    for page in (ROOT / "README.md", ROOT / "docs" / "inspect.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert "Web server listening at http://127.0.0.1:8081/?token=..." in text, page.name
