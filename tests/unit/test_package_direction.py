"""The project's top-level packages import one way only:
support_tickets <- stack_model <- ops <- local_stack.

``stack_model`` (the template read as a model of the stack) is what the local
stack and the operator commands both need; ``ops`` works on any stack, the
local one included, so it never imports ``local_stack``; the local stack may
use ``ops`` (its tenants, users, sample events). Read from the source: every
``import`` statement, lazy ones inside functions and ``TYPE_CHECKING`` blocks
included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
# A package may import its own modules and those of lower ranks.
RANK = {"support_tickets": 0, "stack_model": 1, "ops": 2, "local_stack": 3}
FOLDERS = {"support_tickets": ROOT / "layers" / "shared" / "support_tickets"} | {
    name: ROOT / name for name in ("stack_model", "ops", "local_stack")
}


def _modules() -> list[tuple[str, Path]]:
    return sorted((package, path) for package, folder in FOLDERS.items() for path in folder.rglob("*.py"))


def imported_packages(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found |= {name.split(".")[0] for name in names} & set(RANK)
    return found


@pytest.mark.parametrize(
    ("package", "path"), _modules(), ids=lambda value: str(value.relative_to(ROOT)) if isinstance(value, Path) else ""
)
def test_imports_flow_one_way(package: str, path: Path) -> None:
    wrong = {name for name in imported_packages(path) if RANK[name] > RANK[package]}
    assert not wrong, f"{path.relative_to(ROOT)} ({package}) imports {sorted(wrong)}: only {RANK} in that order"


def test_the_rule_sees_lazy_imports(tmp_path: Path) -> None:
    upward = tmp_path / "upward.py"
    upward.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ops.tenants\n"
        "def f() -> None:\n    from local_stack.running_stack import read_state\n"
    )
    assert imported_packages(upward) == {"ops", "local_stack"}


def _imported_modules(path: Path, known: set[str]) -> set[str]:
    """The project modules ``path`` imports (``from a.b import c`` counts as
    ``a.b.c`` when that is a module, else ``a.b``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = {f"{node.module}.{alias.name}" for alias in node.names} & known
            found |= names or ({node.module} & known)
    return found


def import_cycles(modules: dict[str, Path]) -> list[list[str]]:
    """Every cycle of the import graph, once each (as found from its first module)."""
    graph = {name: sorted(_imported_modules(path, set(modules)) - {name}) for name, path in modules.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for imported in graph[name]:
            if state.get(imported) == 1:
                cycles.append([*path[path.index(imported) :], imported])
            elif imported not in state:
                visit(imported, [*path, imported])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def _module_names() -> dict[str, Path]:
    names = {}
    for package, path in _modules():
        parts = path.relative_to(FOLDERS[package]).with_suffix("").parts
        names[".".join((package, *parts)).removesuffix(".__init__")] = path
    return names


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert import_cycles(_module_names()) == []


def test_the_rule_sees_a_loop(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f() -> None:\n    from local_stack import b\n")
    (tmp_path / "b.py").write_text("from local_stack.a import f\n")
    assert import_cycles({"local_stack.a": tmp_path / "a.py", "local_stack.b": tmp_path / "b.py"}) == [
        ["local_stack.a", "local_stack.b", "local_stack.a"]
    ]
