"""The audit writer: the real handler over moto's real stream records, with the
template's own FilterCriteria; every change to a ticket, whoever made it,
exactly once under any redelivery."""

from __future__ import annotations

import json
import random
import sys
import threading
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError

from local_stack.event_sources.stream_sources import stream_source
from support_tickets.core import keys
from support_tickets.core.errors import TicketNotFound
from support_tickets.data.table import TenantTable
from support_tickets.data.ticket_repository import TicketRepository
from support_tickets.streams.audit_events import audit_record
from support_tickets.streams.audit_writer import audit_client
from tests.conftest import FAILURE_QUEUE_URL, REGION, all_items, instant_tenant_admin, random_tenant_id, tenant_table
from tests.functional.api_harness import Api, User, assert_error
from tests.functional.stream_harness import Record, StreamHarness

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

AUDIT = "AuditTrailFunction"
OPEN = keys.TicketStatus.OPEN


@pytest.fixture
def streams(aws: None) -> Any:
    return boto3.client("dynamodbstreams", region_name=REGION)


@pytest.fixture
def audit(dynamodb: DynamoDBClient, streams: Any, table_name: str) -> StreamHarness:
    return StreamHarness.of(AUDIT, dynamodb, streams, table_name)


@pytest.fixture
def counts(dynamodb: DynamoDBClient, streams: Any, table_name: str) -> StreamHarness:
    return StreamHarness(dynamodb, streams, table_name)


def audit_items(dynamodb: DynamoDBClient, table_name: str, tenant_id: str | None = None) -> list[dict[str, Any]]:
    """The audit trail's items (of one tenant, or every tenant's)."""
    prefix = keys.tenant_prefix(tenant_id) if tenant_id else "TENANT#"
    return [
        item
        for item in all_items(dynamodb, table_name)
        if item["pk"]["S"].startswith(prefix) and ("|HISTORY#" in item["pk"]["S"] or "|AUDIT#" in item["pk"]["S"])
    ]


