"""The stream aggregator: real handler, real moto stream records, the template's
own FilterCriteria; counts must equal a recount from scratch after any replay."""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any, cast

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from local_stack.event_sources.stream_sources import stream_source
from support_tickets.core import keys
from support_tickets.core.errors import TicketNotFound
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import CreateTicketRequest
from support_tickets.data.comment_repository import CommentRepository
from support_tickets.data.ticket_repository import TicketRepository
from support_tickets.domain.tickets import create_ticket
from support_tickets.streams import aggregation
from support_tickets.streams.aggregation import (
    CountLedger,
    LedgerRecord,
    aggregator_client,
    ledger_record,
)
from tests.conftest import (
    FAILURE_QUEUE_URL,
    REGION,
    RepoFactory,
    all_items,
    caller_for,
    random_tenant_id,
    tenant_table,
)
from tests.depth import sized
from tests.functional.memory_table import MemoryTable, item_size
from tests.functional.stream_harness import (
    Crash,
    FailingTransactions,
    Record,
    ShardMapping,
    StreamHarness,
    split_into_shards,
)

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
    repo.update_ticket(ticket, {"status": IN_PROGRESS}, None, actor="alice")
    harness.deliver(harness.new_records())
    assert harness.counts(repo.tenant_id) == {**zero(), IN_PROGRESS: 1}
    repo.update_ticket(ticket, {"status": CLOSED}, None, actor="alice")
    repo.update_ticket(ticket, {"status": OPEN}, None, actor="alice")  # reopened
    harness.deliver(harness.new_records())
    assert harness.counts(repo.tenant_id) == {**zero(), OPEN: 1}


def test_modify_without_a_status_change_moves_no_count(
    repo_for: RepoFactory, harness: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    repo = repo_for(random_tenant_id())
    ticket = create(repo)
    harness.deliver(harness.new_records())
    counts_before = aggregate_items(dynamodb, table_name, repo.tenant_id)
    repo.update_ticket(ticket, {"title": "new title", "resolver": "mary"}, None, actor="alice")
    records = harness.new_records()
    assert [record["eventName"] for record in records] == ["MODIFY"]
    harness.deliver(records)
    assert aggregate_items(dynamodb, table_name, repo.tenant_id) == counts_before  # not even a rev bump
    assert harness.counts(repo.tenant_id) == {**zero(), OPEN: 1}


def aggregate_items(dynamodb: DynamoDBClient, table_name: str, tenant_id: str) -> list[dict[str, Any]]:
    """The tenant's count items (its AGGREGATE partition, journals excluded)."""
    return [item for item in all_items(dynamodb, table_name) if item["pk"]["S"] == keys.aggregate_pk(tenant_id)]


def test_delete_and_batch_status_change_move_the_counts(repo_for: RepoFactory, harness: StreamHarness) -> None:
    repo = repo_for(random_tenant_id())
    tickets = [create(repo) for _ in range(4)]
    CommentRepository(repo.table).add_comment(tickets[0], "bob", "a comment is not a ticket")
    repo.change_status(tickets[:3], CLOSED, actor="alice")
    repo.delete_ticket(tickets[0], actor="alice")
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
    repo.update_ticket(ticket, {"status": CLOSED}, None, actor="alice")
    CommentRepository(repo.table).add_comment(ticket, "bob", "hello")
    caller = caller_for(repo.tenant_id)
    create_ticket(caller, CreateTicketRequest(title="idempotent"), idempotency_key="key-1")
    summaries = harness.new_records(filtered=False)
    harness.deliver([record for record in summaries if stream_source().matches(record)])  # writes aggregates...
    repo.delete_ticket(ticket, actor="alice")
    everything = summaries + harness.new_records(filtered=False)  # ...and their records are in the stream
    ttl_delete = _ttl_deletion_of_idempotency_record(everything)
    everything.append(ttl_delete)

    source = stream_source()
    passed = [record for record in everything if source.matches(record)]
    dropped = [record for record in everything if not source.matches(record)]
    assert {record["dynamodb"]["Keys"]["sk"]["S"] for record in passed} == {"SUMMARY"}
    # the status change, then the delete: its mark (who deleted it) and the REMOVE
    assert sorted(record["eventName"] for record in passed) == ["INSERT", "INSERT", "MODIFY", "MODIFY", "REMOVE"]
    dropped_kinds = {_kind(record) for record in dropped}
    assert dropped_kinds == {"comment", "aggregate", "idempotency", "tombstone"}
    assert ttl_delete in dropped


def _kind(record: Record) -> str:
    pk, sk = record["dynamodb"]["Keys"]["pk"]["S"], record["dynamodb"]["Keys"]["sk"]["S"]
    if "|AGGREGATE" in pk:
        return "aggregate"
    if "|IDEMPOTENCY" in pk:
        return "idempotency"
    if sk == "DELETING":  # a deleted ticket's tombstone (the audit trail finishes its delete)
        return "tombstone"
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


# ---------------------------------------------------------------- redeliveries, as Lambda makes them
def test_the_same_batch_three_times_counts_once(repo_for: RepoFactory, harness: StreamHarness) -> None:
    repo = repo_for(random_tenant_id())
    tickets = [create(repo) for _ in range(5)]
    repo.change_status(tickets[:2], IN_PROGRESS, actor="alice")
    repo.delete_ticket(tickets[4], actor="alice")
    batch = harness.new_records()
    for _ in range(3):
        assert harness.invoke(batch) == []
        assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id) == {**zero(), OPEN: 2, IN_PROGRESS: 2}


