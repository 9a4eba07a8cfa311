"""Tenant-scoped AWS access: the only way handler code reaches DynamoDB.

Credentials come from the caller's own ID token, never from a tenant id. The
token API Gateway's authorizer verified (the request's ``Authorization``
header, :class:`~support_tickets.core.identity.IdToken`) is exchanged with the
stack's Cognito identity pool: ``GetId`` (the caller's identity), then
``GetCredentialsForIdentity`` (``Logins`` = the user pool's provider name →
the token). Cognito verifies the token itself (signature, issuer, app client,
expiry) and returns credentials of ``TenantAccessRole`` whose session tag
``TenantId`` is the token's ``custom:tenant_id`` (the template's principal
tag map); the role's policy admits only items under ``TENANT#<that tag>|``.
The function's own role may neither read the table nor assume the tenant role,
so no code path here, or in a buggy handler, can ask for another tenant's
credentials: there is no function that takes a tenant id and returns
credentials, and a repository built for another tenant id is refused by IAM.

Caching, per warm container (a small LRU each, bounded memory):

- credentials and the DynamoDB client built from them, per token (keyed by a
  SHA-256 digest of it, never the token), until the earlier of the
  credentials' expiry and the token's ``exp``, minus
  ``CREDENTIALS_RENEW_BEFORE_SECONDS`` (longer than any function's timeout).
  A warm request with a token this container has seen makes no Cognito or STS
  call. Credentials obtained closer than that margin to the token's expiry
  serve their one request and are not kept.
- the identity id per user (the token's ``sub``): an authenticated identity
  is the same for every token of the user, so a user's next token costs one
  ``GetCredentialsForIdentity`` and no ``GetId`` (GetId has the identity
  pool's lowest rate quota, 25 requests/s per account by default).

Failures never fall back to other credentials: Cognito throttling is a 429,
a refused token (expired, revoked, deleted user) a 401, anything else a 503.
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
from support_tickets.core.identity import IdToken
from support_tickets.core.settings import Settings, get_settings

if TYPE_CHECKING:
    from mypy_boto3_cognito_identity import CognitoIdentityClient
    from mypy_boto3_dynamodb import DynamoDBClient

MAX_CACHED_TOKENS = 256
MAX_CACHED_IDENTITIES = 4096
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
class _CachedClient:
    client: DynamoDBClient
    usable_until: datetime


class CredentialCache:
    """Container-wide: per token, DynamoDB clients on identity-pool credentials."""

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
        self._clients: OrderedDict[str, _CachedClient] = OrderedDict()
        self._identities: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def for_token(self, token: IdToken) -> CallerClients:
        """The clients of one request, bound to its caller's token."""
        return CallerClients(self, token)

    # ------------------------------------------------------------ the cache
    def dynamodb(self, token: IdToken) -> DynamoDBClient:
        now = self._clock()
        with self._lock:
            entry = self._clients.get(token.digest)
            if entry is not None and now < entry.usable_until:
                self._clients.move_to_end(token.digest)
                return entry.client
        client, credentials_expire = self._exchange(token)
        token_expires = datetime.fromtimestamp(token.expires_at, UTC)
        usable_until = min(credentials_expire, token_expires) - self._margin
        if now < usable_until:
            with self._lock:
                _remember(self._clients, token.digest, _CachedClient(client, usable_until), MAX_CACHED_TOKENS)
        return client

    def invalidate(self, token: IdToken) -> None:
        """Forget a token's credentials (e.g. DynamoDB said they expired)."""
        with self._lock:
            self._clients.pop(token.digest, None)

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

    def _identity_id(self, token: IdToken) -> tuple[str, bool]:
        """The user's identity id, and whether it came from the cache."""
        with self._lock:
            cached = self._identities.get(token.subject)
            if cached is not None:
                self._identities.move_to_end(token.subject)
                return cached, True
        found = self._cognito().get_id(
            IdentityPoolId=self._settings.identity_pool_id, Logins=logins(self._settings, token)
        )
        identity_id = found["IdentityId"]
        with self._lock:
            _remember(self._identities, token.subject, identity_id, MAX_CACHED_IDENTITIES)
        return identity_id, False

    def _exchange(self, token: IdToken) -> tuple[DynamoDBClient, datetime]:
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
        client = self._boto3_session.client(
            "dynamodb",
            region_name=self._settings.region,
            endpoint_url=self._settings.endpoint_url,
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretKey"],
            aws_session_token=credentials["SessionToken"],
            config=BOTO_CONFIG,
        )
        return client, _as_utc(credentials["Expiration"])


class CallerClients:
    """The :class:`~support_tickets.data.table.ClientProvider` of one request: the
    DynamoDB client of its caller's token, obtained once per request (the
    parallel queries of a list share it) and renewed on :meth:`invalidate`."""

    def __init__(self, cache: CredentialCache, token: IdToken) -> None:
        self._cache = cache
        self._token = token
        self._client: DynamoDBClient | None = None
        self._lock = threading.Lock()

    def dynamodb(self) -> DynamoDBClient:
        with self._lock:
            if self._client is None:
                self._client = self._cache.dynamodb(self._token)
            return self._client

    def invalidate(self) -> None:
        with self._lock:
            self._client = None
            self._cache.invalidate(self._token)


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
    """The container-wide cache (created on first use, not at import)."""
    return CredentialCache(get_settings())
