"""Tenant-scoped AWS access: the only credentials that reach the table for a caller.

Two halves, one on each side of the data perimeter:

- :class:`CredentialCache`, in the API's Lambda authorizer (outside the VPC):
  the caller's verified ID token is exchanged with the stack's Cognito
  identity pool, ``GetId`` (the caller's identity), then
  ``GetCredentialsForIdentity`` (``Logins`` = the user pool's provider name →
  the token). Cognito verifies the token itself (signature, issuer, app client,
  expiry) and returns credentials of ``TenantAccessRole`` whose session tag
  ``TenantId`` is the token's ``custom:tenant_id`` (the template's principal
  tag map). The authorizer passes them to the functions in its context, and
  API Gateway caches them with its answer for the token.
- :class:`TenantClients`, in the API functions (inside the stack's VPC): a
  DynamoDB client built from the credentials of the request's context
  (:class:`~support_tickets.core.identity.TenantCredentials`). The role's
  policy admits only items under ``TENANT#<that tag>|`` and only through the
  stack's DynamoDB gateway endpoint (``aws:SourceVpce``): the same credentials,
  obtained by a user from the identity pool's public API with its own token,
  reach nothing from anywhere else.

The functions' own role may neither read the table nor assume the tenant role,
and no function takes a tenant id and returns credentials, so no code path (or
a buggy handler) can ask for another tenant's access: a repository built for
another tenant id is refused by IAM.

Caching, per warm container (a small LRU each, bounded memory):

- the authorizer keeps credentials per token (keyed by a SHA-256 digest of it,
  never the token) until the earlier of the credentials' expiry and the
  token's ``exp``, minus ``CREDENTIALS_RENEW_BEFORE_SECONDS``; that margin is
  longer than API Gateway's authorizer cache (``ReauthorizeEvery``) plus the
  longest function timeout, so credentials handed out never expire during a
  request that API Gateway's cache serves them to (a template test holds it).
  Credentials obtained closer than the margin to the token's expiry serve
  their one request and are not kept. The identity id is kept per user (the
  token's ``sub``): a user's next token costs one ``GetCredentialsForIdentity``
  and no ``GetId`` (GetId has the identity pool's lowest rate quota, 25
  requests/s per account by default).
- the functions keep one DynamoDB client per access key id until the
  credentials expire: a warm request makes no credential call at all.

Failures never fall back to other credentials: Cognito throttling or an
outage fails the authorizer (API Gateway's 5xx), a refused token (expired,
revoked, deleted user) is a 401; credentials DynamoDB refuses as expired are a
503 with ``Retry-After`` (the next request gets fresh ones).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from support_tickets.core.errors import Throttled, Unauthorized, Unavailable
from support_tickets.core.identity import Caller, IdToken, TenantCredentials
from support_tickets.core.settings import ConfigurationError, Settings, get_settings

if TYPE_CHECKING:
    from mypy_boto3_cognito_identity import CognitoIdentityClient
    from mypy_boto3_dynamodb import DynamoDBClient

MAX_CACHED_TOKENS = 256
MAX_CACHED_IDENTITIES = 4096
MAX_CACHED_CLIENTS = 256
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
# errors with exponential backoff and jitter, 3 attempts in all, well inside the
# functions' timeout. (botocore's "max_attempts" counts retries only: 3 would
# mean 4 attempts; "total_max_attempts" counts the first one too.)
BOTO_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=10,
)

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def logins(settings: Settings, token: IdToken) -> dict[str, str]:
    """The identity pool's ``Logins`` map for a token of the stack's user pool."""
    return {settings.user_pool_provider_name: token.value}


@dataclass(frozen=True, slots=True)
class _Cached:
    credentials: TenantCredentials
    usable_until: datetime


class CredentialCache:
    """The authorizer's, container-wide: per token, identity-pool credentials."""

    def __init__(
        self,
        settings: Settings,
        *,
        cognito_client: CognitoIdentityClient | None = None,
        boto3_session: boto3.Session | None = None,
        clock: Clock = _utcnow,
    ) -> None:
        self._settings = settings
        self._boto3_session = boto3_session or boto3.Session()
        self._cognito_client = cognito_client
        self._clock = clock
        self._margin = timedelta(seconds=settings.credentials_renew_before_seconds)
        self._credentials: OrderedDict[str, _Cached] = OrderedDict()
        self._identities: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def credentials(self, token: IdToken) -> TenantCredentials:
        """The token's credentials: cached, or exchanged now."""
        now = self._clock()
        with self._lock:
            entry = self._credentials.get(token.digest)
            if entry is not None and now < entry.usable_until:
                self._credentials.move_to_end(token.digest)
                return entry.credentials
        credentials = self._exchange(token)
        credentials_expire = datetime.fromtimestamp(credentials.expires_at, UTC)
        token_expires = datetime.fromtimestamp(token.expires_at, UTC)
        usable_until = min(credentials_expire, token_expires) - self._margin
        if now < usable_until:
            with self._lock:
                _remember(self._credentials, token.digest, _Cached(credentials, usable_until), MAX_CACHED_TOKENS)
        return credentials

    @property
    def boto3_session(self) -> boto3.Session:
        """The session its Cognito client comes from (the authorizer builds its
        DynamoDB client from it too: a second session would load botocore's
        endpoint and partition data again, a cost the size of a whole client)."""
        return self._boto3_session

    def invalidate(self, token: IdToken) -> None:
        """Forget a token's credentials."""
        with self._lock:
            self._credentials.pop(token.digest, None)

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

    def _exchange(self, token: IdToken) -> TenantCredentials:
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


