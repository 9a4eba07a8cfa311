"""The cell move's section of results.md renders from its figures (no bench run), and
``--cell-move-only`` refuses to run without the results of a whole run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import _arguments
from bench.cell_move import cell_move_markdown
from bench.report import markdown

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results.json"


def row(tickets: int, left: int = 0) -> dict[str, Any]:
    return {
        "tickets": tickets,
        "writers": 1,
        "items_copied": 6 * tickets + 17,
        "copy_seconds": 41.3,
        "copy_items_per_second": 146,
        "pause_seconds": 3.4,
        "sync_seconds": 1.4,
        "move_seconds": 190.2,
        "authorizer_cache_wait_seconds": 0.0,
        "left_in_source": left,
        "load_average": 1.9,
        "load_average_after": 4.4,
        "pause_breakdown": {
            "steps_seconds": dict.fromkeys(
                ("_sync", "_marked", "_sync_events", "_visit_all", "_recount", "_write", "_wait_until"), 0.5
            ),
            "calls": {"Query": {"count": 12, "seconds": 0.6, "median_ms": 48.0}},
        },
        "writes": {
            "writes": 950,
            "writes_per_second": 4.9,
            "acknowledged": 950,
            "moving_answers": 23,
            "other_answers": {},
            "longest_wait_seconds": 4.1,
            "lost": 0,
        },
    }


def moved(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rows": rows,
        "rate": 1000.0,
        "workers": 8,
        "phase_seconds": 65.0,
        "drain_seconds": 5.0,
        "writer_rate": 5.0,
        "authorizer_cache_seconds": 2,
    }


def test_the_section_has_its_table_the_writers_answers_and_where_the_pause_went() -> None:
    text = "\n".join(cell_move_markdown(moved([row(1_000)])))
    assert text.startswith("## Moving a tenant between cells\n")
    assert "| 1,000 | 6,017 | 41.3 | 146 | 3.4 | 1.4 | 190.2 | 0.0 | 0 | 1.9→4.4 |" in text
    assert "| cache wait (s) | left in cell-a | load (start→end) |" in text
    assert "for cell-b's authorizer cache (2 s here)" in text
    assert "| 1,000 | 1 | 950 (4.9) | 950 | 23 | none | 4.1 | 0 |" in text
    assert "The pause:" in text
    assert "| 1,000 | 1 |  |  | 0.5 | 0.5 |" in text
    assert "(#moving-a-tenant-into-its-own-table)" in text
    assert "without the 65 s wait before it" in text
    assert "`ReauthorizeEvery`'s 300 s, added to the whole move where the copy is shorter, writes open" in text
    assert "Not measured in this run (`--cell-move-tickets`): 10,000 tickets." in text


def test_what_is_left_in_the_old_cell_is_shown_as_a_bug() -> None:
    text = "\n".join(cell_move_markdown(moved([row(1_000), row(10_000, left=3)])))
    assert "| 10,000 | 60,017 | 41.3 | 146 | 3.4 | 1.4 | 190.2 | 0.0 | **3 (a bug)** | 1.9→4.4 |" in text
    assert "Not measured" not in text


def test_the_method_text_stays_within_150_words() -> None:
    (how,) = [line for line in cell_move_markdown(moved([row(1_000)])) if line.startswith("How:")]
    assert len(how.split()) <= 150


def test_results_md_has_the_section_after_the_dedicated_move_only_when_the_results_have_it() -> None:
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    results.pop("cell_move", None)
    assert "## Moving a tenant between cells" not in markdown(results)
    text = markdown({**results, "cell_move": moved([row(1_000)])})
    assert text.index("## Moving a tenant into its own table") < text.index("## Moving a tenant between cells")
    assert "| 1,000 | 6,017 | 41.3 | 146 | 3.4 | 1.4 | 190.2 | 0.0 | 0 |" in text


def test_cell_move_only_refuses_to_run_without_the_results_of_a_whole_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _arguments(["--cell-move-only", "--out", str(tmp_path)])
    assert exited.value.code == 2
    needed = f"--cell-move-only needs the results of a whole run in {tmp_path / 'results.json'}"
    assert needed in capsys.readouterr().err


def test_cell_move_only_runs_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(SystemExit):
        _arguments(["--cell-move-only", "--move-only", "--out", str(tmp_path)])
    assert "alone" in capsys.readouterr().err
    args = _arguments(["--cell-move-only", "--out", str(tmp_path), "--cell-move-tickets", "1000"])
    assert (args.cell_move_only, args.skip_cold, args.cell_move_tickets) == (True, True, "1000")
