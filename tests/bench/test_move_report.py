"""The move section of results.md says what the mover's final check found for each
row that has it, and which sizes a run did not measure."""

from __future__ import annotations

from typing import Any

from bench.move import move_markdown


def row(tickets: int, **check: Any) -> dict[str, Any]:
    return {
        "tickets": tickets,
        "items_copied": 6 * tickets,
        "copy_seconds": 70.0,
        "copy_items_per_second": 80,
        "pause_seconds": 17.0,
        "sync_seconds": 13.0,
        "move_seconds": 180.0,
        "load_average": 1.5,
        **check,
    }


def section(rows: list[dict[str, Any]]) -> str:
    return "\n".join(
        move_markdown({"rows": rows, "rate": 1000.0, "workers": 8, "phase_seconds": 2.0, "drain_seconds": 5.0})
    )


def test_each_checked_row_reports_what_the_final_check_found() -> None:
    text = section(
        [
            row(1_000, trailing=16, erased=6_017, strays=0, verified="a Scan of T found nothing under TENANT#a|"),
            row(10_000, trailing=3, erased=60_003, strays=2, verified="a Scan of T left 1 item under TENANT#b|"),
        ]
    )
    assert "- 1,000 tickets: 16 items copied by the trailing copy" in text
    assert "6,017 erased from the pool (0 of them found only by the final Scan); a Scan of T found nothing" in text
    assert "(2 of them found only by the final Scan); a Scan of T left 1 item under TENANT#b|." in text
    assert "Not measured" not in text


def test_rows_without_the_check_and_sizes_not_measured() -> None:
    text = section([row(1_000)])
    assert "final check" not in text
    assert "Not measured in this run (`--move-tickets`): 10,000 tickets." in text
