"""POST /tickets/{id}/comments through AddCommentFunction's handler, over moto."""

from __future__ import annotations

import pytest

from tests.conftest import FRESH_AWS, SHARED_AWS
from tests.functional.api_harness import Api, User, assert_error, aws_fails, client_error
from tests.functional.conftest import TENANT_PAIRS, Snapshot

pytestmark = SHARED_AWS  # tenants of their own; tests with fixed ones are FRESH_AWS

MISSING = "01JD3ZZZZZZZZZZZZZZZZZZZZZ"


def test_comment_answers_201_with_the_comment(api: Api, user: User) -> None:
    # Given a ticket
    ticket = api.new_ticket(user)
    # When bob comments on it
    response = api.comment(User(user.tenant_id, "bob"), ticket["ticket_id"], {"body": "Have you tried water?"})
    # Then the comment is created, authored by bob, and shows on the ticket
    assert response.status == 201
    comment = response.body
    assert set(comment) == {"comment_id", "author", "body", "created_at"}
    assert (comment["author"], comment["body"]) == ("bob", "Have you tried water?")
    assert api.get(user, ticket["ticket_id"]).body["comments"] == [comment]


def test_a_10000_character_comment_is_fine(api: Api, user: User) -> None:
    ticket = api.new_ticket(user)
    assert api.comment(user, ticket["ticket_id"], {"body": "x" * 10_000}).status == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body"),
        ({"body": ""}, "body"),
        ({"body": "x" * 10_001}, "body"),
        ({"body": "x", "author": "eve"}, "author"),
    ],
)
def test_a_bad_body_is_400_and_writes_nothing(
    api: Api, user: User, snapshot: Snapshot, body: dict[str, str], field: str
) -> None:
    ticket = api.new_ticket(user)
    before = snapshot()
    error = assert_error(api.comment(user, ticket["ticket_id"], body), 400, "VALIDATION_ERROR")
    assert field in {detail["field"] for detail in error["details"]}
    assert snapshot() == before


def test_broken_json_is_400_invalid_json(api: Api, user: User, snapshot: Snapshot) -> None:
    ticket = api.new_ticket(user)
    before = snapshot()
    assert_error(api.call("comment", user, ticket_id=ticket["ticket_id"], raw_body='{"body": "x"'), 400, "INVALID_JSON")
    assert snapshot() == before


@FRESH_AWS
def test_a_comment_on_a_missing_ticket_is_404_and_writes_nothing(api: Api, user: User, snapshot: Snapshot) -> None:
    assert_error(api.comment(user, MISSING, {"body": "hello?"}), 404, "TICKET_NOT_FOUND")
    assert snapshot() == []


@FRESH_AWS
def test_a_comment_on_a_deleted_ticket_is_404(api: Api, user: User, admin: User, snapshot: Snapshot) -> None:
    ticket = api.new_ticket(user)
    assert api.delete(admin, ticket["ticket_id"]).status == 204
    assert_error(api.comment(user, ticket["ticket_id"], {"body": "too late"}), 404, "TICKET_NOT_FOUND")
    assert snapshot() == []


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_a_comment_on_another_tenants_ticket_is_404_and_writes_nothing(
    api: Api, snapshot: Snapshot, owner: str, other: str
) -> None:
    ticket = api.new_ticket(User(owner))
    before = snapshot()
    response = api.comment(User(other, "mallory"), ticket["ticket_id"], {"body": "hello"})
    assert_error(response, 404, "TICKET_NOT_FOUND")
    assert response.body == api.comment(User(other, "mallory"), MISSING, {"body": "hello"}).body
    assert snapshot() == before


def test_a_transaction_conflict_is_409_and_writes_nothing(api: Api, user: User, snapshot: Snapshot) -> None:
    ticket = api.new_ticket(user)
    before = snapshot()
    reasons = {"CancellationReasons": [{"Code": "TransactionConflict"}, {"Code": "None"}]}
    with aws_fails("dynamodb", client_error("TransactionCanceledException", **reasons)):
        response = api.comment(user, ticket["ticket_id"], {"body": "x"})
    assert_error(response, 409, "CONFLICT")
    assert snapshot() == before
