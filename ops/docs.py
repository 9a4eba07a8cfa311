"""The docs' generated parts, rewritten from what they describe.

Each part sits between two marker comments of its page (``<!-- <name>:begin -->``
and ``<!-- <name>:end -->``); the rest of the page is written by hand. The parts:

- ``functions`` (README.md): every function of ``template.yaml``, by what invokes it;
- ``ops`` (README.md): the modules of ``ops/``;
- ``routes`` (docs/architecture.md): the route table, from the template's API
  definition joined with :data:`ops.routes.NEEDS`, each route described by the
  first line of its handler's docstring;
- ``layer`` (docs/architecture.md): the module map of the shared layer, one line
  per module, the first line of its docstring.

A new route, function or module (or one moved) changes them; ``tests/unit/test_docs.py``
fails until they are written again::

    python -m ops.docs            (make docs)

It lives in ``ops`` beside :mod:`ops.openapi` and :mod:`ops.sample_events`, the
other generators of checked-in files: it reads the route table (``ops.routes``),
which ``stack_model`` may not import.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ops.routes import api_routes
from stack_model.api_body import API_RESOURCE
from stack_model.template import PROJECT_ROOT, template

README = PROJECT_ROOT / "README.md"
ARCHITECTURE = PROJECT_ROOT / "docs" / "architecture.md"
LAYER = PROJECT_ROOT / "layers" / "shared" / "support_tickets"
OPS = PROJECT_ROOT / "ops"
FUNCTION = "AWS::Serverless::Function"
# How an event source of the template invokes its function, and what names its source.
EVENT_SOURCES: dict[str, tuple[str, str]] = {
    "DynamoDB": ("the table's stream", "Stream"),
    "SQS": ("SQS", "Queue"),
    "CloudWatchLogs": ("a CloudWatch Logs subscription of", "LogGroupName"),
}


def summary_line(path: Path) -> str:
    """The first line of a module's docstring: one sentence that says what the module is."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    lines = (docstring or "").splitlines()
    shown = path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path
    if not lines or not lines[0].strip():
        raise ValueError(f"{shown} has no docstring: its first line describes it in the docs")
    if len(lines) > 1 and lines[1].strip():
        raise ValueError(f"{shown}: its docstring's first line is not a whole summary (the second line must be blank)")
    return lines[0].strip()


def _cell(text: str) -> str:
    """A docstring's text as a Markdown table cell: reST roles and literals as code spans."""
    text = re.sub(r":[a-z]+:`~?([^`<]+?)(?:\s*<[^>]+>)?`", r"`\1`", text).replace("``", "`")
    return text.replace("|", "\\|")


def _named(value: Any) -> str:
    """The logical id a ``Ref``, ``Fn::GetAtt`` or ``Fn::Sub`` names."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            return str(target[0] if isinstance(target, list) else target.split(".")[0])
        if "Fn::Sub" in value:
            text = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
            found = re.search(r"\$\{([A-Za-z0-9]+)", text)
            if found:
                return found[1]
    return str(value)


def _authorizers(resources: dict[str, Any]) -> set[str]:
    """The functions the API runs as its authorizers."""
    auth = resources[API_RESOURCE]["Properties"].get("Auth", {})
    return {_named(spec.get("FunctionArn")) for spec in auth.get("Authorizers", {}).values()}


def functions() -> str:
    """Every function of the template, grouped by what invokes it, synchronously or not."""
    resources = template()["Resources"]
    routed = {route.function for route in api_routes()}
    authorizers = _authorizers(resources)
    rows: dict[tuple[str, str], list[str]] = {}
    for name, resource in resources.items():
        if resource["Type"] != FUNCTION:
            continue
        invoked_by = []
        if name in authorizers:
            invoked_by.append(("sync, before every route", "API Gateway's TOKEN authorizer"))
        if name in routed:
            invoked_by.append(("sync, one route each", "API Gateway ([the routes](docs/architecture.md#routes))"))
        for event in (resource["Properties"].get("Events") or {}).values():
            kind, source = EVENT_SOURCES.get(event["Type"], ("", ""))
            if not kind:
                raise ValueError(f"{name}: no description of a {event['Type']} event source (ops/docs.py)")
            named = "" if event["Type"] == "DynamoDB" else f" `{_named(event['Properties'][source])}`"
            invoked_by.append(("async", kind + named))
        if not invoked_by:
            raise ValueError(f"{name}: invoked by nothing the template says (a route, the authorizer, an event)")
        for row in invoked_by:
            rows.setdefault(row, []).append(name)
    lines = ["| invoked | by | functions |", "|---|---|---|"]
    for (when, by), names in rows.items():
        count = f" ({len(names)})" if len(names) > 3 else ""
        lines.append(f"| {when} | {by} | {', '.join(f'`{name}`' for name in names)}{count} |")
    return "\n".join(lines)


def routes() -> str:
    """The route table: each route, its function, whether only admins may call it, what it does."""
    lines = ["| route | function | admin | what it does |", "|---|---|---|---|"]
    for route in api_routes():
        handler = PROJECT_ROOT / route.code_uri / "app.py"
        line = summary_line(handler)
        prefix = f"{route.key}: "
        if not line.startswith(prefix):
            raise ValueError(f"{handler.relative_to(PROJECT_ROOT)}: its docstring starts with {prefix!r}")
        does = line.removeprefix(prefix)
        admin = "yes" if route.needs.admin else ""
        lines.append(f"| `{_cell(route.key)}` | `{route.function}` | {admin} | {_cell(does)} |")
    return "\n".join(lines)


def layer() -> str:
    """The shared layer's module map: each package and module, the first line of its docstring."""
    lines = ["| module | what it is |", "|---|---|"]
    for path in sorted(LAYER.rglob("*.py"), key=lambda found: found.relative_to(LAYER).parts):
        relative = path.relative_to(LAYER.parent)
        shown = f"{relative.parent}/" if path.name == "__init__.py" else str(relative)
        lines.append(f"| `{shown}` | {_cell(summary_line(path))} |")
    return "\n".join(lines)


def ops_modules() -> str:
    """The modules of ``ops/``, each run as ``python -m ops.<module>``."""
    names = sorted(path.stem for path in OPS.glob("*.py") if path.name != "__init__.py")
    listed = ", ".join(f"`{name}`" for name in names)
    return f"- `ops/`: the operator commands behind the make targets, the generators, what they share: {listed}"


PARTS: dict[str, tuple[Path, Callable[[], str]]] = {
    "functions": (README, functions),
    "ops": (README, ops_modules),
    "routes": (ARCHITECTURE, routes),
    "layer": (ARCHITECTURE, layer),
}


def with_part(text: str, name: str, content: str, page: Path) -> str:
    """``text`` with the part ``name`` (between its markers) replaced by ``content``."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"{page.relative_to(PROJECT_ROOT)}: needs one {begin} and, after it, one {end}")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{content}\n{end}{tail}"


def rendered() -> dict[Path, str]:
    """Every page that has generated parts, as it should read."""
    pages: dict[Path, str] = {}
    for name, (page, render) in PARTS.items():
        text = pages.get(page) or page.read_text(encoding="utf-8")
        pages[page] = with_part(text, name, render(), page)
    return pages


def write() -> list[Path]:
    """Write the generated parts; the pages that changed."""
    changed = []
    for page, text in rendered().items():
        if page.read_text(encoding="utf-8") != text:
            page.write_text(text, encoding="utf-8")
            changed.append(page)
    return changed


if __name__ == "__main__":
    for written in write():
        print(written.relative_to(PROJECT_ROOT))
