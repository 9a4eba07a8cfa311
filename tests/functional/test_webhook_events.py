"""Webhook events from the audit-trail function: the real handler over moto's
stream records, onto the FIFO webhook queue, one message per (event,
webhook), only for tenants with subscribed ACTIVE webhooks; a failure to
queue fails the record."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError

from support_tickets.core import keys
from support_tickets.webhooks.delivery_records import DeliveryRecords
from support_tickets.webhooks.events import MAX_BATCH_BYTES, delivery_id, read_queue_message, retry_delay
from support_tickets.webhooks.fanout import webhook_fanout
from tests.conftest import REGION, WEBHOOK_QUEUE_URL, all_items
from tests.functional.api_harness import Api, User
from tests.functional.conftest import TENANT_PAIRS
from tests.functional.stream_harness import StreamHarness
from tests.functional.webhook_harness import deliverer, disable_webhook, process, receive

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ALL_TYPES = ["ticket.created", "ticket.updated", "ticket.deleted", "comment.added"]


pytestmark = pytest.mark.usefixtures("local_receivers")


def register(api: Api, tenant_id: str, events: list[str], url: str = "http://127.0.0.1:9/hook") -> str:
    response = api.call("webhook_create", User(tenant_id, "root", admin=True), body={"url": url, "events": events})
    assert response.status == 201, response.body
    return str(response.body["webhook_id"])


def settle(records: list[dict[str, Any]]) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    for record in records:
        sqs.delete_message(QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=record["receiptHandle"])


def messages(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each message's routing fields, its ``event`` (parsed) and ``body`` (the event's bytes as queued)."""
    found = []
    for record in records:
        body, event, routing = read_queue_message(record["body"])
        found.append({**routing, "event": event, "body": body})
    return found


@pytest.mark.parametrize(("tenant", "other"), TENANT_PAIRS)
def test_each_event_type_is_queued_for_its_tenants_subscribed_webhooks_only(
    api: Api, audit_stream: StreamHarness, tenant: str, other: str
) -> None:
    # Given a webhook of each tenant (the other's wants ticket.created only) and a ticket's whole life
    everything = register(api, tenant, ALL_TYPES)
    register(api, other, ["ticket.created"])
    alice, root = User(tenant, "alice"), User(tenant, "root", admin=True)
    ticket = api.new_ticket(alice, title="Printer", description="old words")
    ticket_id = ticket["ticket_id"]
    assert api.update(alice, ticket_id, {"status": "IN_PROGRESS", "description": "new words"}).ok
    comment = api.comment(alice, ticket_id, {"body": "on it"}).body
    assert api.delete(root, ticket_id).status == 204
    # When the stream reaches the audit-trail function
    audit_stream.deliver(audit_stream.new_records())
    # Then the tenant's webhook has the four events, in order, in one group of its ticket
    records = receive()
    found = messages(records)
    assert {message["tenant_id"] for message in found} == {tenant}
    assert {message["webhook_id"] for message in found} == {everything}
    events = [message["event"] for message in found]
    assert [event["type"] for event in events] == [*ALL_TYPES[:2], "comment.added", "ticket.deleted"]
    assert {record["attributes"]["MessageGroupId"] for record in records} == {f"{tenant}#{ticket_id}#{everything}"}
    created, updated, commented, deleted = events
    assert all(set(event) == {"id", "type", "timestamp", "tenant_id", "data"} for event in events)
    assert all(event["tenant_id"] == tenant for event in events)
    assert created["data"] == {key: ticket[key] for key in created["data"]}
    assert created["data"]["description"] == "old words"
    assert updated["data"]["status"] == "IN_PROGRESS"
    assert updated["data"]["changes"] == [
        {"field": "status", "old": "OPEN", "new": "IN_PROGRESS"},
        {"field": "description", "old": "old words", "new": "new words"},
    ]
    assert commented["data"] == {**comment, "ticket_id": ticket_id}
    assert deleted["data"]["ticket_id"] == ticket_id
    # And each message's deduplication id is its delivery id, the same for every attempt
    for record, message, event in zip(records, found, events, strict=True):
        expected = delivery_id(event["timestamp"], event["id"], everything)
        assert message["delivery_id"] == record["attributes"]["MessageDeduplicationId"] == expected


