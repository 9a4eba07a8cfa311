"""A tenant moved to another cell online (``ops.cell_move``) over moto, two cells
that share nothing (tests/functional/cell_harness.py), with the fake clock of
the move tests: tenants ``1`` and ``10`` in different cells, each moved both
ways (pool to pool, pool to dedicated, dedicated to pool), the other beside
it. Every item it carries is in the new cell item for item (its webhook
secret resealed under the new cell's key, which alone opens it), its counts
exact, its usage ledger, record, tier and API key (in the new cell's plan)
there, nothing of it left in the old cell, the directory and the router
naming the new cell; the move counts, audits and announces nothing. Writes
during the copy reach the new cell; one that lands after the switch is
refused, not lost. Killed at every step, a move resumes; before its flip it
rolls back."""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import moto.core.responses
import moto.dynamodb.models.table
import pytest
from botocore.exceptions import ClientError
from standardwebhooks.webhooks import Webhook as StandardWebhook

from local_stack.emulator.server import moto_table_tags, table_keys
from local_stack.event_sources.sqs_poller import advance_queue_clock
from local_stack.iam.dynamodb_authorization import authorize_dynamodb
from local_stack.iam.sessions import Session
from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID, offline_values
from ops import tenants
from ops.move import STALE_SECONDS, MoveError, MoveInterrupted
from ops.sample_events import delivery_item
from stack_model.roles import roles_from_template
from stack_model.template import table_definition
from support_tickets.core import keys
from support_tickets.data.audit_items import iso_time
from support_tickets.data.placement import MovePhase, writes_paused
from support_tickets.data.tenant_registry import CELL_FIELDS
from support_tickets.webhooks.delivery import Deliverer, QueuedMessage, SecretOpener, Sender
from support_tickets.webhooks.events import delivery_id, read_queue_message
from support_tickets.webhooks.urls import CheckedUrl
from tests.conftest import REGION, WEBHOOK_DEAD_LETTER_QUEUE_URL, WEBHOOK_QUEUE_URL
from tests.depth import DEEP
from tests.functional.api_harness import Api, User
from tests.functional.cell_harness import (
    CELL_A,
    CELL_B,
    USAGE_DAY,
    USAGE_SLOT,
    Cells,
    CellStack,
    Populated,
    without_secrets,
)
from tests.functional.conftest import OPERATOR_STATE
from tests.functional.move_harness import FakeClock, HeldWrite, Stop, copied_items, counts_in, kill_at, recounted
from tests.functional.test_dedicated_isolation import every_call
from tests.functional.webhook_harness import RecordingSqs, process, receive
from tests.unit.test_cell_routes import epoch

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@pytest.fixture
def cells(aws: None, api: Api, dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch) -> Cells:
    clock = FakeClock()
    monkeypatch.setattr(moto.core.responses, "utcnow", clock.utc)  # the Date header
    monkeypatch.setattr(moto.dynamodb.models.table, "utcnow", clock.utc)  # stream records' creation time
    return Cells(api, dynamodb, clock)


def data_table(cells: Cells, cell: str, tenant: str) -> str:
    record = cells.admin(cell).record(tenant)
    return record.table or cells.stacks[cell].table


def opened(cells: Cells, cell: str, tenant: str, webhook: str, sealed: str) -> str:
    """A sealed secret opened with ``cell``'s key under the webhook's context (KMS refuses otherwise)."""
    kms = boto3.client("kms", region_name=REGION)
    context = {"tenant_id": tenant, "webhook_id": webhook}
    blob = base64.b64decode(sealed)
    answer = kms.decrypt(KeyId=cells.stacks[cell].key_arn, CiphertextBlob=blob, EncryptionContext=context)
    assert answer["KeyId"] == cells.stacks[cell].key_arn
    return str(answer["Plaintext"].decode())


def assert_moved(
    cells: Cells, tenant: str, source: str, dest: str, original: list[dict[str, Any]], made: Populated
) -> None:
    """Everything of ``tenant`` is in ``dest`` as it was in ``source``, nothing of it in ``source``."""
    dynamodb = cells.dynamodb
    table = data_table(cells, dest, tenant)
    moved = copied_items(dynamodb, table, tenant)
    assert without_secrets(moved) == without_secrets(original)
    # Its webhook's secret: sealed under the new cell's key (and context), the same secret
    (hook,) = [item for item in moved if item["sk"]["S"] == keys.WEBHOOK_SK_PREFIX + made.webhook]
    assert opened(cells, dest, tenant, made.webhook, hook["secret"]["S"]) == made.secret
    with pytest.raises(ClientError):
        opened(cells, source, tenant, made.webhook, hook["secret"]["S"])
    with pytest.raises(ClientError):
        opened(cells, dest, tenant, "another", hook["secret"]["S"])
    assert counts_in(dynamodb, table, tenant) == recounted(dynamodb, table, tenant)
    # Its usage ledger, each item of the old cell's under its key plus the cell
    ledger = {item["sk"]["S"]: item for item in cells.items(dest, tenant) if item["pk"]["S"] == keys.usage_pk(tenant)}
    own = keys.usage_sk(USAGE_DAY, USAGE_SLOT)
    assert any(sk.startswith((own + f"#{CELL_A}#", own + f"#{CELL_B}#")) for sk in ledger)
    # Its record: placed, served, no cell field left; its key in the new cell's plan of its tier, the old one gone
    record = cells.admin(dest).record(tenant)
    assert not {name for name in CELL_FIELDS if getattr(record, name) is not None}
    assert not record.moving
    assert record.api_key_id is not None
    assert cells.keys(dest).plans_of(record.api_key_id) == {cells.stacks[dest].plans[record.tier]}
    assert cells.keys(source).find(tenant) is None
    # Nothing of it in the old cell: no record, no ledger, no item in any table
    assert cells.items(source, tenant) == []
    assert not cells.admin(source).record(tenant).stored
    # The directory and the router name the new cell
    assert cells.directory.cell_of(tenant) == dest
    assert json.loads(cells.routes.items[f"tenant/{tenant}"])["cell"] == dest


