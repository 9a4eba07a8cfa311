"""The online move (``ops.move``) over moto, with a fake clock for its waits:
tenant ``1`` or ``10`` (each beside the other) with tickets, comments, a
deleted ticket, history and its trail, counts, an idempotency record, a
webhook and a delivery, moved to a table of its own and back: every item
(but the kinds a move does not copy) is there item for item, the counts equal
a recount, nothing of it is left in the old table, nothing of the other
tenant changed. Changes made during the copy reach the new table; a late
audit event written into the old table after the switch is brought over, and
a ticket deleted after it stays deleted. A move killed at any step resumes; a
second mover is refused while one runs, and takes over a stopped one; a
move rolls back until its switch; a moving tenant can't be resharded or
offboarded, nor can a resharding one move."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import moto.core.responses
import moto.dynamodb.models.table
import pytest

from ops import move, offboard, tenants
from ops.move import DEFAULT_WORKERS, STALE_SECONDS, MoveError, MoveInterrupted, Mover, Outcome
from ops.sample_events import delivery_item
from ops.tenants import MoveRunning, RecordChanged, TenantAdmin
from stack_model import dedicated
from stack_model.template import REGION
from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from support_tickets.data.audit_items import epoch_of, iso_time
from support_tickets.data.placement import SWITCH_WAIT_SECONDS, MovePhase, data_table, writes_paused
from support_tickets.data.tenant_registry import TenantConfig, tenant_configs
from support_tickets.data.ticket_repository import TicketRepository
from support_tickets.streams.audit_events import audit_record
from support_tickets.streams.audit_writer import audit_writer
from tests.conftest import all_items
from tests.functional.api_harness import ROUTES, Api, ApiResponse, User, aws_calls
from tests.functional.conftest import local_state_file
from tests.functional.move_harness import (
    WRITE_OPERATIONS,
    FakeClock,
    HeldWrite,
    Stop,
    copied_items,
    counts_in,
    dedicated_table_in_moto,
    items_of,
    kill_at,
    not_copied,
    recounted,
)
from tests.functional.stream_harness import StreamHarness

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

STEPS = ["announced", "copied", "switching", "synced", "flipped", "erasing", "drained", "erased"]


class World:
    """The pool, its stream functions, the API, and the mover's tools."""

    def __init__(self, api: Api, dynamodb: DynamoDBClient, table_name: str, clock: FakeClock) -> None:
        self.api, self.dynamodb, self.pool = api, dynamodb, table_name
        self.streams = boto3.client("dynamodbstreams", region_name=REGION)
        self.counts = StreamHarness(dynamodb, self.streams, table_name)
        self.audit = StreamHarness.of("AuditTrailFunction", dynamodb, self.streams, table_name)
        self.clock = clock
        # How far the operator's machine's clock is off (the mover must not care).
        self.skew = 0.0
        self.log = io.StringIO()

    def admin(self) -> TenantAdmin:
        return TenantAdmin(
            self.dynamodb,
            self.pool,
            phase_seconds=35,
            sleep=lambda seconds: self.clock.sleep(seconds),  # noqa: PLW0108 (the clock's sleep then: a test wraps it)
            clock=lambda: self.clock() + self.skew,
        )

    def mover(self, checkpoint: Callable[[str], None] | None = None) -> Mover:
        # One trailing pass (no drain) unless a test asks for more; one worker (in-process, threads only contend).
        mover = Mover(self.admin(), deploy=dedicated_table_in_moto, workers=1, drain_seconds=0, stream=self.log)
        mover.monotonic = self.clock
        if checkpoint is not None:
            mover.checkpoint = checkpoint
        return mover

    def move(
        self, tenant_id: str, to: str, checkpoint: Callable[[str], None] | None = None, drain_seconds: float = 0
    ) -> Outcome:
        mover = self.mover(checkpoint)
        mover.drain_seconds = drain_seconds
        outcome = mover.move(tenant_id, to)
        tenant_configs().clear()  # what every container's cache does within a second
        return outcome

    def record(self, tenant_id: str) -> TenantConfig:
        return self.admin().record(tenant_id)

    def populate(self, tenant_id: str) -> list[str]:
        """Every kind of item; the ids of the tickets left."""
        self.admin().ensure(tenant_id)
        member, root = User(tenant_id, f"alice-{tenant_id}"), User(tenant_id, f"root-{tenant_id}", admin=True)
        ids = [self.api.new_ticket(member, title=f"{tenant_id} {n}")["ticket_id"] for n in range(3)]
        for ticket_id in ids:
            assert self.api.comment(member, ticket_id, {"body": "c"}).status == 201
        assert self.api.update(member, ids[0], {"status": "CLOSED"}).ok
        assert self.api.create(member, {"title": "once"}, headers={"Idempotency-Key": "k"}).status == 201
        assert self.api.delete(root, ids[-1]).status == 204
        hook = self.api.call("webhook_create", root, body=ROUTES["webhook_create"].body(""))
        assert hook.status == 201, hook.body
        self.dynamodb.put_item(TableName=self.pool, Item=delivery_item(tenant_id, hook.body["webhook_id"]))
        self.counts.deliver(self.counts.new_records())
        self.audit.deliver(self.audit.new_records())
        return ids[:-1]


@pytest.fixture
def world(aws: None, api: Api, dynamodb: DynamoDBClient, table_name: str, monkeypatch: pytest.MonkeyPatch) -> World:
    clock = FakeClock()
    monkeypatch.setattr(moto.core.responses, "utcnow", clock.utc)  # the Date header
    monkeypatch.setattr(moto.dynamodb.models.table, "utcnow", clock.utc)  # stream records' creation time
    return World(api, dynamodb, table_name, clock)


def assert_moved(world: World, tenant: str, table: str, original: list[dict[str, Any]]) -> None:
    """The tenant's carried items are in ``table`` item for item, its counts
    equal a recount there (and the counts it had), and nothing of it is left
    in the other table but, in the pool, its record and usage ledger."""
    dynamodb = world.dynamodb
    assert copied_items(dynamodb, table, tenant) == original
    assert counts_in(dynamodb, table, tenant) == recounted(dynamodb, table, tenant)
    other = dedicated.table_name(world.pool, tenant) if table == world.pool else world.pool
    kept = {keys.tenant_config_key(tenant)["pk"]["S"], *keys.usage_partitions(tenant)} if other == world.pool else set()
    assert [item for item in items_of(dynamodb, other, tenant) if item["pk"]["S"] not in kept] == []


