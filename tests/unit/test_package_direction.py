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
        "def f() -> None:\n    from local_stack.state import read_state\n"
    )
    assert imported_packages(upward) == {"ops", "local_stack"}
