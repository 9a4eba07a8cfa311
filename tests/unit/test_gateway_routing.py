"""API Gateway emulation pieces without a server: routes from the template,
the Lambda authorizer's invocation, cache and policy, gateway responses, the
integration's tenant header (tenant isolation mode).
(What the authorizer function itself refuses: tests/unit/test_authorizer.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from werkzeug.test import Client

from local_stack.apigateway.rest_api import (
    Authorized,
    AuthorizerRefused,
    Gateway,
    GatewayResponses,
    LambdaAuthorizer,
    authorizer_spec,
    resolve_route,
    routes_from_specs,
)
from local_stack.apigateway.usage_plans import Decision
from local_stack.lambda_.environments import FunctionError, FunctionTimeout
from local_stack.local_values import local_values
from ops.routes import api_routes
from stack_model.functions import FunctionSpec, function_specs
from support_tickets.core.identity import BEARER_HEADER

ROUTES = routes_from_specs(function_specs().values())


@pytest.mark.parametrize(
    ("method", "path", "function", "params"),
    [
        # Every route of the route table (ops/routes.py), with a concrete ticket id...
        *[
            pytest.param(
                route.method,
                route.url("abc"),
                route.function,
                route.path_parameters("abc") or {},
                id=f"{route.method} {route.url('abc')}",
            )
            for route in api_routes()
        ],
        # ...and a literal segment that also matches a {ticket_id}: the literal wins for its method only.
        ("POST", "/tickets/status", "BatchUpdateStatusFunction", {}),
        ("GET", "/tickets/status", "GetTicketFunction", {"ticket_id": "status"}),
    ],
)
def test_routes_come_from_the_template(method: str, path: str, function: str, params: dict[str, str]) -> None:
    found = resolve_route(ROUTES, method, path)
    assert found is not None
    route, path_parameters = found
    assert route.function.logical_id == function
    assert path_parameters == params


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/"), ("GET", "/ticket"), ("PUT", "/tickets"), ("GET", "/tickets//summary"), ("GET", "/v1/tickets")],
)
def test_no_route(method: str, path: str) -> None:
    assert resolve_route(ROUTES, method, path) is None


class FakeAuthorizerFunction:
    """What the authorizer function answers, and how often it was asked."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.events: list[dict[str, Any]] = []

    def __call__(self, spec: FunctionSpec, event: dict[str, Any]) -> Any:
        self.events.append(event)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


ARN = "arn:aws:execute-api:us-east-1:123456789012:local/v1"
ALLOW = {
    "principalId": "sub-1",
    "policyDocument": {
        "Version": "2012-10-17",
        "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": [f"{ARN}/*/*"]}],
    },
    "context": {"tenant_id": "acme", "username": "ada", "groups": '["admin"]', "n": 1, "b": True},
    "usageIdentifierKey": "the-key",
}


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def authorizer(answer: Any, ttl: float = 300) -> tuple[LambdaAuthorizer, FakeAuthorizerFunction, Clock]:
    function, clock = FakeAuthorizerFunction(answer), Clock()
    spec = function_specs()[authorizer_spec().function_logical_id]
    return LambdaAuthorizer(spec, function, ttl_seconds=ttl, monotonic=clock), function, clock


def test_the_template_names_a_token_authorizer_cached_300_s() -> None:
    spec = authorizer_spec()
    assert (spec.function_logical_id, spec.ttl_seconds, spec.header) == ("AuthorizerFunction", 300, "Authorization")
    assert spec.validation_expression == f"^{BEARER_HEADER}$"


@pytest.mark.parametrize(
    "header",
    ["x.y.z", "bearer x.y.z", "Bearer  x.y.z", "Bearer x.y.z ", "Bearer x.y.z=", "Bearer x.y", "Bearer x.y.z\n"],
)
def test_a_header_the_validation_expression_refuses_never_reaches_the_function(header: str) -> None:
    function, clock = FakeAuthorizerFunction(ALLOW), Clock()
    spec = authorizer_spec()
    lambda_authorizer = LambdaAuthorizer(
        function_specs()[spec.function_logical_id],
        function,
        ttl_seconds=300,
        monotonic=clock,
        validation_expression=spec.validation_expression,
    )
    with pytest.raises(AuthorizerRefused) as refused:
        lambda_authorizer.authorize(header, f"{ARN}/GET/tickets")
    assert refused.value.response_type == "UNAUTHORIZED"
    assert function.events == []
    answer, _ = lambda_authorizer.authorize("Bearer x.y.z", f"{ARN}/GET/tickets")  # the control
    assert answer.usage_identifier_key == "the-key"


