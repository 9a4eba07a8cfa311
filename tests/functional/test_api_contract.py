"""What every route owes API.md, whichever function serves it: identity from the
claims (401/403), the body limit (413), unknown query parameters (400), AWS
pushing back (429/503 with Retry-After, 403 on AccessDenied), never a stack
trace, invalid ids as 404, and observability (tenant and correlation id on
every log line, no tenant in metric dimensions)."""

from __future__ import annotations

from typing import Any

import pytest

from stack_model.events import SAMPLE_CLIENT_ID
from tests.conftest import FRESH_AWS, SHARED_AWS
from tests.functional import api_harness
from tests.functional.api_harness import (
    ROUTES,
    Api,
    ApiResponse,
    User,
    assert_error,
    aws_calls,
    aws_fails,
    client_error,
    connection_error,
    new_subject,
    not_found_code,
    sample_request,
)
from tests.functional.conftest import Snapshot

pytestmark = SHARED_AWS  # random tenants, before/after snapshots

# From the route table (ops/routes.py): a new route is in every case below.
ALL_ROUTES = sorted(ROUTES)
TICKET_ROUTES = sorted(name for name, route in ROUTES.items() if route.takes_ticket)
BODY_ROUTES = sorted(name for name, route in ROUTES.items() if route.has_body)
NAMES_TICKET = {name for name, route in ROUTES.items() if route.names_ticket}


def every_route_and_each_variant(variants: list[Any], ids: list[str] | None = None) -> list[Any]:
    """The first variant on every route, the other variants on one route: the
    checks run in shared code before the route, so this covers both axes."""
    names = ids or [str(variant) for variant in variants]
    cases = [pytest.param(route, variants[0], id=f"{route}-{names[0]}") for route in ALL_ROUTES]
    cases += [
        pytest.param("list", variant, id=f"list-{name}") for variant, name in zip(variants[1:], names[1:], strict=True)
    ]
    return cases


@pytest.fixture
def ticket_id(api: Api, user: User, request: pytest.FixtureRequest) -> str:
    """What the test's route is about: a new ticket, or a new webhook for a
    route whose path names a webhook."""
    route = request.node.callspec.params.get("route") if hasattr(request.node, "callspec") else None
    return new_subject(api, route, user) if route is not None else str(api.new_ticket(user)["ticket_id"])


def call_as(api: Api, route: str, claims: dict[str, str] | None, ticket_id: str, **kwargs: Any) -> ApiResponse:
    """``route`` with a valid request but the given authorizer claims."""
    spec = ROUTES[route]
    path_id = ticket_id if spec.path_parameter is not None else None
    return api.call(route, None, ticket_id=path_id, body=spec.body(ticket_id), claims=claims, **kwargs)


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_every_route_succeeds_with_its_documented_status(api: Api, user: User, ticket_id: str, route: str) -> None:
    response = sample_request(api, route, user, ticket_id)
    assert response.status == ROUTES[route].needs.success, response.body
    if response.status in {202, 204}:  # no body (202: POST .../redeliver, accepted)
        assert response.body is None
    else:
        assert response.header("Content-Type") == "application/json"


# ---------------------------------------------------------------- identity
@pytest.mark.parametrize(
    ("route", "claims"),
    every_route_and_each_variant([None, {}, {"custom:tenant_id": "acme"}], ["no-authorizer", "no-claims", "no-user"]),
)
def test_missing_claims_are_401(
    api: Api, snapshot: Snapshot, ticket_id: str, route: str, claims: dict[str, str] | None
) -> None:
    before = snapshot()
    assert_error(call_as(api, route, claims, ticket_id), 401, "UNAUTHORIZED")
    assert snapshot() == before


@pytest.mark.parametrize(
    ("route", "changes"),
    every_route_and_each_variant(
        [
            {"aud": "anotherappclientofthepool"},
            {"token_use": "access"},
            {"aud": ""},
            {"token_use": ""},
            {"token_use": "access", "aud": "", "client_id": SAMPLE_CLIENT_ID},
        ],
        ["other-app-client", "access-token", "no-audience", "no-token-use", "access-token-shape"],
    ),
)
def test_only_id_tokens_of_our_app_client_are_accepted(
    api: Api, user: User, snapshot: Snapshot, ticket_id: str, *, route: str, changes: dict[str, str]
) -> None:
    # The API's Lambda authorizer refuses these (it checks aud and token_use),
    # and so does the identity pool when it exchanges them: 401, nothing touched.
    before = snapshot()
    claims = {key: value for key, value in {**user.as_admin().claims(), **changes}.items() if value}
    assert_error(call_as(api, route, claims, ticket_id), 401, "UNAUTHORIZED")
    assert snapshot() == before


