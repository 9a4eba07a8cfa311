"""PATCH /tickets/{id} through UpdateTicketFunction's handler, over moto."""

from __future__ import annotations

import pytest

from tests.conftest import FRESH_AWS, SHARED_AWS
from tests.functional.api_harness import Api, User, assert_error, aws_fails, client_error
from tests.functional.conftest import TENANT_PAIRS, Snapshot

pytestmark = SHARED_AWS  # tenants of their own; tests with fixed ones are FRESH_AWS


def listed(api: Api, user: User, **query: str) -> set[str]:
    return {item["ticket_id"] for item in api.list_tickets(user, **query).body["items"]}


def test_update_changes_only_the_given_fields_and_bumps_the_version(api: Api, user: User) -> None:
    # Given a ticket
    ticket = api.new_ticket(user, description="Third floor", resolver="johnd")
    # When its title changes
    response = api.update(user, ticket["ticket_id"], {"title": "Printer still on fire"})
    # Then only the title (and version, updated_at) changed
    assert response.status == 200
    updated = response.body
    assert updated["title"] == "Printer still on fire"
    assert updated["version"] == 2
    assert updated["updated_at"] >= ticket["updated_at"]
    unchanged = {"ticket_id", "description", "status", "resolver", "created_by", "created_at"}
    assert {name: updated[name] for name in unchanged} == {name: ticket[name] for name in unchanged}
    assert api.summary(user, ticket["ticket_id"]).body == updated


def test_every_field_can_change_at_once(api: Api, user: User) -> None:
    ticket = api.new_ticket(user)
    body = {"title": "new", "description": "", "status": "CLOSED", "resolver": "mary"}
    updated = api.update(user, ticket["ticket_id"], body).body
    assert {name: updated[name] for name in body} == body


@pytest.mark.parametrize("if_match", ["1", '"1"', 'W/"1"'])
def test_if_match_with_the_current_version_succeeds(api: Api, user: User, if_match: str) -> None:
    ticket = api.new_ticket(user)
    assert api.update(user, ticket["ticket_id"], {"title": "v2"}, if_match=if_match).status == 200


def test_if_match_with_a_stale_version_is_412_and_changes_nothing(api: Api, user: User, snapshot: Snapshot) -> None:
    # Given a ticket someone already changed to version 2
    ticket = api.new_ticket(user)
    api.update(user, ticket["ticket_id"], {"title": "v2"})
    before = snapshot()
    # When a client that read version 1 writes
    response = api.update(user, ticket["ticket_id"], {"title": "lost update"}, if_match="1")
    # Then it is told the current version, and nothing changed
    error = assert_error(response, 412, "VERSION_MISMATCH")
    assert error["details"] == {"current_version": 2}
    assert snapshot() == before


def test_a_malformed_if_match_is_400(api: Api, user: User, snapshot: Snapshot) -> None:
    ticket = api.new_ticket(user)
    before = snapshot()
    error = assert_error(
        api.update(user, ticket["ticket_id"], {"title": "x"}, if_match="latest"), 400, "VALIDATION_ERROR"
    )
    assert error["details"][0]["field"] == "If-Match"
    assert snapshot() == before


def test_status_and_resolver_changes_move_the_ticket_between_lists(api: Api, user: User) -> None:
    # Given an OPEN ticket of johnd
    ticket_id = api.new_ticket(user, resolver="johnd")["ticket_id"]
    # When it moves to IN_PROGRESS for mary
    api.update(user, ticket_id, {"status": "IN_PROGRESS", "resolver": "mary"}, if_match="1")
    # Then GSI1 follows: gone from OPEN and johnd's list, in IN_PROGRESS and mary's
    assert ticket_id not in listed(api, user)
    assert ticket_id not in listed(api, user, resolver="johnd")
    assert ticket_id in listed(api, user, status="IN_PROGRESS", resolver="mary")
    assert ticket_id in listed(api, user, status="IN_PROGRESS")


def test_resolver_null_unassigns_and_the_ticket_stays_listed(api: Api, user: User) -> None:
    ticket_id = api.new_ticket(user, resolver="johnd")["ticket_id"]
    updated = api.update(user, ticket_id, {"resolver": None}).body
    assert updated["resolver"] is None
    assert ticket_id not in listed(api, user, resolver="johnd")
    (row,) = api.list_tickets(user).body["items"]
    assert (row["ticket_id"], row["resolver"]) == (ticket_id, None)
    reassigned = api.update(user, ticket_id, {"resolver": "johnd"}).body
    assert reassigned["resolver"] == "johnd"
    assert reassigned["version"] == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body"),
        ({"title": None}, "title"),
        ({"title": ""}, "title"),
        ({"description": None}, "description"),
        ({"status": None}, "status"),
        ({"status": "REOPENED"}, "status"),
        ({"resolver": "john doe"}, "resolver"),
        ({"version": 7}, "version"),
        ({"title": "x", "created_by": "mallory"}, "created_by"),
    ],
)
def test_a_bad_body_is_400_and_changes_nothing(
    api: Api, user: User, snapshot: Snapshot, body: dict[str, object], field: str
) -> None:
    ticket = api.new_ticket(user)
    before = snapshot()
    error = assert_error(api.update(user, ticket["ticket_id"], body), 400, "VALIDATION_ERROR")
    assert field in {detail["field"] for detail in error["details"]}
    assert snapshot() == before


def test_broken_json_is_400_invalid_json(api: Api, user: User, snapshot: Snapshot) -> None:
    ticket = api.new_ticket(user)
    before = snapshot()
    assert_error(api.call("update", user, ticket_id=ticket["ticket_id"], raw_body="{"), 400, "INVALID_JSON")
    assert snapshot() == before


@FRESH_AWS
def test_a_missing_ticket_is_404_and_nothing_is_created(api: Api, user: User, snapshot: Snapshot) -> None:
    assert_error(api.update(user, "01JD3ZZZZZZZZZZZZZZZZZZZZZ", {"title": "x"}), 404, "TICKET_NOT_FOUND")
    assert_error(api.update(user, "01JD3ZZZZZZZZZZZZZZZZZZZZZ", {"title": "x"}, if_match="1"), 404, "TICKET_NOT_FOUND")
    assert snapshot() == []


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_another_tenants_ticket_is_404_and_unchanged(api: Api, snapshot: Snapshot, owner: str, other: str) -> None:
    ticket = api.new_ticket(User(owner))
    before = snapshot()
    response = api.update(User(other), ticket["ticket_id"], {"title": "mine now", "status": "CLOSED"}, if_match="1")
    missing = api.update(User(other), "01JD3ZZZZZZZZZZZZZZZZZZZZZ", {"title": "mine now", "status": "CLOSED"})
    assert_error(response, 404, "TICKET_NOT_FOUND")
    assert response.body == missing.body
    assert snapshot() == before


def test_a_concurrent_transaction_on_the_ticket_is_409(api: Api, user: User, snapshot: Snapshot) -> None:
    # Given a batch status change in flight on the ticket (DynamoDB answers
    # TransactionConflictException to a plain write while it runs)
    ticket = api.new_ticket(user)
    before = snapshot()
    with aws_fails("dynamodb", client_error("TransactionConflictException")):
        response = api.update(user, ticket["ticket_id"], {"title": "x"})
    assert_error(response, 409, "CONFLICT")
    assert snapshot() == before
