"""The tenant record (shard count, tier, status, API key), read with a short cache.

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

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from decimal import Decimal
from enum import StrEnum
from functools import cache
from typing import Any, Final

from support_tickets.core import keys
from support_tickets.data.placement import CellPhase, MovePhase, Placement, cache_seconds
from support_tickets.data.table import TenantTable, from_item

MAX_CACHED_TENANTS: Final = 1024
_CELL_ID: Final = re.compile(keys.TENANT_ID_PATTERN)
TIERS: Final = ("basic", "standard", "premium")
DEFAULT_TIER: Final = "basic"


class TenantStatus(StrEnum):
    ACTIVE = "ACTIVE"
    SUSPENDED = "SUSPENDED"


# The tenant record's attribute that marks an offboarding (the metering function's
# condition on it keeps a late usage delivery from writing counters again).
OFFBOARDING_SINCE: Final = "offboarding_since"


@dataclass(frozen=True)
class TenantConfig:
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

    ``placement`` and the fields after it say which table holds the tenant's
    data and where a move between tables is (:mod:`support_tickets.data.placement`);
    a dedicated table's name always ends in ``-dedicated-<tenant id>`` (the
    form TenantAccessRole's statement for it reaches). ``cell_phase`` and the
    fields after it are a move between cells' (``ARRIVING`` with
    ``moving_from`` in the destination cell, ``MOVED_OUT`` with ``moving_to``
    and ``moved_out_at`` in the cell it leaves; ``moving_to`` also names the
    destination while the source's record copies and switches): a stack alone
    never has them, and stores and shows none of them.

    A frozen dataclass checked in ``__post_init__``, not a pydantic model: the
    authorizer and every function read tenant records, and pydantic's import
    alone is a quarter of a bare boto3 function's cold start (bench/results.md).
    An invalid record raises :class:`ValueError`.
    """

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
    api_key: str | None = field(default=None, repr=False)
    changed_at: int = 0
    offboarding_since: int | None = None
    erasable_at: int | None = None
    placement: str = Placement.POOL
    table: str | None = None
    placed_at: int = 0
    previous_table: str | None = None
    previous_placed_at: int = 0
    move_to: str | None = None
    move_table: str | None = None
    move_phase: str | None = None
    move_started_at: int | None = None
    cell_phase: str | None = None
    moving_from: str | None = None
    moving_to: str | None = None
    moved_out_at: int | None = None
    version: int = 0

    def __post_init__(self) -> None:
        checked = {
            "tenant_id": keys.validate_tenant_id(self.tenant_id),
            "shards": keys.validate_shard_count(_integer(self.shards, "shards")),
            "read_shards": tuple(
                sorted({keys.validate_shard_count(_integer(count, "read_shards")) for count in self.read_shards})
            ),
            "target_shards": _optional(
                self.target_shards, "target_shards", lambda count: keys.validate_shard_count(_integer(count, "shards"))
            ),
            "tier": _tier(self.tier),
            "status": TenantStatus(self.status),
            "api_key_id": _optional(self.api_key_id, "api_key_id", _text),
            "api_key": _optional(self.api_key, "api_key", _text),
            "changed_at": _integer(self.changed_at, "changed_at"),
            "offboarding_since": _optional(self.offboarding_since, "offboarding_since"),
            "erasable_at": _optional(self.erasable_at, "erasable_at"),
            "placement": str(Placement(self.placement)),
            "table": _optional(self.table, "table", self._dedicated_table),
            "placed_at": _integer(self.placed_at, "placed_at", minimum=0),
            "previous_table": _optional(self.previous_table, "previous_table", self._dedicated_table),
            "previous_placed_at": _integer(self.previous_placed_at, "previous_placed_at", minimum=0),
            "move_to": _optional(self.move_to, "move_to", lambda value: str(Placement(value))),
            "move_table": _optional(self.move_table, "move_table", self._dedicated_table),
            "move_phase": _optional(self.move_phase, "move_phase", lambda value: str(MovePhase(value))),
            "move_started_at": _optional(self.move_started_at, "move_started_at"),
            "cell_phase": _optional(self.cell_phase, "cell_phase", lambda value: str(CellPhase(value))),
            "moving_from": _optional(self.moving_from, "moving_from", _cell_id),
            "moving_to": _optional(self.moving_to, "moving_to", _cell_id),
            "moved_out_at": _optional(self.moved_out_at, "moved_out_at"),
            "version": _integer(self.version, "version", minimum=0),
        }
        if checked["shards"] not in checked["read_shards"]:
            raise ValueError("readers must cover the writers' shard count")
        if (checked["placement"] == Placement.DEDICATED) != (checked["table"] is not None):
            raise ValueError("a dedicated tenant names its table, and only a dedicated tenant does")
        if (checked["move_phase"] is None) != (checked["move_to"] is None):
            raise ValueError("a move names its phase and its destination")
        if checked["move_to"] is not None and (checked["move_to"] == Placement.DEDICATED) != (
            checked["move_table"] is not None
        ):
            raise ValueError("a move to a dedicated table names the table, and only such a move does")
        if checked["cell_phase"] == CellPhase.ARRIVING and checked["moving_from"] is None:
            raise ValueError("a tenant arriving from another cell names that cell")
        if checked["cell_phase"] == CellPhase.MOVED_OUT and (
            checked["moving_to"] is None or not checked["moved_out_at"]
        ):
            raise ValueError("a tenant that moved out names its cell and when it left")
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def _dedicated_table(self, value: object) -> str:
        name = _text(value)
        if not name.endswith(f"-dedicated-{self.tenant_id}") or len(name) > 255:
            raise ValueError(f"a dedicated table's name ends with -dedicated-{self.tenant_id}")
        return name

    @property
    def stored(self) -> bool:
        """Whether the table holds this record: a tenant without one reads as the defaults, version 0."""
        return self.version > 0

    @property
    def moving(self) -> bool:
        return self.move_phase is not None

    @property
    def resharding(self) -> bool:
        return self.target_shards is not None or len(self.read_shards) > 1

    def values(self) -> dict[str, Any]:
        """Every field, as Python values (``status`` a string); the cell fields only when set."""
        values = asdict(self)
        values["status"] = str(self.status)
        for name in CELL_FIELDS:
            if values[name] is None:
                del values[name]
        return values

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> TenantConfig:
        """A record from ``values``; names that are not fields are ignored."""
        return cls(**{name: values[name] for name in _FIELDS if name in values})

    def item(self) -> dict[str, Any]:
        """The stored item (attribute values as Python values)."""
        stored = self.values()
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
        return cls.from_values(values)


