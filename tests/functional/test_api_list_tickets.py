"""GET /tickets through ListTicketsFunction's handler, over moto (GSI1)."""

from __future__ import annotations

import base64
import json

import pytest

from tests.conftest import FRESH_AWS, SHARED_AWS
from tests.functional.api_harness import Api, User, assert_error
from tests.functional.conftest import TENANT_PAIRS

pytestmark = SHARED_AWS  # tenants of their own; tests with fixed ones are FRESH_AWS

LIST_FIELDS = {"ticket_id", "title", "status", "resolver", "created_by", "created_at", "updated_at", "version"}


def ids(items: list[dict[str, object]]) -> set[object]:
    return {item["ticket_id"] for item in items}


def test_default_lists_open_tickets_without_description_unassigned_included(api: Api, user: User) -> None:
    # Given an assigned and an unassigned OPEN ticket, and a CLOSED one
    assigned = api.new_ticket(user, resolver="johnd", description="secret details")
    unassigned = api.new_ticket(user)
    closed = api.new_ticket(user)
    api.update(user, closed["ticket_id"], {"status": "CLOSED"})
    # When the user lists without parameters
    response = api.list_tickets(user)
    # Then they get the OPEN ones, as list rows (no description), and no cursor
    assert response.status == 200
    assert set(response.body) == {"items", "next_cursor"}
    assert response.body["next_cursor"] is None
    assert ids(response.body["items"]) == {assigned["ticket_id"], unassigned["ticket_id"]}
    for item in response.body["items"]:
        assert set(item) == LIST_FIELDS
    rows = {item["ticket_id"]: item for item in response.body["items"]}
    assert rows[unassigned["ticket_id"]]["resolver"] is None
    expected = {name: value for name, value in assigned.items() if name != "description"}
    assert rows[assigned["ticket_id"]] == expected


def test_list_by_status_and_resolver(api: Api, user: User) -> None:
    johns = {api.new_ticket(user, resolver="johnd")["ticket_id"] for _ in range(3)}
    mary = api.new_ticket(user, resolver="mary")["ticket_id"]
    api.new_ticket(user)
    moved = sorted(johns)[0]
    api.update(user, moved, {"status": "IN_PROGRESS"})
    assert ids(api.list_tickets(user, resolver="johnd").body["items"]) == johns - {moved}
    assert ids(api.list_tickets(user, status="OPEN", resolver="mary").body["items"]) == {mary}
    assert ids(api.list_tickets(user, status="IN_PROGRESS").body["items"]) == {moved}
    assert api.list_tickets(user, status="CLOSED").body == {"items": [], "next_cursor": None}


def test_pages_through_every_ticket_exactly_once(api: Api, user: User) -> None:
    # Given 7 OPEN tickets, some unassigned
    created = {api.new_ticket(user, **({"resolver": "johnd"} if n % 2 else {}))["ticket_id"] for n in range(7)}
    # When the user pages with limit=3
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        body = api.list_tickets(user, **query).body
        assert len(body["items"]) <= 3
        seen.extend(item["ticket_id"] for item in body["items"])
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    # Then every ticket came once, in 3 pages (no empty trailing page)
    assert sorted(seen) == sorted(created)
    assert pages == 3


@pytest.mark.parametrize("limit", ["1", "100"])
def test_limit_bounds_are_accepted(api: Api, user: User, limit: str) -> None:
    for _ in range(2):
        api.new_ticket(user)
    body = api.list_tickets(user, limit=limit).body
    assert len(body["items"]) == min(2, int(limit))
    assert (body["next_cursor"] is None) == (limit == "100")


def test_default_page_is_25(api: Api, user: User) -> None:
    for _ in range(26):
        api.new_ticket(user)
    body = api.list_tickets(user).body
    assert len(body["items"]) == 25
    assert body["next_cursor"] is not None


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"status": "DONE"}, "status"),
        ({"status": "open"}, "status"),
        ({"resolver": "john doe"}, "resolver"),
        ({"resolver": ""}, "resolver"),
        ({"tenant_id": "10"}, "tenant_id"),  # unknown query parameters are rejected
        ({"sort": "asc"}, "sort"),
    ],
)
def test_a_bad_query_is_400(api: Api, user: User, query: dict[str, str], field: str) -> None:
    error = assert_error(api.call("list", user, query=query), 400, "VALIDATION_ERROR")
    assert field in {detail["field"] for detail in error["details"]}


def forge(cursor_payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(cursor_payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    ["garbage!", "e30", forge({"q": "x", "k": {}}), forge([1, 2]), "A" * 3000],
)
def test_a_tampered_cursor_is_400_invalid_cursor(api: Api, user: User, cursor: str) -> None:
    api.new_ticket(user)
    assert_error(api.list_tickets(user, cursor=cursor), 400, "INVALID_CURSOR")


def first_cursor(api: Api, user: User, **query: str) -> str:
    for _ in range(2):
        api.new_ticket(user, resolver="johnd")
    cursor = api.list_tickets(user, limit="1", **query).body["next_cursor"]
    assert isinstance(cursor, str)
    return cursor


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_a_cursor_from_another_tenant_is_invalid(api: Api, owner: str, other: str) -> None:
    # Given a cursor of tenant `owner`'s OPEN list, and tickets of `other`
    cursor = first_cursor(api, User(owner))
    api.new_ticket(User(other), resolver="johnd")
    # When `other` presents it for the very same query
    response = api.list_tickets(User(other), limit="1", cursor=cursor)
    # Then it is refused, never a page of anyone's data
    assert_error(response, 400, "INVALID_CURSOR")


@pytest.mark.parametrize(
    ("issued_for", "used_for"),
    [
        ({}, {"status": "CLOSED"}),
        ({}, {"resolver": "johnd"}),
        ({"resolver": "johnd"}, {}),
        ({"resolver": "johnd"}, {"resolver": "mary"}),
    ],
)
def test_a_cursor_from_another_query_is_invalid(
    api: Api, user: User, issued_for: dict[str, str], used_for: dict[str, str]
) -> None:
    cursor = first_cursor(api, user, **issued_for)
    assert api.list_tickets(user, limit="1", cursor=cursor, **issued_for).status == 200
    assert_error(api.list_tickets(user, limit="1", cursor=cursor, **used_for), 400, "INVALID_CURSOR")


@FRESH_AWS
@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_lists_never_show_another_tenants_tickets(api: Api, owner: str, other: str) -> None:
    mine = {api.new_ticket(User(owner), resolver="johnd")["ticket_id"] for _ in range(2)}
    api.new_ticket(User(owner))
    assert api.list_tickets(User(other)).body == {"items": [], "next_cursor": None}
    assert api.list_tickets(User(other), resolver="johnd").body == {"items": [], "next_cursor": None}
    assert ids(api.list_tickets(User(owner), resolver="johnd").body["items"]) == mine
