"""The dedicated move's figures (bench.move.outcome_row): the copy's seconds and rate
leave out the wait before the copy reads anything (every function seeing the move:
2 s alone, 65 s beside writers), which the mover's own ``copy_seconds`` includes, as
results.md's text says ("in no figure"). No stack: the mover's spans are given."""

from __future__ import annotations

from typing import Any

from bench.move import TimedMover, move_markdown, outcome_row
from ops.move import Outcome
from support_tickets.data.tenant_registry import TenantConfig


def test_the_copy_figure_leaves_out_the_wait_before_the_copy() -> None:
    mover = TimedMover(store=Any)  # type: ignore[arg-type] # the figures read only its spans
    # The copy: 65 s waiting for every function to see the move, then 20 s copying; a wait in the pause is not its
    mover.spans += [("_copy", 100.0, 185.0), ("_wait_until", 100.0, 165.0), ("_wait_until", 200.0, 202.0)]
    outcome = Outcome(TenantConfig(tenant_id="1"))
    outcome.copied, outcome.copy_seconds, outcome.pause_seconds = 4_000, 85.0, 3.0

    row = outcome_row(outcome, mover, tickets=1_000, written=2_000, seconds=150.0, load=1.0)

    assert (row["copy_seconds"], row["copy_items_per_second"], row["copy_wait_seconds"]) == (20.0, 200, 65.0)
    # results.md says when its rows were measured with the wait in (before this figure left it out)
    move = {"rate": 1000.0, "workers": 8, "phase_seconds": 2.0, "rows": [row]}
    assert "stale" not in "\n".join(move_markdown(move))
    del row["copy_wait_seconds"]
    assert "Copy (s) here includes it: stale until the next `--move-only` run" in "\n".join(move_markdown(move))
