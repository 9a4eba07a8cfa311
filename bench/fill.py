"""A table at a realistic size before the warm phase: ``tickets`` ticket
summaries over ``tenants`` tenants (other than the ones the routes use),
written with BatchWriteItem as the operator, in the items' stored shape.

The local stack's stream poller feeds them to the aggregator like any other
write; :func:`fill_table` waits until it has caught up, so that nothing of the
loading runs while requests are timed.
"""

from __future__ import annotations

import random
from typing import Any

from bench.stackproc import StackProcess
from bench.warm import progress
from support_tickets.core import keys
from support_tickets.core.ids import new_id
from support_tickets.core.models import TicketItem
from support_tickets.data.table import to_item

BATCH = 25  # BatchWriteItem's maximum
STATUSES = list(keys.TicketStatus)


def ticket_items(tickets: int, tenants: list[str], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items = []
    for number in range(tickets):
        tenant, ticket_id = tenants[number % len(tenants)], new_id()
        status = rng.choice(STATUSES)
        items.append(
            to_item(
                TicketItem(
                    pk=keys.ticket_pk(tenant, ticket_id),
                    sk=keys.SUMMARY_SK,
                    tenant_status=keys.tenant_status(tenant, status),
                    resolver=rng.choice(["johnd", "maryk", keys.UNASSIGNED_RESOLVER]),
                    ticket_id=ticket_id,
                    title=f"Filler ticket {number}",
                    description="Benchmark filler. " * 8,
                    created_by="filler",
                    created_at="2026-11-21T10:00:00.000Z",
                    updated_at="2026-11-21T10:00:00.000Z",
                    version=1,
                ).stored()
            )
        )
    return items


def fill_table(stack: StackProcess, *, tickets: int, tenants: int, tenant_prefix: str) -> dict[str, Any]:
    """Write the tickets, wait for the stream; what the table then holds."""
    dynamodb = stack.operator("dynamodb")
    table = str(stack.state["table_name"])
    items = ticket_items(tickets, [f"{tenant_prefix}-{number}" for number in range(tenants)], seed=tickets)
    for start in range(0, len(items), BATCH):
        requests: dict[str, Any] = {table: [{"PutRequest": {"Item": item}} for item in items[start : start + BATCH]]}
        while requests:
            requests = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}
        if (start // BATCH) % 80 == 0:
            progress(f"  filling the table: {start + BATCH:,}/{len(items):,} tickets")
    progress("  filling the table: waiting for the stream poller to catch up")
    stack.drain(timeout=600)
    count = dynamodb.describe_table(TableName=table)["Table"].get("ItemCount", 0)
    return {"tickets": tickets, "tenants": tenants, "items_in_table": int(count)}
