"""Which table a stream record came from, and whether it is one of its tenant's changes.

The stream functions (the aggregator, the audit writer and its webhook fan-out)
read the pool table's stream and each dedicated table's (a dedicated tenant's
stack maps its table's stream to the same functions: ``templates/dedicated-table.yaml``).
Lambda names the stream a record came from in the record's ``eventSourceARN``,
``arn:aws:dynamodb:<region>:<account>:table/<table name>/stream/<label>``
(https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html, the event's
example), and each invocation holds the records of one event source mapping,
that is of one stream. The record's time is its ``ApproximateCreationDateTime``:
"in UNIX epoch time format and rounded down to the closest second"
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_StreamRecord.html).

For each record (:meth:`StreamRouter.route`):

- its **source table**, from the ARN. A record without a stream ARN, or of a
  table that is neither the pool table nor its own tenant's dedicated table
  (``<pool table>-dedicated-<tenant>``, the only ones the stream functions'
  roles reach), is *poison*: no guess about where its writes would go;
- whether it is **one of the tenant's changes**:
  :func:`support_tickets.data.placement.owns_record` with the tenant's record
  (the pool table's, through the layer's record cache, with the function's own
  role). A move's copy into the new table (before ``placed_at``) and its erase
  of the old one (after it) are not: the function skips them (counted in the
  ``MoveRecordsSkipped`` metric, logged at debug), so a move counts nothing
  twice, writes no audit event and fires no webhook. A record the old table
  made before the switch, handled late, is the tenant's all the same;
- where its writes go: the **source table** (the counts, the audit items and the
  delivery records of a change are written beside the change; the
  mover carries the append-only ones of a lagging function over, and recounts
  the counts), and where its tenant's webhooks are read: the **current table**
  of its placement (after the erase the old table has none left);
- whether the audit events written for it **mark themselves** for a move's
  switch (:meth:`StreamRouter.marks_writes`: the audit writer asks, per record).

Cost: a function makes one router per batch, which reads a tenant's record at
most once (then keeps it for the batch), and only when the container's cache
(``TENANT_CONFIG_TTL_SECONDS``; a second while the tenant moves) has none: a
tenant that never moved pays one small GetItem per container and TTL, never one
per record. The audit writer's question whether to mark reads the container's
cache itself (its decision must be fresh), which adds no read but when the
cache's entry expired during the batch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Final

from support_tickets.data.placement import data_table, marks_writes, owns_record
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.data.tenant_registry import TenantConfig, TenantConfigCache
from support_tickets.streams.records import PoisonRecord, creation_seconds

# What a dedicated table's name adds to the pool table's (stack_model.dedicated.TABLE_INFIX,
# which the layer does not ship; a test holds them equal).
DEDICATED_INFIX: Final = "-dedicated-"
# arn:<partition>:dynamodb:<region>:<account>:table/<name>/stream/<label> (DynamoDB's table names:
# 3-255 of letters, digits, "_", "-" and ".").
_STREAM_ARN: Final = re.compile(
    r"arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/(?P<table>[A-Za-z0-9_.-]{3,255})/stream/[^/]+"
)
SKIPPED_METRIC: Final = "MoveRecordsSkipped"


def source_table(event_source_arn: object) -> str:
    """The table of a record's ``eventSourceARN``; poison without a stream's ARN."""
    match = _STREAM_ARN.fullmatch(event_source_arn) if isinstance(event_source_arn, str) else None
    if match is None:
        raise PoisonRecord("a record without its stream's ARN")
    return match.group("table")


def created_second(value: object) -> int | None:
    """``ApproximateCreationDateTime`` in whole epoch seconds (a fraction is
    rounded down, as DynamoDB rounds it)."""
    seconds = creation_seconds(value)
    return math.floor(seconds) if seconds is not None else None


def dedicated_table(pool_table: str, tenant_id: str) -> str:
    """The name of ``tenant_id``'s dedicated table beside ``pool_table``."""
    return f"{pool_table}{DEDICATED_INFIX}{tenant_id}"


@dataclass(frozen=True, slots=True)
class RecordRoute:
    """Where one stream record of a tenant belongs."""

    source: str  # the table it came from: what the function writes for it goes there
    current: str  # the tenant's table now (its placement): where its webhooks are read
    owned: bool  # one of the tenant's changes; False: a move's copy or erase, skipped


@dataclass
class StreamRouter:
    """Routes the records of one batch (module docstring): a function makes one per invocation."""

    pool_table: str
    client: Any  # DynamoDB, the function's own role (GetItem of TENANT#*|CONFIG in the pool table)
    records: TenantConfigCache
    # The tenant records this batch has used: one read per tenant and batch at most.
    _batch: dict[str, TenantConfig] = field(default_factory=dict)

    def tenant_record(self, tenant_id: str) -> TenantConfig:
        record = self._batch.get(tenant_id)
        if record is None:
            # The record lives in the pool table, whatever the tenant's placement.
            record = self.records.get(TenantTable(tenant_id, self.pool_table, OwnClient(self.client)))
            self._batch[tenant_id] = record
        return record

    def route(self, tenant_id: str, event_source_arn: object, approximate_creation: object) -> RecordRoute:
        """Where a record of ``tenant_id`` (the tenant of its key) belongs; raises
        :class:`PoisonRecord` for a record of no table of its tenant's."""
        table = source_table(event_source_arn)
        if table not in (self.pool_table, dedicated_table(self.pool_table, tenant_id)):
            raise PoisonRecord("security: a record of a table that is not its tenant's")
        record = self.tenant_record(tenant_id)
        current = data_table(record, self.pool_table)
        second = created_second(approximate_creation)
        if second is None:
            # Without its time only a record of a table the tenant was placed on from the start is its own.
            if table != current or record.placed_at:
                raise PoisonRecord("a record without its time, of a tenant placed by a move")
            return RecordRoute(table, current, owned=True)
        return RecordRoute(table, current, owns_record(record, self.pool_table, table, second))

    def marks_writes(self, tenant_id: str, table: str) -> bool:
        """Whether the audit events a function writes into ``table`` for ``tenant_id``
        now mark themselves for a move's switch (:func:`~support_tickets.data.placement.marks_writes`).
        From the container's cache, not the batch's record: like a request's, the
        decision is at most the cache's TTL old when the write is made, which the
        mover waits out before it copies (a batch may last longer)."""
        record = self.records.get(TenantTable(tenant_id, self.pool_table, OwnClient(self.client)))
        return marks_writes(record) and data_table(record, self.pool_table) == table
