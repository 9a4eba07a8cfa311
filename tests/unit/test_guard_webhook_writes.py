"""TenantAccessRole and the webhook delivery side's items, as the guard judges
them with the template's policy: tenant credentials read a webhook's delivery
records and the tenant's delivery rate counters but never write them (a tenant
can neither fake its deliveries nor reset its tier's delivery bound), except
the redelivery mark, alone; nor a webhook's parking partition (its retry slots,
parked messages and circuit), which the delivery role writes, and nothing else
of a tenant with puts and deletes; every write the webhook routes make,
recorded from the repositories themselves, stays allowed. Tenants ``1`` and
``10``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from local_stack.iam.dynamodb_authorization import authorize_dynamodb
from local_stack.iam.sessions import Session
from support_tickets.core import keys
from support_tickets.data.table import TenantTable
from support_tickets.webhooks.admin_repository import DeliveryRepository, WebhookItem, WebhookRepository
from support_tickets.webhooks.delivery_records import REDELIVER_MARK, Attempt, DeliveryRecords, Refusal
from support_tickets.webhooks.parking import ParkedMessage, WebhookParking
from tests.unit.test_guard_attributes import REGION, TABLES, explicitly_denied, refusal
from tests.unit.test_guard_policy import ROLES

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


# ---------------------------------------------------------------- a webhook's parking partition
def parking_keys(tenant: str) -> list[dict[str, Any]]:
    pk = keys.webhook_parked_pk(tenant, WEBHOOK)
    return [
        keys.webhook_circuit_key(tenant, WEBHOOK),
        keys.parked_key(tenant, WEBHOOK, DELIVERY),
        {"pk": {"S": pk}, "sk": {"S": "SLOT#0"}},
    ]


@pytest.mark.parametrize("tenant", TENANTS)
def test_tenant_credentials_never_write_a_webhooks_parking_partition(tenant: str) -> None:
    """Else a tenant could free its retry slots or empty its circuit's count and hold more
    of the queue than its bound."""
    for key in parking_keys(tenant):
        reset = update(key, "SET parked = :v, held_until = :v")
        writes = [
            ("UpdateItem", reset),
            ("UpdateItem", update(key, f"SET {REDELIVER_MARK} = :m")),
            ("PutItem", {"TableName": TABLE, "Item": {**key, "parked": {"N": "0"}}}),
            ("DeleteItem", {"TableName": TABLE, "Key": key}),
            ("TransactWriteItems", {"TransactItems": [{"Update": reset}]}),
            ("TransactWriteItems", {"TransactItems": [{"Delete": {"TableName": TABLE, "Key": key}}]}),
            ("BatchWriteItem", {"RequestItems": {TABLE: [{"DeleteRequest": {"Key": key}}]}}),
        ]
        for operation, body in writes:
            assert explicitly_denied(tenant, operation, body), (operation, body)


def delivery_role_refusal(operation: str, body: dict[str, Any]) -> str | None:
    session = Session("ASIADELIVERY", ROLES["DeliverWebhookRole"], "DeliverWebhookFunction")
    return authorize_dynamodb(session, operation, body, region=REGION, tables=TABLES)


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_the_delivery_role_parks_and_drains_in_the_parking_partition_and_writes_nothing_else_so(
    tenant: str, other: str
) -> None:
    client = RecordingClient()
    parking = WebhookParking(TenantTable(tenant, TABLE, Clients(client)), WEBHOOK)
    parking.circuit()
    parking.take_slot(3, DELIVERY, 100.0, 200.0)
    parking.give_back_slot(DELIVERY, 3)
    parking.park(ParkedMessage(DELIVERY, "{}", "g", "d", 100.0), 100.0)
    parking.oldest(10)
    parking.group_marks("g")
    parking.park(ParkedMessage(DELIVERY, "{}", "g", "d", 100.0), 100.0, released=True)
    parking.unpark([DELIVERY], ["g"], 100.0)
    parking.schedule(next_release_at=130.0, cooldown=30.0, now=100.0)
    parking.new_token(0, 100.0)
    parking.end_token(1, 100.0)
    parking.note_success(100.0)
    operations = {operation for operation, _ in client.calls}
    assert operations >= {"GetItem", "Query", "UpdateItem", "TransactWriteItems"}
    for operation, body in client.calls:
        assert delivery_role_refusal(operation, body) is None, (operation, body)
    # Puts and deletes nowhere else of a tenant: not its tickets, webhooks or deliveries.
    for key in (keys.ticket_key(tenant, "T1"), keys.webhook_key(tenant, WEBHOOK), delivery_key(tenant)):
        assert delivery_role_refusal("PutItem", {"TableName": TABLE, "Item": key}) is not None, key
        assert delivery_role_refusal("DeleteItem", {"TableName": TABLE, "Key": key}) is not None, key
    # A transaction that slips one of them in among parking items is refused whole.
    slipped = [
        {"Delete": {"TableName": TABLE, "Key": keys.parked_key(other, WEBHOOK, DELIVERY)}},
        {"Delete": {"TableName": TABLE, "Key": keys.ticket_key(other, "T1")}},
    ]
    assert delivery_role_refusal("TransactWriteItems", {"TransactItems": slipped}) is not None


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


# ---------------------------------------------------------------- the audit writer's delivery records
def audit_role_refusal(operation: str, body: dict[str, Any]) -> str | None:
    session = Session("ASIAAUDIT", ROLES["AuditTrailRole"], "AuditTrailFunction")
    return authorize_dynamodb(session, operation, body, region=REGION, tables=TABLES)


@pytest.mark.parametrize("tenant", TENANTS)
def test_the_audit_writer_records_each_delivery_it_queues_or_sees_refused_and_nothing_more(tenant: str) -> None:
    """The fan-out's record before the message (record_queued) and a refusal's (record_refusal),
    as the repository makes them: allowed by the audit writer's role; the same write naming
    one more attribute, or under another partition of the tenant, refused."""
    client = RecordingClient()
    records = DeliveryRecords(TenantTable(tenant, TABLE, Clients(client)))
    event: dict[str, Any] = {"delivery_id": DELIVERY, "webhook_id": WEBHOOK, "event_id": "e1", "ticket_id": "T1"}
    event |= {"type": "ticket.created", "body": "{}", "at": "2026-11-25T12:00:00.000Z", "expiration": 1_800_000_000}
    records.record_queued(Attempt(**event, status="PENDING", status_code=None, next_attempt_at=None))
    records.record_refusal(Refusal(**event, reason="MessageTooLong"))
    assert [operation for operation, _ in client.calls] == ["UpdateItem", "UpdateItem"]
    queued, refused = (body for _, body in client.calls)
    assert queued["ConditionExpression"] == "attribute_not_exists(pk)"
    for body in (queued, refused):
        assert body["Key"] == delivery_key(tenant)
        assert audit_role_refusal("UpdateItem", body) is None, body
        more = {**body, "UpdateExpression": body["UpdateExpression"].replace("SET ", "SET holder = :h, ", 1)}
        more["ExpressionAttributeValues"] = {**body["ExpressionAttributeValues"], ":h": {"S": "x"}}
        assert audit_role_refusal("UpdateItem", more) is not None
        for key in (keys.ticket_key(tenant, "T1"), keys.webhook_key(tenant, WEBHOOK), rate_key(tenant)):
            assert audit_role_refusal("UpdateItem", {**body, "Key": key}) is not None, key
    assert audit_role_refusal("PutItem", {"TableName": TABLE, "Item": delivery_key(tenant)}) is not None
