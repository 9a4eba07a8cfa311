"""The metering function's role on the local stack (the guard evaluates the
template's policy and verifies signatures): the ledger's real transactions
pass with it, a redelivery is recognised through it, and nothing but usage
items is reachable with it."""

from __future__ import annotations

import base64
import gzip
import json
from decimal import Decimal

from stack_model.roles import function_role
from support_tickets.core import keys
from support_tickets.data.table import to_item
from support_tickets.data.tenant_registry import TenantConfig, TenantStatus
from support_tickets.usage.counters import read_day
from support_tickets.usage.metering import UsageLedger, read_delivery
from tests.e2e.conftest import RunningStack, new_tenant_id
from tests.e2e.test_isolation import assert_denied, client_with, role_credentials

DAY_MS = 1_795_564_800_000 + 3_600_000  # 2026-11-25T01:00:00Z


def delivery(tenants: list[str]) -> dict[str, object]:
    events = [
        {
            "id": f"{n:056d}",
            "timestamp": DAY_MS + n,
            "message": json.dumps(
                {
                    "message": "request handled",
                    "tenant_id": tenant,
                    "usage": {
                        "route": "GET /tickets",
                        "request_id": f"r{n}",
                        "read_units": 1.5,
                        "write_units": 0.0,
                        "dynamodb_calls": 2,
                        "duration_ms": 10.5,
                        "memory_mb": 512,
                    },
                }
            ),
        }
        for n, tenant in enumerate(tenants)
    ]
    body = {"messageType": "DATA_MESSAGE", "logGroup": "/g", "logStream": "s", "logEvents": events}
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(body).encode())).decode()}}


def test_the_metering_role_writes_usage_exactly_once_and_reaches_nothing_else(stack: RunningStack) -> None:
    client = client_with(stack, "dynamodb", role_credentials(stack, function_role("MeteringFunction")))
    table = stack.state["table_name"]
    one, ten = new_tenant_id(), new_tenant_id()
    event = read_delivery(delivery([one, ten, ten]))
    ledger = UsageLedger(table_name=table, client=client)
    first = ledger.apply(event)
    assert (first.applied, first.redelivered, first.failed) == (2, 0, 0)
    again = ledger.apply(event)  # the journal's condition fails, through the guard too
    assert (again.applied, again.redelivered, again.failed) == (0, 2, 0)
    operator = stack.operator("dynamodb")
    assert read_day(operator, table, one, "2026-11-25")["requests"] == 1
    assert read_day(operator, table, ten, "2026-11-25")["read_units"] == Decimal("3.0")
    # Nothing but put and update of usage items.
    usage = {"pk": {"S": keys.usage_pk(one)}, "sk": {"S": "2026-11-25#0"}}
    ticket = {"pk": {"S": keys.ticket_pk(one, "A")}, "sk": {"S": keys.SUMMARY_SK}}
    assert_denied(lambda: client.get_item(TableName=table, Key=usage))
    assert_denied(lambda: client.delete_item(TableName=table, Key=usage))
    assert_denied(lambda: client.get_item(TableName=table, Key=ticket))
    # its condition check on the tenant record reads nothing of it
    assert_denied(lambda: client.get_item(TableName=table, Key=keys.tenant_config_key(one)))
    assert_denied(lambda: client.put_item(TableName=table, Item=ticket))
    assert_denied(lambda: client.put_item(TableName=table, Item={**usage, "pk": {"S": keys.aggregate_pk(one)}}))
    assert_denied(
        lambda: client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": keys.usage_pk(one)}},
        )
    )


def test_a_group_of_a_tenant_being_offboarded_is_skipped_through_the_guard(stack: RunningStack) -> None:
    client = client_with(stack, "dynamodb", role_credentials(stack, function_role("MeteringFunction")))
    table = stack.state["table_name"]
    gone, active = new_tenant_id(), new_tenant_id()
    # Given a tenant whose record an offboarding marked
    marked = TenantConfig(tenant_id=gone, status=TenantStatus.SUSPENDED, offboarding_since=1, erasable_at=2)
    operator = stack.operator("dynamodb")
    operator.put_item(TableName=table, Item=to_item(marked.item()))
    # and an active one with a stored record (its mark stored as NULL)
    operator.put_item(TableName=table, Item=to_item(TenantConfig(tenant_id=active, api_key="k").item()))
    # When a delivery of it and an active tenant arrives
    result = UsageLedger(table_name=table, client=client).apply(read_delivery(delivery([gone, active])))
    # Then the marked tenant's group is cancelled on the check (through the guard), the other written
    assert (result.applied, result.failed, [group.tenant_id for group in result.offboarded]) == (1, 0, [gone])
    assert read_day(operator, table, gone, "2026-11-25") == {}
    assert read_day(operator, table, active, "2026-11-25")["requests"] == 1