# ---------------------------------------------------------------- there and back
def test_tenants_move_to_their_own_tables_and_back_with_nothing_lost_and_nothing_of_the_other_touched(
    world: World,
) -> None:
    """``1`` moves to its own table with ``10`` in the pool, ``10`` to its own
    with ``1`` in its table, then ``1`` back to the pool beside ``10``'s table."""
    tickets = world.populate("1")
    world.populate("10")
    original = {tenant: copied_items(world.dynamodb, world.pool, tenant) for tenant in ("1", "10")}
    counts = {tenant: counts_in(world.dynamodb, world.pool, tenant) for tenant in ("1", "10")}
    own_table = {tenant: dedicated.table_name(world.pool, tenant) for tenant in ("1", "10")}

    outcome = world.move("1", "dedicated")

    record = outcome.record
    assert (record.placement, record.table, record.move_phase, record.previous_table) == (
        "dedicated",
        own_table["1"],
        None,
        None,
    )
    assert record.placed_at > 0
    assert outcome.pause_seconds is not None
    # The flip's SWITCH_WAIT_SECONDS at least (of the fake clock); none before the sync: writes are fenced.
    assert outcome.pause_seconds >= 2
    assert_moved(world, "1", own_table["1"], original["1"])
    assert outcome.strays == 0  # the walk found all of it: the final Scan found nothing more
    # The erase's records, through the stream functions: nothing counted, audited or journaled
    world.counts.deliver(world.counts.new_records())
    world.audit.deliver(world.audit.new_records())
    assert_moved(world, "1", own_table["1"], original["1"])
    assert counts_in(world.dynamodb, own_table["1"], "1") == counts["1"]
    assert copied_items(world.dynamodb, world.pool, "10") == original["10"]
    assert {item["pk"]["S"].split("|")[0] for item in all_items(world.dynamodb, own_table["1"])} == {"TENANT#1"}
    # The API reads (and writes) it there
    member = User("1", "alice-1")
    assert world.api.get(member, tickets[0]).body["ticket"]["status"] == "CLOSED"
    assert world.api.call("webhook_list", User("1", "root", admin=True)).body["items"][0]["url"]
    in_its_table = all_items(world.dynamodb, own_table["1"])

    assert world.move("10", "dedicated").strays == 0

    assert_moved(world, "10", own_table["10"], original["10"])
    assert counts_in(world.dynamodb, own_table["10"], "10") == counts["10"]
    assert all_items(world.dynamodb, own_table["1"]) == in_its_table

    back = world.move("1", "pool")

    assert (back.record.placement, back.record.table, back.record.previous_table) == ("pool", None, own_table["1"])
    assert back.record.placed_at > record.placed_at
    assert_moved(world, "1", world.pool, original["1"])
    assert back.strays == 0
    assert counts_in(world.dynamodb, world.pool, "1") == counts["1"]
    assert copied_items(world.dynamodb, own_table["10"], "10") == original["10"]
    assert "delete-stack" in world.log.getvalue()  # how to delete the emptied table


def test_a_tenant_in_its_placement_already_moves_nothing(world: World) -> None:
    world.populate("1")
    before = all_items(world.dynamodb, world.pool)
    outcome = world.move("1", "pool")
    assert outcome.record == world.record("1")
    assert all_items(world.dynamodb, world.pool) == before


# ---------------------------------------------------------------- changes during the move
def test_changes_made_during_the_copy_reach_the_new_table(world: World) -> None:
    """The old table is authoritative at the switch: an update, a comment, a
    new ticket, a deleted ticket and a status change made after the copy are
    in the new table as in the old, and the counts follow them."""
    tickets = world.populate("1")
    member, root = User("1", "alice-1"), User("1", "root-1", admin=True)
    # A ticket no audit event names yet (its records not processed): only GSI1 finds it, until it is deleted.
    unnamed = world.api.new_ticket(member, title="copied, then deleted")["ticket_id"]
    frozen: list[list[dict[str, Any]]] = []

    def during(step: str) -> None:
        if step == "copied":  # writes still go to the pool table
            tenant_configs().clear()
            assert world.api.update(member, tickets[0], {"title": "renamed", "status": "IN_PROGRESS"}).ok
            assert world.api.comment(member, tickets[1], {"body": "after the copy"}).status == 201
            world.api.new_ticket(member, title="new during the copy")
            assert world.api.delete(root, tickets[1]).status == 204
            assert world.api.delete(root, unnamed).status == 204
        if step == "switching":
            frozen.append(copied_items(world.dynamodb, world.pool, "1"))

    world.move("1", "dedicated", during)

    own_table = dedicated.table_name(world.pool, "1")
    assert_moved(world, "1", own_table, frozen[0])
    assert counts_in(world.dynamodb, own_table, "1") == {"OPEN": 2, "IN_PROGRESS": 1, "CLOSED": 0}


@pytest.mark.parametrize(
    ("moving", "beside", "to", "released"),
    [
        ("1", "10", "dedicated", "switching"),
        ("10", "1", "dedicated", "flipped"),
        ("1", "10", "dedicated", "after the move"),
        ("10", "1", "pool", "flipped"),
    ],
)
def test_a_write_made_during_the_copy_that_lands_after_the_switch_is_refused_not_lost(
    world: World, moving: str, beside: str, to: str, released: str
) -> None:
    """A PATCH whose function read the record during the copy, and whose
    DynamoDB write lands only later (a read timeout and the SDK's retry do
    that; here, however late: after the mover switched, after it flipped,
    after the whole move) is refused: 503 ``TENANT_MOVING``, nothing written
    anywhere, and the ticket reads as it was. No wait of the mover's decides
    it: the write is fenced by the tenant record. The tenant beside it is
    untouched."""
    if to == "pool":
        world.populate(moving)
        world.move(moving, "dedicated")
    tickets = world.populate(moving)
    world.populate(beside)
    others = items_of(world.dynamodb, world.pool, beside)
    member = User(moving, f"alice-{moving}")
    original = world.api.get(member, tickets[0]).body
    source_table = world.pool if to == "dedicated" else dedicated.table_name(world.pool, moving)
    write = HeldWrite(lambda: world.api.update(member, tickets[0], {"title": "written during the copy"}))

    def during(step: str) -> None:
        if step == "copied":
            tenant_configs().clear()  # the function reads the record: COPYING
            write.start()  # its write is on its way, not landed
        if step == released:
            write.release()

    with write.holding():
        world.move(moving, to, during)
        if released == "after the move":
            write.release()

    (answer,) = write.answers
    assert (answer.status, answer.error_code) == (503, "TENANT_MOVING")
    assert world.api.get(member, tickets[0]).body == original
    assert world.record(moving).placement == to
    kept = {keys.tenant_config_key(moving)["pk"]["S"], *keys.usage_partitions(moving)}
    assert [item for item in items_of(world.dynamodb, source_table, moving) if item["pk"]["S"] not in kept] == []
    assert items_of(world.dynamodb, world.pool, beside) == others


