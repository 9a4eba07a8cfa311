from __future__ import annotations

import hashlib
from typing import Any

import pytest

from support_tickets.errors import Forbidden, Unauthorized
from support_tickets.identity import IdToken, bound_token, check_id_token, parse_groups
from support_tickets.identity import caller_from_claims as caller_of
from support_tickets.identity import caller_from_event as caller_of_event
from support_tickets.settings import ConfigurationError, get_settings
from tests.conftest import jwt_shaped

CLIENT = "ourclient"
OTHER_CLIENT = "anotherclientofthepool"
EXPIRES = 1795258800


def claims(**overrides: Any) -> dict[str, Any]:
    base = {
        "sub": "0c1b5f3a-7d2e",
        "jti": "7d2e3f4a-5b6c",
        "cognito:username": "alice",
        "custom:tenant_id": "acme",
        "token_use": "id",
        "aud": CLIENT,
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def bearer(found: dict[str, Any], **token_changes: Any) -> str:
    """The Authorization header with the token these claims came from."""
    token = {**found, "exp": EXPIRES, **token_changes}
    if isinstance(token.get("cognito:groups"), str):
        token["cognito:groups"] = token["cognito:groups"].split(",") if token["cognito:groups"] else []
    return f"Bearer {jwt_shaped({key: value for key, value in token.items() if value is not None})}"


def caller_from_claims(found: dict[str, Any] | None) -> Any:
    return caller_of(found, {CLIENT}, bearer(found or {}))


def caller_from_event(event: dict[str, Any]) -> Any:
    return caller_of_event(event, {CLIENT})


def test_tenant_and_user_come_from_the_claims() -> None:
    caller = caller_from_claims(claims())
    assert (caller.tenant_id, caller.username, caller.is_admin) == ("acme", "alice", False)


def in_groups(*groups: str, **token_changes: Any) -> tuple[dict[str, Any], str]:
    """Claims as a REST API's Cognito authorizer passes them (the array joined
    with ","), and the Authorization header with the token they came from."""
    found = claims(**{"cognito:groups": ",".join(groups)})
    return found, bearer(found, **{"cognito:groups": list(groups), **token_changes})


@pytest.mark.parametrize(
    ("value", "groups"),
    [
        (None, frozenset()),
        ("", frozenset()),
        ("admin", {"admin"}),
        ("[admin]", {"[admin]"}),
        ("[support admin]", {"[support admin]"}),
        ("Admin", {"Admin"}),
        (" admin", {" admin"}),
        (["admin"], frozenset()),
        (("admin",), frozenset()),
        (1, frozenset()),
        ("support,admin", None),
        ("x,admin", None),
        (",", None),
    ],
)
def test_parse_groups_reads_the_rest_apis_form_only(value: object, groups: object) -> None:
    assert parse_groups(value) == groups


@pytest.mark.parametrize("groups", [("admin",), ("support", "admin"), ("admin", "x,y"), ("[admin]", "admin")])
def test_admin_among_the_tokens_groups(groups: tuple[str, ...]) -> None:
    found, authorization = in_groups(*groups)
    assert caller_of(found, {CLIENT}, authorization).is_admin


@pytest.mark.parametrize(
    "groups",
    [
        (),
        ("administrators",),
        ("Admin",),
        ("[admin]",),
        ("x,admin",),
        ("admin,",),
        ("support", "x,admin"),
        ("[a", "admin]"),
    ],
)
def test_no_other_group_name_is_admin(groups: tuple[str, ...]) -> None:
    found, authorization = in_groups(*groups)
    assert not caller_of(found, {CLIENT}, authorization).is_admin


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer not-a-token", "Bearer a.b.c", "Bearer a.!!!.c"],
)
def test_a_request_without_its_token_is_unauthorized(authorization: str | None) -> None:
    # Its token is what the layer exchanges for credentials: without it, nothing.
    with pytest.raises(Unauthorized):
        caller_of(claims(**{"cognito:groups": "support,admin"}), {CLIENT}, authorization)


def test_ambiguous_groups_whose_token_has_no_group_array_are_no_groups() -> None:
    found = claims(**{"cognito:groups": "support,admin"})
    authorization = f"Bearer {jwt_shaped({**found, 'exp': EXPIRES})}"  # the groups a string, not the array
    assert not caller_of(found, {CLIENT}, authorization).is_admin


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"cognito:groups": ["support", "admin", "more"]}, id="other-groups"),
        pytest.param({"cognito:groups": ["support,admin"]}, id="one-group-with-a-comma"),
    ],
)
def test_the_header_tokens_groups_must_be_the_claims(changes: dict[str, Any]) -> None:
    found, authorization = in_groups("support", "admin", **changes)
    assert not caller_of(found, {CLIENT}, authorization).is_admin
    control, authorization = in_groups("support", "admin")
    assert caller_of(control, {CLIENT}, authorization).is_admin


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"jti": "another-token"}, id="another-jti"),
        pytest.param({"jti": None}, id="no-jti"),
        pytest.param({"sub": "another-user"}, id="another-user"),
        pytest.param({"custom:tenant_id": "globex"}, id="another-tenant"),
        pytest.param({"token_use": "access"}, id="an-access-token"),
        pytest.param({"exp": None}, id="no-expiry"),
        pytest.param({"exp": "1795258800"}, id="expiry-not-a-number"),
        pytest.param({"exp": True}, id="expiry-a-boolean"),
    ],
)
def test_the_header_token_must_be_the_verified_one(changes: dict[str, Any]) -> None:
    # Credentials come from the header's token, keys from the claims: a request
    # whose two disagree is refused before either is used.
    found = claims()
    with pytest.raises(Unauthorized):
        caller_of(found, {CLIENT}, bearer(found, **changes))
    assert caller_of(found, {CLIENT}, bearer(found)).tenant_id == "acme"


