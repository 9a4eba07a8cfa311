"""The authorizer's credential cache: the caller's token exchanged with the
identity pool (GetId once per user, GetCredentialsForIdentity once per token),
cached per token until the earlier of the credentials' and the token's expiry
minus the margin, bounded, failures mapped and never a fallback (Cognito is
stubbed); and the functions' clients, built from the credentials of the
request's authorizer context."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from support_tickets.core.errors import Throttled, Unauthorized, Unavailable
from support_tickets.core.identity import IdToken, TenantCredentials
from support_tickets.core.settings import DEFAULT_CREDENTIALS_RENEW_BEFORE_SECONDS, get_settings
from support_tickets.data.session import CredentialCache, TenantClients
from tests.conftest import IDENTITY_POOL_ID, USER_POOL_PROVIDER

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MARGIN = timedelta(seconds=DEFAULT_CREDENTIALS_RENEW_BEFORE_SECONDS)


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def id_token(user: str = "alice", jti: str = "1", *, expires: datetime = START + timedelta(hours=1)) -> IdToken:
    # The value stands for a JWT: the cache never reads it, Cognito does.
    return IdToken(value=f"header.{user}-{jti}.signature", subject=f"sub-{user}", expires_at=int(expires.timestamp()))


def identity_of(user: str) -> str:
    return f"us-east-1:{hashlib.md5(user.encode()).hexdigest()[:8]}-0000-4000-8000-000000000000"  # noqa: S324


def credentials(expiration: datetime, user: str = "alice", key: str = "ASIAEXAMPLEEXAMPLE") -> dict[str, Any]:
    return {
        "IdentityId": identity_of(user),
        "Credentials": {
            "AccessKeyId": key,
            "SecretKey": "secret-secret-secret",
            "SessionToken": "token-token-token",
            "Expiration": expiration,
        },
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cognito() -> Iterator[Stubber]:
    client = boto3.client("cognito-identity", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def cache(cognito: Stubber, clock: FakeClock) -> CredentialCache:
    return CredentialCache(get_settings(), cognito_client=cognito.client, clock=clock)  # type: ignore[arg-type]


def expect_get_id(cognito: Stubber, token: IdToken, user: str = "alice") -> None:
    cognito.add_response(
        "get_id",
        {"IdentityId": identity_of(user)},
        {"IdentityPoolId": IDENTITY_POOL_ID, "Logins": {USER_POOL_PROVIDER: token.value}},
    )


def expect_credentials(
    cognito: Stubber, token: IdToken, expiration: datetime, user: str = "alice", key: str = "ASIAEXAMPLEEXAMPLE"
) -> None:
    cognito.add_response(
        "get_credentials_for_identity",
        credentials(expiration, user, key),
        {"IdentityId": identity_of(user), "Logins": {USER_POOL_PROVIDER: token.value}},
    )


def exchange_expected(cognito: Stubber, token: IdToken, expiration: datetime, user: str = "alice") -> None:
    expect_get_id(cognito, token, user)
    expect_credentials(cognito, token, expiration, user)


# ---------------------------------------------------------------- the exchange
def test_the_callers_token_is_exchanged_with_the_stacks_identity_pool(cognito: Stubber, cache: CredentialCache) -> None:
    # The stubber checks the parameters: this pool, the user pool's provider name → this token.
    token = id_token()
    exchange_expected(cognito, token, START + timedelta(hours=1))
    issued = cache.credentials(token)
    assert issued.access_key_id == "ASIAEXAMPLEEXAMPLE"
    assert issued.expires_at == int((START + timedelta(hours=1)).timestamp())


def test_a_warm_request_with_a_known_token_makes_no_call(
    cognito: Stubber, cache: CredentialCache, clock: FakeClock
) -> None:
    token = id_token()
    exchange_expected(cognito, token, START + timedelta(hours=1))
    first = cache.credentials(token)
    for minutes in (1, 10, 30, 49):  # the margin is 10 minutes
        clock.now = START + timedelta(minutes=minutes)
        assert cache.credentials(token) is first  # the stubber has no second response to give


def test_each_token_has_its_own_credentials_and_a_user_one_identity(cognito: Stubber, cache: CredentialCache) -> None:
    first, second, bob = id_token(jti="1"), id_token(jti="2"), id_token("bob")
    exchange_expected(cognito, first, START + timedelta(hours=1))
    expect_credentials(cognito, second, START + timedelta(hours=1))  # alice's identity is cached: no GetId
    exchange_expected(cognito, bob, START + timedelta(hours=1), "bob")
    issued = [cache.credentials(token) for token in (first, second, bob)]
    assert len({id(credentials) for credentials in issued}) == 3
    assert cache.credentials(first) is issued[0]


# ---------------------------------------------------------------- expiry
def test_renewed_before_the_credentials_expire_when_they_expire_first(
    cognito: Stubber, cache: CredentialCache, clock: FakeClock
) -> None:
    token = id_token(expires=START + timedelta(hours=2))  # a token outliving the credentials
    exchange_expected(cognito, token, START + timedelta(hours=1))
    first = cache.credentials(token)
    clock.now = START + timedelta(hours=1) - MARGIN - timedelta(seconds=1)
    assert cache.credentials(token) is first
    clock.now += timedelta(seconds=1)  # expiry minus the margin: renew (the identity is cached)
    expect_credentials(cognito, token, clock.now + timedelta(hours=1))
    assert cache.credentials(token) is not first


def test_never_kept_past_the_tokens_own_expiry(cognito: Stubber, cache: CredentialCache, clock: FakeClock) -> None:
    token = id_token(expires=START + timedelta(minutes=30))  # credentials would last an hour
    exchange_expected(cognito, token, START + timedelta(hours=1))
    first = cache.credentials(token)
    clock.now = START + timedelta(minutes=30) - MARGIN - timedelta(seconds=1)
    assert cache.credentials(token) is first
    clock.now += timedelta(seconds=1)
    expect_credentials(cognito, token, clock.now + timedelta(hours=1))
    assert cache.credentials(token) is not first


def test_a_token_in_its_last_margin_is_served_but_not_kept(
    cognito: Stubber, cache: CredentialCache, clock: FakeClock
) -> None:
    token = id_token(expires=START + MARGIN - timedelta(seconds=5))
    exchange_expected(cognito, token, START + timedelta(hours=1))
    first = cache.credentials(token)
    expect_credentials(cognito, token, START + timedelta(hours=1))
    assert cache.credentials(token) is not first  # exchanged again: nothing was cached


def test_invalidate_forces_a_new_exchange(cognito: Stubber, cache: CredentialCache) -> None:
    token = id_token()
    exchange_expected(cognito, token, START + timedelta(hours=1))
    first = cache.credentials(token)
    cache.invalidate(token)
    expect_credentials(cognito, token, START + timedelta(hours=1))
    assert cache.credentials(token) is not first


# ---------------------------------------------------------------- bounds and keys
def test_the_token_cache_is_a_bounded_lru(
    cognito: Stubber, cache: CredentialCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("support_tickets.data.session.MAX_CACHED_TOKENS", 2)
    tokens = {user: id_token(user) for user in ("a", "b", "c")}
    for user in ("a", "b"):
        exchange_expected(cognito, tokens[user], START + timedelta(hours=1), user)
    a = cache.credentials(tokens["a"])
    cache.credentials(tokens["b"])
    assert cache.credentials(tokens["a"]) is a  # a is now the most recent: b goes next
    exchange_expected(cognito, tokens["c"], START + timedelta(hours=1), "c")
    cache.credentials(tokens["c"])
    assert cache.credentials(tokens["a"]) is a
    expect_credentials(cognito, tokens["b"], START + timedelta(hours=1), "b")  # evicted: exchanged again
    cache.credentials(tokens["b"])


def test_the_identity_cache_is_bounded_too(
    cognito: Stubber, cache: CredentialCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("support_tickets.data.session.MAX_CACHED_IDENTITIES", 1)
    alice, bob = id_token("alice"), id_token("bob")
    exchange_expected(cognito, alice, START + timedelta(hours=1), "alice")
    exchange_expected(cognito, bob, START + timedelta(hours=1), "bob")
    cache.credentials(alice)
    cache.credentials(bob)
    cache.invalidate(alice)
    exchange_expected(cognito, alice, START + timedelta(hours=1), "alice")  # GetId again: bob evicted alice
    cache.credentials(alice)


def test_the_token_is_never_a_key(cognito: Stubber, cache: CredentialCache) -> None:
    token = id_token()
    exchange_expected(cognito, token, START + timedelta(hours=1))
    cache.credentials(token)
    keys = [*vars(cache)["_credentials"], *vars(cache)["_identities"]]
    assert hashlib.sha256(token.value.encode()).hexdigest() in keys
    assert all(token.value not in key for key in keys)


def test_a_deleted_identity_is_looked_up_again_once(cognito: Stubber, cache: CredentialCache) -> None:
    first, second = id_token(jti="1"), id_token(jti="2")
    exchange_expected(cognito, first, START + timedelta(hours=1))
    cache.credentials(first)
    cognito.add_client_error("get_credentials_for_identity", service_error_code="ResourceNotFoundException")
    exchange_expected(cognito, second, START + timedelta(hours=1))
    cache.credentials(second)


# ---------------------------------------------------------------- failures
@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("TooManyRequestsException", Throttled),
        ("NotAuthorizedException", Unauthorized),
        ("InternalErrorException", Unavailable),
        ("ResourceNotFoundException", Unavailable),
        ("InvalidIdentityPoolConfigurationException", Unavailable),
    ],
)
@pytest.mark.parametrize("operation", ["get_id", "get_credentials_for_identity"])
def test_failures_are_mapped_never_a_fallback_and_never_cached(
    cognito: Stubber, cache: CredentialCache, code: str, error: type[Exception], operation: str
) -> None:
    # Given another user's credentials, warm in this container
    warm = id_token("bob")
    exchange_expected(cognito, warm, START + timedelta(hours=1), "bob")
    cache.credentials(warm)
    # When Cognito refuses this user's exchange
    token = id_token()
    if operation == "get_credentials_for_identity":
        expect_get_id(cognito, token)
    cognito.add_client_error(operation, service_error_code=code, http_status_code=400)
    with pytest.raises(error):
        cache.credentials(token)
    # Then nothing was cached: the next request asks Cognito again, and gets its own
    if operation == "get_id":
        expect_get_id(cognito, token)
    expect_credentials(cognito, token, START + timedelta(hours=1), key="ASIAALICEALICEALICE1")
    assert cache.credentials(token).access_key_id == "ASIAALICEALICEALICE1"


def test_an_unreachable_identity_pool_is_unavailable(cache: CredentialCache, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import EndpointConnectionError

    def unreachable(**_: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="https://cognito-identity.us-east-1.amazonaws.com")

    monkeypatch.setattr(vars(cache)["_cognito_client"], "get_id", unreachable)
    with pytest.raises(Unavailable):
        cache.credentials(id_token())


# ---------------------------------------------------------------- the functions' clients
def tenant_credentials(
    key: str = "ASIAEXAMPLEEXAMPLE", expires: datetime = START + timedelta(hours=1)
) -> TenantCredentials:
    return TenantCredentials(key, "secret-secret-secret", "token-token-token", int(expires.timestamp()))


def test_a_functions_client_signs_with_the_contexts_credentials_and_is_kept_per_key(clock: FakeClock) -> None:
    clients = TenantClients(get_settings(), clock=clock)
    alice, bob = tenant_credentials("ASIAALICEALICEALICE1"), tenant_credentials("ASIABOBBOBBOBBOBBOB1")
    first = clients.dynamodb(alice)
    assert first._request_signer._credentials.access_key == "ASIAALICEALICEALICE1"  # type: ignore[attr-defined]
    assert clients.dynamodb(alice) is first  # a warm request: no new client
    other = clients.dynamodb(bob)
    assert other is not first
    assert other._request_signer._credentials.access_key == "ASIABOBBOBBOBBOBBOB1"  # type: ignore[attr-defined]


def test_a_functions_client_is_not_reused_past_its_credentials_expiry(clock: FakeClock) -> None:
    clients = TenantClients(get_settings(), clock=clock)
    first = clients.dynamodb(tenant_credentials())
    clock.now = START + timedelta(hours=1)
    assert clients.dynamodb(tenant_credentials()) is not first


def test_credentials_refused_as_expired_end_the_request_with_unavailable(clock: FakeClock) -> None:
    # Only the authorizer exchanges tokens: a function can't renew, the client's retry gets fresh ones.
    clients = TenantClients(get_settings(), clock=clock)
    request = clients.for_caller(caller_with(tenant_credentials()))
    first = request.dynamodb()
    assert request.dynamodb() is first
    request.invalidate()  # DynamoDB said the credentials expired
    with pytest.raises(Unavailable):
        request.dynamodb()
    assert clients.dynamodb(tenant_credentials()) is not first  # forgotten for the next request too


def caller_with(credentials: TenantCredentials) -> Any:
    from support_tickets.core.identity import Caller

    return Caller("acme", "alice", is_admin=False, token=id_token(), credentials=credentials)
