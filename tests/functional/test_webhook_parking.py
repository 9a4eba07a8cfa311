"""A failing webhook's messages in the queue are bounded: retry slots, then the
lot, drained in each ticket's order (support_tickets.webhooks.parking).

The delivery function in process over moto (table, KMS, SQS FIFO), a receiver on
127.0.0.1 (the tenant tests: endpoints in process, :class:`Endpoints`) and the
test's clock: :class:`ClockedSqs` holds a message whose visibility the function
changed until the test's clock passes the delay, and counts those messages,
which are SQS's messages *in flight* (a FIFO queue has at most 120,000 of them,
shared by every tenant). Messages are queued as the fan-out queues them, several
events of one ticket in one message group.

Tenants ``1`` and ``10`` (one id a prefix of the other) where data is touched."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
import pytest

from support_tickets.core import keys
from support_tickets.webhooks.delivery import LOT_FULL, MAX_RECEIVES, Deliverer, QueuedMessage
from support_tickets.webhooks.events import delivery_id, delivery_message, event_body, message_group
from support_tickets.webhooks.parking import PARKED_TOO_LONG, DrainToken
from support_tickets.webhooks.urls import CheckedUrl
from tests.conftest import REGION, WEBHOOK_QUEUE_URL, all_items
from tests.functional.api_harness import Api, User
from tests.functional.conftest import TENANT_PAIRS
from tests.functional.stream_harness import StreamHarness
from tests.functional.webhook_harness import (
    Received,
    Receiver,
    RecordingSqs,
    receive,
    receivers,
    stored_deliveries,
)
from tests.functional.webhook_harness import deliverer as harness_deliverer

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = pytest.mark.usefixtures("local_receivers")


class ClockedSqs(RecordingSqs):
    """The function's SQS client on the test's clock: a message whose visibility it
    changes waits (really: an hour) until :meth:`advance` passes its delay."""

    def __init__(self) -> None:
        super().__init__()
        self.now = time.time()  # SentTimestamp is SQS's (real) clock: the test's starts there
        self.waiting: dict[str, float] = {}  # receipt handle -> when it is due, on the test's clock

    def clock(self) -> float:
        return self.now

    def change_message_visibility(self, **kwargs: Any) -> Any:
        self.visibility.append(kwargs["VisibilityTimeout"])
        self.waiting[kwargs["ReceiptHandle"]] = self.now + kwargs["VisibilityTimeout"]
        return self.client.change_message_visibility(**{**kwargs, "VisibilityTimeout": 3600})

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for receipt, due in list(self.waiting.items()):
            if due <= self.now:
                self.client.change_message_visibility(
                    QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=receipt, VisibilityTimeout=0
                )
                del self.waiting[receipt]


def deliverer(table_name: str, sqs: ClockedSqs, **options: Any) -> Deliverer:
    return harness_deliverer(table_name, sqs=sqs, clock=sqs.clock, **options)


def run_round(deliverer: Deliverer, sqs: ClockedSqs) -> int:
    """Lambda's event source over what is visible now: each batch invoked, the messages
    not reported deleted, those reported without a visibility change (a failed group's
    followers, unattempted) visible again at once; how many messages were received."""
    records = receive()
    for start in range(0, len(records), 10):
        batch = records[start : start + 10]
        failed = set(deliverer.process_batch(batch))
        for record in batch:
            if record["messageId"] not in failed:
                sqs.client.delete_message(QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=record["receiptHandle"])
            elif record["receiptHandle"] not in sqs.waiting:
                sqs.client.change_message_visibility(
                    QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=0
                )
    return len(records)


def register(api: Api, tenant_id: str, url: str) -> str:
    body = {"url": url, "events": ["ticket.created", "ticket.updated"]}
    response = api.call("webhook_create", User(tenant_id, "root", admin=True), body=body)
    assert response.status == 201, response.body
    return str(response.body["webhook_id"])


class Events:
    """Events of a tenant's tickets queued for one webhook as the fan-out queues them."""

    def __init__(self, tenant_id: str, webhook_id: str) -> None:
        self.tenant_id = tenant_id
        self.webhook_id = webhook_id
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.millis = 1_790_000_000_000
        self.sent: list[str] = []
        self.bodies: dict[str, str] = {}

    def queue(self, ticket_id: str, version: int) -> str:
        """One event of ``ticket_id`` (its ``version``); its event id."""
        self.millis += 1000
        event_id = f"{ticket_id}-v{version}"
        at = f"{json.dumps(self.millis)}"
        timestamp = _iso(self.millis)
        event = {
            "id": event_id,
            "type": "ticket.created" if version == 1 else "ticket.updated",
            "timestamp": timestamp,
            "tenant_id": self.tenant_id,
            # Text SQS and the signature count in UTF-8 bytes: the body must come back byte for byte.
            "data": {"ticket_id": ticket_id, "version": version, "at": at, "title": "打印机着火 🔥 é"},
        }
        delivery = delivery_id(timestamp, event_id, self.webhook_id)
        self.bodies[event_id] = event_body(event)
        self.sqs.send_message(
            QueueUrl=WEBHOOK_QUEUE_URL,
            MessageBody=delivery_message(
                tenant_id=self.tenant_id,
                webhook_id=self.webhook_id,
                delivery=delivery,
                ticket_id=ticket_id,
                body=event_body(event),
            ),
            MessageGroupId=message_group(self.tenant_id, ticket_id, self.webhook_id),
            MessageDeduplicationId=delivery,
        )
        self.sent.append(event_id)
        return event_id