def test_the_authorizer_gets_a_token_event_and_its_answer_is_cached_per_header() -> None:
    lambda_authorizer, function, clock = authorizer(ALLOW)
    answer, _ = lambda_authorizer.authorize("Bearer t1", f"{ARN}/GET/tickets")
    assert function.events == [{"type": "TOKEN", "authorizationToken": "Bearer t1", "methodArn": f"{ARN}/GET/tickets"}]
    assert answer.usage_identifier_key == "the-key"
    # Context values become strings, as API Gateway passes them.
    assert answer.context == {"tenant_id": "acme", "username": "ada", "groups": '["admin"]', "n": "1", "b": "true"}
    # The same header on another route within the TTL: the cached answer, no invocation.
    clock.now = 299
    cached, latency = lambda_authorizer.authorize("Bearer t1", f"{ARN}/DELETE/tickets/x")
    assert (cached, latency, len(function.events)) == (answer, 0, 1)
    assert cached.allows(f"{ARN}/DELETE/tickets/x")
    lambda_authorizer.authorize("Bearer t2", f"{ARN}/GET/tickets")  # another header: asked again
    clock.now = 300  # expired: asked again
    lambda_authorizer.authorize("Bearer t1", f"{ARN}/GET/tickets")
    assert len(function.events) == 3


@pytest.mark.parametrize(
    ("answer", "header", "response_type"),
    [
        (ALLOW, None, "UNAUTHORIZED"),  # no identity source: not even invoked
        (ALLOW, "  ", "UNAUTHORIZED"),
        (Exception("Unauthorized"), "Bearer x", "UNAUTHORIZED"),
        (Exception("boom"), "Bearer x", "AUTHORIZER_FAILURE"),
        ({"principalId": "p"}, "Bearer x", "AUTHORIZER_CONFIGURATION_ERROR"),
        ({**ALLOW, "context": {"nested": {"a": 1}}}, "Bearer x", "AUTHORIZER_CONFIGURATION_ERROR"),
    ],
)
def test_what_api_gateway_answers_itself(answer: Any, header: str | None, response_type: str) -> None:
    lambda_authorizer, function, _ = authorizer(answer)
    with pytest.raises(AuthorizerRefused) as refused:
        lambda_authorizer.authorize(header, f"{ARN}/GET/tickets")
    assert refused.value.response_type == response_type
    if header and header.strip():  # refusals are never cached: the function is asked again
        with pytest.raises(AuthorizerRefused):
            lambda_authorizer.authorize(header, f"{ARN}/GET/tickets")
        assert len(function.events) == 2


def statement(effect: str, *resources: str) -> dict[str, Any]:
    return {"Action": "execute-api:Invoke", "Effect": effect, "Resource": list(resources)}


@pytest.mark.parametrize(
    ("statements", "method_arn", "allowed"),
    [
        ([statement("Allow", f"{ARN}/*/*")], f"{ARN}/GET/tickets", True),
        ([statement("Allow", f"{ARN}/GET/tickets")], f"{ARN}/GET/tickets", True),
        ([statement("Allow", f"{ARN}/GET/tickets")], f"{ARN}/POST/tickets", False),
        ([statement("Allow", f"{ARN}/*/*"), statement("Deny", f"{ARN}/DELETE/*")], f"{ARN}/DELETE/tickets/x", False),
        ([statement("Deny", f"{ARN}/*/*")], f"{ARN}/GET/tickets", False),
        ([], f"{ARN}/GET/tickets", False),
        ([{**statement("Allow", f"{ARN}/*/*"), "Action": "execute-api:ManageConnections"}], f"{ARN}/GET/x", False),
        ([statement("Allow", "arn:aws:execute-api:us-east-1:123456789012:other/v1/*/*")], f"{ARN}/GET/x", False),
    ],
)
def test_the_policy_is_evaluated_as_iam_does(statements: list[dict[str, Any]], method_arn: str, allowed: bool) -> None:
    assert Authorized("p", tuple(statements), {}, None).allows(method_arn) is allowed


