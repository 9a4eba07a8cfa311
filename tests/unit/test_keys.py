from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support_tickets.core import keys
from support_tickets.core.keys import InvalidTenantId, TicketStatus
from tests.conftest import NOT_ASCII_NUMBERS

VALID_TENANTS = st.from_regex(r"\A[a-z0-9-]{1,63}\Z")


@pytest.mark.parametrize("tenant_id", ["1", "10", "a", "a-b", "acme-corp", "x" * 63])
def test_valid_tenant_ids_are_accepted(tenant_id: str) -> None:
    assert keys.validate_tenant_id(tenant_id) == tenant_id


@pytest.mark.parametrize(
    "tenant_id", ["", "A", "a|b", "a*", "a#b", "a b", "x" * 64, "1|", "*", "?", "ä", None, 10, "a\n"]
)
def test_invalid_tenant_ids_are_refused(tenant_id: object) -> None:
    with pytest.raises(InvalidTenantId):
        keys.validate_tenant_id(tenant_id)


def test_tenant_1_prefix_does_not_prefix_tenant_10_keys() -> None:
    assert not keys.ticket_pk("10", "X").startswith(keys.tenant_prefix("1"))
    assert not keys.tenant_status("10", "OPEN").startswith(keys.tenant_prefix("1"))


@given(VALID_TENANTS, VALID_TENANTS)
def test_no_tenant_prefix_is_a_prefix_of_another_tenants_keys(a: str, b: str) -> None:
    every_key = (
        keys.ticket_pk(b, "T1"),
        keys.tenant_status(b, "OPEN"),
        keys.tenant_status(b, "OPEN", 63),
        *keys.status_partitions(b, "CLOSED", [1, 4, 64]),
        keys.aggregate_pk(b),
        keys.aggregate_journal_key(b, "0123abcd")["pk"]["S"],
        keys.idempotency_pk(b, "alice\x1fkey"),
        *keys.idempotency_partitions(b),
        keys.tenant_config_key(b)["pk"]["S"],
        keys.history_pk(b, "T1"),
        *keys.audit_day_partitions(b, "2026-11-21"),
        keys.audit_days_pk(b),
        *keys.aggregate_journal_partitions(b),
        keys.move_mark_key(b, "T1")["pk"]["S"],
        keys.move_mark_key(b, keys.audit_sk("2026-11-21T00:00:00.000Z", "1", "e1"))["pk"]["S"],
        keys.audit_event_key(b, keys.audit_sk("2026-11-21T00:00:00.000Z", "1", "e1"))["pk"]["S"],
        *keys.move_mark_partitions(b),
    )
    for key in every_key:
        assert key.startswith(keys.tenant_prefix(a)) == (a == b)
        assert keys.tenant_of_key(key) == b


def test_every_key_has_the_tenant_prefix() -> None:
    prefix = "TENANT#acme|"
    assert keys.ticket_pk("acme", "01J") == prefix + "TICKET#01J"
    assert keys.tenant_status("acme", TicketStatus.IN_PROGRESS) == prefix + "IN_PROGRESS"
    assert keys.aggregate_pk("acme") == prefix + "AGGREGATE"
    assert keys.idempotency_pk("acme", "alice\x1fk1").startswith(prefix + "IDEMPOTENCY#")
    assert keys.tenant_config_key("acme") == {"pk": {"S": prefix + "CONFIG"}, "sk": {"S": "CONFIG"}}
    assert keys.aggregate_journal_key("acme", "e1")["pk"]["S"].startswith(prefix + "AGGREGATE#JOURNAL#")
    mark = keys.move_mark_key("acme", "01J")
    assert mark["pk"]["S"].startswith(prefix + "MOVE#")
    assert mark["sk"] == {"S": "01J"}
    assert keys.move_mark_key("acme", "01J")["pk"]["S"] in keys.move_mark_partitions("acme")
    assert len(set(keys.move_mark_partitions("acme"))) == keys.MOVE_MARK_PARTITIONS
    with pytest.raises(ValueError, match="invalid ticket id or audit event"):
        keys.move_mark_key("acme", "not a ticket id")
    # An audit event's mark names its sort key, from which its day's partition follows
    event = keys.audit_sk("2026-11-27T10:00:00.000Z", "42", "e1")
    assert keys.move_mark_key("acme", event)["sk"] == {"S": event}
    day_partition = keys.audit_day_pk("acme", "2026-11-27", keys.audit_shard("e1"))
    assert keys.audit_event_key("acme", event)["pk"]["S"] == day_partition
    assert keys.is_audit_day_suffix("AUDIT#2026-11-27#3")
    assert not keys.is_audit_day_suffix("AUDIT#DAYS")
    with pytest.raises(ValueError, match="invalid audit event"):
        keys.audit_event_key("acme", "01J")