def test_claims_without_a_jti_or_sub_bind_no_token() -> None:
    for missing in ("jti", "sub"):
        found = claims(**{missing: None})
        with pytest.raises(Unauthorized):
            caller_of(found, {CLIENT}, bearer(found))


def test_the_caller_carries_its_token_never_in_a_repr() -> None:
    found = claims()
    authorization = bearer(found)
    token = authorization.removeprefix("Bearer ")
    caller = caller_of(found, {CLIENT}, authorization)
    assert caller.token == IdToken(value=token, subject="0c1b5f3a-7d2e", expires_at=EXPIRES)
    assert caller.token.digest == hashlib.sha256(token.encode()).hexdigest()
    assert token not in repr(caller)
    assert token not in repr(caller.token)
    assert bound_token(token, found) == caller.token  # a bare token, as the authorizer also accepts


def test_the_header_is_found_in_the_event_in_any_letter_case() -> None:
    found, authorization = in_groups("support", "admin")
    event = {"headers": {"authorization": authorization}, "requestContext": {"authorizer": {"claims": found}}}
    assert caller_from_event(event).is_admin


@pytest.mark.parametrize("event", [{}, {"requestContext": {}}, {"requestContext": {"authorizer": {}}}])
def test_missing_claims_are_unauthorized(event: dict[str, Any]) -> None:
    with pytest.raises(Unauthorized):
        caller_from_event(event)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"aud": OTHER_CLIENT}, id="another-app-client"),
        pytest.param({"aud": None}, id="no-audience"),
        pytest.param({"aud": [CLIENT]}, id="audience-not-a-string"),
        pytest.param({"aud": CLIENT.upper()}, id="audience-other-case"),
        pytest.param({"token_use": "access"}, id="access-token"),
        pytest.param({"token_use": None}, id="no-token-use"),
        pytest.param({"token_use": "ID"}, id="token-use-other-case"),
        # An access token: the client in client_id, no aud, no custom attributes.
        pytest.param({"token_use": "access", "aud": None, "client_id": CLIENT}, id="real-access-token-shape"),
    ],
)
def test_only_id_tokens_of_an_allowed_app_client_are_accepted(changes: dict[str, Any]) -> None:
    with pytest.raises(Unauthorized):
        caller_from_claims(claims(**changes))
    with pytest.raises(Unauthorized):
        check_id_token(claims(**changes), {CLIENT})


def test_any_of_several_allowed_clients() -> None:
    other = claims(aud=OTHER_CLIENT)
    assert caller_of(other, {CLIENT, OTHER_CLIENT}, bearer(other)).tenant_id == "acme"
    with pytest.raises(Unauthorized):
        caller_of(claims(), set(), bearer(claims()))


def test_the_token_check_comes_before_the_tenant() -> None:
    # Another client's token with a malformed tenant is a 401, not a 403.
    with pytest.raises(Unauthorized):
        caller_from_claims(claims(aud=OTHER_CLIENT, **{"custom:tenant_id": "*"}))


@pytest.mark.parametrize(
    ("value", "expected"),
    [("ourclient", {"ourclient"}), ("a1,b2", {"a1", "b2"}), (" a1 , b2 ", {"a1", "b2"}), ("x+y_z", {"x+y_z"})],
)
def test_allowed_client_ids_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: set[str]
) -> None:
    monkeypatch.setenv("ALLOWED_CLIENT_IDS", value)
    get_settings.cache_clear()
    assert get_settings().allowed_client_ids == expected


@pytest.mark.parametrize("value", [None, "", " ", "a,,b", "a b", "a;b", "x" * 129])
def test_missing_or_malformed_client_ids_fail_at_cold_start(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("ALLOWED_CLIENT_IDS")
    else:
        monkeypatch.setenv("ALLOWED_CLIENT_IDS", value)
    get_settings.cache_clear()
    with pytest.raises(ConfigurationError, match="ALLOWED_CLIENT_IDS"):
        get_settings()


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
        "headers": {"X-Tenant-Id": "evil", "Authorization": bearer(claims())},
        "requestContext": {"authorizer": {"claims": claims()}},
    }
    assert caller_from_event(event).tenant_id == "acme"