def _iso(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def received_ids(receiver: Receiver | Endpoint, since: int = 0) -> list[str]:
    """The event ids of the requests ``receiver`` got, from its ``since``-th on."""
    return [str(request.event["id"]) for request in receiver.received[since:]]


def parking_items(dynamodb: DynamoDBClient, table_name: str) -> Iterator[dict[str, Any]]:
    return (item for item in all_items(dynamodb, table_name) if item["pk"]["S"].endswith("#PARKED"))


def lot(dynamodb: DynamoDBClient, table_name: str, tenant_id: str, webhook_id: str) -> list[str]:
    pk = keys.webhook_parked_pk(tenant_id, webhook_id)
    return [
        item["sk"]["S"]
        for item in parking_items(dynamodb, table_name)
        if item["pk"]["S"] == pk and item["sk"]["S"].startswith(keys.PARKED_SK_PREFIX)
    ]


def circuit(dynamodb: DynamoDBClient, table_name: str, tenant_id: str, webhook_id: str) -> dict[str, Any]:
    item = dynamodb.get_item(TableName=table_name, Key=keys.webhook_circuit_key(tenant_id, webhook_id)).get("Item")
    return {name: next(iter(value.values())) for name, value in (item or {}).items()}


def first_arrivals(ids: list[str]) -> list[str]:
    seen: list[str] = []
    for event_id in ids:
        if event_id not in seen:
            seen.append(event_id)
    return seen


def timing_out(checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
    """An endpoint that never answers, as the function sees it once its deadline has passed."""
    raise TimeoutError("timed out")


@dataclass
class Endpoint:
    """A webhook's endpoint reached in process: it answers ``status`` at once and keeps each request."""

    url: str
    status: int
    received: list[Received] = field(default_factory=list)


class Endpoints:
    """The function's POST to the test's endpoints, by URL. What the tenant tests judge is
    then the function's logic alone: through a socket, a POST its receiver answers at once
    can still miss the deliverer's 2 s deadline on a machine starved of CPU, and that
    attempt is rightly failed (with no retry slot, parked: the other tenant's circuit
    showed ``parked`` 1 under ``make test-deep``)."""

    def __init__(self, *statuses: int) -> None:
        # Nothing listens there: no request leaves the process.
        self.all = [Endpoint(f"http://127.0.0.1:{9000 + n}/hook", status) for n, status in enumerate(statuses)]

    def __call__(self, checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        (endpoint,) = (endpoint for endpoint in self.all if endpoint.url == checked.url)
        sent = {name.lower(): value for name, value in headers.items()}
        endpoint.received.append(Received(urlsplit(checked.url).path, sent, body.decode(), time.monotonic()))
        return endpoint.status


@dataclass(frozen=True)
class FailingWebhook:
    """Tenant "acme"'s webhook at a receiver answering 500 (until a test changes its
    status), the function's SQS on the test's clock, and the webhook's events."""

    receiver: Receiver
    hook: str
    sqs: ClockedSqs
    events: Events
    table_name: str

    def deliverer(self, **options: Any) -> Deliverer:
        return deliverer(self.table_name, self.sqs, **options)


@pytest.fixture
def failing(api: Api, table_name: str) -> Iterator[FailingWebhook]:
    with receivers(status=500) as (receiver,):
        hook = register(api, "acme", receiver.url)
        yield FailingWebhook(receiver, hook, ClockedSqs(), Events("acme", hook), table_name)


# ---------------------------------------------------------------- the bound
@pytest.mark.parametrize("hanging", [False, True], ids=["answering-500", "hanging"])
def test_a_failing_webhooks_messages_in_flight_stay_within_its_retry_slots_and_none_is_lost(
    failing: FailingWebhook, dynamodb: DynamoDBClient, table_name: str, hanging: bool
) -> None:
    """Before: every failing ticket's message waited in the queue, in flight, for up to
    26 h (a steady flow filled SQS's 120,000 for every tenant)."""
    slots = 3
    hook, sqs, events = failing.hook, failing.sqs, failing.events
    options: dict[str, Any] = {"post": timing_out} if hanging else {}
    function = failing.deliverer(retry_slots=slots, **options)
    most_in_flight = 0
    for wave in range(3):
        for ticket in range(6):
            events.queue(f"T{wave}x{ticket}", 1)
        for _ in range(2):
            run_round(function, sqs)
            most_in_flight = max(most_in_flight, len(sqs.waiting))
            sqs.advance(400)
    # Its retry slots, plus the drain's token: whatever the flow of events.
    assert most_in_flight <= slots + 1
    assert len(events.sent) == 18
    parked = lot(dynamodb, table_name, "acme", hook)
    assert int(circuit(dynamodb, table_name, "acme", hook)["parked"]) == len(parked)
    # Every event is in the lot or waiting in the queue, each shown PENDING: none dropped.
    records = stored_deliveries(dynamodb, table_name, "acme", hook)
    assert len(records) == 18
    assert {record["status"] for record in records} == {"PENDING"}
    attributes = sqs.client.get_queue_attributes(
        QueueUrl=WEBHOOK_QUEUE_URL, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    visible = int(attributes["ApproximateNumberOfMessages"])  # sent back, not received yet
    assert len(parked) + visible + len(sqs.waiting) - 1 == 18
    assert sqs.dead_letters == []


# ---------------------------------------------------------------- order and recovery
def test_parked_deliveries_go_out_in_each_tickets_order_once_the_endpoint_answers(
    failing: FailingWebhook, dynamodb: DynamoDBClient, table_name: str
) -> None:
    receiver, hook, sqs, events = failing.receiver, failing.hook, failing.sqs, failing.events
    function = failing.deliverer(retry_slots=2)
    for version in (1, 2, 3):
        for ticket in ("A", "B", "C", "D"):
            events.queue(ticket, version)
    run_round(function, sqs)
    assert lot(dynamodb, table_name, "acme", hook)  # two tickets' heads held slots; the rest parked
    for ticket in ("E", "F"):  # new events while the lot holds some: behind them
        events.queue(ticket, 1)
    run_round(function, sqs)
    receiver.status, failed_attempts = 204, len(receiver.received)
    for _ in range(12):
        sqs.advance(61)
        run_round(function, sqs)
    delivered = first_arrivals(received_ids(receiver, since=failed_attempts))
    assert sorted(delivered) == sorted(events.sent)
    for ticket in "ABCDEF":
        mine = [event_id for event_id in delivered if event_id.startswith(f"{ticket}-")]
        assert mine == sorted(mine), mine  # v1, v2, v3
    assert {record["status"] for record in stored_deliveries(dynamodb, table_name, "acme", hook)} == {"DELIVERED"}
    # Parked and sent back, each body is what the fan-out queued, byte for byte (what was signed).
    for request in receiver.received[failed_attempts:]:
        assert request.body == events.bodies[str(request.event["id"])]
    assert lot(dynamodb, table_name, "acme", hook) == []
    state = circuit(dynamodb, table_name, "acme", hook)
    assert (int(state["parked"]), state["token_active"]) == (0, False)
    assert receive() == []


def test_a_message_queued_before_its_group_was_sent_back_goes_behind_the_message_sent_back(
    failing: FailingWebhook, dynamodb: DynamoDBClient, table_name: str
) -> None:
    """The fan-out queued v2 while v1 was parked; the drain sent v1 back (to the back of
    the group, behind v2) before v2 was received. Before: v2 went out first."""
    receiver, hook, sqs, events = failing.receiver, failing.hook, failing.sqs, failing.events
    function = failing.deliverer(retry_slots=0)
    first = events.queue("A", 1)
    run_round(function, sqs)  # v1 fails, no slot: parked; the drain's token queued
    assert len(lot(dynamodb, table_name, "acme", hook)) == 1
    second = events.queue("A", 2)
    records = receive()
    (token,) = [r for r in records if DrainToken.parse(r["body"])]
    (late,) = [r for r in records if not DrainToken.parse(r["body"])]
    receiver.status, failed_attempts = 204, len(receiver.received)
    sqs.advance(31)
    # The token is due: v1 goes back to the queue while v2 is still unseen by the function.
    assert function.process_batch([token]) == [token["messageId"]]
    assert lot(dynamodb, table_name, "acme", hook) == []
    sqs.client.change_message_visibility(
        QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=late["receiptHandle"], VisibilityTimeout=0
    )
    for _ in range(6):
        run_round(function, sqs)
        sqs.advance(61)
    assert first_arrivals(received_ids(receiver, since=failed_attempts)) == [first, second]


# ---------------------------------------------------------------- the retry window, a deleted webhook
def test_a_parked_delivery_whose_retry_window_passed_is_failed_with_its_reason_and_redeliverable(
    failing: FailingWebhook, dynamodb: DynamoDBClient, table_name: str
) -> None:
    receiver, hook, sqs, events = failing.receiver, failing.hook, failing.sqs, failing.events
    events.queue("A", 1)
    function = failing.deliverer(retry_slots=0)
    run_round(function, sqs)  # parked; its drain's first release due in 30 s
    sqs.advance(27 * 3600)  # 27 h later: past the 26 h since the fan-out queued it
    run_round(function, sqs)
    (record,) = stored_deliveries(dynamodb, table_name, "acme", hook)
    assert (record["status"], record["failure_reason"], int(record["attempts"])) == ("FAILED", PARKED_TOO_LONG, 1)
    assert "event" in record  # kept: POST .../redeliver sends it again
    assert len(receiver.received) == 1
    assert lot(dynamodb, table_name, "acme", hook) == []


def test_a_deleted_webhooks_parked_deliveries_are_failed_not_sent(
    api: Api, failing: FailingWebhook, dynamodb: DynamoDBClient, table_name: str
) -> None:
    receiver, hook, sqs, events = failing.receiver, failing.hook, failing.sqs, failing.events
    function = failing.deliverer(retry_slots=0)
    for ticket in ("A", "B"):
        events.queue(ticket, 1)
    run_round(function, sqs)
    assert len(lot(dynamodb, table_name, "acme", hook)) == 2
    # A failed and was parked; B was attempted too, or parked behind A unattempted if A's
    # park came first (the batch's groups run at once).
    attempted = len(receiver.received)
    assert attempted in (1, 2)
    response = api.call("webhook_delete", User("acme", "root", admin=True), ticket_id=hook)
    assert response.status == 204, response.body
    receiver.status = 204
    for _ in range(3):
        sqs.advance(61)
        run_round(function, sqs)
    assert len(receiver.received) == attempted  # nothing after the delete
    assert lot(dynamodb, table_name, "acme", hook) == []
    assert {record["status"] for record in stored_deliveries(dynamodb, table_name, "acme", hook)} == {"FAILED"}


# ---------------------------------------------------------------- the token
def test_the_drain_hands_over_to_a_new_token_before_sqs_would_dead_letter_it(
    failing: FailingWebhook, dynamodb: DynamoDBClient, table_name: str
) -> None:
    hook, sqs, events = failing.hook, failing.sqs, failing.events
    function = failing.deliverer(retry_slots=0)
    events.queue("A", 1)
    run_round(function, sqs)
    (record,) = receive()
    token = DrainToken.parse(record["body"])
    assert token is not None
    worn = QueuedMessage.of_record(record)
    worn = QueuedMessage(**{**{f: getattr(worn, f) for f in worn.__slots__}, "receive_count": MAX_RECEIVES - 2})
    assert function.deliver(worn) == "drain: token renewed"
    sqs.client.delete_message(QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=record["receiptHandle"])
    (renewed,) = receive()
    assert DrainToken.parse(renewed["body"]) == DrainToken("acme", hook, token.generation + 1)
    assert int(circuit(dynamodb, table_name, "acme", hook)["token"]) == token.generation + 1
    # The old one, should it come back, ends without doing anything.
    assert function.deliver(QueuedMessage.of_record(record)) == "drain: replaced"


# ---------------------------------------------------------------- tenants
@pytest.mark.parametrize(("tenant", "other"), TENANT_PAIRS)
def test_one_tenants_parked_webhook_never_holds_or_touches_another_tenants(
    api: Api, dynamodb: DynamoDBClient, table_name: str, tenant: str, other: str
) -> None:
    endpoints = Endpoints(500, 204)
    failing, answering = endpoints.all
    hook = register(api, tenant, failing.url)
    theirs = register(api, other, answering.url)
    sqs = ClockedSqs()
    function = deliverer(table_name, sqs, retry_slots=0, post=endpoints)
    mine, others = Events(tenant, hook), Events(other, theirs)
    for ticket in ("A", "B", "C"):
        mine.queue(ticket, 1)
    run_round(function, sqs)
    assert len(lot(dynamodb, table_name, tenant, hook)) == 3
    for ticket in ("A", "B", "C"):
        others.queue(ticket, 1)
    run_round(function, sqs)
    assert sorted(received_ids(answering)) == sorted(others.sent)  # at once, not parked
    assert circuit(dynamodb, table_name, other, theirs) == {}
    prefix = keys.tenant_prefix(tenant)
    assert {item["pk"]["S"] for item in parking_items(dynamodb, table_name)} == {keys.webhook_parked_pk(tenant, hook)}
    assert all(item["pk"]["S"].startswith(prefix) for item in parking_items(dynamodb, table_name))


def test_a_lot_whose_items_expired_uncounted_is_recounted_and_its_webhook_delivers_again(
    failing: FailingWebhook, dynamodb: DynamoDBClient, table_name: str
) -> None:
    """A parked item's TTL (30 days after its event) deletes it without the drain counting
    it out. Before: the count stayed above 0 and every new message was parked for good."""
    receiver, hook, sqs, events = failing.receiver, failing.hook, failing.sqs, failing.events
    function = failing.deliverer(retry_slots=0)
    events.queue("A", 1)
    run_round(function, sqs)
    (parked_sk,) = lot(dynamodb, table_name, "acme", hook)
    dynamodb.delete_item(
        TableName=table_name, Key={"pk": {"S": keys.webhook_parked_pk("acme", hook)}, "sk": {"S": parked_sk}}
    )  # as its TTL would
    receiver.status, failed_attempts = 204, len(receiver.received)
    for _ in range(3):
        sqs.advance(61)
        run_round(function, sqs)
    assert int(circuit(dynamodb, table_name, "acme", hook)["parked"]) == 0
    later = events.queue("B", 1)
    run_round(function, sqs)
    assert received_ids(receiver, since=failed_attempts) == [later]


class FailingFirst:
    """The POST: 500 for the next ``failures`` attempts, then 204; the event ids delivered, in order."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.delivered: list[str] = []

    def __call__(self, checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        if self.failures > 0:
            self.failures -= 1
            return 500
        self.delivered.append(str(headers["webhook-id"]))
        return 204


def test_a_message_sent_back_with_an_earlier_one_that_is_parked_again_goes_behind_it(
    api: Api, dynamodb: DynamoDBClient, table_name: str
) -> None:
    """The drain sent v1 and v2 of one ticket back together; v1 failed again and, its
    webhook's slots all held, was parked again. Before: v2, right behind it in the queue,
    was attempted and went out first."""
    with receivers(status=204) as (receiver,):
        hook = register(api, "acme", receiver.url)
        sqs = ClockedSqs()
        post = FailingFirst(failures=1)
        function = deliverer(table_name, sqs, retry_slots=0, post=post)
        events = Events("acme", hook)
        first = events.queue("A", 1)
        run_round(function, sqs)  # v1 fails, no slot: parked
        second = events.queue("A", 2)
        run_round(function, sqs)  # v2: behind it in the lot
        assert len(lot(dynamodb, table_name, "acme", hook)) == 2
        post.failures = 1  # v1, sent back, fails once more
        for _ in range(8):
            sqs.advance(31)
            run_round(function, sqs)
        assert first_arrivals(post.delivered) == [first, second]
        assert lot(dynamodb, table_name, "acme", hook) == []


# ---------------------------------------------------------------- the lot's cap
@pytest.mark.parametrize(("tenant", "other"), TENANT_PAIRS)
def test_past_its_lots_cap_a_delivery_is_failed_visible_and_redeliverable_and_the_other_tenant_is_untouched(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str, tenant: str, other: str
) -> None:
    """Before: a failing endpoint's lot grew with every event (282 parked items of one
    tenant in 160 s). Its cap: 2 here; the events past it are FAILED with the reason, their
    event kept, and go out again when redelivered; nothing is dropped. The other tenant's
    webhook meanwhile delivers every event at once."""
    endpoints = Endpoints(500, 204)
    failing, answering = endpoints.all
    hook, theirs = register(api, tenant, failing.url), register(api, other, answering.url)
    sqs = ClockedSqs()
    function = deliverer(table_name, sqs, retry_slots=0, max_parked=2, post=endpoints)
    mine, others = Events(tenant, hook), Events(other, theirs)
    for ticket in ("A", "B", "C", "D", "E"):
        mine.queue(ticket, 1)
        others.queue(ticket, 1)
    for _ in range(2):
        run_round(function, sqs)
    # The lot holds its cap, counted with its bytes; the other three are FAILED, with their events
    parked = lot(dynamodb, table_name, tenant, hook)
    state = circuit(dynamodb, table_name, tenant, hook)
    assert len(parked) == int(state["parked"]) == 2
    assert int(state["parked_bytes"]) > 0
    records = {record["event_id"]: record for record in stored_deliveries(dynamodb, table_name, tenant, hook)}
    assert sorted(records) == sorted(mine.sent)  # every event has its record: none dropped
    failed = {event_id for event_id, record in records.items() if record["status"] == "FAILED"}
    assert len(failed) == 3
    for event_id in failed:
        assert (records[event_id]["failure_reason"], records[event_id]["event"]) == (
            LOT_FULL,
            mine.bodies[event_id],
        )
    # The other tenant: every event delivered at once, nothing parked or failed
    assert sorted(received_ids(answering)) == sorted(others.sent)
    assert circuit(dynamodb, table_name, other, theirs) == {}
    assert {record["status"] for record in stored_deliveries(dynamodb, table_name, other, theirs)} == {"DELIVERED"}
    # The deliveries route shows the failed ones with their reason
    admin = User(tenant, "root", admin=True)
    listed = api.call("webhook_deliveries", admin, ticket_id=hook).body["items"]
    assert sorted(item["event_id"] for item in listed if item["failure_reason"] == LOT_FULL) == sorted(failed)
    # The endpoint answers again: the lot drains, then the failed ones are redelivered
    failing.status = 204
    for _ in range(4):
        sqs.advance(61)
        run_round(function, sqs)
    assert lot(dynamodb, table_name, tenant, hook) == []
    for item in listed:
        if item["event_id"] in failed:
            path = f"{hook}/{item['delivery_id']}"
            assert api.call("webhook_redeliver", admin, ticket_id=path).status == 202
    assert audit_stream.invoke(audit_stream.new_records()) == []
    for _ in range(2):
        run_round(function, sqs)
    assert sorted(set(received_ids(failing))) == sorted(mine.sent)
    statuses = {record["status"] for record in stored_deliveries(dynamodb, table_name, tenant, hook)}
    assert statuses == {"DELIVERED"}
    assert len(received_ids(answering)) == len(others.sent)  # the other tenant's: nothing more, nothing less


def test_the_lots_byte_cap_refuses_a_message_that_would_pass_it_and_a_release_gives_its_bytes_back(
    table_name: str,
) -> None:
    from support_tickets.data.table import OwnClient, TenantTable
    from support_tickets.webhooks.parking import LotFull, ParkedMessage, WebhookParking

    parking = WebhookParking(TenantTable("1", table_name, OwnClient(boto3.client("dynamodb", region_name=REGION))), "w")
    first, second = (ParkedMessage(f"d{n}", "中" * 1_000, "g", f"x{n}", 100.0) for n in (1, 2))
    assert first.size == 3_000  # UTF-8 bytes, not characters
    assert parking.park(first, 100.0, max_bytes=5_000)
    with pytest.raises(LotFull):
        parking.park(second, 100.0, max_bytes=5_000)
    assert parking.circuit().parked == 1
    parking.unpark(["d1"], [], 101.0, freed_bytes=first.size)
    assert parking.park(second, 102.0, max_bytes=5_000)
    assert [parked.delivery_id for parked in parking.oldest(10)] == ["d2"]
