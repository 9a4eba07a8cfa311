"""Webhook delivery, in process over moto (table, KMS, SQS FIFO) with real
receivers on 127.0.0.1: from a ticket change through the audit-trail function
and the queue to the delivery function, signed as Standard Webhooks says
(verified with the ``standardwebhooks`` package), retried, recorded, and only
ever to the tenant's own endpoints."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook
from standardwebhooks.webhooks import WebhookVerificationError

from local_stack.lambda_.runtime import LambdaContext
from stack_model.template import template
from support_tickets.core import keys
from support_tickets.webhooks.delivery import HELD_TOO_LONG, MAX_RECEIVES, MAX_VISIBILITY_SECONDS, QueuedMessage
from support_tickets.webhooks.events import RETRY_WINDOW_SECONDS, event_body, queue_message, read_queue_message
from support_tickets.webhooks.post import pinned_post
from support_tickets.webhooks.urls import CheckedUrl
from tests.conftest import WEBHOOK_QUEUE_URL, all_items
from tests.functional.api_harness import Api, User
from tests.functional.conftest import PUBLIC_ADDRESS, TENANT_PAIRS
from tests.functional.stream_harness import StreamHarness, stream_handler
from tests.functional.webhook_harness import (
    HEAD,
    Pki,
    RecordingSqs,
    deliverer,
    disable_webhook,
    process,
    receive,
    receivers,
    trickling,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ALL_TYPES = ["ticket.created", "ticket.updated", "ticket.deleted", "comment.added"]


pytestmark = pytest.mark.usefixtures("local_receivers")


def register(api: Api, tenant_id: str, url: str, events: list[str] | None = None) -> dict[str, Any]:
    body = {"url": url, "events": events or ALL_TYPES}
    response = api.call("webhook_create", User(tenant_id, "root", admin=True), body=body)
    assert response.status == 201, response.body
    return dict(response.body)


def deliveries(dynamodb: DynamoDBClient, table_name: str, tenant_id: str, webhook_id: str) -> list[dict[str, Any]]:
    pk = keys.webhook_deliveries_pk(tenant_id, webhook_id)
    return [
        {name: next(iter(value.values())) for name, value in item.items()}
        for item in all_items(dynamodb, table_name)
        if item["pk"]["S"] == pk
    ]


def webhook_status(dynamodb: DynamoDBClient, table_name: str, tenant_id: str, webhook_id: str) -> str:
    item = dynamodb.get_item(TableName=table_name, Key=keys.webhook_key(tenant_id, webhook_id))["Item"]
    return str(item["status"]["S"])


def verify(secret: str, body: str, headers: Mapping[str, str]) -> Any:
    return StandardWebhook(secret).verify(body, dict(headers))


# ---------------------------------------------------------------- the whole way, by the real handlers
@pytest.mark.parametrize(("tenant", "other"), TENANT_PAIRS)
def test_each_tenant_receives_its_own_four_events_signed(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str, tenant: str, other: str
) -> None:
    with receivers(2) as (mine, theirs):
        hook = register(api, tenant, mine.url)
        their_hook = register(api, other, theirs.url)
        alice, root = User(tenant, "alice"), User(tenant, "root", admin=True)
        ticket_id = api.new_ticket(alice)["ticket_id"]
        assert api.update(alice, ticket_id, {"title": "renamed"}).ok
        assert api.comment(alice, ticket_id, {"body": "hello"}).status == 201
        assert api.delete(root, ticket_id).status == 204
        api.new_ticket(User(other, "bob"), title="theirs")
        audit_stream.deliver(audit_stream.new_records())
        # The delivery function's own handler, as Lambda's SQS event source calls it
        handler = stream_handler("DeliverWebhookFunction")
        response = handler({"Records": receive()}, LambdaContext("DeliverWebhookFunction"))
        assert response == {"batchItemFailures": []}
        # Each receiver got its own tenant's events, every one verified with its secret
        assert [r.event["type"] for r in mine.received] == [
            "ticket.created",
            "ticket.updated",
            "comment.added",
            "ticket.deleted",
        ]
        assert [r.event["type"] for r in theirs.received] == ["ticket.created"]
        for received in mine.received:
            assert verify(hook["secret"], received.body, received.headers)["tenant_id"] == tenant
            assert received.headers["webhook-id"] == received.event["id"]
            with pytest.raises(WebhookVerificationError):
                verify(their_hook["secret"], received.body, received.headers)
        assert verify(their_hook["secret"], theirs.received[0].body, theirs.received[0].headers)["tenant_id"] == other
        # And each delivery is recorded DELIVERED under the tenant's prefix, with the event as sent
        records = deliveries(dynamodb, table_name, tenant, hook["webhook_id"])
        assert sorted(r["status"] for r in records) == ["DELIVERED"] * 4
        assert sorted(r["event"] for r in records) == sorted(r.body for r in mine.received)
        assert all(int(r["attempts"]) == 1 and int(r["last_status_code"]) == 200 for r in records)


def test_during_a_rotation_both_secrets_sign_and_after_it_only_the_new(
    api: Api, audit_stream: StreamHarness, table_name: str
) -> None:
    with receivers() as (receiver,):
        hook = register(api, "acme", receiver.url)
        rotated = api.call("webhook_secret", User("acme", "root", admin=True), ticket_id=hook["webhook_id"]).body
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        records = receive()
        assert deliverer(table_name).process_batch(records) == []
        (received,) = receiver.received
        signatures = received.headers["webhook-signature"].split(" ")
        assert len(signatures) == 2
        assert all(s.startswith("v1,") for s in signatures)
        for secret in (hook["secret"], rotated["secret"]):  # each verifies on its own
            verify(secret, received.body, received.headers)
        # 24 h later the previous secret no longer signs
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        later = deliverer(table_name, clock=lambda: time.time() + 86_401)
        later.process_batch(receive())
        headers = receiver.received[1].headers
        assert len(headers["webhook-signature"].split(" ")) == 1
        received_later = receiver.received[1]
        # (the receiver's clock is today's: check the signature itself, not the timestamp's age)
        assert (
            StandardWebhook(rotated["secret"]).sign(
                headers["webhook-id"], _moment(headers["webhook-timestamp"]), received_later.body
            )
            == headers["webhook-signature"]
        )


def _moment(timestamp: str) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(int(timestamp), UTC)


# ---------------------------------------------------------------- outcomes
def test_a_pending_delivery_to_a_webhook_disabled_since_fails_without_an_attempt(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    with receivers(status=500) as (receiver,):
        hook = register(api, "acme", receiver.url)
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        (record,) = receive()
        assert deliverer(table_name).process_batch([record]) == [record["messageId"]]  # PENDING, to retry
        disable_webhook(dynamodb, table_name, "acme", hook["webhook_id"])
        assert deliverer(table_name).process_batch([record]) == []  # dropped
        assert len(receiver.received) == 1
        (stored,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        assert (stored["status"], int(stored["attempts"])) == ("FAILED", 1)


def test_a_redelivery_to_a_webhook_disabled_since_fails_without_an_attempt_and_clears_the_mark(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    with receivers() as (receiver,):
        hook = register(api, "acme", receiver.url)
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        assert process(deliverer(table_name), receive()) == []
        (stored,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        path = f"{hook['webhook_id']}/{stored['delivery_id']}"
        assert api.call("webhook_redeliver", User("acme", "root", admin=True), ticket_id=path).status == 202
        audit_stream.deliver(audit_stream.new_records())
        (again,) = receive()
        disable_webhook(dynamodb, table_name, "acme", hook["webhook_id"])
        assert deliverer(table_name).process_batch([again]) == []  # dropped
        assert len(receiver.received) == 1
        (settled,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        assert (settled["status"], int(settled["attempts"])) == ("FAILED", 1)
        assert "redeliver_requested_at" not in settled


def test_a_410_disables_the_webhook(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    with receivers(status=410) as (receiver,):
        hook = register(api, "acme", receiver.url)
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        assert deliverer(table_name).process_batch(receive()) == []
        assert webhook_status(dynamodb, table_name, "acme", hook["webhook_id"]) == "DISABLED"
        (record,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        assert (record["status"], int(record["last_status_code"])) == ("FAILED", 410)
        listed = api.call("webhook_list", User("acme", "root", admin=True)).body["items"]
        assert listed[0]["status"] == "DISABLED"


@pytest.mark.parametrize(("status", "hang"), [(302, False), (500, False), (429, False), (200, True)])
def test_failures_are_retried_after_the_backoff_delay(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str, status: int, hang: bool
) -> None:
    with receivers(2) as (redirect_target, _):
        options: dict[str, Any] = {"status": status, "hang": hang}
        if status == 302:
            options["location"] = redirect_target.url
        with receivers(**options) as (receiver,):
            hook = register(api, "acme", receiver.url)
            api.new_ticket(User("acme", "alice"))
            audit_stream.deliver(audit_stream.new_records())
            records = receive()
            sqs = RecordingSqs()
            # A hanging endpoint: the test's timeout is 0.3 s (10 s deployed); without the
            # deadline the call would not return while the receiver holds the line.
            assert deliverer(table_name, sqs=sqs, timeout=0.3).process_batch(records) == [records[0]["messageId"]]
            assert len(receiver.received) == 1
        assert redirect_target.received == []  # a redirect is not followed
        assert sqs.visibility == [5]  # 5 s x 2^0, jitter at its middle
        (record,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        assert (record["status"], int(record["attempts"])) == ("PENDING", 1)
        # (a NULL attribute reads as True here: nothing was answered)
        assert record["last_status_code"] == (True if hang else str(status))
        assert record["next_attempt_at"] > record["created_at"]


def test_the_second_failure_waits_twice_as_long_and_after_26_hours_the_delivery_fails_to_the_dead_letters(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    with receivers(status=503) as (receiver,):
        hook = register(api, "acme", receiver.url)
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        sqs = RecordingSqs()
        records = receive()
        deliverer(table_name, sqs=sqs).process_batch(records)
        sqs.client.change_message_visibility(
            QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=records[0]["receiptHandle"], VisibilityTimeout=0
        )  # the delay passes
        again = receive()
        assert again[0]["attributes"]["ApproximateReceiveCount"] == "2"
        deliverer(table_name, sqs=sqs).process_batch(again)
        assert sqs.visibility == [5, 10]
        sqs.client.change_message_visibility(
            QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=again[0]["receiptHandle"], VisibilityTimeout=0
        )
        # 26 h after the message was sent: the last attempt, then the dead-letter queue
        late = receive()
        assert deliverer(table_name, sqs=sqs, clock=lambda: time.time() + 26 * 3600).process_batch(late) == []
        assert len(receiver.received) == 3
        (parked,) = sqs.dead_letters
        assert parked["MessageBody"] == late[0]["body"]
        (record,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        assert (record["status"], int(record["attempts"]), record["next_attempt_at"]) == (
            "FAILED",
            3,
            True,
        )  # NULL: no next attempt


def test_a_url_that_now_resolves_to_a_private_address_is_refused_at_delivery(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    hook = register(api, "acme", "https://hooks.example.com/in")  # public when registered
    api.new_ticket(User("acme", "alice"))
    audit_stream.deliver(audit_stream.new_records())
    posted: list[CheckedUrl] = []

    def post(checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        posted.append(checked)
        return 200

    records = receive()
    rebinding = deliverer(table_name, resolve=lambda host, port: ["169.254.169.254"], post=post)
    assert rebinding.process_batch(records) == [records[0]["messageId"]]
    assert posted == []
    (record,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
    assert record["status"] == "PENDING"


def test_the_post_goes_to_the_address_the_check_resolved(
    api: Api, audit_stream: StreamHarness, table_name: str
) -> None:
    register(api, "acme", "https://hooks.example.com/in?x=1")
    api.new_ticket(User("acme", "alice"))
    audit_stream.deliver(audit_stream.new_records())
    lookups: list[str] = []
    posted: list[CheckedUrl] = []

    def resolve(host: str, port: int) -> list[str]:
        lookups.append(host)
        return [PUBLIC_ADDRESS]

    def post(checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        posted.append(checked)
        return 204

    assert deliverer(table_name, resolve=resolve, post=post).process_batch(receive()) == []
    (checked,) = posted
    assert lookups == ["hooks.example.com"]  # one lookup: the check's, then that address
    assert (checked.host, checked.port, checked.addresses) == ("hooks.example.com", 443, (PUBLIC_ADDRESS,))


def test_pinned_post_connects_to_the_checked_address_and_follows_no_redirect() -> None:
    with receivers(2) as (target, elsewhere):
        target.status, target.location = 301, elsewhere.url
        port = int(target.url.split(":")[2].split("/")[0])
        # The URL names a host that resolves nowhere: only the pinned address is used
        checked = CheckedUrl(f"http://127.0.0.1:{port}/hook", "127.0.0.1", port, ("127.0.0.1",))
        assert pinned_post(checked, {"webhook-id": "x"}, b"{}", 2.0) == 301
        assert len(target.received) == 1
        assert elsewhere.received == []


def test_a_receiver_that_trickles_its_answer_is_a_failed_attempt_at_the_deadline(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    with trickling(HEAD) as slow:  # the whole head would take ~0.9 s, a byte every 20 ms
        hook = register(api, "acme", slow.checked.url)
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        records = receive()
        # Read whole, the head is a 204 and the delivery DELIVERED: a failed attempt shows
        # the deadline cut it (no wall-clock bound: a loaded machine stretches any).
        assert deliverer(table_name, timeout=0.25).process_batch(records) == [records[0]["messageId"]]
    (record,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
    # (last_status_code True: the flattened {"NULL": true}, nothing answered)
    assert (record["status"], record["last_status_code"], int(record["attempts"])) == ("PENDING", True, 1)


@pytest.fixture(scope="module")
def pki() -> Pki:
    return Pki.make()


@pytest.mark.parametrize(("certified", "delivered"), [("hooks.example.test", True), ("other.example.test", False)])
def test_https_deliveries_check_the_certificate_against_the_webhooks_host(
    api: Api,
    audit_stream: StreamHarness,
    dynamodb: DynamoDBClient,
    table_name: str,
    pki: Pki,
    tmp_path: object,
    certified: str,
    delivered: bool,
) -> None:
    seen: list[str | None] = []
    with receivers(tls=pki.server_context(tmp_path, certified, seen)) as (receiver,):
        hook = register(api, "acme", f"https://hooks.example.test:{receiver.port}/in")
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())

        def post(checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
            # The check passed on the "public" address the test's resolver gave; the receiver is on
            # 127.0.0.1, so the test dials it there, with its CA: the name checked is still the URL's.
            assert checked.addresses == (PUBLIC_ADDRESS,)
            local = CheckedUrl(checked.url, checked.host, checked.port, ("127.0.0.1",))
            return pinned_post(local, headers, body, timeout, tls_context=pki.client_context())

        failed = deliverer(table_name, post=post, resolve=lambda host, port: [PUBLIC_ADDRESS]).process_batch(receive())
        assert seen == ["hooks.example.test"]
        (record,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        if delivered:
            assert failed == []
            assert (record["status"], int(record["last_status_code"])) == ("DELIVERED", 200)
            (received,) = receiver.received
            StandardWebhook(hook["secret"]).verify(received.body, received.headers)
        else:
            assert len(failed) == 1
            assert (record["status"], record["last_status_code"]) == ("PENDING", True)  # NULL: nothing answered
            assert receiver.received == []


# ---------------------------------------------------------------- independence and duplicates
def test_a_hanging_endpoint_of_one_tenant_does_not_delay_another_tenants_delivery(
    api: Api, audit_stream: StreamHarness, table_name: str
) -> None:
    """Both tenants' messages in one batch, the hanging one first: the other tenant's is
    delivered while the hanging endpoint still holds its request (it is let go only then,
    and answers 500), not after that attempt ends. No clock: a loaded machine can't fail it."""
    with receivers(hang=True, status=500) as (hanging,), receivers() as (prompt,):
        register(api, "slow", hanging.url)
        register(api, "fast", prompt.url)
        api.new_ticket(User("slow", "alice"))
        api.new_ticket(User("fast", "bob"))
        audit_stream.deliver(audit_stream.new_records())
        records = sorted(receive(), key=lambda r: json.loads(r["body"])["tenant_id"] != "slow")
        assert [json.loads(r["body"])["tenant_id"] for r in records] == ["slow", "fast"]  # one batch
        held_when_delivered: list[bool] = []

        def let_go_once_delivered() -> None:
            deadline = time.monotonic() + 30
            while not (prompt.received and hanging.received) and time.monotonic() < deadline:
                time.sleep(0.01)
            held_when_delivered.append(len(prompt.received) == 1 and hanging.answered == 0)
            hanging.released.set()

        watcher = threading.Thread(target=let_go_once_delivered)
        watcher.start()
        failed = deliverer(table_name, timeout=60.0).process_batch(records)
        watcher.join()
        assert len(prompt.received) == 1
        assert held_when_delivered == [True]  # delivered while the other attempt was under way
        assert failed == [records[0]["messageId"]]