def test_the_same_start_with_newer_records_appended_counts_each_once(
    repo_for: RepoFactory, harness: StreamHarness
) -> None:
    repo = repo_for(random_tenant_id())
    tickets = [create(repo) for _ in range(4)]
    first = harness.new_records()
    assert harness.invoke(first) == []
    repo.change_status(tickets[:2], CLOSED, actor="alice")
    create(repo)
    # A retry from the same checkpoint that now reaches further (a lost checkpoint, or an error after the writes).
    assert harness.invoke(first + harness.new_records()) == []
    assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id) == {**zero(), OPEN: 3, CLOSED: 2}


@pytest.fixture
def failing(harness: StreamHarness, monkeypatch: pytest.MonkeyPatch) -> FailingTransactions:
    # After the harness: the client is the aggregator's in its mocked AWS.
    wrapper = FailingTransactions(aggregator_client())
    monkeypatch.setattr(aggregation, "aggregator_client", lambda: wrapper)
    return wrapper


def small_chunks(monkeypatch: pytest.MonkeyPatch, items: int) -> None:
    """Chunks of at most ``items - 1`` count items, so that a batch takes several transactions."""
    real = aggregation.CountLedger
    monkeypatch.setattr(aggregation, "CountLedger", lambda **kwargs: real(**kwargs, max_transaction_items=items))


def test_a_failed_chunk_is_reported_from_its_first_record_and_the_retry_counts_once(
    repo_for: RepoFactory, harness: StreamHarness, failing: FailingTransactions, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_chunks(monkeypatch, items=2)  # one count item per transaction
    repos = [repo_for(random_tenant_id()) for _ in range(3)]
    for repo in repos:
        create(repo)
    records = harness.new_records()
    failing.fail_calls = {2}
    failed = harness.invoke(records)
    assert failed == [record["dynamodb"]["SequenceNumber"] for record in records[1:]]
    assert [harness.counts(repo.tenant_id)[OPEN] for repo in repos] == [1, 0, 0]
    # Lambda retries from the lowest failed record, with a newer record appended.
    create(repos[0])
    assert harness.invoke(records[1:] + harness.new_records()) == []
    for repo in repos:
        assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id)


