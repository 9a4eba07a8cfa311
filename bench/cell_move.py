"""Moving a tenant between cells (``python -m bench --cell-move-only``): how fast
:class:`ops.cell_move.CellMover` copies a tenant of 1,000 or 10,000 tickets from
cell-a's pool to cell-b's, and how long its writes pause, under one writer.

The local set runs two cells and the router (``python -m local_stack serve
--cells 2``), their authorizer caches 2 s. Each tenant is placed in cell-a as
``make token`` places one (the directory, its record and API key there, the
router's store), filled there as :mod:`bench.move` fills one, cell-a's stream
functions waited for, then moved to cell-b while a writer of
:mod:`bench.move_writers` writes through the router. Afterwards cell-b must
hold every acknowledged write, and cell-a nothing of the tenant (a keys-only
Scan of its pool, and no record).

The figures are :mod:`bench.move`'s (:class:`TimedCellMover` times the cell
mover as :class:`bench.move.TimedMover` times the other), the copy's without
the wait before it, plus the mover's wait for answers cell-b's authorizer cached
(from cell-b's ``ARRIVING`` record to the catch-up: 2 s here, overlapped by the
copy; the template's ``ReauthorizeEvery``, 300 s, in AWS).
"""

from __future__ import annotations

import argparse
import io
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.move import (
    DRAIN_SECONDS,
    WRITERS_TIER,
    TimedMover,
    fill_tenant,
    move_figures,
    outcome_row,
    pause_table,
    start_writers,
    stored_tickets,
    writes_table,
)
from bench.move_writers import WRITER_RATE, Writers, local_sender, report, verify
from bench.stackproc import StackProcess
from bench.warm import progress
from local_stack.running_stack import STATE_FILE, local_admin, operator_client, read_state
from ops.cell_move import CellMover
from ops.cell_targets import cells_of
from ops.cells import local_directory, local_routes, place_in
from ops.move import DEFAULT_RATE, DEFAULT_WORKERS
from ops.tenant_data import keys_under_prefix
from ops.tenants import TenantAdmin, _control_plane
from ops.users import UserPool, ensure_user, id_token

SIZES: Final = (1_000, 10_000)
SOURCE: Final = "cell-a"
DEST: Final = "cell-b"
AUTHORIZER_CACHE_SECONDS: Final = 2
# The local set this bench starts (bench.stackproc.stack_process's arguments).
SERVE_ARGUMENTS: Final = ("--cells", "2", "--authorizer-cache-seconds", str(AUTHORIZER_CACHE_SECONDS))


@dataclass
class TimedCellMover(TimedMover, CellMover):
    """The cell mover timed as :class:`TimedMover` times a move (its steps, its
    DynamoDB calls, its pause, its copy), plus the wait for the new cell's
    authorizer cache, its own span."""

    def _before_catch_up(self, *args: Any, **kwargs: Any) -> Any:
        with self._timed("_before_catch_up"):
            return super()._before_catch_up(*args, **kwargs)

    def seconds_of(self, name: str) -> float:
        return sum(ended - started for span, started, ended in self.spans if span == name)


def cell_stack(stack: StackProcess, cell: str) -> StackProcess:
    """One cell of the set ``stack`` runs, as the bench reaches a stack (its emulator, table, stream drain)."""
    state_dir = Path(stack.state["cells"][cell])
    state = read_state(state_dir)
    if state is None:
        raise RuntimeError(f"cell {cell} of the local set is not running")
    return StackProcess(stack.process, state_dir, state)


def writer_token(stack: StackProcess, tenant: str, username: str) -> str:
    """An ID token of the set's user pool, the control plane's (not a cell's emulator)."""
    state = stack.state
    cognito = operator_client(str(state["user_pool_url"]), "cognito-idp", str(state["region"]))
    pool = UserPool(cognito, str(state["user_pool_id"]), str(state["user_pool_client_id"]))
    ensure_user(pool, username, tenant)
    return id_token(pool, username)


def run_cell_move(stack: StackProcess, *, sizes: tuple[int, ...] = SIZES, tenant_prefix: str) -> dict[str, Any]:
    """One move from cell-a to cell-b per size, under one writer; the figures of each."""
    rows = [_one_move(stack, f"{tenant_prefix}-{tickets}", tickets=tickets) for tickets in sizes]
    return {
        "rows": rows,
        "rate": DEFAULT_RATE,
        "workers": DEFAULT_WORKERS,
        "phase_seconds": TenantAdmin.phase_seconds,
        "drain_seconds": DRAIN_SECONDS,
        "writer_rate": WRITER_RATE,
        "authorizer_cache_seconds": AUTHORIZER_CACHE_SECONDS,
    }


