"""TenantAccessRole and the webhook delivery side's items, as the guard judges
them with the template's policy: tenant credentials read a webhook's delivery
records and the tenant's delivery rate counters but never write them (a tenant
can neither fake its deliveries nor reset its tier's delivery bound), except
the redelivery mark, alone; every write the webhook routes make, recorded from
the repositories themselves, stays allowed. Tenants ``1`` and ``10``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from support_tickets.core import keys
from support_tickets.data.delivery_records import REDELIVER_MARK
from support_tickets.data.delivery_repository import DeliveryRepository
from support_tickets.data.table import TenantTable
from support_tickets.data.webhook_repository import WebhookItem, WebhookRepository
from tests.unit.test_guard_attributes import explicitly_denied, refusal

TABLE = "SupportTicket"
WEBHOOK = "01HWEBHOOK"
DELIVERY = "1795620804983-RyulRL2PwH3bG8805xec"
TENANTS = ["1", "10"]


def delivery_key(tenant: str) -> dict[str, Any]:
    return keys.delivery_key(tenant, WEBHOOK, DELIVERY)


def rate_key(tenant: str) -> dict[str, Any]:
    return {"pk": {"S": keys.webhook_rate_pk(tenant)}, "sk": {"S": "1795620804"}}


def update(key: dict[str, Any], expression: str, names: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"TableName": TABLE, "Key": key, "UpdateExpression": expression, **extra}
    if names:
        body["ExpressionAttributeNames"] = names
    values = {token.rstrip(",") for token in expression.split() if token.startswith(":")}
    condition = str(extra.get("ConditionExpression", ""))
    values |= {token.strip("(),") for token in condition.split() if token.startswith(":")}
    if values:
        body["ExpressionAttributeValues"] = {value: {"S": "x"} for value in values}
    return body


# ---------------------------------------------------------------- delivery records
def forged_delivery_writes(tenant: str) -> list[tuple[str, dict[str, Any]]]:
    """What tenant credentials could try on a delivery record, in every shape a write takes."""
    key = delivery_key(tenant)
    status = update(key, "SET #s = :v", {"#s": "status"})
    with_mark = update(key, f"SET #s = :v, {REDELIVER_MARK} = :m", {"#s": "status"})
    event = update(key, "SET #e = :v", {"#e": "event"})
    attempts = {**update(key, "ADD attempts :one"), "ExpressionAttributeValues": {":one": {"N": "-1"}}}
    # The mark alone, but with a condition that tests the status: the key names it too.
    conditional = update(key, f"SET {REDELIVER_MARK} = :m", {"#s": "status"}, ConditionExpression="#s = :p")
    item = {**key, "status": {"S": "DELIVERED"}, "event": {"S": "{}"}}
    return [
        ("UpdateItem", status),
        ("UpdateItem", with_mark),
        ("UpdateItem", event),
        ("UpdateItem", attempts),
        ("UpdateItem", conditional),
        ("UpdateItem", {**status, "ReturnValues": "ALL_NEW"}),
        (
            "UpdateItem",
            {"TableName": TABLE, "Key": key, "AttributeUpdates": {"status": {"Value": {"S": "x"}, "Action": "PUT"}}},
        ),
        ("PutItem", {"TableName": TABLE, "Item": item}),
        ("PutItem", {"TableName": TABLE, "Item": {**key, REDELIVER_MARK: {"S": "x"}}}),
        ("DeleteItem", {"TableName": TABLE, "Key": key}),
        ("TransactWriteItems", {"TransactItems": [{"Update": status}]}),
        ("TransactWriteItems", {"TransactItems": [{"Put": {"TableName": TABLE, "Item": item}}]}),
        ("TransactWriteItems", {"TransactItems": [{"Delete": {"TableName": TABLE, "Key": key}}]}),
        ("BatchWriteItem", {"RequestItems": {TABLE: [{"PutRequest": {"Item": item}}]}}),
        ("BatchWriteItem", {"RequestItems": {TABLE: [{"DeleteRequest": {"Key": key}}]}}),
    ]


@pytest.mark.parametrize("tenant", TENANTS)
def test_tenant_credentials_never_write_a_delivery_record_but_its_redelivery_mark(tenant: str) -> None:
    for operation, body in forged_delivery_writes(tenant):
        assert explicitly_denied(tenant, operation, body), (operation, body)
    # The mark alone (set or removed, conditional on the record's key) is what POST .../redeliver writes.
    key = delivery_key(tenant)
    assert refusal(tenant, "UpdateItem", update(key, f"SET {REDELIVER_MARK} = :m")) is None
    marked = update(key, "SET #m = :m", {"#m": REDELIVER_MARK}, ConditionExpression="attribute_exists(pk)")
    assert refusal(tenant, "UpdateItem", marked) is None
    assert refusal(tenant, "UpdateItem", update(key, f"REMOVE {REDELIVER_MARK}")) is None


@pytest.mark.parametrize("tenant", TENANTS)
def test_tenant_credentials_never_write_the_delivery_rate_counters(tenant: str) -> None:
    key = rate_key(tenant)
    reset = update(key, "SET #c = :v", {"#c": "count"})
    writes = [
        ("UpdateItem", reset),
        ("UpdateItem", {**update(key, "ADD #c :n", {"#c": "count"}), "ExpressionAttributeValues": {":n": {"N": "-9"}}}),
        ("UpdateItem", update(key, f"SET {REDELIVER_MARK} = :m")),  # the mark's allowance is the records' only
        ("PutItem", {"TableName": TABLE, "Item": {**key, "count": {"N": "0"}}}),
        ("DeleteItem", {"TableName": TABLE, "Key": key}),
        ("TransactWriteItems", {"TransactItems": [{"Update": reset}]}),
        ("BatchWriteItem", {"RequestItems": {TABLE: [{"DeleteRequest": {"Key": key}}]}}),
    ]
    for operation, body in writes:
        assert explicitly_denied(tenant, operation, body), (operation, body)


@pytest.mark.parametrize("tenant", TENANTS)
def test_a_batch_or_transaction_that_slips_one_in_among_the_tenants_own_items_is_refused_whole(tenant: str) -> None:
    ticket = keys.ticket_key(tenant, "T1")
    for slipped in (delivery_key(tenant), rate_key(tenant)):
        batch = [{"DeleteRequest": {"Key": ticket}}, {"DeleteRequest": {"Key": slipped}}]
        assert explicitly_denied(tenant, "BatchWriteItem", {"RequestItems": {TABLE: batch}})
        transaction = [
            {"Delete": {"TableName": TABLE, "Key": ticket}},
            {"Delete": {"TableName": TABLE, "Key": slipped}},
        ]
        assert explicitly_denied(tenant, "TransactWriteItems", {"TransactItems": transaction})


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_reading_them_stays_allowed_and_only_the_tenants_own(tenant: str, other: str) -> None:
    for pk in (keys.webhook_deliveries_pk(tenant, WEBHOOK), keys.webhook_rate_pk(tenant)):
        query = {
            "TableName": TABLE,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
        }
        assert refusal(tenant, "Query", query) is None
    assert refusal(tenant, "GetItem", {"TableName": TABLE, "Key": delivery_key(tenant)}) is None
    # Another tenant's: refused by the Allow's LeadingKeys, the mark included.
    assert refusal(tenant, "GetItem", {"TableName": TABLE, "Key": delivery_key(other)}) is not None
    assert refusal(tenant, "UpdateItem", update(delivery_key(other), f"SET {REDELIVER_MARK} = :m")) is not None


# ---------------------------------------------------------------- the routes' own writes
@dataclass
class RecordingClient:
    """A DynamoDB client that records what the repositories ask and finds every item."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __getattr__(self, operation: str) -> Callable[..., dict[str, Any]]:
        def call(**kwargs: Any) -> dict[str, Any]:
            self.calls.append(("".join(part.title() for part in operation.split("_")), kwargs))
            return {"Item": {"webhook_id": {"S": WEBHOOK}}} if operation == "get_item" else {}

        return call