def trail(cells: Cells, cell: str, tenant: str) -> list[dict[str, Any]]:
    """The tenant's audit trail in ``cell``: its days' partitions and its tickets' histories."""
    prefix = keys.tenant_prefix(tenant)
    return [
        item
        for item in cells.items(cell, tenant)
        if item["pk"]["S"].startswith((prefix + "AUDIT#", prefix + "HISTORY#"))
    ]


def test_tenants_move_between_cells_both_ways_with_everything_of_their_own(cells: Cells) -> None:
    """``1`` (cell A, pool) moves to cell B's pool beside ``10``; ``10`` then moves
    to a table of its own in cell A; then back to cell B's pool beside ``1``."""
    one, ten = cells.populate("1", CELL_A), cells.populate("10", CELL_B)
    boto3.client("sqs", region_name=REGION).purge_queue(QueueUrl=WEBHOOK_QUEUE_URL)  # populate's own events
    counts = {"1": counts_in(cells.dynamodb, cells.stacks[CELL_A].table, "1")}
    counts["10"] = counts_in(cells.dynamodb, cells.stacks[CELL_B].table, "10")
    original = {"1": copied_items(cells.dynamodb, cells.stacks[CELL_A].table, "1")}
    original["10"] = copied_items(cells.dynamodb, cells.stacks[CELL_B].table, "10")
    beside = copied_items(cells.dynamodb, cells.stacks[CELL_B].table, "10")
    member, neighbour = User("1", "alice-1"), User("10", "alice-10")
    seen: dict[str, tuple[int, int]] = {}

    def probe(step: str) -> None:
        """Each cell's functions, reading and writing, while the move runs."""
        if step == "switching":  # the stream functions keep up; then the old cell no longer changes
            cells.deliver_streams()
            original["1"] = copied_items(cells.dynamodb, cells.stacks[CELL_A].table, "1")
        if step in ("copied", "flipped"):
            for cell in (CELL_A, CELL_B):
                with cells.in_cell(cell):
                    read = cells.api.get(member, one.tickets[1]).status
                    seen[f"{step} {cell}"] = (read, cells.api.update(member, one.tickets[1], {"title": step}).status)
            with cells.in_cell(CELL_B):
                assert cells.api.list_tickets(neighbour).status == 200

    outcome = cells.move("1", CELL_B, checkpoint=probe)

    assert seen == {
        "copied cell-a": (200, 200),  # still A's: served (its write fenced, and carried over)
        "copied cell-b": (503, 503),  # arriving: B's copy is incomplete
        "flipped cell-a": (503, 503),  # moved out: A's data stops at the switch
        "flipped cell-b": (200, 503),  # flipped: reads served, writes wait
    }
    assert "for answers the new cell's authorizer cached" in cells.log.getvalue()
    # Both cells' pools are SupportTicket: the operator's messages name the cell too
    assert f"copy 1 to cell {CELL_B}'s SupportTicket" in cells.log.getvalue()
    assert f"erased from cell {CELL_A}'s SupportTicket" in cells.log.getvalue()
    assert outcome.record.placement == "pool"
    assert outcome.pause_seconds is not None
    assert outcome.strays == 0
    assert_moved(cells, "1", CELL_A, CELL_B, original["1"], one)
    assert counts_in(cells.dynamodb, cells.stacks[CELL_B].table, "1") == counts["1"]
    assert copied_items(cells.dynamodb, cells.stacks[CELL_B].table, "10") == beside
    assert epoch(cells.routes, "1") == 1
    trails = {"1": trail(cells, CELL_B, "1")}
    # The new cell serves it: its tickets, and a retried create with the same Idempotency-Key answers the same ticket
    with cells.in_cell(CELL_B):
        assert cells.api.get(member, one.tickets[0]).body["ticket"]["status"] == "CLOSED"
        again = cells.api.create(member, {"title": "once"}, headers={"Idempotency-Key": "k"})
        assert (again.status, again.body["ticket_id"]) == (201, one.idempotent_ticket)

    cells.move("10", CELL_A, placement="dedicated")
    cells.deliver_streams()  # the new cell's stream functions see its copy, within a second of it

    assert cells.admin(CELL_A).record("10").table == cells.stacks[CELL_A].dedicated_table("10")
    assert_moved(cells, "10", CELL_B, CELL_A, original["10"], ten)
    assert counts_in(cells.dynamodb, cells.stacks[CELL_A].dedicated_table("10"), "10") == counts["10"]

    back = cells.move("10", CELL_B, placement="pool")

    assert back.record.placement == "pool"
    assert_moved(cells, "10", CELL_A, CELL_B, original["10"], ten)
    assert epoch(cells.routes, "10") == 2
    trails["10"] = trail(cells, CELL_B, "10")
    assert "delete-stack --stack-name <stack>-tenant-10" in cells.log.getvalue()  # its emptied table in cell A
    # The last move's own writes, through every table's stream functions: nothing counted, audited or announced
    cells.deliver_streams()
    for tenant in ("1", "10"):
        assert counts_in(cells.dynamodb, cells.stacks[CELL_B].table, tenant) == counts[tenant]
        assert trail(cells, CELL_B, tenant) == trails[tenant]
        assert cells.items(CELL_A, tenant) == []
    assert len(trails["1"]) > len([item for item in original["10"] if "|HISTORY#" in item["pk"]["S"]])
    assert receive() == []
    # Its webhook's secret was never written in clear (nor logged by the mover)
    dumped = json.dumps([item for cell in (CELL_A, CELL_B) for item in cells.items(cell, "1")])
    for made in (one, ten):
        assert made.secret not in dumped
        assert made.secret.removeprefix("whsec_") not in dumped
        assert made.secret not in cells.log.getvalue()


