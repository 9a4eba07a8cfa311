"""The tenant record: a tenant's shard count, tier, status and API key, read with a short cache.

One item per tenant, ``TENANT#<t>|CONFIG`` / ``CONFIG``. Operators write it
(``make tenant``, ``make onboard``; ``ops.tenants``); tenant credentials may read
it but never write it (an explicit Deny in ``TenantAccessRole``). A tenant
without a record has the defaults: 1 shard, tier ``basic``, ``ACTIVE``.

The layer reads it once per tenant per container and keeps it for
``TENANT_CONFIG_TTL_SECONDS`` (default ``settings.DEFAULT_TENANT_CONFIG_TTL_SECONDS``): a
warm request adds no DynamoDB call, and a change reaches every container
within that bound. Resharding (``ops.tenants``) waits out that bound between
its phases, so no container ever writes a ticket where another container's
readers do not look (see :class:`TenantConfig`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from enum import StrEnum
from functools import cache
from typing import Any, Final, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from support_tickets.core import keys
from support_tickets.data.table import TenantTable, from_item

MAX_CACHED_TENANTS: Final = 1024
TIERS: Final = ("basic", "standard", "premium")
DEFAULT_TIER: Final = "basic"


class TenantStatus(StrEnum):
    ACTIVE = "ACTIVE"
    SUSPENDED = "SUSPENDED"


class TenantConfig(BaseModel):
    """A tenant record.

    ``shards`` is the shard count writers use for new GSI1 keys; ``read_shards``
    every shard count readers must cover (``shards`` included). They differ only
    while a reshard runs, in three phases that each last at least the cache
    TTL: *widen* (readers cover old and new, writers still use old), *switch*
    (writers use new), *migrate* (the tickets still under keys of the old count
    only are moved, then readers drop it). ``target_shards`` names the count a
    reshard is heading to; ``changed_at`` (epoch seconds) when its current phase
    began. ``version`` is 0 for a tenant with no stored record.

    ``status`` SUSPENDED refuses every request of the tenant (403
    ``TENANT_SUSPENDED``), its data untouched. ``offboarding_since`` (epoch
    seconds) is set while ``make offboard`` erases the tenant (which keeps it
    SUSPENDED), ``erasable_at`` when the record itself may go (see
    ``ops.offboard``).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    tenant_id: str
    shards: int = 1
    read_shards: tuple[int, ...] = (1,)
    target_shards: int | None = None
    tier: str = DEFAULT_TIER
    status: TenantStatus = TenantStatus.ACTIVE
    # The tenant's API Gateway API key (ops.api_keys): its id, for operators
    # moving it between the tiers' usage plans, and its value, which the API's
    # authorizer names as the request's usageIdentifierKey. Not a secret that
    # grants anything: callers never send it, the authorizer picks it.
    api_key_id: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    changed_at: int = 0
    offboarding_since: int | None = None
    erasable_at: int | None = None
    version: int = Field(default=0, ge=0)

    @field_validator("tenant_id")
    @classmethod
    def _tenant(cls, value: str) -> str:
        return keys.validate_tenant_id(value)

    @field_validator("shards", "target_shards")
    @classmethod
    def _shards(cls, value: int | None) -> int | None:
        return None if value is None else keys.validate_shard_count(value)

    @field_validator("read_shards")
    @classmethod
    def _read_shards(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted({keys.validate_shard_count(shards) for shards in value}))

    @field_validator("tier")
    @classmethod
    def _tier(cls, value: str) -> str:
        if value not in TIERS:
            raise ValueError(f"tier must be one of {', '.join(TIERS)}")
        return value

    @model_validator(mode="after")
    def _writers_are_read(self) -> Self:
        if self.shards not in self.read_shards:
            raise ValueError("readers must cover the writers' shard count")
        return self

    @property
    def resharding(self) -> bool:
        return self.target_shards is not None or len(self.read_shards) > 1

    def item(self) -> dict[str, Any]:
        """The stored item (attribute values as Python values)."""
        stored = self.model_dump(mode="json", exclude={"read_shards"})
        stored["read_shards"] = list(self.read_shards)
        key = keys.tenant_config_key(self.tenant_id)
        return {"pk": key["pk"]["S"], "sk": key["sk"]["S"], **stored}

    @classmethod
    def from_stored(cls, tenant_id: str, item: dict[str, Any] | None) -> TenantConfig:
        if not item:
            return cls(tenant_id=tenant_id)
        values = from_item(item)
        values["tenant_id"] = tenant_id  # never trust a tenant id stored in the item over its key
        values["read_shards"] = tuple(int(shards) for shards in values.get("read_shards", [values.get("shards", 1)]))
        return cls.model_validate(values)


def read_tenant_config(table: TenantTable) -> TenantConfig:
    """The stored record of ``table``'s tenant (one consistent GetItem)."""
    response = table.call(
        "get_item", TableName=table.table_name, Key=keys.tenant_config_key(table.tenant_id), ConsistentRead=True
    )
    return TenantConfig.from_stored(table.tenant_id, response.get("Item"))


class TenantConfigCache:
    """Per-container cache of tenant records: at most ``ttl_seconds`` old, bounded LRU."""

    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, TenantConfig]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, table: TenantTable) -> TenantConfig:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(table.tenant_id)
            if entry is not None and now - entry[0] < self._ttl:
                self._entries.move_to_end(table.tenant_id)
                return entry[1]
        config = read_tenant_config(table)
        with self._lock:
            self._entries[table.tenant_id] = (now, config)
            self._entries.move_to_end(table.tenant_id)
            while len(self._entries) > MAX_CACHED_TENANTS:
                self._entries.popitem(last=False)
        return config

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@cache
def tenant_configs() -> TenantConfigCache:
    """The container-wide cache (created on first use, not at import)."""
    from support_tickets.core.settings import get_settings

    return TenantConfigCache(get_settings().tenant_config_ttl_seconds)
