"""The caller, from the API's Lambda authorizer's context and the request's own token."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import pytest

from stack_model.template import template
from support_tickets.auth.authorizer import caller_context
from support_tickets.core.errors import Forbidden, Unauthorized
from support_tickets.core.identity import (
    BEARER_HEADER,
    IdToken,
    TenantCredentials,
    bearer_token,
    bound_token,
    check_id_token,
    parse_groups,
)
from support_tickets.core.identity import caller_from_context as caller_of
from support_tickets.core.identity import caller_from_event as caller_of_event
from support_tickets.core.settings import ConfigurationError, Settings, get_settings, variables
from tests.conftest import INT_ODDITIES, NOT_ASCII_NUMBERS, jwt_shaped

CLIENT = "ourclient"
CREDENTIALS = TenantCredentials("ASIAEXAMPLEEXAMPLE", "secret-of-the-credentials", "session-token-of-them", 1795258000)
OTHER_CLIENT = "anotherclientofthepool"
EXPIRES = 1795258800


def claims(**overrides: Any) -> dict[str, Any]:
    """An ID token's payload (``None`` removes a claim)."""
    base: dict[str, Any] = {
        "sub": "0c1b5f3a-7d2e",
        "jti": "7d2e3f4a-5b6c",
        "cognito:username": "alice",
        "custom:tenant_id": "acme",
        "token_use": "id",
        "aud": CLIENT,
        "exp": EXPIRES,
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def context_of(payload: dict[str, Any], tier: str | None = None) -> dict[str, str]:
    """The authorizer's context for a token with ``payload``: the caller and its tenant credentials."""
    return {**caller_context(payload, tier), **CREDENTIALS.as_context()}


def bearer(payload: dict[str, Any], **token_changes: Any) -> str:
    """The Authorization header with a token of this payload (plus changes)."""
    token = {**payload, **token_changes}
    return f"Bearer {jwt_shaped({key: value for key, value in token.items() if value is not None})}"


def caller_from(payload: dict[str, Any], **token_changes: Any) -> Any:
    """The caller of a request whose token has ``payload`` (the authorizer's
    context made from it), its header's token with ``token_changes``."""
    return caller_of(context_of(payload, "basic"), {CLIENT}, bearer(payload, **token_changes))


def caller_from_event(event: dict[str, Any]) -> Any:
    return caller_of_event(event, {CLIENT})


def test_tenant_and_user_come_from_the_context() -> None:
    caller = caller_from(claims())
    assert (caller.tenant_id, caller.username, caller.is_admin) == ("acme", "alice", False)


def test_the_context_is_flat_strings() -> None:
    context = caller_context(claims(**{"cognito:groups": ["support", "admin"]}), "premium")
    assert context == {
        "tenant_id": "acme",
        "username": "alice",
        "groups": '["support", "admin"]',
        "sub": "0c1b5f3a-7d2e",
        "jti": "7d2e3f4a-5b6c",
        "tier": "premium",
    }


@pytest.mark.parametrize(
    ("value", "groups"),
    [
        (None, frozenset()),
        ("", frozenset()),
        ("[]", frozenset()),
        ('["admin"]', {"admin"}),
        ('["x,admin"]', {"x,admin"}),
        ('["support", "admin"]', {"support", "admin"}),
        ("admin", frozenset()),  # not JSON: nothing
        ("support,admin", frozenset()),
        ('"admin"', frozenset()),  # JSON, not an array
        ('["admin", 1]', frozenset()),
        ('[""]', frozenset()),
        (["admin"], frozenset()),  # not a string: an authorizer context never holds one
        ("[" * 5000, frozenset()),
    ],
)
def test_parse_groups_reads_a_json_array_of_names_only(value: object, groups: object) -> None:
    assert parse_groups(value) == groups


@pytest.mark.parametrize("groups", [["admin"], ["support", "admin"], ["admin", "x,y"], ["[admin]", "admin"]])
def test_admin_among_the_tokens_groups(groups: list[str]) -> None:
    assert caller_from(claims(**{"cognito:groups": groups})).is_admin


@pytest.mark.parametrize(
    "groups",
    [[], ["administrators"], ["Admin"], ["[admin]"], ["x,admin"], ["admin,"], ["support", "x,admin"], ["[a", "admin]"]],
)
def test_no_other_group_name_is_admin(groups: list[str]) -> None:
    # A group name with a comma is one name: the context carries the token's array as it is.
    assert not caller_from(claims(**{"cognito:groups": groups})).is_admin


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer not-a-token", "Bearer a.b.c", "Bearer a.!!!.c"],
)
def test_a_request_without_its_token_is_unauthorized(authorization: str | None) -> None:
    # Its token is what the layer exchanges for credentials: without it, nothing.
    with pytest.raises(Unauthorized):
        caller_of(context_of(claims()), {CLIENT}, authorization)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"jti": "another-token"}, id="another-jti"),
        pytest.param({"jti": None}, id="no-jti"),
        pytest.param({"sub": "another-user"}, id="another-user"),
        pytest.param({"custom:tenant_id": "globex"}, id="another-tenant"),
        pytest.param({"token_use": "access"}, id="an-access-token"),
        pytest.param({"aud": OTHER_CLIENT}, id="another-app-client"),
        pytest.param({"exp": None}, id="no-expiry"),
        pytest.param({"exp": "1795258800"}, id="expiry-not-a-number"),
        pytest.param({"exp": True}, id="expiry-a-boolean"),
    ],
)
def test_the_header_token_must_be_the_verified_one(changes: dict[str, Any]) -> None:
    # Credentials come from the header's token, keys from the context: a request
    # whose two disagree is refused before either is used.
    with pytest.raises(Unauthorized):
        caller_from(claims(), **changes)
    assert caller_from(claims()).tenant_id == "acme"


