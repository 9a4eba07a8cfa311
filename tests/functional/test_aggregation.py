"""The stream aggregator: real handler, real moto stream records, the template's
own FilterCriteria; counts must equal a recount from scratch after any replay."""

from __future__ import annotations

import random
import sys
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from local_stack.stream_source import stream_source
from local_stack.template import table_definition
from support_tickets import keys
from support_tickets.aggregation import CountLedger, aggregator_client, changes_from_record
from support_tickets.errors import TicketNotFound
from support_tickets.keys import TicketStatus
from support_tickets.models import CreateTicketRequest
from support_tickets.repository import TicketRepository
from support_tickets.session import tenant_session
from support_tickets.tickets import create_ticket
from tests.conftest import REGION, RepoFactory, random_tenant_id
from tests.functional.stream_harness import Record, StreamHarness

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

OPEN, IN_PROGRESS, CLOSED = TicketStatus.OPEN, TicketStatus.IN_PROGRESS, TicketStatus.CLOSED


@pytest.fixture
def harness(aws: None, dynamodb: DynamoDBClient, table_name: str) -> StreamHarness:
    return StreamHarness(dynamodb, boto3.client("dynamodbstreams", region_name=REGION), table_name)


def create(repo: TicketRepository, resolver: str | None = None) -> str:
    return repo.create_ticket(CreateTicketRequest(title="t", resolver=resolver), created_by="alice").ticket_id


def zero() -> dict[TicketStatus, int]:
    return dict.fromkeys(TicketStatus, 0)


# ---------------------------------------------------------------- event kinds
def test_insert_counts_the_new_ticket_assigned_or_not(repo_for: RepoFactory, harness: StreamHarness) -> None:
    repo = repo_for(random_tenant_id())
    create(repo)
    create(repo, resolver="johnd")
    harness.deliver(harness.new_records())
    assert harness.counts(repo.tenant_id) == {**zero(), OPEN: 2}


def test_status_moves_in_both_directions(repo_for: RepoFactory, harness: StreamHarness) -> None:
    repo = repo_for(random_tenant_id())
    ticket = create(repo)
    repo.update_ticket(ticket, {"status": IN_PROGRESS}, None)
    harness.deliver(harness.new_records())
    assert harness.counts(repo.tenant_id) == {**zero(), IN_PROGRESS: 1}
    repo.update_ticket(ticket, {"status": CLOSED}, None)
    repo.update_ticket(ticket, {"status": OPEN}, None)  # reopened
    harness.deliver(harness.new_records())
    assert harness.counts(repo.tenant_id) == {**zero(), OPEN: 1}


def test_modify_without_a_status_change_writes_nothing(
    repo_for: RepoFactory, harness: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    repo = repo_for(random_tenant_id())
    ticket = create(repo)
    harness.deliver(harness.new_records())
    rev_before = dynamodb.get_item(
        TableName=table_name, Key={"pk": {"S": keys.aggregate_pk(repo.tenant_id)}, "sk": {"S": "OPEN"}}
    )["Item"]["rev"]
    repo.update_ticket(ticket, {"title": "new title", "resolver": "mary"}, None)
    records = harness.new_records()
    assert [record["eventName"] for record in records] == ["MODIFY"]
    harness.deliver(records)
    item = dynamodb.get_item(
        TableName=table_name, Key={"pk": {"S": keys.aggregate_pk(repo.tenant_id)}, "sk": {"S": "OPEN"}}
    )["Item"]
    assert item["rev"] == rev_before
    assert harness.counts(repo.tenant_id) == {**zero(), OPEN: 1}


def test_delete_and_batch_status_change_move_the_counts(repo_for: RepoFactory, harness: StreamHarness) -> None:
    repo = repo_for(random_tenant_id())
    tickets = [create(repo) for _ in range(4)]
    repo.add_comment(tickets[0], "bob", "a comment is not a ticket")
    repo.change_status(tickets[:3], CLOSED)
    repo.delete_ticket(tickets[0])
    harness.deliver(harness.new_records())
    assert harness.counts(repo.tenant_id) == {**zero(), OPEN: 1, CLOSED: 2}
    assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id)


