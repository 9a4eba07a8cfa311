"""What each tenant consumed and cost on a UTC day, for operators.

    python -m ops.usage [--tenant <t>] [--day YYYY-MM-DD] [--chart <file>.png]
                        (--local | --stack <s> | --control-plane <s>) [--region <r>]

With ``--tenant``: that tenant's usage object (API.md, the same as its admins
read with ``GET /usage``) as JSON. Without: a table of every tenant's usage of
the day, costliest first, and a total line. ``--chart`` also draws each
tenant's cost by component (API Gateway, Lambda, DynamoDB, webhooks, and a
dedicated tenant's own key) as a PNG.

The figures are the metering function's counters (docs/usage.md), read with
the operator's credentials (one Query per tenant), and its record (one
GetItem: whether it is, or was last, placed in a table of its own, which
prices its key in ``cost_usd.dedicated``). Every tenant means every
tenant with an API key of the stack (its directory: ``ops.api_keys``),
offboarded ones included: ``make offboard`` keeps their usage ledger
(:func:`ops.tenant_data.ledger_partitions`) and their key, as a tombstone
tagged ``offboarded``. An offboarded tenant's row is shown for a day it has
usage, marked ``(offboarded)``; with ``--tenant``, its object carries
``offboarded_at``, while its record stays and after.
The day defaults to today (UTC); the same days are accepted as by
``GET /usage``. A bad argument, or a ``--tenant`` that has no tenant record, is
a one-line error and exit status 1.

**Cells** (``make dev CELLS=<n>``, or deployed cells through ``--control-plane``:
:func:`ops.control_plane.control_plane`): every cell's ledger and keys are read, and
each tenant is one row (or object) whatever cells hold its counters: those of the
cells it left, and those of a cell it did not end up in (a move rolled back: its
counters stay there, its key does not), summed, the cost computed from the sum
(:func:`counted_items`: a counter a running move copied is counted once). Its
record (what prices a table of its own) is its cell's, the directory's placement.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from ops.cells import Directory, cell_target
from ops.control_plane import add_control_plane_argument, cell_stack_target, control_plane
from ops.stack_target import TargetError, _set_state, add_target_arguments, api_keys_target, dynamodb_target
from ops.tenant_data import offboarded_key
from ops.tenants import NoSuchTenant, existing_record
from support_tickets.core import keys
from support_tickets.core.errors import ApiError
from support_tickets.core.models import UsageResponse
from support_tickets.data.table import OwnClient, TenantTable, from_item
from support_tickets.data.tenant_registry import TenantConfig, read_tenant_config
from support_tickets.usage.counters import Counters, add_counters, day_items, read_day
from support_tickets.usage.report import own_table_windows, parse_day, usage_object

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from ops.api_keys import ApiKeys

# webhooks: the delivery function's Lambda cost and its SQS and KMS requests; dedicated: a
# dedicated tenant's own key, 0 for the others (docs/usage.md).
OFFBOARDED: Final = "(offboarded)"
COMPONENTS = ("api_gateway", "lambda", "dynamodb", "webhooks", "dedicated")
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")
COLUMNS = (
    "tenant", "requests", "read units", "write units", "invocations", "GB-s", "deliveries", "attempts",
    *COMPONENTS, "total USD",
)  # fmt: skip


class UsageArgumentError(ValueError):
    """An argument the command can't use (a tenant id, a day, a chart's file)."""


def tenant_usage(client: DynamoDBClient, table_name: str, tenant_id: str, day: str, now: datetime) -> UsageResponse:
    """The tenant's usage object of ``day``: its counters and its record, both
    in the pool table ``table_name`` whatever its placement (an offboarded
    tenant's record gone: its ledger's note, :func:`offboarded_at`, places it)."""
    sums = read_day(client, table_name, tenant_id, day)
    return usage_object(tenant_id, day, sums, now, own_table_windows(_placed(client, table_name, tenant_id)))


def _placed(client: DynamoDBClient, table_name: str, tenant_id: str) -> TenantConfig:
    """The tenant's record, or the placement its ledger's note kept once the record is gone."""
    record = read_tenant_config(TenantTable(tenant_id, table_name, OwnClient(client)))
    if not record.version:
        record = _noted_placement(client, table_name, tenant_id) or record
    return record


def _note(client: DynamoDBClient, table_name: str, tenant_id: str) -> dict[str, Any] | None:
    """The ledger's ``OFFBOARDED`` note (``make offboard`` writes it), or ``None``."""
    item = client.get_item(TableName=table_name, Key=offboarded_key(tenant_id), ConsistentRead=True).get("Item")
    return from_item(item) if item else None


