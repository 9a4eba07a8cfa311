"""Tenant-scoped AWS access: the only credentials that reach the table for a caller.

Two halves, one on each side of the data perimeter:

- :class:`TokenExchange`, in the API's Lambda authorizer (outside the VPC):
  the caller's verified ID token is exchanged with the stack's Cognito
  identity pool, ``GetId`` (the caller's identity), then
  ``GetCredentialsForIdentity`` (``Logins`` = the user pool's provider name →
  the token). Cognito verifies the token itself (signature, issuer, app client,
  expiry and, with the pool's ``ServerSideTokenCheck``, that the user still
  exists, is enabled and has not signed out globally) and returns credentials
  of ``TenantAccessRole`` whose session tag ``TenantId`` is the token's
  ``custom:tenant_id`` (the template's principal tag map). The authorizer
  passes them to the functions in its context, and API Gateway caches them
  with its answer for the token (``ReauthorizeEvery``, 300 s).
- :class:`TenantClients`, in the API functions (inside the stack's VPC): one
  DynamoDB client per container, every call of which is signed with the
  credentials of the request it serves
  (:class:`~support_tickets.core.identity.TenantCredentials`, from the
  request's authorizer context). The role's policy admits only items under
  ``TENANT#<that tag>|`` and only through the stack's DynamoDB gateway endpoint
  (``aws:SourceVpce``): the same credentials, obtained by a user from the
  identity pool's public API with its own token, reach nothing from anywhere
  else.

The functions' own role may neither read the table nor assume the tenant role,
and no function takes a tenant id and returns credentials, so no code path (or
a buggy handler) can ask for another tenant's access: a repository built for
another tenant id is refused by IAM.

What is kept, per warm container:

- the authorizer keeps **no credentials**: every invocation exchanges the
  token, so a user that was signed out globally, disabled or deleted is
  refused by Cognito at the next invocation, and API Gateway invokes the
  authorizer again for every token once its cached answer is 300 s old.
  Revocation takes effect within that window, whatever the credentials' own
  hour. It keeps the identity id per user (the token's ``sub``, a bounded
  LRU): ``GetId`` has the identity pool's lowest rate quota (25 requests/s per
  account by default) and grants nothing (``GetCredentialsForIdentity`` checks
  the token again), so a user's next exchange costs one call, not two.
  Credentials Cognito issues last an hour (its enhanced flow's fixed
  lifetime), longer than the 300 s API Gateway may serve them plus the longest
  function timeout (a template test holds it).
- the functions keep **one client**, whatever the number of callers: one
  connection pool (``max_pool_connections``), no client, session or socket per
  user, so open file descriptors and memory stay flat however many users a
  warm container has served, and a new user's first request builds nothing.
  Each call carries its caller's credentials to botocore's signer (the
  ``request_credentials`` of the call's signing context, set from a parameter
  the call's ``provide-client-params`` handler takes off): nothing of one
  request's credentials outlives it, so a context that shares an access key id
  with an earlier one, but not its secret and session token, signs with its
  own (wrong) secret and is refused by DynamoDB. A call without credentials is
  refused before it is signed: the client never signs with the function's own
  role.

Failures never fall back to other credentials: Cognito throttling or an
outage fails the authorizer (API Gateway's 5xx), a refused token (expired,
revoked, deleted user) is a 401; credentials DynamoDB refuses as expired are a
503 with ``Retry-After`` (the next request gets fresh ones).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import UTC, datetime
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Final, cast

import boto3
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from support_tickets.core.errors import Throttled, Unauthorized, Unavailable
from support_tickets.core.identity import Caller, IdToken, TenantCredentials
from support_tickets.core.settings import ConfigurationError, Settings, get_settings
from support_tickets.data import deadline

if TYPE_CHECKING:
    from mypy_boto3_cognito_identity import CognitoIdentityClient
    from mypy_boto3_dynamodb import DynamoDBClient

MAX_CACHED_IDENTITIES = 4096
# What Cognito's enhanced flow issues: an hour, not configurable.
COGNITO_CREDENTIALS_SECONDS: Final = 3600
# The call parameter that carries a request's credentials to the shared client's
# signer (taken off before botocore validates the parameters).
REQUEST_CREDENTIALS_PARAMETER: Final = "RequestCredentials"
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
    }
)
EXPIRED_CREDENTIALS_CODES = frozenset({"ExpiredToken", "ExpiredTokenException"})
# Cognito refuses the token itself (expired, revoked, another client's...).
REFUSED_TOKEN_CODES = frozenset({"NotAuthorizedException"})

# Bounded, adaptive-friendly retries: "standard" retries throttling and transient
# errors with exponential backoff and jitter, 3 attempts in all. (botocore's
# "max_attempts" counts retries only: 3 would mean 4 attempts; "total_max_attempts"
# counts the first one too.) Three attempts that time out outlast an API function's
# 10 s: its clients send none that could not end before the invocation's deadline
# (support_tickets.data.deadline).
BOTO_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=10,
)
# The functions' one client: the endpoint never depends on its own credentials
# (they never sign; the callers' carry no account id either).
TENANT_CLIENT_CONFIG = BOTO_CONFIG.merge(Config(account_id_endpoint_mode="disabled"))


def logins(settings: Settings, token: IdToken) -> dict[str, str]:
    """The identity pool's ``Logins`` map for a token of the stack's user pool."""
    return {settings.user_pool_provider_name: token.value}


class TokenExchange:
    """The authorizer's: a verified ID token in, identity-pool credentials out,
    on every invocation (API Gateway caches the answer, this keeps no credentials)."""

    def __init__(
        self,
        settings: Settings,
        *,
        cognito_client: CognitoIdentityClient | None = None,
        boto3_session: boto3.Session | None = None,
    ) -> None:
        self._settings = settings
        self._boto3_session = boto3_session or boto3.Session()
        self._cognito_client = cognito_client
        self._identities: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def boto3_session(self) -> boto3.Session:
        """The session its Cognito client comes from (the authorizer builds its
        DynamoDB client from it too: a second session would load botocore's
        endpoint and partition data again, a cost the size of a whole client)."""
        return self._boto3_session

    # ------------------------------------------------------------ the exchange
    def _cognito(self) -> CognitoIdentityClient:
        if self._cognito_client is None:
            self._cognito_client = self._boto3_session.client(
                "cognito-identity",
                region_name=self._settings.region,
                endpoint_url=self._settings.endpoint_url,
                config=BOTO_CONFIG,
            )
        return self._cognito_client

    def _identity_pool_id(self) -> str:
        if self._settings.identity_pool_id is None:
            raise ConfigurationError("invalid or missing environment variables: IDENTITY_POOL_ID")
        return self._settings.identity_pool_id

    def _identity_id(self, token: IdToken) -> tuple[str, bool]:
        """The user's identity id, and whether it came from the cache."""
        with self._lock:
            cached = self._identities.get(token.subject)
            if cached is not None:
                self._identities.move_to_end(token.subject)
                return cached, True
        found = self._cognito().get_id(IdentityPoolId=self._identity_pool_id(), Logins=logins(self._settings, token))
        identity_id = found["IdentityId"]
        with self._lock:
            _remember(self._identities, token.subject, identity_id, MAX_CACHED_IDENTITIES)
        return identity_id, False

    def credentials(self, token: IdToken) -> TenantCredentials:
        """The token's credentials, exchanged now (Cognito checks the token, and
        that its user may still have credentials)."""
        try:
            identity_id, cached = self._identity_id(token)
            try:
                response = self._cognito().get_credentials_for_identity(
                    IdentityId=identity_id, Logins=logins(self._settings, token)
                )
            except ClientError as exc:
                if not cached or _code(exc) != "ResourceNotFoundException":
                    raise
                # The identity was deleted since: ask for the user's identity again, once.
                with self._lock:
                    self._identities.pop(token.subject, None)
                identity_id, _ = self._identity_id(token)
                response = self._cognito().get_credentials_for_identity(
                    IdentityId=identity_id, Logins=logins(self._settings, token)
                )
        except ClientError as exc:
            # Never fall back to other credentials: no exchange, no data.
            if _code(exc) in THROTTLING_CODES:
                raise Throttled("Tenant credentials could not be obtained; retry later.") from exc
            if _code(exc) in REFUSED_TOKEN_CODES:
                raise Unauthorized() from exc
            raise Unavailable("Tenant credentials could not be obtained; retry later.") from exc
        except BotoCoreError as exc:
            raise Unavailable("Tenant credentials could not be obtained; retry later.") from exc
        credentials = response["Credentials"]
        return TenantCredentials(
            access_key_id=credentials["AccessKeyId"],
            secret_access_key=credentials["SecretKey"],
            session_token=credentials["SessionToken"],
            expires_at=int(_as_utc(credentials["Expiration"]).timestamp()),
        )


