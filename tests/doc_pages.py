"""The pages' shell blocks (README.md and docs/*.md, README first), each with
the reason it is not run, when the line before it gives one::

    <!-- not run by tests/e2e/test_doc_commands.py: <why> -->

read by tests/e2e/test_doc_commands.py, which runs the others against the
local stack, and by tests/unit/test_doc_markers.py, which checks the markers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from stack_model.template import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!-- not run by tests/e2e/test_doc_commands\.py: (\S.*?) -->")
FENCE = re.compile(r"^```(\S*)")
SHELLS = {"bash", "sh", "shell"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of its opening fence
    text: str
    not_run: str | None  # why, when it cannot run here


def blocks(page: Path) -> list[Block]:
    """The page's shell blocks, each with the reason it is not run, if its previous line gives one."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        if fence[1] in SHELLS:
            marker = NOT_RUN.search(lines[index - 1]) if index else None
            text = "\n".join(lines[index + 1 : end])
            found.append(Block(page, index + 1, text, marker[1] if marker else None))
        index = end + 1
    return found