def _noted_placement(client: DynamoDBClient, table_name: str, tenant_id: str) -> TenantConfig | None:
    """The placement fields the note kept, as a record (what prices a table of its own)."""
    note = _note(client, table_name, tenant_id)
    if note is None:
        return None
    return TenantConfig(
        tenant_id=tenant_id,
        placement=str(note.get("placement", "pool")),
        table=note.get("table"),
        placed_at=int(note.get("placed_at", 0)),
        previous_table=note.get("previous_table"),
        previous_placed_at=int(note.get("previous_placed_at", 0)),
    )


def offboarded_at(client: DynamoDBClient, table_name: str, tenant_id: str) -> int | None:
    """When the tenant was offboarded (its record marked, or gone and its ledger
    noted), or ``None`` for a current tenant."""
    record = read_tenant_config(TenantTable(tenant_id, table_name, OwnClient(client)))
    if record.offboarding_since is not None:
        return int(record.offboarding_since)
    note = None if record.version else _note(client, table_name, tenant_id)
    return int(note["offboarded_at"]) if note is not None else None


def has_usage(usage: UsageResponse) -> bool:
    """Whether the day has anything to bill: a counter, or a table of its own's share."""
    return bool(
        usage["requests_total"]
        or usage["lambda"]["invocations"]
        or usage["dynamodb"]["read_units"]
        or usage["dynamodb"]["write_units"]
        or usage["webhooks"]["attempts"]
        or usage["cost_usd"]["total"]
    )


def component(usage: UsageResponse, name: str) -> float:
    """A cost component of the usage object (0 for ``dedicated`` when the tenant has none)."""
    value = usage["cost_usd"].get(name, 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


def costliest_first(usages: Sequence[UsageResponse]) -> list[UsageResponse]:
    return sorted(usages, key=lambda usage: (-usage["cost_usd"]["total"], usage["tenant_id"]))


def _row(usage: UsageResponse, offboarded: Collection[str]) -> list[str]:
    cost = usage["cost_usd"]
    return [
        usage["tenant_id"] + (f" {OFFBOARDED}" if usage["tenant_id"] in offboarded else ""),
        str(usage["requests_total"]),
        f"{usage['dynamodb']['read_units']:g}",
        f"{usage['dynamodb']['write_units']:g}",
        str(usage["lambda"]["invocations"]),
        f"{usage['lambda']['gb_seconds']:.6f}",
        str(usage["webhooks"]["deliveries"]),
        str(usage["webhooks"]["attempts"]),
        *(f"{component(usage, name):.8f}" for name in COMPONENTS),
        f"{cost['total']:.8f}",
    ]


def write_table(
    usages: Sequence[UsageResponse], day: str, out: TextIO, offboarded: Collection[str] = frozenset()
) -> None:
    """Every tenant's usage of ``day``, costliest first, with a total line; the
    ``offboarded`` tenants marked so."""
    ordered = costliest_first(usages)
    rows = [list(COLUMNS), *(_row(usage, offboarded) for usage in ordered)]
    total = [
        "total",
        str(sum(u["requests_total"] for u in ordered)),
        f"{sum(u['dynamodb']['read_units'] for u in ordered):g}",
        f"{sum(u['dynamodb']['write_units'] for u in ordered):g}",
        str(sum(u["lambda"]["invocations"] for u in ordered)),
        f"{sum(u['lambda']['gb_seconds'] for u in ordered):.6f}",
        str(sum(u["webhooks"]["deliveries"] for u in ordered)),
        str(sum(u["webhooks"]["attempts"] for u in ordered)),
        *(f"{sum(component(u, name) for u in ordered):.8f}" for name in COMPONENTS),
        f"{sum(u['cost_usd']['total'] for u in ordered):.8f}",
    ]
    rows.append(total)
    widths = [max(len(row[index]) for row in rows) for index in range(len(COLUMNS))]
    final = all(usage["final"] for usage in ordered)
    out.write(f"usage of {day} (UTC){'' if final else ', not final yet'}: {len(ordered)} tenants\n")
    for number, row in enumerate(rows):
        cells = [row[0].ljust(widths[0]), *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))]
        out.write("  ".join(cells).rstrip() + "\n")
        if number == 0 or number == len(rows) - 2:
            out.write("  ".join("-" * width for width in widths) + "\n")