_FIELDS: Final = tuple(item.name for item in fields(TenantConfig))
# A move between cells' fields (support_tickets.data.placement): absent from a stack alone's records.
CELL_FIELDS: Final = ("cell_phase", "moving_from", "moving_to", "moved_out_at")


def _integer(value: object, name: str, minimum: int | None = None) -> int:
    """An int, or a DynamoDB number (``Decimal``) that is one."""
    if isinstance(value, Decimal) and value == value.to_integral_value():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        raise ValueError(f"{name} must be an integer" + (f" >= {minimum}" if minimum is not None else ""))
    return value


def _optional(value: object, name: str, check: Callable[[Any], Any] | None = None) -> Any:
    """``None``, or ``value`` checked (by default: an integer)."""
    if value is None:
        return None
    return check(value) if check is not None else _integer(value, name)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


def _cell_id(value: object) -> str:
    """A cell id, written as tenant ids are (ops.cell_routes)."""
    if not isinstance(value, str) or not _CELL_ID.fullmatch(value):
        raise ValueError("a cell id is 1-63 lowercase letters, digits or '-'")
    return value


def _tier(value: object) -> str:
    if value not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}")
    return str(value)


def read_tenant_config(table: TenantTable) -> TenantConfig:
    """The stored record of ``table``'s tenant (one consistent GetItem)."""
    response = table.call(
        "get_item", TableName=table.table_name, Key=keys.tenant_config_key(table.tenant_id), ConsistentRead=True
    )
    return TenantConfig.from_stored(table.tenant_id, response.get("Item"))


class TenantConfigCache:
    """Per-container cache of tenant records: at most ``ttl_seconds`` old (a
    second while the tenant moves between tables), bounded LRU."""

    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, TenantConfig]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, table: TenantTable) -> TenantConfig:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(table.tenant_id)
            # A record with a move running is kept a second at most (support_tickets.data.placement).
            if entry is not None and now - entry[0] < cache_seconds(entry[1], self._ttl):
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
