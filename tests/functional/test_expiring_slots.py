"""Expiring slots (attempt leases, retry slots): who holds what, and what a take
costs in DynamoDB calls (a renewal is one conditional write, no read; takers start
at slots of their own rather than racing for the first free one)."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from support_tickets.core import keys
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.webhooks.parking import SLOT_SK_PREFIX, WebhookParking
from support_tickets.webhooks.slots import ExpiringSlots, first_slot
from tests.conftest import REGION

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

NOW = 1_800_000_000.0
WEBHOOK = "01M8E2JCH6DAC8K918Q2S67E6V"


class CountingTable:
    """A tenant's table on a client of its own, counting its calls by operation,
    conditional writes that lost counted apart."""

    def __init__(self, tenant_id: str, table_name: str) -> None:
        self.calls: Counter[str] = Counter()
        self.client = boto3.client("dynamodb", region_name=REGION)
        self.client.meta.events.register("before-call.dynamodb.*", self._count)
        self.table = TenantTable(tenant_id, table_name, OwnClient(self.client))

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def slots(self, count: int) -> ExpiringSlots:
        return ExpiringSlots(self.table, keys.webhook_parked_pk(self.table.tenant_id, WEBHOOK), SLOT_SK_PREFIX, count)


def holders_with_first(slot: int, count: int, how_many: int) -> list[str]:
    """Delivery-id-like holders whose own slot (:func:`first_slot`) is ``slot``."""
    found = [f"holder-{n}" for n in range(10_000) if first_slot(f"holder-{n}", count) == slot]
    return found[:how_many]


def held(dynamodb: DynamoDBClient, table_name: str, tenant_id: str) -> dict[str, str]:
    items = dynamodb.query(
        TableName=table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :slot)",
        ExpressionAttributeValues={
            ":pk": {"S": keys.webhook_parked_pk(tenant_id, WEBHOOK)},
            ":slot": {"S": SLOT_SK_PREFIX},
        },
    )["Items"]
    return {item["sk"]["S"]: item["holder"]["S"] for item in items if "holder" in item}


def test_a_renewed_slot_costs_one_write_and_no_read(aws: None, table_name: str) -> None:
    counting = CountingTable("acme", table_name)
    parking = WebhookParking(counting.table, WEBHOOK)
    assert parking.take_slot(100, "held-back", NOW, NOW + 120)
    counting.calls.clear()
    # The message comes back and is handed back again: its slot renewed where it is.
    assert parking.take_slot(100, "held-back", NOW + 60, NOW + 300)
    assert counting.calls == Counter({"UpdateItem": 1})
    counting.calls.clear()
    parking.give_back_slot("held-back", 100)
    assert counting.calls == Counter({"UpdateItem": 1})


def test_a_holder_whose_own_slot_is_taken_gets_another_and_keeps_it(
    aws: None, dynamodb: DynamoDBClient, table_name: str
) -> None:
    counting = CountingTable("acme", table_name)
    slots = counting.slots(4)
    first, second = holders_with_first(2, 4, 2)
    assert slots.take(first, NOW, NOW + 120, renew=True, direct=True) == 2
    got = slots.take(second, NOW, NOW + 120, renew=True, direct=True)
    assert got == 3  # the next free one after its own, wrapping round
    assert held(dynamodb, table_name, "acme") == {"SLOT#2": first, "SLOT#3": second}
    # Renewed, it finds its slot by the read and keeps it (no second slot for one holder).
    assert slots.take(second, NOW + 10, NOW + 200, renew=True, direct=True) == 3
    assert held(dynamodb, table_name, "acme") == {"SLOT#2": first, "SLOT#3": second}
    slots.give_back(second)
    assert held(dynamodb, table_name, "acme") == {"SLOT#2": first}


def test_takers_that_read_the_same_free_slots_start_at_their_own(aws: None, table_name: str) -> None:
    """Ten takers of a batch, at once, that all found the ten slots free: each tries its
    own first, so no write loses (all trying the first free one: 55 writes for 10 slots)."""
    holders = [holders_with_first(number, 10, 1)[0] for number in range(10)]
    read_all = threading.Barrier(len(holders), timeout=30)
    writes: Counter[str] = Counter()
    lock = threading.Lock()

    def take(holder: str) -> int | None:
        counting = CountingTable("acme", table_name)

        def after_read(model: Any, **_: Any) -> None:
            if model.name == "Query":
                read_all.wait()  # every taker has read the slots before any writes
            elif model.name == "UpdateItem":
                with lock:
                    writes[holder] += 1

        counting.client.meta.events.register("after-call.dynamodb.*", after_read)
        return counting.slots(10).take(holder, NOW, NOW + 120)

    with ThreadPoolExecutor(len(holders)) as pool:
        taken = list(pool.map(take, holders))
    assert taken == list(range(10))
    assert sum(writes.values()) == 10


def test_every_slot_held_by_others_is_none_and_an_expired_one_is_free_again(aws: None, table_name: str) -> None:
    counting = CountingTable("acme", table_name)
    slots = counting.slots(2)
    assert {slots.take("a", NOW, NOW + 30), slots.take("b", NOW, NOW + 60)} == {0, 1}
    assert slots.take("c", NOW + 1, NOW + 31, renew=True, direct=True) is None
    # "a"'s hold ran out (a crashed function): its slot is free, and "a" can't give it back.
    a_slot = slots.take("c", NOW + 40, NOW + 70)
    assert a_slot is not None
    slots.give_back("a", a_slot)
    assert slots.take("d", NOW + 41, NOW + 71) is None
    assert ExpiringSlots(counting.table, "unused", SLOT_SK_PREFIX, 0).take("e", NOW, NOW + 1) is None


@pytest.mark.parametrize(("owner", "other"), [("1", "10"), ("10", "1")])
def test_one_tenants_slots_are_not_anothers(
    aws: None, dynamodb: DynamoDBClient, table_name: str, owner: str, other: str
) -> None:
    mine = WebhookParking(CountingTable(owner, table_name).table, WEBHOOK)
    theirs = WebhookParking(CountingTable(other, table_name).table, WEBHOOK)
    assert mine.take_slot(1, "a", NOW, NOW + 60)
    assert theirs.take_slot(1, "b", NOW, NOW + 60)
    theirs.give_back_slot("a", 1)
    assert held(dynamodb, table_name, owner) == {"SLOT#0": "a"}
    assert held(dynamodb, table_name, other) == {"SLOT#0": "b"}
