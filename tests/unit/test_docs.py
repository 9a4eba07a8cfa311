"""The docs' generated parts (ops/docs.py) are what the code says: the route table,
the layer's module map, the README's functions and ops modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops import docs
from ops.routes import api_routes
from stack_model.template import PROJECT_ROOT, template


def test_the_generated_parts_of_the_docs_are_up_to_date() -> None:
    stale = [
        str(page.relative_to(PROJECT_ROOT))
        for page, text in docs.rendered().items()
        if page.read_text(encoding="utf-8") != text
    ]
    assert stale == [], f"{stale}: generated parts are stale: run `make docs` (python -m ops.docs)"


def test_the_route_table_has_every_route_and_the_module_map_every_module() -> None:
    table = docs.routes()
    assert all(f"| `{route.key}` | `{route.function}` |" in table for route in api_routes())
    assert len(table.splitlines()) == 2 + len(api_routes())
    module_map = docs.layer()
    modules = [path for path in docs.LAYER.rglob("*.py") if path.name != "__init__.py"]
    assert all(f"| `{path.relative_to(docs.LAYER.parent)}` |" in module_map for path in modules)


def test_the_readme_names_every_function_of_the_template() -> None:
    functions = [name for name, resource in template()["Resources"].items() if resource["Type"] == docs.FUNCTION]
    table = docs.functions()
    assert all(f"`{name}`" in table for name in functions)
    readme = docs.README.read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in functions)


@pytest.mark.parametrize(
    "docstring",
    ['"""Two lines\nof a summary."""\n', "x = 1\n", '""""""\n'],
    ids=["summary-over-two-lines", "no-docstring", "empty"],
)
def test_a_module_without_a_one_line_summary_fails_the_docs_with_its_name(tmp_path: Path, docstring: str) -> None:
    module = tmp_path / "probe.py"
    module.write_text(docstring, encoding="utf-8")
    with pytest.raises(ValueError, match=r"probe\.py"):
        docs.summary_line(module)


def test_a_page_without_its_markers_is_refused() -> None:
    page = PROJECT_ROOT / "README.md"
    with pytest.raises(ValueError, match="<!-- routes:begin -->"):
        docs.with_part("no markers here", "routes", "x", page)
    assert docs.with_part("a\n<!-- routes:begin -->\nold\n<!-- routes:end -->\nb", "routes", "new", page) == (
        "a\n<!-- routes:begin -->\nnew\n<!-- routes:end -->\nb"
    )