class TenantClients:
    """The functions', container-wide: one DynamoDB client, each call signed
    with the credentials of the request it serves."""

    def __init__(
        self, settings: Settings, *, boto3_session: boto3.Session | None = None, config: Config = TENANT_CLIENT_CONFIG
    ) -> None:
        self._settings = settings
        self._boto3_session = boto3_session
        self._config = config
        self._client: DynamoDBClient | None = None
        self._kms: Any = None  # a botocore KMS client (no type stubs for it in the venv)
        self._lock = threading.Lock()

    def for_caller(self, caller: Caller) -> CallerClients:
        """The clients of one request: its caller's credentials, nobody else's."""
        return CallerClients(self.client(), caller.credentials)

    def kms_for_caller(self, caller: Caller) -> Any:
        """The container's KMS client (the webhook functions' only: built on their
        first request), every call signed with ``caller``'s credentials."""
        with self._lock:
            if self._kms is None:
                self._kms = self._signing_client("kms")
        return SignedClient(self._kms, caller.credentials)

    def client(self) -> DynamoDBClient:
        """The container's client (built on the first request, not at import)."""
        with self._lock:
            if self._client is None:
                self._client = self._signing_client("dynamodb")
            return self._client

    def _signing_client(self, service: str) -> Any:
        """A client of ``service`` that signs each call with the credentials the
        call carries, and refuses a call that carries none."""
        if self._boto3_session is None:
            # One session for both clients: a second would load botocore's endpoint
            # and partition data again, a cost the size of a whole client.
            self._boto3_session = boto3.Session()
        client = self._boto3_session.client(  # type: ignore[call-overload]
            service,
            region_name=self._settings.region,
            endpoint_url=self._settings.endpoint_url,
            config=self._config,
        )
        # No attempt, nor retry, that could not end before the invocation's deadline.
        deadline.watch(client)
        client.meta.events.register(
            f"provide-client-params.{service}.*",
            _sign_with_request_credentials,
            unique_id="support-tickets-request-credentials",
        )
        return client