def ledger_requests(cells: Cells, cell: str, tenant: str) -> int:
    """The requests the tenant's usage ledger in ``cell`` counts for the day, every item of it summed."""
    pool = cells.stacks[cell].table
    found = cells.dynamodb.query(
        TableName=pool,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :day)",
        ExpressionAttributeValues={
            ":pk": {"S": keys.usage_pk(tenant)},
            ":day": {"S": keys.usage_day_prefix(USAGE_DAY)},
        },
        ConsistentRead=True,
    )["Items"]
    return sum(int(item["requests"]["N"]) for item in found)


def test_a_tenant_moved_there_back_and_there_again_the_same_day_keeps_every_cells_usage(cells: Cells) -> None:
    """Each stay's own counters of the day travel under a key of their move: moved A to B,
    back to A and to B again, A's counters of its second stay never land on those its
    first stay left (which came back with the tenant), and the last move ends."""
    cells.populate("10", CELL_A)  # 7 requests counted in A, its slot's own item
    counted = ledger_requests(cells, CELL_A, "10")
    own = {"pk": {"S": keys.usage_pk("10")}, "sk": {"S": keys.usage_sk(USAGE_DAY, USAGE_SLOT)}}
    cells.move("10", CELL_B)
    cells.dynamodb.put_item(TableName=cells.stacks[CELL_B].table, Item={**own, "requests": {"N": "5"}})
    cells.move("10", CELL_A)
    # A's own item of the same day and slot again: its second stay
    cells.dynamodb.put_item(TableName=cells.stacks[CELL_A].table, Item={**own, "requests": {"N": "11"}})

    cells.move("10", CELL_B)

    assert ledger_requests(cells, CELL_B, "10") == counted + 5 + 11
    assert cells.items(CELL_A, "10") == []


@pytest.mark.parametrize(("moving", "beside"), [("1", "10"), ("10", "1")] if DEEP else [("1", "10")])
def test_a_write_made_during_the_copy_that_lands_after_the_switch_is_refused_not_lost(
    cells: Cells, moving: str, beside: str
) -> None:
    """A PATCH whose function read A's record during the copy, its DynamoDB write
    landing after the mover switched: refused (503), nothing written in either
    cell, the ticket as it was; the tenant beside it untouched."""
    made = cells.populate(moving, CELL_A)
    cells.populate(beside, CELL_A)
    others = cells.items(CELL_A, beside)
    member = User(moving, f"alice-{moving}")
    with cells.in_cell(CELL_A):
        original = cells.api.get(member, made.tickets[0]).body

    def patch() -> Any:
        with cells.in_cell(CELL_A):
            return cells.api.update(member, made.tickets[0], {"title": "written during the copy"})

    write = HeldWrite(patch)

    def during(step: str) -> None:
        if step == "copied":
            write.start()  # its function read A's record (COPYING): its write is on its way, not landed
        if step == "switching":
            write.release()

    with write.holding():
        cells.move(moving, CELL_B, checkpoint=during)

    (answer,) = write.answers
    assert (answer.status, answer.error_code) == (503, "TENANT_MOVING")
    with cells.in_cell(CELL_B):
        assert cells.api.get(member, made.tickets[0]).body == original
    assert cells.items(CELL_A, moving) == []
    assert cells.items(CELL_A, beside) == others


@pytest.mark.parametrize(("skew", "moving", "beside"), [(60, "10", "1"), (-60, "1", "10")])
def test_a_cell_move_gives_the_same_result_whatever_the_operators_clock_says(
    cells: Cells, skew: float, moving: str, beside: str
) -> None:
    """The operator's clock a minute ahead or behind DynamoDB's: moved to B and back,
    with writes in the old cell during the copy and in the new one once it opens them,
    every write is audited exactly once in the new cell, its counts are exact, nothing
    of it is left in the old one; the tenant beside it untouched."""
    made = cells.populate(moving, CELL_A)
    cells.populate(beside, CELL_B)
    others = cells.items(CELL_B, beside)
    member = User(moving, f"alice-{moving}")
    cells.skew = skew

    def history(cell: str) -> Counter[str]:
        pks = {keys.history_pk(moving, ticket_id) for ticket_id in made.tickets}
        return Counter(str(item["pk"]["S"]) for item in cells.items(cell, moving) if item["pk"]["S"] in pks)

    for source, dest in ((CELL_A, CELL_B), (CELL_B, CELL_A)):
        before = history(source)

        def writes(step: str, source: str = source, dest: str = dest) -> None:
            if step in ("copied", "erasing"):  # the old cell's last writes, the new cell's first
                with cells.in_cell(source if step == "copied" else dest):
                    for ticket_id in made.tickets:
                        assert cells.api.update(member, ticket_id, {"title": f"{step} {ticket_id}"}).ok
            if step == "switching":  # the stream functions keep up with the old cell
                cells.deliver_streams()

        outcome = cells.move(moving, dest, checkpoint=writes)
        cells.deliver_streams()

        assert not outcome.record.moving
        assert history(dest) == before + Counter({keys.history_pk(moving, ticket_id): 2 for ticket_id in made.tickets})
        table = data_table(cells, dest, moving)
        assert counts_in(cells.dynamodb, table, moving) == recounted(cells.dynamodb, table, moving)
        assert cells.items(source, moving) == []
        assert cells.directory.cell_of(moving) == dest
    assert cells.items(CELL_B, beside) == others