def _one_move(stack: StackProcess, tenant: str, *, tickets: int) -> dict[str, Any]:
    source, dest = cell_stack(stack, SOURCE), cell_stack(stack, DEST)

    def onboard(cell: str) -> None:
        admin = local_admin(cell_stack(stack, cell).state)
        admin.ensure(tenant)
        admin.set_tier(tenant, WRITERS_TIER)

    place_in(local_directory(stack.state), local_routes(stack.state), tenant, SOURCE, onboard)
    progress(f"cell move: filling {tenant} with {tickets:,} tickets and a comment each in {SOURCE}")
    written, ticket_ids = fill_tenant(source, tenant, tickets)
    target = argparse.Namespace(local=True, local_state=str(stack.state_dir / STATE_FILE))
    cells = cells_of(target, TenantAdmin)
    directory, publish = _control_plane(target)
    log = io.StringIO()
    mover = TimedCellMover(
        cells[DEST].admin, cells=cells, directory=directory, publish=publish, drain_seconds=DRAIN_SECONDS, stream=log
    )
    for cell in cells.values():
        mover.count_calls(cell.client)
    send = local_sender(str(stack.state["api_url"]), writer_token(stack, tenant, f"writer-{tenant}"))
    clients = Writers(send, ticket_ids, writers=1)
    writing = start_writers(clients)
    load = os.getloadavg()[0]
    progress(f"cell move: {tenant} from {SOURCE} to {DEST}, 1 writer through the router (load average {load:.1f})")
    started = time.monotonic()
    try:
        outcome = mover.move(tenant, DEST)
    finally:
        clients.stop()
        for cell in cells.values():
            mover.stop_counting(cell.client)
    seconds = time.monotonic() - started
    assert directory is not None
    assert directory.cell_of(tenant) == DEST, log.getvalue()
    row = outcome_row(outcome, mover, tickets=tickets, written=written, seconds=seconds, load=load)
    row["writers"] = 1
    row["authorizer_cache_wait_seconds"] = round(mover.seconds_of("_before_catch_up"), 1)
    written_tickets = {write.ticket_id for write in clients.writes if write.acknowledged and write.ticket_id}
    lost = verify(clients.writes, stored_tickets(dest, str(dest.state["table_name"]), tenant, written_tickets))
    row["writes"] = report(clients.writes, lost, seconds=time.monotonic() - writing)
    row["left_in_source"] = len(keys_under_prefix(cells[SOURCE].table(tenant))) + int(
        cells[SOURCE].admin.record(tenant).stored
    )
    if lost or row["left_in_source"]:
        progress(f"cell move: BUG: {len(lost)} write(s) lost, {row['left_in_source']} item(s) left in {SOURCE}")
    progress(f"cell move: {row}")
    return row


def cell_move_markdown(moved: dict[str, Any]) -> list[str]:
    """The section of results.md."""
    cache = moved.get("authorizer_cache_seconds", AUTHORIZER_CACHE_SECONDS)
    lines = [
        "## Moving a tenant between cells",
        "",
        "| tickets | items copied | copy (s) | copy (items/s) | write pause (s) | of which sync (s) | whole move (s) "
        f"| cache wait (s) | left in {SOURCE} | load (start→end) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in moved["rows"]:
        left = row["left_in_source"] if not row["left_in_source"] else f"**{row['left_in_source']} (a bug)**"
        load = f"{row['load_average']}→{row['load_average_after']}"
        lines.append(
            f"| {row['tickets']:,} | {move_figures(row)} | {row['authorizer_cache_wait_seconds']} | {left} | {load} |"
        )
    lines += writes_table(moved["rows"]) + pause_table(moved["rows"], "The pause:")
    lines += [
        "",
        "How: `python -m bench --cell-move-only` moves a tenant, filled as [the dedicated "
        f"move](#moving-a-tenant-into-its-own-table) fills one, from {SOURCE}'s pool to {DEST}'s (`--cells 2`, "
        f"`ops.cell_move`), one writer sending {moved['writer_rate']:g} writes/s through the router; figures as "
        f"there, the copy's without the {moved['phase_seconds']:.0f} s wait before it. {DEST} must then hold every "
        f"acknowledged write, {SOURCE} nothing. The cache wait, for {DEST}'s authorizer cache ({cache:g} s here), "
        "runs from its ARRIVING record, behind the copy; in AWS it is `ReauthorizeEvery`'s 300 s, added to the whole "
        "move where the copy is shorter, writes open meanwhile.",
    ]
    measured = {row["tickets"] for row in moved["rows"]}
    missing = [f"{size:,}" for size in SIZES if size not in measured]
    if missing:
        lines += ["", f"Not measured in this run (`--cell-move-tickets`): {', '.join(missing)} tickets."]
    lines.append("")
    return lines
