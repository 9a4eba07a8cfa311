"""Writing audit events: each record's event once, under the ticket's history and the tenant's trail.

What an event is, and why writing it with ``attribute_not_exists`` is exactly
once under every redelivery, is in :mod:`support_tickets.streams.audit_events`.
An event goes into the table its record came from (the pool table or the
tenant's dedicated one: :mod:`support_tickets.streams.routing`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from support_tickets.core import keys
from support_tickets.core.errors import ApiError
from support_tickets.data.audit_items import epoch_of, stored_item
from support_tickets.data.table import OwnClient, TenantTable, to_item
from support_tickets.streams.audit_events import AuditRecord
from support_tickets.streams.records import own_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DEFAULT_RETENTION_DAYS: Final = 400
# A day's index entry outlives every event of that day (their retention counts
# from their stream time, at most a skew past the day's end).
DAY_INDEX_MARGIN_SECONDS: Final = 2 * 86_400
MAX_REMEMBERED_DAYS: Final = 4096


class RecentKeys:
    """A bounded set of recently seen keys (oldest forgotten first), thread-safe."""

    def __init__(self, capacity: int = MAX_REMEMBERED_DAYS) -> None:
        self._capacity = capacity
        self._keys: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    def seen(self, key: Hashable) -> bool:
        """Whether ``key`` was seen (and remember it now)."""
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return True
            self._keys[key] = None
            if len(self._keys) > self._capacity:
                self._keys.popitem(last=False)
            return False

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._keys.pop(key, None)


@dataclass(frozen=True, slots=True)
class AuditWriter:
    """Writes a record's event, once, under the ticket's history and the tenant's trail."""

    table_name: str
    client: DynamoDBClient
    retention_days: int = DEFAULT_RETENTION_DAYS
    # Days this container already listed in a tenant's day index: one put per
    # tenant and day and container, not one per event.
    indexed_days: RecentKeys = field(default_factory=RecentKeys)

    def write(self, record: AuditRecord, table_name: str | None = None, *, marks: bool = False) -> int:
        """How many of the event's two items this call wrote into ``table_name`` (the
        record's source table; the writer's, the pool table, by default): 0 on a redelivery.
        ``marks``: a move is copying that table, and the event's item in the day's
        trail is marked first (:class:`~support_tickets.data.table.TenantTable`)."""
        event = record.event
        if event is None or record.tenant_id is None:
            return 0
        table = TenantTable(record.tenant_id, table_name or self.table_name, OwnClient(self.client), marks_writes=marks)
        recorded = record.recorded_at if record.recorded_at is not None else epoch_of(event["at"])
        expiration = int(recorded) + self.retention_days * 86_400
        day = event["at"][:10]
        # The day's index entry first: every event an offboarding must find is under a listed day.
        self._index_day(table, day)
        partitions = (
            keys.history_pk(record.tenant_id, event["ticket_id"]),
            keys.audit_day_pk(record.tenant_id, day, keys.audit_shard(event["event_id"])),
        )
        items = [stored_item(event, record.sequence_number, pk, expiration) for pk in partitions]
        return sum(self._put_once(table, item) for item in items)

    def _index_day(self, table: TenantTable, day: str) -> None:
        # Per table: a tenant that moved lists its days in its new table too.
        listed = (table.table_name, table.tenant_id, day)
        if self.indexed_days.seen(listed):
            return
        day_end = epoch_of(f"{day}T00:00:00.000Z") + 86_400
        expiration = int(day_end) + self.retention_days * 86_400 + DAY_INDEX_MARGIN_SECONDS
        item = to_item({"pk": keys.audit_days_pk(table.tenant_id), "sk": day, "expiration": expiration})
        try:
            self._put_once(table, item)
        except (ApiError, ClientError, BotoCoreError):
            self.indexed_days.forget(listed)  # not listed: the next event tries again
            raise

    def _put_once(self, table: TenantTable, item: dict[str, Any]) -> int:
        """1 if this put wrote ``item``, 0 if an earlier delivery had."""
        written = table.call_if(
            "put_item", TableName=table.table_name, Item=item, ConditionExpression="attribute_not_exists(pk)"
        )
        return 1 if written else 0


@cache
def audit_client() -> DynamoDBClient:
    """The audit writer's own client (its execution role: audit items only)."""
    client: DynamoDBClient = own_client("dynamodb")
    return client


@cache
def audit_writer() -> AuditWriter:
    """The container's writer, configured from the function's environment at cold start."""
    return AuditWriter(
        table_name=os.environ["TABLE_NAME"],  # the pool table; each event goes to its record's (write's argument)
        client=audit_client(),
        retention_days=int(os.environ.get("AUDIT_RETENTION_DAYS", DEFAULT_RETENTION_DAYS)),
    )