CELL_STEPS = [
    "arriving",
    "announced",
    "copied",
    "switching",
    "synced",
    "arrived",
    "flipped",
    "erasing",
    "drained",
    "erased",
    "left",
]


def test_a_move_between_cells_killed_at_every_step_resumes_each_time_with_nothing_lost(cells: Cells) -> None:
    """Killed at each step in turn (run again once its record went stale); a write
    between two runs before the switch is carried; past the flip, asking for the
    old cell is refused; the last run finishes with nothing lost and nothing left."""
    made = cells.populate("1", CELL_A)
    cells.populate("10", CELL_A)
    others = cells.items(CELL_A, "10")
    member = User("1", "alice-1")
    expected: list[dict[str, Any]] = []
    for step in CELL_STEPS:
        with pytest.raises(Stop):
            cells.move("1", CELL_B, checkpoint=kill_at(step))
        if step == "copied":  # still COPYING: the next run copies again and carries it
            with cells.in_cell(CELL_A):
                assert cells.api.update(member, made.tickets[1], {"status": "IN_PROGRESS"}).ok
            cells.deliver_streams()
        if step in ("arriving", "announced", "copied", "switching", "synced"):
            expected = copied_items(cells.dynamodb, cells.stacks[CELL_A].table, "1")
        if step != "arriving":  # before A's record names the move nothing holds it (A's version decides)
            with pytest.raises(MoveError, match="is running"):
                cells.move("1", CELL_B)
        cells.clock.now += STALE_SECONDS + 1
        if step in ("arrived", "flipped", "erasing"):
            with pytest.raises(MoveError, match=r"past its switch|moved to cell"):
                cells.move("1", CELL_A)
    outcome = cells.move("1", CELL_B)

    assert not outcome.record.moving
    assert_moved(cells, "1", CELL_A, CELL_B, expected, made)
    assert cells.items(CELL_A, "10") == others


def test_a_move_between_cells_rolls_back_until_its_flip(cells: Cells) -> None:
    """Stopped in SWITCHING: ``CELL=`` the tenant's cell rolls it back (A's writes
    open, B's copy, ledger, record and key gone); a rollback stopped half way is
    still a move, to roll back or finish."""
    made = cells.populate("1", CELL_A)
    before = cells.items(CELL_A, "1")
    with pytest.raises(Stop):
        cells.move("1", CELL_B, checkpoint=kill_at("synced"))
    assert cells.admin(CELL_A).record("1").move_phase == MovePhase.SWITCHING
    assert cells.admin(CELL_B).record("1").cell_phase == "ARRIVING"
    cells.clock.now += STALE_SECONDS + 1

    outcome = cells.move("1", CELL_A)

    assert (outcome.record.placement, outcome.record.moving, outcome.record.moving_to) == ("pool", False, None)
    config = keys.tenant_config_key("1")["pk"]["S"]
    assert [item for item in cells.items(CELL_A, "1") if item["pk"]["S"] != config] == [
        item for item in before if item["pk"]["S"] != config
    ]
    assert cells.items(CELL_B, "1") == []
    assert cells.keys(CELL_B).find("1") is None
    assert cells.keys(CELL_A).find("1") is not None
    assert cells.directory.moving_to == {}
    with cells.in_cell(CELL_A):
        assert cells.api.update(User("1", "alice-1"), made.tickets[0], {"title": "back"}).ok

    # Stopped between B's record and A's: the tenant's cell cleans B; or the move goes on
    with pytest.raises(Stop):
        cells.move("1", CELL_B, checkpoint=kill_at("arriving"))
    assert cells.admin(CELL_B).record("1").cell_phase == "ARRIVING"
    cells.move("1", CELL_A)
    assert cells.items(CELL_B, "1") == []
    expected = copied_items(cells.dynamodb, cells.stacks[CELL_A].table, "1")
    cells.move("1", CELL_B)
    assert_moved(cells, "1", CELL_A, CELL_B, expected, made)


def test_a_rollback_erases_the_copy_of_the_old_cells_ledger_and_keeps_the_new_cells_own(cells: Cells) -> None:
    """B's authorizer answered the tenant during the move (B's own counter item, its
    journal): rolled back before the flip, B keeps what B counted and loses only the
    copies of A's (``#<A>#<the move's start>``); A's ledger is as it was."""
    cells.populate("1", CELL_A)
    a_ledger = [item for item in cells.items(CELL_A, "1") if item["pk"]["S"] in keys.usage_partitions("1")]
    with pytest.raises(Stop):
        cells.move("1", CELL_B, checkpoint=kill_at("synced"))
    started = cells.admin(CELL_A).record("1").move_started_at
    assert started is not None
    own_sk = keys.usage_sk(USAGE_DAY, USAGE_SLOT)
    b_own = [
        {"pk": {"S": keys.usage_pk("1")}, "sk": {"S": own_sk}, "requests": {"N": "2"}},
        {**keys.usage_journal_key("1", "ab" * 32), "expiration": {"N": "1795000000"}},
    ]
    for item in b_own:
        cells.dynamodb.put_item(TableName=cells.stacks[CELL_B].table, Item=item)
    b_ledger = {item["sk"]["S"] for item in cells.items(CELL_B, "1") if item["pk"]["S"] == keys.usage_pk("1")}
    assert b_ledger == {own_sk, f"{own_sk}#{CELL_A}#{started}"}  # B's own, and A's copied
    cells.clock.now += STALE_SECONDS + 1

    cells.move("1", CELL_A)

    assert sorted(cells.items(CELL_B, "1"), key=lambda item: item["pk"]["S"]) == b_own
    assert [item for item in cells.items(CELL_A, "1") if item["pk"]["S"] in keys.usage_partitions("1")] == a_ledger


