"""Moving a tenant between the pool and its own table (``python -m bench
--move-only``): how fast the mover copies, and how long the tenant's writes
pause, for tenants of 1,000 and 10,000 tickets.

Each tenant is filled as the operator fills the bench's table
(:func:`bench.fill.ticket_items`, BatchWriteItem) with a comment per ticket,
and the local stack's stream functions are waited for (its counts, two audit
items per change and its day index); then :class:`ops.move.Mover` moves it into
its own table (made by the local stack, ``POST /_local/dedicated``), with its
defaults (1,000 items a second at most, 8 workers) but two waits shortened,
since no client runs: the record cache's (35 s in production, 2 s here) and the
drain (60 s, 5 s here). Neither is in any figure.

Figures: the copy's throughput (items written over its seconds, the rate
limit's waits included), the write pause (from the SWITCHING write to the
ERASING write: 2 x ``SWITCH_WAIT_SECONDS``, the sync of every ticket's
partition and the recount), the whole move, and the machine's load average
before each. The emulator is one Python process answering every call (moto),
where DynamoDB answers the workers' calls in parallel: the copy and the sync
are read-bound, so AWS's figures scale with the workers, the emulator's do not.
"""

from __future__ import annotations

import io
import os
import time
from typing import Any

from bench.fill import BATCH, ticket_items
from bench.stackproc import StackProcess
from bench.warm import progress
from ops.dedicated import deploy_to_local
from ops.move import DEFAULT_RATE, DEFAULT_WORKERS, Mover
from ops.tenants import TenantAdmin
from support_tickets.core import keys
from support_tickets.core.ids import new_id
from support_tickets.data.placement import SWITCH_WAIT_SECONDS
from support_tickets.data.table import to_item

SIZES = (1_000, 10_000)
PHASE_SECONDS = 2.0
DRAIN_SECONDS = 5.0
FILL_DRAIN_TIMEOUT_S = 1800.0


def comment_item(summary: dict[str, Any]) -> dict[str, Any]:
    """A comment on the ticket ``summary`` is (DynamoDB JSON), as the API stores one."""
    created = "2026-11-21T10:05:00.000Z"
    comment_id = new_id()
    return {
        "pk": summary["pk"],
        **to_item(
            {
                "sk": keys.comment_sk(created, comment_id),
                "comment_id": comment_id,
                "author": "filler",
                "body": "Benchmark comment. " * 4,
                "created_at": created,
            }
        ),
    }


def fill_tenant(stack: StackProcess, tenant: str, tickets: int) -> int:
    """The tenant's tickets and a comment each, the stream functions caught up; items written."""
    dynamodb = stack.operator("dynamodb")
    table = str(stack.state["table_name"])
    summaries = ticket_items(tickets, [tenant], seed=tickets)
    items = [item for summary in summaries for item in (summary, comment_item(summary))]
    for start in range(0, len(items), BATCH):
        requests: dict[str, Any] = {table: [{"PutRequest": {"Item": item}} for item in items[start : start + BATCH]]}
        while requests:
            requests = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}
    stack.drain(timeout=FILL_DRAIN_TIMEOUT_S)
    return len(items)


