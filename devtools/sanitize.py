"""The C part (thinkwire._hot) built with AddressSanitizer and UBSan, apart from the normal build,
and its tests run under it: any sanitizer report fails the run. CI runs it (`.ci/run`, through
`./scripts/sanitize`, which bootstraps first).

    python devtools/sanitize.py [pytest arguments]     # default: the C tests and the differential fuzz

The build goes to a temporary directory; `THINKWIRE_HOT_LIB` makes the tests load it in place of
the normal build (tests/conftest.py calls `load`). Python itself is not instrumented, so ASan's
runtime is preloaded (LD_PRELOAD) and `PYTHONMALLOC=malloc` routes small objects through malloc,
where ASan sees them; pytest runs with `-s` so UBSan's lines reach the output, and every check
halts on its first report (`-fno-sanitize-recover=all`, `halt_on_error=1`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "addon" / "thinkwire" / "_hot.c"
TESTS = ["tests/test_hot.py", "tests/test_hot_fuzz.py"]
REPORT = re.compile(r"runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer|SUMMARY: \w+Sanitizer")


class NoCompiler(RuntimeError):
    pass


def build(out_dir: str | os.PathLike, sanitize: str = "address,undefined") -> Path:
    """Compile _hot.c with `-fsanitize=<sanitize>` into out_dir; the extension's path."""
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise NoCompiler("no C compiler (gcc) to build the sanitized C part")
    out = Path(out_dir) / ("_hot" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={sanitize}",
                    "-fno-sanitize-recover=all", "-Wall", f"-I{sysconfig.get_paths()['include']}",
                    str(SOURCE), "-o", str(out)], check=True)
    return out


def load(lib: str | os.PathLike) -> None:
    """Make `lib` (a build of _hot.c) thinkwire._hot, before anything imports the normal one."""
    import thinkwire
    if "thinkwire._hot" in sys.modules:
        raise RuntimeError("thinkwire._hot was imported before the sanitized build could be loaded")
    spec = importlib.util.spec_from_file_location("thinkwire._hot", lib)
    mod = importlib.util.module_from_spec(spec)   # type: ignore[arg-type]
    spec.loader.exec_module(mod)   # type: ignore[union-attr]
    sys.modules["thinkwire._hot"] = mod
    thinkwire._hot = mod   # type: ignore[attr-defined]


def environment(lib: Path, sanitize: str) -> dict[str, str]:
    """The environment that runs the tests against `lib` under its sanitizers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_CORE_", "COVERAGE_"))}
    env.update(THINKWIRE_HOT_LIB=str(lib), PYTHONMALLOC="malloc",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
               # (Python frees little at exit: leaks are not what this run looks for.)
               ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0")
    if "address" in sanitize:
        cc = os.environ.get("CC") or shutil.which("gcc") or "cc"
        runtime = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
        env["LD_PRELOAD"] = runtime
    return env


def run(args: list[str], sanitize: str = "address,undefined") -> int:
    """Build, then pytest `args` under the sanitizers: 0 when the tests pass and nothing was reported."""
    with tempfile.TemporaryDirectory(prefix="thinkwire-sanitize-") as tmp:
        lib = build(tmp, sanitize)
        p = subprocess.run([sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider", *args],
                           cwd=ROOT, env=environment(lib, sanitize), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
    sys.stdout.write(p.stdout)
    reports = REPORT.findall(p.stdout)
    if p.returncode != 0 or reports:
        print(f"sanitize: FAILED (pytest exit {p.returncode}, {len(reports)} sanitizer report lines)", file=sys.stderr)
        return 1
    print(f"sanitize: clean ({sanitize}): {' '.join(args)}")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:] or TESTS))
