"""The layer's imports only go down: api -> {domain, auth, streams} -> data -> core.

Read from the source (every ``import`` statement, lazy ones inside functions
included), so a wrong-way import fails here before anyone has to notice it in
a review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "layers" / "shared" / "support_tickets"
# A folder may import its own modules and those of lower ranks; equal ranks are siblings that don't meet.
RANK = {"core": 0, "data": 1, "domain": 2, "auth": 2, "streams": 2, "api": 3}


def _modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if path.parent != PACKAGE)


def _imported_folders(path: Path) -> set[str]:
    folders = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] if node.level == 0 else []
            if node.level:
                raise AssertionError(f"{path}: relative import; use support_tickets.<folder>.<module>")
        for name in names:
            parts = name.split(".")
            if parts[0] == "support_tickets":
                if len(parts) < 2 or parts[1] not in RANK:
                    raise AssertionError(f"{path}: imports {name}, outside any folder")
                folders.add(parts[1])
    return folders


def test_every_module_sits_in_a_ranked_folder() -> None:
    assert {path.parent.name for path in _modules()} == set(RANK)
    assert [path.name for path in PACKAGE.glob("*.py")] == ["__init__.py"]


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_imports_only_go_down(path: Path) -> None:
    folder = path.parent.name
    wrong = {imported for imported in _imported_folders(path) if imported != folder and RANK[imported] >= RANK[folder]}
    assert not wrong, f"{path.relative_to(PACKAGE)} ({folder}) imports {sorted(wrong)}: imports only go down {RANK}"


def test_the_rule_catches_a_wrong_way_import(tmp_path: Path) -> None:
    upward = tmp_path / "data" / "upward.py"
    upward.parent.mkdir()
    upward.write_text("def f() -> None:\n    from support_tickets.domain import tickets\n")
    assert _imported_folders(upward) == {"domain"}