def test_deliveries_in_flight_in_the_old_cell_are_sent_again_from_the_new_one(cells: Cells) -> None:
    """A delivery still PENDING (its message in A's queue, which A lets go once the
    tenant moved out) is queued again from B, as a redelivery of its stored event;
    a lot's drain (its token was A's) restarts in B from its oldest message; a
    delivery that was delivered is not sent again; the tenant beside it, nothing."""
    made = cells.populate("10", CELL_A)
    cells.populate("1", CELL_A)
    pool = cells.stacks[CELL_A].table
    at = iso_time(cells.clock.now - 60)
    ids = {status: delivery_id(at, status.lower() * 4, made.webhook) for status in ("PENDING", "PARKED", "DELIVERED")}
    sample = delivery_item("10", made.webhook)
    for name, delivery in ids.items():
        key = keys.delivery_key("10", made.webhook, delivery)
        status = "DELIVERED" if name == "DELIVERED" else "PENDING"
        item = {**sample, **key, "delivery_id": {"S": delivery}, "status": {"S": status}}
        cells.dynamodb.put_item(TableName=pool, Item=item)
    circuit = {**keys.webhook_circuit_key("10", made.webhook), "parked": {"N": "1"}, "token": {"N": "3"}}
    cells.dynamodb.put_item(TableName=pool, Item={**circuit, "token_active": {"BOOL": True}})
    parked = {**keys.parked_key("10", made.webhook, ids["PARKED"]), "message": {"S": "{}"}}
    cells.dynamodb.put_item(TableName=pool, Item=parked)
    boto3.client("sqs", region_name=REGION).purge_queue(QueueUrl=WEBHOOK_QUEUE_URL)

    with pytest.raises(Stop):  # after the hand-over, before the end: the run again hands nothing over twice
        cells.move("10", CELL_B, checkpoint=kill_at("drained"))
    cells.clock.now += STALE_SECONDS + 1
    outcome = cells.move("10", CELL_B)
    cells.deliver_streams()  # B's audit-trail function sees the marks

    assert outcome.handed_over == 0
    assert "2 pending deliveries of 10 sent again from cell cell-b" in cells.log.getvalue()
    queued = [read_queue_message(record["body"]) for record in receive()]
    assert sorted(routing["delivery_id"] for _, _, routing in queued) == sorted([ids["PENDING"], ids["PARKED"]])
    assert {(routing["tenant_id"], routing["redelivery"]) for _, _, routing in queued} == {
        ("10", iso_time(outcome.record.placed_at))
    }
    assert {event["tenant_id"] for _, event, _ in queued} == {"10"}
    # The lot's drain is not running in B: the parked message, received again, starts B's
    stored = cells.dynamodb.get_item(
        TableName=cells.stacks[CELL_B].table, Key=keys.webhook_circuit_key("10", made.webhook)
    )
    assert stored["Item"]["token_active"] == {"BOOL": False}