def draw_chart(usages: Sequence[UsageResponse], day: str, path: Path) -> None:
    """Each tenant's cost by component, stacked, costliest first (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ordered = costliest_first(usages)
    tenants = [usage["tenant_id"] for usage in ordered]
    figure, axes = plt.subplots(figsize=(max(6.0, 0.6 * len(tenants) + 2), 4.5))
    bottom = [0.0] * len(ordered)
    for name, colour in zip(COMPONENTS, COLOURS, strict=True):
        values = [component(usage, name) for usage in ordered]
        axes.bar(tenants, values, bottom=bottom, label=name.replace("_", " "), color=colour)
        bottom = [below + value for below, value in zip(bottom, values, strict=True)]
    axes.set_title(f"Cost by component per tenant, {day} (UTC, list prices)")
    axes.set_ylabel("USD")
    # Beside the plot, not in it: inside, it covered the top of the costliest bars.
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axes.tick_params(axis="x", labelrotation=45)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


# ---------------------------------------------------------------- cells
@dataclass(frozen=True)
class CellLedger:
    """One cell's pool table (its tenants' records and usage ledgers) and API keys."""

    cell_id: str
    client: DynamoDBClient
    table_name: str
    keys: ApiKeys


def cell_ledgers(args: argparse.Namespace) -> tuple[list[CellLedger], Directory] | None:
    """Every cell ``args`` target, with the directory: the local set's cells (its state
    file's), or those the deployed control plane's directory names; ``None`` for one stack."""
    plane = control_plane(args)
    if plane is None:
        return None
    directory = plane[0]
    if args.local:
        state = _set_state(args)
        targets = {cell: cell_target(state, cell) for cell in sorted(state["cells"])}
    else:
        targets = {cell.cell_id: cell_stack_target(cell) for cell in directory.cells()}
    ledgers = []
    for cell_id, target in targets.items():
        client, table_name = dynamodb_target(target)
        ledgers.append(CellLedger(cell_id, client, table_name, api_keys_target(target)))
    return ledgers, directory


def counted_items(
    by_cell: Mapping[str, Iterable[Mapping[str, Any]]], running_moves: Callable[[], Collection[int]]
) -> list[Mapping[str, Any]]:
    """The counter items of a tenant's day in every cell, each counted once. A move
    between cells copies the old cell's own items (``<day>#<slot>``) into the new one's
    ledger under ``<day>#<slot>#<old cell>#<the move's start>``, and an item that names
    a cell already under its own key (:func:`~support_tickets.core.keys.moved_usage_sk`);
    the old cell's are erased only at the move's end. Until then a copy of a move still
    running (its start among ``running_moves()``, read only when needed) whose original
    is still in its cell is left out (the original is the newer), and an item under the
    same cell-naming key in two cells counted once. Every other item is another counter:
    the new cell's own, a finished move's copies, a rolled-back move's own counters."""
    own = {(cell, str(item["sk"]["S"])) for cell, items in by_cell.items() for item in items}
    starts: Collection[int] | None = None
    carried: set[str] = set()
    counted: list[Mapping[str, Any]] = []
    for cell, items in by_cell.items():
        for item in items:
            sort_key = str(item["sk"]["S"])
            day, _, rest = sort_key.partition("#")
            slot, _, named = rest.partition("#")
            if named:
                if sort_key in carried:
                    continue
                carried.add(sort_key)
                from_cell, _, started = named.partition("#")
                if from_cell != cell and (from_cell, f"{day}#{slot}") in own:
                    starts = running_moves() if starts is None else starts
                    if started.isdigit() and int(started) in starts:
                        continue
            counted.append(item)
    return counted


def merged_usage(
    ledgers: Sequence[CellLedger], home: CellLedger, tenant_id: str, day: str, now: datetime
) -> UsageResponse:
    """The tenant's usage object of ``day`` over every cell's ledger (:func:`counted_items`),
    priced with the record of ``home``, its cell."""
    by_cell = {ledger.cell_id: day_items(ledger.client, ledger.table_name, tenant_id, day) for ledger in ledgers}

    def running_moves() -> set[int]:
        records = [read_tenant_config(TenantTable(tenant_id, c.table_name, OwnClient(c.client))) for c in ledgers]
        return {record.move_started_at for record in records if record.move_started_at is not None}

    sums: Counters = add_counters({}, counted_items(by_cell, running_moves))
    placed = _placed(home.client, home.table_name, tenant_id)
    return usage_object(tenant_id, day, sums, now, own_table_windows(placed))


def _home(
    ledgers: Sequence[CellLedger], directory: Directory, tenant_id: str, held: Callable[[CellLedger], bool]
) -> CellLedger:
    """The tenant's cell: the directory's placement, else the first cell that ``held`` it."""
    placed = directory.placement(tenant_id)
    by_id = {ledger.cell_id: ledger for ledger in ledgers}
    if placed is not None and placed.cell in by_id:
        return by_id[placed.cell]
    return next((ledger for ledger in ledgers if held(ledger)), ledgers[0])


