"""``make cells``: every cell with its tenants, their usage of the day, and its room.

    python -m ops.cell_report (--local | --control-plane <stack> [--region <r>] [--register <stack>...])
                              [--day YYYY-MM-DD]

It lists every cell of the directory with its tenants (tier, placement, the
directory's epoch), its usage of the day (each cell's own usage ledger, as ``make
usage`` reports it: :mod:`ops.usage`) and its room (:mod:`ops.cells`). The
directory is the local set's (``make dev CELLS=<n>``) or the deployed control
plane's (:func:`ops.control_plane.control_plane`); each cell is read where the
local set's state file, or deployed its directory item (its stack and Region),
says. ``--register <stack>`` first writes a deployed cell into the directory, then
its origin into the router's store (:func:`ops.control_plane.register_cell`).
(Apart from :mod:`ops.cells`, which :mod:`ops.tenants` imports: this reads
:mod:`ops.usage`, which imports it.)
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from botocore.exceptions import BotoCoreError, ClientError

from ops.cells import Cell, CellsError, Directory, cell_target
from ops.control_plane import add_control_plane_argument, cell_stack_target, control_plane, register_cell
from ops.stack_target import TargetError, _set_state, api_keys_target, dynamodb_target
from support_tickets.core.errors import ApiError
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.data.tenant_registry import read_tenant_config
from support_tickets.usage.report import parse_day


def write_cells(
    directory: Directory, reach: Callable[[Cell], argparse.Namespace], day: str, now: datetime, out: TextIO
) -> None:
    """Each cell: its room and origin, its tenants (tier, placement, the directory's
    epoch) and their usage of ``day`` (:func:`ops.usage.write_table`); ``reach(cell)``
    is the cell as the operator commands' target (:mod:`ops.stack_target`)."""
    from ops.usage import tenant_usage, write_table

    for cell in directory.cells():
        target = reach(cell)
        client, table_name = dynamodb_target(target)
        tenants = [tenant for tenant, left in api_keys_target(target).directory().items() if left is None]
        out.write(
            f"{cell.cell_id}: {len(tenants)} tenant(s), room {cell.room} of {cell.capacity}, "
            f"origin {cell.api_domain}/{cell.stage}, {cell.stack}\n"
        )
        rows = [("tenant", "tier", "placement", "directory")]
        for tenant in tenants:
            record = read_tenant_config(TenantTable(tenant, table_name, OwnClient(client)))
            placed = directory.placement(tenant)
            if placed is None:
                where = "not placed"
            elif placed.cell == cell.cell_id:
                where = f"epoch {placed.epoch}"
            else:
                where = f"placed in {placed.cell} (epoch {placed.epoch})"
            rows.append((tenant, record.tier, record.placement, where))
        widths = [max(len(row[index]) for row in rows) for index in range(4)]
        for row in rows:
            out.write("  " + "  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip())
            out.write("\n")
        report = io.StringIO()
        write_table([tenant_usage(client, table_name, tenant, day, now) for tenant in tenants], day, report)
        out.write("".join(f"  {line}\n" for line in report.getvalue().splitlines()))


def main(argv: list[str] | None = None, out: TextIO | None = None, now: datetime | None = None) -> int:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog="python -m ops.cell_report", description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--local", action="store_true", help="the running `make dev CELLS=<n>` set")
    add_control_plane_argument(target)
    state_dir = os.environ.get("LOCAL_STACK_STATE_DIR") or ".local"
    parser.add_argument("--local-state", default=str(Path(state_dir) / "stack.json"), help=argparse.SUPPRESS)
    parser.add_argument("--region", help="the control plane's Region (its cells' too)")
    parser.add_argument(
        "--register",
        action="append",
        default=[],
        help="with --control-plane: a deployed cell's stack to write into the directory first (a value may hold "
        "several, blank-separated)",
    )
    parser.add_argument("--day", help="a UTC day, YYYY-MM-DD (default: today)")
    args = parser.parse_args(argv)
    moment = now or datetime.now(UTC)
    try:
        try:
            day = parse_day(args.day, moment)
        except ApiError as exc:
            raise CellsError(f"not a day usage is kept for: {args.day!r}") from exc
        registered = [stack for value in args.register for stack in value.split()]
        if registered and args.local:
            raise CellsError("--register writes a deployed cell into the deployed control plane's directory")
        plane = control_plane(args)
        if plane is None:
            raise TargetError("the local stack runs no cells: start it with `make dev CELLS=2`")
        directory, routes = plane
        for stack in registered:
            register_cell(directory, routes, stack, args.region)
        write_cells(directory, _reach(args), day, moment, out)
    except (CellsError, TargetError, ClientError, BotoCoreError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0


def _reach(args: argparse.Namespace) -> Callable[[Cell], argparse.Namespace]:
    """How each cell is read: the local set's cell by its state file, a deployed one by its directory item."""
    if not args.local:
        return cell_stack_target
    state = _set_state(args)
    return lambda cell: cell_target(state, cell.cell_id)


if __name__ == "__main__":
    raise SystemExit(main())
