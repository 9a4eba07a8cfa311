"""GET /tickets/{id}/history and GET /audit through their real handlers over
moto: order, paging, cursors bound to the tenant and the query, the window's
validation, admins only for the trail, tenant 1 against 10."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from support_tickets.core import keys
from support_tickets.data.audit_items import epoch_of, iso_time
from support_tickets.streams.audit_events import audit_record
from support_tickets.streams.audit_writer import audit_writer
from tests.conftest import FRESH_AWS, REGION, SHARED_AWS, random_tenant_id
from tests.functional.api_harness import Api, User, assert_error
from tests.functional.conftest import TENANT_PAIRS, Snapshot
from tests.functional.stream_harness import StreamHarness

pytestmark = SHARED_AWS  # tenants of their own; tests with fixed ones are FRESH_AWS

MISSING = "01JD3ZZZZZZZZZZZZZZZZZZZZZ"
Writer = Callable[..., str]


@pytest.fixture
def audit(aws: None, dynamodb: Any, table_name: str) -> StreamHarness:
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    return StreamHarness.of("AuditTrailFunction", dynamodb, streams, table_name)


@pytest.fixture
def write_event(aws: None) -> Writer:
    """An event as the writer stores it, at a chosen time (a created ticket)."""
    sequence = iter(range(1, 1_000_000))

    def write(tenant_id: str, at: str, ticket_id: str | None = None) -> str:
        n = next(sequence)
        ticket_id = ticket_id or f"T{n:06d}"
        record = audit_record(
            event_name="INSERT",
            event_id=f"{n:032x}",
            sequence_number=str(n),
            recorded_at=epoch_of(at),
            keys_image={"pk": keys.ticket_pk(tenant_id, ticket_id), "sk": keys.SUMMARY_SK},
            old_image=None,
            new_image={
                "tenant_status": keys.tenant_status(tenant_id, "OPEN"),
                "title": f"ticket {n}",
                "resolver": keys.UNASSIGNED_RESOLVER,
                "created_by": "alice",
                "created_at": at,
                "version": 1,
            },
        )
        assert record.event is not None, record.poison
        assert audit_writer().write(record) == 2
        return record.event["event_id"]

    return write


def pages(fetch: Callable[[str | None], Any]) -> list[dict[str, Any]]:
    """Every page, following next_cursor; each response must be a 200."""
    collected: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(200):
        response = fetch(cursor)
        assert response.status == 200, response.body
        collected.append(response.body)
        cursor = response.body["next_cursor"]
        if cursor is None:
            return collected
    raise AssertionError("paging did not end")


def forged(cursor: str, change: Callable[[dict[str, Any]], None]) -> str:
    payload = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    change(payload)
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


# ---------------------------------------------------------------- a ticket's history
def test_history_is_oldest_first_and_pages_through_every_event_once(api: Api, user: User, audit: StreamHarness) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]
    for n in range(6):
        assert api.update(user, ticket_id, {"title": f"title {n}"}).ok
    audit.deliver(audit.new_records())
    whole = api.history(user, ticket_id, limit="100").body
    assert [event["version"] for event in whole["events"]] == list(range(1, 8))
    assert whole["next_cursor"] is None
    paged = pages(lambda cursor: api.history(user, ticket_id, limit="3", **({"cursor": cursor} if cursor else {})))
    assert [len(page["events"]) for page in paged] == [3, 3, 1]
    assert [event for page in paged for event in page["events"]] == whole["events"]


def test_a_ticket_without_history_yet_is_an_empty_page_and_a_missing_one_404(api: Api, user: User) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]  # the stream has not reached the writer
    assert api.history(user, ticket_id).body == {"events": [], "next_cursor": None}
    missing = api.history(user, MISSING)
    assert_error(missing, 404, "TICKET_NOT_FOUND")
    assert api.history(user, "a|b").body == missing.body  # an impossible id too


def test_a_deleted_tickets_history_stays_readable_and_ends_with_its_deletion(
    api: Api, user: User, admin: User, audit: StreamHarness
) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]
    assert api.delete(admin, ticket_id).status == 204
    audit.deliver(audit.new_records())
    assert_error(api.get(user, ticket_id), 404, "TICKET_NOT_FOUND")
    events = api.history(user, ticket_id).body["events"]
    assert [(event["type"], event["actor"]) for event in events] == [("created", user.username), ("deleted", "root")]


@pytest.mark.parametrize(("owner", "intruder"), TENANT_PAIRS)
def test_another_tenants_ticket_history_is_404_like_a_missing_one(
    api: Api, audit: StreamHarness, owner: str, intruder: str
) -> None:
    ticket_id = api.new_ticket(User(owner))["ticket_id"]
    audit.deliver(audit.new_records())
    assert api.history(User(owner), ticket_id).body["events"]
    response = api.history(User(intruder), ticket_id)
    assert_error(response, 404, "TICKET_NOT_FOUND")
    assert response.body == api.history(User(intruder), MISSING).body


@pytest.mark.parametrize(("owner", "intruder"), TENANT_PAIRS)
def test_a_history_cursor_is_bound_to_its_tenant_and_ticket(
    api: Api, audit: StreamHarness, owner: str, intruder: str
) -> None:
    first = api.new_ticket(User(owner))["ticket_id"]
    second = api.new_ticket(User(owner))["ticket_id"]
    mirror = api.new_ticket(User(intruder))["ticket_id"]
    for ticket_id in (first, first, second):
        assert api.update(User(owner), ticket_id, {"title": "again"}).ok
    audit.deliver(audit.new_records())
    cursor = api.history(User(owner), first, limit="1").body["next_cursor"]
    assert cursor
    assert api.history(User(owner), first, cursor=cursor).status == 200
    # another ticket, another tenant (even with the very same ticket id), a tampered key
    assert_error(api.history(User(owner), second, cursor=cursor), 400, "INVALID_CURSOR")
    assert_error(api.history(User(intruder), first, cursor=cursor), 400, "INVALID_CURSOR")
    assert_error(api.history(User(intruder), mirror, cursor=cursor), 400, "INVALID_CURSOR")
    foreign_key = forged(cursor, lambda p: p["k"].update(pk=keys.history_pk(intruder, mirror)))
    assert_error(api.history(User(owner), first, cursor=foreign_key), 400, "INVALID_CURSOR")
    bad_sort_key = forged(cursor, lambda p: p["k"].update(sk="SUMMARY"))
    assert_error(api.history(User(owner), first, cursor=bad_sort_key), 400, "INVALID_CURSOR")
    assert_error(api.history(User(owner), first, cursor="!!"), 400, "INVALID_CURSOR")


# ---------------------------------------------------------------- the tenant's trail
def test_the_trail_is_for_admins_only(api: Api, user: User, admin: User, snapshot: Snapshot) -> None:
    assert_error(api.audit(user), 403, "FORBIDDEN")
    assert api.audit(admin).status == 200


def test_the_trail_is_newest_first_across_days_and_partitions_each_event_once(
    api: Api, admin: User, write_event: Writer
) -> None:
    start = datetime(2026, 11, 18, 22, 0, tzinfo=UTC)
    times = [iso_time((start + timedelta(minutes=37 * n)).timestamp()) for n in range(100)]
    written = {write_event(admin.tenant_id, at) for at in times}
    # outside the window, and another tenant's
    write_event(admin.tenant_id, "2026-11-18T21:59:59.999Z")
    write_event(admin.tenant_id, "2026-11-22T00:00:00.000Z")
    write_event(random_tenant_id(), "2026-11-20T10:00:00.000Z")
    window = {"from": "2026-11-18T22:00:00Z", "to": "2026-11-22"}

    def fetch(cursor: str | None) -> Any:
        return api.audit(admin, limit="7", **window, **({"cursor": cursor} if cursor else {}))

    events = [event for page in pages(fetch) for event in page["events"]]
    assert {event["event_id"] for event in events} == written
    assert len(events) == len(written)
    times = [event["at"] for event in events]
    assert times == sorted(times, reverse=True)
    assert {event["at"][:10] for event in events} == {"2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21"}


@FRESH_AWS
@pytest.mark.parametrize(("owner", "intruder"), TENANT_PAIRS)
def test_a_page_reads_about_limit_events_not_limit_from_every_partition(
    api: Api, write_event: Writer, monkeypatch: pytest.MonkeyPatch, owner: str, intruder: str
) -> None:
    from support_tickets.data.table import TenantTable

    admin = User(owner, "root", admin=True)
    written = [write_event(owner, f"2026-11-20T10:{n // 60:02d}:{n % 60:02d}.000Z") for n in range(160)]
    for n in range(40):
        write_event(intruder, f"2026-11-20T10:00:{n:02d}.500Z")
    per_page: list[list[int]] = []
    real_call = TenantTable.call

    def counting(self: TenantTable, operation: str, **kwargs: Any) -> Any:
        response = real_call(self, operation, **kwargs)
        if operation == "query" and "|AUDIT#" in kwargs["ExpressionAttributeValues"][":pk"]["S"]:
            per_page[-1].append(len(response["Items"]))
        return response

    monkeypatch.setattr(TenantTable, "call", counting)
    window = {"from": "2026-11-20", "to": "2026-11-21"}

    def fetch(cursor: str | None) -> Any:
        per_page.append([])
        return api.audit(admin, limit="10", **window, **({"cursor": cursor} if cursor else {}))

    events = [event for page in pages(fetch) for event in page["events"]]
    # Every event of the owner, newest first, once; none of the intruder's
    assert [event["event_id"] for event in events] == written[::-1]
    # and no page read much more than it returned: not 10 from each of the day's 8 partitions
    assert len(per_page) == 16
    assert all(sum(reads) <= 2 * 10 + keys.AUDIT_SHARDS for reads in per_page), per_page
    assert sum(map(sum, per_page)) <= 2 * len(written)


def test_a_sparse_window_pages_through_empty_days(api: Api, admin: User, write_event: Writer) -> None:
    first = write_event(admin.tenant_id, "2026-10-22T08:00:00.000Z")
    last = write_event(admin.tenant_id, "2026-11-21T08:00:00.000Z")
    window = {"from": "2026-10-22", "to": "2026-11-22"}  # 31 days

    def fetch(cursor: str | None) -> Any:
        return api.audit(admin, **window, **({"cursor": cursor} if cursor else {}))

    every_page = pages(fetch)
    assert len(every_page) > 1  # a request reads a few days of the window, not all 31
    assert [event["event_id"] for page in every_page for event in page["events"]] == [last, first]


def test_the_default_window_is_the_last_day(
    api: Api, user: User, admin: User, audit: StreamHarness, write_event: Writer
) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]
    audit.deliver(audit.new_records())
    old = write_event(admin.tenant_id, iso_time((datetime.now(UTC) - timedelta(days=2)).timestamp()))
    events = api.audit(admin).body["events"]
    assert [event["ticket_id"] for event in events] == [ticket_id]
    assert old not in {event["event_id"] for event in events}


@pytest.mark.parametrize(
    "window",
    [
        {"from": "2026-11-21", "to": "2026-11-21"},  # empty
        {"from": "2026-11-22", "to": "2026-11-21"},  # backwards
        {"from": "2026-10-01", "to": "2026-11-21"},  # more than 31 days
        {"from": "yesterday"},
        {"to": "2026-13-01"},
        {"from": "2026-11-20T10:00:00"},  # no time zone
        {"from": "2026-11-20T10:00:00+02:00", "to": "2026-11-21T10:00:00+02:00"},  # not UTC
        {"from": "x" * 41},
    ],
)
def test_a_bad_window_is_400(api: Api, admin: User, window: dict[str, str]) -> None:
    error = assert_error(api.audit(admin, **window), 400, "VALIDATION_ERROR")
    assert error["details"]


@pytest.mark.parametrize(
    "window",
    [
        {"to": "0001-01-01"},  # from defaults to a day before: before year 1
        {"to": "0001-01-01T00:00:00.001Z"},
        {"to": "0001-01-01T23:59:59.999999Z"},
        {"from": "0001-01-01", "to": "0001-01-01"},
        {"from": "0001-01-01T00:00:00Z", "to": "0001-01-01T00:00:00.000999Z"},  # empty at millisecond precision
        {"from": "9999-12-31T23:59:59.999Z", "to": "9999-12-31T23:59:59.999999Z"},
        {"from": "0001-01-01"},  # to defaults to now
        {"from": "9999-12-31"},
        {"to": "10000-01-01"},
        {"to": "0000-12-31"},
    ],
)
def test_a_window_at_the_ends_of_time_is_400_never_500(api: Api, admin: User, window: dict[str, str]) -> None:
    response = api.audit(admin, **window)
    error = assert_error(response, 400, "VALIDATION_ERROR")
    assert set(response.body) == {"error"}
    assert set(error) == {"code", "message", "details"}
    assert {detail["field"] for detail in error["details"]} <= {"from", "to"}


@pytest.mark.parametrize(
    "window",
    [
        {"to": "0001-01-02"},
        {"from": "0001-01-01", "to": "0001-01-01T00:00:00.001Z"},
        {"from": "0001-01-01", "to": "0001-02-01"},
        {"to": "9999-12-31"},
        {"to": "9999-12-31T23:59:59.999999Z"},
        {"from": "9999-12-01", "to": "9999-12-31T23:59:59.999Z"},
    ],
)
def test_a_window_at_the_ends_of_time_pages_to_its_end(
    api: Api, admin: User, write_event: Writer, window: dict[str, str]
) -> None:
    write_event(admin.tenant_id, "2026-11-20T10:00:00.000Z")  # outside every one of them

    def fetch(cursor: str | None) -> Any:
        return api.audit(admin, limit="1", **window, **({"cursor": cursor} if cursor else {}))

    assert [event for page in pages(fetch) for event in page["events"]] == []


@FRESH_AWS
@pytest.mark.parametrize(("owner", "intruder"), TENANT_PAIRS)
def test_tenants_1_and_10_see_only_their_own_trail_and_cursors(
    api: Api, write_event: Writer, owner: str, intruder: str
) -> None:
    mine = {write_event(owner, f"2026-11-20T10:00:0{n}.000Z") for n in range(3)}
    theirs = write_event(intruder, "2026-11-20T10:00:05.000Z")
    window = {"from": "2026-11-20", "to": "2026-11-21"}
    owner_admin, intruder_admin = User(owner, "root", admin=True), User(intruder, "root", admin=True)
    assert {event["event_id"] for event in api.audit(owner_admin, **window).body["events"]} == mine
    assert [event["event_id"] for event in api.audit(intruder_admin, **window).body["events"]] == [theirs]
    cursor = api.audit(owner_admin, limit="1", **window).body["next_cursor"]
    assert cursor
    assert_error(api.audit(intruder_admin, cursor=cursor, **window), 400, "INVALID_CURSOR")


def test_a_trail_cursor_is_bound_to_its_window_and_checked_value_by_value(
    api: Api, admin: User, write_event: Writer
) -> None:
    for n in range(3):
        write_event(admin.tenant_id, f"2026-11-20T10:00:0{n}.000Z")
    window = {"from": "2026-11-20", "to": "2026-11-21"}
    cursor = api.audit(admin, limit="1", **window).body["next_cursor"]
    assert api.audit(admin, cursor=cursor, **window).status == 200
    assert_error(api.audit(admin, cursor=cursor, **{**window, "to": "2026-11-22"}), 400, "INVALID_CURSOR")
    assert_error(api.audit(admin, cursor=cursor), 400, "INVALID_CURSOR")  # another query
    for change in (
        lambda p: p["k"].update(d="2026-11-25"),  # a day outside the window
        lambda p: p["k"].update({"0": "SUMMARY"}),
        lambda p: p["k"].update({"0": "2026-11-19T10:00:00.000Z#" + "0" * 40 + "#e"}),  # another day's key
        lambda p: p["k"].update(f="2026-09-01T00:00:00.000Z"),  # a window over 31 days
        lambda p: p["k"].pop("7"),
        lambda p: p["k"].update(x="1"),
    ):
        assert_error(api.audit(admin, cursor=forged(cursor, change), **window), 400, "INVALID_CURSOR")


def test_a_cursor_keeps_a_window_that_ends_now(api: Api, admin: User, write_event: Writer) -> None:
    now = datetime.now(UTC)
    written = [write_event(admin.tenant_id, iso_time((now - timedelta(minutes=n)).timestamp())) for n in range(1, 4)]
    first = api.audit(admin, limit="2").body
    rest = api.audit(admin, limit="2", cursor=first["next_cursor"]).body
    assert [event["event_id"] for event in first["events"] + rest["events"]] == written
