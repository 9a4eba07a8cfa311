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
import time
from typing import Any

from support_tickets.core import keys
from tests.e2e.conftest import (
    BACKGROUND_PK_MARKS,
    TENANT_CONFIG_TTL_SECONDS,
    RunningStack,
    new_tenant_id,
    run_main,
)
from tests.e2e.test_isolation import assert_denied, client_with, exchange
from tests.e2e.test_webhook_delivery import receiver


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


def place_in_own_table(stack: RunningStack, tenant: str, table: str) -> None:
    """The tenant's record names its own table (what a finished move leaves), written
    by hand as an operator would: placed from now on, so that every record its table's
    stream holds from here is its change."""
    stack.operator("dynamodb").update_item(
        TableName=stack.state["table_name"],
        Key=keys.tenant_config_key(tenant),
        UpdateExpression=(
            "SET placement = :dedicated, #table = :table, placed_at = :now, "
            "version = if_not_exists(version, :zero) + :one"
        ),
        ExpressionAttributeNames={"#table": "table"},
        ExpressionAttributeValues={
            ":dedicated": {"S": "dedicated"},
            ":table": {"S": table},
            ":now": {"N": str(int(time.time()))},
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
        },
    )
    time.sleep(TENANT_CONFIG_TTL_SECONDS)  # every container's copy of the record expired


def partition(stack: RunningStack, table: str, pk: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = stack.operator("dynamodb").query(
        TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": pk}}
    )["Items"]
    return items


def test_a_dedicated_tenant_works_from_its_own_table_and_nobody_elses_data_moves(stack: RunningStack) -> None:
    """Through the API, the stream functions and the delivery function of the running
    stack: tickets, a comment, counts, the audit trail and a signed webhook delivery of
    a dedicated tenant, all in its own table; its neighbour (whose id extends its own)
    stays in the pool, and nothing else of the pool (tenants 1's and 10's data
    included) changes."""
    tenant = new_tenant_id()
    neighbour = tenant + "0"
    pool = str(stack.state["table_name"])
    own = deploy(stack, tenant)["TableName"]
    user, admin = stack.token(tenant, f"u-{tenant}"), stack.token(tenant, f"root-{tenant}", admin=True)
    theirs = stack.token(neighbour, f"u-{neighbour}")
    place_in_own_table(stack, tenant, own)
    stack.drain()
    untouched = stack.table_fingerprint(skip_pk_containing=(tenant, *BACKGROUND_PK_MARKS))
    with receiver() as hook_receiver:
        hook = stack.request(
            "POST", "/webhooks", token=admin, body={"url": hook_receiver.url, "events": ["ticket.updated"]}
        )
        assert hook.status == 201, hook.body
        # When the dedicated tenant works through the API
        first = stack.request("POST", "/tickets", token=user, body={"title": "in its own table"}).body["ticket_id"]
        second = stack.request("POST", "/tickets", token=user, body={"title": "and another"}).body["ticket_id"]
        assert stack.request("POST", f"/tickets/{first}/comments", token=user, body={"body": "hi"}).status == 201
        assert stack.request("PATCH", f"/tickets/{second}", token=user, body={"status": "CLOSED"}).status == 200
        neighbours = stack.request("POST", "/tickets", token=theirs, body={"title": "pooled"}).body["ticket_id"]
        listed = stack.request("GET", "/tickets?status=OPEN", token=user).body["items"]
        assert [item["ticket_id"] for item in listed] == [first]
        # Then the stream functions count and audit it, and its webhook gets the update, from its own table
        assert stack.drain()["drained"]
        assert stack.drain_queues()["drained"]
        counts = stack.request("GET", "/aggregates", token=admin).body["counts"]
        assert (counts["OPEN"], counts["CLOSED"]) == (1, 1)
        trail = stack.request("GET", "/audit", token=admin).body["events"]
        assert sorted(event["type"] for event in trail) == ["comment_added", "created", "created", "updated"]
        (received,) = hook_receiver.received
        assert (received.event["type"], received.event["data"]["ticket_id"]) == ("ticket.updated", second)
        deliveries = stack.request("GET", f"/webhooks/{hook.body['webhook_id']}/deliveries", token=admin).body
        assert [item["status"] for item in deliveries["items"]] == ["DELIVERED"]
    # All of it in its own table and none of it in the pool (its record and usage stay there)
    prefix = keys.tenant_prefix(tenant)
    for pk in (
        keys.ticket_pk(tenant, first),
        keys.history_pk(tenant, second),
        keys.aggregate_pk(tenant),
        keys.webhooks_pk(tenant),
        keys.webhook_deliveries_pk(tenant, hook.body["webhook_id"]),
    ):
        assert partition(stack, own, pk), pk
        assert partition(stack, pool, pk) == [], pk
    assert partition(stack, pool, keys.tenant_config_key(tenant)["pk"]["S"])
    # the neighbour's ticket in the pool, nothing of it in the tenant's table
    assert partition(stack, pool, keys.ticket_pk(neighbour, neighbours))
    assert partition(stack, own, keys.ticket_pk(neighbour, neighbours)) == []
    scanned = stack.operator("dynamodb").scan(TableName=own)["Items"]
    assert {item["pk"]["S"].startswith(prefix) for item in scanned} == {True}
    # and nothing else of the pool changed: every other tenant's items (1's and 10's among them) as they were
    assert stack.table_fingerprint(skip_pk_containing=(tenant, *BACKGROUND_PK_MARKS)) == untouched
