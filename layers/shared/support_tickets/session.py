"""Tenant-scoped AWS access: the only way handler code reaches DynamoDB.

Each request runs with credentials of ``TenantAccessRole`` assumed with the
session tag ``TenantId=<tenant>``; the role's policy only admits items whose
partition key starts with ``TENANT#<tenant>|``. The function's own role has no
DynamoDB permissions at all, so a handler bug cannot read another tenant.

Credentials and the DynamoDB client built from them are cached per tenant in the
warm container, so a warm request for a known tenant makes no STS call. An entry
is renewed ``TENANT_SESSION_RENEW_BEFORE_SECONDS`` before its credentials expire
(role chaining caps them at one hour). The cache is a small LRU so a container
serving many tenants keeps bounded memory.
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

from support_tickets.errors import Throttled, Unavailable
from support_tickets.keys import validate_tenant_id
from support_tickets.settings import Settings, get_settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sts import STSClient

TENANT_TAG_KEY = "TenantId"
MAX_CACHED_TENANTS = 256
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


def assume_role_request(settings: Settings, tenant_id: str) -> dict[str, Any]:
    """The AssumeRole arguments for a tenant session: the tag is the whole point."""
    return {
        "RoleArn": settings.tenant_role_arn,
        "RoleSessionName": f"tenant-{tenant_id}"[:64],
        "DurationSeconds": settings.tenant_session_seconds,
        "Tags": [{"Key": TENANT_TAG_KEY, "Value": tenant_id}],
    }


@dataclass(frozen=True, slots=True)
class _CachedClient:
    client: DynamoDBClient
    expires_at: datetime


class TenantSession:
    """Per-tenant DynamoDB clients built on assumed, tagged credentials."""

    def __init__(
        self,
        settings: Settings,
        *,
        sts_client: STSClient | None = None,
        boto3_session: boto3.Session | None = None,
        clock: Clock = _utcnow,
    ) -> None:
        self._settings = settings
        self._boto3_session = boto3_session or boto3.Session()
        self._sts_client = sts_client
        self._clock = clock
        self._renew_before = timedelta(seconds=settings.tenant_session_renew_before_seconds)
        self._entries: OrderedDict[str, _CachedClient] = OrderedDict()
        self._lock = threading.Lock()

    def dynamodb(self, tenant_id: str) -> DynamoDBClient:
        """A DynamoDB client that can only reach ``tenant_id``'s items."""
        validate_tenant_id(tenant_id)
        with self._lock:
            entry = self._entries.get(tenant_id)
            if entry is not None and self._clock() < entry.expires_at - self._renew_before:
                self._entries.move_to_end(tenant_id)
                return entry.client
        entry = self._assume(tenant_id)
        with self._lock:
            self._entries[tenant_id] = entry
            self._entries.move_to_end(tenant_id)
            while len(self._entries) > MAX_CACHED_TENANTS:
                self._entries.popitem(last=False)
        return entry.client

    def invalidate(self, tenant_id: str) -> None:
        """Forget a tenant's credentials (e.g. DynamoDB said they expired)."""
        with self._lock:
            self._entries.pop(tenant_id, None)

    def _sts(self) -> STSClient:
        if self._sts_client is None:
            self._sts_client = self._boto3_session.client(
                "sts",
                region_name=self._settings.region,
                endpoint_url=self._settings.endpoint_url,
                config=BOTO_CONFIG,
            )
        return self._sts_client

    def _assume(self, tenant_id: str) -> _CachedClient:
        try:
            response = self._sts().assume_role(**assume_role_request(self._settings, tenant_id))
        except ClientError as exc:
            # Never fall back to broader credentials: no tenant session, no data.
            if exc.response.get("Error", {}).get("Code") in THROTTLING_CODES:
                raise Throttled("The tenant session could not be created; retry later.") from exc
            raise Unavailable("The tenant session could not be created; retry later.") from exc
        except BotoCoreError as exc:
            raise Unavailable("The tenant session could not be created; retry later.") from exc
        credentials = response["Credentials"]
        client = self._boto3_session.client(
            "dynamodb",
            region_name=self._settings.region,
            endpoint_url=self._settings.endpoint_url,
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
            config=BOTO_CONFIG,
        )
        expiration: Any = credentials["Expiration"]
        if isinstance(expiration, str):
            expiration = datetime.fromisoformat(expiration)
        if expiration.tzinfo is None:
            expiration = expiration.replace(tzinfo=UTC)
        return _CachedClient(client=client, expires_at=expiration)


@cache
def tenant_session() -> TenantSession:
    """The container-wide session cache (created on first use, not at import)."""
    return TenantSession(get_settings())