def test_one_shard_keeps_the_anchor_blogs_keys_exactly() -> None:
    assert keys.ticket_tenant_status("acme", "OPEN", "01JD3Z8W1X4K6M9P2R5T7V0BQE", 1) == "TENANT#acme|OPEN"
    assert keys.status_partitions("acme", "OPEN", [1]) == ["TENANT#acme|OPEN"]


@given(st.from_regex(r"\A[0-9A-Za-z_-]{1,64}\Z"), st.integers(2, keys.MAX_SHARDS))
def test_a_tickets_shard_comes_from_its_id_alone(ticket_id: str, shards: int) -> None:
    shard = keys.ticket_shard(ticket_id, shards)
    assert 0 <= shard < shards
    assert keys.ticket_shard(ticket_id, shards) == shard
    placed = keys.ticket_tenant_status("t1", "IN_PROGRESS", ticket_id, shards)
    assert placed == f"TENANT#t1|IN_PROGRESS#{shard}"
    assert placed in keys.status_partitions("t1", "IN_PROGRESS", [shards])
    assert keys.status_from_tenant_status(placed) is TicketStatus.IN_PROGRESS


def test_shards_spread_tickets_evenly() -> None:
    counts = [0] * 16
    for n in range(16_000):
        counts[keys.ticket_shard(f"01JD3Z8W1X4K6M9P2R5T{n:06d}", 16)] += 1
    assert min(counts) > 800  # 1,000 expected in each
    assert max(counts) < 1200


def test_partitions_of_several_shard_counts_are_each_read_once() -> None:
    partitions = keys.status_partitions("a", "OPEN", [4, 1, 8, 4])
    assert partitions == ["TENANT#a|OPEN", *[f"TENANT#a|OPEN#{k}" for k in range(8)]]


@pytest.mark.parametrize("shards", [0, 65, -1, True, 2.0, "4", None])
def test_shard_counts_outside_1_to_64_are_refused(shards: object) -> None:
    with pytest.raises(ValueError, match="shard count"):
        keys.validate_shard_count(shards)


def test_idempotency_records_spread_over_many_partitions() -> None:
    used = {keys.idempotency_pk("acme", f"alice\x1fkey-{n}") for n in range(2000)}
    assert used == set(keys.idempotency_partitions("acme"))
    assert len(used) == keys.IDEMPOTENCY_BUCKETS


def test_aggregate_items_of_a_status_are_read_back_as_that_status() -> None:
    for status in TicketStatus:
        assert keys.status_from_aggregate_sk(keys.aggregate_sk(status)) is status
        for slot in range(keys.AGGREGATE_SLOTS):
            assert keys.status_from_aggregate_sk(keys.aggregate_sk(status, slot)) is status
    assert keys.status_from_aggregate_sk("rev") is None


def test_status_round_trips_through_tenant_status() -> None:
    for status in TicketStatus:
        assert keys.status_from_tenant_status(keys.tenant_status("a-b", status)) is status


def test_unassigned_resolver_round_trips_and_cannot_be_a_user_name() -> None:
    assert keys.resolver_from_key(keys.resolver_key(None)) is None
    assert keys.resolver_from_key(keys.resolver_key("johnd")) == "johnd"
    import re

    assert not re.fullmatch(keys.RESOLVER_PATTERN, keys.UNASSIGNED_RESOLVER)


