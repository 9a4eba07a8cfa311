"""The deliveries routes through their handlers, over moto: a webhook's
deliveries newest first and paged; redelivery through the table's stream and
the audit-trail function back onto the queue, same event id; tenants 1 and 10
never reach each other's."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from support_tickets.core import keys
from tests.conftest import all_items
from tests.functional.api_harness import Api, User, assert_error
from tests.functional.conftest import TENANT_PAIRS
from tests.functional.stream_harness import StreamHarness
from tests.functional.webhook_harness import deliverer, process, receive, receivers

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


pytestmark = pytest.mark.usefixtures("local_receivers")


def admin_of(tenant_id: str) -> User:
    return User(tenant_id, "root", admin=True)


def delivered_hook(
    api: Api, audit_stream: StreamHarness, table_name: str, tenant_id: str, url: str, tickets: int = 1
) -> str:
    """A webhook of ``tenant_id`` with one delivery per ticket created."""
    created = api.call("webhook_create", admin_of(tenant_id), body={"url": url, "events": ["ticket.created"]})
    assert created.status == 201, created.body
    for n in range(tickets):
        api.new_ticket(User(tenant_id, "alice"), title=f"t{n}")
    audit_stream.deliver(audit_stream.new_records())
    assert process(deliverer(table_name), receive()) == []
    return str(created.body["webhook_id"])


def deliveries(api: Api, tenant_id: str, webhook_id: str, **query: str) -> Any:
    return api.call("webhook_deliveries", admin_of(tenant_id), ticket_id=webhook_id, query=query)


def test_deliveries_are_listed_newest_first_and_paged(api: Api, audit_stream: StreamHarness, table_name: str) -> None:
    with receivers() as (receiver,):
        webhook_id = delivered_hook(api, audit_stream, table_name, "acme", receiver.url, tickets=3)
        first = deliveries(api, "acme", webhook_id, limit="2")
        assert first.status == 200, first.body
        assert first.body["next_cursor"]
        second = deliveries(api, "acme", webhook_id, limit="2", cursor=first.body["next_cursor"])
        assert second.body["next_cursor"] is None
        items = first.body["items"] + second.body["items"]
        assert len(items) == 3
        assert set(items[0]) == {
            "delivery_id",
            "event_id",
            "type",
            "status",
            "attempts",
            "last_status_code",
            "next_attempt_at",
            "created_at",
            "failure_reason",
        }
        assert [item["delivery_id"] for item in items] == sorted((i["delivery_id"] for i in items), reverse=True)
        times = {r.event["id"]: r.event["timestamp"] for r in receiver.received}
        assert set(times) == {item["event_id"] for item in items}
        listed_times = [times[item["event_id"]] for item in items]
        assert listed_times == sorted(listed_times, reverse=True)  # newest first
        assert {(i["status"], i["attempts"], i["last_status_code"]) for i in items} == {("DELIVERED", 1, 200)}
        assert {item["failure_reason"] for item in items} == {None}  # only a delivery the queue refused has one
        # A cursor of this list is no cursor for another webhook's
        other = api.call("webhook_create", admin_of("acme"), body={"url": receiver.url, "events": ["ticket.created"]})
        reused = deliveries(api, "acme", other.body["webhook_id"], cursor=first.body["next_cursor"])
        assert_error(reused, 400, "INVALID_CURSOR")


def test_redeliver_sends_the_same_event_again_through_the_stream_and_the_queue(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    with receivers() as (receiver,):
        webhook_id = delivered_hook(api, audit_stream, table_name, "acme", receiver.url)
        (delivery,) = deliveries(api, "acme", webhook_id).body["items"]
        path = f"{webhook_id}/{delivery['delivery_id']}"
        response = api.call("webhook_redeliver", admin_of("acme"), ticket_id=path)
        assert response.status == 202, response.body
        (marked,) = deliveries(api, "acme", webhook_id).body["items"]
        assert marked["status"] == "PENDING"
        # The route wrote the mark and nothing else: the record's own status is still the delivery function's
        (before,) = [i for i in all_items(dynamodb, table_name) if i["pk"]["S"].endswith("#DELIVERIES")]
        assert (before["status"]["S"], before["attempts"]["N"]) == ("DELIVERED", "1")
        assert marked["next_attempt_at"] == before["redeliver_requested_at"]["S"]
        # The mark reaches the audit-trail function through its stream filter
        audit_stream.deliver(audit_stream.new_records())
        (record,) = receive()
        message = json.loads(record["body"])
        assert message["redelivery"] is not None
        assert record["attributes"]["MessageDeduplicationId"] != delivery["delivery_id"]  # not deduplicated away
        assert process(deliverer(table_name), [record]) == []
        first, again = receiver.received
        assert (again.headers["webhook-id"], again.body) == (first.headers["webhook-id"], first.body)
        (done,) = deliveries(api, "acme", webhook_id).body["items"]
        assert (done["status"], done["attempts"]) == ("DELIVERED", 2)
        # The delivery function's write removed the mark: the stream brings no second redelivery
        audit_stream.deliver(audit_stream.new_records())
        assert receive() == []
        stored = [i for i in all_items(dynamodb, table_name) if i["pk"]["S"].endswith("#DELIVERIES")]
        assert "redeliver_requested_at" not in stored[0]


def test_a_mark_the_route_did_not_write_queues_nothing_and_lists_nothing_pending(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    # Tenant credentials may set the mark (it is all they may write of a record), to any value:
    # only the route's (a time) counts, anything else never becomes a message.
    with receivers() as (receiver,):
        webhook_id = delivered_hook(api, audit_stream, table_name, "acme", receiver.url)
        (delivery,) = deliveries(api, "acme", webhook_id).body["items"]
        dynamodb.update_item(
            TableName=table_name,
            Key=keys.delivery_key("acme", webhook_id, delivery["delivery_id"]),
            UpdateExpression="SET redeliver_requested_at = :junk",
            ExpressionAttributeValues={":junk": {"S": "x" * 5000}},
        )
        assert deliveries(api, "acme", webhook_id).body["items"] == [delivery]
        audit_stream.deliver(audit_stream.new_records())
        assert receive() == []
        assert len(receiver.received) == 1


def test_unknown_webhooks_and_deliveries_are_404(api: Api, audit_stream: StreamHarness, table_name: str) -> None:
    with receivers() as (receiver,):
        webhook_id = delivered_hook(api, audit_stream, table_name, "acme", receiver.url)
    assert_error(deliveries(api, "acme", "nope"), 404, "WEBHOOK_NOT_FOUND")
    for path, code in (
        (f"{webhook_id}/0000000000000-unknown", "DELIVERY_NOT_FOUND"),
        (f"{webhook_id}/not!valid", "DELIVERY_NOT_FOUND"),
        ("nope/0000000000000-unknown", "WEBHOOK_NOT_FOUND"),
    ):
        assert_error(api.call("webhook_redeliver", admin_of("acme"), ticket_id=path), 404, code)
    member = User("acme", "alice")
    assert_error(api.call("webhook_deliveries", member, ticket_id=webhook_id), 403, "FORBIDDEN")


@pytest.mark.parametrize(("owner", "intruder"), TENANT_PAIRS)
def test_another_tenants_deliveries_are_404_and_untouched(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str, owner: str, intruder: str
) -> None:
    with receivers() as (receiver,):
        webhook_id = delivered_hook(api, audit_stream, table_name, owner, receiver.url)
        (delivery,) = deliveries(api, owner, webhook_id).body["items"]
        assert_error(deliveries(api, intruder, webhook_id), 404, "WEBHOOK_NOT_FOUND")
        path = f"{webhook_id}/{delivery['delivery_id']}"
        assert_error(api.call("webhook_redeliver", admin_of(intruder), ticket_id=path), 404, "WEBHOOK_NOT_FOUND")
        # Even with a webhook of its own under the same id, the intruder reaches only its own partition
        (unchanged,) = deliveries(api, owner, webhook_id).body["items"]
        assert unchanged == delivery
        key = keys.delivery_key(intruder, webhook_id, delivery["delivery_id"])
        assert "Item" not in dynamodb.get_item(TableName=table_name, Key=key)
