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

**Between cells** (``ops.cell_move``: stacks that share nothing, each with its
own tenant records) the same phases run across two records, with a cell phase
(``cell_phase``) on each; a stack alone never has one:

0. The destination cell B gets the tenant's record first, ``ARRIVING``
   (``moving_from`` names A): B's authorizer answers the tenant with B's API
   key, B's functions refuse every request of it, reads included (503
   ``TENANT_MOVING``: B's copy is incomplete), and B's stream functions own
   none of its records (:func:`owns_record`: the copy counts, audits and
   announces nothing).
1. and 2. A's record goes through ``COPYING`` and ``SWITCHING`` as above
   (``moving_to`` names B; the fence is A's record), the copy written into
   B's table.
3. The flip writes B's record ``FLIPPED`` (its cell phase gone: reads served
   from B's copy, writes still refused; ``placed_at`` set, and
   ``previous_placed_at`` equal to it: no table of B held the tenant before),
   then A's ``MOVED_OUT`` (``moved_out_at``: B's ``placed_at``): A's
   authorizer and functions refuse everything of the tenant (503
   ``TENANT_MOVING``), and A's stream functions own its records from before
   ``moved_out_at`` only (a lagging one's writes are carried over), so the
   erase fires nothing.
4. B's record goes ``ERASING`` (writes open in B) while A's copy is erased;
   A's record goes last. A read that reaches A after the flip (a stale route
   at the edge) is refused rather than served: A's data stops at the switch,
   and serving it would go back in time.
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


class CellPhase(StrEnum):
    """Where a tenant moving between cells is, as each cell's record says."""

    ARRIVING = "ARRIVING"  # in the destination cell, until the flip
    MOVED_OUT = "MOVED_OUT"  # in the cell it left, from the flip until its record is deleted


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
    @property
    def cell_phase(self) -> str | None: ...
    @property
    def moved_out_at(self) -> int | None: ...


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


def served_here(record: PlacedRecord) -> bool:
    """Whether this stack serves the tenant's requests at all: not while it is
    arriving from another cell, nor once it moved out to one (503 ``TENANT_MOVING``)."""
    return record.cell_phase is None


def writes_paused(record: PlacedRecord) -> bool:
    """Whether the tenant's writes answer 503 ``TENANT_MOVING`` now."""
    if not served_here(record):
        return True
    return record.move_phase is not None and MovePhase(record.move_phase) in WRITES_PAUSED


def marks_writes(record: PlacedRecord) -> bool:
    """Whether a write of the tenant's tickets or audit events marks them first
    (:class:`~support_tickets.data.table.TenantTable`): while the mover copies
    (``COPYING``) and until its switch has read the marks (``SWITCHING``, when
    only the stream functions still write: a lagging audit writer's events)."""
    return record.move_phase in (MovePhase.COPYING, MovePhase.SWITCHING)


def cache_seconds(record: PlacedRecord, ttl_seconds: float) -> float:
    """How long a container may keep ``record``: a second while a move runs (an
    arriving tenant's too: its flip must reach every container at once)."""
    moving = record.move_phase is not None or record.cell_phase == CellPhase.ARRIVING
    return min(ttl_seconds, MOVING_TTL_SECONDS) if moving else ttl_seconds


def owns_record(record: PlacedRecord, pool_table: str, source_table: str, created_second: int) -> bool:
    """Whether a stream record of the tenant, from ``source_table`` and created
    at ``created_second`` (its ``ApproximateCreationDateTime``, epoch seconds
    rounded down, as DynamoDB gives it), is one of the tenant's changes: from
    the table of its placement since ``placed_at``, or from the table before it
    until then. A move's copy and erase are neither. Between cells: nothing of
    an arriving tenant's, and of a tenant that moved out, only what its own
    table recorded before ``moved_out_at``."""
    if record.cell_phase == CellPhase.ARRIVING:
        return False
    if record.cell_phase == CellPhase.MOVED_OUT and created_second >= (record.moved_out_at or 0):
        return False
    if source_table == data_table(record, pool_table):
        return created_second >= record.placed_at
    previous = record.previous_table or pool_table
    if record.placed_at and source_table == previous:
        return record.previous_placed_at <= created_second < record.placed_at
    return False
