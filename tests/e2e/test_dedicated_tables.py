"""A dedicated tenant's table in the running local stack, deployed as an
operator does it (``python -m ops.dedicated --local``): made from the
dedicated template (tagged, encrypted under a key of its own, PITR, deletion
protection), reached with the tenant's own credentials from the local
identity pool through the stack's endpoint and by nobody else's, and its
stream polled for the pool's stream functions with the pool's filters.
Tenants ``<n>`` and ``<n>0`` (one's id a prefix of the other's, as ``1`` and
``10``): fresh ones, so that the session's other tests' tenants ``1`` and ``10``
are not touched by what the stream functions write."""

from __future__ import annotations

import json
import secrets
from typing import Any

from support_tickets.core import keys
from tests.e2e.conftest import RunningStack, run_main
from tests.e2e.test_isolation import assert_denied, client_with, exchange


def deploy(stack: RunningStack, tenant: str) -> dict[str, str]:
    result = run_main(
        "ops.dedicated", "--tenant", tenant, "--local", "--local-state", str(stack.state_dir / "stack.json")
    )
    assert result.returncode == 0, result.stderr
    outputs: dict[str, str] = json.loads(result.stdout)
    return outputs


def summary(tenant: str, title: str) -> dict[str, Any]:
    return {
        **keys.ticket_key(tenant, "T1"),
        "ticket_id": {"S": "T1"},
        "title": {"S": title},
        "tenant_status": {"S": keys.tenant_status(tenant, keys.TicketStatus.OPEN)},
        "resolver": {"S": keys.UNASSIGNED_RESOLVER},
    }


def test_a_dedicated_tenants_table_in_the_local_stack(stack: RunningStack) -> None:
    tenant = str(secrets.randbelow(10**6) + 10**6)
    other = tenant + "0"
    tables = {t: deploy(stack, t) for t in (tenant, other)}
    # Deployed again: the same table, nothing made twice.
    assert deploy(stack, tenant) == tables[tenant]

    # What the template declares, as the emulator made it.
    operator = stack.operator("dynamodb")
    name = tables[tenant]["TableName"]
    assert name == f"{stack.state['table_name']}-dedicated-{tenant}"
    described = operator.describe_table(TableName=name)["Table"]
    assert described["SSEDescription"]["KMSMasterKeyArn"] == tables[tenant]["KeyArn"]
    assert described["DeletionProtectionEnabled"] is True
    assert described["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    tags = operator.list_tags_of_resource(ResourceArn=tables[tenant]["TableArn"])["Tags"]
    assert tags == [{"Key": "TenantId", "Value": tenant}]
    backups = operator.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
    assert backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"

    # The tenant's own credentials, as the authorizer obtains them, through the stack's endpoint.
    own = client_with(stack, "dynamodb", exchange(stack, stack.token(tenant, f"u-{tenant}")), in_vpc=True)
    neighbour = client_with(stack, "dynamodb", exchange(stack, stack.token(other, f"u-{other}")), in_vpc=True)
    before = stack.drain()
    own.put_item(TableName=name, Item=summary(tenant, "in its own table"))
    assert own.get_item(TableName=name, Key=keys.ticket_key(tenant, "T1"))["Item"]["title"]["S"] == "in its own table"
    # The neighbour's credentials (its id extends the tenant's) reach nothing of it, whatever the keys...
    assert_denied(lambda: neighbour.get_item(TableName=name, Key=keys.ticket_key(tenant, "T1")))
    assert_denied(lambda: neighbour.put_item(TableName=name, Item=summary(other, "planted")))
    # ...and the tenant nothing of the neighbour's table, nor another prefix in its own.
    assert_denied(lambda: own.get_item(TableName=tables[other]["TableName"], Key=keys.ticket_key(other, "T1")))
    assert_denied(lambda: own.put_item(TableName=name, Item=summary(other, "planted")))
    assert "Item" not in operator.get_item(TableName=name, Key=keys.ticket_key(other, "T1"))

    # Its stream feeds the pool's stream functions with the pool's filters: the summary's
    # insert reaches the aggregator and the audit writer (2 deliveries); a record no filter
    # admits (an item that is no ticket summary, comment or marked delivery) reaches neither.
    operator.put_item(TableName=name, Item={"pk": {"S": keys.tenant_prefix(tenant) + "NOTE"}, "sk": {"S": "x"}})
    drained = stack.drain()
    assert drained["drained"]
    assert drained["delivered"] - before["delivered"] == 2
    assert drained["given_up"] == before["given_up"]
