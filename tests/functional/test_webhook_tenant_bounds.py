"""What one tenant's deliveries may take of the pool, and what a suspension or
an offboarding does to them: the delivery function in process over moto
(table, KMS, SQS FIFO), its POST injected, the test's clock.

- A tenant has at most its tier's attempts in flight (leases under its own
  prefix, expiring): a hanging endpoint holds that many of the pool's
  invocations, never more, and another tenant's delivery goes out meanwhile.
- A suspended tenant's deliveries are held (no POST, ``PENDING``) and go out
  after a reactivation; an offboarded tenant's are dropped, nothing written.
- In a cell the tenant is arriving in, its messages are held (nothing read or
  written); in the cell it moved out of, dropped, nothing written (the new
  cell sends what is pending).

Tenants ``1`` and ``10`` (one id a prefix of the other) wherever data is touched."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest
from boto3.dynamodb.types import TypeSerializer

from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.data.tenant_registry import TenantConfig, TenantStatus
from support_tickets.webhooks.delivery import LEASE_SECONDS
from support_tickets.webhooks.delivery_records import DeliveryRecords
from support_tickets.webhooks.urls import CheckedUrl
from tests.conftest import all_items
from tests.functional.api_harness import Api, User
from tests.functional.conftest import PUBLIC_ADDRESS
from tests.functional.stream_harness import StreamHarness
from tests.functional.webhook_harness import RecordingSqs, receive, stored_deliveries
from tests.functional.webhook_harness import deliverer as harness_deliverer

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = pytest.mark.usefixtures("local_receivers")

WAIT_S = 10.0  # how long a test waits for something that should happen at once (never asserted on)
NOW = 1_800_000_000.0


def deliverer(table_name: str, **options: Any) -> Any:
    """The harness's deliverer, the webhooks' public names resolving to a public address."""
    return harness_deliverer(table_name, resolve=lambda host, port: [PUBLIC_ADDRESS], **options)


def register(api: Api, tenant_id: str, url: str) -> str:
    response = api.call(
        "webhook_create", User(tenant_id, "root", admin=True), body={"url": url, "events": ["ticket.created"]}
    )
    assert response.status == 201, response.body
    return str(response.body["webhook_id"])


def tenant_of(record: Mapping[str, Any]) -> str:
    return str(json.loads(record["body"])["tenant_id"])


def set_tenant(dynamodb: DynamoDBClient, table_name: str, config: TenantConfig) -> None:
    serializer = TypeSerializer()
    item = {name: serializer.serialize(value) for name, value in config.item().items()}
    dynamodb.put_item(TableName=table_name, Item=item)


class RecordingPost:
    """The delivery function's POST, always answered 204: the URLs it was asked to POST to."""

    def __init__(self) -> None:
        self.posted: list[str] = []

    def __call__(self, checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        self.posted.append(checked.url)
        return 204


def one_queued_event(api: Api, audit_stream: StreamHarness, tenant_id: str) -> tuple[str, dict[str, Any]]:
    """A webhook of ``tenant_id`` and the queued message of one new ticket's event to it."""
    hook = register(api, tenant_id, "https://mine.example.com/in")
    api.new_ticket(User(tenant_id, "alice"))
    audit_stream.deliver(audit_stream.new_records())
    (record,) = receive()
    return hook, record


class HangingPoster:
    """The delivery function's POST: to ``hanging`` URLs it blocks until released
    (an endpoint that never answers, its deadline not yet reached); to others, 204.
    Counts the hanging attempts in flight and their most at once."""

    def __init__(self, hanging: str) -> None:
        self.hanging = hanging
        self.release = threading.Event()
        self.changed = threading.Condition()
        self.in_flight = 0
        self.most_in_flight = 0
        self.posted: list[str] = []

    def __call__(self, checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        with self.changed:
            self.posted.append(checked.url)
            if checked.url == self.hanging:
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.changed.notify_all()
        if checked.url != self.hanging:
            return 204
        self.release.wait(WAIT_S)
        with self.changed:
            self.in_flight -= 1
            self.changed.notify_all()
        return 204

    def wait_until(self, condition: Any) -> bool:
        """Whether ``condition`` came true within :data:`WAIT_S` (looked at every 50 ms too:
        not everything it reads notifies)."""
        deadline = time.monotonic() + WAIT_S
        with self.changed:
            while not condition():
                if time.monotonic() > deadline:
                    return False
                self.changed.wait(0.05)
            return True


# ---------------------------------------------------------------- attempts in flight
@pytest.mark.parametrize(("slow", "other"), [("1", "10"), ("10", "1")])
def test_a_hanging_tenant_holds_at_most_its_tiers_attempts_and_another_tenant_is_delivered_meanwhile(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str, slow: str, other: str
) -> None:
    # Given a tenant whose endpoint hangs, with 4 events (4 groups) at once, and another tenant's event
    slow_hook = register(api, slow, "https://hangs.example.com/in")
    other_hook = register(api, other, "https://answers.example.com/in")
    for n in range(4):
        api.new_ticket(User(slow, "alice"), title=f"t{n}")
    api.new_ticket(User(other, "bob"))
    audit_stream.deliver(audit_stream.new_records())
    records = receive()
    slow_records = [r for r in records if tenant_of(r) == slow]
    other_records = [r for r in records if tenant_of(r) == other]
    assert (len(slow_records), len(other_records)) == (4, 1)
    poster = HangingPoster("https://hangs.example.com/in")
    sqs = RecordingSqs()
    bounded = deliverer(table_name, sqs=sqs, post=poster, tier_in_flight={"basic": 2})
    # When the slow tenant's batch runs (its attempts hang) and then the other tenant's batch
    results: dict[str, list[str]] = {}
    slow_batch = threading.Thread(target=lambda: results.setdefault("slow", bounded.process_batch(slow_records)))
    slow_batch.start()
    try:
        # Two attempts hang; the other two messages come back later, unattempted
        assert poster.wait_until(lambda: poster.in_flight == 2)
        assert poster.wait_until(lambda: len(sqs.visibility) == 2), "more than 2 attempts in flight"
        assert poster.most_in_flight == 2
        assert all(2 <= delay <= 3 for delay in sqs.visibility)
        # Then: the other tenant's delivery goes out while the slow ones still hang
        assert bounded.process_batch(other_records) == []
        assert poster.posted.count("https://answers.example.com/in") == 1
        assert poster.in_flight == 2
        # And a further attempt of the slow tenant is refused while its two are under way
        assert bounded.process_batch(slow_records[-1:]) == [slow_records[-1]["messageId"]]
        assert poster.most_in_flight == 2
    finally:
        poster.release.set()
        slow_batch.join(WAIT_S)
    deferred = [r["messageId"] for r in slow_records if r["messageId"] in results["slow"]]
    assert len(deferred) == 2
    # The deferred ones were neither attempted nor counted (their records as the fan-out queued them)
    slow_stored = stored_deliveries(dynamodb, table_name, slow, slow_hook)
    assert sorted(int(d["attempts"]) for d in slow_stored) == [0, 0, 1, 1]
    assert [d["status"] for d in stored_deliveries(dynamodb, table_name, other, other_hook)] == ["DELIVERED"]
    # Once the hanging attempts ended, their leases are free again: the deferred ones go
    assert bounded.process_batch([r for r in slow_records if r["messageId"] in deferred]) == []
    assert poster.most_in_flight == 2


def test_a_lease_a_crashed_attempt_left_expires_and_leases_are_the_tenants_own(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    post = RecordingPost()
    register(api, "1", "https://one.example.com/in")
    register(api, "10", "https://ten.example.com/in")
    api.new_ticket(User("1", "alice"))
    api.new_ticket(User("10", "bob"))
    audit_stream.deliver(audit_stream.new_records())
    records = receive()
    (one,) = [r for r in records if tenant_of(r) == "1"]
    (ten,) = [r for r in records if tenant_of(r) == "10"]
    # Two attempts of tenant "1" took its leases and crashed (never gave them back)
    leases = DeliveryRecords(TenantTable("1", table_name, OwnClient(dynamodb)))
    assert leases.take_lease(2, NOW, NOW + LEASE_SECONDS, "crashed-a") == 0
    assert leases.take_lease(2, NOW, NOW + LEASE_SECONDS, "crashed-b") == 1
    assert leases.take_lease(2, NOW + 1, NOW + 1 + LEASE_SECONDS, "another") is None

    def at(moment: float) -> Any:
        return deliverer(table_name, post=post, clock=lambda: moment, tier_in_flight={"basic": 2})

    # Tenant "10" is not bound by tenant "1"'s leases
    assert at(NOW + 1).process_batch([ten]) == []
    assert post.posted == ["https://ten.example.com/in"]
    # Tenant "1" waits while the crashed leases last, and goes once they expired
    assert at(NOW + 1).process_batch([one]) == [one["messageId"]]
    assert post.posted == ["https://ten.example.com/in"]
    assert at(NOW + LEASE_SECONDS + 1).process_batch([one]) == []
    assert post.posted == ["https://ten.example.com/in", "https://one.example.com/in"]
    # A late release by a crashed holder does not free the lease another attempt now holds
    assert leases.take_lease(1, NOW + 100, NOW + 100 + LEASE_SECONDS, "current") == 0
    leases.release_lease(0, "crashed-a")
    assert leases.take_lease(1, NOW + 101, NOW + 101 + LEASE_SECONDS, "next") is None


# ---------------------------------------------------------------- suspension, offboarding
@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_a_suspended_tenants_delivery_is_held_pending_and_goes_out_after_a_reactivation(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str, tenant: str, other: str
) -> None:
    post = RecordingPost()
    hook = register(api, tenant, "https://mine.example.com/in")
    register(api, other, "https://theirs.example.com/in")
    api.new_ticket(User(tenant, "alice"))
    api.new_ticket(User(other, "bob"))
    audit_stream.deliver(audit_stream.new_records())
    records = receive()
    (mine,) = [r for r in records if tenant_of(r) == tenant]
    (theirs,) = [r for r in records if tenant_of(r) == other]
    # The tenant is suspended (its neighbour is not)
    set_tenant(dynamodb, table_name, TenantConfig(tenant_id=tenant, status=TenantStatus.SUSPENDED))
    sqs = RecordingSqs()
    assert deliverer(table_name, sqs=sqs, post=post).process_batch([mine, theirs]) == [mine["messageId"]]
    # Nothing of the suspended tenant was POSTed; the neighbour's was
    assert post.posted == ["https://theirs.example.com/in"]
    # Its message comes back in a minute (± 20 %), the delivery shown PENDING, no attempt counted
    (delay,) = sqs.visibility
    assert 48 <= delay <= 72
    (held,) = stored_deliveries(dynamodb, table_name, tenant, hook)
    assert (held["status"], int(held["attempts"])) == ("PENDING", 0)
    assert json.loads(held["event"])["tenant_id"] == tenant
    # Held again at its next receive: still nothing sent, the record as it was, a longer wait
    again = {**mine, "attributes": {**mine["attributes"], "ApproximateReceiveCount": "2"}}
    assert deliverer(table_name, sqs=sqs, post=post).process_batch([again]) == [mine["messageId"]]
    assert post.posted == ["https://theirs.example.com/in"]
    assert 96 <= sqs.visibility[-1] <= 144
    # Reactivated: the held delivery goes out, once, and the record says DELIVERED after 1 attempt
    set_tenant(dynamodb, table_name, TenantConfig(tenant_id=tenant, status=TenantStatus.ACTIVE))
    assert deliverer(table_name, sqs=sqs, post=post).process_batch([again]) == []
    assert post.posted == ["https://theirs.example.com/in", "https://mine.example.com/in"]
    (delivered,) = stored_deliveries(dynamodb, table_name, tenant, hook)
    assert (delivered["status"], int(delivered["attempts"])) == ("DELIVERED", 1)
    # The tenant's admin sees it in the deliveries list
    listed = api.call("webhook_deliveries", User(tenant, "root", admin=True), ticket_id=hook).body["items"]
    assert [(item["status"], item["attempts"]) for item in listed] == [("DELIVERED", 1)]


def test_a_delivery_held_past_the_retry_window_fails_without_an_attempt(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    post = RecordingPost()
    hook, record = one_queued_event(api, audit_stream, "1")
    set_tenant(dynamodb, table_name, TenantConfig(tenant_id="1", status=TenantStatus.SUSPENDED))
    sqs = RecordingSqs()
    late = deliverer(table_name, sqs=sqs, post=post, clock=lambda: time.time() + 26 * 3600)
    assert late.process_batch([record]) == []
    assert post.posted == []
    (parked,) = sqs.dead_letters
    assert parked["MessageBody"] == record["body"]
    (failed,) = stored_deliveries(dynamodb, table_name, "1", hook)
    assert (failed["status"], int(failed["attempts"])) == ("FAILED", 0)


def test_an_offboarded_tenants_deliveries_are_dropped_and_nothing_is_written(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    post = RecordingPost()
    hook, record = one_queued_event(api, audit_stream, "10")
    offboarding = TenantConfig(tenant_id="10", status=TenantStatus.SUSPENDED, offboarding_since=int(time.time()))
    set_tenant(dynamodb, table_name, offboarding)
    sqs = RecordingSqs()
    before = all_items(dynamodb, table_name)
    assert deliverer(table_name, sqs=sqs, post=post).process_batch([record]) == []  # let go: deleted
    assert post.posted == []
    assert (sqs.visibility, sqs.dead_letters) == ([], [])
    assert all_items(dynamodb, table_name) == before
    # Its delivery's record is the fan-out's as it queued it (the offboarding erases it)
    stored = stored_deliveries(dynamodb, table_name, "10", hook)
    assert [(d["status"], int(d["attempts"]), d["next_attempt_at"]) for d in stored] == [("PENDING", 0, True)]


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_between_cells_a_tenants_deliveries_are_held_where_it_arrives_and_dropped_where_it_left(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str, tenant: str, other: str
) -> None:
    post = RecordingPost()
    register(api, tenant, "https://mine.example.com/in")
    register(api, other, "https://theirs.example.com/in")
    api.new_ticket(User(tenant, "alice"))
    audit_stream.deliver(audit_stream.new_records())
    (record,) = receive()
    before = all_items(dynamodb, table_name)
    arriving = TenantConfig(tenant_id=tenant, cell_phase="ARRIVING", moving_from="cell-b", version=1)
    set_tenant(dynamodb, table_name, arriving)
    sqs = RecordingSqs()
    # Arriving (this cell's copy is incomplete): back to the queue, nothing sent, read or written
    assert deliverer(table_name, sqs=sqs, post=post).process_batch([record]) == [record["messageId"]]
    assert (post.posted, sqs.dead_letters, len(sqs.visibility)) == ([], [], 1)
    assert [item for item in all_items(dynamodb, table_name) if item["pk"]["S"] != f"TENANT#{tenant}|CONFIG"] == [
        item for item in before if item["pk"]["S"] != f"TENANT#{tenant}|CONFIG"
    ]
    # Moved out: let go (deleted from the queue), nothing sent or written
    moved_out = TenantConfig(
        tenant_id=tenant, cell_phase="MOVED_OUT", moving_to="cell-b", moved_out_at=int(NOW), version=2
    )
    set_tenant(dynamodb, table_name, moved_out)
    written = all_items(dynamodb, table_name)
    assert deliverer(table_name, sqs=sqs, post=post).process_batch([record]) == []
    assert (post.posted, sqs.dead_letters, len(sqs.visibility)) == ([], [], 1)
    assert all_items(dynamodb, table_name) == written
