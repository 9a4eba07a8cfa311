"""API Gateway emulation pieces without a server: routes from the template,
the authorizer's checks, claims as API Gateway passes them, gateway responses."""

from __future__ import annotations

import time
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from local_stack.events import gateway_claims
from local_stack.gateway import Authorizer, GatewayResponses, resolve_route, routes_from_specs
from local_stack.lambda_runtime import function_specs
from local_stack.template import local_resolver
from support_tickets.identity import caller_from_claims

ROUTES = routes_from_specs(function_specs().values())


@pytest.mark.parametrize(
    ("method", "path", "function", "params"),
    [
        ("POST", "/tickets", "CreateTicketFunction", {}),
        ("GET", "/tickets", "ListTicketsFunction", {}),
        ("GET", "/tickets/abc", "GetTicketFunction", {"ticket_id": "abc"}),
        ("GET", "/tickets/abc/summary", "GetTicketSummaryFunction", {"ticket_id": "abc"}),
        ("PATCH", "/tickets/abc", "UpdateTicketFunction", {"ticket_id": "abc"}),
        ("POST", "/tickets/abc/comments", "AddCommentFunction", {"ticket_id": "abc"}),
        ("POST", "/tickets/status", "BatchUpdateStatusFunction", {}),
        ("GET", "/tickets/status", "GetTicketFunction", {"ticket_id": "status"}),
        ("DELETE", "/tickets/abc", "DeleteTicketFunction", {"ticket_id": "abc"}),
        ("GET", "/aggregates", "GetAggregatesFunction", {}),
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


def test_claims_are_strings_as_api_gateway_passes_them() -> None:
    claims = gateway_claims(
        {
            "cognito:username": "ada",
            "custom:tenant_id": "acme",
            "cognito:groups": ["admin", "support"],
            "exp": 1795000000,
            "iat": 1794996400,
            "auth_time": 1794996400,
            "email_verified": True,
        }
    )
    assert claims == {
        "cognito:username": "ada",
        "custom:tenant_id": "acme",
        "cognito:groups": "admin,support",
        "exp": "Wed Nov 18 11:06:40 UTC 2026",
        "iat": "Wed Nov 18 10:06:40 UTC 2026",
        "auth_time": "1794996400",
        "email_verified": "true",
    }
    # "admin,support" could be one group with a comma: the token the claims came from tells.
    for groups, admin in ((["admin", "support"], True), (["admin,support"], False)):
        payload: dict[str, Any] = {"sub": "s", "jti": "j", "aud": "client", "token_use": "id", "exp": 1795000000}
        payload.update({"cognito:username": "ada", "custom:tenant_id": "acme", "cognito:groups": groups})
        found = gateway_claims(payload)
        assert found["cognito:groups"] == "admin,support"
        caller = caller_from_claims(found, {"client"}, f"Bearer {token(**payload)}")
        assert (caller.tenant_id, caller.username, caller.is_admin) == ("acme", "ada", admin)


ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_pool"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})


def token(key: RSAKey = KEY, **changes: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": "client", "token_use": "id", "exp": now + 60, "iat": now, "sub": "s"}
    claims.update(changes)
    return jwt.encode({"alg": "RS256", "kid": key.kid}, {k: v for k, v in claims.items() if v is not None}, key)


AUTHORIZER = Authorizer(KeySet([RSAKey.import_key(KEY.as_dict(private=False))]), ISSUER, "client")


def test_the_authorizer_accepts_a_good_id_token_with_or_without_bearer() -> None:
    assert AUTHORIZER.claims(f"Bearer {token()}") is not None
    assert AUTHORIZER.claims(f"bearer {token()}") is not None
    assert AUTHORIZER.claims(token()) is not None


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        f"Bearer {token(exp=int(time.time()) - 1)}",
        f"Bearer {token(aud='other')}",
        f"Bearer {token(iss=ISSUER + 'x')}",
        f"Bearer {token(token_use='access')}",
        f"Bearer {token(exp=None)}",
        f"Bearer {token(RSAKey.generate_key(2048, parameters={'kid': 'k1'}))}",
        f"Bearer {token()} extra",
    ],
)
def test_the_authorizer_refuses(header: str | None) -> None:
    assert AUTHORIZER.claims(header) is None


def test_gateway_responses_come_from_the_template() -> None:
    responses = GatewayResponses.from_template(local_resolver())
    status, _, body = responses.render("UNAUTHORIZED", "Unauthorized")
    assert (status, body) == (
        401,
        b'{"error": {"code": "UNAUTHORIZED", "message": "Missing or invalid bearer token."}}',
    )
    status, _, body = responses.render("MISSING_AUTHENTICATION_TOKEN", "Missing Authentication Token")
    assert (status, body) == (403, b'{"error": {"code": "BAD_REQUEST", "message": "Missing Authentication Token"}}')
    status, headers, _ = responses.render("THROTTLED", "Too Many Requests")
    assert status == 429
    assert ("Retry-After", "1") in headers