def run_move(stack: StackProcess, *, sizes: tuple[int, ...] = SIZES, tenant_prefix: str) -> dict[str, Any]:
    """One move into its own table per size; the figures of each."""
    rows = []
    table = str(stack.state["table_name"])
    for tickets in sizes:
        tenant = f"{tenant_prefix}-{tickets}"
        admin = TenantAdmin(stack.operator("dynamodb"), table, phase_seconds=PHASE_SECONDS)
        admin.ensure(tenant)
        progress(f"move: filling {tenant} with {tickets:,} tickets and a comment each")
        written = fill_tenant(stack, tenant, tickets)
        log = io.StringIO()
        mover = Mover(
            admin,
            deploy=lambda tenant_id: deploy_to_local(stack.state, tenant_id)["TableName"],
            drain_seconds=DRAIN_SECONDS,
            stream=log,
        )
        load = os.getloadavg()[0]
        progress(f"move: {tenant} into its own table (load average {load:.1f})")
        started = time.monotonic()
        outcome = mover.move(tenant, "dedicated")
        seconds = time.monotonic() - started
        assert outcome.record.placement == "dedicated", log.getvalue()
        assert outcome.copy_seconds is not None
        assert outcome.pause_seconds is not None
        rows.append(
            {
                "tickets": tickets,
                "items_filled": written,
                "items_copied": outcome.copied,
                "copy_seconds": round(outcome.copy_seconds, 1),
                "copy_items_per_second": round(outcome.copied / outcome.copy_seconds),
                "synced_again": outcome.synced,
                "pause_seconds": round(outcome.pause_seconds, 1),
                "sync_seconds": round(outcome.pause_seconds - 2 * SWITCH_WAIT_SECONDS, 1),
                "trailing": outcome.trailing,
                "erased": outcome.erased,
                "strays": outcome.strays,
                "verified": outcome.verified,
                "move_seconds": round(seconds, 1),
                "load_average": round(load, 1),
                "load_average_after": round(os.getloadavg()[0], 1),
            }
        )
        progress(f"move: {rows[-1]}")
    return {
        "rows": rows,
        "rate": DEFAULT_RATE,
        "workers": DEFAULT_WORKERS,
        "phase_seconds": PHASE_SECONDS,
        "drain_seconds": DRAIN_SECONDS,
    }


def move_markdown(move: dict[str, Any]) -> list[str]:
    """The section of results.md."""
    lines = [
        "## Moving a tenant into its own table",
        "",
        f"`python -m bench --move-only`: a tenant of N tickets with a comment each (and the stream functions' "
        f"counts, audit items and day index) moved by `ops.move` into its own table in the local stack, at its "
        f"defaults ({move['rate']:,.0f} items/s at most, {move['workers']} workers), no client writing (the record "
        f"cache's wait {move['phase_seconds']:.0f} s instead of 35 s, the drain {move['drain_seconds']:.0f} s "
        "instead of 60 s: in no figure). The pause is the write pause clients see (SWITCHING to ERASING): 4 s of "
        "waits, then the sync and the recount. The sync reads again what the writers marked during the copy (the "
        "tickets and audit events written then: none here, as no client writes) and the partitions that are "
        "neither a ticket's nor a day's trail (the webhooks, their deliveries, the 64 idempotency partitions, the "
        "day index, the 16 mark partitions), so it does not grow with the tenant. The copy reads one partition "
        "per ticket, which DynamoDB serves to the workers in parallel and the emulator, in one Python process, "
        "one after another (docs/operations.md).",
        "",
        "| tickets | items copied | copy (s) | copy (items/s) | write pause (s) | of which sync (s) | whole move (s) "
        "| load average |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in move["rows"]:
        lines.append(
            f"| {row['tickets']:,} | {row['items_copied']:,} | {row['copy_seconds']} | "
            f"{row['copy_items_per_second']:,} | {row['pause_seconds']} | {row['sync_seconds']} | "
            f"{row['move_seconds']} | {row['load_average']} |"
        )
    checked = [row for row in move["rows"] if "verified" in row]
    if checked:
        lines += [
            "",
            (
                "What the mover's final check found after each move (the erase also takes the counts and the "
                "aggregator's journals, which the mover recounts in the new table instead of copying them):"
            ),
            "",
        ]
        lines += [
            f"- {row['tickets']:,} tickets: {row['trailing']:,} items copied by the trailing copy after the switch, "
            f"{row['erased']:,} erased from the pool ({row['strays']:,} of them found only by the final Scan); "
            f"{row['verified']}."
            for row in checked
        ]
    measured = {row["tickets"] for row in move["rows"]}
    missing = [f"{size:,}" for size in SIZES if size not in measured]
    if missing:
        lines += [
            "",
            f"Not measured in this run (`--move-tickets`): {', '.join(missing)} tickets. The copy and the "
            "erase each read one partition per ticket, so their times grow with the tickets from the rows above.",
        ]
    lines.append("")
    return lines
