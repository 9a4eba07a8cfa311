"""Every relative link of the README, docs/ and bench/results.md leads somewhere:
the file exists and, for a link with ``#anchor``, the page has a heading whose
GitHub anchor it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stack_model.template import PROJECT_ROOT

PAGES = [
    PROJECT_ROOT / "README.md",
    *sorted((PROJECT_ROOT / "docs").glob("*.md")),
    PROJECT_ROOT / "bench" / "results.md",
]
# [text](target), not an image's; the target up to its closing parenthesis (no spaces in ours).
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces as ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE):
        name = anchor(heading)
        suffix, candidate = 0, name
        while candidate in found:  # GitHub numbers repeated headings
            suffix += 1
            candidate = f"{name}-{suffix}"
        found.add(candidate)
    return found


def links(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(PROJECT_ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading with that anchor in {linked.relative_to(PROJECT_ROOT)}")
    assert broken == [], f"{page.relative_to(PROJECT_ROOT)}: " + "; ".join(broken)


def test_anchors_are_githubs() -> None:
    assert anchor("What `sam build` ships") == "what-sam-build-ships"
    assert anchor("Tiers: throttled per tenant") == "tiers-throttled-per-tenant"
    assert anchor("The data perimeter's fixed monthly cost") == "the-data-perimeters-fixed-monthly-cost"
    assert anchor("dynamodb:Attributes in the IAM guard") == "dynamodbattributes-in-the-iam-guard"
    assert anchor("Tenant isolation mode (`TenantIsolationMode=PER_TENANT`): what it costs") == (
        "tenant-isolation-mode-tenantisolationmodeper_tenant-what-it-costs"
    )


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [bad](#nothing) [gone](missing.md) `[code](x.md)`\n", encoding="utf-8")
    assert links(page) == ["#title", "#nothing", "missing.md"]
    assert anchors(page) == {"title"}
