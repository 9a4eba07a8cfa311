"""API Gateway emulation over HTTP: the Lambda TOKEN authorizer (AuthorizerFunction:
401 with the template's gateway response for every kind of bad token), routing
from the template, body limits, and the proxy response."""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey
from moto.utilities.utils import load_resource

from tests.e2e.conftest import Caller, RunningStack, server_log

UNAUTHORIZED = {"error": {"code": "UNAUTHORIZED", "message": "Missing or invalid bearer token."}}


def claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return claims


def sign(claims: dict[str, Any], key: RSAKey) -> str:
    return jwt.encode({"alg": "RS256", "kid": key.kid or "k"}, claims, key)


MOTOS_BUNDLED_KEY = RSAKey.import_key(load_resource("cognitoidp/resources/jwks-private.json"))


@pytest.fixture
def caller(stack: RunningStack) -> Caller:
    tenant = f"gw-{time.monotonic_ns()}"
    return Caller(tenant, f"u-{tenant}", stack.token(tenant, f"u-{tenant}"))


def test_real_tokens_are_accepted_as_bearer_tokens_only(stack: RunningStack, caller: Caller) -> None:
    # The control for the refusals below.
    assert stack.request("GET", "/tickets", token=caller.token).status == 200
    # API Gateway caches the authorizer's answer per header value: one token, one accepted spelling
    # (the template's ValidationExpression, before the authorizer runs; the authorizer's own check after).
    head, payload, signature = caller.token.split(".")
    last = signature[-1]
    other_bits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".index(last) | 0b1111
    ]
    assert other_bits != last  # a 256-byte signature leaves 4 bits of its last character unused
    for header in (
        caller.token,
        f"bearer {caller.token}",
        f"Bearer  {caller.token}",
        f"Bearer {caller.token}=",
        f"Bearer {head}.{payload}.{signature[:-1]}{other_bits}",
    ):
        response = stack.request("GET", "/tickets", headers={"Authorization": header})
        assert (response.status, response.body) == (401, UNAUTHORIZED), header


def jwks(stack: RunningStack) -> dict[str, Any]:
    url = f"{stack.state['emulator_url']}/{stack.state['user_pool_id']}/.well-known/jwks.json"
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - the emulator on loopback
        keys: dict[str, Any] = json.load(response)
    return keys


def test_the_pool_signs_with_a_key_of_this_start_not_motos_public_one(stack: RunningStack, caller: Caller) -> None:
    # moto ships its signing key: with it anyone could mint a token for any tenant.
    (served,) = jwks(stack)["keys"]
    bundled = MOTOS_BUNDLED_KEY.as_dict(private=False)
    assert served["n"] != bundled["n"]
    header = json.loads(base64.urlsafe_b64decode(caller.token.split(".")[0] + "=="))
    assert header["kid"] == served["kid"] != "dummy"
    forged = sign({**claims_of(caller.token), "custom:tenant_id": "globex"}, MOTOS_BUNDLED_KEY)
    assert stack.request("GET", "/tickets", token=forged).status == 401
    assert stack.request("GET", "/tickets", token=sign(claims_of(caller.token), MOTOS_BUNDLED_KEY)).status == 401


# A forged claim (expiry, issuer, audience, token use) can't be signed with the
# pool's key from outside the stack: tests/unit/test_gateway_routing.py checks
# the authorizer on each claim with a key of its own; here, real tokens.
@pytest.mark.parametrize(
    "make_token",
    [
        pytest.param(lambda c: None, id="missing"),
        pytest.param(lambda c: "garbage", id="garbage"),
        pytest.param(lambda c: "a.b.c", id="three-garbage-parts"),
        pytest.param(lambda c: sign(claims_of(c.token), RSAKey.generate_key(2048)), id="signed-by-another-key"),
        pytest.param(lambda c: sign(claims_of(c.token), MOTOS_BUNDLED_KEY), id="signed-by-motos-key"),
        pytest.param(
            lambda c: (
                c.token.rsplit(".", 2)[0]
                + "."
                + base64.urlsafe_b64encode(json.dumps({**claims_of(c.token), "custom:tenant_id": "x"}).encode())
                .decode()
                .rstrip("=")
                + "."
                + c.token.rsplit(".", 1)[1]
            ),
            id="tampered-payload",
        ),
        pytest.param(
            lambda c: jwt.encode({"alg": "HS256", "kid": "dummy"}, claims_of(c.token), OctKey.import_key("s" * 32)),
            id="hs256",
        ),
    ],
)
def test_bad_tokens_get_the_gateways_401(stack: RunningStack, caller: Caller, make_token: Any) -> None:
    token = make_token(caller)
    response = stack.request("GET", "/tickets", token=token)
    assert response.status == 401
    assert response.body == UNAUTHORIZED


def test_a_refused_token_is_one_log_line_and_no_traceback(stack: RunningStack, caller: Caller) -> None:
    # A refused token is an expected event: what the stack's log (the functions' lines
    # included) gains from one is at most one line of the authorizer, and no traceback.
    expired = {**claims_of(caller.token), "exp": 1, "jti": f"refused-{time.monotonic_ns()}"}
    token = sign(expired, MOTOS_BUNDLED_KEY)
    before = len(server_log(stack).splitlines())
    assert stack.request("GET", "/tickets", token=token).status == 401
    new = server_log(stack).splitlines()[before:]
    assert not [line for line in new if "Traceback" in line or line.startswith((" ", "\t"))], new
    refusal = [line for line in new if "Unauthorized" in line or "refused" in line]
    assert len(refusal) <= 1, new