@pytest.mark.parametrize("crash_after", [1, 2, 3])
def test_bisected_halves_after_a_crash_that_came_after_writes_committed(
    repo_for: RepoFactory,
    harness: StreamHarness,
    failing: FailingTransactions,
    monkeypatch: pytest.MonkeyPatch,
    crash_after: int,
) -> None:
    small_chunks(monkeypatch, items=3)
    repos = [repo_for(random_tenant_id()) for _ in range(3)]
    for repo in repos:
        ids = [create(repo) for _ in range(2)]
        repo.change_status(ids[:1], CLOSED, actor="alice")
    records = harness.new_records()
    failing.crash_after_calls = {crash_after}  # the last transaction of the batch, or one in the middle

    def invoke(batch: list[Record]) -> list[str]:
        return harness.invoke(batch)

    mapping = ShardMapping(records, invoke, bisect=True)
    while not mapping.done:
        mapping.step(batch_size=len(records))
    assert mapping.crashes == 1
    assert mapping.invocations >= 3  # the batch, then its two halves
    for repo in repos:
        assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id) == {**zero(), OPEN: 1, CLOSED: 1}


def test_a_timeout_after_the_whole_batch_committed_then_its_halves(
    repo_for: RepoFactory, harness: StreamHarness
) -> None:
    repo = repo_for(random_tenant_id())
    ids = [create(repo) for _ in range(6)]
    repo.change_status(ids[:3], IN_PROGRESS, actor="alice")
    records = harness.new_records()
    timed_out = {"left": 1}

    def invoke(batch: list[Record]) -> list[str]:
        failed = harness.invoke(batch)  # every write of the invocation lands...
        if timed_out["left"]:
            timed_out["left"] -= 1
            raise Crash("...and then the function timed out")
        return failed

    mapping = ShardMapping(records, invoke, bisect=True)
    while not mapping.done:
        mapping.step(batch_size=100)
    assert mapping.crashes == 1
    assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id) == {**zero(), OPEN: 3, IN_PROGRESS: 3}


def test_lost_checkpoints_redeliver_earlier_batches_in_new_boundaries(
    repo_for: RepoFactory, harness: StreamHarness
) -> None:
    repo = repo_for(random_tenant_id())
    ids = [create(repo) for _ in range(8)]
    repo.change_status(ids[:4], CLOSED, actor="alice")
    repo.change_status(ids[:2], OPEN, actor="alice")
    repo.delete_ticket(ids[7], actor="alice")
    mapping = ShardMapping(harness.new_records(), harness.invoke)
    for size in (3, 2, 4):
        mapping.step(batch_size=size)
    mapping.lose_checkpoints(3)  # back to the start: the same records again, in batches of 5
    while not mapping.done:
        mapping.step(batch_size=5)
    assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id) == {**zero(), OPEN: 5, CLOSED: 2}


def test_two_shards_interleaving_on_the_same_counts(repo_for: RepoFactory, harness: StreamHarness) -> None:
    tenants = [random_tenant_id() for _ in range(2)]
    repos = [repo_for(tenant) for tenant in tenants]
    tickets = [create(repos[n % 2]) for n in range(12)]
    for n, ticket in enumerate(tickets[:8]):
        repos[n % 2].update_ticket(ticket, {"status": IN_PROGRESS if n % 3 else CLOSED}, None, actor="alice")
    a, b = (ShardMapping(shard, harness.invoke) for shard in split_into_shards(harness.new_records(), 2))
    a.step(3)
    b.step(2)
    a.lose_checkpoints(1)
    b.step(4)
    a.step(5)
    b.lose_checkpoints(2)
    while not (a.done and b.done):
        a.step(2)
        b.step(3)
    for tenant in tenants:
        assert harness.counts(tenant) == harness.truth(tenant)


