"""The authorizer's token exchange: the caller's token exchanged with the
identity pool on every invocation (GetId once per user, GetCredentialsForIdentity
every time, so a revoked user is refused at once), failures mapped and never a
fallback (Cognito is stubbed); and the functions' one client, each call signed
with the credentials of its request's authorizer context."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSRequest, AWSResponse, HTTPHeaders
from botocore.credentials import Credentials
from botocore.exceptions import NoCredentialsError
from botocore.stub import Stubber

from support_tickets.core.errors import Throttled, Unauthorized, Unavailable
from support_tickets.core.identity import Caller, IdToken, TenantCredentials
from support_tickets.core.settings import get_settings
from support_tickets.data.session import CallerClients, TenantClients, TokenExchange
from support_tickets.streams.records import own_client
from tests.conftest import IDENTITY_POOL_ID, USER_POOL_PROVIDER

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


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
def cognito() -> Iterator[Stubber]:
    client = boto3.client("cognito-identity", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def exchange(cognito: Stubber) -> TokenExchange:
    return TokenExchange(get_settings(), cognito_client=cognito.client)  # type: ignore[arg-type]


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
def test_the_callers_token_is_exchanged_with_the_stacks_identity_pool(
    cognito: Stubber, exchange: TokenExchange
) -> None:
    # The stubber checks the parameters: this pool, the user pool's provider name → this token.
    token = id_token()
    exchange_expected(cognito, token, START + timedelta(hours=1))
    issued = exchange.credentials(token)
    assert issued.access_key_id == "ASIAEXAMPLEEXAMPLE"
    assert issued.expires_at == int((START + timedelta(hours=1)).timestamp())


def test_every_invocation_exchanges_the_token_again(cognito: Stubber, exchange: TokenExchange) -> None:
    # API Gateway caches the answer for 300 s; the authorizer keeps no credentials on top of that.
    token = id_token()
    exchange_expected(cognito, token, START + timedelta(hours=1))
    expect_credentials(cognito, token, START + timedelta(hours=1), key="ASIASECONDSECONDSEC")  # no GetId
    first = exchange.credentials(token)
    second = exchange.credentials(token)
    assert (first.access_key_id, second.access_key_id) == ("ASIAEXAMPLEEXAMPLE", "ASIASECONDSECONDSEC")


def test_a_revoked_user_is_refused_at_the_next_invocation(cognito: Stubber, exchange: TokenExchange) -> None:
    # Signed out globally, disabled or deleted: the identity pool's ServerSideTokenCheck refuses the token.
    token = id_token()
    exchange_expected(cognito, token, START + timedelta(hours=1))
    exchange.credentials(token)
    cognito.add_client_error(
        "get_credentials_for_identity", service_error_code="NotAuthorizedException", http_status_code=400
    )
    with pytest.raises(Unauthorized):
        exchange.credentials(token)


def test_each_token_has_its_own_credentials_and_a_user_one_identity(cognito: Stubber, exchange: TokenExchange) -> None:
    first, second, bob = id_token(jti="1"), id_token(jti="2"), id_token("bob")
    exchange_expected(cognito, first, START + timedelta(hours=1))
    expect_credentials(cognito, second, START + timedelta(hours=1))  # alice's identity is kept: no GetId
    exchange_expected(cognito, bob, START + timedelta(hours=1), "bob")
    issued = [exchange.credentials(token) for token in (first, second, bob)]
    assert len({id(credentials) for credentials in issued}) == 3


# ---------------------------------------------------------------- bounds and keys
def test_the_identity_cache_is_a_bounded_lru(
    cognito: Stubber, exchange: TokenExchange, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("support_tickets.data.session.MAX_CACHED_IDENTITIES", 1)
    alice, bob = id_token("alice"), id_token("bob")
    exchange_expected(cognito, alice, START + timedelta(hours=1), "alice")
    exchange_expected(cognito, bob, START + timedelta(hours=1), "bob")
    exchange_expected(cognito, alice, START + timedelta(hours=1), "alice")  # GetId again: bob evicted alice
    for token in (alice, bob, alice):
        exchange.credentials(token)


def test_the_token_is_never_a_key(cognito: Stubber, exchange: TokenExchange) -> None:
    token = id_token()
    exchange_expected(cognito, token, START + timedelta(hours=1))
    exchange.credentials(token)
    keys = list(vars(exchange)["_identities"])
    assert keys == [token.subject]
    assert all(token.value not in key for key in keys)


def test_a_deleted_identity_is_looked_up_again_once(cognito: Stubber, exchange: TokenExchange) -> None:
    first, second = id_token(jti="1"), id_token(jti="2")
    exchange_expected(cognito, first, START + timedelta(hours=1))
    exchange.credentials(first)
    cognito.add_client_error("get_credentials_for_identity", service_error_code="ResourceNotFoundException")
    exchange_expected(cognito, second, START + timedelta(hours=1))
    exchange.credentials(second)


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
def test_failures_are_mapped_and_never_a_fallback(
    cognito: Stubber, exchange: TokenExchange, code: str, error: type[Exception], operation: str
) -> None:
    # Given another user's exchange in this container
    warm = id_token("bob")
    exchange_expected(cognito, warm, START + timedelta(hours=1), "bob")
    exchange.credentials(warm)
    # When Cognito refuses this user's exchange
    token = id_token()
    if operation == "get_credentials_for_identity":
        expect_get_id(cognito, token)
    cognito.add_client_error(operation, service_error_code=code, http_status_code=400)
    with pytest.raises(error):
        exchange.credentials(token)
    # Then the next request asks Cognito again, and gets its own
    if operation == "get_id":
        expect_get_id(cognito, token)
    expect_credentials(cognito, token, START + timedelta(hours=1), key="ASIAALICEALICEALICE1")
    assert exchange.credentials(token).access_key_id == "ASIAALICEALICEALICE1"


def test_an_unreachable_identity_pool_is_unavailable(exchange: TokenExchange, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import EndpointConnectionError

    def unreachable(**_: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="https://cognito-identity.us-east-1.amazonaws.com")

    monkeypatch.setattr(vars(exchange)["_cognito_client"], "get_id", unreachable)
    with pytest.raises(Unavailable):
        exchange.credentials(id_token())


# ---------------------------------------------------------------- the functions' one client
def tenant_credentials(
    key: str = "ASIAEXAMPLEEXAMPLE",
    secret: str = "secret-secret-secret",  # noqa: S107 - a test's stand-in
    token: str = "token-token-token",  # noqa: S107 - a test's stand-in
) -> TenantCredentials:
    return TenantCredentials(key, secret, token, int((START + timedelta(hours=1)).timestamp()))


def caller_with(credentials: TenantCredentials) -> Caller:
    return Caller("acme", "alice", is_admin=False, token=id_token(), credentials=credentials)


class _Answer:
    """What the wire would have answered: an empty GetItem result."""

    def stream(self) -> Iterator[bytes]:
        yield b"{}"


class Wire:
    """What the shared client hands its signer and sends, per call; nothing leaves the process."""

    def __init__(self, clients: TenantClients) -> None:
        self.signed_with: list[Credentials] = []
        self.sent: list[dict[str, str]] = []
        self.threads: list[str] = []
        events = clients.client().meta.events
        events.register("before-sign.dynamodb.*", self._before_sign)
        events.register("before-send.dynamodb.*", self._before_send)  # type: ignore[arg-type]

    def _before_sign(self, request: AWSRequest, **_: Any) -> None:
        self.signed_with.append(request.context["signing"]["request_credentials"])
        self.threads.append(threading.current_thread().name)

    def _before_send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        self.sent.append(
            {name: value.decode() if isinstance(value, bytes) else value for name, value in request.headers.items()}
        )
        return AWSResponse(request.url, 200, HTTPHeaders(), _Answer())

    def signers(self) -> list[tuple[str, str, str]]:
        return [(used.access_key, used.secret_key, str(used.token)) for used in self.signed_with]


def get_item(clients: CallerClients) -> None:
    clients.dynamodb().get_item(TableName="SupportTicket", Key={"pk": {"S": "TENANT#acme|X"}, "sk": {"S": "S"}})


@pytest.fixture
def clients() -> TenantClients:
    return TenantClients(get_settings())


def test_every_call_is_signed_with_its_own_requests_credentials(clients: TenantClients) -> None:
    wire = Wire(clients)
    alice = tenant_credentials("ASIAALICEALICEALICE1", "alice-secret", "alice-token")
    bob = tenant_credentials("ASIABOBBOBBOBBOBBOB1", "bob-secret", "bob-token")
    for credentials in (alice, bob, alice):
        get_item(clients.for_caller(caller_with(credentials)))
    assert wire.signers() == [
        ("ASIAALICEALICEALICE1", "alice-secret", "alice-token"),
        ("ASIABOBBOBBOBBOBBOB1", "bob-secret", "bob-token"),
        ("ASIAALICEALICEALICE1", "alice-secret", "alice-token"),
    ]
    # The signed request names that caller's key and carries its session token.
    assert ["Credential=ASIAALICEALICEALICE1/" in headers["Authorization"] for headers in wire.sent] == [
        True,
        False,
        True,
    ]
    assert [headers["X-Amz-Security-Token"] for headers in wire.sent] == ["alice-token", "bob-token", "alice-token"]


def test_a_context_sharing_an_access_key_id_reuses_nothing_of_the_earlier_one(clients: TenantClients) -> None:
    # Access key ids are no secret (CloudTrail shows them): a forged context names a
    # real user's with a junk secret and token; it must sign with those, and be refused.
    wire = Wire(clients)
    get_item(clients.for_caller(caller_with(tenant_credentials("ASIAVICTIMVICTIMVIC", "real-secret", "real-token"))))
    get_item(clients.for_caller(caller_with(tenant_credentials("ASIAVICTIMVICTIMVIC", "junk", "junk-token"))))
    assert wire.signers() == [
        ("ASIAVICTIMVICTIMVIC", "real-secret", "real-token"),
        ("ASIAVICTIMVICTIMVIC", "junk", "junk-token"),
    ]
    first, forged = wire.sent
    assert first["Authorization"].split("Signature=")[1] != forged["Authorization"].split("Signature=")[1]


def test_one_client_for_every_caller_and_none_built_for_a_new_one(
    clients: TenantClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = clients.client()
    built: list[str] = []
    original = boto3.Session.client

    def counting(self: boto3.Session, *args: Any, **kwargs: Any) -> Any:
        built.append(str(args[0] if args else kwargs.get("service_name")))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(boto3.Session, "client", counting)
    Wire(clients)
    for number in range(300):
        request = clients.for_caller(caller_with(tenant_credentials(f"ASIACALLER{number:09d}")))
        get_item(request)
    assert built == []
    assert clients.client() is shared


def test_the_dynamodb_and_kms_clients_share_one_session(
    clients: TenantClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second session loads botocore's endpoint and partition data again (bench/cold.py).
    sessions: list[boto3.Session] = []
    original = boto3.Session.__init__

    def counting(self: boto3.Session, *args: Any, **kwargs: Any) -> None:
        sessions.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(boto3.Session, "__init__", counting)
    clients.client()
    clients.kms_for_caller(caller_with(tenant_credentials("ASIAALICEALICEALICE1")))
    assert len(sessions) == 1


def test_own_clients_share_a_session_per_role_and_sign_with_that_roles_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The in-process tests run several functions in one interpreter, each with its role's keys.
    def own(service: str, key: str) -> Any:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", f"{key}-secret")
        monkeypatch.setenv("AWS_SESSION_TOKEN", f"{key}-token")
        return own_client(service)

    audit_sqs, audit_dynamodb = own("sqs", "ASIAAUDITAUDITAUDIT1"), own("dynamodb", "ASIAAUDITAUDITAUDIT1")
    delivery_kms = own("kms", "ASIADELIVERDELIVER01")
    assert audit_sqs._request_signer._credentials is audit_dynamodb._request_signer._credentials
    signers = [client._request_signer._credentials for client in (audit_sqs, delivery_kms)]
    assert [(c.access_key, c.secret_key, c.token) for c in signers] == [
        ("ASIAAUDITAUDITAUDIT1", "ASIAAUDITAUDITAUDIT1-secret", "ASIAAUDITAUDITAUDIT1-token"),
        ("ASIADELIVERDELIVER01", "ASIADELIVERDELIVER01-secret", "ASIADELIVERDELIVER01-token"),
    ]


def test_calls_from_worker_threads_sign_with_their_own_requests_credentials(clients: TenantClients) -> None:
    # A sharded list and the audit trail query in parallel threads: each call carries its credentials.
    wire = Wire(clients)
    requests = {
        name: clients.for_caller(caller_with(tenant_credentials(f"ASIA{name.upper():0<16}", f"{name}-secret")))
        for name in ("alice", "bob", "carol", "dave")
    }

    def five_calls(request: CallerClients) -> None:
        for _ in range(5):
            get_item(request)

    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(five_calls, request) for request in list(requests.values()) * 3]:
            future.result()
    assert len(wire.signed_with) == 60
    assert len(set(wire.threads)) > 1
    expected = {(f"ASIA{name.upper():0<16}", f"{name}-secret") for name in requests}
    assert {(key, secret) for key, secret, _ in wire.signers()} == expected
    assert all(secret == f"{key[4:].rstrip('0').lower()}-secret" for key, secret, _ in wire.signers())


def test_a_call_without_request_credentials_is_refused_never_signed_as_the_function(clients: TenantClients) -> None:
    wire = Wire(clients)
    with pytest.raises(NoCredentialsError):
        clients.client().get_item(TableName="SupportTicket", Key={"pk": {"S": "TENANT#acme|X"}, "sk": {"S": "S"}})
    assert wire.sent == []


def test_credentials_refused_as_expired_end_the_request_with_unavailable(clients: TenantClients) -> None:
    # Only the authorizer exchanges tokens: a function can't renew, the client's retry gets fresh ones.
    request = clients.for_caller(caller_with(tenant_credentials()))
    request.dynamodb()
    request.invalidate()  # DynamoDB said the credentials expired
    with pytest.raises(Unavailable):
        request.dynamodb()
    assert clients.for_caller(caller_with(tenant_credentials())).dynamodb() is not None  # the next request is served
