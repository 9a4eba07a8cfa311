"""The delivery side's items against the running local stack: TenantAccessRole
credentials (a user's own token, exchanged at the local identity pool, used
through the stack's gateway endpoint as the API functions use them) read their
tenant's delivery records and delivery rate counters but can't write them, in
any shape a write takes, nor the neighbour's (tenants ``x`` and ``x0``); the
table is unchanged item for item. The one write they may make of a record, the
redelivery mark, is what ``POST …/redeliver`` does, and that route, like the
deliveries list, still works."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from support_tickets.core import keys
from tests.e2e.conftest import RunningStack, new_tenant_id
from tests.e2e.test_isolation import assert_denied, table_state, tenant_client
from tests.e2e.test_webhook_delivery import receiver, register, wait_for

MARK = "redeliver_requested_at"


def explicitly_denied(call: Callable[[], Any]) -> None:
    error = assert_denied(call)
    assert "with an explicit deny" in error.response["Error"]["Message"]


def own_items(client: Any, table: str, pk: str) -> list[dict[str, Any]]:
    """A partition's items (tenant credentials may read their own)."""
    query = {"TableName": table, "KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": {"S": pk}}}
    return list(client.query(**query, ConsistentRead=True)["Items"])


def forged_writes(client: Any, table: str, key: dict[str, Any], item: dict[str, Any]) -> list[Callable[[], Any]]:
    """Every shape of write tenant credentials could try on ``key`` (a stored ``item``)."""
    status = {
        "TableName": table,
        "Key": key,
        "UpdateExpression": "SET #s = :v, #c = :zero",
        "ExpressionAttributeNames": {"#s": "status", "#c": "count"},
        "ExpressionAttributeValues": {":v": {"S": "DELIVERED"}, ":zero": {"N": "0"}},
    }
    return [
        lambda: client.update_item(**status),
        lambda: client.update_item(**status, ReturnValues="ALL_NEW"),
        lambda: client.update_item(
            TableName=table, Key=key, AttributeUpdates={"status": {"Value": {"S": "DELIVERED"}, "Action": "PUT"}}
        ),
        lambda: client.put_item(TableName=table, Item={**item, "status": {"S": "DELIVERED"}}),
        lambda: client.delete_item(TableName=table, Key=key),
        lambda: client.transact_write_items(TransactItems=[{"Update": status}]),
        lambda: client.transact_write_items(TransactItems=[{"Delete": {"TableName": table, "Key": key}}]),
        lambda: client.batch_write_item(RequestItems={table: [{"DeleteRequest": {"Key": key}}]}),
        lambda: client.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": item}}]}),
    ]


def rate_counters(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-second counters of a tenant's rate partition (it holds its in-flight leases too)."""
    return [item for item in items if not item["sk"]["S"].startswith(keys.WEBHOOK_LEASE_SK_PREFIX)]


@pytest.mark.parametrize("suffix", ["", "0"], ids=["t", "t0"])  # tenants x and x0, each as the writer
def test_tenant_credentials_cannot_write_delivery_records_nor_delivery_rates(stack: RunningStack, suffix: str) -> None:
    # Given two tenants whose webhooks each got one delivery
    base = new_tenant_id()
    tenant, neighbour = base + suffix, base + ("0" if not suffix else "")
    table = stack.state["table_name"]
    with receiver() as mine, receiver() as theirs:
        hook = register(stack, tenant, mine.url)
        their_hook = register(stack, neighbour, theirs.url)
        for owner in (tenant, neighbour):
            stack.request("POST", "/tickets", token=stack.token(owner, f"u-{owner}"), body={"title": "t"})
        assert wait_for(lambda: len(mine.received) == 1 and len(theirs.received) == 1)
        assert stack.drain_queues()["drained"] is True
        client = tenant_client(stack, tenant)
        (record,) = own_items(client, table, keys.webhook_deliveries_pk(tenant, hook["webhook_id"]))
        (rate,) = rate_counters(own_items(client, table, keys.webhook_rate_pk(tenant)))
        assert (record["status"]["S"], rate["count"]["N"]) == ("DELIVERED", "1")
        operator = stack.operator("dynamodb")
        (their_record,) = own_items(operator, table, keys.webhook_deliveries_pk(neighbour, their_hook["webhook_id"]))
        (their_rate,) = rate_counters(own_items(operator, table, keys.webhook_rate_pk(neighbour)))
        record_key, rate_key, their_record_key, their_rate_key = (
            {"pk": item["pk"], "sk": item["sk"]} for item in (record, rate, their_record, their_rate)
        )
        watched = (record_key, rate_key, their_record_key, their_rate_key)

        def delivery_side() -> list[dict[str, Any] | None]:
            # The table's fingerprint leaves these out (they move with any retry): compared whole here.
            read = [operator.get_item(TableName=table, Key=key, ConsistentRead=True) for key in watched]
            return [found.get("Item") for found in read]

        before, items_before = table_state(stack), delivery_side()
        assert items_before[0] == record

        # When it writes them with its own credentials, in every shape a write can take,
        # its own (refused by the explicit Denies) and its neighbour's (not under its prefix)
        for key, item in ((record_key, record), (rate_key, rate)):
            for attempt in forged_writes(client, table, key, item):
                explicitly_denied(attempt)
        mark_on_rate = {"UpdateExpression": f"SET {MARK} = :m", "ExpressionAttributeValues": {":m": {"S": "x"}}}
        explicitly_denied(lambda: client.update_item(TableName=table, Key=rate_key, **mark_on_rate))
        for key, item in ((their_record_key, their_record), (their_rate_key, their_rate)):
            for attempt in forged_writes(client, table, key, item):
                assert_denied(attempt)
            marked = {"TableName": table, "Key": key, **mark_on_rate}
            assert_denied(lambda: client.update_item(**marked))  # noqa: B023 (called at once)

        # Then nothing changed, item for item
        assert table_state(stack) == before
        assert delivery_side() == items_before

        # And the routes still work: the list, and a redelivery (the mark, written with those credentials)
        admin = stack.token(tenant, f"root-{tenant}", admin=True)
        path = f"/webhooks/{hook['webhook_id']}/deliveries"
        (delivery,) = stack.request("GET", path, token=admin).body["items"]
        assert delivery["status"] == "DELIVERED"
        redeliver = stack.request("POST", f"{path}/{delivery['delivery_id']}/redeliver", token=admin)
        assert redeliver.status == 202, redeliver.body
        assert wait_for(lambda: len(mine.received) == 2)
        assert mine.received[1].headers["webhook-id"] == mine.received[0].headers["webhook-id"]
        assert wait_for(lambda: stack.request("GET", path, token=admin).body["items"][0]["attempts"] == 2)
        assert len(theirs.received) == 1