@pytest.mark.parametrize("ticket_id", ["", "a|b", "a#b", "a*", "../x", "a%2F", "x" * 65])
def test_ticket_keys_refuse_ids_that_could_escape_the_key_layout(ticket_id: str) -> None:
    with pytest.raises(ValueError, match="invalid ticket id"):
        keys.ticket_pk("acme", ticket_id)


def test_audit_keys_are_the_tenants_and_sort_by_time() -> None:
    assert keys.history_pk("acme", "01J") == "TENANT#acme|HISTORY#01J"
    assert keys.audit_day_partitions("acme", "2026-11-21") == [
        f"TENANT#acme|AUDIT#2026-11-21#{shard}" for shard in range(keys.AUDIT_SHARDS)
    ]
    assert keys.audit_days_pk("acme") == "TENANT#acme|AUDIT#DAYS"
    earlier = keys.audit_sk("2026-11-21T10:00:00.000Z", "99", "f" * 32)
    later = keys.audit_sk("2026-11-21T10:00:00.000Z", "100", "0" * 32)
    assert earlier < later  # same millisecond: the stream's order
    assert keys.audit_sk("2026-11-21T10:00:00.001Z", "1", "a") > later
    assert keys.is_audit_sk(later)
    assert all(0 <= keys.audit_shard(f"{n:032x}") < keys.AUDIT_SHARDS for n in range(100))


@pytest.mark.parametrize(
    ("at", "sequence", "event_id"),
    [("2026-11-21", "1", "e"), ("2026-11-21T10:00:00.000Z", "x1", "e"), ("2026-11-21T10:00:00.000Z", "1", "a|b"),
     ("2026-11-21T10:00:00.000Z", "1" * 41, "e"), ("2026-11-21T10:00:00.000Z", "1", "")],
)  # fmt: skip
def test_an_audit_key_of_any_other_shape_is_refused(at: str, sequence: str, event_id: str) -> None:
    with pytest.raises(ValueError, match="invalid"):
        keys.audit_sk(at, sequence, event_id)


@pytest.mark.parametrize("day", ["2026-11-2", "DAYS", "2026-11-21#0", ""])
def test_a_day_partition_needs_a_day_and_a_shard(day: str) -> None:
    with pytest.raises(ValueError, match="invalid day"):
        keys.audit_day_pk("acme", day, 0)
    with pytest.raises(ValueError, match="invalid audit shard"):
        keys.audit_day_pk("acme", "2026-11-21", keys.AUDIT_SHARDS)


@pytest.mark.parametrize("digit", NOT_ASCII_NUMBERS)
def test_key_digits_are_ascii_digits(digit: str) -> None:
    # A Unicode \d or str.isdigit() would take each of these for a digit.
    later = keys.audit_sk("2026-11-21T10:00:00.000Z", "1", "e")
    assert not keys.is_audit_sk(later.replace("10:00", f"1{digit[-1]}:00"))
    assert not keys.is_audit_sk(later.replace("#" + "0" * 39 + "1#", "#" + "0" * 39 + digit[-1] + "#"))
    assert not keys.is_day(f"2026-11-2{digit[-1]}")
    with pytest.raises(ValueError, match="invalid"):
        keys.audit_sk("2026-11-21T10:00:00.000Z", digit, "e")
    with pytest.raises(ValueError, match="invalid day"):
        keys.audit_day_pk("acme", f"2026-11-2{digit[-1]}", 0)


def test_a_cells_own_usage_counter_moves_under_its_cell_and_its_moves_start() -> None:
    own = keys.usage_sk("2026-11-20", 3)
    first, second = keys.moved_usage_sk(own, "cell-a", 100), keys.moved_usage_sk(own, "cell-a", 200)
    # Two stays in one cell the same day: two keys, never one item written twice over
    assert (first, second) == (f"{own}#cell-a#100", f"{own}#cell-a#200")
    # One an earlier move carried keeps its key; anything else of the partition is no counter
    assert keys.moved_usage_sk(f"{own}#cell-b#50", "cell-a", 300) == f"{own}#cell-b#50"
    assert keys.moved_usage_sk("JOURNAL", "cell-a", 300) is None
    for bad in (-1, True):
        with pytest.raises(ValueError, match="move start"):
            keys.moved_usage_sk(own, "cell-a", bad)
