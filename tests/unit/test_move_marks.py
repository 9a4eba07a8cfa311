"""What a write request changes that a move's switch reads again (TenantTable
marks it first while the tenant's data is being copied:
support_tickets.data.placement): the tickets of every write operation the
repositories use and the audit events the audit writer puts into a day's
trail, only this table's and this tenant's items."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from support_tickets.core import keys
from support_tickets.core.errors import Unavailable
from support_tickets.data.table import MARK_WRITTEN, OwnClient, TenantTable, written_marks
from support_tickets.streams.audit_events import audit_record
from support_tickets.streams.audit_writer import AuditWriter

A, B = "01J0000000000000000000000A", "01J0000000000000000000000B"
TABLE = "SupportTicket"


def key(tenant: str, ticket_id: str, sk: str = "SUMMARY") -> dict[str, Any]:
    return {"pk": {"S": keys.ticket_pk(tenant, ticket_id)}, "sk": {"S": sk}}


@pytest.mark.parametrize(
    ("operation", "request_"),
    [
        ("put_item", {"TableName": TABLE, "Item": key("1", A, "COMMENT#x")}),
        ("update_item", {"TableName": TABLE, "Key": key("1", A)}),
        ("delete_item", {"TableName": TABLE, "Key": key("1", A)}),
    ],
)
def test_a_single_item_write_names_its_ticket(operation: str, request_: dict[str, Any]) -> None:
    assert written_marks("1", TABLE, operation, request_) == {A}


def test_a_transaction_names_the_tickets_it_writes_not_those_it_only_checks() -> None:
    request = {
        "TransactItems": [
            {"Update": {"TableName": TABLE, "Key": key("1", A)}},
            {"Put": {"TableName": TABLE, "Item": {"pk": {"S": keys.idempotency_pk("1", "u\x1fk")}, "sk": {"S": "x"}}}},
            {"ConditionCheck": {"TableName": TABLE, "Key": key("1", B)}},
            {"Delete": {"TableName": "another-table", "Key": key("1", B)}},
        ]
    }
    assert written_marks("1", TABLE, "transact_write_items", request) == {A}


def test_a_batch_names_this_tables_puts_and_deletes() -> None:
    request = {
        "RequestItems": {
            TABLE: [{"PutRequest": {"Item": key("1", A, "COMMENT#y")}}, {"DeleteRequest": {"Key": key("1", B)}}],
            "another-table": [{"PutRequest": {"Item": key("1", "01J0000000000000000000000C")}}],
        }
    }
    assert written_marks("1", TABLE, "batch_write_item", request) == {A, B}


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_another_tenants_keys_and_other_partitions_name_no_ticket(tenant: str, other: str) -> None:
    assert written_marks(tenant, TABLE, "update_item", {"Key": key(other, A)}) == set()
    webhook = {"pk": {"S": keys.webhooks_pk(tenant)}, "sk": {"S": "WEBHOOK#w"}}
    assert written_marks(tenant, TABLE, "put_item", {"Item": webhook}) == set()


class Recording:
    """A DynamoDB client that records its calls and refuses the mark's write."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def put_item(self, **kwargs: Any) -> Any:
        self.calls.append(("put_item", kwargs))
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, "PutItem")

    def update_item(self, **kwargs: Any) -> Any:
        self.calls.append(("update_item", kwargs))
        return {}

    def batch_write_item(self, **kwargs: Any) -> Any:
        self.calls.append(("batch_write_item", kwargs))
        return {}


def test_a_write_is_marked_first_and_not_made_when_its_mark_is_not() -> None:
    client = Recording()
    table = TenantTable("1", TABLE, OwnClient(client), marks_writes=True)  # type: ignore[arg-type]
    with pytest.raises(Unavailable):
        table.call("update_item", TableName=TABLE, Key=key("1", A))
    assert [name for name, _ in client.calls] == ["put_item"]
    assert client.calls[0][1]["Item"]["pk"] == keys.move_mark_key("1", A)["pk"]


def test_a_write_of_several_tickets_marks_them_in_one_batch_and_nothing_else_is_marked() -> None:
    client = Recording()
    table = TenantTable("1", TABLE, OwnClient(client), marks_writes=True)  # type: ignore[arg-type]
    table.call("batch_write_item", RequestItems={TABLE: [{"DeleteRequest": {"Key": key("1", t)}} for t in (A, B)]})
    marks, write, again = client.calls
    assert marks[0] == "batch_write_item"
    assert {request["PutRequest"]["Item"]["sk"]["S"] for request in marks[1]["RequestItems"][TABLE]} == {A, B}
    assert write[0] == "batch_write_item"
    assert write[1]["RequestItems"][TABLE][0] == {"DeleteRequest": {"Key": key("1", A)}}
    assert {request["PutRequest"]["Item"]["sk"]["S"] for request in again[1]["RequestItems"][TABLE]} == {A, B}
    unmarked = TenantTable("1", TABLE, OwnClient(client))  # type: ignore[arg-type]
    unmarked.call("update_item", TableName=TABLE, Key=key("1", A))
    assert client.calls[-1][0] == "update_item"
    assert len(client.calls) == 4


