"""POST /tickets through CreateTicketFunction's handler, over moto."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest

from support_tickets.core import keys
from support_tickets.data.ticket_repository import TicketRepository
from tests.conftest import FRESH_AWS, SHARED_AWS
from tests.functional.api_harness import Api, ApiResponse, User, assert_error
from tests.functional.conftest import TENANT_PAIRS, Snapshot, ticket_items

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = SHARED_AWS  # tenants of their own; tests with fixed ones are FRESH_AWS

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_create_answers_201_with_the_ticket_and_its_location(api: Api, user: User) -> None:
    # Given a tenant user
    # When they file a ticket
    response = api.create(user, {"title": "Printer on fire", "description": "Third floor", "resolver": "johnd"})
    # Then it is created, OPEN, version 1, by them, and Location points at it
    assert response.status == 201
    ticket = response.body
    assert set(ticket) == {
        "ticket_id",
        "title",
        "description",
        "status",
        "resolver",
        "created_by",
        "created_at",
        "updated_at",
        "version",
    }
    assert re.fullmatch(keys.TICKET_ID_PATTERN, ticket["ticket_id"])
    assert (ticket["title"], ticket["description"], ticket["resolver"]) == ("Printer on fire", "Third floor", "johnd")
    assert (ticket["status"], ticket["version"], ticket["created_by"]) == ("OPEN", 1, "alice")
    assert ISO_MS.match(ticket["created_at"])
    assert ticket["updated_at"] == ticket["created_at"]
    assert response.header("Location") == f"/tickets/{ticket['ticket_id']}"
    assert response.header("Content-Type") == "application/json"
    assert api.summary(user, ticket["ticket_id"]).body == ticket


def test_create_with_only_a_title_is_unassigned_with_empty_description(api: Api, user: User) -> None:
    ticket = api.create(user, {"title": "t"}).body
    assert (ticket["resolver"], ticket["description"]) == (None, "")


def test_ticket_ids_are_time_ordered(api: Api, user: User) -> None:
    ids = [api.new_ticket(user)["ticket_id"] for _ in range(5)]
    assert ids == sorted(ids)


@pytest.mark.parametrize(
    ("raw_body", "code", "field"),
    [
        pytest.param('{"title": ', "INVALID_JSON", None, id="broken-json"),
        pytest.param("{'title': 'x'}", "INVALID_JSON", None, id="not-json"),
        pytest.param("{}", "VALIDATION_ERROR", "title", id="missing-title"),
        pytest.param('{"title": ""}', "VALIDATION_ERROR", "title", id="empty-title"),
        pytest.param(json.dumps({"title": "x" * 201}), "VALIDATION_ERROR", "title", id="title-201"),
        pytest.param(json.dumps({"title": "x", "description": "d" * 10_001}), "VALIDATION_ERROR", "description"),
        pytest.param('{"title": "x", "resolver": "john doe"}', "VALIDATION_ERROR", "resolver", id="bad-resolver"),
        pytest.param('{"title": "x", "status": "CLOSED"}', "VALIDATION_ERROR", "status", id="unknown-field"),
        pytest.param('{"title": 5}', "VALIDATION_ERROR", "title", id="title-not-string"),
        pytest.param("[]", "VALIDATION_ERROR", "body", id="array"),
        pytest.param("null", "VALIDATION_ERROR", "body", id="null"),
    ],
)
def test_a_bad_body_is_400_and_writes_nothing(
    api: Api, user: User, snapshot: Snapshot, *, raw_body: str, code: str, field: str | None
) -> None:
    # Given an empty table
    before = snapshot()
    # When the body is not a valid create request
    response = api.call("create", user, raw_body=raw_body)
    # Then it is a 400 with the failing field, and nothing was written
    error = assert_error(response, 400, code)
    if field is not None:
        assert field in {detail["field"] for detail in error["details"]}
    assert snapshot() == before


@FRESH_AWS
def test_a_missing_body_is_400(api: Api, user: User, snapshot: Snapshot) -> None:
    error = assert_error(api.call("create", user), 400, "VALIDATION_ERROR")
    assert error["details"] == [{"field": "body", "message": "Field required"}]
    assert snapshot() == []


@FRESH_AWS
def test_a_body_that_is_not_json_content_is_400(api: Api, user: User, snapshot: Snapshot) -> None:
    response = api.call(
        "create", user, raw_body="title=x", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    error = assert_error(response, 400, "VALIDATION_ERROR")
    assert error["details"] == [{"field": "Content-Type", "message": "must be application/json"}]
    assert snapshot() == []


def test_json_with_a_charset_is_fine(api: Api, user: User) -> None:
    response = api.call(
        "create", user, body={"title": "t"}, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert response.status == 201


@FRESH_AWS
def test_body_size_limit_is_64_kib(api: Api, user: User, snapshot: Snapshot) -> None:
    # Given bodies of exactly 64 KiB and one byte more (neither a valid ticket)
    padding = '{"title": "t", "description": "%s"}'
    at_limit = padding % ("d" * (64 * 1024 - len(padding % "")))
    assert len(at_limit.encode()) == 64 * 1024
    # Then 64 KiB gets through to validation, 64 KiB + 1 is refused before it
    assert_error(api.call("create", user, raw_body=at_limit), 400, "VALIDATION_ERROR")
    assert_error(api.call("create", user, raw_body=at_limit + " "), 413, "PAYLOAD_TOO_LARGE")
    assert snapshot() == []


# ---------------------------------------------------------------- idempotency
def create_with_key(api: Api, user: User, key: str, title: str = "Printer on fire") -> ApiResponse:
    return api.create(user, {"title": title}, headers={"Idempotency-Key": key})


@FRESH_AWS
def test_same_key_and_body_give_the_same_ticket_and_one_write(api: Api, user: User, snapshot: Snapshot) -> None:
    # Given a ticket created with an Idempotency-Key
    first = create_with_key(api, user, "key-1")
    assert first.status == 201
    # When the client retries with the same key and body
    second = create_with_key(api, user, "key-1")
    # Then it gets the same ticket and Location, and there is exactly one ticket
    assert second.status == 201
    assert second.body == first.body
    assert second.header("Location") == first.header("Location")
    items = snapshot()
    assert [item["ticket_id"]["S"] for item in ticket_items(items)] == [first.body["ticket_id"]]
    # And the idempotency record lives under the caller's tenant prefix
    (record,) = [item for item in items if item["sk"]["S"] != "SUMMARY"]
    assert record["pk"]["S"] == keys.idempotency_pk(user.tenant_id, f"{user.username}\x1fkey-1")
    assert record["pk"]["S"].startswith(f"TENANT#{user.tenant_id}|IDEMPOTENCY#")
    assert int(record["expiration"]["N"]) > 0


@FRESH_AWS
def test_the_idempotency_record_keeps_the_tickets_id_and_none_of_its_text(
    api: Api, user: User, snapshot: Snapshot, dynamodb: DynamoDBClient, table_name: str
) -> None:
    # Given a ticket created with a key, then deleted by an admin
    ticket = api.create(
        user, {"title": "Salary of Bob", "description": "Bob earns 1,000,000"}, headers={"Idempotency-Key": "key-1"}
    ).body
    assert api.call("delete", user.as_admin(), ticket_id=ticket["ticket_id"]).status == 204
    # Then the record that outlives it for a day names the ticket by its id only
    (record,) = snapshot()
    assert json.loads(record["data"]["S"]) == {"ticket_id": ticket["ticket_id"]}
    text = json.dumps(record)
    for words in ("Salary", "Bob", "1,000,000", user.username):
        assert words not in text
    # And a record written before, with the whole ticket in it, still replays as a read
    again = create_with_key(api, user, "key-2")
    (old,) = [item for item in snapshot() if item["sk"]["S"] != "SUMMARY" and item["pk"] != record["pk"]]
    whole = json.dumps(again.body)
    dynamodb.update_item(
        TableName=table_name,
        Key={"pk": old["pk"], "sk": old["sk"]},
        UpdateExpression="SET #data = :whole",
        ExpressionAttributeNames={"#data": "data"},
        ExpressionAttributeValues={":whole": {"S": whole}},
    )
    assert create_with_key(api, user, "key-2").body == again.body


def test_another_user_of_the_tenant_with_the_same_key_gets_their_own_ticket(api: Api, user: User) -> None:
    # Given alice created a ticket with a key
    first = create_with_key(api, user, "shared-key")
    # When bob, of the same tenant, sends the same key and body
    bob = User(user.tenant_id, "bob")
    second = create_with_key(api, bob, "shared-key")
    # Then bob gets a ticket of his own, never alice's
    assert second.status == 201
    assert second.body["ticket_id"] != first.body["ticket_id"]
    assert second.body["created_by"] == "bob"
    assert first.body["created_by"] == user.username


def test_a_replay_after_the_ticket_was_deleted_is_404(api: Api, user: User, admin: User) -> None:
    # Given a ticket created with a key, then deleted by an admin
    first = create_with_key(api, user, "key-1")
    assert api.call("delete", admin, ticket_id=first.body["ticket_id"]).status == 204
    # When the client replays the request
    replay = create_with_key(api, user, "key-1")
    # Then it is told what a read would say, not the stored copy of a deleted ticket
    assert_error(replay, 404, "TICKET_NOT_FOUND")


def test_a_replay_answers_the_tickets_current_state(api: Api, user: User) -> None:
    first = create_with_key(api, user, "key-1")
    ticket_id = first.body["ticket_id"]
    assert api.call("update", user, ticket_id=ticket_id, body={"status": "CLOSED"}).status == 200
    replay = create_with_key(api, user, "key-1")
    assert replay.status == 201
    assert replay.body["ticket_id"] == ticket_id
    assert (replay.body["status"], replay.body["version"]) == ("CLOSED", 2)


def test_same_key_with_another_body_is_409_and_writes_nothing(api: Api, user: User, snapshot: Snapshot) -> None:
    create_with_key(api, user, "key-1", title="first")
    before = snapshot()
    response = create_with_key(api, user, "key-1", title="second")
    assert_error(response, 409, "CONFLICT")
    assert snapshot() == before


@FRESH_AWS
def test_same_key_while_the_first_request_is_in_progress_is_409(
    api: Api, user: User, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a retry that arrives while the first request is still writing
    retries: list[ApiResponse] = []
    create = TicketRepository.create_ticket

    def create_while_retried(self: TicketRepository, *args: object, **kwargs: object) -> object:
        if not retries:
            retries.append(create_with_key(api, user, "key-1"))
        return create(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(TicketRepository, "create_ticket", create_while_retried)
    # When the first request completes
    first = create_with_key(api, user, "key-1")
    # Then the retry was told 409 and only the first request wrote a ticket
    assert first.status == 201
    assert_error(retries[0], 409, "CONFLICT")
    assert [item["ticket_id"]["S"] for item in ticket_items(snapshot())] == [first.body["ticket_id"]]


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_idempotency_keys_never_cross_tenants(api: Api, owner: str, other: str) -> None:
    # Given two tenants that happen to use the same key and body
    first = create_with_key(api, User(owner), "shared-key")
    second = create_with_key(api, User(other), "shared-key")
    # Then each gets its own ticket, visible only to itself
    assert first.status == second.status == 201
    assert first.body["ticket_id"] != second.body["ticket_id"]
    assert api.summary(User(other), first.body["ticket_id"]).status == 404
    assert api.summary(User(owner), second.body["ticket_id"]).status == 404


@FRESH_AWS
@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "naïve"])
def test_a_malformed_idempotency_key_is_400(api: Api, user: User, snapshot: Snapshot, key: str) -> None:
    error = assert_error(create_with_key(api, user, key), 400, "VALIDATION_ERROR")
    assert error["details"][0]["field"] == "Idempotency-Key"
    assert snapshot() == []