@pytest.mark.parametrize(
    ("route", "tenant"), every_route_and_each_variant(["a|b", "", "Acme", "t-*", "1#", "x" * 64, " 1"])
)
def test_a_malformed_tenant_claim_is_403_never_a_default_tenant(
    api: Api, user: User, snapshot: Snapshot, ticket_id: str, *, route: str, tenant: str
) -> None:
    before = snapshot()
    claims = {**user.as_admin().claims(), "custom:tenant_id": tenant}
    assert_error(call_as(api, route, claims, ticket_id), 403, "FORBIDDEN")
    assert snapshot() == before


@FRESH_AWS  # tenants "1" and "10"
@pytest.mark.parametrize("route", ALL_ROUTES)
def test_the_tenant_never_comes_from_the_request(api: Api, user: User, snapshot: Snapshot, route: str) -> None:
    # Given a ticket (or, for a webhook's route, a webhook) of tenant "1"
    victim = new_subject(api, route, User("1"))
    before = snapshot()
    # When tenant "10" names tenant "1" in a header, and asks for the ticket
    attacker = User("10", admin=True)
    response = call_as(api, route, attacker.claims(), victim, headers={"X-Tenant-Id": "1", "custom:tenant_id": "1"})
    # Then it acts as tenant "10": a foreign ticket is not found, a create lands in "10"
    if route in NAMES_TICKET or ROUTES[route].takes_webhook:
        assert_error(response, 404, not_found_code(route))
        assert snapshot() == before
        return
    # a route that names no ticket answers about the caller's own tenant
    assert response.status == ROUTES[route].needs.success, response.body
    if route == "create":
        assert api.summary(attacker, response.body["ticket_id"]).status == 200
    elif route in {"list", "webhook_list"}:
        assert response.body["items"] == []
    elif route == "webhook_create":
        listed = api.call("webhook_list", attacker).body["items"]
        assert [webhook["webhook_id"] for webhook in listed] == [response.body["webhook_id"]]


# ---------------------------------------------------------------- request shape
@pytest.mark.parametrize("route", ALL_ROUTES)
def test_a_body_over_64_kib_is_413_before_anything_else(
    api: Api, snapshot: Snapshot, ticket_id: str, route: str
) -> None:
    before = snapshot()
    path_id = ticket_id if route in TICKET_ROUTES else None
    response = api.call(route, User("1"), ticket_id=path_id, raw_body="x" * (64 * 1024 + 1))
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")
    assert snapshot() == before


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_an_unknown_query_parameter_is_400(
    api: Api, user: User, snapshot: Snapshot, ticket_id: str, route: str
) -> None:
    before = snapshot()
    response = call_as(api, route, user.as_admin().claims(), ticket_id, query={"tenant": user.tenant_id})
    error = assert_error(response, 400, "VALIDATION_ERROR")
    assert error["details"] == [{"field": "tenant", "message": "unknown query parameter"}]
    assert snapshot() == before


@pytest.mark.parametrize("route", BODY_ROUTES)
def test_a_body_that_is_not_json_is_400(api: Api, user: User, snapshot: Snapshot, ticket_id: str, route: str) -> None:
    before = snapshot()
    path_id = ticket_id if route in TICKET_ROUTES else None
    response = api.call(route, user, ticket_id=path_id, raw_body="hello", headers={"Content-Type": "text/plain"})
    error = assert_error(response, 400, "VALIDATION_ERROR")
    assert error["details"] == [{"field": "Content-Type", "message": "must be application/json"}]
    assert snapshot() == before


@pytest.mark.parametrize("route", TICKET_ROUTES)
@pytest.mark.parametrize("bad_id", ["TICKET#1", "a|b", "x" * 65])
def test_an_impossible_ticket_id_is_404_like_a_missing_one(
    api: Api, user: User, snapshot: Snapshot, route: str, bad_id: str
) -> None:
    api.new_ticket(user)
    before = snapshot()
    response = sample_request(api, route, user, bad_id)
    assert_error(response, 404, "TICKET_NOT_FOUND")
    assert response.body == sample_request(api, route, user, "01JD3ZZZZZZZZZZZZZZZZZZZZZ").body
    assert snapshot() == before