# ---------------------------------------------------------------- poison
def test_a_summary_naming_another_tenant_in_its_index_key_is_poison_not_counted(
    repo_for: RepoFactory, harness: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    # Given acme's own credentials put a summary whose GSI1 key names globex (IAM confines only the table key)
    acme, globex = random_tenant_id(), random_tenant_id()
    create(repo_for(globex))
    forged = {
        "pk": {"S": keys.ticket_pk(acme, "01JD3Z8W1X4K6M9P2R5T7V0BQE")},
        "sk": {"S": "SUMMARY"},
        "tenant_status": {"S": keys.tenant_status(globex, OPEN)},
        "resolver": {"S": keys.UNASSIGNED_RESOLVER},
    }
    tenant_table(acme).call("put_item", TableName=table_name, Item=forged)
    create(repo_for(acme))
    # When the aggregator reads the stream
    records = harness.new_records()
    assert harness.invoke(records) == []  # poison does not stall the shard
    # Then neither tenant counts it, and the failure queue has it, without the ticket's content
    assert harness.counts(globex) == {**zero(), OPEN: 1}
    assert harness.counts(acme) == {**zero(), OPEN: 1}
    messages = boto3.client("sqs", region_name=REGION).receive_message(
        QueueUrl=FAILURE_QUEUE_URL, MaxNumberOfMessages=10
    )["Messages"]
    (message,) = messages
    body = json.loads(message["Body"])
    assert body["tenantId"] == acme
    assert "tenant" in body["reason"]
    assert set(body) == {"reason", "eventID", "sequenceNumber", "tenantId", "function"}  # no images, no content


def test_a_poison_record_is_queued_once_even_when_its_batch_is_redelivered(
    repo_for: RepoFactory, harness: StreamHarness
) -> None:
    repo = repo_for(random_tenant_id())
    create(repo)
    create(repo)
    records = harness.new_records()
    poison = {
        **records[0],
        "eventID": "poison-1",
        "dynamodb": {**records[0]["dynamodb"], "NewImage": {"pk": {"S": "x"}}},
    }
    batch = [poison, *records]
    assert harness.invoke(batch) == []
    assert harness.invoke(batch) == []  # the same batch again: journaled, not queued twice
    assert harness.counts(repo.tenant_id) == {**zero(), OPEN: 2}
    sqs = boto3.client("sqs", region_name=REGION)
    assert len(sqs.receive_message(QueueUrl=FAILURE_QUEUE_URL, MaxNumberOfMessages=10).get("Messages", [])) == 1


# ---------------------------------------------------------------- what it writes
def test_one_transaction_per_batch_with_one_write_per_pair_and_one_journal(
    repo_for: RepoFactory, harness: StreamHarness
) -> None:
    repos = [repo_for(random_tenant_id()) for _ in range(3)]
    for repo in repos:
        ids = [create(repo) for _ in range(4)]
        repo.change_status(ids[:2], CLOSED, actor="alice")
    calls: list[tuple[str, int]] = []

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        calls.append((model.name, len(params.get("TransactItems", []))))

    aggregator_client().meta.events.register("provide-client-params.dynamodb.*", record)
    assert harness.invoke(harness.new_records()) == []
    assert calls == [("TransactWriteItems", 6 + 1)]  # 3 tenants x {OPEN, CLOSED}, and the journal


def test_the_bookkeeping_of_a_delivery_is_bounded_by_the_batch_size(dynamodb: DynamoDBClient, table_name: str) -> None:
    """A journal lists at most one batch; the template's BatchSize keeps it far below 40 KB."""
    from local_stack.event_sources.stream_sources import stream_source

    records = [change_record("acme", n, OPEN, IN_PROGRESS) for n in range(stream_source().batch_size)]
    CountLedger(table_name=table_name, client=dynamodb, on_poison=_no_poison).apply(records)
    (journal,) = [item for item in all_items(dynamodb, table_name) if "#JOURNAL#" in item["pk"]["S"]]
    assert len(journal["records"]["L"]) == len(records)
    assert item_size(journal) < 40_000


def test_a_delivery_longer_than_a_chunk_is_journaled_in_bounded_pieces(
    dynamodb: DynamoDBClient, table_name: str
) -> None:
    """Whatever Lambda delivers at once (the bench sends 1,000 records), no journal
    lists more than MAX_CHUNK_RECORDS, so none passes 40 KB; the counts stay exact."""
    from support_tickets.streams.aggregation import MAX_CHUNK_RECORDS

    records = [change_record("acme", n, None, OPEN) for n in range(1000)]
    ledger = CountLedger(table_name=table_name, client=dynamodb, on_poison=_no_poison)
    assert ledger.apply(records).applied == 1000
    journals = [item for item in all_items(dynamodb, table_name) if "#JOURNAL#" in item["pk"]["S"]]
    assert sorted(len(journal["records"]["L"]) for journal in journals) == [MAX_CHUNK_RECORDS] * 4
    assert max(item_size(journal) for journal in journals) < 40_000
    assert ledger.apply(records).applied == 1000  # the same delivery again: journaled, nothing counted twice
    counts = sum(
        int(i["count"]["N"]) for i in all_items(dynamodb, table_name) if i["pk"]["S"] == "TENANT#acme|AGGREGATE"
    )
    assert counts == 1000


def _no_poison(record: LedgerRecord) -> None:
    raise AssertionError(f"unexpected poison {record}")


def change_record(tenant: str, n: int, old: TicketStatus | None, new: TicketStatus | None) -> LedgerRecord:
    """The n-th record of a synthetic stream: ticket ``T<n % 500>`` moving from ``old`` to ``new``."""
    event = "MODIFY" if old and new else "INSERT" if new else "REMOVE"
    return ledger_record(
        event_name=event,
        sequence_number=str(1_000_000 + n),
        event_id=f"{n:032x}",
        keys_image={"pk": keys.ticket_pk(tenant, f"T{n % 500}"), "sk": "SUMMARY"},
        old_image={"tenant_status": keys.tenant_status(tenant, old)} if old else None,
        new_image={"tenant_status": keys.tenant_status(tenant, new)} if new else None,
    )


def synthetic_deliveries(seed: int, records: list[LedgerRecord], batch_size: int) -> Any:
    """Yield deliveries of one shard's ``records`` the ways Lambda makes them:
    batches of varying size, the same batch again, a shorter one first and the
    full one after it, bisected halves after a timeout that came after the
    writes, and lost checkpoints (the last batches again, in new boundaries)."""
    rng = random.Random(seed)
    checkpoint, committed = 0, [0]
    while checkpoint < len(records):
        batch = records[checkpoint : checkpoint + rng.randint(max(1, batch_size // 2), batch_size)]
        shape = rng.random()
        if shape < 0.05:
            yield batch  # every write landed, then the function timed out: Lambda bisects
            yield batch[: len(batch) // 2]
            yield batch[len(batch) // 2 :]
        elif shape < 0.10:
            yield batch  # its checkpoint was lost: the same batch again
            yield batch
        elif shape < 0.15:
            yield batch[: max(1, len(batch) // 3)]  # a shorter batch's checkpoint was lost: a longer one
            yield batch
        elif shape < 0.18 and len(committed) > 3:
            committed = committed[:-2]
            checkpoint = committed[-1]
            continue
        else:
            yield batch
        checkpoint += len(batch)
        committed.append(checkpoint)


def test_the_memory_table_leaves_exactly_what_moto_leaves(dynamodb: DynamoDBClient, table_name: str) -> None:
    statuses = list(TicketStatus)
    records = [change_record("t1" if n % 3 else "10", n, statuses[n % 3], statuses[(n + 1) % 3]) for n in range(300)]
    memory = MemoryTable()
    for client in (dynamodb, cast("DynamoDBClient", memory)):
        ledger = CountLedger(table_name=table_name, client=client, on_poison=_no_poison, clock=lambda: 1_800_000_000)
        for delivery in synthetic_deliveries(7, records, batch_size=40):
            assert ledger.apply(delivery).applied == len(delivery)
    assert sorted(memory.items.values(), key=lambda item: (item["pk"]["S"], item["sk"]["S"])) == all_items(
        dynamodb, table_name
    )


def test_a_hot_pair_at_100_changes_a_second_for_two_hours_stays_exact_and_small() -> None:
    """720,000 status changes of one (tenant, status) pair, delivered with every
    redelivery shape: the counts are exact and no item the aggregator keeps
    ever grows past 40 KB (the old design's item passed 400 KB after ~9,400).
    `make test` runs its first 10 minutes (60,000 changes), `make test-deep` all of it."""
    clock = {"now": 1_800_000_000.0}
    memory = MemoryTable()
    ledger = CountLedger(
        table_name="t", client=cast("DynamoDBClient", memory), on_poison=_no_poison, clock=lambda: clock["now"]
    )
    changes_per_second, seconds = 100, sized(deep=2 * 3600, ci=600)
    flips = [(OPEN, IN_PROGRESS), (IN_PROGRESS, OPEN)]
    records = [change_record("hot", n, *flips[(n // 500) % 2]) for n in range(changes_per_second * seconds)]
    delivered = 0
    for delivery in synthetic_deliveries(11, records, batch_size=250):
        assert ledger.apply(delivery).applied == len(delivery)
        delivered += len(delivery)
        clock["now"] = 1_800_000_000.0 + delivered / changes_per_second
    counts = dict.fromkeys(TicketStatus, 0)
    for (pk, sk), item in memory.items.items():
        status = keys.status_from_aggregate_sk(sk)
        if pk == keys.aggregate_pk("hot") and status is not None:
            counts[status] += int(item["count"]["N"])
    # 500 tickets flip OPEN -> IN_PROGRESS, then back, 1,440 times each way: net zero moves.
    assert counts == {OPEN: 0, IN_PROGRESS: 0, CLOSED: 0}
    assert delivered > len(records)  # redeliveries happened
    assert memory.largest_item < 40_000
    assert memory.calls["TransactWriteItems"] <= 2 * len(records) // 250 + 100


# ---------------------------------------------------------------- record kinds
@pytest.mark.parametrize(
    ("event_name", "old", "new", "expected"),
    [
        ("INSERT", None, "OPEN", [("OPEN", 1)]),
        ("REMOVE", "CLOSED", None, [("CLOSED", -1)]),
        ("MODIFY", "OPEN", "CLOSED", [("OPEN", -1), ("CLOSED", 1)]),
        ("MODIFY", "CLOSED", "OPEN", [("CLOSED", -1), ("OPEN", 1)]),
        ("MODIFY", "OPEN", "OPEN", []),
        ("MODIFY", "OPEN#3", "OPEN", []),  # a reshard moves a ticket between GSI1 keys: no count change
        ("MODIFY", "OPEN#3", "CLOSED#1", [("OPEN", -1), ("CLOSED", 1)]),
    ],
)
def test_changes_from_each_event_kind(event_name: str, old: str | None, new: str | None, expected: list[Any]) -> None:
    made = ledger_record(
        event_name=event_name,
        sequence_number="100",
        event_id="e",
        keys_image={"pk": "TENANT#a-b|TICKET#T", "sk": "SUMMARY"},
        old_image={"tenant_status": f"TENANT#a-b|{old}"} if old else None,
        new_image={"tenant_status": f"TENANT#a-b|{new}"} if new else None,
    )
    assert made.poison is None
    assert [(change.status.value, change.delta) for change in made.changes] == expected
    assert all(change.tenant_id == "a-b" for change in made.changes)


@pytest.mark.parametrize(
    ("keys_image", "new_status"),
    [
        ({"pk": "TENANT#a|TICKET#T", "sk": "SUMMARY"}, "TENANT#b|OPEN"),  # another tenant's index key
        ({"pk": "TENANT#1|TICKET#T", "sk": "SUMMARY"}, "TENANT#10|OPEN"),
        ({"pk": "TENANT#a|TICKET#T", "sk": "SUMMARY"}, "TENANT#a|LOST"),
        ({"pk": "TENANT#A|TICKET#T", "sk": "SUMMARY"}, "TENANT#A|OPEN"),  # no valid tenant in the key
        ({"pk": "TENANT#a|TICKET#T", "sk": "COMMENT#x"}, "TENANT#a|OPEN"),
    ],
)
def test_records_that_can_never_be_counted_are_poison(keys_image: dict[str, str], new_status: str) -> None:
    made = ledger_record(
        event_name="INSERT",
        sequence_number="1",
        event_id="e",
        keys_image=keys_image,
        old_image=None,
        new_image={"tenant_status": new_status},
    )
    assert made.poison is not None
    assert made.changes == ()


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


# One table, stream and set of clients for every example (the harness fixture
# lives as long as the test function): each example has tenants of its own (a
# random one and a prefix pair, like "1" and "10") and reads only the records
# it wrote, so the examples stay independent without a new emulator each.
@settings(max_examples=sized(deep=25, ci=8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, seed=st.integers(0, 2**32 - 1))
def test_any_history_with_any_redelivery_counts_exactly(
    harness: StreamHarness, operations: list[Any], seed: int
) -> None:
    rng = random.Random(seed)
    harness.new_records()  # what an earlier (failed) example left unread is not this example's
    base = random_tenant_id()
    tenants = [random_tenant_id(), base, base + "0"]
    repos = [TicketRepository(tenant_table(tenant)) for tenant in tenants]
    slots: dict[tuple[int, int], str] = {}
    for tenant, action, slot, status in operations:
        ticket = slots.get((tenant, slot))
        if action == "create" or ticket is None:
            slots[(tenant, slot)] = create(repos[tenant])
        elif action == "status":
            repos[tenant].change_status([ticket], status, actor="alice")
        else:
            repos[tenant].delete_ticket(ticket, actor="alice")
            del slots[(tenant, slot)]
    crashes = {"left": 3}

    def invoke(batch: list[Record]) -> list[str]:
        failed = harness.invoke(batch)
        if crashes["left"] and rng.random() < 0.2:
            crashes["left"] -= 1
            raise Crash("timed out after the writes")
        return failed

    mappings = [
        ShardMapping(shard, invoke, bisect=rng.random() < 0.7) for shard in split_into_shards(harness.new_records(), 2)
    ]
    while not all(mapping.done for mapping in mappings):
        mapping = rng.choice([m for m in mappings if not m.done])
        if rng.random() < 0.15:
            mapping.lose_checkpoints(rng.randint(1, 3))
        mapping.step(batch_size=rng.randint(1, 8))
    for tenant in tenants:
        assert harness.counts(tenant) == harness.truth(tenant)


def test_a_cancelled_transaction_moves_no_count(repo_for: RepoFactory, harness: StreamHarness) -> None:
    """DynamoDB streams nothing for a cancelled transaction (moto needs local_stack.emulator.moto_fixes for that)."""
    repo = repo_for(random_tenant_id())
    ids = [create(repo) for _ in range(3)]
    with pytest.raises(TicketNotFound):
        repo.change_status([ids[0], "01MISSING"], CLOSED, actor="alice")
    repo.delete_ticket(ids[2], actor="alice")
    records = harness.new_records()
    # the three creates, then the delete: its mark (who deleted it) and the REMOVE
    assert [record["eventName"] for record in records] == ["INSERT", "INSERT", "INSERT", "MODIFY", "REMOVE"]
    harness.deliver(records)
    assert harness.counts(repo.tenant_id) == harness.truth(repo.tenant_id) == {**zero(), OPEN: 2}