def test_a_delivered_event_is_not_sent_again_but_a_redelivery_is_with_the_same_id(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    with receivers() as (receiver,):
        hook = register(api, "acme", receiver.url)
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        (record,) = receive()
        assert deliverer(table_name).process_batch([record]) == []
        # The same message again (past SQS's deduplication window): skipped
        assert deliverer(table_name).process_batch([record]) == []
        assert len(receiver.received) == 1
        # A redelivery of the same delivery: sent, same webhook-id, same body
        event, _, routing = read_queue_message(record["body"])
        body = queue_message(event, {**routing, "redelivery": "2026-11-25T12:00:00.000Z"})
        assert deliverer(table_name).process_batch([{**record, "body": body}]) == []
        first, again = receiver.received
        assert (again.headers["webhook-id"], again.body) == (first.headers["webhook-id"], first.body)
        (stored,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        assert int(stored["attempts"]) == 2


def test_nothing_is_delivered_after_the_webhook_is_deleted(
    api: Api, audit_stream: StreamHarness, table_name: str
) -> None:
    with receivers() as (receiver,):
        hook = register(api, "acme", receiver.url)
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        records = receive()
        assert api.call("webhook_delete", User("acme", "root", admin=True), ticket_id=hook["webhook_id"]).status == 204
        assert deliverer(table_name).process_batch(records) == []
        assert receiver.received == []


def test_a_message_naming_another_tenant_in_its_event_is_never_sent(
    api: Api, audit_stream: StreamHarness, table_name: str
) -> None:
    with receivers() as (receiver,):
        register(api, "1", receiver.url)
        api.new_ticket(User("1", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        (record,) = receive()
        _, event, routing = read_queue_message(record["body"])
        forged = queue_message(event_body({**event, "tenant_id": "10"}), routing)
        sqs = RecordingSqs()
        assert deliverer(table_name, sqs=sqs).process_batch([{**record, "body": forged}]) == []
        assert receiver.received == []
        assert len(sqs.dead_letters) == 1


def test_a_tenant_starts_at_most_its_tiers_deliveries_a_second(
    api: Api, audit_stream: StreamHarness, table_name: str
) -> None:
    with receivers() as (receiver,):
        register(api, "busy", receiver.url)
        for n in range(3):  # three tickets: three groups, one batch
            api.new_ticket(User("busy", "alice"), title=f"t{n}")
        audit_stream.deliver(audit_stream.new_records())
        records = receive()
        sqs = RecordingSqs()
        limited = deliverer(table_name, sqs=sqs, tier_rates={"basic": 2}, clock=lambda: 1_800_000_000.5)
        failed = limited.process_batch(records)
        # Two of this second's slots taken, the third message back in 2-3 s, unattempted
        assert len(receiver.received) == 2
        assert len(failed) == 1
        assert len(sqs.visibility) == 1
        assert 2 <= sqs.visibility[0] <= 3
        # The next second, it goes
        (late,) = [r for r in records if r["messageId"] in failed]
        later = deliverer(table_name, tier_rates={"basic": 2}, clock=lambda: 1_800_000_001.5)
        assert later.process_batch([late]) == []
        assert len(receiver.received) == 3


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        json.dumps({"tenant_id": "acme"}),
        json.dumps({"tenant_id": "acme", "webhook_id": 7, "delivery_id": "1-a", "ticket_id": "t", "event": "{}"}),
        json.dumps(
            {
                "tenant_id": "acme",
                "webhook_id": "wh",
                "delivery_id": "1-a",
                "ticket_id": "t",
                "event": json.dumps({"id": "e", "type": "ticket.exploded", "tenant_id": "acme"}),
            }
        ),
    ],
)
def test_a_malformed_message_goes_to_the_dead_letters_and_fails_nothing(table_name: str, body: str) -> None:
    sqs = RecordingSqs()
    record = {
        "messageId": "m1",
        "receiptHandle": "r1",
        "body": body,
        "attributes": {"MessageGroupId": "acme#t#wh", "MessageDeduplicationId": "d1", "ApproximateReceiveCount": "1"},
    }
    assert deliverer(table_name, sqs=sqs).process_batch([record]) == []
    (parked,) = sqs.dead_letters
    assert parked["MessageBody"] == body


def test_secrets_and_event_data_never_reach_the_logs(
    api: Api,
    audit_stream: StreamHarness,
    table_name: str,
    log_lines: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG")
    with receivers(status=500) as (receiver,):
        hook = register(api, "acme", receiver.url)
        api.new_ticket(User("acme", "alice"), title="Sensitive printer title")
        audit_stream.deliver(audit_stream.new_records())
        records = receive()
        log_lines()  # what the set-up printed: not the delivery's
        caplog.clear()
        deliverer(table_name).process_batch(records)  # a failed attempt: logged
        assert len(receiver.received) == 1
    ours = [r for r in caplog.records if not r.name.startswith(("botocore", "boto3", "urllib3"))]  # the SDK's DEBUG
    logged = json.dumps(log_lines()) + "\n".join(f"{r.getMessage()} {r.__dict__}" for r in ours)
    assert "webhook attempt failed" in logged  # the function did log
    assert hook["secret"] not in logged
    assert hook["secret"].removeprefix("whsec_") not in logged
    assert "Sensitive printer title" not in logged


# ---------------------------------------------------------------- held by its bounds for long
def test_a_held_messages_receives_outlast_the_retry_window(table_name: str) -> None:
    # SQS dead-letters a message on its 100th receive without invoking the function: a message
    # its tenant's bounds hold again and again must not run out of receives before the window.
    sent_at = 1_800_000_000.0
    now = [sent_at]
    held = deliverer(table_name, clock=lambda: now[0])
    for receive_count in range(1, MAX_RECEIVES - 1):
        queued = QueuedMessage("m", "r", "{}", "g", "d", receive_count=receive_count, sent_at=sent_at)
        delay = held._bound_delay(queued)
        assert 1 <= delay <= MAX_VISIBILITY_SECONDS
        now[0] += delay
    # The last receive the function sees comes after the window: every held message meets its end there.
    assert now[0] - sent_at >= RETRY_WINDOW_SECONDS


def test_the_queues_max_receive_count_is_the_one_the_delivery_function_plans_for() -> None:
    queue = template()["Resources"]["WebhookEventsQueue"]["Properties"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == MAX_RECEIVES


def test_on_its_last_receive_a_message_still_held_by_its_tenants_bounds_fails_visibly_unattempted(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    with receivers() as (receiver,):
        hook = register(api, "acme", receiver.url)
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        (record,) = receive()
        # The fan-out's record of the queued delivery: PENDING, no attempt
        queued = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        assert [(stored["status"], int(stored["attempts"])) for stored in queued] == [("PENDING", 0)]
        sqs = RecordingSqs()
        no_slot = deliverer(table_name, sqs=sqs, tier_in_flight={"basic": 0})
        # Held before its last receive: back later, nothing recorded.
        assert no_slot.process_batch([record]) == [record["messageId"]]
        assert deliveries(dynamodb, table_name, "acme", hook["webhook_id"]) == queued
        # The 99th receive (the last before SQS's redrive on the 100th): given up with a record.
        last = {**record, "attributes": {**record["attributes"], "ApproximateReceiveCount": str(MAX_RECEIVES - 1)}}
        assert no_slot.process_batch([last]) == []
        assert receiver.received == []
        (parked,) = sqs.dead_letters
        assert parked["MessageBody"] == record["body"]
        (stored,) = deliveries(dynamodb, table_name, "acme", hook["webhook_id"])
        assert (stored["status"], int(stored["attempts"]), stored["failure_reason"]) == ("FAILED", 0, HELD_TOO_LONG)
        assert stored["event"] == read_queue_message(record["body"])[0]  # the bytes it would send, kept to redeliver


# ---------------------------------------------------------------- the largest events, at the webhook limit
# One description per character class, at the API's 10,000 characters, as a client sends it (UTF-8
# JSON: 10,000 emoji are 40 KB, under the API's 64 KiB; escaped they would be 120 KB):
LARGEST = {
    "cjk": ("\u4e2d" * 10_000, "\u6587" * 10_000),  # 3 bytes each in UTF-8
    "emoji": ("\U0001f600" * 10_000, "\U0001f389" * 10_000),  # astral plane: 4 bytes, 12 escaped
    "escaped": ('"\\' * 5_000, '\\"' * 5_000),  # JSON writes each as 2 bytes
    "combining": ("e\u0301" * 5_000, "a\u0308" * 5_000),  # a base and a combining mark, never normalised
    "control": ("\x01\x1f" * 5_000, "\x02\x1e" * 5_000),  # JSON writes each as \u00XX: 6 bytes
}


def test_the_largest_events_of_every_character_class_reach_all_ten_webhooks_signed_and_whole(
    api: Api, audit_stream: StreamHarness, table_name: str
) -> None:
    """A tenant at its limit of 10 webhooks; for each character class a ticket created with a
    10,000-character description and updated to another (the update's event holds the
    description three times: data, the change's old and new). Every one of the 100
    deliveries arrives once, its signature verifies with its webhook's secret, and its event's
    ``data`` is the ticket as the API shows it."""
    alice, root = User("acme", "alice"), User("acme", "root", admin=True)
    with receivers(10) as endpoints:
        secrets = {endpoint.url: register(api, "acme", endpoint.url)["secret"] for endpoint in endpoints}
        assert api.call("webhook_create", root, body={"url": endpoints[0].url, "events": ALL_TYPES}).status == 409
        tickets: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for name, (old, new) in LARGEST.items():
            raw = json.dumps({"title": name, "description": old}, ensure_ascii=False)
            created = api.call("create", alice, raw_body=raw)
            assert created.status == 201, (name, created.body)
            raw = json.dumps({"description": new}, ensure_ascii=False)
            updated = api.call("update", alice, ticket_id=created.body["ticket_id"], raw_body=raw)
            assert updated.status == 200, (name, updated.body)
            assert api.summary(alice, created.body["ticket_id"]).body == updated.body
            tickets[created.body["ticket_id"]] = (dict(created.body), dict(updated.body))
        assert audit_stream.invoke(audit_stream.new_records()) == []
        # The delivery function over the queue until it is empty (nothing fails: every receiver answers 200)
        delivering = deliverer(table_name)
        while records := receive():
            for start in range(0, len(records), 10):
                assert process(delivering, records[start : start + 10]) == []
        for endpoint in endpoints:
            assert len(endpoint.received) == 2 * len(LARGEST)
            for received in endpoint.received:
                event = verify(secrets[endpoint.url], received.body, received.headers)
                as_created, as_updated = tickets[event["data"]["ticket_id"]]
                expected = as_created if event["type"] == "ticket.created" else as_updated
                assert {name: value for name, value in event["data"].items() if name != "changes"} == expected
                if event["type"] == "ticket.updated":
                    old, new = as_created["description"], as_updated["description"]
                    change = {"field": "description", "old": old, "new": new}
                    assert event["data"]["changes"] == [change]
            assert sorted(received.event["type"] for received in endpoint.received) == sorted(
                ["ticket.created", "ticket.updated"] * len(LARGEST)
            )
