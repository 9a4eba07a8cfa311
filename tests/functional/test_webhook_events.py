"""Webhook events from the audit-trail function: the real handler over moto's
stream records, onto the FIFO webhook queue, one message per (event,
webhook), only for tenants with subscribed ACTIVE webhooks; a failure to
queue fails the record."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from support_tickets.core.webhook_events import delivery_id, retry_delay
from support_tickets.data.delivery_records import DeliveryRecords
from support_tickets.streams import webhook_fanout
from tests.conftest import WEBHOOK_QUEUE_URL
from tests.functional.api_harness import Api, User
from tests.functional.conftest import TENANT_PAIRS
from tests.functional.stream_harness import StreamHarness
from tests.functional.webhook_harness import disable_webhook, receive

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ALL_TYPES = ["ticket.created", "ticket.updated", "ticket.deleted", "comment.added"]


pytestmark = pytest.mark.usefixtures("local_receivers")


def register(api: Api, tenant_id: str, events: list[str], url: str = "http://127.0.0.1:9/hook") -> str:
    response = api.call("webhook_create", User(tenant_id, "root", admin=True), body={"url": url, "events": events})
    assert response.status == 201, response.body
    return str(response.body["webhook_id"])


def messages(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(record["body"]) for record in records]


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
    events = [json.loads(message["event"]) for message in found]
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
    assert json.loads(queued["event"])["id"] == records[0]["eventID"]


def test_tenants_without_webhooks_cost_one_cached_query(
    api: Api, audit_stream: StreamHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries: list[str] = []
    original = DeliveryRecords.subscriptions

    def counted(self: Any) -> Any:
        queries.append(self.table.tenant_id)
        return original(self)

    monkeypatch.setattr(DeliveryRecords, "subscriptions", counted)
    alice = User("quiet", "alice")
    for n in range(3):
        api.new_ticket(alice, title=f"t{n}")
    audit_stream.deliver(audit_stream.new_records())
    assert queries == ["quiet"]  # one Query for three events (the container's cache)
    assert receive() == []


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
    fanout = webhook_fanout.webhook_fanout()
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
    assert webhook_fanout.webhook_fanout().queue_url == WEBHOOK_QUEUE_URL


def test_tier_rates_are_read_from_the_functions_setting() -> None:
    from support_tickets.streams.webhook_delivery import tier_rates

    assert tier_rates("basic=5,standard=25,premium=100") == {"basic": 5, "standard": 25, "premium": 100}
    assert tier_rates("") is None
    with pytest.raises(ValueError, match="at least 1"):
        tier_rates("basic=0")
    with pytest.raises(ValueError, match="invalid literal"):
        tier_rates("basic=fast")
