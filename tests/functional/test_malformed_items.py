"""A malformed ticket summary in the caller's own partition (an attribute missing
or of the wrong type: written by an operator or a bug) is answered exactly as a
missing ticket, on every route that names a ticket, never with a 500, and no
write touches it; the delete route removes it (an admin's way to clear it). A
malformed comment is left out of its ticket's comments. Both are reported as
``MalformedItem``. Planted with the operator's client straight into moto."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest

from ops.routes import by_name
from support_tickets.core import keys
from tests.conftest import SHARED_AWS, all_items, random_tenant_id
from tests.functional.api_harness import Api, User, assert_error, sample_request
from tests.functional.conftest import TENANT_PAIRS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = SHARED_AWS

MISSING = "01JD3ZZZZZZZZZZZZZZZZZZZZZ"
# Each is one way a summary can be unreadable; the update expression removes or retypes one attribute.
MALFORMED: dict[str, tuple[str, dict[str, Any]]] = {
    "no-title": ("REMOVE title", {}),
    "no-version": ("REMOVE version", {}),
    "version-as-text": ("SET version = :v", {":v": {"S": "1"}}),
    "created-at-as-number": ("SET created_at = :v", {":v": {"N": "1"}}),
    "description-as-list": ("SET description = :v", {":v": {"L": [{"S": "x"}]}}),
    "no-tenant-status": ("REMOVE tenant_status", {}),
}
TICKET_ROUTES = sorted(name for name, route in by_name().items() if route.names_ticket)


def malformed_ticket(api: Api, dynamodb: DynamoDBClient, table_name: str, user: User, how: str) -> str:
    ticket_id: str = api.new_ticket(user, title="mine")["ticket_id"]
    assert api.comment(user, ticket_id, {"body": "first"}).status == 201
    update, values = MALFORMED[how]
    key = keys.ticket_key(user.tenant_id, ticket_id)
    if values:
        dynamodb.update_item(TableName=table_name, Key=key, UpdateExpression=update, ExpressionAttributeValues=values)
    else:
        dynamodb.update_item(TableName=table_name, Key=key, UpdateExpression=update)
    return ticket_id


@pytest.mark.parametrize("how", MALFORMED)
@pytest.mark.parametrize("route", TICKET_ROUTES)
def test_a_malformed_summary_is_answered_as_a_missing_ticket(
    api: Api, dynamodb: DynamoDBClient, table_name: str, route: str, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a ticket of the caller's own whose summary an operator broke
    user = User(random_tenant_id(), "alice")
    ticket_id = malformed_ticket(api, dynamodb, table_name, user, how)
    missing = sample_request(api, route, user, MISSING)
    before = all_items(dynamodb, table_name)
    # When the route is asked about it
    with caplog.at_level(logging.WARNING):
        response = sample_request(api, route, user, ticket_id)
    # Then it answers what it answers for a ticket that does not exist, and changes nothing
    assert response.status < 500, response.body
    if by_name()[route].method == "DELETE":
        assert response.status == 204
        assert not any(
            item["pk"]["S"] == keys.ticket_pk(user.tenant_id, ticket_id) for item in all_items(dynamodb, table_name)
        )
        return
    assert (response.status, response.body and response.error_code) == (
        missing.status,
        missing.body and missing.error_code,
    )
    assert all_items(dynamodb, table_name) == before
    if response.status == 404:
        assert_error(response, 404, "TICKET_NOT_FOUND")
        assert "MalformedItem" in caplog.text


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_another_tenants_malformed_summary_is_not_found_and_not_reported(
    api: Api, dynamodb: DynamoDBClient, table_name: str, owner: str, other: str, caplog: pytest.LogCaptureFixture
) -> None:
    owner_user, other_user = User(f"{owner}-{random_tenant_id()}"[:63]), User(f"{other}-{random_tenant_id()}"[:63])
    ticket_id = malformed_ticket(api, dynamodb, table_name, owner_user, "no-title")
    with caplog.at_level(logging.WARNING):
        assert_error(api.summary(other_user, ticket_id), 404, "TICKET_NOT_FOUND")
    assert "MalformedItem" not in caplog.text


def test_a_malformed_comment_is_left_out_and_the_rest_is_served(
    api: Api, dynamodb: DynamoDBClient, table_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    user = User(random_tenant_id(), "alice")
    ticket_id: str = api.new_ticket(user)["ticket_id"]
    for body in ("one", "two", "three"):
        assert api.comment(user, ticket_id, {"body": body}).status == 201
    comments: list[dict[str, Any]] = api.get(user, ticket_id).body["comments"]
    broken = comments[1]
    dynamodb.update_item(
        TableName=table_name,
        Key={
            "pk": {"S": keys.ticket_pk(user.tenant_id, ticket_id)},
            "sk": {"S": keys.comment_sk(broken["created_at"], broken["comment_id"])},
        },
        UpdateExpression="SET body = :v",
        ExpressionAttributeValues={":v": {"N": "2"}},
    )
    with caplog.at_level(logging.WARNING):
        whole = api.get(user, ticket_id)
        first = api.get(user, ticket_id, limit="2")
        rest = api.get(user, ticket_id, cursor=first.body["next_cursor"])
    assert [comment["body"] for comment in whole.body["comments"]] == ["one", "three"]
    assert [comment["body"] for comment in first.body["comments"] + rest.body["comments"]] == ["one", "three"]
    assert "MalformedItem" in caplog.text
