"""``make cells``: every cell of the local set with its tenants, their usage of the day,
and its room.

    python -m ops.cell_report --local [--day YYYY-MM-DD]

It lists every cell with its tenants (tier, placement, the directory's epoch), its
usage of the day (each cell's own usage ledger, as ``make usage`` reports it:
:mod:`ops.usage`) and its room (:mod:`ops.cells`). It reads the local set (``make
dev CELLS=<n>``: the control plane's emulator and each cell's state file,
``cell_target``). Deployed, the same reading would take the directory from the
control plane's stack (its ``DirectoryTableName`` output) and each cell's table and
keys from the stack its directory item names (its outputs, as :mod:`ops.stack_target`
reads any stack); this command does not do that yet. (Apart from :mod:`ops.cells`,
which :mod:`ops.tenants` imports: this reads :mod:`ops.usage`, which imports it.)
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from ops.cells import CellsError, Directory, cell_target, local_directory
from ops.stack_target import TargetError, _set_state, api_keys_target, dynamodb_target
from support_tickets.core.errors import ApiError
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.data.tenant_registry import read_tenant_config
from support_tickets.usage.report import parse_day


def write_cells(directory: Directory, state: dict[str, Any], day: str, now: datetime, out: TextIO) -> None:
    """Each cell: its room and origin, its tenants (tier, placement, the
    directory's epoch) and their usage of ``day`` (:func:`ops.usage.write_table`)."""
    from ops.usage import tenant_usage, write_table

    for cell in directory.cells():
        target = cell_target(state, cell.cell_id)
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
    parser.add_argument("--local", action="store_true", required=True, help="the running `make dev CELLS=<n>` set")
    state_dir = os.environ.get("LOCAL_STACK_STATE_DIR") or ".local"
    parser.add_argument("--local-state", default=str(Path(state_dir) / "stack.json"), help=argparse.SUPPRESS)
    parser.add_argument("--day", help="a UTC day, YYYY-MM-DD (default: today)")
    args = parser.parse_args(argv)
    moment = now or datetime.now(UTC)
    try:
        try:
            day = parse_day(args.day, moment)
        except ApiError as exc:
            raise CellsError(f"not a day usage is kept for: {args.day!r}") from exc
        state = _set_state(args)
        write_cells(local_directory(state), state, day, moment, out)
    except (CellsError, TargetError, ClientError, BotoCoreError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
