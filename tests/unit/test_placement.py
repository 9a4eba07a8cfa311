"""The placement fields of the tenant record and what they decide: the table,
whether writes wait, how long a record is cached, whose stream records are whose."""

from __future__ import annotations

import pytest

from support_tickets.core.errors import TenantMoving
from support_tickets.data import tenant_registry as registry
from support_tickets.data.placement import (
    MOVING_TTL_SECONDS,
    WRITER_TIMEOUT_SECONDS,
    MovePhase,
    Placement,
    cache_seconds,
    data_table,
    marks_writes,
    owns_record,
    writes_paused,
)
from support_tickets.data.table import TenantTable, serialize
from support_tickets.data.tenant_registry import TenantConfig, TenantConfigCache

POOL = "SupportTicket"
OWN = "SupportTicket-dedicated-acme"


def dedicated(**fields: object) -> TenantConfig:
    return TenantConfig(tenant_id="acme", placement=Placement.DEDICATED, table=OWN, **fields)  # type: ignore[arg-type]


def test_a_pool_tenant_uses_the_pool_table_and_a_dedicated_one_its_own() -> None:
    assert data_table(TenantConfig(tenant_id="acme"), POOL) == POOL
    assert data_table(dedicated(placed_at=100), POOL) == OWN


@pytest.mark.parametrize(
    "fields",
    [
        {"placement": "dedicated"},  # no table
        {"table": OWN},  # a table for a pool tenant
        {"placement": "dedicated", "table": "SupportTicket-dedicated-acme2"},  # another tenant's table
        {"placement": "dedicated", "table": "SupportTicket"},
        {"placement": "silo", "table": OWN},
        {"move_phase": "COPYING"},  # a phase without a destination
        {"move_to": "dedicated", "move_phase": "COPYING"},  # to a dedicated table it does not name
        {"move_to": "pool", "move_table": OWN, "move_phase": "COPYING"},
        {"move_to": "dedicated", "move_table": OWN, "move_phase": "PACKING"},
        {"placed_at": -1},
    ],
)
def test_a_record_that_names_no_table_or_anothers_is_invalid(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"."):  # each its own message; none accepted
        TenantConfig(tenant_id="acme", **fields)  # type: ignore[arg-type]


def test_tenants_1_and_10_may_not_name_each_others_table() -> None:
    with pytest.raises(ValueError, match="ends with -dedicated-1"):
        TenantConfig(tenant_id="1", placement="dedicated", table="SupportTicket-dedicated-10")
    with pytest.raises(ValueError, match="ends with -dedicated-10"):
        TenantConfig(tenant_id="10", placement="dedicated", table="SupportTicket-dedicated-1")
    assert TenantConfig(tenant_id="10", placement="dedicated", table="SupportTicket-dedicated-10").table


def test_the_placement_survives_the_stored_item() -> None:
    record = dedicated(placed_at=1700000000, move_to="pool", move_phase="COPYING", move_started_at=1700000100)
    assert TenantConfig.from_stored("acme", {k: _attribute(v) for k, v in record.item().items()}) == record


def _attribute(value: object) -> dict[str, object]:
    return serialize(value)


@pytest.mark.parametrize("phase", list(MovePhase))
def test_writes_wait_only_while_the_switch_runs(phase: MovePhase) -> None:
    record = TenantConfig(tenant_id="acme", move_to="dedicated", move_table=OWN, move_phase=phase)
    assert writes_paused(record) is (phase in (MovePhase.SWITCHING, MovePhase.FLIPPED))
    assert writes_paused(TenantConfig(tenant_id="acme")) is False


@pytest.mark.parametrize("phase", list(MovePhase))
def test_writes_mark_themselves_while_the_mover_copies_and_until_its_switch_read_the_marks(phase: MovePhase) -> None:
    record = TenantConfig(tenant_id="acme", move_to="dedicated", move_table=OWN, move_phase=phase)
    # An API write during SWITCHING is refused before its marks (writes_paused): only the stream
    # functions still write then, and the switch must find what they wrote before it read the marks.
    assert marks_writes(record) is (phase in (MovePhase.COPYING, MovePhase.SWITCHING))
    assert marks_writes(TenantConfig(tenant_id="acme")) is False