def test_a_request_that_adds_no_metric_logs_no_warning_about_it(stack: RunningStack, caller: Caller) -> None:
    before = len(server_log(stack).splitlines())
    assert stack.request("GET", "/tickets", token=caller.token).status == 200
    assert stack.request("GET", "/tickets", token=caller.token).status == 200  # its environment's lines are in
    assert not [line for line in server_log(stack).splitlines()[before:] if "No application metrics" in line]


def test_an_access_token_of_the_pool_is_rejected(stack: RunningStack, caller: Caller) -> None:
    pool = stack.pool()
    pool.cognito.admin_set_user_password(
        UserPoolId=pool.pool_id, Username=caller.username, Password="Another-passw0rd!", Permanent=True
    )
    result = pool.cognito.admin_initiate_auth(
        UserPoolId=pool.pool_id,
        ClientId=pool.client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": caller.username, "PASSWORD": "Another-passw0rd!"},
    )
    access = result["AuthenticationResult"]["AccessToken"]
    assert claims_of(access)["token_use"] == "access"
    assert stack.request("GET", "/tickets", token=access).status == 401


def test_a_token_of_another_app_client_is_rejected(stack: RunningStack, caller: Caller) -> None:
    pool = stack.pool()
    other = pool.cognito.create_user_pool_client(
        UserPoolId=pool.pool_id, ClientName="other", ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH"]
    )["UserPoolClient"]["ClientId"]
    pool.cognito.admin_set_user_password(
        UserPoolId=pool.pool_id, Username=caller.username, Password="Another-passw0rd!", Permanent=True
    )
    result = pool.cognito.admin_initiate_auth(
        UserPoolId=pool.pool_id,
        ClientId=other,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": caller.username, "PASSWORD": "Another-passw0rd!"},
    )
    token = result["AuthenticationResult"]["IdToken"]
    assert claims_of(token)["aud"] == other
    assert stack.request("GET", "/tickets", token=token).status == 401


NO_ROUTE = {"error": {"code": "NOT_FOUND", "message": "No such route: check the method and the path."}}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/ticket"),  # an unknown path
        ("PUT", "/tickets"),  # an unknown method on a known path
        ("DELETE", "/aggregates"),
        ("GET", "/nope"),
        ("GET", "/tickets/a/b/c"),
        ("GET", "/v1/tickets"),
    ],
)
@pytest.mark.parametrize("with_token", [True, False])
def test_unknown_routes_and_methods_are_404_not_found(
    stack: RunningStack, caller: Caller, method: str, path: str, with_token: bool
) -> None:
    # API Gateway's MISSING_AUTHENTICATION_TOKEN response, made by the template to say what it is
    # (docs/API.md's last error row), with a valid token or none (no authorizer runs: no method)
    response = stack.request(method, path, token=caller.token if with_token else None)
    assert (response.status, response.body) == (404, NO_ROUTE)


def test_the_literal_status_route_wins_over_the_ticket_id_route(stack: RunningStack, caller: Caller) -> None:
    # POST /tickets/status is BatchUpdateStatusFunction; GET /tickets/status is GetTicketFunction with id "status".
    batch = stack.request("POST", "/tickets/status", token=caller.token, body={"ticket_ids": ["x"], "status": "OPEN"})
    assert batch.status == 404
    assert batch.body["error"]["details"] == {"missing_ticket_ids": ["x"]}
    as_id = stack.request("GET", "/tickets/status", token=caller.token)
    assert as_id.status == 404
    assert as_id.error_code == "TICKET_NOT_FOUND"


def test_bodies_over_64_kib_are_refused_by_the_function(stack: RunningStack, caller: Caller) -> None:
    just_fits = {"title": "x", "description": "d" * 10_000}
    assert stack.request("POST", "/tickets", token=caller.token, body=just_fits).status == 201
    big = json.dumps({"title": "x", "description": "d" * (64 * 1024)}).encode()
    response = stack.request(
        "POST", "/tickets", token=caller.token, raw=big, headers={"Content-Type": "application/json"}
    )
    assert response.status == 413
    assert response.error_code == "PAYLOAD_TOO_LARGE"


def test_huge_bodies_are_refused_unread_by_the_gateway(stack: RunningStack, caller: Caller) -> None:
    huge = b"{" + b" " * (2 * 1024 * 1024) + b"}"
    try:
        response = stack.request(
            "POST", "/tickets", token=caller.token, raw=huge, headers={"Content-Type": "application/json"}
        )
    except OSError:  # the server may close before the client has sent everything
        return
    assert response.status == 413
    assert response.body == {"error": {"code": "PAYLOAD_TOO_LARGE", "message": "Request body exceeds 64 KiB."}}


def test_proxy_response_headers_and_request_id(stack: RunningStack, caller: Caller) -> None:
    response = stack.request("POST", "/tickets", token=caller.token, body={"title": "headers"})
    assert response.status == 201
    assert response.headers["location"] == f"/tickets/{response.body['ticket_id']}"
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-amzn-requestid"]


def test_invalid_json_reaches_the_function(stack: RunningStack, caller: Caller) -> None:
    response = stack.request(
        "POST", "/tickets", token=caller.token, raw=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status == 400
    assert response.error_code == "INVALID_JSON"
