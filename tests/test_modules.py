"""The package's shape (issue 34): no import cycle among the modules' top-level imports, and no
module over LINES_MAX lines. A cycle means a module is missing (what both sides need lives in
neither), and a module past the limit is doing more than one job."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "addon" / "thinkwire"
LINES_MAX = 600


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(module: str, node: ast.ImportFrom) -> set[str]:
    """The package's modules a `from ... import ...` loads (a package's own __init__ only when
    nothing of it is a submodule: `from . import x` is x)."""
    if node.level:
        here = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    subs = {f"{base}.{a.name}" for a in node.names} & MODULES.keys()
    return subs or ({base} & MODULES.keys())


def _top_level_imports(module: str) -> set[str]:
    """What importing `module` imports of the package: its imports outside functions, classes
    and `if TYPE_CHECKING:` blocks."""
    found: set[str] = set()
    for stmt in ast.parse(MODULES[module].read_text()).body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or \
                (isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test)):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.ImportFrom):
                found |= _imported(module, node)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names} & MODULES.keys()
    return found - {module}


def test_the_import_finder_sees_a_cycle() -> None:
    """(The check below can fail: a graph with a cycle is refused.)"""
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter({"a": {"b"}, "b": {"a"}}).prepare()


def test_the_import_finder_reads_relative_imports() -> None:
    assert "thinkwire.surfaces.messages.stream" in _top_level_imports("thinkwire.surfaces.messages")
    assert "thinkwire.memory.stores" in _top_level_imports("thinkwire.memory.layouts")
    assert "thinkwire.memory" not in _top_level_imports("thinkwire.memory.layouts")


def test_no_import_cycle() -> None:
    graph = {m: _top_level_imports(m) for m in MODULES}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


@pytest.mark.parametrize("path", sorted([*PACKAGE.rglob("*.py"), *PACKAGE.glob("*.c")]),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_size(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= LINES_MAX, f"{path.name}: {lines} lines (split it by job)"