def test_a_context_without_a_jti_or_sub_binds_no_token() -> None:
    for missing in ("jti", "sub"):
        context = {key: value for key, value in context_of(claims()).items() if key != missing}
        with pytest.raises(Unauthorized):
            caller_of(context, {CLIENT}, bearer(claims()))


def test_the_caller_carries_its_token_never_in_a_repr() -> None:
    payload = claims()
    authorization = bearer(payload)
    token = authorization.removeprefix("Bearer ")
    caller = caller_of(context_of(payload), {CLIENT}, authorization)
    assert caller.token == IdToken(value=token, subject="0c1b5f3a-7d2e", expires_at=EXPIRES)
    assert caller.token.digest == hashlib.sha256(token.encode()).hexdigest()
    assert token not in repr(caller)
    assert token not in repr(caller.token)


def test_the_caller_carries_the_contexts_credentials_never_their_secrets_in_a_repr() -> None:
    caller = caller_from(claims())
    assert caller.credentials == CREDENTIALS
    assert "ASIAEXAMPLEEXAMPLE" in repr(caller.credentials)
    for secret in ("secret-of-the-credentials", "session-token-of-them"):
        assert secret not in repr(caller)


@pytest.mark.parametrize(
    "broken",
    [
        {"access_key_id": None},
        {"secret_access_key": None},
        {"session_token": None},
        {"credentials_expire_at": None},
        {"access_key_id": ""},
        {"credentials_expire_at": "soon"},
        {"credentials_expire_at": "1.5"},
        *({"credentials_expire_at": f"179525880{digit}"} for digit in NOT_ASCII_NUMBERS),
        *({"credentials_expire_at": f"179525880{odd}"} for odd in INT_ODDITIES),
    ],
    ids=lambda broken: "-".join(f"{key}={value}" for key, value in broken.items()),
)
def test_a_context_without_usable_credentials_is_unauthorized(broken: dict[str, Any]) -> None:
    # What a misconfigured authorizer (or an old cached answer) would pass: no data, a 401.
    context = {**context_of(claims()), **broken}
    context = {key: value for key, value in context.items() if value is not None}
    with pytest.raises(Unauthorized):
        caller_of(context, {CLIENT}, bearer(claims()))


