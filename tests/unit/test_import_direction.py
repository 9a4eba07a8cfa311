"""The layer's imports only go down: api -> {domain, auth, consumer} -> data -> core.

Folders by kind are each one layer; the folders by feature (usage, webhooks)
hold a feature across the layers, each module's layer named in
``tests/layers.py``. A module imports modules of lower layers, and of its own
layer; a feature imports only the features before it. Read from the source
(every ``import`` statement, lazy ones inside functions included), so a
wrong-way import fails here before anyone has to notice it in a review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.layers import FEATURE_FOLDERS, KIND_FOLDERS, PACKAGE, RANK, folder_of, layer_of, modules


def _imported_modules(path: Path) -> set[str]:
    """``<folder>.<module>`` of each package module ``path`` imports (``<folder>`` alone
    for a name that is no module file: ``from support_tickets.core.keys import X``'s is
    ``core.keys``, ``from support_tickets.webhooks import urls``'s ``webhooks.urls``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                raise AssertionError(f"{path}: relative import; use support_tickets.<folder>.<module>")
            names = [node.module]
            if len(node.module.split(".")) == 2:  # from support_tickets.<folder> import <module>, ...
                names = [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] != "support_tickets":
                continue
            if len(parts) < 2 or parts[1] not in KIND_FOLDERS | FEATURE_FOLDERS:
                raise AssertionError(f"{path}: imports {name}, outside any folder")
            module = ".".join(parts[1:3])
            found.add(module if (PACKAGE / f"{module.replace('.', '/')}.py").is_file() else parts[1])
    return found


def _imported_folders(path: Path) -> set[str]:
    return {module.split(".")[0] for module in _imported_modules(path)}


def _layer(module: str) -> str:
    """The layer of ``<folder>.<module>`` (or of a folder by kind)."""
    folder, _, name = module.partition(".")
    return layer_of(PACKAGE / folder / f"{name or '__init__'}.py")


def test_every_module_sits_in_a_folder_and_has_a_layer() -> None:
    assert {folder_of(path) for path in modules()} == set(KIND_FOLDERS) | set(FEATURE_FOLDERS)
    assert [path.name for path in PACKAGE.glob("*.py")] == ["__init__.py"]
    for folder, members in FEATURE_FOLDERS.items():
        present = {path.stem for path in (PACKAGE / folder).glob("*.py")} - {"__init__"}
        assert present == set(members), f"{folder}: give each module a layer in tests/layers.py (and no other)"
        assert set(members.values()) <= set(RANK)
    assert set(KIND_FOLDERS.values()) <= set(RANK)


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_imports_only_go_down(path: Path) -> None:
    layer, folder = layer_of(path), folder_of(path)
    imported = _imported_modules(path)
    wrong = {module for module in imported if _layer(module) != layer and RANK[_layer(module)] >= RANK[layer]}
    assert not wrong, f"{path.relative_to(PACKAGE)} ({layer}) imports {sorted(wrong)}: imports only go down {RANK}"
    features = list(FEATURE_FOLDERS)
    if folder in FEATURE_FOLDERS:
        later = {module for module in imported if module.split(".")[0] in features[features.index(folder) + 1 :]}
        assert not later, f"{path.relative_to(PACKAGE)} imports {sorted(later)}: features import only earlier ones"


def test_the_rule_catches_a_wrong_way_import(tmp_path: Path) -> None:
    upward = tmp_path / "data" / "upward.py"
    upward.parent.mkdir()
    upward.write_text("def f() -> None:\n    from support_tickets.domain import tickets\n")
    assert _imported_folders(upward) == {"domain"}


def test_the_rule_reads_a_features_modules_and_their_layers(tmp_path: Path) -> None:
    # A data-layer module of a feature importing its feature's consumer, and an earlier
    # feature importing a later one: both named, each with its layer.
    upward = tmp_path / "upward.py"
    upward.write_text(
        "from support_tickets.webhooks import delivery, events\nfrom support_tickets.core.keys import usage_pk\n"
        "def f() -> None:\n    import support_tickets.usage.counters\n"
    )
    assert _imported_modules(upward) == {"webhooks.delivery", "webhooks.events", "core.keys", "usage.counters"}
    assert [_layer(module) for module in ("webhooks.delivery", "webhooks.events", "usage.counters")] == [
        "consumer",
        "core",
        "data",
    ]
    assert RANK[_layer("webhooks.delivery")] > RANK[layer_of(PACKAGE / "webhooks" / "slots.py")]