def _sign_with_request_credentials(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """Hands the call's credentials to botocore's signer (``request_credentials``
    of the call's signing context, which it prefers to the client's own), or
    refuses a call that has none: this client never signs as the function."""
    credentials = params.pop(REQUEST_CREDENTIALS_PARAMETER, None)
    if not isinstance(credentials, Credentials):
        raise NoCredentialsError()
    context.setdefault("signing", {})["request_credentials"] = credentials


class SignedClient:
    """The container's client as one caller's: every API call it makes carries
    that caller's credentials, whatever thread makes it."""

    __slots__ = ("_client", "_credentials")

    def __init__(self, client: Any, credentials: TenantCredentials) -> None:
        self._client = client
        self._credentials = Credentials(
            credentials.access_key_id, credentials.secret_access_key, credentials.session_token
        )

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name in self._client.meta.method_to_api_mapping:
            return partial(attribute, **{REQUEST_CREDENTIALS_PARAMETER: self._credentials})
        return attribute


class CallerClients:
    """The :class:`~support_tickets.data.table.ClientProvider` of one request:
    the container's client, signing with the credentials its authorizer context
    carries. They can't be renewed here (only the authorizer exchanges tokens):
    once DynamoDB refused them as expired, the request is a 503 and the
    client's retry gets fresh ones."""

    def __init__(self, client: DynamoDBClient, credentials: TenantCredentials) -> None:
        self._client = cast("DynamoDBClient", SignedClient(client, credentials))
        self._refused = False

    def dynamodb(self) -> DynamoDBClient:
        if self._refused:
            raise Unavailable("The request's credentials expired; retry.")
        return self._client

    def invalidate(self) -> None:
        self._refused = True


def _remember[V](entries: OrderedDict[str, V], key: str, value: V, limit: int) -> None:
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > limit:
        entries.popitem(last=False)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _as_utc(expiration: Any) -> datetime:
    if isinstance(expiration, str):
        expiration = datetime.fromisoformat(expiration)
    elif isinstance(expiration, int | float):
        expiration = datetime.fromtimestamp(expiration, UTC)
    if expiration.tzinfo is None:
        expiration = expiration.replace(tzinfo=UTC)
    return expiration  # type: ignore[no-any-return]


@cache
def token_exchange() -> TokenExchange:
    """The authorizer's, container-wide (created on first use, not at import)."""
    return TokenExchange(get_settings())


@cache
def tenant_clients() -> TenantClients:
    """The functions' container-wide clients (created on first use, not at import)."""
    return TenantClients(get_settings())
