"""Defence in depth inside the perimeter, against the running local stack:
TenantAccessRole credentials (a user's own token, exchanged at the local
identity pool) can't write the counts or set the offboarding mark, whatever
the request's shape, and the table is unchanged item for item; the same
user's API calls (every write the API makes with those credentials) still
work, and the operator can still set the mark."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from support_tickets.core import keys
from tests.e2e.conftest import RunningStack, new_tenant_id
from tests.e2e.test_isolation import assert_denied, table_state, tenant_client

ERASING = keys.ERASING_ATTRIBUTE


def explicitly_denied(call: Callable[[], Any]) -> None:
    error = assert_denied(call)
    assert "with an explicit deny" in error.response["Error"]["Message"]


@pytest.mark.parametrize("suffix", ["", "0"], ids=["t", "t0"])  # tenants 1 and 10 of a random base, each as the writer
def test_tenant_credentials_cannot_write_the_counts_nor_set_the_erasing_mark(stack: RunningStack, suffix: str) -> None:
    # Given a tenant with a ticket, counted by the aggregator, and its neighbour
    base = new_tenant_id()
    tenant, neighbour = base + suffix, base + ("0" if not suffix else "")
    token = stack.token(tenant, f"u-{tenant}")
    ticket = stack.request("POST", "/tickets", token=token, body={"title": "mine"}).body
    stack.request("POST", "/tickets", token=stack.token(neighbour, f"u-{neighbour}"), body={"title": "theirs"})
    before = table_state(stack)
    table = stack.state["table_name"]
    client = tenant_client(stack, tenant)
    count_key = {"pk": {"S": keys.aggregate_pk(tenant)}, "sk": {"S": keys.aggregate_sk("OPEN", 0)}}
    journal_key = {"pk": {"S": keys.aggregate_journal_partitions(tenant)[0]}, "sk": {"S": "x"}}
    ticket_key = keys.ticket_key(tenant, ticket["ticket_id"])
    stored = client.get_item(TableName=table, Key=ticket_key, ConsistentRead=True)["Item"]
    add = {
        "TableName": table,
        "Key": count_key,
        "UpdateExpression": "ADD #c :n",
        "ExpressionAttributeNames": {"#c": "count"},
        "ExpressionAttributeValues": {":n": {"N": "1000000"}},
    }
    mark = {
        "TableName": table,
        "Key": ticket_key,
        "UpdateExpression": "SET #e = :t",
        "ExpressionAttributeNames": {"#e": ERASING},
        "ExpressionAttributeValues": {":t": {"BOOL": True}},
    }
    marked = {**stored, ERASING: {"BOOL": True}}
    # When it writes with its credentials directly, in every shape a write can take
    attempts: list[Callable[[], Any]] = [
        lambda: client.update_item(**add),
        lambda: client.update_item(**add, ReturnValues="ALL_NEW"),
        lambda: client.put_item(TableName=table, Item={**count_key, "count": {"N": "1000000"}}),
        lambda: client.delete_item(TableName=table, Key=count_key),
        lambda: client.put_item(TableName=table, Item={**journal_key, "applied": {"N": "1"}}),
        lambda: client.transact_write_items(TransactItems=[{"Update": add}]),
        lambda: client.batch_write_item(RequestItems={table: [{"DeleteRequest": {"Key": count_key}}]}),
        lambda: client.update_item(**mark),
        lambda: client.update_item(**mark, ReturnValues="ALL_OLD"),
        lambda: client.update_item(
            TableName=table, Key=ticket_key, AttributeUpdates={ERASING: {"Value": {"BOOL": True}, "Action": "PUT"}}
        ),
        lambda: client.put_item(TableName=table, Item=marked),
        lambda: client.transact_write_items(TransactItems=[{"Update": mark}]),
        lambda: client.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": marked}}]),
        lambda: client.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": marked}}]}),
    ]
    # Then every one is refused by an explicit deny, and nothing changed
    for attempt in attempts:
        explicitly_denied(attempt)
    assert table_state(stack) == before

    # And its API calls still work: update, comment, batch status, list, counts, delete
    admin = stack.token(tenant, f"root-{tenant}", admin=True)
    ticket_id = ticket["ticket_id"]
    headers = {"If-Match": str(ticket["version"])}
    updated = stack.request("PATCH", f"/tickets/{ticket_id}", token=token, body={"title": "t2"}, headers=headers)
    assert updated.status == 200, updated.body
    assert stack.request("POST", f"/tickets/{ticket_id}/comments", token=token, body={"body": "c"}).status == 201
    batch = {"ticket_ids": [ticket_id], "status": "IN_PROGRESS"}
    assert stack.request("POST", "/tickets/status", token=token, body=batch).status == 200
    listed = stack.request("GET", "/tickets?status=IN_PROGRESS", token=token).body["items"]
    assert [item["ticket_id"] for item in listed] == [ticket_id]
    assert stack.drain()["drained"]
    assert stack.request("GET", "/aggregates", token=admin).status == 200
    assert stack.request("DELETE", f"/tickets/{ticket_id}", token=admin).status == 204
    # And the operator (offboarding) still sets the mark
    operator = stack.operator("dynamodb")
    other = stack.request("POST", "/tickets", token=token, body={"title": "to erase"}).body
    operator.update_item(**{**mark, "Key": keys.ticket_key(tenant, other["ticket_id"])})
    after = operator.get_item(TableName=table, Key=keys.ticket_key(tenant, other["ticket_id"]), ConsistentRead=True)
    assert after["Item"][ERASING] == {"BOOL": True}
