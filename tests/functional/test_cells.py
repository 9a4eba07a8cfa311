"""A cell serves only the tenants placed in it, through the gateway (docs/API.md, 503
``TENANT_MOVING``): the local gateway (local_stack.apigateway) built from template.yaml
with ``CellId=cell-a`` as ``python -m local_stack serve --parameter CellId=cell-a`` builds
it (routes, gateway responses, the authorizer's environment), the real authorizer and API
functions in-process over moto, the tenants' keys in the usage plans as ``make onboard``
puts them (ops.tenants, ops.api_keys).

Tenants ``1`` and ``10`` (each a prefix of the other), both users of the shared pool, the
router sending both here: the one placed in the cell is served, the other gets 503
``TENANT_MOVING`` with ``Retry-After`` and no function runs nor any Cognito exchange; a
forged token of the placed one is a 401. A tenant arriving from another cell, or moved out
to one, is refused 503 ``TENANT_MOVING`` too, reads included (by the functions, or by the
gateway before any function). Alone (no ``CellId``), a tenant without a record
keeps its 403. A cell deployed with the control plane's pool (UserPoolId, UserPoolClientId) takes that
pool's tokens only. (What the authorizer decides for each record: tests/unit/test_authorizer.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
import botocore.client
import pytest
from werkzeug.test import Client

from local_stack.apigateway.rest_api import (
    Gateway,
    GatewayResponses,
    LambdaAuthorizer,
    authorizer_spec,
    routes_from_specs,
)
from local_stack.apigateway.usage_plans import KeyDirectory, UsageMeter
from local_stack.cognito import identity_pool
from local_stack.cognito import user_pool as cognito
from local_stack.cognito.identity_pool import SigningUserPool
from local_stack.lambda_.runtime import LambdaContext
from local_stack.local_values import local_values
from ops.api_keys import ApiKeys
from ops.tenants import TenantAdmin
from stack_model.events import SAMPLE_CLIENT_ID
from stack_model.functions import FunctionSpec, Handler, function_specs, load_handler
from support_tickets.auth import jwks
from support_tickets.auth.authorizer import MOVING_MESSAGE
from support_tickets.core.errors import TenantMoving
from support_tickets.core.settings import get_settings
from tests.conftest import (
    IDENTITY_POOL_ID,
    REGION,
    SIGNING_KEY,
    USER_POOL_ID,
    all_items,
    tenant_claims,
    token_for_claims,
)
from tests.functional.api_harness import IN_PROCESS_TIMEOUT_S
from tests.functional.conftest import STACK_NAME, TENANT_PAIRS, stack_usage_plans

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CELL = "cell-a"
# A Cognito exchange (support_tickets.data.session): tenant credentials, for a served caller only.
EXCHANGE_CALLS = frozenset({"GetId", "GetCredentialsForIdentity"})
A_FORGER = SigningUserPool("us-east-1_EXAMPLE", SAMPLE_CLIENT_ID, REGION)  # the pool's name, another key
# templates/control-plane.yaml's pool, which a cell names by its UserPoolId and UserPoolClientId parameters.
CONTROL_PLANE_POOL = SigningUserPool("us-east-1_Shared9", "sharedclient0", REGION)


@cache
def function_handler(logical_id: str) -> Handler:
    spec = function_specs()[logical_id]
    return load_handler(spec.code_uri, spec.handler)


@dataclass
class Stack:
    """One stack's API as the local gateway serves it, and what happened behind it."""

    client: Client
    # (function, the tenant of its authorizer context), per invocation of an API function
    invoked: list[tuple[str, str]] = field(default_factory=list)
    # (operation, the key's pk for a GetItem), per AWS call of anything in-process
    aws_calls: list[tuple[str, str]] = field(default_factory=list)

    def request(self, method: str, path: str, token: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
        """(status, headers, parsed body) of a request with this bearer token."""
        response = self.client.open(path, method=method, json=body, headers={"Authorization": f"Bearer {token}"})
        data = response.get_data()
        return response.status_code, dict(response.headers), json.loads(data) if data else None

    def exchanges(self) -> list[str]:
        return [operation for operation, _ in self.aws_calls if operation in EXCHANGE_CALLS]


@pytest.fixture
def the_pools_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The authorizer fetches the in-process user pool's JWKS (no network in tests)."""
    monkeypatch.setattr(jwks, "fetch_json", lambda url: cognito.public_jwks(SIGNING_KEY))


@pytest.fixture
def start(aws: None, the_pools_keys: None, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Stack]:
    """A stack with these template parameters, behind its local gateway; the AWS calls
    of everything in-process recorded from then on (arrange the tenants before)."""

    def started(**parameters: str) -> Stack:
        values = local_values(parameters)
        specs = function_specs(values)
        declared = authorizer_spec()
        authorizer = specs[declared.function_logical_id]
        # The authorizer's environment as the template gives it (the local stack passes it on):
        # CELL_ID is the CellId parameter, empty for a stack alone.
        assert authorizer.environment["CELL_ID"] == parameters.get("CellId", "")
        monkeypatch.setenv("CELL_ID", authorizer.environment["CELL_ID"])
        get_settings.cache_clear()  # a fresh container's
        authorizer_handler = load_handler(authorizer.code_uri, authorizer.handler)
        invoked: list[tuple[str, str]] = []

        def integrate(spec: FunctionSpec, event: dict[str, Any], tenant_id: str | None = None) -> Any:
            invoked.append((spec.logical_id, event["requestContext"]["authorizer"]["tenant_id"]))
            handler = function_handler(spec.logical_id)
            return handler(event, LambdaContext(spec.logical_id, timeout_s=IN_PROCESS_TIMEOUT_S))

        gateway = Gateway(
            routes=routes_from_specs(specs.values()),
            authorizer=LambdaAuthorizer(
                authorizer,
                lambda spec, event: authorizer_handler(event, LambdaContext(spec.logical_id)),
                ttl_seconds=declared.ttl_seconds,
            ),
            # Keys and plans read again at every request: a key leaving its plan shows at once.
            meter=UsageMeter(
                KeyDirectory(
                    boto3.client("apigateway", region_name=REGION), set(stack_usage_plans().values()), refresh_seconds=0
                )
            ),
            invoke=integrate,
            responses=GatewayResponses.from_template(values),
            stage=str(values.ref("StageName")),
        )
        stack = Stack(Client(gateway), invoked)
        record_aws_calls(stack, monkeypatch)
        return stack

    return started


def record_aws_calls(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

    def recording(client: Any, operation: str, params: dict[str, Any]) -> Any:
        stack.aws_calls.append((operation, params.get("Key", {}).get("pk", {}).get("S", "")))
        return original(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)


@pytest.fixture
def onboard(dynamodb: DynamoDBClient, table_name: str) -> Callable[[str], None]:
    """``make onboard``: the tenant's record in this stack's table, its key in its tier's plan."""
    keys = ApiKeys(boto3.client("apigateway", region_name=REGION), stack_usage_plans(), STACK_NAME)
    admin = TenantAdmin(dynamodb, table_name, phase_seconds=0.0, sleep=lambda _: None, keys=keys)

    def onboarded(tenant: str) -> None:
        admin.ensure(tenant)

    return onboarded


def token(tenant: str, username: str = "ada") -> str:
    """An ID token of the user pool every cell shares (the router, not the pool, picks the cell)."""
    return token_for_claims(tenant_claims(tenant, username))


@pytest.mark.parametrize(("placed", "elsewhere"), TENANT_PAIRS)
def test_a_cell_serves_its_tenant_and_sends_the_other_back_to_the_router(
    start: Callable[..., Stack],
    onboard: Callable[[str], None],
    dynamodb: DynamoDBClient,
    table_name: str,
    placed: str,
    elsewhere: str,
) -> None:
    # Given: cell-a, where one of the two tenants is placed (the other is another cell's)
    onboard(placed)
    cell = start(CellId=CELL)
    # When the router sends both here, the placed one first
    status, _, body = cell.request("GET", "/tickets", token(placed))
    # Then the placed tenant is served by the function, with tenant credentials from one exchange
    assert (status, body) == (200, {"items": [], "next_cursor": None})
    assert cell.invoked == [("ListTicketsFunction", placed)]
    assert cell.exchanges()
    before, exchanges = all_items(dynamodb, table_name), len(cell.exchanges())
    # And the other one, reading or writing, is sent back: 503 TENANT_MOVING, Retry-After, our error shape
    for method, body_sent in (("GET", None), ("POST", {"title": "written in the wrong cell?"})):
        status, headers, body = cell.request(method, "/tickets", token(elsewhere), body_sent)
        assert (status, body) == (503, {"error": {"code": "TENANT_MOVING", "message": MOVING_MESSAGE}})
        assert headers["Retry-After"] == str(TenantMoving.retry_after_seconds)
    # with no function run, no Cognito exchange and nothing written
    assert cell.invoked == [("ListTicketsFunction", placed)]
    assert len(cell.exchanges()) == exchanges
    assert all_items(dynamodb, table_name) == before
    # And the placed tenant is still served (its neighbour's refusal is its own)
    assert cell.request("GET", "/tickets", token(placed, "bob"))[0] == 200


@pytest.mark.parametrize(("placed", "elsewhere"), TENANT_PAIRS)
def test_a_forged_token_is_401_whether_its_tenant_is_placed_here_or_not(
    start: Callable[..., Stack], onboard: Callable[[str], None], placed: str, elsewhere: str
) -> None:
    onboard(placed)
    cell = start(CellId=CELL)
    answers = []
    for tenant in (placed, elsewhere):
        forged = A_FORGER.sign({**tenant_claims(tenant), "exp": 4_000_000_000, "iat": 1_795_000_000})
        status, _, body = cell.request("GET", "/tickets", forged)
        assert (status, body["error"]["code"]) == (401, "UNAUTHORIZED"), tenant
        answers.append((status, body))
    # The same answer, refused before any record was read: a stranger learns nothing of who is placed where
    assert answers[0] == answers[1]
    assert [call for call in cell.aws_calls if call[0] == "GetItem"] == []
    assert (cell.invoked, cell.exchanges()) == ([], [])


@pytest.mark.parametrize(("onboarded", "never"), TENANT_PAIRS)
def test_alone_a_tenant_without_a_record_keeps_its_403(
    start: Callable[..., Stack], onboard: Callable[[str], None], onboarded: str, never: str
) -> None:
    onboard(onboarded)
    stack = start()
    assert stack.request("GET", "/tickets", token(onboarded))[0] == 200
    status, headers, body = stack.request("GET", "/tickets", token(never))
    assert (status, body["error"]["code"]) == (403, "FORBIDDEN")
    assert "Retry-After" not in headers
    assert stack.invoked == [("ListTicketsFunction", onboarded)]


@pytest.mark.parametrize("parameters", [{}, {"CellId": CELL}], ids=["alone", "cell"])
def test_a_key_gone_from_its_plan_after_the_answer_was_cached_is_tenant_moving(
    start: Callable[..., Stack], onboard: Callable[[str], None], parameters: dict[str, str]
) -> None:
    """A tier change between its two calls, a move or an offboarding takes the key out of the
    plan while the authorizer's answer naming it is still cached: retry (the next answer is the truth)."""
    onboard("1")
    stack = start(**parameters)
    assert stack.request("GET", "/tickets", token("1"))[0] == 200
    apigateway = boto3.client("apigateway", region_name=REGION)
    key = ApiKeys(apigateway, {}, STACK_NAME).find("1")
    assert key is not None
    key_id = key[0]
    for plan in apigateway.get_usage_plans(keyId=key_id)["items"]:
        apigateway.delete_usage_plan_key(usagePlanId=plan["id"], keyId=key_id)
    status, headers, body = stack.request("GET", "/tickets", token("1"))
    assert (status, body["error"]["code"], headers["Retry-After"]) == (503, "TENANT_MOVING", "2")
    assert stack.invoked == [("ListTicketsFunction", "1")]


@pytest.mark.parametrize(("placed", "elsewhere"), TENANT_PAIRS)
def test_a_cell_of_the_shared_pool_accepts_that_pools_tokens_and_refuses_another_pools(
    start: Callable[..., Stack],
    onboard: Callable[[str], None],
    aws: identity_pool.LocalIdentityPool,
    monkeypatch: pytest.MonkeyPatch,
    placed: str,
    elsewhere: str,
) -> None:
    # Given: a cell deployed with the control plane's pool (its identity pool and functions as the
    # template reads them with those parameters), the tenant placed in it
    parameters = {
        "CellId": CELL,
        "UserPoolId": CONTROL_PLANE_POOL.user_pool_id,
        "UserPoolClientId": CONTROL_PLANE_POOL.client_id,
    }
    environment = function_specs(local_values(parameters))[authorizer_spec().function_logical_id].environment
    for name in ("USER_POOL_PROVIDER_NAME", "ALLOWED_CLIENT_IDS"):
        monkeypatch.setenv(name, environment[name])
    published = {pool.user_pool_id: cognito.public_jwks(pool.key) for pool in (CONTROL_PLANE_POOL, A_FORGER)}
    published[USER_POOL_ID] = cognito.public_jwks(SIGNING_KEY)
    monkeypatch.setattr(jwks, "fetch_json", lambda url: published[url.split("/")[-3]])
    trusted = identity_pool.in_process(
        IDENTITY_POOL_ID,
        CONTROL_PLANE_POOL.user_pool_id,
        CONTROL_PLANE_POOL.client_id,
        cognito.public_jwks(CONTROL_PLANE_POOL.key),
        parameters=parameters,
    )
    assert set(trusted.providers) == {CONTROL_PLANE_POOL.provider_name}
    identity_pool.register(trusted)
    try:
        onboard(placed)
        cell = start(**parameters)
        # When its users call, Then the placed tenant is served and the other sent back to the router
        status, _, body = cell.request("GET", "/tickets", CONTROL_PLANE_POOL.id_token(placed, "ada"))
        assert (status, body) == (200, {"items": [], "next_cursor": None})
        assert cell.request("GET", "/tickets", CONTROL_PLANE_POOL.id_token(elsewhere, "bob"))[0] == 503
        # And a token of another pool (a stack's own, valid there) is a 401, whatever its tenant
        for tenant in (placed, elsewhere):
            status, _, body = cell.request("GET", "/tickets", token(tenant))
            assert (status, body["error"]["code"]) == (401, "UNAUTHORIZED")
        assert cell.invoked == [("ListTicketsFunction", placed)]
    finally:
        identity_pool.register(aws)


@pytest.mark.parametrize(("moving", "beside"), TENANT_PAIRS)
@pytest.mark.parametrize(
    ("cell_fields", "runs"),
    [
        ({"cell_phase": "ARRIVING", "moving_from": "cell-b"}, True),  # this cell's key: its function refuses it
        ({"cell_phase": "MOVED_OUT", "moving_to": "cell-b", "moved_out_at": 1}, False),  # as placed elsewhere
    ],
    ids=["arriving", "moved-out"],
)
def test_a_tenant_moving_between_cells_is_refused_reads_included_and_its_neighbour_served(
    start: Callable[..., Stack],
    onboard: Callable[[str], None],
    dynamodb: DynamoDBClient,
    table_name: str,
    moving: str,
    beside: str,
    cell_fields: dict[str, Any],
    runs: bool,
) -> None:
    onboard(moving)
    onboard(beside)
    admin = TenantAdmin(dynamodb, table_name)
    admin.write(admin.record(moving), cell_fields)
    cell = start(CellId=CELL)
    before = all_items(dynamodb, table_name)
    for method, body_sent in (("GET", None), ("POST", {"title": "written in a cell that does not hold it?"})):
        status, headers, body = cell.request(method, "/tickets", token(moving), body_sent)
        assert (status, body["error"]["code"]) == (503, "TENANT_MOVING")
        assert body["error"]["message"] == MOVING_MESSAGE
        assert headers["Retry-After"] == str(TenantMoving.retry_after_seconds)
    assert cell.invoked == ([("ListTicketsFunction", moving), ("CreateTicketFunction", moving)] if runs else [])
    assert all_items(dynamodb, table_name) == before
    assert cell.request("GET", "/tickets", token(beside))[0] == 200