def events_by_partition(items: list[dict[str, Any]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for item in items:
        if "event_id" in item:
            found.setdefault(item["pk"]["S"].split("|", 1)[1].split("#", 1)[0], []).append(item["event_id"]["S"])
    return found


def history(api: Api, user: User, ticket_id: str) -> list[dict[str, Any]]:
    response = api.history(user, ticket_id, limit="100")
    assert response.status == 200, response.body
    events: list[dict[str, Any]] = response.body["events"]
    return events


# ---------------------------------------------------------------- what is recorded, and who
def test_every_change_is_recorded_with_its_actor(
    api: Api, audit: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = random_tenant_id()
    alice, bob, root = User(tenant, "alice"), User(tenant, "bob"), User(tenant, "root", admin=True)
    # Given a ticket's whole life, by three users
    ticket_id = api.new_ticket(alice, title="Printer", description="the secret words", resolver="johnd")["ticket_id"]
    assert api.update(bob, ticket_id, {"status": "IN_PROGRESS", "resolver": None, "title": "Printer on fire"}).ok
    assert api.update(bob, ticket_id, {"description": "more secret words"}).ok
    comment = api.comment(alice, ticket_id, {"body": "a hushed comment"}).body
    assert api.batch(bob, [ticket_id], "CLOSED").ok
    assert api.delete(root, ticket_id).status == 204
    # When the stream reaches the audit writer
    audit.deliver(audit.new_records())
    # Then the history says who did what, oldest first
    events = history(api, alice, ticket_id)
    assert [(event["type"], event["actor"], event["version"]) for event in events] == [
        ("created", "alice", 1),
        ("updated", "bob", 2),
        ("updated", "bob", 3),
        ("comment_added", "alice", None),
        ("updated", "bob", 4),
        ("deleted", "root", 4),
    ]
    created, renamed, described, commented, closed, deleted = events
    assert created["changes"] == [
        {"field": "title", "old": None, "new": "Printer"},
        {"field": "status", "old": None, "new": "OPEN"},
        {"field": "resolver", "old": None, "new": "johnd"},
    ]
    assert renamed["changes"] == [
        {"field": "title", "old": "Printer", "new": "Printer on fire"},
        {"field": "status", "old": "OPEN", "new": "IN_PROGRESS"},
        {"field": "resolver", "old": "johnd", "new": None},
    ]
    assert (renamed["description_changed"], described["description_changed"]) == (False, True)
    assert described["changes"] == []
    assert commented["comment_id"] == comment["comment_id"]
    assert closed["changes"] == [{"field": "status", "old": "IN_PROGRESS", "new": "CLOSED"}]
    assert deleted["changes"] == [
        {"field": "title", "old": "Printer on fire", "new": None},
        {"field": "status", "old": "CLOSED", "new": None},
    ]
    assert [event["at"] for event in events] == sorted(event["at"] for event in events)
    # And no description or comment body was copied into the trail
    stored = json.dumps(audit_items(dynamodb, table_name, tenant))
    assert "secret words" not in stored
    assert "hushed" not in stored
    # And each event is in the tenant's trail of its day too, the same events
    by_partition = events_by_partition(audit_items(dynamodb, table_name, tenant))
    assert sorted(by_partition["HISTORY"]) == sorted(by_partition["AUDIT"])
    assert len(by_partition["HISTORY"]) == 6


def test_the_deletes_mark_and_a_reshard_record_nothing_and_count_nothing(
    api: Api, audit: StreamHarness, counts: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = random_tenant_id()
    alice, root = User(tenant, "alice"), User(tenant, "root", admin=True)
    tickets = [api.new_ticket(alice, title=f"t{n}")["ticket_id"] for n in range(6)]
    audit.deliver(audit.new_records())
    counts.deliver(counts.new_records())
    before = audit_items(dynamodb, table_name, tenant)
    # When the tenant is resharded (the move rewrites tenant_status's shard suffix only)
    admin = instant_tenant_admin(dynamodb, table_name)
    admin.reshard(tenant, 4)
    moves = audit.new_records()
    assert moves, "the reshard moved tickets"
    assert all(record["eventName"] == "MODIFY" for record in moves)
    audit.deliver(moves)
    counts.deliver(counts.new_records())
    # Then no event was recorded, and the counts did not move
    assert audit_items(dynamodb, table_name, tenant) == before
    assert counts.counts(tenant) == counts.truth(tenant) == {**dict.fromkeys(keys.TicketStatus, 0), OPEN: 6}
    # When an admin deletes a ticket: the mark, then the delete with its tombstone
    assert api.delete(root, tickets[0]).status == 204
    records = audit.new_records()
    assert [(record["eventName"], record["dynamodb"]["Keys"]["sk"]["S"]) for record in records] == [
        ("MODIFY", keys.SUMMARY_SK),
        ("REMOVE", keys.SUMMARY_SK),
        ("INSERT", keys.DELETING_SK),
    ]
    assert records[1]["dynamodb"]["OldImage"]["deleted_by"] == {"S": "root"}
    audit.deliver(records)
    counts.deliver(counts.new_records())
    # Then one event (deleted, by root), none for the mark nor the tombstone; the count moved once
    (event,) = history(api, alice, tickets[0])[1:]
    assert (event["type"], event["actor"]) == ("deleted", "root")
    assert counts.counts(tenant)[OPEN] == counts.truth(tenant)[OPEN] == 5


@pytest.mark.parametrize(("tenant", "neighbour"), [("1", "10"), ("10", "1")])
def test_two_admins_deleting_one_ticket_at_once_the_trail_names_the_delete_that_took_effect(
    api: Api,
    audit: StreamHarness,
    dynamodb: DynamoDBClient,
    table_name: str,
    monkeypatch: pytest.MonkeyPatch,
    tenant: str,
    neighbour: str,
) -> None:
    """Interleaved with events, no sleeps: ada marks, bob marks, ada deletes, then bob deletes."""
    ticket_id = api.new_ticket(User(tenant, "alice"), title="contested")["ticket_id"]
    other = api.new_ticket(User(neighbour, "alice"), title="same ids elsewhere")["ticket_id"]
    audit.deliver(audit.new_records())
    repositories = {actor: TicketRepository(tenant_table(tenant)) for actor in ("ada", "bob")}
    summary = {"pk": {"S": keys.ticket_pk(tenant, ticket_id)}, "sk": {"S": keys.SUMMARY_SK}}
    ada_marked, bob_marked, ada_done = threading.Event(), threading.Event(), threading.Event()
    removed_by: list[str] = []  # whose DeleteItem removed the summary
    real_call = TenantTable.call

    def exists() -> bool:
        return "Item" in dynamodb.get_item(TableName=table_name, Key=summary, ConsistentRead=True)

    def call(self: TenantTable, operation: str, **kwargs: Any) -> Any:
        actor = threading.current_thread().name
        marking = operation == "update_item" and "deleted_by" in kwargs.get("UpdateExpression", "")
        if marking and actor == "bob":
            assert ada_marked.wait(30)
        first = kwargs["TransactItems"][0] if operation == "transact_write_items" else {}
        if first.get("Delete", {}).get("Key") == summary:
            assert (bob_marked if actor == "ada" else ada_done).wait(30)
            before = exists()
            try:
                return real_call(self, operation, **kwargs)
            finally:
                if before and not exists():
                    removed_by.append(actor)
        try:
            return real_call(self, operation, **kwargs)
        finally:
            if marking:
                (ada_marked if actor == "ada" else bob_marked).set()

    monkeypatch.setattr(TenantTable, "call", call)
    outcomes: dict[str, str] = {}

    def delete(actor: str) -> None:
        try:
            repositories[actor].delete_ticket(ticket_id, actor)
            outcomes[actor] = "deleted"
        except TicketNotFound:
            outcomes[actor] = "not found"
        finally:
            if actor == "ada":
                ada_done.set()

    threads = [threading.Thread(target=delete, args=(actor,), name=actor) for actor in ("ada", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    monkeypatch.undo()
    assert len(removed_by) == 1
    # Then the trail's "deleted" event names the admin whose delete removed the ticket
    audit.deliver(audit.new_records())
    deleted = history(api, User(tenant, "alice"), ticket_id)[-1]
    assert (deleted["type"], deleted["actor"]) == ("deleted", removed_by[0])
    assert outcomes[removed_by[0]] == "deleted"
    # and the neighbour's ticket is untouched
    assert [event["type"] for event in history(api, User(neighbour, "alice"), other)] == ["created"]


def test_a_change_outside_the_api_is_recorded_without_an_actor(
    api: Api, audit: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    alice = User(random_tenant_id(), "alice")
    ticket_id = api.new_ticket(alice)["ticket_id"]
    assert api.update(alice, ticket_id, {"title": "by alice"}).ok
    # An operator's direct write: a new title, no version bump, no updated_by
    dynamodb.update_item(
        TableName=table_name,
        Key=keys.ticket_key(alice.tenant_id, ticket_id),
        UpdateExpression="SET title = :t",
        ExpressionAttributeValues={":t": {"S": "by an operator"}},
    )
    audit.deliver(audit.new_records())
    events = [event for event in history(api, alice, ticket_id) if event["type"] == "updated"]
    # (a change without a time of its own is placed at the stream's time, to the second)
    assert {(event["actor"], event["changes"][0]["new"]) for event in events} == {
        ("alice", "by alice"),
        (None, "by an operator"),  # not alice: she did not make this change
    }


# ---------------------------------------------------------------- exactly once
def test_redelivered_three_times_and_a_suffix_replayed_every_event_is_written_once(
    api: Api, audit: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    alice = User(random_tenant_id(), "alice")
    tickets = [api.new_ticket(alice, title=f"t{n}")["ticket_id"] for n in range(5)]
    for ticket_id in tickets:
        assert api.update(alice, ticket_id, {"status": "IN_PROGRESS"}).ok
        assert api.comment(alice, ticket_id, {"body": "c"}).status == 201
    batch = audit.new_records()
    assert len(batch) == 15
    # The same batch three times
    assert audit.invoke(batch) == []
    once = audit_items(dynamodb, table_name, alice.tenant_id)
    for item in once:  # a mark a rewrite would wipe out
        dynamodb.update_item(
            TableName=table_name,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression="SET written_once = :yes",
            ExpressionAttributeValues={":yes": {"BOOL": True}},
        )
    once = audit_items(dynamodb, table_name, alice.tenant_id)
    for _ in range(2):
        assert audit.invoke(batch) == []
    # A suffix from the middle, with newer records appended (the retry after a reported failure)
    assert api.update(alice, tickets[0], {"title": "later"}).ok
    newer = audit.new_records()
    assert audit.invoke(batch[7:] + newer) == []
    # And the records again in another order (bisected halves, shards interleaving)
    shuffled = batch + newer
    random.Random(7).shuffle(shuffled)
    assert audit.invoke(shuffled[:8]) == []
    assert audit.invoke(shuffled[8:]) == []
    items = audit_items(dynamodb, table_name, alice.tenant_id)
    by_partition = events_by_partition(items)
    record_ids = sorted(record["eventID"] for record in batch + newer)
    assert sorted(by_partition["HISTORY"]) == record_ids  # one event per record, once
    assert sorted(by_partition["AUDIT"]) == record_ids
    assert [item for item in items if item in once] == once  # nothing written before was rewritten


def test_a_record_that_fails_is_reported_and_its_retry_writes_it_once(
    api: Api, audit: StreamHarness, monkeypatch: pytest.MonkeyPatch, dynamodb: DynamoDBClient, table_name: str
) -> None:
    alice = User(random_tenant_id(), "alice")
    for n in range(4):
        api.new_ticket(alice, title=f"t{n}")
    batch = audit.new_records()
    # Given DynamoDB throttles the writes of the third record
    doomed = batch[2]["eventID"]
    real = audit_client()

    class Throttling:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def put_item(self, **kwargs: Any) -> Any:
            if kwargs["Item"].get("event_id", {}).get("S") == doomed:
                raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "PutItem")
            return real.put_item(**kwargs)

    writer_module = sys.modules["support_tickets.streams.audit_writer"]
    monkeypatch.setattr(writer_module, "audit_client", Throttling)
    writer_module.audit_writer.cache_clear()
    # Then the batch reports it (and only it) failed
    assert audit.invoke(batch) == [batch[2]["dynamodb"]["SequenceNumber"]]
    # And Lambda's retry from it (the records after it again too) writes it, once
    monkeypatch.setattr(writer_module, "audit_client", lambda: real)
    writer_module.audit_writer.cache_clear()
    assert audit.invoke(batch[2:]) == []
    by_partition = events_by_partition(audit_items(dynamodb, table_name, alice.tenant_id))
    assert sorted(by_partition["HISTORY"]) == sorted(record["eventID"] for record in batch)


def test_poison_goes_to_the_failure_queue_and_never_stalls_the_shard(
    api: Api, audit: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = random_tenant_id()
    ticket_id = api.new_ticket(User(tenant))["ticket_id"]
    # A summary whose tenant_status names another tenant (only a bug or an attack writes that)
    dynamodb.update_item(
        TableName=table_name,
        Key=keys.ticket_key(tenant, ticket_id),
        UpdateExpression="SET tenant_status = :ts, title = :t, #v = #v + :one",
        ExpressionAttributeNames={"#v": "version"},
        ExpressionAttributeValues={
            ":ts": {"S": keys.tenant_status("victim", "OPEN")},
            ":t": {"S": "x"},
            ":one": {"N": "1"},
        },
    )
    api.new_ticket(User(tenant), title="after the poison")
    records = audit.new_records()
    assert audit.invoke(records) == []
    messages = boto3.client("sqs", region_name=REGION).receive_message(QueueUrl=FAILURE_QUEUE_URL)["Messages"]
    (body,) = [json.loads(message["Body"]) for message in messages]
    assert body["eventID"] == records[1]["eventID"]
    assert "tenant" in body["reason"]
    assert set(body) == {"reason", "eventID", "sequenceNumber", "tenantId", "function"}  # no images
    # the records around it were recorded; the poison was not; nothing reached "victim"
    recorded = events_by_partition(audit_items(dynamodb, table_name, tenant))["HISTORY"]
    assert sorted(recorded) == sorted([records[0]["eventID"], records[2]["eventID"]])
    assert audit_items(dynamodb, table_name, "victim") == []


# ---------------------------------------------------------------- keys, retention, isolation
def test_events_expire_after_the_retention_and_survive_the_ticket(
    api: Api, audit: StreamHarness, monkeypatch: pytest.MonkeyPatch, dynamodb: DynamoDBClient, table_name: str
) -> None:
    monkeypatch.setenv("AUDIT_RETENTION_DAYS", "7")
    tenant = random_tenant_id()
    alice, root = User(tenant, "alice"), User(tenant, "root", admin=True)
    ticket_id = api.new_ticket(alice)["ticket_id"]
    assert api.delete(root, ticket_id).status == 204
    records = audit.new_records()
    audit.deliver(records)
    items = [item for item in audit_items(dynamodb, table_name, alice.tenant_id) if "event_id" in item]
    assert len(items) == 4  # two events, each in the history and in the day's trail
    for item in items:
        (record,) = [r for r in records if r["eventID"] == item["event_id"]["S"]]
        created = int(record["dynamodb"]["ApproximateCreationDateTime"])
        assert int(item["expiration"]["N"]) == created + 7 * 86_400
    # the ticket is gone; its history is not
    assert_error(api.summary(alice, ticket_id), 404, "TICKET_NOT_FOUND")
    assert [event["type"] for event in history(api, alice, ticket_id)] == ["created", "deleted"]


@pytest.mark.parametrize(("owner", "intruder"), [("1", "10"), ("10", "1")])
def test_tenants_1_and_10_each_see_only_their_own_trail(
    api: Api, audit: StreamHarness, dynamodb: DynamoDBClient, table_name: str, owner: str, intruder: str
) -> None:
    mine = api.new_ticket(User(owner))["ticket_id"]
    api.new_ticket(User(intruder))
    audit.deliver(audit.new_records())
    events = [item for item in audit_items(dynamodb, table_name) if "ticket_id" in item]
    assert {keys.tenant_of_key(item["pk"]["S"]) for item in events} == {owner, intruder}
    for item in events:
        assert (item["ticket_id"]["S"] == mine) == (keys.tenant_of_key(item["pk"]["S"]) == owner)
    # the intruder's history of the owner's ticket is the 404 of a missing one
    response = api.history(User(intruder), mine)
    assert_error(response, 404, "TICKET_NOT_FOUND")
    assert response.body == api.history(User(intruder), "01JD3ZZZZZZZZZZZZZZZZZZZZZ").body
    trail = api.audit(User(intruder, "root", admin=True)).body["events"]
    assert len(trail) == 1
    assert mine not in {event["ticket_id"] for event in trail}


# ---------------------------------------------------------------- the filter
def test_template_filter_passes_ticket_changes_and_comments_added_only(
    api: Api, audit: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = random_tenant_id()
    alice, root = User(tenant, "alice"), User(tenant, "root", admin=True)
    ticket_id = api.new_ticket(alice)["ticket_id"]
    api.comment(alice, ticket_id, {"body": "c"})
    api.create(alice, {"title": "idempotent"}, headers={"Idempotency-Key": "k1"})
    api.delete(root, ticket_id)
    everything = audit.new_records(filtered=False)
    audit.deliver([record for record in everything if stream_source(AUDIT).matches(record)])
    every_kind = audit.new_records(filtered=False)  # the audit items the writer just wrote
    source = stream_source(AUDIT)
    passed = [record for record in everything + every_kind if source.matches(record)]
    kinds = {(record["eventName"], record["dynamodb"]["Keys"]["sk"]["S"].split("#", 1)[0]) for record in passed}
    assert kinds == {
        ("INSERT", "SUMMARY"),
        ("MODIFY", "SUMMARY"),
        ("REMOVE", "SUMMARY"),
        ("INSERT", "COMMENT"),
        ("INSERT", keys.DELETING_SK),  # a deleted ticket's tombstone: what its delete left is finished
    }
    dropped = [record for record in everything + every_kind if not source.matches(record)]
    dropped_kinds = {record["dynamodb"]["Keys"]["pk"]["S"].split("|", 1)[1].split("#", 1)[0] for record in dropped}
    # The ticket's: its comment's and its tombstone's REMOVE
    assert {"IDEMPOTENCY", "HISTORY", "AUDIT", "TICKET"} <= dropped_kinds


def test_records_of_an_item_being_erased_are_filtered_out_and_skipped(api: Api, audit: StreamHarness) -> None:
    alice = User(random_tenant_id(), "alice")
    ticket_id = api.new_ticket(alice)["ticket_id"]
    audit.new_records()
    summary = {"pk": {"S": keys.ticket_pk(alice.tenant_id, ticket_id)}, "sk": {"S": "SUMMARY"}}
    marked = {**summary, "erasing": {"BOOL": True}, "tenant_status": {"S": keys.tenant_status(alice.tenant_id, "OPEN")}}
    record: Record = {
        "eventID": "e" * 32,
        "eventName": "REMOVE",
        "dynamodb": {"Keys": summary, "OldImage": marked, "SequenceNumber": "1", "ApproximateCreationDateTime": 1},
    }
    assert not stream_source(AUDIT).matches(record)
    assert not stream_source("AggregateCountsFunction").matches(record)
    skipped = audit_record(
        event_name="REMOVE",
        event_id="e" * 32,
        sequence_number="1",
        recorded_at=1.0,
        keys_image={"pk": summary["pk"]["S"], "sk": "SUMMARY"},
        old_image={"erasing": True, "tenant_status": keys.tenant_status(alice.tenant_id, "OPEN")},
        new_image=None,
    )
    assert (skipped.event, skipped.poison) == (None, None)
