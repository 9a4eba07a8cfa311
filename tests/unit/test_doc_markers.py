"""Every shell block of the pages that tests/e2e/test_doc_commands.py does not
run says why, on the line before it; a block without that line is run (a new
page's lines included). The pages only: nothing runs here."""

from __future__ import annotations

import re

from tests.doc_pages import PAGES, blocks


def test_every_block_that_is_not_run_says_why() -> None:
    """A marker names a reason; a block without one is run (a new page's lines included)."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        markers = re.findall(r"<!-- not run by tests/e2e/test_doc_commands\.py:(.*?)-->", text)
        assert all(reason.strip() for reason in markers), page
        assert len(markers) == sum(block.not_run is not None for block in blocks(page)), (
            f"{page.name}: a marker that is not on the line before a shell block"
        )
