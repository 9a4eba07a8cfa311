"""Where a stream record belongs (support_tickets.streams.routing): its table from
its ``eventSourceARN``, poison for a table that is not its tenant's (tenants ``1``
and ``10`` both ways), the tenant's changes told from a move's copy and erase, and
one record read per tenant and batch at most."""

from __future__ import annotations

from typing import Any

import pytest

from stack_model import dedicated
from support_tickets.data.placement import MovePhase, Placement
from support_tickets.data.table import to_item
from support_tickets.data.tenant_registry import TenantConfig, TenantConfigCache
from support_tickets.streams.records import PoisonRecord
from support_tickets.streams.routing import DEDICATED_INFIX, StreamRouter, created_second, source_table

POOL = "SupportTicket"
ACCOUNT = "123456789012"


def stream_arn(table: str) -> str:
    return f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{table}/stream/2026-11-27T02:43:49.379"


def own(tenant: str) -> str:
    return dedicated.table_name(POOL, tenant)


class RecordReads:
    """A DynamoDB client that answers GetItem of tenant records from ``records`` and counts them."""

    def __init__(self, records: dict[str, TenantConfig]) -> None:
        self.records = records
        self.reads: list[tuple[str, str]] = []

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        pk = kwargs["Key"]["pk"]["S"]
        tenant = pk.removeprefix("TENANT#").removesuffix("|CONFIG")
        self.reads.append((kwargs["TableName"], tenant))
        record = self.records.get(tenant)
        if record is None:
            return {}
        return {"Item": to_item({key: value for key, value in record.item().items() if value is not None})}


def router(records: dict[str, TenantConfig]) -> tuple[StreamRouter, RecordReads]:
    client = RecordReads(records)
    return StreamRouter(POOL, client, TenantConfigCache(30.0)), client


def moved_to_own_table(tenant: str, placed_at: int, previous_placed_at: int = 0) -> TenantConfig:
    return TenantConfig(
        tenant_id=tenant,
        placement=Placement.DEDICATED,
        table=own(tenant),
        placed_at=placed_at,
        previous_placed_at=previous_placed_at,
    )


def test_the_layers_infix_is_the_dedicated_templates() -> None:
    assert DEDICATED_INFIX == dedicated.TABLE_INFIX


@pytest.mark.parametrize("table", [POOL, own("1"), "SupportTicket-dedicated-a-b.c_d"])
def test_the_source_table_is_read_from_the_stream_arn(table: str) -> None:
    assert source_table(stream_arn(table)) == table
    assert source_table(f"arn:aws-cn:dynamodb:cn-north-1:{ACCOUNT}:table/{table}/stream/label") == table


@pytest.mark.parametrize(
    "arn",
    [
        None,
        "",
        42,
        f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{POOL}",  # the table's ARN, no stream
        f"arn:aws:kinesis:us-east-1:{ACCOUNT}:stream/{POOL}",
        f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{POOL}/stream/a/b",
        f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/x/stream/label",  # no table has a 1-character name
        f"arn:aws:sqs:us-east-1:{ACCOUNT}:queue",
    ],
)
def test_a_record_without_a_streams_arn_is_poison(arn: object) -> None:
    with pytest.raises(PoisonRecord):
        source_table(arn)


@pytest.mark.parametrize(
    ("value", "second"),
    [(1795747429, 1795747429), (1795747429.999, 1795747429), ("1795747429.5", 1795747429), ("x", None), (None, None)],
)
def test_the_records_time_is_whole_seconds_rounded_down(value: object, second: int | None) -> None:
    assert created_second(value) == second


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_a_record_of_another_tenants_table_or_an_unknown_one_is_poison(tenant: str, other: str) -> None:
    routes, reads = router({tenant: moved_to_own_table(tenant, 100), other: moved_to_own_table(other, 100)})
    for table in (own(other), f"{POOL}-dedicated-{tenant}x", "Other", f"Other-dedicated-{tenant}"):
        with pytest.raises(PoisonRecord, match="security"):
            routes.route(tenant, stream_arn(table), 200)
    assert reads.reads == []  # judged before any read
    assert routes.route(tenant, stream_arn(own(tenant)), 200).owned


