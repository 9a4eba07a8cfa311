"""Every ``make <target> NAME=value`` the pages show (in a block or in the text,
run by tests/e2e/test_doc_commands.py or not) sets a variable its target
takes: make ignores one it does not know, so a documented option that is not
wired (``MOVE_WORKERS=`` before ``make tenant`` took it) would do nothing,
silently. What a target takes, the Makefile says: its ``$(call takes,...)``,
what its recipe evaluates itself (``$(filter 1 true yes,$(ADMIN))``) and what
its ``make help`` line names."""

from __future__ import annotations

import re

import pytest

from stack_model.template import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
MAKEFILE = PROJECT_ROOT / "Makefile"
VALUE = r"(?:\"[^\"]*\"|'[^']*'|[^\s`)|;]*)"
MAKE_LINE = re.compile(rf"\bmake (?:-s )?([a-z][a-z-]*)((?: +[A-Z][A-Z_]*={VALUE})+)")
ASSIGNMENT = re.compile(rf" +([A-Z][A-Z_]*)={VALUE}")
RULE = re.compile(r"^([a-z][a-z-]*):(?!=)(.*)$")


def variables_of_targets() -> dict[str, set[str]]:
    taken: dict[str, set[str]] = {}
    target = None
    for line in MAKEFILE.read_text(encoding="utf-8").splitlines():
        if call := re.fullmatch(r"\$\(call takes,([a-z-]+),([A-Z_ ]+)\)", line):
            taken.setdefault(call[1], set()).update(call[2].split())
            continue
        if rule := RULE.match(line):
            target = rule[1]
            help_text = rule[2].partition("## ")[2]
            taken.setdefault(target, set()).update(re.findall(r"\b([A-Z][A-Z_]*)=", help_text))
            continue
        if line.startswith("\t") and target is not None:
            taken[target].update(re.findall(r"(?<!\$)\$\(([A-Z][A-Z_]*)\)", line))
        elif line.strip():
            target = None
    return taken


def documented() -> list[tuple[str, str, str]]:
    """(page, target, variable) of every make line of the pages."""
    found = []
    for page in PAGES:
        for line in MAKE_LINE.finditer(page.read_text(encoding="utf-8")):
            found += [(page.name, line[1], name) for name in ASSIGNMENT.findall(line[2])]
    return found


def test_the_pages_make_lines_are_found() -> None:
    lines = documented()
    assert ("operations.md", "tenant", "MOVE_WORKERS") in lines
    assert ("README.md", "token", "USER") in lines
    assert ("local-stack.md", "dev", "ARGS") in lines


@pytest.mark.parametrize(("page", "target", "name"), sorted(set(documented())))
def test_a_documented_make_variable_is_one_its_target_takes(page: str, target: str, name: str) -> None:
    taken = variables_of_targets()
    assert target in taken, f"{page}: make {target}: no such target"
    assert name in taken[target], f"{page}: make {target} {name}=...: the target takes {sorted(taken[target])}"