def test_tenants_1_and_10_are_counted_apart(repo_for: RepoFactory, harness: StreamHarness) -> None:
    one, ten = repo_for("1"), repo_for("10")
    create(one)
    for _ in range(3):
        create(ten)
    harness.deliver(harness.new_records())
    assert harness.counts("1") == {**zero(), OPEN: 1}
    assert harness.counts("10") == {**zero(), OPEN: 3}


# ---------------------------------------------------------------- the filter
def test_template_filter_passes_summaries_and_drops_everything_else(
    repo_for: RepoFactory, harness: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    repo = repo_for(random_tenant_id())
    ticket = create(repo)
    repo.update_ticket(ticket, {"status": CLOSED}, None)
    repo.add_comment(ticket, "bob", "hello")
    caller = _caller(repo.tenant_id)
    create_ticket(caller, CreateTicketRequest(title="idempotent"), idempotency_key="key-1")
    summaries = harness.new_records(filtered=False)
    harness.deliver([record for record in summaries if stream_source().matches(record)])  # writes aggregates...
    repo.delete_ticket(ticket)
    everything = summaries + harness.new_records(filtered=False)  # ...and their records are in the stream
    ttl_delete = _ttl_deletion_of_idempotency_record(everything)
    everything.append(ttl_delete)

    source = stream_source()
    passed = [record for record in everything if source.matches(record)]
    dropped = [record for record in everything if not source.matches(record)]
    assert {record["dynamodb"]["Keys"]["sk"]["S"] for record in passed} == {"SUMMARY"}
    assert sorted(record["eventName"] for record in passed) == ["INSERT", "INSERT", "MODIFY", "REMOVE"]
    dropped_kinds = {_kind(record) for record in dropped}
    assert dropped_kinds == {"comment", "aggregate", "idempotency"}
    assert ttl_delete in dropped


def _caller(tenant_id: str) -> Any:
    from support_tickets.identity import Caller

    return Caller(tenant_id=tenant_id, username="alice", is_admin=False)


def _kind(record: Record) -> str:
    pk, sk = record["dynamodb"]["Keys"]["pk"]["S"], record["dynamodb"]["Keys"]["sk"]["S"]
    if pk.endswith("|AGGREGATE"):
        return "aggregate"
    if pk.endswith("|IDEMPOTENCY"):
        return "idempotency"
    return "comment" if sk.startswith("COMMENT#") else "summary"


def _ttl_deletion_of_idempotency_record(records: list[Record]) -> Record:
    """A TTL expiry as DynamoDB streams it: a REMOVE by the dynamodb service."""
    (insert,) = [r for r in records if _kind(r) == "idempotency" and r["eventName"] == "INSERT"]
    return {
        **insert,
        "eventName": "REMOVE",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {**insert["dynamodb"], "OldImage": insert["dynamodb"].get("NewImage", {}), "NewImage": None},
    }


# ---------------------------------------------------------------- replays
def test_the_same_batch_three_times_counts_once(repo_for: RepoFactory, harness: StreamHarness) -> None:
    repo = repo_for(random_tenant_id())
    tickets = [create(repo) for _ in range(5)]
    repo.change_status(tickets[:2], IN_PROGRESS)
    repo.delete_ticket(tickets[4])
    batch = harness.new_records()
    for _ in range(3):
        assert harness.invoke(batch) == []
        assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id) == {**zero(), OPEN: 2, IN_PROGRESS: 2}