def test_a_redelivered_stream_record_queues_nothing_new(api: Api, audit_stream: StreamHarness) -> None:
    tenant = "acme"
    register(api, tenant, ALL_TYPES)
    api.new_ticket(User(tenant, "alice"))
    records = audit_stream.new_records()
    audit_stream.deliver(records)
    audit_stream.deliver(records)  # the stream hands the same record again
    (queued,) = messages(receive())
    # The same event id whatever the delivery: the audit event's, from the stream record
    assert queued["event"]["id"] == records[0]["eventID"]


def test_tenants_without_webhooks_cost_one_small_read_per_batch(
    api: Api, audit_stream: StreamHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    versions: list[str] = []
    queries: list[str] = []
    original_version, original_query = DeliveryRecords.webhooks_version, DeliveryRecords.subscriptions

    def counted_version(self: Any) -> Any:
        versions.append(self.table.tenant_id)
        return original_version(self)

    def counted_query(self: Any) -> Any:
        queries.append(self.table.tenant_id)
        return original_query(self)

    monkeypatch.setattr(DeliveryRecords, "webhooks_version", counted_version)
    monkeypatch.setattr(DeliveryRecords, "subscriptions", counted_query)
    alice = User("quiet", "alice")
    for n in range(3):
        api.new_ticket(alice, title=f"t{n}")
    audit_stream.deliver(audit_stream.new_records())
    assert versions == ["quiet"]  # one GetItem of the count item for three events of one batch
    assert queries == []  # and no Query: no webhooks
    assert receive() == []


def test_a_tenants_webhooks_are_queried_again_only_when_their_version_moved(
    api: Api, audit_stream: StreamHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries: list[str] = []
    original = DeliveryRecords.subscriptions

    def counted(self: Any) -> Any:
        queries.append(self.table.tenant_id)
        return original(self)

    monkeypatch.setattr(DeliveryRecords, "subscriptions", counted)
    register(api, "acme", ALL_TYPES)
    alice = User("acme", "alice")
    for batch in range(3):
        api.new_ticket(alice, title=f"t{batch}")
        audit_stream.deliver(audit_stream.new_records())
    assert queries == ["acme"]  # three batches, one version: one Query
    register(api, "acme", ALL_TYPES)
    api.new_ticket(alice, title="after")
    audit_stream.deliver(audit_stream.new_records())
    assert queries == ["acme", "acme"]
    assert len(receive()) == 3 + 2


@pytest.mark.parametrize(("tenant", "other"), TENANT_PAIRS)
def test_a_new_webhook_receives_the_change_made_right_after_its_201(
    api: Api, audit_stream: StreamHarness, tenant: str, other: str
) -> None:
    # Given a tenant whose webhooks the container has just read (one webhook), and a neighbour's
    first = register(api, tenant, ALL_TYPES)
    alice = User(tenant, "alice")
    ticket_id = api.new_ticket(alice)["ticket_id"]
    audit_stream.deliver(audit_stream.new_records())
    delivered = receive()
    assert [message["webhook_id"] for message in messages(delivered)] == [first]
    settle(delivered)  # delivered: the ticket's group is free again
    register(api, other, ALL_TYPES)
    # When a second webhook is registered (201) and a ticket changes at once
    second = register(api, tenant, ["ticket.updated"])
    assert api.update(alice, ticket_id, {"title": "changed at once"}).ok
    audit_stream.deliver(audit_stream.new_records())
    # Then the change reaches both webhooks: the cache was warm, but the version moved
    found = messages(receive())
    assert sorted(message["webhook_id"] for message in found) == sorted([first, second])
    assert {message["event"]["type"] for message in found} == {"ticket.updated"}
    assert {message["tenant_id"] for message in found} == {tenant}


def test_a_webhook_that_does_not_want_the_type_or_is_disabled_gets_nothing(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    register(api, "acme", ["comment.added"])
    disabled = register(api, "acme", ALL_TYPES)
    disable_webhook(dynamodb, table_name, "acme", disabled)
    api.new_ticket(User("acme", "alice"))
    audit_stream.deliver(audit_stream.new_records())
    assert receive() == []


def test_a_failure_to_queue_fails_the_record_and_its_retry_queues_it(
    api: Api, audit_stream: StreamHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(api, "acme", ALL_TYPES)
    api.new_ticket(User("acme", "alice"))
    records = audit_stream.new_records()
    fanout = webhook_fanout()
    real_sqs = fanout.sqs

    class Refusing:
        def send_message_batch(self, **kwargs: Any) -> Any:
            return {"Successful": [], "Failed": [{"Id": "0", "SenderFault": False, "Code": "InternalError"}]}

    fanout.sqs = Refusing()
    assert audit_stream.invoke(records) == [records[0]["dynamodb"]["SequenceNumber"]]
    assert receive() == []
    fanout.sqs = real_sqs
    assert audit_stream.invoke(records) == []
    assert len(receive()) == 1


def delivery_records(dynamodb: DynamoDBClient, table_name: str, tenant_id: str) -> list[dict[str, Any]]:
    """The tenant's delivery records, read as stored (every webhook's)."""
    prefix = f"TENANT#{tenant_id}|WEBHOOK#"
    return [
        item
        for item in all_items(dynamodb, table_name)
        if item["pk"]["S"].startswith(prefix) and item["sk"]["S"].startswith("DELIVERY#")
    ]


@pytest.mark.parametrize(("tenant", "other"), TENANT_PAIRS)
def test_each_deliverys_record_is_stored_before_its_message_is_sent(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str, tenant: str, other: str
) -> None:
    # Given two webhooks of the tenant, one of the other tenant's, and a queue that looks at
    # the table whenever a batch is sent
    hooks = {register(api, tenant, ALL_TYPES), register(api, tenant, ["ticket.created"])}
    register(api, other, ALL_TYPES)
    fanout = webhook_fanout()
    real_sqs = fanout.sqs
    seen: list[tuple[str, dict[str, Any] | None]] = []

    class Looking:
        def send_message_batch(self, **kwargs: Any) -> Any:
            for entry in kwargs["Entries"]:
                _, _, routing = read_queue_message(entry["MessageBody"])
                key = keys.delivery_key(routing["tenant_id"], routing["webhook_id"], routing["delivery_id"])
                seen.append((entry["MessageBody"], dynamodb.get_item(TableName=table_name, Key=key).get("Item")))
            return real_sqs.send_message_batch(**kwargs)

    fanout.sqs = Looking()
    # When the tenant's ticket is created
    api.new_ticket(User(tenant, "alice"))
    assert audit_stream.invoke(audit_stream.new_records()) == []
    # Then each message's record was there when the message was sent: PENDING, no attempt, its event
    assert len(seen) == 2
    for body, record in seen:
        assert record is not None
        event, _, routing = read_queue_message(body)
        assert (record["status"]["S"], record["attempts"]["N"], record["event"]["S"]) == ("PENDING", "0", event)
        assert record["pk"]["S"] == keys.webhook_deliveries_pk(tenant, routing["webhook_id"])
        assert record["next_attempt_at"] == {"NULL": True}
        assert "created_at" in record
        assert "expiration" in record
    assert {read_queue_message(body)[2]["webhook_id"] for body, _ in seen} == hooks
    # And the tenant's admin sees each queued delivery PENDING with 0 attempts; the other tenant has none
    for hook in hooks:
        (listed,) = api.call("webhook_deliveries", User(tenant, "root", admin=True), ticket_id=hook).body["items"]
        assert (listed["status"], listed["attempts"], listed["last_status_code"]) == ("PENDING", 0, None)
    assert delivery_records(dynamodb, table_name, other) == []


def test_a_redelivered_stream_record_leaves_an_attempted_delivery_as_it_is(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    # Given a delivery attempted once (no receiver: PENDING, its next attempt set) and one delivered
    failing = register(api, "1", ALL_TYPES)
    register(api, "10", ALL_TYPES)
    api.new_ticket(User("1", "alice"))
    records = audit_stream.new_records()
    audit_stream.deliver(records)
    (queued,) = receive()
    (record,) = delivery_records(dynamodb, table_name, "1")
    assert (record["status"]["S"], record["attempts"]["N"]) == ("PENDING", "0")
    assert process(deliverer(table_name), [queued]) == [queued["messageId"]]
    settle([queued])
    (attempted,) = delivery_records(dynamodb, table_name, "1")
    assert (attempted["status"]["S"], attempted["attempts"]["N"]) == ("PENDING", "1")
    delivered = {**attempted, "status": {"S": "DELIVERED"}, "sk": {"S": attempted["sk"]["S"] + "x"}}
    dynamodb.put_item(TableName=table_name, Item=delivered)
    # When the stream hands the same record again (past SQS's deduplication: the queue takes it again)
    boto3.client("sqs", region_name=REGION).purge_queue(QueueUrl=WEBHOOK_QUEUE_URL)
    assert audit_stream.invoke(records) == []
    # Then the attempted record is as it was, attempts, status and next attempt kept
    assert sorted(delivery_records(dynamodb, table_name, "1"), key=lambda item: item["sk"]["S"]) == [
        attempted,
        delivered,
    ]
    # (its message queued again all the same: the delivery function absorbs a duplicate)
    assert [message["webhook_id"] for message in messages(receive())] == [failing]
    assert delivery_records(dynamodb, table_name, "10") == []


def test_a_send_that_fails_leaves_each_record_pending_for_the_retry(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    hook = register(api, "10", ALL_TYPES)
    register(api, "1", ALL_TYPES)
    api.new_ticket(User("10", "alice"))
    records = audit_stream.new_records()
    fanout = webhook_fanout()
    real_sqs = fanout.sqs

    class Unavailable:
        def send_message_batch(self, **kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "down"}}, "SendMessageBatch")

    fanout.sqs = Unavailable()
    # The stream record fails (it will be retried); its delivery's record is there, PENDING
    assert audit_stream.invoke(records) == [records[0]["dynamodb"]["SequenceNumber"]]
    assert receive() == []
    (record,) = delivery_records(dynamodb, table_name, "10")
    assert record["pk"]["S"] == keys.webhook_deliveries_pk("10", hook)
    assert (record["status"]["S"], record["attempts"]["N"]) == ("PENDING", "0")
    # The retry queues the message; the record is the same one
    fanout.sqs = real_sqs
    assert audit_stream.invoke(records) == []
    (queued,) = messages(receive())
    assert queued["delivery_id"] == record["delivery_id"]["S"]
    assert delivery_records(dynamodb, table_name, "10") == [record]
    assert delivery_records(dynamodb, table_name, "1") == []


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    assert [retry_delay(n, lambda: 0.5) for n in (1, 2, 3, 4)] == [5, 10, 20, 40]
    assert retry_delay(1, lambda: 0.0) == 4  # - 20 %
    assert retry_delay(1, lambda: 1.0) == 6  # + 20 %
    assert retry_delay(30, lambda: 0.5) == 6 * 3600
    assert retry_delay(30, lambda: 1.0) == round(6 * 3600 * 1.2) <= 12 * 3600
    # Enough steps fit in the 26 h window for more than 24 h of retries, at the earliest jitter too.
    elapsed, attempts = 0, 0
    while elapsed < 26 * 3600:
        attempts += 1
        elapsed += retry_delay(attempts, lambda: 0.0)
    assert 10 < attempts < 100  # below the queue's maxReceiveCount


def test_queue_url_comes_from_the_environment() -> None:
    assert webhook_fanout().queue_url == WEBHOOK_QUEUE_URL


def test_tier_rates_are_read_from_the_functions_setting() -> None:
    from support_tickets.webhooks.delivery import tier_rates

    assert tier_rates("basic=5,standard=25,premium=100") == {"basic": 5, "standard": 25, "premium": 100}
    assert tier_rates("") is None
    with pytest.raises(ValueError, match="at least 1"):
        tier_rates("basic=0")
    with pytest.raises(ValueError, match="invalid literal"):
        tier_rates("basic=fast")


# ---------------------------------------------------------------- large events
EMOJI = "\U0001f600"


def utf8_update(api: Api, user: User, ticket_id: str, body: dict[str, Any]) -> Any:
    """A PATCH whose body is UTF-8 JSON as a client sends it (the escaped form of 10,000 emoji
    is 120 KB, over the API's 64 KiB; their UTF-8, 40 KB)."""
    return api.call("update", user, ticket_id=ticket_id, raw_body=json.dumps(body, ensure_ascii=False))


def test_a_large_event_reaches_every_webhook_in_batches_sqs_takes(api: Api, audit_stream: StreamHarness) -> None:
    # Given a tenant with 10 webhooks and a ticket whose description is 10,000 emoji
    hooks = {register(api, "acme", ALL_TYPES) for _ in range(10)}
    alice = User("acme", "alice")
    created = api.call(
        "create", alice, raw_body=json.dumps({"title": "t", "description": EMOJI * 10_000}, ensure_ascii=False)
    )
    assert created.status == 201, created.body
    ticket_id = created.body["ticket_id"]
    audit_stream.deliver(audit_stream.new_records())
    settle(receive())
    # When it is updated (the description three times in the event: data, changes' old and new)
    assert utf8_update(api, alice, ticket_id, {"description": "\u4e2d" * 5_000 + EMOJI * 5_000}).ok
    assert audit_stream.invoke(audit_stream.new_records()) == []
    # Then every webhook has its message, whose body is the event's own UTF-8 bytes
    found = messages(receive())
    assert {message["webhook_id"] for message in found} == hooks
    for message in found:
        assert message["event"]["data"]["changes"][-1]["old"] == EMOJI * 10_000
        assert EMOJI * 10_000 in message["body"]  # not escaped, not encoded twice
        assert len(message["body"].encode()) < 160_000  # ~4 bytes an emoji, 3 a CJK character, thrice
    # (10 messages of ~130 KB: more than one SendMessageBatch of 1 MiB)
    assert sum(len(message["body"].encode()) for message in found) > MAX_BATCH_BYTES


def test_characters_sqs_refuses_are_escaped_in_the_event(api: Api, audit_stream: StreamHarness) -> None:
    register(api, "acme", ALL_TYPES)
    api.new_ticket(User("acme", "alice"), description="odd \ufffe\uffff end")
    assert audit_stream.invoke(audit_stream.new_records()) == []
    (message,) = messages(receive())
    assert message["event"]["data"]["description"] == "odd \ufffe\uffff end"  # the same meaning
    assert "\\ufffe\\uffff" in message["body"]


def test_an_event_the_queue_refuses_is_a_failed_delivery_with_its_reason_and_redeliverable(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    # Given a queue that takes messages of at most 1 KiB (SQS's own refusal, as for one over 1 MiB)
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.set_queue_attributes(QueueUrl=WEBHOOK_QUEUE_URL, Attributes={"MaximumMessageSize": "1024"})
    hook = register(api, "1", ALL_TYPES)
    register(api, "10", ALL_TYPES)
    api.new_ticket(User("1", "alice"), description="x" * 2_000)
    # When the event reaches the fan-out: the record does not fail (no retry changes it)
    assert audit_stream.invoke(audit_stream.new_records()) == []
    assert receive() == []
    # Then its delivery is FAILED with the queue's reason, under the tenant's prefix, with its event
    (record,) = [
        item
        for item in all_items(dynamodb, table_name)
        if item["pk"]["S"].startswith("TENANT#1|WEBHOOK#") and item["sk"]["S"].startswith("DELIVERY#")
    ]
    assert record["pk"]["S"] == f"TENANT#1|WEBHOOK#{hook}#DELIVERIES"
    assert record["status"]["S"] == "FAILED"
    assert "shorter than 1024 bytes" in record["failure_reason"]["S"]
    assert int(record["attempts"]["N"]) == 0
    assert read_queue_message('{"event":' + record["event"]["S"] + ',"x":1}')[1]["tenant_id"] == "1"
    # and the tenant's admin sees it in the deliveries list with that reason (tenant 10's, nothing of it)
    root = User("1", "root", admin=True)
    (listed,) = api.call("webhook_deliveries", root, ticket_id=hook).body["items"]
    assert (listed["status"], listed["attempts"]) == ("FAILED", 0)
    assert listed["failure_reason"] == record["failure_reason"]["S"]
    other = api.call("webhook_deliveries", User("10", "root", admin=True), ticket_id=hook)
    assert (other.status, other.body["error"]["code"]) == (404, "WEBHOOK_NOT_FOUND")
    # And once the queue takes it again, a redelivery sends it
    sqs.set_queue_attributes(QueueUrl=WEBHOOK_QUEUE_URL, Attributes={"MaximumMessageSize": "1048576"})
    delivery = record["delivery_id"]["S"]
    response = api.call("webhook_redeliver", User("1", "root", admin=True), ticket_id=f"{hook}/{delivery}")
    assert response.status == 202, response.body
    assert audit_stream.invoke(audit_stream.new_records()) == []
    (queued_record,) = receive()
    (queued,) = messages([queued_record])
    assert (queued["webhook_id"], queued["delivery_id"], queued["tenant_id"]) == (hook, delivery, "1")
    # and its first attempt (no receiver there: a retry) clears the reason from the list
    assert process(deliverer(table_name), [queued_record]) == [queued_record["messageId"]]
    settle([queued_record])
    (attempted,) = api.call("webhook_deliveries", root, ticket_id=hook).body["items"]
    assert (attempted["attempts"], attempted["failure_reason"]) == (1, None)


def test_an_event_no_delivery_record_can_hold_is_recorded_failed_and_never_queued(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    # Given a ticket whose description another writer of the table (an operator) made ~600 KB
    # of text: its update's event (the description twice) fits SQS's 1 MiB, not a 400 KB record
    hook = register(api, "10", ALL_TYPES)
    register(api, "1", ALL_TYPES)
    ticket = api.new_ticket(User("10", "alice"))
    audit_stream.deliver(audit_stream.new_records())
    settle(receive())
    dynamodb.update_item(
        TableName=table_name,
        Key=keys.ticket_key("10", ticket["ticket_id"]),
        UpdateExpression="SET description = :big",
        ExpressionAttributeValues={":big": {"S": "\u4e2d" * 100_000}},
    )
    # When the fan-out sees the change: the record does not fail (no retry changes it)
    assert audit_stream.invoke(audit_stream.new_records()) == []
    # Then nothing is queued, and the delivery is FAILED with the reason, without its body
    assert receive() == []
    updated = [item for item in delivery_records(dynamodb, table_name, "10") if item["type"]["S"] == "ticket.updated"]
    assert [(item["status"]["S"], item["attempts"]["N"]) for item in updated] == [("FAILED", "0")]
    assert updated[0]["pk"]["S"] == keys.webhook_deliveries_pk("10", hook)
    assert updated[0]["failure_reason"]["S"].startswith("EventTooLarge: ")
    assert "event" not in updated[0]
    assert delivery_records(dynamodb, table_name, "1") == []
