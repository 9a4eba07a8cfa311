"""GET /tickets/{id} (GetTicketFunction) and GET /tickets/{id}/summary
(GetTicketSummaryFunction) through their handlers, over moto."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SHARED_AWS
from tests.functional.api_harness import Api, User, assert_error, aws_calls
from tests.functional.conftest import TENANT_PAIRS

pytestmark = SHARED_AWS  # tenants of their own; tests with fixed ones are FRESH_AWS


def ticket_with_comments(api: Api, user: User, count: int) -> tuple[dict[str, Any], list[str]]:
    ticket = api.new_ticket(user, description="Third floor")
    bodies = [f"comment {n}" for n in range(count)]
    for body in bodies:
        assert api.comment(user, ticket["ticket_id"], {"body": body}).status == 201
    return ticket, bodies


def test_get_returns_the_ticket_and_its_comments_oldest_first_in_one_query(api: Api, user: User) -> None:
    # Given a ticket with three comments (and a warm tenant session)
    ticket, bodies = ticket_with_comments(api, user, 3)
    # When the user gets it
    with aws_calls() as calls:
        response = api.get(user, ticket["ticket_id"])
    # Then it comes whole, with its comments oldest first, from one Query
    assert response.status == 200
    assert set(response.body) == {"ticket", "comments", "next_cursor"}
    assert response.body["ticket"] == api.summary(user, ticket["ticket_id"]).body
    assert response.body["ticket"]["description"] == "Third floor"
    assert [comment["body"] for comment in response.body["comments"]] == bodies
    for comment in response.body["comments"]:
        assert set(comment) == {"comment_id", "author", "body", "created_at"}
        assert comment["author"] == "alice"
    assert response.body["next_cursor"] is None
    assert [operation for service, operation, _ in calls if service == "dynamodb"] == ["Query"]


def test_a_ticket_without_comments(api: Api, user: User) -> None:
    ticket = api.new_ticket(user)
    assert api.get(user, ticket["ticket_id"]).body == {"ticket": ticket, "comments": [], "next_cursor": None}


def test_comments_page_with_limit_and_cursor(api: Api, user: User) -> None:
    # Given seven comments
    ticket, bodies = ticket_with_comments(api, user, 7)
    # When they are read three at a time
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        body = api.get(user, ticket["ticket_id"], **query).body
        assert body["ticket"]["ticket_id"] == ticket["ticket_id"]
        assert len(body["comments"]) <= 3
        seen.extend(comment["body"] for comment in body["comments"])
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    # Then every comment came once, in order, in three pages
    assert seen == bodies
    assert pages == 3


def test_a_full_page_of_comments_costs_one_query_and_one_get(api: Api, user: User) -> None:
    ticket, _ = ticket_with_comments(api, user, 4)
    with aws_calls() as calls:
        body = api.get(user, ticket["ticket_id"], limit="2").body
    assert len(body["comments"]) == 2
    assert body["next_cursor"] is not None
    assert [operation for service, operation, _ in calls if service == "dynamodb"] == ["Query", "GetItem"]


def test_a_comment_cursor_is_bound_to_its_ticket(api: Api, user: User) -> None:
    first, _ = ticket_with_comments(api, user, 3)
    second, _ = ticket_with_comments(api, user, 3)
    cursor = api.get(user, first["ticket_id"], limit="1").body["next_cursor"]
    assert_error(api.get(user, second["ticket_id"], limit="1", cursor=cursor), 400, "INVALID_CURSOR")
    assert_error(api.get(user, first["ticket_id"], cursor="not-a-cursor"), 400, "INVALID_CURSOR")


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_a_comment_cursor_from_another_tenant_is_invalid(api: Api, owner: str, other: str) -> None:
    ticket, _ = ticket_with_comments(api, User(owner), 3)
    cursor = api.get(User(owner), ticket["ticket_id"], limit="1").body["next_cursor"]
    assert_error(api.get(User(other), ticket["ticket_id"], limit="1", cursor=cursor), 400, "INVALID_CURSOR")


@pytest.mark.parametrize(
    ("query", "field"), [({"limit": "0"}, "limit"), ({"limit": "101"}, "limit"), ({"x": "1"}, "x")]
)
def test_a_bad_query_is_400(api: Api, user: User, query: dict[str, str], field: str) -> None:
    ticket = api.new_ticket(user)
    error = assert_error(api.get(user, ticket["ticket_id"], **query), 400, "VALIDATION_ERROR")
    assert [detail["field"] for detail in error["details"]] == [field]


def test_summary_returns_the_ticket_only(api: Api, user: User) -> None:
    ticket, _ = ticket_with_comments(api, user, 2)
    response = api.summary(user, ticket["ticket_id"])
    assert response.status == 200
    assert response.body == ticket


def test_summary_rejects_query_parameters(api: Api, user: User) -> None:
    ticket = api.new_ticket(user)
    error = assert_error(
        api.call("summary", user, ticket_id=ticket["ticket_id"], query={"limit": "1"}), 400, "VALIDATION_ERROR"
    )
    assert error["details"] == [{"field": "limit", "message": "unknown query parameter"}]


@pytest.mark.parametrize("route", ["get", "summary"])
@pytest.mark.parametrize("ticket_id", ["01JD3ZZZZZZZZZZZZZZZZZZZZZ", "no such ticket", "a|b", "x" * 65, "TICKET#1"])
def test_a_missing_or_impossible_id_is_404(api: Api, user: User, route: str, ticket_id: str) -> None:
    api.new_ticket(user)
    error = assert_error(api.call(route, user, ticket_id=ticket_id), 404, "TICKET_NOT_FOUND")
    assert "details" not in error


@pytest.mark.parametrize("route", ["get", "summary"])
@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_another_tenants_ticket_is_404_exactly_like_a_missing_one(api: Api, route: str, owner: str, other: str) -> None:
    # Given a ticket of tenant `owner` (with a comment) and a missing id
    ticket, _ = ticket_with_comments(api, User(owner), 1)
    # When tenant `other` asks for it, and for an id that does not exist
    foreign = api.call(route, User(other), ticket_id=ticket["ticket_id"])
    missing = api.call(route, User(other), ticket_id="01JD3ZZZZZZZZZZZZZZZZZZZZZ")
    # Then both answers are the same 404, revealing nothing
    assert_error(foreign, 404, "TICKET_NOT_FOUND")
    assert (foreign.status, foreign.body, foreign.headers) == (missing.status, missing.body, missing.headers)