def event_record(tenant: str, ticket_id: str = A) -> Any:
    at = "2026-11-27T10:00:00.000Z"
    return audit_record(
        event_name="INSERT",
        event_id="e" * 32,
        sequence_number="42",
        recorded_at=None,
        keys_image={"pk": keys.ticket_pk(tenant, ticket_id), "sk": keys.SUMMARY_SK},
        old_image=None,
        new_image={"tenant_status": f"TENANT#{tenant}|OPEN", "title": "t", "resolver": "#UNASSIGNED", "created_at": at},
    )


class Accepting:
    """A DynamoDB client that records its calls and accepts every write."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def put_item(self, **kwargs: Any) -> Any:
        self.calls.append(("put_item", kwargs))
        return {}


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_an_audit_event_in_a_days_trail_names_its_sort_key_and_its_history_twin_and_the_day_index_name_nothing(
    tenant: str, other: str
) -> None:
    client = Accepting()
    AuditWriter(TABLE, client).write(event_record(tenant))  # type: ignore[arg-type]
    index, history, day = (call[1]["Item"] for call in client.calls)
    assert written_marks(tenant, TABLE, "put_item", {"Item": day}) == {day["sk"]["S"]}
    assert keys.audit_event_key(tenant, day["sk"]["S"]) == {"pk": day["pk"], "sk": day["sk"]}
    assert written_marks(tenant, TABLE, "put_item", {"Item": history}) == set()
    assert written_marks(tenant, TABLE, "put_item", {"Item": index}) == set()
    # Another tenant's event names nothing for this one
    theirs = Accepting()
    AuditWriter(TABLE, theirs).write(event_record(other))  # type: ignore[arg-type]
    assert written_marks(tenant, TABLE, "put_item", {"Item": theirs.calls[-1][1]["Item"]}) == set()


def test_the_audit_writer_asked_to_mark_puts_the_events_mark_before_the_event_and_only_then() -> None:
    client = Accepting()
    AuditWriter(TABLE, client).write(event_record("1"), marks=True)  # type: ignore[arg-type]
    pks = [call[1]["Item"]["pk"]["S"] for call in client.calls]
    day_pk = next(pk for pk in pks if "|AUDIT#2026" in pk)
    mark = client.calls[pks.index(day_pk) - 1][1]["Item"]
    assert mark["pk"]["S"] in keys.move_mark_partitions("1")
    assert mark["sk"] == client.calls[pks.index(day_pk)][1]["Item"]["sk"]
    # The event's mark only (the history twin and the day index have none), put again after the event
    # with another token: a mover's catch-up that took the first back before the event landed finds it.
    marks = [call[1]["Item"] for call in client.calls if call[1]["Item"]["pk"]["S"] in keys.move_mark_partitions("1")]
    assert [pks.index(day_pk) - 1, pks.index(day_pk) + 1] == [i for i, pk in enumerate(pks) if pk == mark["pk"]["S"]]
    assert [(m["pk"], m["sk"]) for m in marks] == [(mark["pk"], mark["sk"])] * 2
    assert marks[0][MARK_WRITTEN] != marks[1][MARK_WRITTEN]
    unasked = Accepting()
    AuditWriter(TABLE, unasked).write(event_record("1"))  # type: ignore[arg-type]
    assert not [c for c in unasked.calls if c[1]["Item"]["pk"]["S"] in keys.move_mark_partitions("1")]


class CheckedAfter(Accepting):
    """Accepts every write; the tenant record reads as ``phase``."""

    def __init__(self, phase: str) -> None:
        super().__init__()
        self.phase = phase

    def get_item(self, **kwargs: Any) -> Any:
        self.calls.append(("get_item", kwargs))
        return {"Item": {"move_phase": {"S": self.phase}, "move_started_at": {"N": "100"}}}

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.calls.append(("transact_write_items", kwargs))
        return {}

    def batch_write_item(self, **kwargs: Any) -> Any:
        self.calls.append(("batch_write_item", kwargs))
        return {}


@pytest.mark.parametrize(("phase", "acknowledged"), [("COPYING", True), ("SWITCHING", False)])
def test_a_write_with_no_room_for_the_fence_is_marked_made_and_then_checked(phase: str, acknowledged: bool) -> None:
    """100 actions leave no room for the fence's check in the transaction: the
    write is marked, made, and acknowledged only if the record (read
    consistently after it returned) still says COPYING for the same move;
    otherwise it may have landed after the switch read it: 503, maybe applied."""
    from support_tickets.data.table import MoveFence

    client = CheckedAfter(phase)
    table = TenantTable("1", TABLE, OwnClient(client), marks_writes=True, fence=MoveFence(TABLE, 100))  # type: ignore[arg-type]
    updates = [{"Update": {"TableName": TABLE, "Key": key("1", f"01J{n:023d}")}} for n in range(100)]
    if acknowledged:
        table.call("transact_write_items", TransactItems=updates)
    else:
        with pytest.raises(Unavailable):
            table.call("transact_write_items", TransactItems=updates)
    names = [name for name, _ in client.calls]
    # Marked (4 batches of 25), made, marked again with new tokens, then the record read.
    assert names == ["batch_write_item"] * 4 + ["transact_write_items"] + ["batch_write_item"] * 4 + ["get_item"]
    written = client.calls[4][1]["TransactItems"]
    assert written == updates  # the write itself, unchanged
    check = client.calls[9][1]
    assert check["ConsistentRead"] is True
    assert check["Key"] == keys.tenant_config_key("1")
