from __future__ import annotations

from typing import Any

import pytest

from support_tickets.errors import Forbidden, Unauthorized
from support_tickets.identity import caller_from_claims, caller_from_event, parse_groups


def claims(**overrides: Any) -> dict[str, Any]:
    base = {"cognito:username": "alice", "custom:tenant_id": "acme", "token_use": "id"}
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def test_tenant_and_user_come_from_the_claims() -> None:
    caller = caller_from_claims(claims())
    assert (caller.tenant_id, caller.username, caller.is_admin) == ("acme", "alice", False)


@pytest.mark.parametrize("groups", ["admin", "support,admin", "[support admin]", ["admin"], "admin, support"])
def test_admin_group_in_any_shape_api_gateway_sends(groups: object) -> None:
    assert caller_from_claims(claims(**{"cognito:groups": groups})).is_admin


@pytest.mark.parametrize("groups", ["", "administrators", "[support]", "Admin", "notadmin,support"])
def test_other_groups_are_not_admin(groups: str) -> None:
    assert not caller_from_claims(claims(**{"cognito:groups": groups})).is_admin


def test_parse_groups_handles_none() -> None:
    assert parse_groups(None) == frozenset()


@pytest.mark.parametrize("event", [{}, {"requestContext": {}}, {"requestContext": {"authorizer": {}}}])
def test_missing_claims_are_unauthorized(event: dict[str, Any]) -> None:
    with pytest.raises(Unauthorized):
        caller_from_event(event)


def test_missing_username_is_unauthorized() -> None:
    with pytest.raises(Unauthorized):
        caller_from_claims(claims(**{"cognito:username": None}))


@pytest.mark.parametrize("tenant", [None, "", "*", "acme|", "ACME", "a*", "acme corp", "x" * 64])
def test_missing_or_malformed_tenant_is_forbidden_never_a_default(tenant: str | None) -> None:
    with pytest.raises(Forbidden):
        caller_from_claims(claims(**{"custom:tenant_id": tenant}))


def test_the_tenant_is_read_from_the_authorizer_only() -> None:
    event = {
        "body": '{"tenant_id": "evil"}',
        "queryStringParameters": {"tenant_id": "evil"},
        "headers": {"X-Tenant-Id": "evil"},
        "requestContext": {"authorizer": {"claims": claims()}},
    }
    assert caller_from_event(event).tenant_id == "acme"
