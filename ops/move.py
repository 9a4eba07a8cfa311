"""Move a tenant's data between the pool table and a table of its own, online:
``make tenant TENANT=<t> PLACEMENT=dedicated|pool`` (``python -m ops.tenants
--placement``).

The phases are :mod:`support_tickets.data.placement`'s, each written to the
tenant record with a conditional write on its ``version``:

1. ``COPYING`` (announced with ``move_to``, ``move_table``,
   ``move_started_at``): readers and writers still use the old table, and
   every write of a ticket's partition (its summary, its comments) first marks
   the ticket in the old table, every audit event the audit writer puts into
   a day's trail there the event (``TENANT#<t>|MOVE#<n>``:
   ``TenantTable.marks_writes``; the audit writer asks the container's record
   cache for each event, as a request does). From ``move_started_at`` plus the
   record cache's TTL and a margin (``TenantAdmin.phase_seconds``, 35 s),
   when every container has seen a moving record (which it keeps a second at
   most), every item of the tenant but the kinds below is copied into the new
   table (BatchWriteItem, 25 a call, unprocessed items retried with
   exponential backoff as AWS's BatchWriteItem page asks, at
   :data:`DEFAULT_RATE` items a second at most). The new table's stream
   records are not the tenant's.
2. ``SWITCHING``: writes answer 503 ``TENANT_MOVING``. After
   ``SWITCH_WAIT_SECONDS`` the mover syncs the new table with the old one,
   which is authoritative and no longer changes: every item that differs is
   copied again, every item the old one no longer has is deleted. When this
   run began the move, the new table's side is a digest of what its copy
   wrote, and of the tickets and audit events only the marked ones are read
   again (a ticket written since the copy began was marked before the write,
   an event too, until the sync read the marks; one written before, the copy
   read as it was): the events by key (BatchGetItem), no day's trail, so the
   pause grows with what was written during the copy, not with the tenant nor
   with its last hour. A mark names a ticket id or an event's sort key under
   the tenant's own prefix: one that names nothing (a tenant's credentials
   can write its ticket marks) reads nothing. Every switch follows its own
   run's copy (a resumed move copies again: **Resuming**); a sync without a
   digest would read every ticket again, in both tables (GSI1
   included), and the trail since :func:`trailing_horizon_seconds` before the
   move's start. The counts are recounted in the new
   table (as copied, with each ticket read again counted as found; one
   ``<STATUS>`` count item per status, the form ``make reconcile`` writes, every
   other count item there deleted); ``placed_at`` is a whole second after its
   last write there.
3. ``FLIPPED``: the record names the new table (``placement``, ``table``,
   ``placed_at``, the old one as ``previous_table``/``previous_placed_at``);
   reads go there, writes are still refused, for ``SWITCH_WAIT_SECONDS`` and
   until DynamoDB's clock has passed ``placed_at`` (**Clocks**). Between
   cells, the deliveries the old cell had not finished are then handed over
   (:meth:`Mover._before_writes_open`), and writes stay refused another
   ``SWITCH_WAIT_SECONDS`` if any was, so that the stream functions queue
   them before any new write of the tenant.
4. ``ERASING``: writes go to the new table. The *trailing copy* brings over
   what a stream function that lags behind wrote into the old table after the
   sync read it (audit events with their history twins, the day index,
   delivery records): a conditional put (``attribute_not_exists``) of each
   such item the new table lacks, pass after pass, until a pass copies nothing
   and :data:`DEFAULT_DRAIN_SECONDS` have passed since ``placed_at``. Only those
   append-only kinds: a ticket, comment, webhook or idempotency record the new
   table lacks was deleted there, and must stay deleted. Then everything of
   the tenant in the old table is erased (in the pool, its record and usage
   ledger stay; each ticket summary is marked ``erasing`` before it goes, as
   ``make offboard`` does, so that no stream function even journals the
   erase; an append-only item the new table lacks is copied there before it
   goes: a lagging function wrote it after the last pass), a keys-only Scan of the old table checks that nothing is left
   (as ``make offboard``'s final check does), and the move fields are
   cleared. What that Scan finds the walk did not find, so it was not copied
   either: an item of an append-only kind is copied if absent, then erased; a
   ticket's, webhook's or idempotency record's is left there and reported
   (copied after the switch, its stream record would be counted, audited and
   sent to webhooks as a change nobody made). While a Scan finds late
   append-only items only, the check goes on (:meth:`Mover._verify`), so that
   one run finishes a move a lagging stream function still writes into.

**Clocks.** Every time the mover writes or waits for (``move_started_at``,
``changed_at``, ``placed_at``, the waits until ``placed_at`` and the drain's
end) is DynamoDB's, not the operator machine's: :class:`ServerClock` learns it
from the ``Date`` header of each response of the store's client and measures
the time since on the local monotonic clock (``Mover.monotonic``). A stream
record's ``ApproximateCreationDateTime`` is compared with ``placed_at``
(:func:`support_tickets.data.placement.owns_record`): on the operator's clock, a
clock ahead let writes open before DynamoDB's clock reached ``placed_at`` (their
records were not the tenant's: no audit event, no webhook, no count), one behind
made the copy's records the tenant's (duplicate events, wrong counts).

The move fires no webhook and writes no audit event or count of its own: a
stream record is the tenant's only from the table of its placement since
``placed_at`` (or the one before, until then): the copy and the sync write the
new table before ``placed_at``, the erase the old one after it, and what the
trailing copy writes after it matches none of the stream functions' filters
(INSERTs of audit items and delivery records).

**What is not copied**, and why:

- the tenant record (``CONFIG``): the router, always in the pool table;
- the usage ledger (``USAGE`` counters and the metering function's
  ``USAGE#JOURNAL``): the operator's, always in the pool table, where the
  metering function writes it;
- the counts (``AGGREGATE``) and the aggregator's journals
  (``AGGREGATE#JOURNAL#<n>``): the counts are recounted in the new table at the
  switch, and a journal names stream records of the old table's stream, which
  the new table's aggregator never sees again;
- the move marks (``MOVE#<n>``): they name what changed in the old table
  during this move's copy, and are erased with it;
- the webhook delivery bookkeeping under ``WEBHOOKS#RATE``: per-second rate
  counters (they expire a minute later) and attempt leases (held for one
  attempt; an attempt releases its lease in the table it took it from). The
  new table starts with none: at worst a tenant's first second there admits
  its tier's rate once more;
- an idempotency record still in progress (Powertools' ``INPROGRESS``): the
  create that stored it completes it only in one fenced transaction with its
  ticket's put, so once the switch begins none ever completes (its client got
  503 ``TENANT_MOVING`` and retries). Carried, it would answer that retry 409
  "still in progress" until it expired; not carried, the retry creates the
  ticket. A completed record is carried (it answers a retry with its ticket).

A webhook's parking partition (its parked messages, their circuit and the
retry slots: :mod:`support_tickets.webhooks.parking`) is copied and synced like the
webhooks: the delivery function writes it only while the tenant's writes are
not paused, and its drain holds while they are.

**Items found without a Scan** (as :mod:`ops.tenant_data` finds them): the
webhooks partition and each listed webhook's deliveries and parking partition, the 64 idempotency
partitions, the day index and each listed day's partitions, the tickets from
GSI1 and those the trail names (a switch after this run's copy: the marked
ones only, and the marked audit events instead of the days' partitions), each
with its comments. A ticket's history
is not read: each of its items is the twin of an item of the day's
partitions (the audit writer stores every event twice, the same attributes
under both keys), copied, synced and erased with it: a Query per ticket
saved on the copy and on the erase (a history item without its twin is the
final Scan's, below). GSI1 is
queried under the keys of the record's shard counts only (``make export``
and ``make offboard`` query all 64 counts' keys, 195 queries a table): every
reader and writer uses those, and a reshard can't run during a move; a ticket
under another key is what the final Scan reports. A resumed switch reads the
day partitions from :func:`trailing_horizon_seconds` before the move's start
only (audit items are append-only, and no stream record older than the event
sources' ``MaximumRecordAgeInSeconds`` is processed any more); a switch after
this run's copy reads the marked events only. Either brings a new event's
history twin with it.
A resumed switch queries GSI1 at least :data:`GSI_PROPAGATION_SECONDS` after
``SWITCH_WAIT_SECONDS`` (AWS: a write reaches a GSI within a second, re:Post
"dynamodb-missing-table-items-gsi"); a switch after this run's copy visits
every partition but a ticket's the copy wrote too, so that a webhook deleted
during the copy is deleted there too (a deleted ticket was marked).

**One mover at a time.** A running mover rewrites the record (``changed_at``)
every :data:`HEARTBEAT_SECONDS`, and checks that its write still holds before
each batch it writes; a second mover refuses to start while the record was
written less than :data:`STALE_SECONDS` ago (one line, exit 1), and takes over
after that (a killed mover writes nothing any more). A mover that finds its
record changed by someone else stops (run it again). Any operator change of the
record during a move (a status, a tier) stops the mover the same way.

**Interrupted** (Ctrl-C, SIGTERM): the mover says in one line what it left and
the command to run (:class:`MoveInterrupted`; ``make tenant`` exits 1). It
releases its lease (``changed_at`` 0: the next run takes over at once; a killed
mover, which releases nothing, is still taken over after :data:`STALE_SECONDS`
only, and a running one still refuses a second), and puts a switch it had not
flipped back in ``COPYING``, with a conditional write on the record's version
as every write of it: the tenant's writes go to the old table again within a
second, and mark what they change as in ``SWITCHING``, so the next switch reads
them. ``FLIPPED`` can't go back (reads are the new table's): its writes are
refused until the command runs again; ``COPYING`` and ``ERASING`` take writes.

**Resuming**: run the command again with the same ``PLACEMENT`` (at once after
an interrupted run; after a killed mover's :data:`STALE_SECONDS`). A run that
finds a switch its stopped mover did not flip puts it back in ``COPYING``
(writes open); in ``COPYING`` it erases what the stopped run left in the new
table (its copy, part of its sync), then copies again, so that its digest is
all the new table has and its switch reads only what was marked: a resumed
switch pauses writes as long as an uninterrupted one (re-copying with writes
open, rather than reading every ticket again with writes refused, or keeping a
stopped run's digest somewhere: the new table may hold writes of that run's
sync that no digest names). ``FLIPPED`` waits again, ``ERASING`` copies the
trailing items again, erases and checks.

**Rolling back** is possible until the switch: ``PLACEMENT`` set to the
tenant's current placement while a move is ``COPYING`` or ``SWITCHING``
puts it back in ``COPYING`` (writes go to the old table again within a
second), erases the copy from the table it was going to, checks it, and then
clears the move fields; stopped before that, it is still a move, to roll back
or finish. From ``FLIPPED`` on the data is served from the new table: the
command refuses (one line) and says to finish the move (the same
``PLACEMENT``), then move back.

Between cells (``make tenant CELL=``) the same mover runs with its
destination in another cell: :mod:`ops.cell_move` (its hooks: the old and new
tables, what a write into the new table carries, what happens outside the
table at the switch, each trailing pass, after the erase and a rollback).

A tenant that is offboarding or resharding can't move, and a moving tenant
can't be resharded or offboarded (``ops.tenants.TenantAdmin`` refuses to
write that record). Moving back to the pool leaves the emptied dedicated table
and its stack (deletion protection): the command says how to delete them.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Protocol, TextIO

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import STATUS_CONSTANTS
from botocore.exceptions import ClientError

from ops.tenant_data import Progress, keys_under_prefix, mark_erasing
from stack_model.template import template
from support_tickets.core import keys
from support_tickets.core.digits import is_digits
from support_tickets.core.errors import Throttled
from support_tickets.core.keys import TicketStatus
from support_tickets.data.audit_items import iso_time
from support_tickets.data.placement import SWITCH_WAIT_SECONDS, MovePhase, Placement
from support_tickets.data.table import BATCH_WRITE_SIZE, MARK_WRITTEN, OwnClient, TenantTable, error_code
from support_tickets.data.tenant_registry import TenantConfig

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Items written a second at most: a quarter of what a new on-demand table takes
# (4,000 writes a second, AWS's "Initial throughput and scaling properties"), so
# that the copy leaves the pool's and the new table's room to their traffic.
DEFAULT_RATE: Final = 1000.0
# Partitions read (and written) at once. More shorten the sync, so the write pause, of a
# tenant whose tickets were written much during the copy, or of a resumed switch (DynamoDB
# serves the Queries in parallel); each is a thread and a connection of the operator's machine.
DEFAULT_WORKERS: Final = 8
MAX_MOVE_WORKERS: Final = 64
# How long after placed_at the trailing copy keeps looking: the stream
# functions' usual lag is under a second; a minute covers a batch retried a few
# times (the event sources' retries and bisections). A record processed later
# than that writes into the old table after it was erased: its IteratorAge
# alarm says so (docs/operations.md).
DEFAULT_DRAIN_SECONDS: Final = 60.0
# A trailing pass every 5 s, or more often within a shorter drain (the local stack's few
# seconds): at least TRAILING_PASSES_PER_DRAIN passes look within the drain.
TRAILING_PASS_SECONDS: Final = 5.0
TRAILING_PASSES_PER_DRAIN: Final = 5
HEARTBEAT_SECONDS: Final = 5.0
# A mover that has not written the record for this long is presumed stopped.
STALE_SECONDS: Final = 30.0
# AWS: a write propagates to a global secondary index within a second.
GSI_PROPAGATION_SECONDS: Final = 1.0
# Unprocessed items retried this many times (backoff 50 ms doubling to 2 s), then the move stops.
MAX_WRITE_ROUNDS: Final = 10
BATCH_GET_SIZE: Final = 100  # BatchGetItem's most keys a call
MAX_VERIFY_ROUNDS: Final = 6
VERIFY_SETTLE_SECONDS: Final = 2.0
# Items a copy remembers (a 16-byte digest each, about 150 bytes with its key):
# beyond, the sync reads the new table instead.
MAX_REMEMBERED: Final = 1_000_000
# The catch-up while writes go on (Mover._catch_up): rounds at most, and how many marks may be left for the
# switch's sync (its pause grows with them: a Query and a write per marked ticket).
CATCH_UP_ROUNDS: Final = 5
CATCH_UP_ENOUGH: Final = 5
SET_TYPES: Final = frozenset({"SS", "NS", "BS"})
# Partitions in flight per worker (bounds the memory of the results not yet merged).
WINDOW_PER_WORKER: Final = 4

# Kinds of a tenant's partitions.
WEBHOOKS: Final = "webhooks"
DELIVERIES: Final = "deliveries"
PARKED: Final = "parked"
IDEMPOTENCY: Final = "idempotency"
DAYS: Final = "days"
DAY: Final = "day"
TICKET: Final = "ticket"
HISTORY: Final = "history"
NOT_COPIED: Final = "not copied"
# Powertools' idempotency record as support_tickets.domain.tickets stores it (its persistence
# layer's default attribute names): the status attribute, and the status of a request still running.
IDEMPOTENCY_STATUS: Final = inspect.signature(DynamoDBPersistenceLayer).parameters["status_attr"].default
IN_PROGRESS: Final = STATUS_CONSTANTS["INPROGRESS"]
# The phases a move can be rolled back from: the old table is still authoritative.
ROLLBACK_PHASES: Final = frozenset({MovePhase.COPYING, MovePhase.SWITCHING})
# Kinds whose items only ever appear (then expire): what may be copied after the switch.
APPEND_ONLY: Final = frozenset({DAYS, DAY, HISTORY, DELIVERIES})
# Kinds a client changes and deletes: copied before the switch only.
CARRIED: Final = frozenset({TICKET, WEBHOOKS, IDEMPOTENCY, PARKED})

Partition = tuple[str, str]  # (kind, pk)


class MoveError(RuntimeError):
    """The move can't (or must not) go on: one line for the operator."""