@pytest.mark.parametrize(("moving", "beside"), [("1", "10"), ("10", "1")])
def test_fenced_writes_during_the_copy_answer_as_unfenced_ones(world: World, moving: str, beside: str) -> None:
    """During the copy every write is one transaction with the fence's check:
    a PATCH still answers the ticket it made, a stale ``If-Match`` still 412
    with the current version, a repeated ``Idempotency-Key`` still the first
    ticket (Powertools reads the stored record from the failed condition), a
    batch of 100 tickets (no room left for the check) 503 with nothing
    written, a comment and a delete as ever; the tenant beside it writes
    unfenced."""
    tickets = world.populate(moving)
    world.populate(beside)
    member, root = User(moving, f"alice-{moving}"), User(moving, f"root-{moving}", admin=True)
    neighbour = User(beside, f"alice-{beside}")
    answers: dict[str, Any] = {}
    hundred = [*tickets, *(world.api.new_ticket(member, title=f"batch {n}")["ticket_id"] for n in range(98))]

    def during(step: str) -> None:
        if step != "copied":
            return
        tenant_configs().clear()
        with aws_calls() as calls:
            answers["patched"] = world.api.update(member, tickets[0], {"title": "fenced"}, if_match="2")
            answers["stale"] = world.api.update(member, tickets[0], {"title": "stale"}, if_match="2")
            first = world.api.create(member, {"title": "once"}, headers={"Idempotency-Key": "fenced"})
            again = world.api.create(member, {"title": "once"}, headers={"Idempotency-Key": "fenced"})
            answers["created"] = (first, again)
            answers["commented"] = world.api.comment(member, tickets[1], {"body": "fenced"})
            answers["batch"] = world.api.batch(member, hundred, "CLOSED")
            answers["deleted"] = world.api.delete(root, tickets[1])
            answers["beside"] = world.api.new_ticket(neighbour, title="unfenced")
        answers["calls"] = calls

    world.move(moving, "dedicated", during)

    patched = answers["patched"]
    assert patched.status == 200, patched.body
    assert (patched.body["title"], patched.body["version"]) == ("fenced", 3)
    stale = answers["stale"]
    assert (stale.status, stale.error_code) == (412, "VERSION_MISMATCH")
    assert stale.body["error"]["details"]["current_version"] == 3
    first, again = answers["created"]
    assert (first.status, again.status) == (201, 201)
    assert first.body["ticket_id"] == again.body["ticket_id"]
    assert answers["commented"].status == 201
    # A batch of 100 has no room for the fence's check: made marked, then checked against the record.
    assert answers["batch"].status == 200, answers["batch"].body
    assert answers["deleted"].status == 204
    writes = [(operation, params) for service, operation, params in answers["calls"] if service == "dynamodb"]
    checked = [
        action["ConditionCheck"]["Key"]["pk"]["S"]
        for operation, params in writes
        if operation == "TransactWriteItems"
        for action in params["TransactItems"]
        if "ConditionCheck" in action and action["ConditionCheck"]["Key"] == keys.tenant_config_key(moving)
    ]
    assert checked  # the moving tenant's writes were fenced...
    unfenced = [
        params
        for operation, params in writes
        if operation in WRITE_OPERATIONS
        and operation != "TransactWriteItems"
        and keys.tenant_prefix(moving) in json.dumps(params)
    ]
    # ...every one of them but the 100-ticket batch's marks, put before it and again after it
    assert [json.dumps(params).count("|MOVE#") for params in unfenced] == [25] * 8
    assert not [
        params
        for operation, params in writes
        if keys.tenant_config_key(beside)["pk"]["S"] in json.dumps(params) and operation == "TransactWriteItems"
    ]  # and the tenant beside it not at all
    own_table = dedicated.table_name(world.pool, moving)
    moved = world.api.summary(member, tickets[0])
    assert (moved.body["title"], moved.body["status"], moved.body["version"]) == ("fenced", "CLOSED", 4)
    assert world.api.get(member, first.body["ticket_id"]).status == 200
    assert world.api.get(member, tickets[1]).status == 404
    assert world.record(moving).table == own_table