@dataclass(frozen=True, slots=True)
class _CachedClient:
    client: DynamoDBClient
    expires_at: int


class TenantClients:
    """The functions', container-wide: a DynamoDB client per set of tenant
    credentials (those of the request's authorizer context)."""

    def __init__(
        self, settings: Settings, *, boto3_session: boto3.Session | None = None, clock: Clock = _utcnow
    ) -> None:
        self._settings = settings
        self._boto3_session = boto3_session or boto3.Session()
        self._clock = clock
        self._clients: OrderedDict[str, _CachedClient] = OrderedDict()
        self._lock = threading.Lock()

    def for_caller(self, caller: Caller) -> CallerClients:
        """The clients of one request: its caller's credentials, nobody else's."""
        return CallerClients(self, caller.credentials)

    def dynamodb(self, credentials: TenantCredentials) -> DynamoDBClient:
        now = self._clock().timestamp()
        with self._lock:
            entry = self._clients.get(credentials.access_key_id)
            if entry is not None and now < entry.expires_at:
                self._clients.move_to_end(credentials.access_key_id)
                return entry.client
        client = self._boto3_session.client(
            "dynamodb",
            region_name=self._settings.region,
            endpoint_url=self._settings.endpoint_url,
            aws_access_key_id=credentials.access_key_id,
            aws_secret_access_key=credentials.secret_access_key,
            aws_session_token=credentials.session_token,
            config=BOTO_CONFIG,
        )
        with self._lock:
            _remember(
                self._clients,
                credentials.access_key_id,
                _CachedClient(client, credentials.expires_at),
                MAX_CACHED_CLIENTS,
            )
        return client

    def forget(self, credentials: TenantCredentials) -> None:
        with self._lock:
            self._clients.pop(credentials.access_key_id, None)


class CallerClients:
    """The :class:`~support_tickets.data.table.ClientProvider` of one request:
    the DynamoDB client of the credentials its authorizer context carries. They
    can't be renewed here (only the authorizer exchanges tokens): once DynamoDB
    refused them as expired, the request is a 503 and the client's retry gets
    fresh ones."""

    def __init__(self, clients: TenantClients, credentials: TenantCredentials) -> None:
        self._clients = clients
        self._credentials = credentials
        self._refused = False

    def dynamodb(self) -> DynamoDBClient:
        if self._refused:
            raise Unavailable("The request's credentials expired; retry.")
        return self._clients.dynamodb(self._credentials)

    def invalidate(self) -> None:
        self._refused = True
        self._clients.forget(self._credentials)


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
def credential_cache() -> CredentialCache:
    """The authorizer's container-wide cache (created on first use, not at import)."""
    return CredentialCache(get_settings())


@cache
def tenant_clients() -> TenantClients:
    """The functions' container-wide clients (created on first use, not at import)."""
    return TenantClients(get_settings())
