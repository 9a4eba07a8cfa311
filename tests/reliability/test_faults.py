"""Faults injected on the wire (``WireFaults`` in this directory's conftest),
through the real handlers over moto: throttling is retried by botocore with
backoff and ends as 429 with nothing written; identity-pool trouble never
falls back to other credentials; expired tenant credentials are renewed once;
a cancelled transaction is a 409 that changed nothing.

tests/functional/test_api_contract.py already shows, per route, the status
each error maps to when the whole call fails (``aws_fails``, above botocore's
retries). These tests add what only a fault *below* the retry layer shows:
how many attempts were made, with which backoff and which credentials, and
that a retried or abandoned write was applied exactly once or not at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from ops.routes import by_name
from tests.conftest import FRESH_AWS, SHARED_AWS, random_tenant_id
from tests.functional.api_harness import Api, ApiResponse, User, assert_error, new_subject, sample_request
from tests.functional.conftest import Snapshot
from tests.reliability.conftest import WireFaults

pytestmark = [
    SHARED_AWS,
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
]  # tenants of their own; fixed ones are FRESH_AWS

THROTTLING = "ProvisionedThroughputExceededException"
MISSING = "01JD3ZZZZZZZZZZZZZZZZZZZZZ"

# route → the DynamoDB operation it makes: reads, writes and transactions
# Each route's DynamoDB call (ops/routes.py). Routes that make one call of it:
# the trail (GET /audit) queries the 8 partitions of each day of its window in
# parallel (its 429 and 503 are in tests/functional/test_api_contract.py).
ROUTES = by_name()
OPERATIONS = {name: route.needs.operation for name, route in ROUTES.items()}
SINGLE_CALL = sorted(name for name, route in ROUTES.items() if not route.needs.scatter)


def without_aggregates(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if not item["pk"]["S"].endswith("|AGGREGATE")]


# ---------------------------------------------------------------- DynamoDB throttling
@pytest.mark.parametrize("route", SINGLE_CALL)
def test_throttling_twice_is_retried_with_backoff_and_applied_once(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults, *, backoff: list[float], route: str
) -> None:
    # Given a ticket (or the route's webhook), and DynamoDB throttling the route's call twice
    ticket_id = new_subject(api, route, user)
    items_before = len(snapshot())
    wire.forget()
    wire.fail("dynamodb", THROTTLING, operations={OPERATIONS[route]}, times=2)
    # When the route runs
    response = sample_request(api, route, user, ticket_id)
    # Then botocore retried it (attempts 1, 2, 3, with exponential backoff) and it succeeded
    assert response.status == ROUTES[route].needs.success, response.body
    assert [sent.attempt for sent in wire.of("dynamodb", OPERATIONS[route])] == [1, 2, 3]
    assert backoff == [1.0, 2.0]
    # And the write it made was applied exactly once
    after = snapshot()
    # A tenant's first webhook also creates its count item.
    expected_items = {"create": 1, "comment": 1, "delete": -1, "webhook_create": 2, "webhook_delete": -1}.get(route, 0)
    assert len(after) == items_before + expected_items
    if route in {"update", "batch"}:
        assert api.summary(user, ticket_id).body["version"] == 2


@pytest.mark.parametrize("route", SINGLE_CALL)
def test_throttling_that_outlasts_the_retries_is_429_and_writes_nothing(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults, *, backoff: list[float], route: str
) -> None:
    ticket_id = new_subject(api, route, user)
    before = snapshot()
    wire.forget()
    wire.fail("dynamodb", THROTTLING, operations={OPERATIONS[route]})
    response = sample_request(api, route, user, ticket_id)
    assert_error(response, 429, "THROTTLED")
    assert response.header("Retry-After") == "1"
    assert [sent.attempt for sent in wire.of("dynamodb", OPERATIONS[route])] == [1, 2, 3]
    assert backoff == [1.0, 2.0]
    assert snapshot() == before


def create_with_key(api: Api, user: User, key: str = "key-1") -> ApiResponse:
    return api.create(user, {"title": "Printer on fire"}, headers={"Idempotency-Key": key})


def test_an_idempotent_create_whose_ticket_write_is_throttled_is_429_and_leaves_no_record(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults, backoff: list[float]
) -> None:
    # Given the idempotency record's PutItem goes through, and the ticket's write is throttled
    # (one TransactWriteItems: the ticket's put and its record's completion)
    api.new_ticket(user)  # warm credentials
    before = snapshot()
    wire.fail("dynamodb", THROTTLING, operations={"TransactWriteItems"}, times=3)
    # Then 429, and the in-progress idempotency record was removed again
    assert_error(create_with_key(api, user), 429, "THROTTLED")
    assert snapshot() == before
    # And the client's retry with the same key creates the ticket once
    retry = create_with_key(api, user)
    assert retry.status == 201, retry.body
    assert create_with_key(api, user).body == retry.body


def test_an_idempotent_create_whose_idempotency_record_is_throttled_is_429(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults, backoff: list[float]
) -> None:
    api.new_ticket(user)
    before = snapshot()
    wire.fail("dynamodb", THROTTLING, operations={"PutItem"})
    response = create_with_key(api, user)
    assert_error(response, 429, "THROTTLED")
    assert response.header("Retry-After") == "1"
    assert snapshot() == before


@FRESH_AWS
def test_a_delete_whose_comments_are_throttled_is_done_and_leaves_the_rest_to_the_system(
    api: Api, user: User, admin: User, snapshot: Snapshot, wire: WireFaults, *, backoff: list[float]
) -> None:
    # Given a ticket with comments, whose comment deletion (BatchWriteItem) is throttled
    keep = api.new_ticket(user, title="keep")["ticket_id"]
    doomed = api.new_ticket(user, title="doomed")["ticket_id"]
    for n in range(3):
        api.comment(user, doomed, {"body": f"c{n}"})
    wire.fail("dynamodb", THROTTLING, operations={"BatchWriteItem"})
    # When an admin deletes it: 204, the transaction that deleted the summary is the delete (the ticket is
    # gone from every view); what is left is the system's (its tombstone reaches the audit-trail function)
    assert api.delete(admin, doomed).status == 204
    assert_error(api.summary(user, doomed), 404, "TICKET_NOT_FOUND")
    left = {item["sk"]["S"] for item in snapshot() if item["pk"]["S"].endswith(f"|TICKET#{doomed}")}
    assert "SUMMARY" not in left
    assert "DELETING" in left
    # And a retry (which the client has no reason to make) finishes it too
    wire.heal()
    assert api.delete(admin, doomed).status == 204
    assert {item["pk"]["S"].rsplit("#", 1)[1] for item in without_aggregates(snapshot())} == {keep}


def test_dynamodb_server_errors_are_retried_then_503_and_nothing_written(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults, backoff: list[float]
) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]
    before = snapshot()
    wire.forget()
    wire.fail("dynamodb", "InternalServerError", status=500, operations={"TransactWriteItems"})
    response = api.batch(user, [ticket_id], "CLOSED")
    assert_error(response, 503, "UNAVAILABLE")
    assert response.header("Retry-After") == "1"
    assert [sent.attempt for sent in wire.of("dynamodb")] == [1, 2, 3]
    assert snapshot() == before


# ---------------------------------------------------------------- the identity pool
def tenant_keys_only(wire: WireFaults) -> None:
    """Every DynamoDB request was signed with credentials the identity pool
    issued for a caller's token, never with the function's own (environment)
    credentials."""
    used = {sent.access_key for sent in wire.of("dynamodb")}
    assert used, "no DynamoDB request was made"
    assert used <= set(wire.issued_keys)
    assert "testing" not in used


@pytest.mark.parametrize("route", sorted(OPERATIONS))
def test_every_dynamodb_request_uses_the_callers_credentials(
    api: Api, user: User, wire: WireFaults, route: str
) -> None:
    ticket_id = new_subject(api, route, user)
    response = sample_request(api, route, user, ticket_id)
    assert response.status == ROUTES[route].needs.success, response.body
    # One exchange of the user's token for both requests (the admin routes' admin is a
    # second user, unless the admin made both: a webhook's routes, new_subject)
    users = 1 if ROUTES[route].takes_webhook else 2 if ROUTES[route].needs.admin else 1
    assert len(wire.of("cognito-identity", "GetCredentialsForIdentity")) == users
    tenant_keys_only(wire)
    if ROUTES[route].needs.encrypts:
        # The secret is encrypted with the caller's credentials too, never the function's.
        used = {sent.access_key for sent in wire.of("kms")}
        assert used
        assert used <= set(wire.issued_keys)


COGNITO_TROUBLE = {
    # The authorizer exchanges the token: whatever fails there, API Gateway answers its
    # AUTHORIZER_FAILURE response (503, Retry-After), a refused token its 401.
    "throttled": ("TooManyRequestsException", 400, [1, 2, 3], 503, "UNAVAILABLE"),
    "server-error": ("InternalErrorException", 500, [1, 2, 3], 503, "UNAVAILABLE"),
    "refused-token": ("NotAuthorizedException", 400, [1], 401, "UNAUTHORIZED"),
    "pool-misconfigured": ("InvalidIdentityPoolConfigurationException", 400, [1], 503, "UNAVAILABLE"),
}
# Throttling on every route; the other failures (same code path, before any route logic) on two.
COGNITO_CASES = [
    pytest.param(route, *COGNITO_TROUBLE["throttled"], id=f"{route}-throttled") for route in sorted(OPERATIONS)
]
COGNITO_CASES += [
    pytest.param(route, *COGNITO_TROUBLE[name], id=f"{route}-{name}")
    for route in ("create", "list")
    for name in ("server-error", "refused-token", "pool-misconfigured")
]


@pytest.mark.parametrize(("route", "code", "http_status", "attempts", "status", "error_code"), COGNITO_CASES)
@pytest.mark.parametrize("operation", ["GetId", "GetCredentialsForIdentity"])
def test_no_credentials_means_no_dynamodb_request_at_all(
    api: Api,
    snapshot: Snapshot,
    wire: WireFaults,
    backoff: list[float],
    *,
    route: str,
    code: str,
    http_status: int,
    attempts: list[int],
    status: int,
    error_code: str,
    operation: str,
) -> None:
    # Given another tenant whose credentials are warm in this container
    other = User(random_tenant_id())
    api.new_ticket(other)
    before = snapshot()
    wire.forget()
    # When the identity pool keeps failing for a new caller
    wire.fail("cognito-identity", code, status=http_status, operations={operation})
    response = sample_request(api, route, User(random_tenant_id()), MISSING)
    # Then the exchange was tried (retried when it is retryable) and the request
    # failed, without a single DynamoDB request: no fallback to the function's
    # credentials, nor to the warm tenant's
    assert [sent.attempt for sent in wire.of("cognito-identity", operation)] == attempts
    assert wire.of("dynamodb") == []
    assert_error(response, status, error_code)
    if status != 401:
        assert response.header("Retry-After") == "1"
    assert snapshot() == before


def test_cognito_throttled_twice_is_retried_and_the_request_succeeds(
    api: Api, user: User, wire: WireFaults, backoff: list[float]
) -> None:
    wire.fail("cognito-identity", "TooManyRequestsException", times=2, operations={"GetCredentialsForIdentity"})
    assert api.create(user, {"title": "t"}).status == 201
    assert [sent.attempt for sent in wire.of("cognito-identity", "GetCredentialsForIdentity")] == [1, 2, 3]
    assert backoff == [1.0, 2.0]
    tenant_keys_only(wire)


def test_a_failed_exchange_is_not_cached(api: Api, user: User, wire: WireFaults) -> None:
    wire.fail("cognito-identity", "InvalidIdentityPoolConfigurationException", times=1)
    assert_error(api.list_tickets(user), 503, "UNAVAILABLE")
    assert api.list_tickets(user).status == 200
    assert len(wire.of("cognito-identity", "GetId")) == 2
    tenant_keys_only(wire)


# ---------------------------------------------------------------- expired credentials
@pytest.mark.parametrize("route", ["summary", "list", "update", "batch", "comment", "create"])
def test_credentials_refused_as_expired_are_503_once_with_nothing_written(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults, route: str
) -> None:
    # Given warm credentials from the authorizer's context (the authorizer hands
    # out none with less than 10 minutes left, so this is a skewed clock at most)
    ticket_id = api.new_ticket(user)["ticket_id"]
    before = snapshot()
    # When DynamoDB says they expired
    wire.forget()
    wire.fail("dynamodb", "ExpiredTokenException", operations={OPERATIONS[route]}, times=1)
    response = sample_request(api, route, user, ticket_id)
    # Then the function, which can't renew them (only the authorizer exchanges
    # tokens), gives up at once: 503 with Retry-After, one DynamoDB attempt, no
    # Cognito call from the function, nothing written
    assert_error(response, 503, "UNAVAILABLE")
    assert response.header("Retry-After") == "1"
    assert len(wire.of("dynamodb", OPERATIONS[route])) == 1
    assert wire.of("dynamodb")[-1].operation == OPERATIONS[route]  # nothing attempted after it
    assert wire.of("cognito-identity") == []
    assert snapshot() == before
    # And the client's retry (credentials DynamoDB accepts again) works, applied once
    assert sample_request(api, route, user, ticket_id).status == ROUTES[route].needs.success
    if route in {"update", "batch"}:
        assert api.summary(user, ticket_id).body["version"] == 2


def test_an_idempotent_create_refused_as_expired_writes_nothing_and_its_retry_creates_once(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults
) -> None:
    api.new_ticket(user)
    items_before = len(snapshot())
    wire.forget()
    wire.fail("dynamodb", "ExpiredTokenException", times=1)
    assert_error(create_with_key(api, user), 503, "UNAVAILABLE")
    assert len(snapshot()) == items_before
    first = create_with_key(api, user)
    again = create_with_key(api, user)
    assert first.status == again.status == 201, first.body
    assert first.body == again.body
    assert len(snapshot()) == items_before + 2  # the ticket and its idempotency record


# ---------------------------------------------------------------- concurrent changes
def test_a_transaction_cancelled_by_a_concurrent_one_is_409_not_retried_nothing_changed(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults
) -> None:
    ids = [api.new_ticket(user)["ticket_id"] for _ in range(3)]
    before = snapshot()
    wire.forget()
    reasons = [{"Code": "None"}, {"Code": "TransactionConflict"}, {"Code": "None"}]
    wire.fail("dynamodb", "TransactionCanceledException", CancellationReasons=reasons)
    response = api.batch(user, ids, "CLOSED")
    assert_error(response, 409, "CONFLICT")
    assert [sent.attempt for sent in wire.of("dynamodb")] == [1]
    assert snapshot() == before


def test_a_write_that_conflicts_with_a_transaction_in_flight_is_409_nothing_changed(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults
) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]
    before = snapshot()
    wire.forget()
    wire.fail("dynamodb", "TransactionConflictException", operations={"UpdateItem"})
    response = api.update(user, ticket_id, {"status": "CLOSED"})
    assert_error(response, 409, "CONFLICT")
    assert snapshot() == before


# ---------------------------------------------------------------- retries of writes whose answer was lost
def test_a_create_whose_answer_was_lost_is_one_ticket_and_201(
    api: Api, user: User, snapshot: Snapshot, wire: WireFaults
) -> None:
    # Given the first PutItem lands but its answer is lost (botocore retries it)
    api.new_ticket(user)  # the credentials and the tenant record are in place
    before = len(snapshot())
    wire.forget()
    wire.lose_answer("dynamodb", operations={"PutItem"})
    # When the client creates a ticket
    response = api.create(user, {"title": "landed twice?"})
    # Then the retry found its own write: 201 and one ticket, not a 500
    assert response.status == 201, response.body
    assert [s.attempt for s in wire.of("dynamodb", "PutItem")] == [1, 2]
    after = snapshot()
    assert len(after) == before + 1
    assert api.summary(user, response.body["ticket_id"]).body == response.body


def test_a_comment_whose_answer_was_lost_is_one_comment_and_201(api: Api, user: User, wire: WireFaults) -> None:
    ticket = api.new_ticket(user)["ticket_id"]
    wire.forget()
    wire.lose_answer("dynamodb", operations={"TransactWriteItems"})
    response = api.comment(user, ticket, {"body": "said once"})
    assert response.status == 201, response.body
    assert len(wire.of("dynamodb", "TransactWriteItems")) == 2
    comments = api.get(user, ticket).body["comments"]
    assert [comment["comment_id"] for comment in comments] == [response.body["comment_id"]]


def test_an_if_match_update_whose_answer_was_lost_is_200_not_412(api: Api, user: User, wire: WireFaults) -> None:
    ticket = api.new_ticket(user)
    wire.lose_answer("dynamodb", operations={"UpdateItem"})
    response = api.update(user, ticket["ticket_id"], {"status": "CLOSED", "title": "fixed"}, if_match="1")
    assert response.status == 200, response.body
    assert (response.body["version"], response.body["status"], response.body["title"]) == (2, "CLOSED", "fixed")
    assert api.summary(user, ticket["ticket_id"]).body["version"] == 2


def test_a_genuinely_stale_if_match_is_still_412(api: Api, user: User) -> None:
    ticket = api.new_ticket(user)["ticket_id"]
    assert api.update(user, ticket, {"title": "first"}, if_match="1").status == 200
    assert_error(api.update(user, ticket, {"title": "first"}, if_match="1"), 412, "VERSION_MISMATCH")


def test_a_batch_status_change_carries_an_idempotency_token(api: Api, user: User, wire: WireFaults) -> None:
    """DynamoDB (not moto) dedupes a retried TransactWriteItems by its
    ClientRequestToken for 10 minutes; botocore retries with the same parameters."""
    ids = [api.new_ticket(user)["ticket_id"] for _ in range(2)]
    tokens: list[str] = []
    import botocore.client

    original = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009 - private on purpose

    def spy(client: Any, operation: str, params: Any) -> Any:
        if operation == "TransactWriteItems":
            tokens.append(params.get("ClientRequestToken", ""))
        return original(client, operation, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.client.BaseClient, "_make_api_call", spy)
        assert api.batch(user, ids, "CLOSED").status == 200
        assert api.comment(user, ids[0], {"body": "x"}).status == 201
    assert len(tokens) == 2
    assert all(tokens)
    assert len(set(tokens)) == 2
