"""Against the local stack: each request's ``"request handled"`` line carries
realistic DynamoDB units (the emulator answers ``ConsumedCapacity`` with the
capacity model's units, not moto's constants), under its own tenant only."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from stack_model.capacity import TableShape, item_size
from support_tickets.core import keys
from tests.e2e.conftest import Caller, RunningStack, server_log

DESCRIPTION_BYTES = 9000  # a ticket of about 9.1 KB: 10 write units, 3 x 4 KB to read


def usage_lines(stack: RunningStack, tenant_id: str) -> list[dict[str, Any]]:
    found = []
    for text in server_log(stack).splitlines():
        if '"request handled"' not in text or tenant_id not in text:
            continue
        try:
            line = json.loads(text[text.index("{") :])
        except ValueError:
            continue
        if line.get("message") == "request handled" and line.get("tenant_id") == tenant_id:
            found.append(line)
    return found


def wait_for_lines(stack: RunningStack, tenant_id: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while (lines := usage_lines(stack, tenant_id)) and len(lines) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return lines


def test_units_are_the_models_for_a_known_item(stack: RunningStack, tenant_pair: tuple[Caller, Caller]) -> None:
    caller, other = tenant_pair
    # Given a ticket of about 9 KB, created and then read by its summary
    created = stack.request(
        "POST", "/tickets", token=caller.token, body={"title": "big", "description": "d" * DESCRIPTION_BYTES}
    )
    assert created.status == 201, created.body
    ticket_id = created.body["ticket_id"]
    summary = stack.request("GET", f"/tickets/{ticket_id}/summary", token=caller.token)
    assert summary.status == 200
    # The item as stored, sized by the model
    table = str(stack.state["table_name"])
    stored = stack.operator("dynamodb").get_item(TableName=table, Key=keys.ticket_key(caller.tenant_id, ticket_id))
    size = item_size(stored["Item"])
    index_entry = TableShape.from_template(table).index_entry("GSI1", stored["Item"])
    # Then the lines say what DynamoDB would bill, not moto's constant 1.0 / 0.5
    lines = wait_for_lines(stack, caller.tenant_id, 2)
    by_route = {line["usage"]["route"]: line["usage"] for line in lines}
    create_usage, summary_usage = by_route["POST /tickets"], by_route["GET /tickets/{ticket_id}/summary"]
    item_writes = math.ceil(size / 1024) + (math.ceil(item_size(index_entry) / 1024) if index_entry else 0)
    # Each route's own call, plus one strongly consistent read of the (small)
    # tenant record when the function's cache of it had expired: 1 unit.
    tenant_record_reads = {name: usage["dynamodb_calls"] - 1 for name, usage in by_route.items()}
    assert (create_usage["write_units"], create_usage["read_units"]) == (
        item_writes,  # the item's 10 KB plus its GSI1 entry's 1
        tenant_record_reads["POST /tickets"] * 1.0,
    )
    assert item_writes >= 10
    item_reads = math.ceil(size / 4096)  # a strongly consistent GetItem: 3 x 4 KB
    assert (summary_usage["read_units"], summary_usage["write_units"]) == (
        item_reads + tenant_record_reads["GET /tickets/{ticket_id}/summary"] * 1.0,
        0.0,
    )
    # and the other tenant's lines (none here) never carry this tenant's requests
    assert all(line["tenant_id"] == other.tenant_id for line in usage_lines(stack, other.tenant_id))
    assert not [line for line in usage_lines(stack, other.tenant_id) if line["usage"]["route"] == "POST /tickets"]