@dataclass
class Clients:
    client: RecordingClient

    def dynamodb(self) -> Any:
        return self.client

    def invalidate(self) -> None:
        return None


WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


@pytest.mark.parametrize("tenant", TENANTS)
def test_every_write_the_webhook_routes_make_stays_allowed(tenant: str) -> None:
    client = RecordingClient()
    table = TenantTable(tenant, TABLE, Clients(client))
    webhooks, deliveries = WebhookRepository(table), DeliveryRepository(table)
    webhook_key = keys.webhook_key(tenant, WEBHOOK)
    webhooks.create_webhook(
        WebhookItem(
            pk=webhook_key["pk"]["S"],
            sk=webhook_key["sk"]["S"],
            webhook_id=WEBHOOK,
            url="https://hooks.example.com/in",
            events=["ticket.created"],
            description="",
            status="ACTIVE",
            created_at="2026-11-25T12:00:00.000Z",
            secret="c2VhbGVk",
        )
    )
    webhooks.rotate_secret(WEBHOOK, "bmV3", "2026-11-26T12:00:00.000Z")
    deliveries.request_redelivery(WEBHOOK, DELIVERY, "2026-11-25T12:00:00.000Z")
    webhooks.delete_webhook(WEBHOOK)
    writes = [(operation, body) for operation, body in client.calls if operation in WRITES]
    assert [operation for operation, _ in writes] == [
        "TransactWriteItems",
        "UpdateItem",
        "UpdateItem",
        "TransactWriteItems",
    ]
    for operation, body in writes:
        assert refusal(tenant, operation, body) is None, (operation, body)
    # The redelivery is the mark and the key, nothing else of the record.
    redelivery = writes[2][1]
    assert redelivery["Key"] == delivery_key(tenant)
    assert redelivery["UpdateExpression"] == f"SET {REDELIVER_MARK} = :at"