def write_cells_table(
    ledgers: Sequence[CellLedger], directory: Directory, day: str, now: datetime, out: TextIO
) -> list[UsageResponse]:
    """Every tenant with an API key in any cell (a tombstone too), one row each (:func:`write_table`)."""
    keys_of = {ledger.cell_id: ledger.keys.directory() for ledger in ledgers}
    tenants = sorted({tenant for found in keys_of.values() for tenant in found})
    live = {tenant for found in keys_of.values() for tenant, left_at in found.items() if left_at is None}
    usages = []
    for tenant in tenants:
        keyed = [ledger for ledger in ledgers if tenant in keys_of[ledger.cell_id]]
        home = _home(keyed, directory, tenant, lambda ledger: keys_of[ledger.cell_id][tenant] is None)  # noqa: B023
        usage = merged_usage(ledgers, home, tenant, day, now)
        if tenant in live or has_usage(usage):
            usages.append(usage)
    write_table(usages, day, out, set(tenants) - live)
    return usages


def cells_tenant_usage(
    ledgers: Sequence[CellLedger], directory: Directory, tenant_id: str, day: str, now: datetime
) -> tuple[UsageResponse, int | None]:
    """The tenant's usage object over every cell, and when it was offboarded (``None``: it was not)."""

    def known(ledger: CellLedger) -> bool:
        record = read_tenant_config(TenantTable(tenant_id, ledger.table_name, OwnClient(ledger.client)))
        return record.stored or offboarded_at(ledger.client, ledger.table_name, tenant_id) is not None

    home = _home(ledgers, directory, tenant_id, known)
    left_at = offboarded_at(home.client, home.table_name, tenant_id)
    if left_at is None:
        existing_record(home.client, home.table_name, tenant_id)
    return merged_usage(ledgers, home, tenant_id, day, now), left_at


def _checked(args: argparse.Namespace, now: datetime) -> tuple[str, Path | None]:
    if args.tenant is not None:
        try:
            keys.validate_tenant_id(args.tenant)
        except ValueError as exc:
            raise UsageArgumentError(f"not a tenant id: {args.tenant!r}") from exc
    try:
        day = parse_day(args.day, now)
    except ApiError as exc:
        details = "; ".join(str(detail["message"]) for detail in exc.details or ())
        raise UsageArgumentError(f"not a day usage is kept for: {args.day!r} ({details})") from exc
    chart = Path(args.chart) if args.chart else None
    if chart is not None:
        if chart.suffix.lower() != ".png":
            raise UsageArgumentError(f"the chart is a PNG file: {args.chart!r}")
        if not chart.parent.is_dir():
            raise UsageArgumentError(f"no such directory for the chart: {str(chart.parent)!r}")
    return day, chart


def main(argv: list[str] | None = None, out: TextIO | None = None, now: datetime | None = None) -> int:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog="python -m ops.usage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenant", help="one tenant's usage object, as JSON")
    parser.add_argument("--day", help="a UTC day, YYYY-MM-DD (default: today)")
    parser.add_argument("--chart", help="also draw each tenant's cost by component into this PNG file")
    add_control_plane_argument(add_target_arguments(parser))
    args = parser.parse_args(argv)
    moment = now or datetime.now(UTC)
    try:
        day, chart = _checked(args, moment)
        cells = cell_ledgers(args)
        if args.tenant is not None:
            if cells is not None:
                usage, left_at = cells_tenant_usage(*cells, args.tenant, day, moment)
            else:
                client, table_name = dynamodb_target(args)
                left_at = offboarded_at(client, table_name, args.tenant)
                if left_at is None:
                    existing_record(client, table_name, args.tenant)
                usage = tenant_usage(client, table_name, args.tenant, day, moment)
            usages = [usage]
            shown: dict[str, Any] = dict(usage)
            if left_at is not None:
                shown["offboarded_at"] = datetime.fromtimestamp(left_at, UTC).isoformat(timespec="seconds")
            out.write(json.dumps(shown, indent=2) + "\n")
        elif cells is not None:
            usages = write_cells_table(*cells, day, moment, out)
        else:
            client, table_name = dynamodb_target(args)
            directory = api_keys_target(args).directory()
            offboarded = {tenant for tenant, left_at in directory.items() if left_at is not None}
            usages = [tenant_usage(client, table_name, tenant, day, moment) for tenant in directory]
            # An offboarded tenant (its key a tombstone) for the days it has usage only.
            usages = [usage for usage in usages if usage["tenant_id"] not in offboarded or has_usage(usage)]
            write_table(usages, day, out, offboarded)
        if chart is not None:
            draw_chart(usages, day, chart)
            sys.stderr.write(f"chart: {chart}\n")
    except (UsageArgumentError, NoSuchTenant, TargetError, ClientError, BotoCoreError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