@pytest.mark.parametrize(
    ("moving", "beside", "remembered"),
    [("1", "10", move.MAX_REMEMBERED), ("10", "1", move.MAX_REMEMBERED), ("1", "10", 3)],
    ids=["1 beside 10", "10 beside 1", "copy too large to remember"],
)
def test_the_switch_reads_again_only_the_tickets_written_during_the_copy(
    world: World, moving: str, beside: str, remembered: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write of a ticket during the copy marked it first: the paused sync
    reads those tickets' partitions again, none of the others (which the copy
    read after every function saw the move), and the moved data and counts are
    exact. The tenant beside it, not moving, makes no marks. A copy too large to
    remember (the sync reads the new table's side) still keeps each ticket's
    status, and reads only the marked tickets again."""
    monkeypatch.setattr(move, "MAX_REMEMBERED", remembered)
    tickets = world.populate(moving)
    world.populate(beside)
    member = User(moving, f"alice-{moving}")
    neighbour = User(beside, f"alice-{beside}")
    frozen: list[list[dict[str, Any]]] = []

    def during(step: str) -> None:
        if step == "copied":
            tenant_configs().clear()
            assert world.api.update(member, tickets[0], {"status": "IN_PROGRESS"}).ok
            world.api.new_ticket(member, title="new during the copy")
            beside_ticket = world.api.new_ticket(neighbour, title="beside")["ticket_id"]
            assert world.api.update(neighbour, beside_ticket, {"title": "b"}).ok
        if step == "switching":
            frozen.append(copied_items(world.dynamodb, world.pool, moving))

    outcome = world.move(moving, "dedicated", during)

    assert outcome.sync_tickets == 2
    own_table = dedicated.table_name(world.pool, moving)
    assert_moved(world, moving, own_table, frozen[0])
    assert counts_in(world.dynamodb, own_table, moving) == recounted(world.dynamodb, own_table, moving)
    assert counts_in(world.dynamodb, own_table, moving) == {"OPEN": 3, "IN_PROGRESS": 1, "CLOSED": 0}
    marks = set(keys.move_mark_partitions(beside)) | set(keys.move_mark_partitions(moving))
    assert not [item for item in all_items(world.dynamodb, world.pool) if item["pk"]["S"] in marks]


@pytest.mark.parametrize(
    ("moving", "beside", "remembered"),
    [("1", "10", move.MAX_REMEMBERED), ("10", "1", move.MAX_REMEMBERED), ("1", "10", 3)],
    ids=["1 beside 10", "10 beside 1", "copy too large to remember"],
)
def test_the_catch_up_leaves_the_switch_only_what_was_written_since_it_read_it(
    world: World, moving: str, beside: str, remembered: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While writes still go on, the catch-up syncs what the copy missed and
    takes back the marks it synced: the switch (the write pause) reads again
    only the tickets written since. A ticket written again between the
    catch-up's read and its taking back keeps its mark (its write's token is
    another), so that write is not lost; one written after is marked anew.
    What no write marks (an idempotency record) is in the new table before the
    switch. The moved data and counts are exact; the tenant beside it makes no
    marks."""
    monkeypatch.setattr(move, "MAX_REMEMBERED", remembered)
    tickets = world.populate(moving)
    world.populate(beside)
    member, root = User(moving, f"alice-{moving}"), User(moving, f"root-{moving}", admin=True)
    neighbour = User(beside, f"alice-{beside}")
    frozen: list[list[dict[str, Any]]] = []
    made: list[str] = []
    reached: list[str] = []

    def during(step: str) -> None:
        tenant_configs().clear()
        if step == "copied":
            assert world.api.update(member, tickets[0], {"status": "IN_PROGRESS"}).ok
            made.append(world.api.new_ticket(member, title="new during the copy")["ticket_id"])
            assert world.api.comment(member, tickets[1], {"body": "during the copy"}).status == 201
            assert world.api.update(neighbour, world.api.new_ticket(neighbour)["ticket_id"], {"title": "b"}).ok
            created = world.api.create(member, {"title": "once"}, headers={"Idempotency-Key": "during-the-copy"})
            assert created.status == 201
        if step == "catching up" and step not in reached:  # the first round synced, its marks not yet taken back
            assert world.api.update(member, tickets[0], {"title": "between the read and the take-back"}).ok
            assert world.api.delete(root, made[0]).status == 204
        if step == "caught up":
            assert world.api.comment(member, tickets[1], {"body": "after the catch-up"}).status == 201
        if step == "switching":
            frozen.append(copied_items(world.dynamodb, world.pool, moving))
            idempotency = set(keys.idempotency_partitions(moving))
            ahead.extend(i for i in items_of(world.dynamodb, own_table, moving) if i["pk"]["S"] in idempotency)
            recorded.extend(i for i in frozen[0] if i["pk"]["S"] in idempotency)
        reached.append(step)

    own_table = dedicated.table_name(world.pool, moving)
    ahead: list[dict[str, Any]] = []  # the new table's idempotency records, then the old one's
    recorded: list[dict[str, Any]] = []
    mover = world.mover(during)
    mover.catch_up_enough = 0
    outcome = mover.move(moving, "dedicated")
    tenant_configs().clear()

    # The first round took back the marks of tickets[1] and of the ticket created once only (the others
    # were written again since it read them), the second those two; the switch read again only the ticket
    # commented on after the catch-up.
    assert reached.count("catching up") == 2
    assert (outcome.catch_up_rounds, outcome.caught_up) == (2, 4)
    assert outcome.sync_tickets == 1
    assert len(recorded) == 2
    assert sorted(ahead, key=str) == sorted(recorded, key=str)
    assert_moved(world, moving, own_table, frozen[0])
    assert counts_in(world.dynamodb, own_table, moving) == recounted(world.dynamodb, own_table, moving)
    assert counts_in(world.dynamodb, own_table, moving) == {"OPEN": 3, "IN_PROGRESS": 1, "CLOSED": 0}
    assert world.api.summary(member, tickets[0]).body["title"] == "between the read and the take-back"
    marks = set(keys.move_mark_partitions(beside)) | set(keys.move_mark_partitions(moving))
    assert not [item for item in all_items(world.dynamodb, world.pool) if item["pk"]["S"] in marks]


@pytest.mark.parametrize(("moving", "beside"), [("1", "10"), ("10", "1")])
def test_the_switch_reads_the_audit_events_written_during_the_copy_by_key_and_no_days_trail(
    world: World, moving: str, beside: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit writer, running during the copy, marks each event it writes into
    the moving tenant's old table first: the paused sync reads those events by
    key (with their history twins) and no day's trail, however much the tenant
    wrote in the last hour, and the moved trail is complete. The tenant beside
    it, not moving, marks nothing."""
    tickets = world.populate(moving)
    world.populate(beside)
    member, neighbour = User(moving, f"alice-{moving}"), User(beside, f"alice-{beside}")
    frozen: list[list[dict[str, Any]]] = []
    at_flip: list[list[dict[str, Any]]] = []
    read: list[str] = []
    sync_read: list[str] = []
    items = move.partition_items

    def reading(table: Any, pk: str, since: str = "", projection: str | None = None) -> Any:
        read.append(pk)
        return items(table, pk, since, projection)

    monkeypatch.setattr(move, "partition_items", reading)

    def during(step: str) -> None:
        if step == "copied":
            tenant_configs().clear()
            assert world.api.update(member, tickets[0], {"status": "IN_PROGRESS"}).ok
            assert world.api.comment(member, tickets[1], {"body": "während der Kopie"}).status == 201
            beside_ticket = world.api.new_ticket(neighbour, title="beside")["ticket_id"]
            assert world.api.update(neighbour, beside_ticket, {"title": "b"}).ok
            world.audit.deliver(world.audit.new_records())  # the audit writer keeps up during the copy
        if step == "switching":
            frozen.append(copied_items(world.dynamodb, world.pool, moving))
            read.clear()
        if step == "synced":
            sync_read.extend(read)
        if step == "flipped":  # what reads see from now on: the trail as it was, not later
            at_flip.append(copied_items(world.dynamodb, dedicated.table_name(world.pool, moving), moving))

    outcome = world.move(moving, "dedicated", during)

    assert at_flip == frozen
    assert outcome.sync_events == 2  # the update's event and the comment's
    assert outcome.sync_tickets == 2
    own_suffixes = [keys.own_suffix(moving, pk) for pk in sync_read]
    assert not [suffix for suffix in own_suffixes if suffix and keys.is_audit_day_suffix(suffix)]
    own_table = dedicated.table_name(world.pool, moving)
    assert_moved(world, moving, own_table, frozen[0])
    trail = [item for item in all_items(world.dynamodb, own_table) if item.get("type", {}).get("S") == "comment_added"]
    assert (
        len([item for item in trail if item.get("ticket_id", {}).get("S") == tickets[1]]) == 4
    )  # populate's and ours, each in its day and its history
    marks = set(keys.move_mark_partitions(beside)) | set(keys.move_mark_partitions(moving))
    assert not [item for item in all_items(world.dynamodb, world.pool) if item["pk"]["S"] in marks]


def test_a_resumed_copy_does_not_take_what_it_wrote_for_all_the_new_table_has(world: World) -> None:
    """A run killed after its copy; a ticket it copied is deleted before the next
    run, which copies again and syncs: the ticket goes from the new table too
    (what the first run copied is not in the second run's memory)."""
    world.populate("1")
    member, root = User("1", "alice-1"), User("1", "root-1", admin=True)
    unnamed = world.api.new_ticket(member, title="no audit event names it")["ticket_id"]
    with pytest.raises(Stop):
        world.move("1", "dedicated", kill_at("copied"))
    assert world.api.delete(root, unnamed).status == 204
    expected = copied_items(world.dynamodb, world.pool, "1")
    world.clock.now += STALE_SECONDS + 1  # changed_at is rounded up to a second

    world.move("1", "dedicated")

    assert_moved(world, "1", dedicated.table_name(world.pool, "1"), expected)


def test_a_late_audit_event_is_brought_over_and_a_ticket_deleted_after_the_switch_stays_deleted(world: World) -> None:
    """After the switch, while the trailing copy waits between its passes, an
    audit writer that lags behind writes a pool record's event into the pool
    table: a later pass brings it (and its history twin) over, until the
    drain is over. A ticket deleted in the new table meanwhile is not copied
    back from the old one."""
    tickets = world.populate("1")
    root = User("1", "root-1", admin=True)
    late_ids: list[str] = []

    def late_write() -> None:
        # A stream record of the old table from just before the switch (the world's time, not the real one:
        # the world runs ten minutes behind, so a real time could fall on a day after the switch's).
        placed_at = world.record("1").placed_at
        assert placed_at  # flipped
        at = iso_time(placed_at - 1)
        late = audit_record(
            event_name="INSERT",
            event_id="f" * 32,
            sequence_number="99",
            recorded_at=epoch_of(at),
            keys_image={"pk": keys.ticket_pk("1", "LATE"), "sk": keys.SUMMARY_SK},
            old_image=None,
            new_image={"tenant_status": "TENANT#1|OPEN", "title": "t", "resolver": "#UNASSIGNED", "created_at": at},
        )
        assert audit_writer().write(late) == 2
        late_ids.append("LATE")

    def after_switch(step: str) -> None:
        if step == "erasing":
            tenant_configs().clear()  # writes go to the new table now
            assert world.api.delete(root, tickets[0]).status == 204
            world.clock.meanwhile.append(late_write)  # during the wait after the first trailing pass

    outcome = world.move("1", "dedicated", after_switch, drain_seconds=10)

    own_table = dedicated.table_name(world.pool, "1")
    moved = {(item["pk"]["S"], item["sk"]["S"]) for item in items_of(world.dynamodb, own_table, "1")}
    assert late_ids
    assert outcome.trailing == 2
    assert keys.history_pk("1", "LATE") in {pk for pk, _ in moved}
    late_day = [pk for pk, sk in moved if pk.startswith(keys.tenant_key("1", "AUDIT#")) and sk.endswith("f" * 32)]
    assert len(late_day) == 1
    assert (keys.ticket_pk("1", tickets[0]), keys.SUMMARY_SK) not in moved  # not resurrected
    assert items_of(world.dynamodb, world.pool, "1")
    assert all(
        item["pk"]["S"] in {keys.tenant_config_key("1")["pk"]["S"], *keys.usage_partitions("1")}
        for item in items_of(world.dynamodb, world.pool, "1")
    )


VERSIONS = 30


@pytest.mark.parametrize(("moving", "beside"), [("10", "1")])  # one way: the erase's cost, not isolation
def test_a_move_killed_at_its_switch_finishes_in_one_run_while_the_audit_writer_lags_past_the_drain(
    world: World, moving: str, beside: str
) -> None:
    """Thirty updates of each ticket, then the move is killed at its switch;
    the audit writer falls behind: during the re-run, from the end of its
    trailing copy on, it writes those updates' events into the old table, one
    a second (one at least while the mover sleeps), through the erase and past
    the final Scan's first rounds.
    The one re-run finishes: every event is in the new table (none erased
    uncopied), nothing is left in the old one."""
    tickets = world.populate(moving)
    world.populate(beside)
    member = User(moving, f"alice-{moving}")
    for version in range(VERSIONS):
        for ticket_id in tickets:
            assert world.api.update(member, ticket_id, {"title": f"version {version}"}).ok
    with pytest.raises(Stop):
        world.move(moving, "dedicated", kill_at("synced"))
    backlog = world.audit.new_records()
    assert len(backlog) == VERSIONS * len(tickets)
    written: list[int] = []

    sleep = world.clock.sleep

    credit = [0.0]

    def lagging(seconds: float) -> None:  # while the mover sleeps, the writer's next records: one a second
        sleep(seconds)
        credit[0] += seconds
        batch = backlog[: int(credit[0])]
        del backlog[: len(batch)]
        credit[0] -= len(batch)
        world.audit.deliver(batch)
        written.append(len(batch))

    def lag_from_the_drain_on(step: str) -> None:
        if step == "drained":
            world.clock.sleep = lagging  # type: ignore[method-assign]

    world.clock.now += STALE_SECONDS + 1

    mover = world.mover(lag_from_the_drain_on)
    mover.rate = 10  # an erase that takes a while: the writer writes during it and after it

    outcome = mover.move(moving, "dedicated")

    assert not backlog, world.log.getvalue()
    assert sum(written) == VERSIONS * len(tickets)
    own_table = dedicated.table_name(world.pool, moving)
    assert outcome.record.placement == "dedicated"
    assert not outcome.record.moving
    history = Counter(
        str(item["pk"]["S"])
        for item in items_of(world.dynamodb, own_table, moving)
        if item["pk"]["S"] in {keys.history_pk(moving, ticket_id) for ticket_id in tickets}
    )
    assert history == {
        keys.history_pk(moving, tickets[0]): 3 + VERSIONS,  # created, commented, closed, then each version
        keys.history_pk(moving, tickets[1]): 2 + VERSIONS,
    }
    left = [item for item in items_of(world.dynamodb, world.pool, moving) if item["pk"]["S"] not in not_copied(moving)]
    assert left == []


def test_what_the_walk_cannot_find_is_copied_when_append_only_and_otherwise_left_and_reported(world: World) -> None:
    """A deleted webhook's delivery (its webhook no longer lists it) and a history
    item without its day twin (the walk copies a history by its day items) are
    found by the final Scan only: copied, then erased. A ticket under a GSI1 key of 8
    shards while its record says 1 is found by no walk: left in the old table
    and reported (copied after the switch it would fire a ticket.created)."""
    world.populate("1")
    world.dynamodb.put_item(TableName=world.pool, Item=delivery_item("1", "GONE"))
    alone = {"pk": {"S": keys.history_pk("1", "ALONE")}, "sk": {"S": "2026-11-21T10:00:00.000Z#1#e"}}
    world.dynamodb.put_item(TableName=world.pool, Item={**alone, "ticket_id": {"S": "ALONE"}})
    odd = {
        **keys.ticket_key("1", "ODD"),
        "tenant_status": {"S": keys.tenant_status("1", TicketStatus.OPEN, 5)},
        "resolver": {"S": keys.UNASSIGNED_RESOLVER},
        "title": {"S": "under a key of 8 shards"},
    }
    world.dynamodb.put_item(TableName=world.pool, Item=odd)

    outcome = world.move("1", "dedicated")

    own_table = dedicated.table_name(world.pool, "1")
    gone = delivery_item("1", "GONE")
    moved = {(item["pk"]["S"], item["sk"]["S"]) for item in items_of(world.dynamodb, own_table, "1")}
    assert (gone["pk"]["S"], gone["sk"]["S"]) in moved
    assert (alone["pk"]["S"], alone["sk"]["S"]) in moved
    assert (odd["pk"]["S"], odd["sk"]["S"]) not in moved
    left = [item for item in items_of(world.dynamodb, world.pool, "1") if item["pk"]["S"] == odd["pk"]["S"]]
    assert left == [odd]
    assert outcome.strays == 2
    assert "LEFT THERE: 1 ticket, webhook or idempotency item(s)" in outcome.verified


@pytest.mark.parametrize(
    ("skew", "moving", "beside"), [(4, "1", "10"), (-4, "10", "1"), (60, "10", "1"), (-60, "1", "10")]
)
def test_a_move_gives_the_same_result_whatever_the_operators_clock_says(
    world: World, skew: float, moving: str, beside: str
) -> None:
    """The operator's clock ahead or behind DynamoDB's: every write acknowledged
    before the switch and after it is audited exactly once (no event missed, no
    copy taken for a change), and the counts are exact, in the new table after
    the stream functions handled both tables' records."""
    tickets = world.populate(moving)
    world.populate(beside)
    world.skew = skew
    member = User(moving, f"alice-{moving}")
    own_table = dedicated.table_name(world.pool, moving)

    def history(table: str) -> Counter[str]:
        return Counter(
            str(item["pk"]["S"])
            for item in items_of(world.dynamodb, table, moving)
            if item["pk"]["S"] in {keys.history_pk(moving, ticket_id) for ticket_id in tickets}
        )

    before = history(world.pool)

    def writes(step: str) -> None:
        if step in ("copied", "erasing"):  # the old table's last writes, the new table's first
            tenant_configs().clear()
            for ticket_id in tickets:
                assert world.api.update(member, ticket_id, {"title": f"{step} {ticket_id}"}).ok
        if step == "switching":  # the stream functions keep up with the old table
            world.counts.deliver(world.counts.new_records())
            world.audit.deliver(world.audit.new_records())

    world.move(moving, "dedicated", writes)
    for function in ("AggregateCountsFunction", "AuditTrailFunction"):
        harness = StreamHarness.of(function, world.dynamodb, world.streams, own_table)
        harness.deliver(harness.new_records())
    world.counts.deliver(world.counts.new_records())  # the erase's records
    world.audit.deliver(world.audit.new_records())

    assert history(own_table) == before + Counter({keys.history_pk(moving, ticket_id): 2 for ticket_id in tickets})
    assert counts_in(world.dynamodb, own_table, moving) == recounted(world.dynamodb, own_table, moving)
    assert [
        item for item in items_of(world.dynamodb, world.pool, moving) if item["pk"]["S"] not in not_copied(moving)
    ] == []


# ---------------------------------------------------------------- interrupted, concurrent, rolled back
def test_a_move_killed_at_every_step_resumes_each_time_it_is_run_again(world: World) -> None:
    """Killed at each step in turn (run again after the stopped mover's record
    went stale); past the switch, asking for the old placement is refused."""
    world.populate("10")
    tickets = world.populate("1")
    member, root = User("1", "alice-1"), User("1", "root-1", admin=True)
    unnamed = world.api.new_ticket(member, title="no audit event names it")["ticket_id"]
    others = items_of(world.dynamodb, world.pool, "10")
    reached: list[str] = []

    for step in STEPS:
        with pytest.raises(Stop):
            world.move("1", "dedicated", kill_at(step))
        reached.append(step)
        if step == "copied":  # between two runs, still COPYING: the next run's sync (SWITCHING) reads the new table
            assert world.api.delete(root, unnamed).status == 204
            assert world.api.update(member, tickets[1], {"status": "IN_PROGRESS"}).ok
            original = copied_items(world.dynamodb, world.pool, "1")
        with pytest.raises(MoveError, match="is running"):  # its record was written a moment ago
            world.move("1", "dedicated")
        world.clock.now += STALE_SECONDS + 1  # changed_at is rounded up to a second
        if step in ("flipped", "erasing"):
            with pytest.raises(MoveError, match="past its switch") as error:
                world.move("1", "pool")
            assert "\n" not in str(error.value)
            assert world.record("1").move_phase == MovePhase(step.upper())
    outcome = world.move("1", "dedicated")

    assert reached == STEPS
    assert outcome.record.placement == "dedicated"
    assert not outcome.record.moving
    assert_moved(world, "1", dedicated.table_name(world.pool, "1"), original)
    assert items_of(world.dynamodb, world.pool, "10") == others


def interrupt_at(step: str, *, sigterm: bool = False) -> Callable[[str], None]:
    """A checkpoint where the operator presses Ctrl-C (or the mover gets a SIGTERM) at ``step``."""

    def checkpoint(reached: str) -> None:
        if reached == step:
            if sigterm:
                os.kill(os.getpid(), signal.SIGTERM)
            raise KeyboardInterrupt

    return checkpoint


def test_a_move_interrupted_at_every_step_says_what_it_left_and_one_run_at_once_finishes_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C at each step in turn (SIGTERM at one), tenants ``1`` and ``10``
    in turn, each moving to its own table and back: one line names the state
    it left and the command; a switch not yet flipped is back in COPYING
    (writes accepted at once, and the re-run carries them over), the lease is
    released (the re-run needs no wait), writes are never refused longer than
    an uninterrupted move refuses them, and the one re-run finishes the move,
    nothing lost, nothing left behind, nothing of the other tenant touched."""
    tickets = {tenant: world.populate(tenant) for tenant in ("1", "10")}
    refused: list[tuple[float, bool]] = []  # (when, whether writes are refused from then on), each record write
    write = TenantAdmin._write

    def logged(self: TenantAdmin, current: TenantConfig, changes: dict[str, Any]) -> TenantConfig:
        updated = write(self, current, changes)
        refused.append((world.clock.now, writes_paused(updated)))
        return updated

    monkeypatch.setattr(TenantAdmin, "_write", logged)
    placement = {"1": "pool", "10": "pool"}
    for index, step in enumerate(STEPS):
        tenant, beside = ("1", "10") if index % 4 in (0, 2) else ("10", "1")
        to = "dedicated" if placement[tenant] == "pool" else "pool"
        target = dedicated.table_name(world.pool, tenant) if to == "dedicated" else world.pool
        others = items_of(world.dynamodb, data_table(world.record(beside), world.pool), beside)
        with pytest.raises(MoveInterrupted) as interrupted:
            world.move(tenant, to, interrupt_at(step, sigterm=step == "synced"))

        message, record = str(interrupted.value), world.record(tenant)
        assert "\n" not in message
        assert f"make tenant TENANT={tenant} PLACEMENT={to}" in message
        assert record.move_phase is not None  # every step is before the move fields are cleared
        assert record.move_phase in message
        assert record.move_phase != MovePhase.SWITCHING
        tenant_configs().clear()
        member = User(tenant, f"alice-{tenant}")
        accepted = world.api.update(member, tickets[tenant][0], {"title": f"after {step}"})
        assert accepted.status == (503 if writes_paused(record) else 200), (step, accepted.body)
        expected = copied_items(world.dynamodb, data_table(record, world.pool), tenant)

        outcome = world.move(tenant, to)  # at once

        assert (outcome.record.placement, outcome.record.moving) == (to, False)
        assert_moved(world, tenant, target, expected)
        assert items_of(world.dynamodb, data_table(world.record(beside), world.pool), beside) == others
        if step in ("announced", "copied", "switching", "synced"):  # the re-run switched, its pause printed
            assert outcome.pause_seconds is not None
            assert outcome.sync_events is not None  # after its own copy: the marked events only, no day's trail
        placement[tenant] = to
    assert sorted(placement.values()) == ["pool", "pool"]
    stretches, began = [], None
    for when, paused in refused:
        if paused and began is None:
            began = when
        elif not paused and began is not None:
            stretches.append(when - began)
            began = None
    assert began is None
    assert len(stretches) == len(STEPS) + 2  # each move's switch, and the two rolled back
    assert max(stretches) <= 2 * SWITCH_WAIT_SECONDS + 1  # an uninterrupted move's pause (on the fake clock)
    assert world.log.getvalue().count("write pause:") >= 4


def test_a_move_interrupted_during_its_catch_up_is_finished_by_one_run_with_nothing_lost(world: World) -> None:
    """Ctrl-C between a catch-up round's sync and its taking back of the marks
    (some synced, none taken back; writes open): the tenant is left in
    COPYING, and one run at once copies again and finishes, every write kept."""
    tickets = world.populate("10")
    world.populate("1")
    member = User("10", "alice-10")
    others = items_of(world.dynamodb, world.pool, "1")

    def write_then_interrupt(step: str) -> None:
        if step == "copied":
            tenant_configs().clear()
            assert world.api.update(member, tickets[0], {"title": "during the copy"}).ok
            assert world.api.comment(member, tickets[1], {"body": "during the copy"}).status == 201
        if step == "catching up":
            raise KeyboardInterrupt

    mover = world.mover(write_then_interrupt)
    mover.catch_up_enough = 0
    with pytest.raises(MoveInterrupted) as interrupted:
        mover.move("10", "dedicated")
    tenant_configs().clear()

    assert world.record("10").move_phase == MovePhase.COPYING
    assert "make tenant TENANT=10 PLACEMENT=dedicated" in str(interrupted.value)
    assert world.api.update(member, tickets[1], {"title": "after the interrupt"}).ok
    expected = copied_items(world.dynamodb, world.pool, "10")
    outcome = world.move("10", "dedicated")
    assert (outcome.record.placement, outcome.record.moving) == ("dedicated", False)
    assert_moved(world, "10", dedicated.table_name(world.pool, "10"), expected)
    assert world.api.summary(member, tickets[0]).body["title"] == "during the copy"
    assert items_of(world.dynamodb, world.pool, "1") == others


def test_a_second_mover_is_refused_while_the_first_runs_and_a_stopped_one_is_taken_over(world: World) -> None:
    world.populate("1")
    original = copied_items(world.dynamodb, world.pool, "1")
    refused: list[str] = []

    def second_mover(step: str) -> None:
        if step == "copied":
            with pytest.raises(MoveError, match="is running") as error:
                world.mover().move("1", "dedicated")
            refused.append(str(error.value))
        if step == "synced":  # the first one stalls: a second takes over and finishes
            world.clock.now += STALE_SECONDS + 1  # changed_at is rounded up to a second
            world.mover().move("1", "dedicated")

    with pytest.raises(RecordChanged):  # the stalled one stops at its next write
        world.move("1", "dedicated", second_mover)

    assert refused
    assert "\n" not in refused[0]
    record = world.record("1")
    assert record.placement == "dedicated"
    assert not record.moving
    assert_moved(world, "1", dedicated.table_name(world.pool, "1"), original)


def test_a_move_rolls_back_until_its_switch(world: World) -> None:
    """Stopped in SWITCHING (its writes paused, the copy synced and counted):
    asking for the placement it has rolls it back and erases the copy. (From
    COPYING it is the same; past the switch it is refused: the kill test.) A
    rollback stopped before its erase leaves a move in COPYING, writes open on
    the old table: run again, it rolls back, or the move goes on."""
    world.populate("1")
    member, root = User("1", "alice-1"), User("1", "root-1", admin=True)
    unnamed = world.api.new_ticket(member, title="no audit event names it")["ticket_id"]
    before = items_of(world.dynamodb, world.pool, "1")
    config = keys.tenant_config_key("1")["pk"]["S"]
    own_table = dedicated.table_name(world.pool, "1")

    with pytest.raises(Stop):
        world.move("1", "dedicated", kill_at("synced"))
    assert world.record("1").move_phase == MovePhase.SWITCHING
    world.clock.now += STALE_SECONDS + 1  # changed_at is rounded up to a second
    with pytest.raises(Stop):
        world.move("1", "pool", kill_at("rolling back"))
    assert world.record("1").move_phase == MovePhase.COPYING  # writes open, the copy still there
    world.clock.now += STALE_SECONDS + 1
    outcome = world.move("1", "pool")

    record = outcome.record
    assert (record.placement, record.moving, record.table) == ("pool", False, None)
    assert items_of(world.dynamodb, own_table, "1") == []
    after = items_of(world.dynamodb, world.pool, "1")
    assert [item for item in after if item["pk"]["S"] != config] == [
        item for item in before if item["pk"]["S"] != config
    ]
    assert "delete-stack" in world.log.getvalue()

    # Rolled back again while its copy is erased, then moved after all
    with pytest.raises(Stop):
        world.move("1", "dedicated", kill_at("synced"))
    world.clock.now += STALE_SECONDS + 1
    with pytest.raises(Stop):
        world.move("1", "pool", kill_at("rolling back"))
    assert world.api.delete(root, unnamed).status == 204
    expected = copied_items(world.dynamodb, world.pool, "1")
    world.clock.now += STALE_SECONDS + 1
    world.move("1", "dedicated")
    assert_moved(world, "1", own_table, expected)


def test_refusals_while_moving_a_reshard_an_offboarding_a_bad_placement_and_a_resharding_tenant_moving(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A moving tenant is neither resharded nor offboarded (one line, exit 1,
    nothing written), a plain ``make tenant`` says how to continue its move,
    a bad placement is one line; a tenant being resharded does not move."""
    world.populate("1")
    state = ["--local", "--local-state", str(local_state_file(tmp_path, world.pool))]
    assert tenants.main(["--tenant", "1", "--placement", "silo", *state]) == 1
    assert capsys.readouterr().err == "error: unknown placement 'silo' (pool or dedicated)\n"
    with pytest.raises(Stop):
        world.move("1", "dedicated", kill_at("copied"))
    moving = world.record("1")

    with pytest.raises(MoveRunning):
        world.admin().reshard("1", 2)
    with pytest.raises(MoveRunning, match="PLACEMENT=dedicated"):  # whoever writes the record
        world.admin().write(moving, {"status": "SUSPENDED", "offboarding_since": 1})
    assert offboard.main(["--tenant", "1", "--confirm", "1", *state]) == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line]
    assert line.startswith("error: ")
    assert "moving to dedicated" in line
    assert tenants.main(["--tenant", "1", *state]) == 0
    shown = capsys.readouterr()
    assert json.loads(shown.out)["move_phase"] == "COPYING"
    assert shown.err == "1 is moving to dedicated (COPYING): make tenant TENANT=1 PLACEMENT=dedicated continues it\n"
    assert tenants.main(["--tenant", "1", "--shards", "2", *state]) == 1
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("error: tenant 1 is moving to dedicated (COPYING): nothing changed")
    assert world.record("1").shards == 1
    assert world.record("1").move_phase == MovePhase.COPYING

    world.clock.now += STALE_SECONDS + 1
    world.move("1", "pool")  # rolled back
    resharding = world.admin().write(world.record("1"), {"read_shards": (1, 2), "target_shards": 2})
    with pytest.raises(MoveError, match="resharded"):
        world.move("1", "dedicated")
    assert world.record("1") == resharding


def test_move_workers_reach_the_mover_and_a_bad_count_is_one_line(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--move-workers``: how many partitions the copy, the sync and the erase work on at
    once (the sync's time is the write pause); out of 1..64 it is refused before anything
    is written."""
    world.populate("1")
    state = ["--local", "--local-state", str(local_state_file(tmp_path, world.pool))]
    before = world.record("1")
    for bad in ("0", "65", "x"):
        assert tenants.main(["--tenant", "1", "--placement", "dedicated", "--move-workers", bad, *state]) == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert line == f"error: --move-workers must be 1..64 (got {bad!r})"
    assert world.record("1") == before
    seen: list[int] = []

    def moved(self: Mover, tenant_id: str, to: str) -> Any:
        seen.append(self.workers)
        raise MoveError("stopped here by the test")

    monkeypatch.setattr(Mover, "move", moved)
    assert tenants.main(["--tenant", "1", "--placement", "dedicated", "--move-workers", "32", *state]) == 1
    assert tenants.main(["--tenant", "1", "--placement", "dedicated", *state]) == 1
    assert seen == [32, DEFAULT_WORKERS]


@pytest.mark.parametrize(("moving", "beside"), [("1", "10"), ("10", "1")])
def test_a_create_refused_at_the_switch_is_made_when_retried_with_its_key_in_the_new_table(
    world: World, moving: str, beside: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create with an ``Idempotency-Key`` whose record was stored during the
    copy (in progress) and whose ticket write the switch refused (503
    ``TENANT_MOVING``: the record could not be taken back either, writes were
    paused) leaves an in-progress record that no invocation can ever complete:
    the ticket's put completes it in one fenced transaction. The move does not
    carry it: the client's retry with the same key, after the switch, creates
    the ticket (201), not 409 "still in progress"; a completed record is
    carried as ever. The tenant beside it is untouched."""
    world.populate(moving)
    world.populate(beside)
    others = items_of(world.dynamodb, world.pool, beside)
    member = User(moving, f"alice-{moving}")
    entered, release = threading.Event(), threading.Event()
    create_ticket = TicketRepository.create_ticket
    answers: list[ApiResponse] = []

    def held(self: TicketRepository, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("completes") is not None and not release.is_set():
            entered.set()  # its record is stored, in progress: the switch comes now
            release.wait(10)
        return create_ticket(self, *args, **kwargs)

    def in_flight() -> None:
        answers.append(world.api.create(member, {"title": "in flight"}, headers={"Idempotency-Key": "in-flight"}))

    flight = threading.Thread(target=in_flight)

    def during(step: str) -> None:
        if step == "caught up":
            tenant_configs().clear()
            flight.start()
            assert entered.wait(10)
        if step == "switching":
            release.set()
            flight.join(10)

    monkeypatch.setattr(TicketRepository, "create_ticket", held)
    world.move(moving, "dedicated", during)

    assert [(answer.status, answer.error_code) for answer in answers] == [(503, "TENANT_MOVING")]
    retried = world.api.create(member, {"title": "in flight"}, headers={"Idempotency-Key": "in-flight"})
    assert retried.status == 201, retried.body
    again = world.api.create(member, {"title": "in flight"}, headers={"Idempotency-Key": "in-flight"})
    assert (again.status, again.body["ticket_id"]) == (201, retried.body["ticket_id"])
    assert world.api.create(member, {"title": "once"}, headers={"Idempotency-Key": "k"}).status == 201
    assert items_of(world.dynamodb, world.pool, beside) == others
