"""Inside ``local_stack``, the packages (one per AWS service it stands in for)
import one way only, lazy imports included:

    __main__ -> cells -> stack -> emulator -> iam.guard -> cognito -> iam, apigateway, lambda_, event_sources
             -> local_values, running_stack, wsgi

A module may import its own package and the groups below it, never a sibling
of its own rank: the API Gateway, Lambda and event-source stand-ins know
nothing of each other nor of the emulator; they meet in ``stack``. The guard
is the one module of ``iam`` above ``cognito`` (it routes the identity pool's
calls); the rest of ``iam`` never imports ``cognito``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "local_stack"
# The longest matching prefix names a module's group; a lower rank is further down.
RANKS = {
    "local_stack.local_values": 0,
    "local_stack.running_stack": 0,
    "local_stack.wsgi": 0,
    "local_stack.iam": 1,
    "local_stack.apigateway": 1,
    "local_stack.lambda_": 1,
    "local_stack.event_sources": 1,
    "local_stack.cognito": 2,
    "local_stack.iam.guard": 3,
    "local_stack.emulator": 4,
    "local_stack.stack": 5,
    "local_stack.cells": 6,
    "local_stack.__main__": 7,
}


def group_of(module: str) -> str | None:
    found = [group for group in RANKS if module == group or module.startswith(group + ".")]
    return max(found, key=len) if found else None


def _module_name(path: Path) -> str:
    return ".".join(("local_stack", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from local_stack.iam import guard` imports local_stack.iam.guard
            found |= {_submodule(node.module, alias.name) for alias in node.names}
    return {name for name in found if name.startswith("local_stack.")}


def _submodule(module: str, name: str) -> str:
    """``module.name`` when that is a module of the package, else ``module``."""
    path = PACKAGE.parent.joinpath(*module.split("."), name)
    return f"{module}.{name}" if path.with_suffix(".py").exists() or path.is_dir() else module


def wrong_imports(module: str, imported: set[str]) -> list[str]:
    own = group_of(module)
    groups = {name: group_of(name) for name in sorted(imported)}
    return [
        name
        for name, group in groups.items()
        if own is None or group is None or (group != own and RANKS[group] >= RANKS[own])
    ]


def _modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if path != PACKAGE / "__init__.py")


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_local_stack_imports_flow_down(path: Path) -> None:
    module = _module_name(path)
    assert group_of(module), f"{path.relative_to(ROOT)} is in no group of {sorted(RANKS)}: add it"
    wrong = wrong_imports(module, imported_modules(path))
    assert not wrong, f"{module} (rank {RANKS[group_of(module) or '']}) imports {wrong}: only lower ranks, {RANKS}"


def test_the_rule_refuses_a_sibling_and_an_upward_import(tmp_path: Path) -> None:
    source = tmp_path / "source.py"
    source.write_text(
        "from local_stack.lambda_.runtime import main\n"
        "def f() -> None:\n    from local_stack.emulator.server import Emulator\n"
        "from local_stack import wsgi\n"
    )
    imported = imported_modules(source)
    assert imported == {"local_stack.lambda_.runtime", "local_stack.emulator.server", "local_stack.wsgi"}
    assert wrong_imports("local_stack.apigateway.rest_api", imported) == [
        "local_stack.emulator.server",
        "local_stack.lambda_.runtime",
    ]
    below = tmp_path / "below.py"
    below.write_text("from local_stack.iam import guard, sessions\n")
    assert wrong_imports("local_stack.iam.sts", imported_modules(below)) == ["local_stack.iam.guard"]
