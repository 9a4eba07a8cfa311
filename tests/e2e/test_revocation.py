"""Revocation against the local stack: a user whom the operator signs out
globally, disables or deletes is refused on every route once API Gateway's
authorizer cache has let go of its token, with nothing done in this project's
tools. The authorizer keeps no credentials of its own: each invocation asks the
identity pool, whose ``ServerSideTokenCheck`` refuses the token.

The stack here caches the authorizer's answers for 2 s (``--authorizer-cache-seconds``)
instead of the template's 300 s, so the window is short; the bound is the same
rule: refused once the cached answer has expired, never later.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from ops.routes import api_routes
from tests.e2e.conftest import Response, RunningStack, new_tenant_id, start_stack, stop_stack

CACHE_SECONDS = 2
# Bounded wait for the first refusal: the cache window, plus a loaded machine's slack.
REFUSED_WITHIN_S = 60


@pytest.fixture(scope="module")
def short_cache_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("revocation-stack"), "--no-seed", "--authorizer-cache-seconds", str(CACHE_SECONDS)
    )
    try:
        yield running
    finally:
        stop_stack(running)


def revocations(stack: RunningStack) -> dict[str, Callable[..., object]]:
    cognito = stack.pool().cognito
    return {
        "signed-out": cognito.admin_user_global_sign_out,
        "disabled": cognito.admin_disable_user,
        "deleted": cognito.admin_delete_user,
    }


def every_route(stack: RunningStack, token: str, ticket_id: str) -> dict[str, Response]:
    answers = {}
    for route in api_routes():
        path = route.url(ticket_id)
        answers[route.key] = stack.request(route.method, path, token=token, body=route.needs.body)
    return answers


@pytest.mark.parametrize("how", ["signed-out", "disabled", "deleted"])
def test_a_revoked_user_is_refused_on_every_route_once_the_cached_answer_expires(
    short_cache_stack: RunningStack, how: str
) -> None:
    stack = short_cache_stack
    tenant = new_tenant_id()
    username = f"u-{tenant}"
    token = stack.token(tenant, username, admin=True)
    # Given a user whose requests work (the authorizer's answer now cached)
    created = stack.request("POST", "/tickets", token=token, body={"title": "before"})
    assert created.status == 201, created.body
    ticket_id = created.body["ticket_id"]
    assert stack.request("GET", f"/tickets/{ticket_id}/summary", token=token).status == 200
    # When the operator revokes the user in the user pool, and nothing else
    pool = stack.pool()
    revocations(stack)[how](UserPoolId=pool.pool_id, Username=username)
    revoked_at = time.monotonic()
    # Then its token is refused as soon as the cached answer expires
    while True:
        answer = stack.request("GET", f"/tickets/{ticket_id}/summary", token=token)
        if answer.status in {401, 403}:
            break
        assert answer.status == 200, answer.body
        assert time.monotonic() - revoked_at < REFUSED_WITHIN_S, f"still served {REFUSED_WITHIN_S} s after"
        time.sleep(0.25)
    # And on every route, writes included, with nothing written
    answers = every_route(stack, token, ticket_id)
    assert {key: answer.status for key, answer in answers.items() if answer.status not in {401, 403}} == {}
    other = stack.token(tenant, f"w-{tenant}", admin=True)
    summary = stack.request("GET", f"/tickets/{ticket_id}/summary", token=other)
    assert summary.status == 200
    assert summary.body["version"] == created.body["version"]


def test_a_current_user_keeps_working_across_a_cache_expiry(short_cache_stack: RunningStack) -> None:
    # The control: the same token, past the cache window, is exchanged again and served,
    # on the route it used before and on another.
    stack = short_cache_stack
    tenant = new_tenant_id()
    token = stack.token(tenant, f"u-{tenant}")
    assert stack.request("GET", "/tickets", token=token).status == 200
    time.sleep(CACHE_SECONDS + 0.5)
    assert stack.request("GET", "/tickets", token=token).status == 200
    assert stack.request("POST", "/tickets", token=token, body={"title": "still here"}).status == 201