def test_a_paused_view_refuses_every_write_before_dynamodb_and_reads_go_on() -> None:
    calls: list[str] = []

    class Client:
        def __getattr__(self, name: str) -> object:
            calls.append(name)
            return lambda **_: {"Items": []}

    class Clients:
        def dynamodb(self) -> object:
            return Client()

        def invalidate(self) -> None:
            return

    table = TenantTable("acme", POOL, Clients(), writes_paused=True)  # type: ignore[arg-type]
    for operation in ("put_item", "update_item", "delete_item", "batch_write_item", "transact_write_items"):
        with pytest.raises(TenantMoving):
            table.call(operation, TableName=POOL)
    assert calls == []
    table.call("query", TableName=POOL)
    assert calls == ["query"]


def test_a_record_with_a_move_running_is_cached_a_second_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    moving = TenantConfig(tenant_id="acme", move_to="dedicated", move_table=OWN, move_phase="COPYING")
    assert cache_seconds(moving, 30.0) == MOVING_TTL_SECONDS
    assert cache_seconds(TenantConfig(tenant_id="acme"), 30.0) == 30.0

    now = [0.0]
    stored = [moving]
    reads: list[str] = []

    def read(table: TenantTable) -> TenantConfig:
        reads.append(table.tenant_id)
        return stored[0]

    monkeypatch.setattr(registry, "read_tenant_config", read)
    cache = TenantConfigCache(30.0, clock=lambda: now[0])
    table = TenantTable("acme", POOL, None)  # type: ignore[arg-type]
    cache.get(table)
    now[0] = 0.5
    cache.get(table)
    assert len(reads) == 1
    now[0] = 1.5
    stored[0] = TenantConfig(tenant_id="acme")
    assert not cache.get(table).moving
    now[0] = 20.0
    cache.get(table)
    assert len(reads) == 2  # a record without a move is kept the whole TTL again


def test_a_pool_tenant_that_never_moved_owns_every_pool_record_and_nothing_else() -> None:
    record = TenantConfig(tenant_id="acme")
    assert owns_record(record, POOL, POOL, 0)
    assert owns_record(record, POOL, POOL, 1_800_000_000)
    assert not owns_record(record, POOL, OWN, 1_800_000_000)


def test_during_a_move_to_its_table_the_copy_is_not_the_tenants() -> None:
    record = TenantConfig(tenant_id="acme", move_to="dedicated", move_table=OWN, move_phase="SWITCHING")
    assert owns_record(record, POOL, POOL, 1_800_000_000)
    assert not owns_record(record, POOL, OWN, 1_800_000_000)


def test_after_the_flip_each_table_owns_its_side_of_placed_at() -> None:
    record = dedicated(placed_at=1000, move_to="dedicated", move_table=OWN, move_phase="ERASING")
    assert owns_record(record, POOL, POOL, 999)  # a change before the switch, processed late
    assert not owns_record(record, POOL, POOL, 1000)  # the erase
    assert not owns_record(record, POOL, OWN, 999)  # the copy
    assert owns_record(record, POOL, OWN, 1000)


def test_back_in_the_pool_the_first_moves_copy_is_still_not_the_tenants() -> None:
    # pool -> own at 1000, own -> pool at 2000: the pool's copy of the way back is
    # after 1000 (not the old window) and before 2000 (not the new one).
    record = TenantConfig(tenant_id="acme", placed_at=2000, previous_table=OWN, previous_placed_at=1000)
    assert owns_record(record, POOL, OWN, 1500)
    assert not owns_record(record, POOL, OWN, 999)
    assert not owns_record(record, POOL, OWN, 2000)
    assert not owns_record(record, POOL, POOL, 1500)
    assert owns_record(record, POOL, POOL, 2000)