@pytest.mark.parametrize(
    "spell",
    [
        pytest.param(lambda token: token, id="bare"),
        pytest.param(lambda token: f"bearer {token}", id="lower-case"),
        pytest.param(lambda token: f"BEARER {token}", id="upper-case"),
        pytest.param(lambda token: f"Bearer  {token}", id="two-spaces"),
        pytest.param(lambda token: f"Bearer\t{token}", id="tab"),
        pytest.param(lambda token: f" Bearer {token}", id="leading-space"),
        pytest.param(lambda token: f"Bearer {token} ", id="trailing-space"),
        pytest.param(lambda token: f"Bearer {token}\n", id="trailing-newline"),
        pytest.param(lambda token: f"Bearer {token}=", id="padded"),
    ],
)
def test_only_the_one_spelling_of_the_header_carries_a_token(spell: Callable[[str], str]) -> None:
    """The template's ValidationExpression lets only ``Bearer <JWT>`` reach the
    authorizer; the functions' re-check agrees with it."""
    payload = claims()
    token = bearer(payload).removeprefix("Bearer ")
    assert bearer_token(f"Bearer {token}") == token
    assert bearer_token(spell(token)) is None
    with pytest.raises(Unauthorized):
        bound_token(spell(token), context_of(payload), {CLIENT})


def test_the_header_pattern_is_the_templates_validation_expression() -> None:
    (authorizer,) = template()["Resources"]["TicketsApi"]["Properties"]["Auth"]["Authorizers"].values()
    assert authorizer["Identity"]["ValidationExpression"] == f"^{BEARER_HEADER}$"


def test_the_header_is_found_in_the_event_in_any_letter_case() -> None:
    payload = claims(**{"cognito:groups": ["support", "admin"]})
    event = {"headers": {"authorization": bearer(payload)}, "requestContext": {"authorizer": context_of(payload)}}
    assert caller_from_event(event).is_admin


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"requestContext": {}},
        {"requestContext": {"authorizer": {}}},
        {"requestContext": {"authorizer": {"principalId": "x", "integrationLatency": 0}}},
        # The Cognito authorizer's shape: no longer what the API passes.
        {"requestContext": {"authorizer": {"claims": {"custom:tenant_id": "acme", "cognito:username": "a"}}}},
    ],
)
def test_a_missing_context_is_unauthorized(event: dict[str, Any]) -> None:
    with pytest.raises(Unauthorized):
        caller_from_event({**event, "headers": {"Authorization": bearer(claims())}})


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
    # The authorizer refuses these first; the functions check the header's token again.
    with pytest.raises(Unauthorized):
        caller_from(claims(**changes))
    with pytest.raises(Unauthorized):
        check_id_token(claims(**changes), {CLIENT})


def test_any_of_several_allowed_clients() -> None:
    other = claims(aud=OTHER_CLIENT)
    assert caller_of(context_of(other), {CLIENT, OTHER_CLIENT}, bearer(other)).tenant_id == "acme"
    with pytest.raises(Unauthorized):
        caller_of(context_of(claims()), set(), bearer(claims()))


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
        caller_from(claims(**{"cognito:username": None}))


def test_a_missing_tenant_is_unauthorized_never_a_default() -> None:
    with pytest.raises(Unauthorized):
        caller_from(claims(**{"custom:tenant_id": None}))


@pytest.mark.parametrize("tenant", ["", "*", "acme|", "ACME", "a*", "acme corp", "x" * 64])
def test_a_malformed_tenant_is_forbidden_never_a_default(tenant: str) -> None:
    with pytest.raises(Forbidden):
        caller_from(claims(**{"custom:tenant_id": tenant}))


def test_the_tenant_is_read_from_the_authorizer_only() -> None:
    event = {
        "body": '{"tenant_id": "evil"}',
        "queryStringParameters": {"tenant_id": "evil"},
        "headers": {"X-Tenant-Id": "evil", "Authorization": bearer(claims())},
        "requestContext": {"authorizer": context_of(claims())},
    }
    assert caller_from_event(event).tenant_id == "acme"
    assert json.loads(caller_context(claims())["groups"]) == []


def test_every_setting_has_its_environment_variable() -> None:
    assert set(variables()) == {field.name for field in fields(Settings)}
    assert len(set(variables().values())) == len(variables())
