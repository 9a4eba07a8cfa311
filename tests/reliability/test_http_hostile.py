"""A representative subset of the hostile-input table over HTTP, against the
local stack (API Gateway emulation, Cognito JWTs, the IAM guard): what only
the wire shows (percent-encoded paths, raw bytes, the gateway's own limits,
real tokens whose ``custom:tenant_id`` is empty or a wildcard, which the API's
authorizer refuses) gets its documented 4xx, never a 5xx, and the table is
unchanged afterwards. (In-process, ``test_hostile_input.py`` gives the
functions such tenants in the authorizer's context, as a broken authorizer
would: 403.)

Tokens with bad tenant claims are real: the local user pool (moto) lets the
operator create users with any ``custom:tenant_id`` value, which the stack's
own onboarding (``ops.users``) refuses to do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ops.routes import api_routes
from ops.users import id_token, new_password
from tests.e2e.conftest import Response, RunningStack, new_tenant_id
from tests.e2e.test_isolation import table_state

GATEWAY_NO_ROUTE = {"error": {"code": "NOT_FOUND", "message": "No such route: check the method and the path."}}


@dataclass(frozen=True)
class Tenants:
    me: str
    token: str
    admin_token: str
    foreign: str
    foreign_token: str
    ticket: str
    foreign_ticket: str
    cursor: str


@pytest.fixture(scope="module")
def tenants(stack: RunningStack) -> Tenants:
    me = new_tenant_id()
    foreign = me + "0"  # "1" and "10"
    token, foreign_token = stack.token(me, f"u-{me}"), stack.token(foreign, f"u-{foreign}")
    tickets = [stack.request("POST", "/tickets", token=token, body={"title": f"t{n}"}) for n in range(2)]
    foreign_ticket = stack.request("POST", "/tickets", token=foreign_token, body={"title": "theirs"})
    assert all(r.status == 201 for r in [*tickets, foreign_ticket])
    cursor = stack.request("GET", "/tickets?limit=1", token=token).body["next_cursor"]
    return Tenants(
        me=me,
        token=token,
        admin_token=stack.token(me, f"a-{me}", admin=True),
        foreign=foreign,
        foreign_token=foreign_token,
        ticket=tickets[0].body["ticket_id"],
        foreign_ticket=foreign_ticket.body["ticket_id"],
        cursor=cursor,
    )


@pytest.fixture
def unchanged(stack: RunningStack) -> Iterator[None]:
    before = table_state(stack)
    yield
    assert table_state(stack) == before


def odd_token(stack: RunningStack, tenant_value: str) -> str:
    """A real ID token of a user whose immutable tenant attribute is ``tenant_value``."""
    pool = stack.pool()
    username = f"odd-{new_tenant_id()}"
    pool.cognito.admin_create_user(
        UserPoolId=pool.pool_id,
        Username=username,
        UserAttributes=[{"Name": "custom:tenant_id", "Value": tenant_value}],
        TemporaryPassword=new_password(),
        MessageAction="SUPPRESS",
    )
    return id_token(pool, username)


def error(response: Response, status: int, code: str) -> None:
    assert response.status == status, response.body
    assert response.headers.get("content-type", "").startswith("application/json")
    assert set(response.body) == {"error"}
    assert response.body["error"]["code"] == code
    assert "Traceback" not in response.raw.decode()


# ---------------------------------------------------------------- paths
@pytest.mark.parametrize(
    "path",
    [
        "/tickets/a%7Cb",
        "/tickets/a%23b",
        "/tickets/%2A",
        "/tickets/%25",
        "/tickets/%2e%2e",
        "/tickets/%2e%2e%2f",
        "/tickets/%00",
        "/tickets/%F0%9F%98%80",
        "/tickets/<foreign>",
        "/tickets/<foreign>/summary",
    ],
)
def test_hostile_ticket_ids_in_the_path_are_404(
    stack: RunningStack, tenants: Tenants, unchanged: None, path: str
) -> None:
    path = path.replace("<foreign>", tenants.foreign_ticket)
    error(stack.request("GET", path, token=tenants.token), 404, "TICKET_NOT_FOUND")
    error(
        stack.request("PATCH", path.removesuffix("/summary"), token=tenants.token, body={"title": "x"}),
        404,
        "TICKET_NOT_FOUND",
    )
    error(stack.request("DELETE", path.removesuffix("/summary"), token=tenants.admin_token), 404, "TICKET_NOT_FOUND")


@pytest.mark.parametrize("path", ["/tickets/..%2Faggregates", "/tickets/../aggregates", "/tickets/<own>/../<own>"])
def test_path_traversal_matches_no_route(stack: RunningStack, tenants: Tenants, unchanged: None, path: str) -> None:
    # API Gateway's own answer for a path no route has (the template's MISSING_AUTHENTICATION_TOKEN)
    response = stack.request("GET", path.replace("<own>", tenants.ticket), token=tenants.admin_token)
    assert response.status == 404
    assert response.body == GATEWAY_NO_ROUTE


# ---------------------------------------------------------------- bodies
@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        (b'{"title": "t"', 400, "INVALID_JSON"),
        (b"[" * 30000 + b"]" * 30000, 400, "INVALID_JSON"),
        (b'[{"title": "t"}]', 400, "VALIDATION_ERROR"),
        (b'{"title": "t", "tenant_id": "other"}', 400, "VALIDATION_ERROR"),
        (b'{"title": "\\ud800"}', 400, "VALIDATION_ERROR"),
        ('{"title": "' + "\U0001f600" * 201 + '"}', 400, "VALIDATION_ERROR"),
        ('{"title": "t", "description": "' + "é" * (32 * 1024) + '"}', 413, "PAYLOAD_TOO_LARGE"),
        (b"x" * (1024 * 1024 + 1), 413, "PAYLOAD_TOO_LARGE"),  # the gateway's limit: never read
    ],
    ids=["unclosed", "deep", "array", "unknown-field", "lone-surrogate", "201-emoji", "64KiB+1-of-2-byte", "1MiB+1"],
)
def test_hostile_bodies_get_their_documented_4xx(
    stack: RunningStack, tenants: Tenants, unchanged: None, *, raw: bytes | str, status: int, code: str
) -> None:
    data = raw.encode() if isinstance(raw, str) else raw
    headers = {"Content-Type": "application/json"}
    error(stack.request("POST", "/tickets", token=tenants.token, raw=data, headers=headers), status, code)


def test_unicode_at_the_limits_round_trips_over_http(stack: RunningStack, tenants: Tenants) -> None:
    body = {"title": "\U0001f600" * 200, "description": "\u202e\u0000" + "\U0001d11e" * 9_998}
    created = stack.request(
        "POST",
        "/tickets",
        token=tenants.token,
        raw=json.dumps(body, ensure_ascii=False).encode(),
        headers={"Content-Type": "APPLICATION/JSON; charset=UTF-8"},
    )
    assert created.status == 201, created.body
    fetched = stack.request("GET", f"/tickets/{created.body['ticket_id']}/summary", token=tenants.token)
    assert {k: fetched.body[k] for k in body} == body


# ---------------------------------------------------------------- cursors and identity
@pytest.mark.parametrize("which", ["truncated", "foreign", "garbage"])
def test_forged_cursors_are_400(stack: RunningStack, tenants: Tenants, unchanged: None, which: str) -> None:
    cursor = {
        "truncated": tenants.cursor[:-4],
        "foreign": tenants.cursor,  # presented by the other tenant
        "garbage": "%21%21%21",
    }[which]
    token = tenants.foreign_token if which == "foreign" else tenants.token
    error(stack.request("GET", f"/tickets?limit=1&cursor={cursor}", token=token), 400, "INVALID_CURSOR")


def test_tenant_1_never_sees_tenant_10(stack: RunningStack, tenants: Tenants, unchanged: None) -> None:
    listed = stack.request("GET", "/tickets?limit=100", token=tenants.token)
    assert listed.status == 200
    assert tenants.foreign_ticket not in {item["ticket_id"] for item in listed.body["items"]}
    response = stack.request(
        "POST",
        "/tickets/status",
        token=tenants.token,
        body={"ticket_ids": [tenants.ticket, tenants.foreign_ticket], "status": "CLOSED"},
    )
    error(response, 404, "TICKET_NOT_FOUND")
    assert response.body["error"]["details"] == {"missing_ticket_ids": [tenants.foreign_ticket]}


@pytest.mark.parametrize("tenant_value", ["", "*", "<me>|*", "<me>%", "<ME>"])
def test_real_tokens_with_a_bad_tenant_claim_are_401_on_every_route(
    stack: RunningStack, tenants: Tenants, unchanged: None, tenant_value: str
) -> None:
    value = tenant_value.replace("<me>", tenants.me).replace("<ME>", tenants.me.upper())
    token = odd_token(stack, value)
    # The API's authorizer refuses the token itself (its tenant is no valid
    # tenant id): API Gateway's 401, before any function or usage plan.
    for route in api_routes():  # every route of the template (ops/routes.py)
        response = stack.request(route.method, route.url(tenants.ticket), token=token, body=route.body(tenants.ticket))
        error(response, 401, "UNAUTHORIZED")


def test_admin_routes_need_the_admin_group(stack: RunningStack, tenants: Tenants, unchanged: None) -> None:
    for route in [route for route in api_routes() if route.needs.admin]:
        # A valid request (the route's body, if any) but for the group.
        body = route.body(tenants.ticket)
        response = stack.request(route.method, route.url(tenants.ticket), token=tenants.token, body=body)
        error(response, 403, "FORBIDDEN")