def test_no_write_made_without_the_move_in_view_outlives_the_wait_before_the_copy() -> None:
    """The copy starts the record cache's TTL plus WRITER_TIMEOUT_SECONDS after
    the move is announced: every function that writes a tenant's data unfenced
    when its record shows no move (the API functions, the webhook delivery
    function) is ended by Lambda within that timeout, so none of its writes
    lands after the copy read its partition."""
    from stack_model.functions import function_specs

    specs = function_specs()
    writers = [spec for spec in specs.values() if spec.routes] + [specs["DeliverWebhookFunction"]]
    assert len(writers) > 10
    for spec in writers:
        assert spec.timeout_s <= WRITER_TIMEOUT_SECONDS, spec.logical_id


# ---------------------------------------------------------------- between cells
ARRIVING = {"cell_phase": "ARRIVING", "moving_from": "cell-a"}
MOVED_OUT = {"cell_phase": "MOVED_OUT", "moving_to": "cell-b", "moved_out_at": 1000}


@pytest.mark.parametrize(
    "fields",
    [
        {"cell_phase": "ARRIVING"},  # from no cell
        {"cell_phase": "MOVED_OUT", "moving_to": "cell-b"},  # without when
        {"cell_phase": "MOVED_OUT", "moved_out_at": 1000},  # to no cell
        {"cell_phase": "LEAVING", "moving_to": "cell-b"},
        {"cell_phase": "ARRIVING", "moving_from": "Cell A"},  # not a cell id
        {"moving_to": "cell/b"},
    ],
)
def test_a_cell_phase_names_the_other_cell(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"."):
        TenantConfig(tenant_id="acme", **fields)  # type: ignore[arg-type]


def test_a_stack_alone_stores_and_shows_no_cell_field_and_a_cells_record_round_trips() -> None:
    alone = dedicated(placed_at=1700000000, version=3)
    assert not {"cell_phase", "moving_from", "moving_to", "moved_out_at"} & set(alone.item())
    assert not {"cell_phase", "moving_from", "moving_to", "moved_out_at"} & set(alone.values())
    for fields in (ARRIVING, MOVED_OUT):
        record = dedicated(placed_at=900, version=2, **fields)
        assert TenantConfig.from_stored("acme", {k: _attribute(v) for k, v in record.item().items()}) == record


@pytest.mark.parametrize("fields", [ARRIVING, MOVED_OUT], ids=["arriving", "moved out"])
def test_a_cell_that_does_not_hold_the_tenant_yet_or_any_more_refuses_everything(fields: dict[str, object]) -> None:
    from support_tickets.data.placement import served_here

    record = TenantConfig(tenant_id="acme", **fields)  # type: ignore[arg-type]
    assert not served_here(record)
    assert writes_paused(record)
    assert not marks_writes(record)
    assert served_here(TenantConfig(tenant_id="acme"))


def test_an_arriving_record_is_cached_a_second_and_a_moved_out_one_the_whole_ttl() -> None:
    # The flip must reach every container of the new cell at once; the old cell's refusal is final.
    assert cache_seconds(TenantConfig(tenant_id="acme", **ARRIVING), 30.0) == MOVING_TTL_SECONDS  # type: ignore[arg-type]
    assert cache_seconds(TenantConfig(tenant_id="acme", **MOVED_OUT), 30.0) == 30.0  # type: ignore[arg-type]


def test_between_cells_the_copy_and_the_erase_are_not_the_tenants_but_a_late_record_from_before_is() -> None:
    arriving = dedicated(**ARRIVING)
    assert not owns_record(arriving, POOL, OWN, 1_800_000_000)  # the copy into the new cell
    assert not owns_record(arriving, POOL, POOL, 1_800_000_000)
    # In the new cell after the flip: from placed_at on, and nothing of a table before it there
    arrived = dedicated(
        placed_at=1000, previous_placed_at=1000, move_to="dedicated", move_table=OWN, move_phase="FLIPPED"
    )
    assert not owns_record(arrived, POOL, OWN, 999)
    assert owns_record(arrived, POOL, OWN, 1000)
    assert not owns_record(arrived, POOL, POOL, 999)
    # In the cell it left: its own changes before the flip (processed late), not the erase after it
    left = TenantConfig(tenant_id="acme", placed_at=500, **MOVED_OUT)  # type: ignore[arg-type]
    assert owns_record(left, POOL, POOL, 999)
    assert not owns_record(left, POOL, POOL, 1000)
    assert not owns_record(left, POOL, POOL, 499)