# ---------------------------------------------------------------- AWS pushing back
@pytest.mark.parametrize(
    ("route", "code"), every_route_and_each_variant(["ProvisionedThroughputExceededException", "ThrottlingException"])
)
def test_dynamodb_throttling_is_429_with_retry_after(
    api: Api, user: User, snapshot: Snapshot, ticket_id: str, *, route: str, code: str
) -> None:
    before = snapshot()
    with aws_fails("dynamodb", client_error(code)) as attempted:
        response = sample_request(api, route, user, ticket_id)
    assert attempted, "the route never reached DynamoDB"
    assert_error(response, 429, "THROTTLED")
    assert response.header("Retry-After") == "1"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("route", "error"),
    every_route_and_each_variant([client_error("InternalServerError"), connection_error()], ["500", "network"]),
)
def test_dynamodb_failing_is_503_with_retry_after(
    api: Api, user: User, snapshot: Snapshot, ticket_id: str, *, route: str, error: Any
) -> None:
    before = snapshot()
    with aws_fails("dynamodb", error):
        response = sample_request(api, route, user, ticket_id)
    assert_error(response, 503, "UNAVAILABLE")
    assert response.header("Retry-After") == "1"
    assert snapshot() == before


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_no_credentials_in_the_context_means_no_data(
    api: Api, user: User, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    # Given what a broken authorizer would pass: the caller without its tenant credentials
    monkeypatch.setattr(api_harness, "_exchanged", lambda token: None)
    before = snapshot()
    # When the request reaches the function
    with aws_calls() as calls:
        response = sample_request(api, route, user, "01JD3ZZZZZZZZZZZZZZZZZZZZZ")
    # Then it is a 401 that touched nothing and tried no other credentials (the functions never call Cognito)
    assert_error(response, 401, "UNAUTHORIZED")
    assert calls == []
    assert snapshot() == before


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_access_denied_by_the_tenant_policy_is_403(
    api: Api, user: User, snapshot: Snapshot, ticket_id: str, route: str
) -> None:
    before = snapshot()
    with aws_fails("dynamodb", client_error("AccessDeniedException")):
        response = sample_request(api, route, user, ticket_id)
    assert_error(response, 403, "FORBIDDEN")
    assert snapshot() == before


@pytest.mark.parametrize("code", ["UnrecognizedClientException", "InvalidSignatureException"])
@pytest.mark.parametrize("route", ALL_ROUTES)
def test_credentials_dynamodb_does_not_recognise_are_401(
    api: Api, user: User, snapshot: Snapshot, ticket_id: str, route: str, code: str
) -> None:
    # A forged context (a real access key id, a junk secret) reaches a function only by direct invocation
    before = snapshot()
    with aws_fails("dynamodb", client_error(code)):
        response = sample_request(api, route, user, ticket_id)
    assert_error(response, 401, "UNAUTHORIZED")
    assert snapshot() == before


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_an_unexpected_failure_is_a_bare_500_without_internals(
    api: Api, user: User, ticket_id: str, route: str
) -> None:
    with aws_fails("dynamodb", client_error("ValidationException")):
        response = sample_request(api, route, user, ticket_id)
    assert response.status == 500
    assert response.body == {"error": {"code": "INTERNAL_ERROR", "message": "Internal error."}}


# ---------------------------------------------------------------- observability
@pytest.mark.parametrize("route", ALL_ROUTES)
def test_every_log_line_carries_the_tenant_and_the_correlation_id(
    api: Api, user: User, ticket_id: str, route: str, log_lines: Any
) -> None:
    # Given a request that succeeds and one that fails inside the handler
    log_lines()  # forget the arrangement's output
    ok = sample_request(api, route, user, ticket_id)
    with aws_fails("dynamodb", client_error("ValidationException")):
        failed = sample_request(api, route, user, ticket_id)
    # Then every line it logged names the tenant and that request's correlation id
    logs = [line for line in log_lines() if "level" in line]
    assert {line["correlation_id"] for line in logs} == {ok.request_id, failed.request_id}
    assert {line["tenant_id"] for line in logs} == {user.tenant_id}
    assert any(line["level"] == "ERROR" for line in logs)
    handled = [line for line in logs if line["message"] == "request handled"]
    assert [(line["correlation_id"], line["status"]) for line in handled] == [
        (ok.request_id, ok.status),
        (failed.request_id, 500),
    ]


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_metrics_never_use_the_tenant_as_a_dimension(
    api: Api, user: User, ticket_id: str, route: str, log_lines: Any
) -> None:
    log_lines()
    sample_request(api, route, user, ticket_id)
    blobs = [line for line in log_lines() if "_aws" in line]
    for blob in blobs:
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            assert directive["Namespace"] == "SupportTickets"
            dimensions = {name for dimension_set in directive["Dimensions"] for name in dimension_set}
            assert dimensions == {"service"}
        assert user.tenant_id not in str(blob)
    if not ROUTES[route].read_only:
        assert blobs, "a write publishes a business metric"