def test_a_pooled_tenant_that_never_moved_owns_every_record_of_the_pool() -> None:
    routes, _ = router({})
    route = routes.route("1", stream_arn(POOL), 5)
    assert (route.source, route.current, route.owned) == (POOL, POOL, True)
    # and a record of its dedicated table (a table it was never placed on) is not its change
    assert not routes.route("1", stream_arn(own("1")), 5).owned


def test_a_moves_copy_and_erase_are_skipped_and_a_lagging_record_of_the_old_table_is_the_tenants() -> None:
    # Given tenant 1 moved from the pool (placed there at 50) to its own table at 100
    routes, _ = router({"1": moved_to_own_table("1", placed_at=100, previous_placed_at=50)})
    copy, erase = routes.route("1", stream_arn(own("1")), 99), routes.route("1", stream_arn(POOL), 100)
    lagging, new = routes.route("1", stream_arn(POOL), 99), routes.route("1", stream_arn(own("1")), 100)
    # Then the copy into its table (before placed_at) and the erase of the pool (from it on) are not its changes
    assert not copy.owned
    assert not erase.owned
    # and a change the pool made before the switch, handled late, is: written beside it, in the pool
    assert (lagging.owned, lagging.source, lagging.current) == (True, POOL, own("1"))
    assert (new.owned, new.source, new.current) == (True, own("1"), own("1"))


def test_a_record_without_its_time_is_the_tenants_only_where_no_move_placed_it() -> None:
    routes, _ = router({"10": moved_to_own_table("10", placed_at=100)})
    assert routes.route("1", stream_arn(POOL), None).owned  # tenant 1 never moved
    with pytest.raises(PoisonRecord, match="time"):
        routes.route("10", stream_arn(own("10")), None)


def test_a_batch_reads_each_tenants_record_once_from_the_pool_table() -> None:
    routes, reads = router({"10": moved_to_own_table("10", placed_at=100)})
    for second in range(100, 110):
        routes.route("1", stream_arn(POOL), second)
        routes.route("10", stream_arn(own("10")), second)
    assert sorted(reads.reads) == [(POOL, "1"), (POOL, "10")]
    # A moving record is cached a second at most, but never re-read within a batch
    routes.records.clear()
    routes.route("10", stream_arn(own("10")), 120)
    assert len(reads.reads) == 2


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
@pytest.mark.parametrize("phase", list(MovePhase))
def test_audit_events_mark_themselves_only_in_their_moving_tenants_old_table_while_it_copies_or_switches(
    tenant: str, other: str, phase: MovePhase
) -> None:
    moving = TenantConfig(tenant_id=tenant, move_to="dedicated", move_table=own(tenant), move_phase=phase)
    routes, _ = router({tenant: moving})
    marking = phase in (MovePhase.COPYING, MovePhase.SWITCHING)
    assert routes.marks_writes(tenant, POOL) is marking
    # Never in the table it moves to (its records there are the copy's, skipped), never for the tenant beside it
    assert routes.marks_writes(tenant, own(tenant)) is False
    assert routes.marks_writes(other, POOL) is False


def test_whether_to_mark_is_read_from_the_containers_cache_not_kept_for_the_batch() -> None:
    """The batch keeps its record for routing, but a move announced during the
    batch is seen once the cache's entry expires: every event written after the
    mover's wait (at least the cache's TTL) is marked."""
    records = {"1": TenantConfig(tenant_id="1")}
    routes, reads = router(records)
    assert routes.route("1", stream_arn(POOL), 5).owned
    assert routes.marks_writes("1", POOL) is False
    records["1"] = TenantConfig(tenant_id="1", move_to="dedicated", move_table=own("1"), move_phase=MovePhase.COPYING)
    routes.records.clear()  # what the TTL does
    assert routes.marks_writes("1", POOL) is True
    assert routes.route("1", stream_arn(POOL), 6).current == POOL
    assert len(reads.reads) == 2