def test_gateway_responses_come_from_the_template() -> None:
    responses = GatewayResponses.from_template(local_values())
    status, _, body = responses.render("UNAUTHORIZED", "Unauthorized")
    assert (status, body) == (
        401,
        b'{"error": {"code": "UNAUTHORIZED", "message": "Missing or invalid bearer token."}}',
    )
    status, _, body = responses.render("MISSING_AUTHENTICATION_TOKEN", "Missing Authentication Token")
    assert status == 404
    assert json.loads(body) == {
        "error": {"code": "NOT_FOUND", "message": "No such route: check the method and the path."}
    }
    status, headers, _ = responses.render("THROTTLED", "Too Many Requests")
    assert status == 429
    assert ("Retry-After", "1") in headers
    # The local gateway knows the seconds until a token or the quota's reset: it sends those.
    status, headers, body = responses.render("QUOTA_EXCEEDED", "Limit Exceeded", {"Retry-After": "4242"})
    assert status == 429
    assert [value for name, value in headers if name == "Retry-After"] == ["4242"]
    assert b'"QUOTA_EXCEEDED"' in body
    # A key in no plan: a tenant placed in another cell, or a key gone after the answer was cached.
    status, headers, body = responses.render("INVALID_API_KEY", "Forbidden")
    assert (status, b'"TENANT_MOVING"' in body) == (503, True)
    assert ("Retry-After", "2") in headers


def test_a_deny_names_its_reason_in_the_access_denied_body() -> None:
    """The template's ACCESS_DENIED body takes the code and message from the
    Deny's context (``$context.authorizer.<key>``), as API Gateway substitutes them."""
    responses = GatewayResponses.from_template(local_values())
    denied = {"error_code": "TENANT_SUSPENDED", "error_message": "This tenant is suspended; contact your provider."}
    status, _, body = responses.render("ACCESS_DENIED", "User is not authorized", authorizer=denied)
    assert status == 403
    assert json.loads(body) == {
        "error": {"code": "TENANT_SUSPENDED", "message": "This tenant is suspended; contact your provider."}
    }


class AdmitAll:
    """A usage plan that admits every request (the tiers are not what is tested here)."""

    def admit(self, key: str | None) -> Decision:
        return Decision("ALLOWED", key_id="key-id")


@pytest.mark.parametrize(("tenant_isolation", "expected"), [(True, "acme"), (False, None)])
def test_with_tenant_isolation_the_invocation_names_the_authorizers_tenant_never_the_clients(
    tenant_isolation: bool, expected: str | None
) -> None:
    # Given: the routes of the template's tenant isolation variant (or of the template), an authorizer
    # that verified tenant acme
    specs = function_specs(local_values(), tenant_isolation=tenant_isolation)
    invoked: list[tuple[str, str | None]] = []

    def invoke(spec: FunctionSpec, event: dict[str, Any], tenant_id: str | None = None) -> Any:
        invoked.append((spec.logical_id, tenant_id))
        return {"statusCode": 200, "body": "{}"}

    gateway = Gateway(
        routes=routes_from_specs(specs.values()),
        authorizer=authorizer(ALLOW)[0],
        meter=AdmitAll(),  # type: ignore[arg-type]
        invoke=invoke,
        responses=GatewayResponses.from_template(local_values()),
        stage="v1",
    )
    # When a client sends its own X-Amz-Tenant-Id, naming another tenant
    response = Client(gateway).get("/tickets", headers={"Authorization": "Bearer x.y.z", "X-Amz-Tenant-Id": "globex"})
    # Then the function is invoked with the authorizer's tenant (the mode on), or with none (off)
    assert response.status_code == 200
    assert invoked == [("ListTicketsFunction", expected)]


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(FunctionTimeout("Sandbox.Timedout", "r Task timed out after 10.00 seconds"), id="timeout"),
        pytest.param(FunctionError("Runtime.Unknown", "boom"), id="error"),
    ],
)
def test_a_function_that_fails_or_times_out_is_a_502_that_says_a_write_may_have_been_applied(
    failure: Exception,
) -> None:
    """API Gateway answers a Lambda function error (its timeout included) with 502, the
    template's DEFAULT_5XX: the API's error body and Retry-After, as deployed."""

    def invoke(spec: FunctionSpec, event: dict[str, Any], tenant_id: str | None = None) -> Any:
        raise failure

    gateway = Gateway(
        routes=ROUTES,
        authorizer=authorizer(ALLOW)[0],
        meter=AdmitAll(),  # type: ignore[arg-type]
        invoke=invoke,
        responses=GatewayResponses.from_template(local_values()),
        stage="v1",
    )
    response = Client(gateway).post("/tickets", json={"title": "t"}, headers={"Authorization": "Bearer x.y.z"})
    assert response.status_code == 502
    assert response.headers["Retry-After"] == "1"
    body = json.loads(response.get_data())
    assert body["error"]["code"] == "UNAVAILABLE"
    assert "Idempotency-Key" in body["error"]["message"]