def test_make_tenant_cell_moves_a_tenant_between_the_local_stacks_cells(
    cells: Cells, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``make tenant TENANT=1 CELL=cell-b`` (``python -m ops.tenants --cell``): the
    cells of the local stack's state file (its ``cells`` map, each a cell's own
    state), the record printed the new cell's; a bad cell, or a record change
    asked with it, is one line, nothing written. On the real clock: its waits are
    the switch's few seconds (the state's authorizer cache is none)."""
    made = cells.populate("1", CELL_A)
    state = tmp_path / "stack.json"
    state.write_text(json.dumps({"cells": {cell: cell_state(stack) for cell, stack in cells.stacks.items()}}))
    command = ["--tenant", "1", "--local", "--local-state", str(state), "--phase-seconds", "0", "--drain-seconds", "0"]
    before = cells.items(CELL_A, "1")
    for bad, error in (
        (["--cell", "Cell B"], "error: not a cell id ([a-z0-9-], 1 to 63 characters): 'Cell B'"),
        (["--cell", "cell-c"], "error: unknown cell 'cell-c' (one of cell-a, cell-b)"),
        (
            ["--cell", CELL_B, "--tier", "premium"],
            "error: --cell moves the tenant only: change its record in its cell afterwards",
        ),
    ):
        assert tenants.main([*command, *bad]) == 1
        assert capsys.readouterr().err.splitlines()[-1] == error
    assert cells.items(CELL_A, "1") == before

    assert tenants.main([*command, "--cell", CELL_B]) == 0

    shown = json.loads(capsys.readouterr().out)
    assert (shown["tenant_id"], shown["placement"], shown["move_phase"]) == ("1", "pool", None)
    assert not set(CELL_FIELDS) & set(shown)
    assert cells.items(CELL_A, "1") == []
    with cells.in_cell(CELL_B):
        assert cells.api.get(User("1", "alice-1"), made.tickets[0]).status == 200


ONLY_MOVES = "--cell moves the tenant only: change its record in its cell afterwards"


def cell_state(stack: CellStack) -> dict[str, Any]:
    """A cell's part of the local stack's state file, for the mocked account."""
    return {
        "emulator_url": None,
        "region": REGION,
        "table_name": stack.table,
        "usage_plan_ids": stack.plans,
        "stack_name": stack.stack,
        "webhook_key_arn": stack.key_arn,
        "authorizer_cache_seconds": 0,
        **OPERATOR_STATE,
    }


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_each_cells_tenant_credentials_reach_nothing_of_the_other(cells: Cells, tenant: str, other: str) -> None:
    """The local stack's guard, with each cell's TenantAccessRole as its template
    makes it (its own TableName): a tenant's credentials of one cell reach its own
    items in that cell's table, and nothing in the other cell's, its own prefix included."""
    tables = {
        stack.table: table_keys({**table_definition(), "TableName": stack.table}) for stack in cells.stacks.values()
    }
    for cell, stack in cells.stacks.items():
        parameters = {"TableName": stack.table, "CellId": cell}
        values = offline_values(user_pool_id="p", client_id="c", identity_pool_id="i", parameters=parameters)
        session = Session("ASIATEST", roles_from_template(values)["TenantAccessRole"], "test", {"TenantId": tenant})
        for table in tables:
            for operation, body in every_call(table, tenant):
                refused = authorize_dynamodb(
                    session,
                    operation,
                    body,
                    region=REGION,
                    tables=tables,
                    source_vpce=LOCAL_VPC_ENDPOINT_ID,
                    resource_tags=moto_table_tags,
                )
                assert (refused is None) is (table == stack.table), (cell, table, operation)
            for operation, body in every_call(stack.table, other):
                assert authorize_dynamodb(
                    session, operation, body, region=REGION, tables=tables, source_vpce=LOCAL_VPC_ENDPOINT_ID
                ), (cell, operation)


@pytest.mark.parametrize(
    "step", ["arriving", "announced", "synced", "arrived", "erasing", "left"] if DEEP else ["arrived"]
)
def test_a_move_between_cells_interrupted_says_what_it_left_and_one_run_at_once_finishes_it(
    cells: Cells, step: str
) -> None:
    """Ctrl-C at a step: one line names what it left and the command; a switch not
    flipped is back in COPYING (A's writes open), a flipped one stays forward; the
    lease is released, so the run again at once finishes the move."""
    made = cells.populate("1", CELL_A)

    def interrupt(reached: str) -> None:
        if reached == step:
            raise KeyboardInterrupt

    with pytest.raises(MoveInterrupted) as interrupted:
        cells.move("1", CELL_B, checkpoint=interrupt)

    message = str(interrupted.value)
    assert "\n" not in message
    assert "make tenant TENANT=1 CELL=cell-b" in message
    left, arrived = cells.admin(CELL_A).record("1"), cells.admin(CELL_B).record("1")
    if arrived.move_phase == MovePhase.FLIPPED:  # B serves reads: A's writes stay refused, as B's
        assert writes_paused(left)
    else:
        assert left.move_phase != MovePhase.SWITCHING
    if step in ("announced", "synced"):
        with cells.in_cell(CELL_A):
            assert cells.api.update(User("1", "alice-1"), made.tickets[0], {"title": f"after {step}"}).ok
    expected = copied_items(cells.dynamodb, data_table(cells, CELL_A, "1"), "1") if step != "left" else []

    outcome = cells.move("1", CELL_B)  # at once

    assert (outcome.record.placement, outcome.record.moving, outcome.record.moving_from) == ("pool", False, None)
    if expected:
        assert without_secrets(copied_items(cells.dynamodb, cells.stacks[CELL_B].table, "1")) == without_secrets(
            expected
        )
    assert cells.items(CELL_A, "1") == []


# ---------------------------------------------------------------- every delivery A had not finished, sent from B
PUBLIC_URL = "https://93.184.215.14/"  # a public address: no DNS lookup
CREATED_AND_UPDATED = ["ticket.created", "ticket.updated"]
NON_ASCII = "Grüße — 東京 🎫"  # a title's text in 1-, 2-, 3- and 4-byte UTF-8 characters


class Receivers:
    """Every webhook's endpoint, as the delivery functions POST to it: each request's
    URL, headers and body; answered ``status``."""

    def __init__(self, status: int = 204) -> None:
        self.status = status
        self.posts: list[tuple[str, dict[str, str], bytes]] = []

    def __call__(self, checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        self.posts.append((checked.url, dict(headers), body))
        return self.status

    def at(self, path: str) -> list[tuple[dict[str, str], str]]:
        return [(headers, body.decode()) for url, headers, body in self.posts if url == PUBLIC_URL + path]

    def bytes_at(self, path: str) -> list[bytes]:
        """The bodies ``path`` received, as sent: bytes."""
        return [body for url, _, body in self.posts if url == PUBLIC_URL + path]


def cell_deliverer(cells: Cells, cell: str, receivers: Receivers) -> Deliverer:
    """``cell``'s delivery function: its pool table, its key's secrets, its own record cache."""
    kms = boto3.client("kms", region_name=REGION)
    return Deliverer(
        table_name=cells.stacks[cell].table,
        dynamodb=cells.dynamodb,
        sender=Sender(SecretOpener(kms, cells.stacks[cell].key_arn), post=receivers),
        sqs=RecordingSqs(),
        queue_url=WEBHOOK_QUEUE_URL,
        dead_letter_queue_url=WEBHOOK_DEAD_LETTER_QUEUE_URL,
        uniform=lambda: 0.5,
    )


def tenant_with_webhook(cells: Cells, cell: str, tenant: str, path: str) -> tuple[str, str]:
    """``tenant`` in ``cell`` with a webhook of ticket.created and ticket.updated to ``path``: its id and secret."""
    with cells.in_cell(cell):
        cells.admin(cell).ensure(tenant)
        body = {"url": PUBLIC_URL + path, "events": CREATED_AND_UPDATED}
        made = cells.api.call("webhook_create", User(tenant, f"root-{tenant}", admin=True), body=body)
    assert made.status == 201, made.body
    return str(made.body["webhook_id"]), str(made.body["secret"])


def delivery_records(cells: Cells, cell: str, tenant: str) -> list[dict[str, Any]]:
    """The tenant's delivery records in ``cell``, in each webhook's delivery order."""
    found = [item for item in cells.items(cell, tenant) if item["sk"]["S"].startswith(keys.DELIVERY_SK_PREFIX)]
    return sorted(found, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


def assert_sent_as_signed(receivers: Receivers, path: str, secret: str, bodies: list[str]) -> None:
    """``path`` received exactly ``bodies``, in that order, each signed with ``secret`` and its event's id."""
    received = receivers.at(path)
    assert [body for _, body in received] == bodies
    for headers, body in received:
        assert headers["webhook-id"] == json.loads(body)["id"]
        StandardWebhook(secret).verify(body, headers)


def moved_out(cells: Cells, receivers: Receivers, moving: str) -> Callable[[str], None]:
    """A checkpoint: once A refuses the tenant (``flipped``), A's delivery function receives
    what A's queue holds (every message visible, the queue's clock a minute on): the moving
    tenant's messages let go unsent, nothing written; any other tenant's delivered in A."""

    def checkpoint(step: str) -> None:
        if step != "flipped":
            return
        advance_queue_clock(60)  # past every visibility a failed attempt or a receive set
        before = cells.items(CELL_A, moving)
        a = cell_deliverer(cells, CELL_A, receivers)
        records = receive()
        assert records
        for record in records:
            queued = QueuedMessage.of_record(record)
            outcome = a.deliver(queued)
            if read_queue_message(record["body"])[2]["tenant_id"] == moving:
                assert outcome == "dropped: moved to another cell"
            else:
                assert outcome == "delivered"
            boto3.client("sqs", region_name=REGION).delete_message(
                QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=record["receiptHandle"]
            )
        assert cells.items(CELL_A, moving) == before

    return checkpoint


def deliver_from(cells: Cells, cell: str, receivers: Receivers) -> None:
    """``cell``'s stream functions, then its delivery function over what its queue holds, until it holds nothing."""
    cells.deliver_streams()
    while records := receive():
        assert process(cell_deliverer(cells, cell, receivers), records) == []


@pytest.mark.parametrize(("moving", "staying"), [("1", "10"), ("10", "1")])
def test_a_message_queued_in_the_old_cell_and_received_there_after_the_flip_is_sent_once_from_the_new_one(
    cells: Cells, moving: str, staying: str
) -> None:
    """Queued in A just before the move, received by A's delivery function only after the
    flip: A lets it go; B sends it exactly as signed (the same bytes, the same webhook-id),
    once, its non-ASCII title included. The tenant staying in A has its own delivered there;
    neither sees the other's."""
    hooks = {tenant: tenant_with_webhook(cells, CELL_A, tenant, tenant) for tenant in (moving, staying)}
    with cells.in_cell(CELL_A):
        for tenant in (moving, staying):
            cells.api.new_ticket(User(tenant, f"alice-{tenant}"), title=f"{tenant}'s {NON_ASCII}")
    cells.deliver_streams()  # A's audit writer queues each event (not yet received), its record first
    queued = {tenant: str(delivery_records(cells, CELL_A, tenant)[0]["event"]["S"]) for tenant in (moving, staying)}
    receivers = Receivers()

    cells.move(moving, CELL_B, checkpoint=moved_out(cells, receivers, moving))

    assert receivers.at(moving) == []  # A sent nothing of it
    assert_sent_as_signed(receivers, staying, hooks[staying][1], [queued[staying]])
    deliver_from(cells, CELL_B, receivers)
    assert_sent_as_signed(receivers, moving, hooks[moving][1], [queued[moving]])
    # Once: nothing more from either cell
    deliver_from(cells, CELL_B, receivers)
    deliver_from(cells, CELL_A, receivers)
    assert len(receivers.at(moving)) == len(receivers.at(staying)) == 1
    assert {json.loads(body)["tenant_id"] for _, body in receivers.at(moving)} == {moving}
    # The exact bytes A's audit writer stored, its title as written (signed over those bytes, above)
    assert receivers.bytes_at(moving) == [queued[moving].encode()]
    assert json.loads(receivers.bytes_at(moving)[0])["data"]["title"] == f"{moving}'s {NON_ASCII}"
    (delivered,) = delivery_records(cells, CELL_B, moving)
    assert (delivered["status"]["S"], delivered["attempts"]["N"]) == ("DELIVERED", "1")
    assert delivery_records(cells, CELL_B, staying) == []


def test_a_message_waiting_behind_a_retrying_one_of_its_group_is_sent_from_the_new_cell_in_order(cells: Cells) -> None:
    """A ticket's two events to one webhook (one FIFO group): A attempted the first (its
    endpoint failed: back in the queue after its backoff), the second waits behind it,
    never received alone. After the move A lets both go; B sends both, in order, as signed."""
    hook, secret = tenant_with_webhook(cells, CELL_A, "1", "one")
    tenant_with_webhook(cells, CELL_A, "10", "ten")
    member = User("1", "alice-1")
    with cells.in_cell(CELL_A):
        ticket = cells.api.new_ticket(member, title="first")["ticket_id"]
        assert cells.api.update(member, ticket, {"title": "second"}).ok
        cells.api.new_ticket(User("10", "alice-10"), title="beside")
    cells.deliver_streams()
    failing = Receivers(status=503)
    records = receive()
    ones = [record for record in records if read_queue_message(record["body"])[2]["tenant_id"] == "1"]
    assert len(ones) == 2
    assert process(cell_deliverer(cells, CELL_A, failing), ones) == [record["messageId"] for record in ones]
    first, second = delivery_records(cells, CELL_A, "1")
    assert (first["attempts"]["N"], second["attempts"]["N"]) == ("1", "0")  # the second one waits behind
    assert [json.loads(body)["type"] for _, body in failing.at("one")] == ["ticket.created"]
    receivers = Receivers()

    cells.move("1", CELL_B, checkpoint=moved_out(cells, receivers, "1"))

    assert receivers.at("one") == []
    deliver_from(cells, CELL_B, receivers)
    assert_sent_as_signed(receivers, "one", secret, [first["event"]["S"], second["event"]["S"]])
    assert [json.loads(body)["type"] for _, body in receivers.at("one")] == CREATED_AND_UPDATED
    assert {json.loads(body)["tenant_id"] for _, body in receivers.at("ten")} == {"10"}  # delivered in A
    assert [(item["status"]["S"], item["attempts"]["N"]) for item in delivery_records(cells, CELL_B, "1")] == [
        ("DELIVERED", "2"),
        ("DELIVERED", "1"),
    ]
    assert hook in first["pk"]["S"]


def test_a_tickets_event_queued_in_the_old_cell_goes_before_its_change_written_in_the_new_one(cells: Cells) -> None:
    """A ticket created in A (its event queued there, not yet received), then changed in B
    as soon as writes open there: the receiver gets the creation, then the change."""
    _, secret = tenant_with_webhook(cells, CELL_A, "10", "ten")
    tenant_with_webhook(cells, CELL_A, "1", "one")
    member = User("10", "alice-10")
    with cells.in_cell(CELL_A):
        ticket = cells.api.new_ticket(member, title="made in A")["ticket_id"]
    cells.deliver_streams()
    (created,) = delivery_records(cells, CELL_A, "10")
    receivers = Receivers()
    let_go = moved_out(cells, receivers, "10")

    def during(step: str) -> None:
        let_go(step)
        if step == "erasing":  # writes open in B: the change, before the move has ended
            with cells.in_cell(CELL_B):
                assert cells.api.update(member, ticket, {"title": "changed in B"}).ok

    cells.move("10", CELL_B, checkpoint=during)
    deliver_from(cells, CELL_B, receivers)

    changed = [item for item in delivery_records(cells, CELL_B, "10") if item["type"]["S"] == "ticket.updated"]
    assert_sent_as_signed(receivers, "ten", secret, [created["event"]["S"], changed[0]["event"]["S"]])
    assert [json.loads(body)["data"]["title"] for _, body in receivers.at("ten")] == ["made in A", "changed in B"]
    assert receivers.at("one") == []


def test_an_event_the_old_cells_audit_writer_handled_after_the_switch_is_sent_at_the_moves_end(
    cells: Cells,
) -> None:
    """A's audit writer lags: a ticket's creation committed before the switch reaches it
    after the flip; A queues it (its record first) and lets it go. The trailing copy brings
    its record to B, which sends it at the move's end, as signed, once; a delivery handed
    over before writes opened, which B attempted meanwhile (its endpoint failing), is not
    handed over again."""
    cells.clock.now = time.time() + 60  # the move's switch after every event of A (their times are the API's)
    _, secret = tenant_with_webhook(cells, CELL_A, "1", "one")
    tenant_with_webhook(cells, CELL_A, "10", "ten")
    member = User("1", "alice-1")
    with cells.in_cell(CELL_A):
        cells.api.new_ticket(member, title="queued before")
    cells.deliver_streams()
    (before,) = delivery_records(cells, CELL_A, "1")
    with cells.in_cell(CELL_A):
        cells.api.new_ticket(member, title="audited late")  # its stream record waits for A's audit writer
    failing, receivers = Receivers(status=503), Receivers()
    let_go = moved_out(cells, receivers, "1")

    def during(step: str) -> None:
        let_go(step)
        if step == "erasing":  # A's audit writer catches up; B's sees the hand-over's mark
            cells.deliver_streams()
            for record in receive():
                redelivery = read_queue_message(record["body"])[2].get("redelivery")
                cell, endpoint = (CELL_B, failing) if redelivery else (CELL_A, receivers)
                process(cell_deliverer(cells, cell, endpoint), [record])

    outcome = cells.move("1", CELL_B, checkpoint=during)

    assert outcome.handed_over == 2  # the first before writes opened, the late one after the erase
    late = [item for item in delivery_records(cells, CELL_B, "1") if item["sk"] != before["sk"]]
    assert [json.loads(item["event"]["S"])["data"]["title"] for item in late] == ["audited late"]
    assert [body for _, body in failing.at("one")] == [before["event"]["S"]]  # B's first attempt
    advance_queue_clock(60)  # its retry is due
    deliver_from(cells, CELL_B, receivers)
    sent = sorted(body for _, body in receivers.at("one"))
    assert_sent_as_signed(receivers, "one", secret, [body for _, body in receivers.at("one")])
    assert sent == sorted([before["event"]["S"], late[0]["event"]["S"]])  # each once
    assert receivers.at("ten") == []