def test_a_suffix_with_new_records_appended_counts_once(repo_for: RepoFactory, harness: StreamHarness) -> None:
    repo = repo_for(random_tenant_id())
    tickets = [create(repo) for _ in range(6)]
    repo.change_status(tickets[:3], CLOSED)
    first = harness.new_records()
    assert harness.invoke(first) == []
    # Lambda retries from a reported failure in the middle, with newer records appended.
    repo.update_ticket(tickets[0], {"status": OPEN}, None)
    create(repo)
    repo.delete_ticket(tickets[5])
    for cut in (len(first) // 2, len(first) - 1, 3):
        retry = first[cut:] + harness.new_records()
        assert harness.invoke(retry) == []
        assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id)
    assert harness.truth(repo.tenant_id) == {**zero(), OPEN: 4, CLOSED: 2}


def test_two_shards_interleaved_with_retries(repo_for: RepoFactory, harness: StreamHarness) -> None:
    tenants = [random_tenant_id() for _ in range(2)]
    repos = [repo_for(tenant) for tenant in tenants]
    tickets = [create(repos[n % 2]) for n in range(10)]
    for n, ticket in enumerate(tickets[:6]):
        repos[n % 2].update_ticket(ticket, {"status": IN_PROGRESS if n % 3 else CLOSED}, None)
    records = harness.new_records()
    # Records of one ticket stay in one shard, in order; shards interleave freely.
    shards: dict[int, list[Record]] = {0: [], 1: []}
    for record in records:
        shards[hash(record["dynamodb"]["Keys"]["pk"]["S"]) % 2].append(record)
    a, b = shards[0], shards[1]
    harness.invoke(a[: len(a) // 2])
    harness.invoke(b[: len(b) // 2])
    harness.invoke(a[len(a) // 3 :])  # a retry of shard A from an earlier point, overlapping
    harness.invoke(b[1:])
    harness.invoke(a)  # the whole of shard A again
    harness.invoke(b[len(b) // 2 :])
    for tenant in tenants:
        assert harness.counts(tenant) == harness.truth(tenant)


# ---------------------------------------------------------------- failures
class FailingPairs:
    """A DynamoDB client whose writes to some aggregate items fail."""

    def __init__(self, client: DynamoDBClient, failing: set[tuple[str, str]]) -> None:
        self._client = client
        self.failing = failing

    def update_item(self, **kwargs: Any) -> Any:
        key = (kwargs["Key"]["pk"]["S"], kwargs["Key"]["sk"]["S"])
        if key in self.failing:
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "UpdateItem")
        return self._client.update_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture
def failing_pairs(harness: StreamHarness, monkeypatch: pytest.MonkeyPatch) -> FailingPairs:
    wrapper = FailingPairs(aggregator_client(), set())
    handler_module = sys.modules[harness.handler.__module__]
    monkeypatch.setattr(handler_module, "aggregator_client", lambda: wrapper)
    return wrapper


def test_a_failing_write_reports_exactly_its_records(
    repo_for: RepoFactory, harness: StreamHarness, failing_pairs: FailingPairs
) -> None:
    repo = repo_for(random_tenant_id())
    tickets = [create(repo) for _ in range(3)]
    repo.change_status(tickets[:2], CLOSED)
    records = harness.new_records()
    failing_pairs.failing.add((keys.aggregate_pk(repo.tenant_id), "CLOSED"))
    failed = harness.invoke(records)
    closing = [r["dynamodb"]["SequenceNumber"] for r in records if r["eventName"] == "MODIFY"]
    assert failed == closing  # the two status changes, not the three creations
    # OPEN was written (+3 -2), CLOSED was not: the retry from the lowest failure fixes it exactly.
    assert harness.counts(repo.tenant_id) == {**zero(), OPEN: 1}
    failing_pairs.failing.clear()
    lowest = min(int(sequence) for sequence in failed)
    retry = [r for r in records if int(r["dynamodb"]["SequenceNumber"]) >= lowest]
    assert harness.invoke(retry) == []
    assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id) == {**zero(), OPEN: 1, CLOSED: 2}


def test_a_poison_record_is_reported_and_the_rest_is_counted(repo_for: RepoFactory, harness: StreamHarness) -> None:
    repo = repo_for(random_tenant_id())
    create(repo)
    create(repo)
    records = harness.new_records()
    poison = {**records[0], "dynamodb": {**records[0]["dynamodb"], "NewImage": {"pk": {"S": "x"}}}}
    poison["dynamodb"]["SequenceNumber"] = str(int(records[0]["dynamodb"]["SequenceNumber"]) - 1)
    assert harness.invoke([poison, *records]) == [poison["dynamodb"]["SequenceNumber"]]
    assert harness.counts(repo.tenant_id) == {**zero(), OPEN: 2}


def test_aggregator_crash_mid_batch_then_retry_stays_exact(
    repo_for: RepoFactory, harness: StreamHarness, failing_pairs: FailingPairs
) -> None:
    tenants = [random_tenant_id() for _ in range(3)]
    for tenant in tenants:
        repo = repo_for(tenant)
        ids = [create(repo) for _ in range(3)]
        repo.change_status(ids[:1], IN_PROGRESS)
    records = harness.new_records()
    # Some pairs land, others fail, for several rounds; the event source keeps retrying.
    failing_pairs.failing.update({(keys.aggregate_pk(tenants[1]), "OPEN"), (keys.aggregate_pk(tenants[2]), "OPEN")})
    harness.invoke(records)
    failing_pairs.failing.discard((keys.aggregate_pk(tenants[1]), "OPEN"))
    harness.invoke(records[2:])
    failing_pairs.failing.clear()
    harness.deliver(records)
    for tenant in tenants:
        assert harness.counts(tenant) == harness.truth(tenant) == {**zero(), OPEN: 2, IN_PROGRESS: 1}


# ---------------------------------------------------------------- ledger details
def test_pruning_forgets_only_records_older_than_the_replay_horizon(dynamodb: DynamoDBClient, table_name: str) -> None:
    now = 1_800_000_000
    ledger = CountLedger(table_name=table_name, client=dynamodb, replay_horizon_seconds=3600, clock=lambda: now)

    def change(sequence: int, created: int) -> Any:
        return changes_from_record(
            event_name="INSERT",
            sequence_number=str(sequence),
            event_id=f"e{sequence}",
            created_epoch=created,
            keys_image={"pk": "TENANT#acme|TICKET#T1", "sk": "SUMMARY"},
            old_image=None,
            new_image={"tenant_status": "TENANT#acme|OPEN"},
        )

    (old,) = change(1, now - 7200)
    (recent,) = change(2, now - 60)
    ledger.apply_pair("acme", OPEN, [old])
    ledger.apply_pair("acme", OPEN, [recent])
    result = ledger.apply_pair("acme", OPEN, [recent])  # a redelivery: slow path, prunes `old`
    assert (result.slow_path, result.applied) == (True, 0)
    item = dynamodb.get_item(TableName=table_name, Key={"pk": {"S": "TENANT#acme|AGGREGATE"}, "sk": {"S": "OPEN"}})
    assert item["Item"]["applied"]["SS"] == [recent.record_id]
    assert item["Item"]["count"]["N"] == "2"


def test_writes_per_batch_equal_distinct_tenant_status_pairs(repo_for: RepoFactory, harness: StreamHarness) -> None:
    repos = [repo_for(random_tenant_id()) for _ in range(3)]
    for repo in repos:
        ids = [create(repo) for _ in range(4)]
        repo.change_status(ids[:2], CLOSED)
    calls: list[str] = []
    client = aggregator_client()
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    assert harness.invoke(harness.new_records()) == []
    assert calls == ["UpdateItem"] * 6  # 3 tenants x {OPEN, CLOSED}


@pytest.mark.parametrize(
    ("event_name", "old", "new", "expected"),
    [
        ("INSERT", None, "OPEN", [("OPEN", 1)]),
        ("REMOVE", "CLOSED", None, [("CLOSED", -1)]),
        ("MODIFY", "OPEN", "CLOSED", [("OPEN", -1), ("CLOSED", 1)]),
        ("MODIFY", "CLOSED", "OPEN", [("CLOSED", -1), ("OPEN", 1)]),
        ("MODIFY", "OPEN", "OPEN", []),
    ],
)
def test_changes_from_each_event_kind(event_name: str, old: str | None, new: str | None, expected: list[Any]) -> None:
    made = changes_from_record(
        event_name=event_name,
        sequence_number="100",
        event_id="e",
        created_epoch=1,
        keys_image={"pk": "TENANT#a-b|TICKET#T", "sk": "SUMMARY"},
        old_image={"tenant_status": f"TENANT#a-b|{old}"} if old else None,
        new_image={"tenant_status": f"TENANT#a-b|{new}"} if new else None,
    )
    assert [(change.status.value, change.delta) for change in made] == expected
    assert all(change.tenant_id == "a-b" for change in made)


# ---------------------------------------------------------------- property
OPERATIONS = st.lists(
    st.tuples(
        st.integers(0, 2),  # tenant
        st.sampled_from(["create", "status", "delete"]),
        st.integers(0, 5),  # ticket slot
        st.sampled_from(list(TicketStatus)),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, seed=st.integers(0, 2**32 - 1))
def test_any_history_with_random_redeliveries_counts_exactly(operations: list[Any], seed: int) -> None:
    rng = random.Random(seed)
    tenant_session.cache_clear()
    aggregator_client.cache_clear()
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(**table_definition())
        table_name = table_definition()["TableName"]
        harness = StreamHarness(dynamodb, boto3.client("dynamodbstreams", region_name=REGION), table_name)
        tenants = [random_tenant_id(), "1", "10"]
        repos = [TicketRepository(tenant, table_name, tenant_session()) for tenant in tenants]
        slots: dict[tuple[int, int], str] = {}
        for tenant, action, slot, status in operations:
            ticket = slots.get((tenant, slot))
            if action == "create" or ticket is None:
                slots[(tenant, slot)] = create(repos[tenant])
            elif action == "status":
                repos[tenant].change_status([ticket], status)
            else:
                repos[tenant].delete_ticket(ticket)
                del slots[(tenant, slot)]
        records = harness.new_records()
        shards: dict[int, list[Record]] = {0: [], 1: []}
        for record in records:
            shards[hash(record["dynamodb"]["Keys"]["pk"]["S"]) % 2].append(record)
        positions = {0: 0, 1: 0}
        while any(positions[shard] < len(shards[shard]) for shard in shards):
            shard = rng.choice([s for s in shards if positions[s] < len(shards[s])])
            start = positions[shard]
            batch = shards[shard][start : start + rng.randint(1, 8)]
            assert harness.invoke(batch) == []
            if rng.random() < 0.4:
                # Redelivery: retry from a random record of this batch (as after a reported failure).
                positions[shard] = start + rng.randrange(len(batch))
            else:
                positions[shard] = start + len(batch)
            if rng.random() < 0.2:
                harness.invoke(rng.choice(list(shards.values()))[: positions[shard] + 1])  # a stale full replay
        for tenant in tenants:
            assert harness.counts(tenant) == harness.truth(tenant)


def test_a_cancelled_transaction_moves_no_count(repo_for: RepoFactory, harness: StreamHarness) -> None:
    """DynamoDB streams nothing for a cancelled transaction (moto needs local_stack.moto_fixes for that)."""
    repo = repo_for(random_tenant_id())
    ids = [create(repo) for _ in range(3)]
    with pytest.raises(TicketNotFound):
        repo.change_status([ids[0], "01MISSING"], CLOSED)
    repo.delete_ticket(ids[2])
    records = harness.new_records()
    assert [record["eventName"] for record in records] == ["INSERT", "INSERT", "INSERT", "REMOVE"]
    harness.deliver(records)
    assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id) == {**zero(), OPEN: 2}
