"""Admin rights over HTTP, with real tokens of users in real groups of the
local pool: the gateway passes ``cognito:groups`` as API Gateway's REST
authorizer does (the names joined with ","), and Cognito allows "," and
brackets in group names."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import RunningStack, new_tenant_id


def admin_routes_answer(stack: RunningStack, groups: list[str]) -> tuple[int, int]:
    """A new user of a new tenant in ``groups``: the statuses of GET /aggregates
    and of DELETE of her own ticket."""
    tenant = new_tenant_id()
    token = token_in_groups(stack, tenant, f"u-{tenant}", groups)
    ticket = stack.request("POST", "/tickets", token=token, body={"title": "t"}).body["ticket_id"]
    aggregates = stack.request("GET", "/aggregates", token=token).status
    return aggregates, stack.request("DELETE", f"/tickets/{ticket}", token=token).status


def token_in_groups(stack: RunningStack, tenant: str, username: str, groups: list[str]) -> str:
    pool = stack.pool()
    stack.token(tenant, username)  # creates the user in the tenant
    existing = {group["GroupName"] for group in pool.cognito.list_groups(UserPoolId=pool.pool_id)["Groups"]}
    for group in groups:
        if group not in existing:
            pool.cognito.create_group(UserPoolId=pool.pool_id, GroupName=group)
        pool.cognito.admin_add_user_to_group(UserPoolId=pool.pool_id, Username=username, GroupName=group)
    return stack.token(tenant, username)


@pytest.mark.parametrize(
    "groups",
    [
        pytest.param(["x,admin"], id="x,admin"),
        pytest.param(["[admin]"], id="[admin]"),
        pytest.param(["support", "x,admin"], id="support+x,admin"),
        pytest.param(["[support", "admin]"], id="[support+admin]"),
    ],
)
def test_group_names_that_look_like_admin_are_not_admin(stack: RunningStack, groups: list[str]) -> None:
    assert admin_routes_answer(stack, groups) == (403, 403)


@pytest.mark.parametrize(
    "groups", [pytest.param(["admin"], id="admin"), pytest.param(["support", "admin", "x,y"], id="admin+others")]
)
def test_the_admin_group_among_others_is_admin(stack: RunningStack, groups: list[str]) -> None:
    assert admin_routes_answer(stack, groups) == (200, 204)
