"""POST /tickets/status through BatchUpdateStatusFunction's handler, over moto:
one TransactWriteItems, all or nothing."""

from __future__ import annotations

import pytest

from tests.conftest import SHARED_AWS
from tests.functional.api_harness import Api, User, assert_error, aws_fails, client_error
from tests.functional.conftest import TENANT_PAIRS, Snapshot

pytestmark = SHARED_AWS  # tenants of their own; tests with fixed ones are FRESH_AWS

MISSING = ["01JD3ZZZZZZZZZZZZZZZZZZZZZ", "01JD3YYYYYYYYYYYYYYYYYYYYY"]


def new_tickets(api: Api, user: User, count: int) -> list[str]:
    return [api.new_ticket(user, title=f"t{n}")["ticket_id"] for n in range(count)]


def test_changes_every_ticket_and_answers_the_ids(api: Api, user: User) -> None:
    # Given three OPEN tickets
    ids = new_tickets(api, user, 3)
    # When they are closed in one request
    response = api.batch(user, ids, "CLOSED")
    # Then all are CLOSED, each one version further, and the lists follow
    assert response.status == 200
    assert response.body == {"updated": ids, "status": "CLOSED"}
    for ticket_id in ids:
        ticket = api.summary(user, ticket_id).body
        assert (ticket["status"], ticket["version"]) == ("CLOSED", 2)
    assert api.list_tickets(user).body["items"] == []
    assert {item["ticket_id"] for item in api.list_tickets(user, status="CLOSED").body["items"]} == set(ids)


def test_one_hundred_tickets_in_one_request(api: Api, user: User) -> None:
    ids = new_tickets(api, user, 100)
    assert api.batch(user, ids, "IN_PROGRESS").body == {"updated": ids, "status": "IN_PROGRESS"}
    assert len(api.list_tickets(user, status="IN_PROGRESS", limit="100").body["items"]) == 100


def test_missing_tickets_fail_the_whole_batch_with_their_ids(api: Api, user: User, snapshot: Snapshot) -> None:
    # Given three tickets
    ids = new_tickets(api, user, 3)
    before = snapshot()
    # When two ids that don't exist are mixed in
    response = api.batch(user, [ids[0], MISSING[0], ids[1], MISSING[1], ids[2]], "CLOSED")
    # Then it is a 404 naming exactly those, and no ticket changed
    error = assert_error(response, 404, "TICKET_NOT_FOUND")
    assert error["details"] == {"missing_ticket_ids": MISSING}
    assert snapshot() == before


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_another_tenants_ids_count_as_missing_and_nothing_changes(
    api: Api, snapshot: Snapshot, owner: str, other: str
) -> None:
    # Given a ticket of each tenant
    theirs = api.new_ticket(User(owner))["ticket_id"]
    mine = api.new_ticket(User(other))["ticket_id"]
    before = snapshot()
    # When `other` tries to close both
    response = api.batch(User(other), [mine, theirs], "CLOSED")
    # Then the foreign id is reported missing, and neither ticket changed
    error = assert_error(response, 404, "TICKET_NOT_FOUND")
    assert error["details"] == {"missing_ticket_ids": [theirs]}
    assert snapshot() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"ticket_ids": ["a", "b", "a"], "status": "CLOSED"}, "ticket_ids", id="duplicates"),
        pytest.param({"ticket_ids": [f"t{n}" for n in range(101)], "status": "CLOSED"}, "ticket_ids", id="101-ids"),
        pytest.param({"ticket_ids": [], "status": "CLOSED"}, "ticket_ids", id="no-ids"),
        pytest.param({"status": "CLOSED"}, "ticket_ids", id="ids-missing"),
        pytest.param({"ticket_ids": ["a"]}, "status", id="status-missing"),
        pytest.param({"ticket_ids": ["a"], "status": "DONE"}, "status", id="bad-status"),
        pytest.param({"ticket_ids": ["a b"], "status": "CLOSED"}, "ticket_ids.0", id="bad-id"),
        pytest.param({"ticket_ids": "a", "status": "CLOSED"}, "ticket_ids", id="ids-not-a-list"),
        pytest.param({"ticket_ids": ["a"], "status": "CLOSED", "force": True}, "force", id="unknown-field"),
    ],
)
def test_a_bad_body_is_400_and_changes_nothing(
    api: Api, user: User, snapshot: Snapshot, body: dict[str, object], field: str
) -> None:
    new_tickets(api, user, 1)
    before = snapshot()
    error = assert_error(api.call("batch", user, body=body), 400, "VALIDATION_ERROR")
    assert field in {detail["field"] for detail in error["details"]}
    assert snapshot() == before


def test_duplicates_of_real_tickets_are_400_not_a_partial_write(api: Api, user: User, snapshot: Snapshot) -> None:
    ids = new_tickets(api, user, 2)
    before = snapshot()
    assert_error(api.batch(user, [*ids, ids[0]], "CLOSED"), 400, "VALIDATION_ERROR")
    assert snapshot() == before


def test_a_concurrent_change_that_won_is_409_and_nothing_changes(api: Api, user: User, snapshot: Snapshot) -> None:
    # Given another transaction touching one of the tickets at the same moment
    ids = new_tickets(api, user, 2)
    before = snapshot()
    reasons = {"CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}]}
    # When the batch runs, DynamoDB cancels it
    with aws_fails("dynamodb", client_error("TransactionCanceledException", **reasons)) as attempted:
        response = api.batch(user, ids, "CLOSED")
    # Then it is a 409, from a single TransactWriteItems, and nothing changed
    assert_error(response, 409, "CONFLICT")
    assert attempted == ["TransactWriteItems"]
    assert snapshot() == before


@pytest.mark.parametrize("reason", ["ThrottlingError", "ProvisionedThroughputExceeded"])
def test_a_transaction_cancelled_by_throttling_is_429(api: Api, user: User, snapshot: Snapshot, reason: str) -> None:
    ids = new_tickets(api, user, 2)
    before = snapshot()
    reasons = {"CancellationReasons": [{"Code": reason}, {"Code": "None"}]}
    with aws_fails("dynamodb", client_error("TransactionCanceledException", **reasons)):
        response = api.batch(user, ids, "CLOSED")
    assert_error(response, 429, "THROTTLED")
    assert response.header("Retry-After") == "1"
    assert snapshot() == before