class MoveInterrupted(MoveError):
    """Ctrl-C or SIGTERM stopped the mover: what it left, and the command to run."""


class MoverStopped(RuntimeError):
    """Another worker of this mover failed: stop writing."""


class RecordStore(Protocol):
    """What the mover needs of ``ops.tenants.TenantAdmin``: the pool table's
    client, the record, its conditional write, the cache TTL's wait, a clock."""

    @property
    def client(self) -> DynamoDBClient: ...
    @property
    def table_name(self) -> str: ...
    @property
    def phase_seconds(self) -> float: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def sleep(self) -> Callable[[float], None]: ...

    def record(self, tenant_id: str) -> TenantConfig: ...

    def write(self, current: TenantConfig, changes: dict[str, Any]) -> TenantConfig: ...


class ServerClock:
    """DynamoDB's clock, as its responses tell it: the mover's times that stream
    records are compared with (``placed_at``, and the waits for it) are the
    server's, whatever the operator's machine's clock says.

    Each response's HTTP ``Date`` header (RFC 9110 section 6.6.1: when the server
    generated it, in whole seconds, rounded down; botocore gives it as
    ``ResponseMetadata.HTTPHeaders.date``; DynamoDB, moto and the local stack's
    server send it), seen at the local ``monotonic`` time it arrived, bounds the
    server's time from below ever after: ``date + (monotonic() - arrived)``.
    :meth:`now` is the highest such bound (the server's time, a second and a
    round trip behind at most): a wait until :meth:`now` has passed a time ends
    after the server's clock did. A stream record's ``ApproximateCreationDateTime``
    (rounded down too) is at most the ``Date`` of the response to its write, so
    a time a whole second after the bound read after that response is later
    than the record's. Before any response: the operator's clock (``fallback``)."""

    def __init__(self, monotonic: Callable[[], float], fallback: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._fallback = fallback
        self._offset: float | None = None
        self._lock = threading.Lock()

    def observe(self, headers: Mapping[str, str], arrived: float | None = None) -> None:
        """A response's headers, received at ``arrived`` (the monotonic clock; now by default)."""
        date = headers.get("date")
        if not date:
            return
        try:
            server = parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            return
        offset = server - (self._monotonic() if arrived is None else arrived)
        with self._lock:
            self._offset = offset if self._offset is None else max(self._offset, offset)

    def after_call(self, parsed: Any = None, **_: Any) -> None:
        """botocore's ``after-call`` event handler: every response of the client, errors too."""
        if isinstance(parsed, dict):
            self.observe(parsed.get("ResponseMetadata", {}).get("HTTPHeaders", {}))

    def now(self) -> float:
        with self._lock:
            offset = self._offset
        return self._fallback() if offset is None else self._monotonic() + offset


@dataclass
class OnServerTime:
    """The record store of a run, its clock the server's (:class:`ServerClock`)."""

    inner: RecordStore
    server: ServerClock

    @property
    def client(self) -> DynamoDBClient:
        return self.inner.client

    @property
    def table_name(self) -> str:
        return self.inner.table_name

    @property
    def phase_seconds(self) -> float:
        return self.inner.phase_seconds

    @property
    def clock(self) -> Callable[[], float]:
        return self.server.now

    @property
    def sleep(self) -> Callable[[float], None]:
        return self.inner.sleep

    def record(self, tenant_id: str) -> TenantConfig:
        return self.inner.record(tenant_id)

    def write(self, current: TenantConfig, changes: dict[str, Any]) -> TenantConfig:
        return self.inner.write(current, changes)


@contextmanager
def observed(client: Any, server: ServerClock) -> Iterator[None]:
    """Every response of ``client`` tells ``server`` DynamoDB's time, while the block runs."""
    events = getattr(getattr(client, "meta", None), "events", None)
    hook = f"ops.move.server-clock.{id(server)}"
    if events is not None:
        events.register("after-call.dynamodb", server.after_call, unique_id=hook)
    try:
        yield
    finally:
        if events is not None:
            events.unregister("after-call.dynamodb", unique_id=hook)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops a move as Ctrl-C does (a KeyboardInterrupt in the main
    thread; Python sets signal handlers there only: elsewhere, as it was)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_ignored() -> Iterator[None]:
    """Ctrl-C and SIGTERM ignored for the few writes that leave an interrupted
    move in a clean state (a second Ctrl-C would stop them half way)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@cache
def trailing_horizon_seconds() -> int:
    """How far back a stream function may still write: the longest
    ``MaximumRecordAgeInSeconds`` of the template's DynamoDB event sources
    (older records are never processed), and five minutes for the handlers'
    clocks (an event's time is its change's, taken just before the write)."""
    resources = template()["Resources"]
    ages = [
        int(event["Properties"].get("MaximumRecordAgeInSeconds", 86_400))
        for resource in resources.values()
        if resource["Type"] == "AWS::Serverless::Function"
        for event in resource.get("Properties", {}).get("Events", {}).values()
        if event["Type"] == "DynamoDB"
    ]
    return max(ages) + 300


@dataclass
class Found:
    """What a walk learnt from the partitions it visited."""

    webhooks: set[str] = field(default_factory=set)
    days: set[str] = field(default_factory=set)
    tickets: set[str] = field(default_factory=set)
    counts: Counter[TicketStatus] = field(default_factory=Counter)
    visited: set[str] = field(default_factory=set)
    # Partitions of a carried kind the old table had nothing in (when a sync read them).
    empty: set[str] = field(default_factory=set)
    read: int = 0
    written: int = 0
    deleted: int = 0

    def merge(self, other: Found) -> None:
        self.webhooks |= other.webhooks
        self.days |= other.days
        self.tickets |= other.tickets
        self.counts.update(other.counts)
        self.visited |= other.visited
        self.empty |= other.empty
        self.read += other.read
        self.written += other.written
        self.deleted += other.deleted

    def note(self, kind: str, item: dict[str, Any]) -> None:
        """The names ``item`` (of a partition of ``kind``) gives: a webhook, a day, a ticket."""
        sk = str(item["sk"]["S"])
        if kind == WEBHOOKS and sk.startswith(keys.WEBHOOK_SK_PREFIX):
            webhook_id = sk.removeprefix(keys.WEBHOOK_SK_PREFIX)
            if keys.is_valid_webhook_id(webhook_id):
                self.webhooks.add(webhook_id)
        elif kind == DAYS and keys.is_day(sk):
            self.days.add(sk)
        elif kind == DAY:
            ticket_id = item.get("ticket_id", {}).get("S", "")
            if keys.is_valid_ticket_id(ticket_id):
                self.tickets.add(ticket_id)

    def count(self, tenant_id: str, item: dict[str, Any]) -> None:
        """A ticket summary, counted as the aggregator counts it."""
        status = summary_status(tenant_id, item)
        if status is not None:
            self.counts[status] += 1


def summary_status(tenant_id: str, item: dict[str, Any]) -> TicketStatus | None:
    """The status a ticket summary counts under, as the aggregator counts it (its own
    tenant's status only); ``None`` for any other item."""
    if item["sk"]["S"] != keys.SUMMARY_SK:
        return None
    value = item.get("tenant_status", {}).get("S", "")
    if not value.startswith(keys.tenant_prefix(tenant_id)):
        return None
    try:
        return keys.status_from_tenant_status(value)
    except ValueError:
        return None


@dataclass
class Outcome:
    """What a run of the mover did (the record is the command's output)."""

    record: TenantConfig
    copied: int = 0
    synced: int = 0
    sync_deleted: int = 0
    # Ticket partitions the sync read again.
    sync_tickets: int = 0
    # Audit events the sync read by key (None: it read the trail since the horizon instead).
    sync_events: int | None = None
    # Marks the catch-up synced and took back before the switch, and in how many rounds.
    caught_up: int = 0
    catch_up_rounds: int = 0
    trailing: int = 0
    # Deliveries in flight in the old cell's queue, sent again from the new one (ops.cell_move).
    handed_over: int = 0
    erased: int = 0
    strays: int = 0
    # Seconds from this run's SWITCHING write to its ERASING write (None: not both in this run).
    pause_seconds: float | None = None
    copy_seconds: float | None = None
    verified: str = ""


@dataclass
class Mover:
    """Moves one tenant at a time (see the module's docstring).

    ``deploy`` makes (or finds) a tenant's dedicated table and answers its
    name; ``checkpoint`` is called with each step's name as it is reached (the
    tests stop a move there); ``local``: the tables are the local stack's
    (``make dev``), so a table left behind is not AWS's to delete by hand."""

    store: RecordStore
    deploy: Callable[[str], str] | None = None
    local: bool = False
    rate: float = DEFAULT_RATE
    workers: int = DEFAULT_WORKERS
    drain_seconds: float = DEFAULT_DRAIN_SECONDS
    switch_wait: float = SWITCH_WAIT_SECONDS
    # Marks left for the switch's sync below which the catch-up stops (0: until a round finds none).
    catch_up_enough: int = CATCH_UP_ENOUGH
    stream: TextIO | None = None
    checkpoint: Callable[[str], None] = field(default=lambda step: None)
    # The local clock that measures how long since a DynamoDB response told the server's time (ServerClock).
    monotonic: Callable[[], float] = time.monotonic
    # Set for the duration of a run.
    _record: TenantConfig | None = field(default=None, init=False, repr=False)
    _beat: float = field(default=0.0, init=False, repr=False)
    _next_slot: float = field(default=0.0, init=False, repr=False)
    _last_write: float = field(default=0.0, init=False, repr=False)
    _stopped: bool = field(default=False, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _progress: Progress | None = field(default=None, init=False, repr=False)
    # What this run's copy wrote (invalid when the run did not copy: a resumed SWITCHING reads the new table).
    _copied: _Copied = field(default_factory=lambda: _Copied(valid=False, counted=False), init=False, repr=False)
    # Partitions of a carried kind this run's sync found empty in the old table: its erase skips them.
    _announced: bool = field(default=False, init=False, repr=False)
    _empty_in_old: set[str] = field(default_factory=set, init=False, repr=False)

    # ------------------------------------------------------------ the command
    def move(self, tenant_id: str, to: str) -> Outcome:
        """Move (or go on moving, or roll back) ``tenant_id``'s data to ``to``,
        on DynamoDB's clock (:class:`ServerClock`, from every response of the
        store's client). Interrupted (Ctrl-C, SIGTERM): :class:`MoveInterrupted`,
        once the record is left as :meth:`_interrupted` says."""
        server = ServerClock(self.monotonic, self.store.clock)
        with self._on_server_time(server):
            self._record = None
            with _sigterm_interrupts():
                try:
                    return self._move(tenant_id, to)
                except KeyboardInterrupt:
                    raise self._interrupted(tenant_id, to) from None

    @contextmanager
    def _on_server_time(self, server: ServerClock) -> Iterator[None]:
        """The run's record store on ``server``'s time, learnt from its client's responses."""
        operator = self.store
        with observed(operator.client, server):
            self.store = OnServerTime(operator, server)
            try:
                yield
            finally:
                self.store = operator

    def _move(self, tenant_id: str, to: str) -> Outcome:
        keys.validate_tenant_id(tenant_id)
        try:
            target = Placement(to)
        except ValueError:
            raise MoveError(f"unknown placement {to!r} (pool or dedicated)") from None
        record = self.store.record(tenant_id)
        if not record.version:
            raise MoveError(f"no tenant {tenant_id!r}: it has no tenant record (make onboard creates tenants)")
        if record.offboarding_since is not None:
            raise MoveError(f"tenant {tenant_id} is being offboarded: it can't move")
        if record.resharding:
            raise MoveError(f"tenant {tenant_id} is being resharded: finish it first (make tenant TENANT={tenant_id})")
        self._begin_run()
        self._note(f"{tenant_id}: placement {record.placement}" + (f" ({record.table})" if record.table else ""))
        if record.moving:
            if record.move_to != target and record.move_phase not in ROLLBACK_PHASES:
                raise MoveError(
                    f"the move of {tenant_id} to {record.move_to} is past its switch ({record.move_phase}): "
                    f"finish it (PLACEMENT={record.move_to}), then move back (PLACEMENT={target})"
                )
            record = self._take_over(record)
            if record.move_to != target:
                return self._roll_back(record)
        elif record.placement == target:
            self._note(f"{tenant_id} is already in the {target} placement: nothing to move")
            return Outcome(record)
        else:
            record = self._announce(record, target)
        return self._continue(record)

    def _begin_run(self) -> None:
        """Nothing of a previous run's: what this run copies, syncs and announces is its own."""
        self._stopped = False
        self._copied = _Copied(valid=False, counted=False)
        self._empty_in_old = set()
        self._announced = False

    def _continue(self, record: TenantConfig) -> Outcome:
        outcome = Outcome(record)
        pause_began: float | None = None
        if record.move_phase == MovePhase.COPYING:
            record = self._copy(record, outcome)
            self.checkpoint("copied")
            self._before_catch_up(record)
            self._catch_up(record, outcome)
            self.checkpoint("caught up")
            record = self._write({"move_phase": MovePhase.SWITCHING})
            pause_began = self.store.clock()
            self._note(f"SWITCHING: {record.tenant_id}'s writes answer 503 TENANT_MOVING")
            self.checkpoint("switching")
        if record.move_phase == MovePhase.SWITCHING:
            # No wait for the functions to see the pause: a write made under COPYING is fenced by the
            # record (support_tickets.data.table), so none lands in the old table from here on.
            switching_at = self.store.clock()
            placed_at = self._sync(record, outcome, switching_at)
            self.checkpoint("synced")
            record = self._flip(record, placed_at)
            self.checkpoint("flipped")
        if record.move_phase == MovePhase.FLIPPED:
            self._wait_until(
                max(self.store.clock() + self.switch_wait, float(record.placed_at)),
                "for every function to read the new table before writes open",
            )
            if self._before_writes_open(record, outcome):
                # Its writes are the tenant's (after placed_at, every function reading the new table):
                # the stream functions get the same wait to act on them before any new write of the tenant.
                self._wait_until(self.store.clock() + self.switch_wait, "for the stream functions to see them")
            record = self._write({"move_phase": MovePhase.ERASING})
            if pause_began is not None:
                outcome.pause_seconds = self.store.clock() - pause_began
            self._note(f"ERASING: {record.tenant_id}'s writes go to {self._table_name(record)}")
            self.checkpoint("erasing")
        if record.move_phase == MovePhase.ERASING:
            record = self._finish(record, outcome)
        outcome.record = record
        if outcome.pause_seconds is not None:
            self._note(f"write pause: {outcome.pause_seconds:.1f} s (SWITCHING to ERASING)")
        return outcome

    # ------------------------------------------------------------ the record
    def _announce(self, record: TenantConfig, target: Placement) -> TenantConfig:
        move_table: str | None = None
        if target == Placement.DEDICATED:
            if self.deploy is None:
                raise MoveError("no way to make the tenant's dedicated table here")
            move_table = self.deploy(record.tenant_id)
            self._note(f"{record.tenant_id}'s table: {move_table}")
        now = math.ceil(self.store.clock())
        self._record = record
        self._announced = True
        announced = self._write(
            {
                "move_to": target,
                "move_table": move_table,
                "move_phase": MovePhase.COPYING,
                "move_started_at": now,
            }
        )
        self._note(f"COPYING: {record.tenant_id} moves to {self._destination(announced)}")
        self.checkpoint("announced")
        return announced

    def _interrupted(self, tenant_id: str, to: str) -> MoveInterrupted:
        """The record of an interrupted run left where the next run can go on at
        once: its lease released (``changed_at`` 0: the next run takes over without
        waiting :data:`STALE_SECONDS`), and a switch not yet flipped put back in
        ``COPYING`` (conditional on the record's version, as every write of it),
        so that the tenant's writes go to the old table again within a second (the
        move's marks still name what they change: writers mark in ``COPYING`` as
        in ``SWITCHING``; the next run copies again and reads them). Past the flip
        the data is the new table's: ``FLIPPED`` refuses writes until the next
        run. What it left, and the command to run, in one line."""
        self._stopped = True
        command = self._command(tenant_id, to)
        with signals_ignored():
            if self._record is None:
                return MoveInterrupted(f"interrupted before it wrote anything: {tenant_id} is as it was; {command}")
            record = self._record
            try:
                with self._lock:
                    if record.moving:
                        changes: dict[str, Any] = {"changed_at": 0}
                        if record.move_phase == MovePhase.SWITCHING:
                            changes["move_phase"] = MovePhase.COPYING
                        record = self._record = self.store.write(record, changes)
            except Exception as exc:  # the record changed meanwhile, or DynamoDB refused: say what it is now
                current = self.store.record(tenant_id)
                return MoveInterrupted(
                    f"interrupted; its record could not be released ({exc}): {tenant_id} is "
                    + (f"moving to {current.move_to} ({current.move_phase})" if current.moving else current.placement)
                    + f"; unless another mover runs, {command} in {STALE_SECONDS:.0f} s"
                )
        return MoveInterrupted(self._left_in(record, to, command))

    def _command(self, tenant_id: str, to: str) -> str:
        """The command that goes on with (or rolls back) this move."""
        return f"make tenant TENANT={tenant_id} PLACEMENT={to}"

    def _left_in(self, record: TenantConfig, to: str, command: str) -> str:
        tenant, phase = record.tenant_id, record.move_phase
        if not record.moving:
            return f"interrupted after the move ended: {tenant} is in the {record.placement} placement"
        if record.move_to != to:
            return (
                f"interrupted while rolling back the move of {tenant} to {record.move_to} (COPYING): its writes go to "
                f"{self._table_name(record)}; {command} finishes the rollback"
            )
        if phase == MovePhase.COPYING:
            back = f"PLACEMENT={record.placement}"
            return (
                f"interrupted: the move of {tenant} to {record.move_to} is in COPYING, its reads and writes go to "
                f"{self._table_name(record)}; {command} finishes it ({back} rolls it back)"
            )
        if phase == MovePhase.FLIPPED:
            return (
                f"interrupted: the move of {tenant} to {record.move_to} is FLIPPED, its reads go to "
                f"{self._table_name(record)}, its writes answer 503 TENANT_MOVING until {command} goes on: run it now"
            )
        return (
            f"interrupted: the move of {tenant} to {record.move_to} is ERASING, its reads and writes go to "
            f"{self._table_name(record)}; {command} erases it from {record.previous_table or self._pool} and finishes"
        )

    def _take_over(self, record: TenantConfig) -> TenantConfig:
        """Continue a move whose mover stopped (at once when it released the
        record: ``changed_at`` 0); refuse while one runs. A switch the stopped
        mover did not flip goes back to ``COPYING`` (writes open again) and is
        done again after this run's own copy (see :meth:`_copy`)."""
        self._refuse_if_running(record, str(record.move_to), str(record.move_phase))
        self._record = record
        taken = self._write({"move_phase": MovePhase.COPYING} if record.move_phase == MovePhase.SWITCHING else {})
        self._note(f"continuing the move of {record.tenant_id} to {record.move_to} at {record.move_phase}")
        if record.move_phase == MovePhase.SWITCHING:
            self._note(f"COPYING: {record.tenant_id}'s writes go to {self._table_name(taken)} again until the switch")
        return taken

    def _refuse_if_running(self, record: TenantConfig, to: str, phase: str) -> None:
        """One line, unless the mover that wrote ``record`` last has been silent for :data:`STALE_SECONDS`."""
        silent = self.store.clock() - record.changed_at
        if silent < STALE_SECONDS:
            raise MoveError(
                f"a move of {record.tenant_id} to {to} is running ({phase}; its mover wrote "
                f"the record {max(silent, 0):.0f} s ago): wait for it, or if it was stopped, run this again in "
                f"{math.ceil(STALE_SECONDS - silent)} s"
            )

    def _write(self, changes: dict[str, Any]) -> TenantConfig:
        """The record with ``changes`` (and this mover's heartbeat), only if nobody wrote it meanwhile."""
        assert self._record is not None
        now = self.store.clock()
        self._record = self.store.write(self._record, {**changes, "changed_at": math.ceil(now)})
        self._beat = now
        return self._record

    def heartbeat(self) -> None:
        """Rewrite the record if it is time: proves this mover still owns the move."""
        if self._stopped:
            raise MoverStopped("another part of this move failed")
        with self._lock:
            if self.store.clock() - self._beat >= HEARTBEAT_SECONDS:
                try:
                    self._write({})
                except Exception:
                    self._stopped = True
                    raise

    def _wait_until(self, deadline: float, why: str) -> None:
        remaining = deadline - self.store.clock()
        if remaining > 0 and why:
            self._note(f"waiting {remaining:.1f} s {why}")
        while (remaining := deadline - self.store.clock()) > 0:
            self.store.sleep(min(remaining, HEARTBEAT_SECONDS))
            self.heartbeat()

    # ------------------------------------------------------------ 1. COPYING
    def _copy(self, record: TenantConfig, outcome: Outcome) -> TenantConfig:
        source, dest = self._old(record), self._new(record)
        started = self.store.clock()
        if not self._announced:
            # What a stopped run left in the new table (its copy, part of its sync) goes first: then what this
            # run copies is all the new table has, and its switch reads only what was marked, as the first's would.
            self._note(f"erasing what a stopped run copied into {self._named(dest)} before copying again")
            self._erase(dest, record, copy_to=None)
        self._copied = _Copied()
        assert record.move_started_at is not None
        # Before the copy reads anything, every container writes with the record's COPYING: each write of a
        # ticket the copy may have read before it is marked, and the sync reads only those again.
        self._wait_until(record.move_started_at + self.store.phase_seconds, "for every function to see the move")
        self._progress = Progress(f"copy {record.tenant_id} to {self._named(dest)}, items", self.stream)
        found = self._walk(
            [source],
            lambda partition, since: self._copy_partition(source, dest, partition),
            shard_counts=record.read_shards,
        )
        outcome.copied = found.written
        outcome.copy_seconds = self.store.clock() - started
        self._progress.done(f"({found.written / max(outcome.copy_seconds, 1e-9):.0f} items/s) ")
        assert self._record is not None
        return self._record

    def _copy_partition(self, source: TenantTable, dest: TenantTable, partition: Partition) -> Found:
        kind, pk = partition
        found = Found()
        writes = self._writes(dest, found)
        for page in source.query_pages(_partition_query(source, pk)):
            for item in _carried_items(kind, page):
                found.read += 1
                found.note(kind, item)
                for copy, copied_kind in ((item, kind), (_history_twin(source.tenant_id, kind, item), HISTORY)):
                    if copy is not None:
                        writes.put(copy)
                        self._copied.add(copied_kind, copy, source.tenant_id)
        writes.flush()
        return found

    # ------------------------------------------------------------ 2. SWITCHING
    def _sync(self, record: TenantConfig, outcome: Outcome, switching_at: float) -> int:
        """The new table made equal to the old (the tenant's copied kinds), the
        counts recounted there; ``placed_at`` after its last write."""
        source, dest = self._old(record), self._new(record)
        assert record.move_started_at is not None
        since = record.move_started_at - trailing_horizon_seconds()
        self._last_write = 0.0
        self._progress = Progress(f"sync {record.tenant_id} into {self._named(dest)}, items read", self.stream)

        def before_tickets() -> None:
            self._wait_until(switching_at + self.switch_wait + GSI_PROPAGATION_SECONDS, "for GSI1 to have every write")

        def sync(partition: Partition, start: str) -> Found:
            return self._sync_partition(source, dest, partition, start)

        # What this run's copy wrote stands for the new table, and of its tickets and audit events only
        # those marked since changed. Else (a resumed switch) every ticket is read again, found in GSI1 of
        # both tables, and the trail since the horizon.
        marked = self._marked(source) if self._copied.counted else None
        tables = [source] if self._copied.valid else [source, dest]
        found = self._walk(
            tables,
            sync,
            shard_counts=record.read_shards,
            since=since,
            before_tickets=None if marked is not None else before_tickets,
            tickets=marked.tickets if marked is not None else None,
            days=marked is None,
        )
        if marked is not None:
            found.merge(self._sync_events(source, dest, marked.events))
        if self._copied.valid:  # what the copy wrote and the old table no longer names (a deleted webhook...)
            found.merge(self._visit_all(self._copied.partitions(exclude=found.visited, tickets=marked is None), sync))
        # Nothing writes a carried kind into the old table any more: what was empty stays empty.
        self._empty_in_old = found.empty
        counts = found.counts if marked is None else self._copied.counts_after(found)
        self._recount(dest, counts)
        self._synced_outside(record)
        self._progress.done()
        outcome.synced, outcome.sync_deleted = found.written, found.deleted
        outcome.sync_tickets = sum(_kind_of(source.tenant_id, pk) == TICKET for pk in found.visited)
        outcome.sync_events = len(marked.events) if marked is not None else None
        self._note(
            f"synced: {found.written} items copied again, {found.deleted} deleted; counts "
            + ", ".join(f"{status}={counts[status]}" for status in TicketStatus)
        )
        last_write = self._last_write or self.store.clock()
        return math.ceil(last_write) + 1

    def _marked(self, source: TenantTable) -> _Marks:
        """The tickets and audit events written since the copy began (their writers
        marked them), and each mark's ``written`` token (which write made it)."""
        marked = _Marks()
        for pk in keys.move_mark_partitions(source.tenant_id):
            for item in partition_items(source, pk):
                name = str(item["sk"]["S"])
                if keys.is_valid_ticket_id(name):
                    marked.tickets.add(name)
                elif keys.is_audit_sk(name):
                    marked.events.add(name)
                else:
                    continue
                marked.written[(pk, name)] = item.get(MARK_WRITTEN, {}).get("S")
        return marked

    # ------------------------------------------------------------ 1b. catching up, writes still open
    def _catch_up(self, record: TenantConfig, outcome: Outcome) -> None:
        """While the tenant still writes (``COPYING``), make the new table catch
        up with what it changed during the copy, so that the switch's sync (the
        write pause) copies only what was written since: each round reads the
        marks, syncs the marked tickets' partitions and events and every
        partition no write marks (webhooks, deliveries, parking, idempotency
        records, the day index) as the switch would (and remembers them as
        copied: the switch still reads those partitions, and writes what
        differs from this round's read), then takes back each mark whose
        ``written`` token is still the one it read. A write made since the round
        read its partition wrote a new token with its mark (in its transaction,
        or again after it: ``TenantTable``), so its mark stays for the switch.
        Rounds until at most :attr:`catch_up_enough` marks are left, or
        :data:`CATCH_UP_ROUNDS`. Only after this run's own copy (a resumed run
        reads everything at its switch)."""
        if not self._copied.counted:
            return
        source, dest = self._old(record), self._new(record)
        for _ in range(CATCH_UP_ROUNDS):
            marked = self._marked(source)
            if len(marked.written) <= self.catch_up_enough:
                return
            self._progress = Progress(f"catch up {record.tenant_id} in {self._named(dest)}, items", self.stream)

            def sync(partition: Partition, start: str) -> Found:
                return self._sync_partition(source, dest, partition, start, remember=True)

            # What writers don't mark (webhooks, their deliveries and parking, idempotency records, the day
            # index) is synced too, as the switch would: the switch then writes only what changed since.
            self._walk([source], sync, shard_counts=record.read_shards, tickets=marked.tickets, days=False)
            self._sync_events(source, dest, marked.events, remember=True)
            self.checkpoint("catching up")
            taken_back = self._unmark(source, marked)
            self._progress.done()
            outcome.caught_up += taken_back
            outcome.catch_up_rounds += 1
            self._note(f"caught up: {len(marked.written)} marks synced, {taken_back} taken back")

    def _unmark(self, source: TenantTable, marked: _Marks) -> int:
        """Each mark deleted if its ``written`` token is still the one read (a
        mark without one is left to the switch); how many were."""
        marks = [(pk, sk, token) for (pk, sk), token in sorted(marked.written.items()) if token is not None]

        def unmark(mark: tuple[str, str, str]) -> bool:
            pk, sk, token = mark
            return source.call_if(
                "delete_item",
                TableName=source.table_name,
                Key={"pk": {"S": pk}, "sk": {"S": sk}},
                ConditionExpression="#written = :token",
                ExpressionAttributeNames={"#written": MARK_WRITTEN},
                ExpressionAttributeValues={":token": {"S": token}},
            )

        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            return sum(pool.map(unmark, marks))

    def _sync_events(
        self, source: TenantTable, dest: TenantTable, events: set[str], *, remember: bool = False
    ) -> Found:
        """The marked audit events, read by key (a day's trail is not read), each
        with its history twin in the new table unless the copy wrote it as it is.
        A mark names a sort key; the day and shard of the event are the key's, so
        a mark can only ever name an event of the tenant's own trail, and one that
        names none reads nothing."""
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for sk in sorted(events):
            key = keys.audit_event_key(source.tenant_id, sk)
            by_partition.setdefault(key["pk"]["S"], []).append(key)

        def sync(partition: Partition, start: str) -> Found:
            kind, pk = partition
            found = Found()
            writes = self._writes(dest, found)
            for item in self._items_by_key(source, by_partition[pk]):
                copied = self._copied.digest(pk, item["sk"]["S"]) if self._copied.valid else None
                self._synced_item(found, source.tenant_id, kind, item, writes, differs=copied != _digest(item))
                if remember:
                    self._copied.add(kind, item, source.tenant_id)
            writes.flush()
            return found

        return self._visit_all([(DAY, pk) for pk in sorted(by_partition)], sync)

    def _items_by_key(self, table: TenantTable, item_keys: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The items of these keys that exist, read consistently, 100 a BatchGetItem,
        what DynamoDB leaves unprocessed asked again with exponential backoff."""
        for start in range(0, len(item_keys), BATCH_GET_SIZE):
            request: dict[str, Any] = {
                table.table_name: {"Keys": list(item_keys[start : start + BATCH_GET_SIZE]), "ConsistentRead": True}
            }
            for round_number in range(MAX_WRITE_ROUNDS):
                response = table.call("batch_get_item", RequestItems=request)
                yield from response.get("Responses", {}).get(table.table_name, [])
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                self.store.sleep(min(0.05 * 2**round_number, 2.0))
            else:
                raise Throttled()

    def _sync_partition(
        self, source: TenantTable, dest: TenantTable, partition: Partition, since: str = "", *, remember: bool = False
    ) -> Found:
        """One partition of the new table made equal to the old's (sort keys from
        ``since``): the new table's side from what this run's copy wrote into
        it when it did, else read. ``remember``: what it then holds stands for
        the copy's (a catch-up's: the switch compares with it)."""
        kind, pk = partition
        found = Found()
        found.visited.add(pk)
        writes = self._writes(dest, found)
        read = found.read
        seen: list[dict[str, Any]] = []
        carried = _carried_items(kind, partition_items(source, pk, since))
        old = _remembering(carried, seen) if remember else carried
        new = self._copied.entries(pk, since) if self._copied.valid else _read_entries(dest, pk, since)
        here, there = next(old, None), next(new, None)
        while here is not None or there is not None:
            if there is None or (here is not None and here["sk"]["S"] < there.sk):
                assert here is not None
                self._synced_item(found, source.tenant_id, kind, here, writes, differs=True)
                here = next(old, None)
            elif here is None or there.sk < here["sk"]["S"]:
                there.note(found, kind)
                writes.delete({"pk": {"S": pk}, "sk": {"S": there.sk}})
                there = next(new, None)
            else:
                there.note(found, kind)
                self._synced_item(found, source.tenant_id, kind, here, writes, differs=_digest(here) != there.digest)
                here, there = next(old, None), next(new, None)
        if kind in CARRIED and found.read == read:
            found.empty.add(pk)
        writes.flush()
        if remember:
            self._copied.replace(kind, pk, seen, source.tenant_id)
        return found

    def _synced_item(
        self, found: Found, tenant_id: str, kind: str, item: dict[str, Any], writes: _Writes, *, differs: bool
    ) -> None:
        found.read += 1
        found.note(kind, item)
        if kind == TICKET:
            found.count(tenant_id, item)
        if differs:
            writes.put(item)
            twin = _history_twin(tenant_id, kind, item)
            if twin is not None:
                writes.put(twin)

    def _recount(self, dest: TenantTable, counts: Counter[TicketStatus]) -> None:
        """The new table's count items: one ``<STATUS>`` item each, nothing else."""
        found = Found()
        writes = self._writes(dest, found)
        wanted = {keys.aggregate_sk(status) for status in TicketStatus}
        for page in dest.query_pages(_partition_query(dest, keys.aggregate_pk(dest.tenant_id))):
            for item in page:
                if item["sk"]["S"] not in wanted:
                    writes.delete(item)
        writes.flush()
        for status in TicketStatus:
            count = {
                "pk": {"S": keys.aggregate_pk(dest.tenant_id)},
                "sk": {"S": keys.aggregate_sk(status)},
                "count": {"N": str(counts[status])},
                "rev": {"N": "1"},
            }
            writes.put(count)
        writes.flush()

    # ------------------------------------------------------------ 3. FLIPPED
    def _flip(self, record: TenantConfig, placed_at: int) -> TenantConfig:
        target = Placement(str(record.move_to))
        flipped = self._write(
            {
                "placement": target,
                "table": record.move_table,
                "placed_at": placed_at,
                "previous_table": record.table,
                "previous_placed_at": record.placed_at,
                "move_phase": MovePhase.FLIPPED,
            }
        )
        self._note(f"FLIPPED: reads go to {self._table_name(flipped)} (placed at {placed_at})")
        return flipped

    # ------------------------------------------------------------ 4. ERASING
    def _finish(self, record: TenantConfig, outcome: Outcome) -> TenantConfig:
        old, new = self._old(record), self._new(record)
        outcome.trailing = self._drain(old, new, record.placed_at)
        self.checkpoint("drained")
        outcome.erased, outcome.strays, outcome.verified = self._erase(old, record, copy_to=new)
        self.checkpoint("erased")
        self._erased(record, outcome)
        done = self._write(self._move_cleared())
        self._note(
            f"{record.tenant_id} moved to {self._table_name(done)}: {outcome.trailing} trailing items copied, "
            f"{outcome.erased} erased from {self._named(old)}; verified: {outcome.verified}"
        )
        self._left_behind(old)
        return done

    def _drain(self, old: TenantTable, new: TenantTable, placed_at: int) -> int:
        """Trailing copies, until one copies nothing after the drain."""
        since = placed_at - trailing_horizon_seconds()
        every = max(min(TRAILING_PASS_SECONDS, self.drain_seconds / TRAILING_PASSES_PER_DRAIN), 0.5)
        self._note(
            f"trailing copy: every {every:g} s until a pass finds nothing, "
            f"{self.drain_seconds:g} s after the switch at the earliest"
        )
        total, drained_at = 0, placed_at + self.drain_seconds
        while True:
            copied = self._trailing_copy(old, new, since, placed_at) + self._trailing_outside()
            total += copied
            now = self.store.clock()
            if copied == 0 and now >= drained_at:
                return total
            # After a pass that copied nothing, the next one is the last if it comes at the drain's end.
            self._wait_until(now + (every if copied else min(every, drained_at - now)), "")

    def _trailing_copy(self, old: TenantTable, new: TenantTable, since: int, placed_at: int) -> int:
        """One pass: what the old table has of the append-only kinds and the new lacks."""
        tenant = old.tenant_id
        partitions: list[tuple[Partition, str]] = [((DAYS, keys.audit_days_pk(tenant)), "")]
        day = since - since % 86_400
        while day <= placed_at:
            date = iso_time(day)[:10]
            partitions += [((DAY, pk), iso_time(since)) for pk in keys.audit_day_partitions(tenant, date)]
            day += 86_400
        webhooks = Found()
        for page in old.query_pages(_partition_query(old, keys.webhooks_pk(tenant))):
            for item in page:
                webhooks.note(WEBHOOKS, item)
        first = keys.DELIVERY_SK_PREFIX + f"{max(since, 0) * 1000:013d}"
        partitions += [((DELIVERIES, keys.webhook_deliveries_pk(tenant, hook)), first) for hook in webhooks.webhooks]
        copied = 0
        for (kind, pk), start in partitions:
            present = {item["sk"]["S"] for item in partition_items(new, pk, start, projection="pk, sk")}
            for item in partition_items(old, pk, start):
                if item["sk"]["S"] in present:
                    continue
                copied += self._put(new, item, conditional=True)
                twin = _history_twin(tenant, kind, item)
                if twin is not None:
                    copied += self._put(new, twin, conditional=True)
        if copied:
            self._note(f"trailing copy: {copied} items a stream function wrote into {self._named(old)} late")
        return copied

    def _erase(self, table: TenantTable, record: TenantConfig, *, copy_to: TenantTable | None) -> tuple[int, int, str]:
        """Everything of the tenant in ``table`` deleted (in the pool, its record
        and usage ledger kept), then checked with a keys-only Scan (see
        :meth:`_verify`; ``copy_to`` is the table the tenant's data now lives in)."""
        self._progress = Progress(f"erase {table.tenant_id} from {self._named(table)}, items", self.stream)
        skipped = self._empty_in_old if copy_to is not None else set()
        found = self._walk(
            [table],
            lambda partition, since: self._erase_partition(table, partition, copy_to),
            shard_counts=record.read_shards,
            erase=True,
            skip=skipped,
        )
        self._progress.done()
        kept = self._kept_partitions(table)
        late_until = record.placed_at + trailing_horizon_seconds() if copy_to is not None else None
        strays, left = self._verify(table, kept, copy_to, late_until)
        prefix = keys.tenant_prefix(table.tenant_id)
        but = " but its record and usage ledger" if kept else ""
        verified = f"a Scan of {table.table_name} found nothing under {prefix}{but}"
        if strays:
            verified += f" (after erasing {strays} item(s) the walk had not found)"
        if left:
            verified += (
                f"; LEFT THERE: {left} ticket, webhook or idempotency item(s) the walk could not find (a ticket "
                f"under a GSI1 key its record's shard counts do not name?): a keys-only Scan for {prefix} finds them"
            )
        return found.deleted, strays, verified

    def _erase_partition(self, table: TenantTable, partition: Partition, copy_to: TenantTable | None = None) -> Found:
        """A partition's items deleted; a ticket summary marked ``erasing`` first,
        as ``make offboard`` marks it: the stream functions' filters drop the
        records of both writes, so the erase leaves no aggregator journal behind
        (a record that is not the tenant's change is journaled, uncounted).
        With ``copy_to`` (the old table after a switch), an append-only item the
        new table lacks is copied there first, as the trailing copy does: a
        stream function that lags behind may have written it after the trailing
        copy's last pass, and only what was read is deleted."""
        kind, pk = partition
        found = Found()
        writes = self._writes(table, found)
        late = copy_to is not None and kind in APPEND_ONLY
        present = (
            {item["sk"]["S"] for item in partition_items(copy_to, pk, projection="pk, sk")}
            if late and copy_to
            else set()
        )
        projection = None if late else "pk, sk, ticket_id" if kind == DAY else "pk, sk"
        for page in table.query_pages(_partition_query(table, pk, projection)):
            for item in page:
                found.note(kind, item)
                if late and copy_to is not None and item["sk"]["S"] not in present:
                    self._copy_late(copy_to, kind, item)
                if kind == TICKET and item["sk"]["S"] == keys.SUMMARY_SK:
                    self._mark_erasing(table, item)
                writes.delete(item)
                twin = _history_twin(table.tenant_id, kind, item)
                if twin is not None:
                    writes.delete(twin)
        writes.flush()
        return found

    def _mark_erasing(self, table: TenantTable, key: dict[str, Any]) -> None:
        self.heartbeat()
        self.pace(1)
        mark_erasing(table, key)

    def _copy_late(self, table: TenantTable, kind: str, item: dict[str, Any]) -> int:
        """An append-only item (and a day item's history twin) put into ``table`` if absent."""
        copied = self._put(table, item, conditional=True)
        twin = _history_twin(table.tenant_id, kind, item)
        return copied + (self._put(table, twin, conditional=True) if twin is not None else 0)

    def _verify(
        self, table: TenantTable, keep: set[str], copy_to: TenantTable | None, late_until: float | None = None
    ) -> tuple[int, int]:
        """Scan for anything left under the tenant's prefix (but ``keep``'s
        partitions), erase it, and scan again until nothing is found; how many
        items it erased, and how many it left.

        What the walk did not find was not copied either. With ``copy_to`` (the
        old table after a switch): an item of an append-only kind (an audit
        event, the day index, a delivery record: a late write, a deleted
        webhook's deliveries) is first copied there if absent, as the trailing
        copy does; an item of a ticket, a webhook or an idempotency record is
        left where it is and reported (copied now, after the switch, its stream
        record would count, audit and announce a change nobody made). Without
        (a rolled back copy), everything goes.

        A round that finds append-only items only is a stream function that
        lags behind still writing into the old table: the check goes on past
        :data:`MAX_VERIFY_ROUNDS` (each further round waits twice as long, a
        minute at most) until a Scan finds nothing, while such a function may
        still write (``late_until``: the event sources' oldest record still
        processed, :func:`trailing_horizon_seconds`), so that one run finishes
        and the trail misses nothing; anything else appearing stops the move
        after :data:`MAX_VERIFY_ROUNDS`."""
        tenant = table.tenant_id
        strays = 0
        left: set[tuple[str, str]] = set()
        rounds = 0
        while True:
            found = [
                item
                for item in keys_under_prefix(table)
                if item["pk"]["S"] not in keep and (item["pk"]["S"], item["sk"]["S"]) not in left
            ]
            if not found:
                return strays, len(left)
            self._note(f"the check found {len(found)} item(s) the walk did not")
            doomed: list[dict[str, Any]] = []
            late = copy_to is not None
            for key in found:
                kind = _kind_of(tenant, key["pk"]["S"])
                late = late and kind in APPEND_ONLY
                if copy_to is not None and kind in CARRIED:
                    left.add((key["pk"]["S"], key["sk"]["S"]))
                    continue
                if copy_to is not None and kind in APPEND_ONLY:
                    item = table.call("get_item", TableName=table.table_name, Key=key, ConsistentRead=True).get("Item")
                    if item is not None:
                        self._put(copy_to, item, conditional=True)
                doomed.append(key)
            strays += table.batch_delete(doomed)
            rounds += 1
            if rounds >= MAX_VERIFY_ROUNDS and not (late and late_until and self.store.clock() < late_until):
                raise MoveError(
                    f"items kept appearing under the tenant's prefix in {table.table_name}: run the command again"
                )
            self.store.sleep(min(VERIFY_SETTLE_SECONDS * 2 ** max(rounds - MAX_VERIFY_ROUNDS, 0), 60.0))

    # ------------------------------------------------------------ rolling back
    def _roll_back(self, record: TenantConfig) -> Outcome:
        """Before the switch the old table is still the tenant's: writes open
        there again (back to ``COPYING``), the copy is erased and checked, and
        only then are the move fields cleared (killed meanwhile, the move is
        still there to roll back, or to finish, when run again)."""
        copy = self._new(record)
        if record.move_phase == MovePhase.SWITCHING:
            record = self._write({"move_phase": MovePhase.COPYING})
        self._note(f"rolling back: {record.tenant_id}'s writes go to {self._table_name(record)}; erasing the copy")
        self.checkpoint("rolling back")
        outcome = Outcome(record)
        outcome.erased, outcome.strays, outcome.verified = self._erase(copy, record, copy_to=None)
        self._rolled_back_copy(record)
        rolled = self._write(self._move_cleared())
        outcome.record = rolled
        self._note(
            f"rolled back: erased {outcome.erased} copied items from {self._named(copy)}; verified: {outcome.verified}"
        )
        self._left_behind(copy)
        return outcome

    # ------------------------------------------------------------ walking a tenant's partitions
    def _walk(
        self,
        tables: Sequence[TenantTable],
        visit: Callable[[Partition, str], Found],
        *,
        shard_counts: Sequence[int],
        since: int | None = None,
        before_tickets: Callable[[], None] | None = None,
        erase: bool = False,
        skip: set[str] | None = None,
        tickets: set[str] | None = None,
        days: bool = True,
    ) -> Found:
        """Visit every partition of the tenant found in ``tables``: the fixed
        ones, then those they name (deliveries, days), then the tickets (GSI1 of
        each table under the record's shard counts, and those the trail names)
        with their histories. ``since``: the day partitions from that time only
        (``visit`` gets the sort key to start at). ``erase``: also the kinds
        that are never copied. ``skip``: partitions known to be empty.
        ``tickets``: these tickets only, instead of GSI1's and the trail's.
        ``days=False``: not the days' partitions (a switch reads the marked events)."""
        tenant = tables[0].tenant_id
        total = Found()
        first: list[Partition] = [(WEBHOOKS, keys.webhooks_pk(tenant)), (DAYS, keys.audit_days_pk(tenant))]
        first += [(IDEMPOTENCY, pk) for pk in keys.idempotency_partitions(tenant)]
        if erase:
            first += [(NOT_COPIED, pk) for pk in _not_copied_partitions(tenant, self._is_pool(tables[0]))]
        total.merge(self._visit_all([part for part in first if part[1] not in (skip or set())], visit))
        second: list[Partition] = [(DELIVERIES, keys.webhook_deliveries_pk(tenant, w)) for w in sorted(total.webhooks)]
        second += [(PARKED, keys.webhook_parked_pk(tenant, w)) for w in sorted(total.webhooks)]
        starts: dict[str, str] = {}
        for day in sorted(total.days) if days else ():
            if since is not None and day < iso_time(since)[:10]:
                continue
            for pk in keys.audit_day_partitions(tenant, day):
                second.append((DAY, pk))
                if since is not None:
                    starts[pk] = iso_time(since)
        total.merge(self._visit_all(second, visit, starts))
        if before_tickets is not None:
            before_tickets()
        # Given the tickets (a switch's marked ones), those the trail names are not read again: a change of
        # theirs since the copy began is marked.
        listed = total.tickets | self._ticket_ids(tables, shard_counts) if tickets is None else tickets
        third: list[Partition] = []
        for ticket_id in sorted(listed):
            third.append((TICKET, keys.ticket_pk(tenant, ticket_id)))
        total.merge(self._visit_all([part for part in third if part[1] not in (skip or set())], visit))
        return total

    def _ticket_ids(self, tables: Sequence[TenantTable], shard_counts: Sequence[int]) -> set[str]:
        """The tenant's tickets in GSI1 of each table, every status, every key
        of the record's shard counts (the keys every reader and writer uses; a
        reshard can't run during a move), queried on the workers."""
        tenant = tables[0].tenant_id
        own = keys.tenant_prefix(tenant)
        queries = [
            (table, partition)
            for table in tables
            for status in TicketStatus
            for partition in keys.status_partitions(tenant, status, shard_counts)
        ]

        def listed(query: tuple[TenantTable, str]) -> set[str]:
            table, partition = query
            request = {
                "TableName": table.table_name,
                "IndexName": keys.GSI1_NAME,
                "KeyConditionExpression": "tenant_status = :ts",
                "ExpressionAttributeValues": {":ts": {"S": partition}},
                "ProjectionExpression": "pk",
            }
            found: set[str] = set()
            for page in table.query_pages(request):
                for item in page:
                    ticket_id = keys.ticket_id_of_suffix(keys.own_suffix(tenant, str(item["pk"]["S"])) or "")
                    if ticket_id is not None and str(item["pk"]["S"]).startswith(own):
                        found.add(ticket_id)
            return found

        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            return set().union(*pool.map(listed, queries))

    def _visit_all(
        self,
        partitions: Iterable[Partition],
        visit: Callable[[Partition, str], Found],
        starts: dict[str, str] | None = None,
    ) -> Found:
        """``visit`` each partition (from the sort key ``starts`` names for it) on
        the mover's workers, a bounded window of them in flight."""
        total = Found()
        window = max(1, self.workers) * WINDOW_PER_WORKER
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            pending: list[Future[Found]] = []
            try:
                for partition in partitions:
                    pending.append(pool.submit(visit, partition, (starts or {}).get(partition[1], "")))
                    if len(pending) >= window:
                        total.merge(self._collect(pending.pop(0)))
                while pending:
                    total.merge(self._collect(pending.pop(0)))
            except BaseException:
                self._stopped = True
                for future in pending:
                    future.cancel()
                raise
        return total

    def _collect(self, future: Future[Found]) -> Found:
        found = future.result()
        if self._progress is not None:
            with self._lock:
                self._progress.step("", found.read or found.written or found.deleted)
        self.heartbeat()
        return found

    # ------------------------------------------------------------ writing
    def _writes(self, table: TenantTable, found: Found) -> _Writes:
        return _Writes(self, table, found)

    def pace(self, items: int) -> None:
        """Wait for this many items' share of the rate (shared by the workers)."""
        with self._lock:
            now = self.store.clock()
            start = max(self._next_slot, now)
            self._next_slot = start + items / self.rate
        if start > now:
            self.store.sleep(start - now)

    def wrote(self) -> None:
        with self._lock:
            self._last_write = max(self._last_write, self.store.clock())

    def _put(self, table: TenantTable, item: dict[str, Any], *, conditional: bool) -> int:
        """One PutItem (only if the item is absent, when ``conditional``); 1 if it wrote."""
        _check_own(table, [item])
        self.heartbeat()
        self.pace(1)
        condition = {"ConditionExpression": "attribute_not_exists(pk)"} if conditional else {}
        try:
            table.call("put_item", TableName=table.table_name, Item=self.carried(table, item), **condition)
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return 0
        finally:
            self.wrote()
        return 1

    # ------------------------------------------------------------ where the data goes (ops.cell_move's differ)
    @property
    def _pool(self) -> str:
        return self.store.table_name

    def _is_pool(self, table: TenantTable) -> bool:
        """Whether ``table`` is a pool table (the tenant's record and usage ledger live there)."""
        return table.table_name == self._pool

    def _kept_partitions(self, table: TenantTable) -> set[str]:
        """What of the tenant an erase leaves in ``table``: in the pool, its record and usage ledger."""
        return _kept_partitions(table.tenant_id) if self._is_pool(table) else set()

    def carried(self, table: TenantTable, item: dict[str, Any]) -> dict[str, Any]:
        """The item written into ``table`` for ``item`` of the other table: itself, within a stack."""
        return item

    def _move_cleared(self) -> dict[str, Any]:
        """The record's changes that end a move (or its rollback)."""
        return {"move_to": None, "move_table": None, "move_phase": None, "move_started_at": None}

    def _before_writes_open(self, record: TenantConfig, outcome: Outcome) -> bool:
        """Once every function reads the new table, before writes open (``FLIPPED``):
        whether anything was written (a hook: :mod:`ops.cell_move` hands over deliveries)."""
        return False

    def _before_catch_up(self, record: TenantConfig) -> None:
        """After the copy, while writes still go to the old table: nothing more within a stack."""

    def _synced_outside(self, record: TenantConfig) -> None:
        """At the switch, what lives outside the tenant's table: nothing within a stack."""

    def _trailing_outside(self) -> int:
        """At each trailing pass, what lives outside the tenant's table; how many items it copied."""
        return 0

    def _erased(self, record: TenantConfig, outcome: Outcome) -> None:
        """After the old table's erase, before the move fields are cleared: nothing more within a stack."""

    def _rolled_back_copy(self, record: TenantConfig) -> None:
        """After a rolled back copy's erase, before the move fields are cleared: nothing more within a stack."""

    def _left_behind(self, table: TenantTable) -> None:
        """Says how to delete a dedicated table the tenant left (or a rolled back copy's)."""
        if not self._is_pool(table):
            self._note(_how_to_delete(table.table_name, table.tenant_id, local=self.local))

    def _named(self, table: TenantTable) -> str:
        """A table as the operator's messages name it."""
        return table.table_name

    def _table(self, name: str, tenant_id: str) -> TenantTable:
        return TenantTable(tenant_id, name, OwnClient(self.store.client))

    def _old(self, record: TenantConfig) -> TenantTable:
        """The table the moving tenant's data comes from."""
        if record.move_phase in (MovePhase.FLIPPED, MovePhase.ERASING):
            return self._table(record.previous_table or self._pool, record.tenant_id)
        return self._table(record.table or self._pool, record.tenant_id)

    def _new(self, record: TenantConfig) -> TenantTable:
        return self._table(record.move_table or self._pool, record.tenant_id)

    def _destination(self, record: TenantConfig) -> str:
        return f"{record.move_to} ({record.move_table or self._pool})"

    def _table_name(self, record: TenantConfig) -> str:
        return record.table or self._pool

    def _note(self, message: str) -> None:
        (self._progress or Progress("move", self.stream)).note(message)


@dataclass(frozen=True, slots=True)
class _Entry:
    """An item of the new table as the sync compares it: its sort key and
    digest (and the item itself when it was read, for the names it gives)."""

    sk: str
    digest: bytes
    item: dict[str, Any] | None = None

    def note(self, found: Found, kind: str) -> None:
        if self.item is not None:
            found.note(kind, self.item)


@dataclass
class _Marks:
    """What the writers marked during a move's copy (``keys.move_mark_key``)."""

    tickets: set[str] = field(default_factory=set)
    events: set[str] = field(default_factory=set)  # audit events' sort keys
    # Each mark's key (pk, sk) and its written token (None: a mark written without one).
    written: dict[tuple[str, str], str | None] = field(default_factory=dict)


@dataclass
class _Copied:
    """What a run's copy wrote into the new table, a digest per item, by
    partition: the sync that follows it in the same run compares the old table
    with this instead of reading the new one again (nobody else writes there
    before the switch). At most :data:`MAX_REMEMBERED` items; beyond, invalid
    (the sync reads the new table's side), but each copied ticket's status is
    still kept (``counted``): the switch still reads only the marked tickets."""

    valid: bool = True
    # Whether the statuses are every copied ticket's (kept beyond MAX_REMEMBERED: one per ticket).
    counted: bool = True
    _partitions: dict[str, tuple[str, dict[str, bytes]]] = field(default_factory=dict)
    # Each ticket's status as copied (by its partition key), counted as the aggregator counts it.
    _statuses: dict[str, TicketStatus] = field(default_factory=dict)
    _items: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, item: dict[str, Any], tenant_id: str) -> None:
        with self._lock:
            status = summary_status(tenant_id, item) if self.counted and kind == TICKET else None
            if status is not None:
                self._statuses[item["pk"]["S"]] = status
            if not self.valid:
                return
            if self._items >= MAX_REMEMBERED:
                self.valid, self._partitions = False, {}
                return
            self._partitions.setdefault(item["pk"]["S"], (kind, {}))[1][item["sk"]["S"]] = _digest(item)
            self._items += 1

    def replace(self, kind: str, pk: str, items: Sequence[dict[str, Any]], tenant_id: str) -> None:
        """The partition ``pk`` as it now is in the new table: ``items`` (a catch-up synced it)."""
        with self._lock:
            self._statuses.pop(pk, None)
            if self.valid:
                self._items -= len(self._partitions.pop(pk, ("", {}))[1])
        for item in items:
            self.add(kind, item, tenant_id)

    def counts_after(self, synced: Found) -> Counter[TicketStatus]:
        """The counts as copied, with each ticket the sync visited counted as it found it instead."""
        counts = Counter(status for pk, status in self._statuses.items() if pk not in synced.visited)
        counts.update(synced.counts)
        return counts

    def digest(self, pk: str, sk: str) -> bytes | None:
        """The digest of the item the copy wrote under this key (``None``: it wrote none)."""
        return self._partitions.get(pk, ("", {}))[1].get(sk)

    def entries(self, pk: str, since: str = "") -> Iterator[_Entry]:
        _, items = self._partitions.get(pk, ("", {}))
        return iter([_Entry(sk, digest) for sk, digest in sorted(items.items()) if sk >= since])

    def partitions(self, exclude: set[str], *, tickets: bool = True) -> list[Partition]:
        """The partitions copied that a sync must still look at: those a client
        changes (append-only ones only gain items, which the old table names);
        ``tickets=False``: not the tickets' (the marks name those that changed)."""
        kinds = CARRIED | {DELIVERIES, DAYS} if tickets else (CARRIED - {TICKET}) | {DELIVERIES, DAYS}
        return [(kind, pk) for pk, (kind, _) in sorted(self._partitions.items()) if pk not in exclude and kind in kinds]


@dataclass
class _Writes:
    """One worker's writes into one table: 25 per BatchWriteItem, at the mover's
    pace, what DynamoDB leaves unprocessed retried with exponential backoff,
    each batch only while the mover still owns the move."""

    mover: Mover
    table: TenantTable
    found: Found
    _requests: list[dict[str, Any]] = field(default_factory=list)

    def put(self, item: dict[str, Any]) -> None:
        self._requests.append({"PutRequest": {"Item": self.mover.carried(self.table, item)}})
        self.found.written += 1
        if len(self._requests) == BATCH_WRITE_SIZE:
            self.flush()

    def delete(self, item: dict[str, Any]) -> None:
        self._requests.append({"DeleteRequest": {"Key": {"pk": item["pk"], "sk": item["sk"]}}})
        self.found.deleted += 1
        if len(self._requests) == BATCH_WRITE_SIZE:
            self.flush()

    def flush(self) -> None:
        requests, self._requests = self._requests, []
        if not requests:
            return
        _check_own(self.table, [_key_of(request) for request in requests])
        self.mover.heartbeat()
        self.mover.pace(len(requests))
        for round_number in range(MAX_WRITE_ROUNDS):
            response = self.table.call("batch_write_item", RequestItems={self.table.table_name: requests})
            self.mover.wrote()
            requests = list(response.get("UnprocessedItems", {}).get(self.table.table_name, []))
            if not requests:
                return
            self.mover.store.sleep(min(0.05 * 2**round_number, 2.0))
        raise Throttled()


# ---------------------------------------------------------------- helpers
def _key_of(request: dict[str, Any]) -> dict[str, Any]:
    """The item (or key) a BatchWriteItem request writes."""
    put = request.get("PutRequest")
    return dict(put["Item"]) if put is not None else dict(request["DeleteRequest"]["Key"])


def _remembering(items: Iterator[dict[str, Any]], seen: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for item in items:
        seen.append(item)
        yield item


def _read_entries(table: TenantTable, pk: str, since: str) -> Iterator[_Entry]:
    for item in partition_items(table, pk, since):
        yield _Entry(item["sk"]["S"], _digest(item), item)


def _digest(item: dict[str, Any]) -> bytes:
    """An item's digest, the same for the same values however they were read
    (sets sorted, binary values in hex)."""
    text = json.dumps(_canonical(item), sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            name: sorted(_canonical(member) for member in inner) if name in SET_TYPES else _canonical(inner)
            for name, inner in value.items()
        }
    if isinstance(value, list):
        return [_canonical(member) for member in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    return value


def _check_own(table: TenantTable, items: Iterable[dict[str, Any]]) -> None:
    """Every key the mover writes is under the tenant's prefix: anything else is a bug, never a write."""
    prefix = keys.tenant_prefix(table.tenant_id)
    if any(not str(item["pk"]["S"]).startswith(prefix) for item in items):
        raise ValueError("refusing to write another tenant's item")


def _partition_query(table: TenantTable, pk: str, projection: str | None = None) -> dict[str, Any]:
    if not pk.startswith(keys.tenant_prefix(table.tenant_id)):
        raise ValueError("not a partition of this tenant")
    query: dict[str, Any] = {
        "TableName": table.table_name,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": pk}},
        "ConsistentRead": True,
    }
    if projection:
        query["ProjectionExpression"] = projection
    return query


def partition_items(
    table: TenantTable, pk: str, since: str = "", projection: str | None = None
) -> Iterator[dict[str, Any]]:
    """A partition's items in sort key order (from ``since``), read consistently, a page at a time."""
    query = _partition_query(table, pk, projection)
    if since:
        query["KeyConditionExpression"] = "pk = :pk AND sk >= :since"
        query["ExpressionAttributeValues"][":since"] = {"S": since}
    for page in table.query_pages(query):
        yield from page


def _carried_items(kind: str, items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The items of a partition of ``kind`` a move carries: all but an idempotency
    record still in progress (the module's docstring, "What is not copied")."""
    for item in items:
        if kind != IDEMPOTENCY or item.get(IDEMPOTENCY_STATUS, {}).get("S") != IN_PROGRESS:
            yield item


def _history_twin(tenant_id: str, kind: str, item: dict[str, Any]) -> dict[str, Any] | None:
    """The history item of a day partition's audit event: the audit writer stores
    every event twice, the same attributes under the ticket's history and the
    day's partition (:func:`support_tickets.data.audit_items.stored_item`), so
    the move copies and erases a history by its day items, without a Query per
    ticket. A history item without its twin is the final Scan's."""
    ticket_id = item.get("ticket_id", {}).get("S", "")
    if kind != DAY or not keys.is_valid_ticket_id(ticket_id):
        return None
    return {**item, "pk": {"S": keys.history_pk(tenant_id, ticket_id)}}


def _kind_of(tenant_id: str, pk: str) -> str:
    """Which kind of the tenant's partitions ``pk`` is (checked against the keys module's own builders)."""
    fixed = {
        keys.audit_days_pk(tenant_id): DAYS,
        keys.webhooks_pk(tenant_id): WEBHOOKS,
        **dict.fromkeys(keys.idempotency_partitions(tenant_id), IDEMPOTENCY),
    }
    suffix = keys.own_suffix(tenant_id, pk) or ""
    rest = suffix.partition("#")[2]
    day, _, shard = rest.rpartition("#")
    matches = {
        DELIVERIES: keys.deliveries_owner(pk) is not None and bool(suffix),
        PARKED: keys.parked_owner(pk) is not None and bool(suffix),
        TICKET: keys.ticket_id_of_suffix(suffix) is not None,
        HISTORY: keys.is_valid_ticket_id(rest) and keys.history_pk(tenant_id, rest) == pk,
        DAY: keys.is_day(day)
        and is_digits(shard)
        and int(shard) < keys.AUDIT_SHARDS
        and keys.audit_day_pk(tenant_id, day, int(shard)) == pk,
    }
    return fixed.get(pk) or next((kind for kind, match in matches.items() if match), NOT_COPIED)


def _not_copied_partitions(tenant_id: str, pool: bool) -> list[str]:
    """The partitions a move never copies and erases from the old table: counts,
    journals, webhook rate counters and leases, move marks (and, out of the pool, a usage
    ledger that should not be there)."""
    found = [
        keys.aggregate_pk(tenant_id),
        *keys.aggregate_journal_partitions(tenant_id),
        keys.webhook_rate_pk(tenant_id),
        *keys.move_mark_partitions(tenant_id),
    ]
    return found if pool else [*found, *keys.usage_partitions(tenant_id)]


def _kept_partitions(tenant_id: str) -> set[str]:
    """What stays of a tenant in the pool table whatever its placement: its record and usage ledger."""
    return {keys.tenant_config_key(tenant_id)["pk"]["S"], *keys.usage_partitions(tenant_id)}


def _how_to_delete(table_name: str, tenant_id: str, *, local: bool = False) -> str:
    """What the operator does to delete the table a tenant left (the template
    retains the table and its key, and the table has deletion protection); in the
    local stack, where no AWS command applies, what becomes of it."""
    if local:
        return (
            f"the emptied table {table_name} and its key stay in the local stack until it stops "
            f"(make offboard deletes them with the tenant; moving back there reuses them)"
        )
    return (
        f"the emptied table {table_name}, its key and its stack stay (the template retains the table and the key; "
        f"deletion protection): to delete them, aws dynamodb update-table --table-name {table_name} "
        f"--no-deletion-protection-enabled; aws dynamodb delete-table --table-name {table_name}; aws kms "
        f"schedule-key-deletion --key-id <the stack's KeyArn output>; aws cloudformation delete-stack --stack-name "
        f"<stack>-tenant-{tenant_id} (make offboard does all of it with the tenant; moving back there reuses them)"
    )
