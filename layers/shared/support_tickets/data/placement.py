"""Where a tenant's data lives (the pool table or its own), and what a move between the two means.

A move's meaning is given for every reader, writer and stream function.

The tenant record (:class:`~support_tickets.data.tenant_registry.TenantConfig`,
always in the pool table) is the router. Its placement fields:

- ``placement`` (``pool`` or ``dedicated``) and ``table`` (the dedicated
  table's name; ``None`` in the pool): the table every read and write of the
  tenant goes to;
- ``placed_at`` (epoch seconds): from when that table's stream records are the
  tenant's; ``previous_table``/``previous_placed_at``: the table it was in
  before, whose records in ``[previous_placed_at, placed_at)`` still are (a
  stream function that lags behind the move processes them all the same);
- while a move runs: ``move_to``, ``move_table``, ``move_phase`` and
  ``move_started_at``.

A move (``ops.move``) goes through these phases, each written to the record:

1. ``COPYING``: readers and writers still use the old table; every write of a
   tenant's function is fenced by the record (one transaction with a check
   that the record still says ``COPYING`` for this move:
   :class:`~support_tickets.data.table.MoveFence`) and carries the marks of
   the tickets it writes; every audit event the audit writer puts into a
   day's trail marks the event (:func:`marks_writes`). Once no write made
   without the move in view can land any more, the mover copies the tenant's
   items into the new one (the wait: the record cache's TTL after announcing
   the move, so that every container has seen a record with ``move_phase``
   and keeps it no longer than :data:`MOVING_TTL_SECONDS`, plus
   :data:`WRITER_TIMEOUT_SECONDS`: Lambda ends an invocation at its timeout,
   so a write it made under the record before cannot land later). Its
   stream's records are not the tenant's (before ``placed_at`` of no placement
   of it): nothing is counted twice, no webhook fires.
2. ``SWITCHING``: writes answer 503 ``TENANT_MOVING`` (``Retry-After``); reads
   still use the old table, which no longer changes: a write made under
   ``COPYING`` that lands from now on, however late, fails its fence and
   changes nothing. At once (no wait: the fence is DynamoDB's condition,
   not a clock's) the mover copies what changed since its copy
   (the marked tickets and audit events, and the partitions that are neither
   a ticket's nor a day's trail), recounts
   the counts in the new table, and picks ``placed_at``: a second after its
   last write there.
3. ``FLIPPED``: the record names the new table (``placed_at`` set, the old one
   as ``previous_table``); reads go there, writes are still refused, for
   :data:`SWITCH_WAIT_SECONDS` again: no container reads the old table after
   any container wrote the new one (reads never go back in time), and no
   write lands before ``placed_at``.
4. ``ERASING``: writes go to the new table; the mover erases the old copy (its
   stream's records, after ``placed_at``, are not the tenant's: the erase
   fires nothing), then clears the move fields.

The write pause is steps 2 and 3: the time to copy the changes made during
the copy, plus ``SWITCH_WAIT_SECONDS``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Protocol


class Placement(StrEnum):
    POOL = "pool"
    DEDICATED = "dedicated"


class MovePhase(StrEnum):
    COPYING = "COPYING"
    SWITCHING = "SWITCHING"
    FLIPPED = "FLIPPED"
    ERASING = "ERASING"


class PlacedRecord(Protocol):
    """The placement fields of a tenant record (``TenantConfig`` has them; this
    module is below it, so that the record can use it)."""

    @property
    def placement(self) -> str: ...
    @property
    def table(self) -> str | None: ...
    @property
    def placed_at(self) -> int: ...
    @property
    def previous_table(self) -> str | None: ...
    @property
    def previous_placed_at(self) -> int: ...
    @property
    def move_phase(self) -> str | None: ...


# A record with a move running is cached this long at most, whatever TENANT_CONFIG_TTL_SECONDS says.
MOVING_TTL_SECONDS: Final = 1.0
# How long the mover waits after the flip before writes open: every container's cached record
# (MOVING_TTL_SECONDS) names the new table, so none reads the old one after another wrote the new.
SWITCH_WAIT_SECONDS: Final = 2.0
# The longest Timeout of a function that writes a tenant's data without a fence when its record
# shows no move: the API functions' 10 s and DeliverWebhookFunction's 30 s (tests/unit/test_placement.py
# reads them from the template). The copy starts this long after every container saw the move.
WRITER_TIMEOUT_SECONDS: Final = 30.0
# What a write during the switch tells the client to wait.
MOVING_RETRY_AFTER_SECONDS: Final = 2
# The phases that refuse writes.
WRITES_PAUSED: Final = frozenset({MovePhase.SWITCHING, MovePhase.FLIPPED})


def data_table(record: PlacedRecord, pool_table: str) -> str:
    """The table a tenant's reads and writes go to."""
    return record.table if record.placement == Placement.DEDICATED and record.table else pool_table


def writes_paused(record: PlacedRecord) -> bool:
    """Whether the tenant's writes answer 503 ``TENANT_MOVING`` now."""
    return record.move_phase is not None and MovePhase(record.move_phase) in WRITES_PAUSED


def marks_writes(record: PlacedRecord) -> bool:
    """Whether a write of the tenant's tickets or audit events marks them first
    (:class:`~support_tickets.data.table.TenantTable`): while the mover copies
    (``COPYING``) and until its switch has read the marks (``SWITCHING``, when
    only the stream functions still write: a lagging audit writer's events)."""
    return record.move_phase in (MovePhase.COPYING, MovePhase.SWITCHING)


def cache_seconds(record: PlacedRecord, ttl_seconds: float) -> float:
    """How long a container may keep ``record``."""
    return min(ttl_seconds, MOVING_TTL_SECONDS) if record.move_phase is not None else ttl_seconds


def owns_record(record: PlacedRecord, pool_table: str, source_table: str, created_second: int) -> bool:
    """Whether a stream record of the tenant, from ``source_table`` and created
    at ``created_second`` (its ``ApproximateCreationDateTime``, epoch seconds
    rounded down, as DynamoDB gives it), is one of the tenant's changes: from
    the table of its placement since ``placed_at``, or from the table before it
    until then. A move's copy and erase are neither."""
    if source_table == data_table(record, pool_table):
        return created_second >= record.placed_at
    previous = record.previous_table or pool_table
    if record.placed_at and source_table == previous:
        return record.previous_placed_at <= created_second < record.placed_at
    return False
