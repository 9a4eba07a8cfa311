"""Every key of the single-table model, built in one place.

All partition keys (table and GSI1) start with ``TENANT#<tenant>|``. The ``|``
terminates the tenant id, so the IAM pattern ``TENANT#1|*`` can never match
tenant ``10``'s ``TENANT#10|...`` keys. Tenant ids are validated before they
reach a key (see :func:`validate_tenant_id`), so no delimiter or IAM wildcard
can be smuggled in through one.

Sharding (hot tenants): a tenant's GSI1 status lists are spread over its
shard count (its tenant record, :mod:`support_tickets.data.tenant_registry`). With
1 shard a ticket's ``tenant_status`` is the anchor blog's
``TENANT#<t>|<STATUS>`` exactly; with n > 1 it is ``TENANT#<t>|<STATUS>#<k>``,
``k = ticket_shard(ticket_id, n)``: derived from the ticket id alone, so no
lookup finds a ticket's shard. The key of shard ``k`` is the same whatever the
shard count (``OPEN#3`` under 4 or under 8 shards), which is what lets a
reader that covers several shard counts read each key once
(:func:`status_partitions`). Idempotency records are spread over
:data:`IDEMPOTENCY_BUCKETS` keys per tenant and aggregate counts over
:data:`AGGREGATE_SLOTS` items per status, whatever the shard count.

Audit trail (written from the stream, :mod:`support_tickets.streams.audit_events`): every
event is stored twice, under the ticket's own history partition
``TENANT#<t>|HISTORY#<ticket id>`` (oldest first) and under the tenant's
trail of its UTC day, ``TENANT#<t>|AUDIT#<YYYY-MM-DD>#<k>``, ``k`` one of
:data:`AUDIT_SHARDS` chosen from the event id, so that a busy tenant's events
of one day spread over several partitions. Both sort keys are
``<ISO time>#<stream sequence number>#<event id>`` (:func:`audit_sk`).
``TENANT#<t>|AUDIT#DAYS`` lists the days that have events. No other key
contains ``|HISTORY#`` or ``|AUDIT#`` (ticket ids and tenant ids can hold
neither ``|`` nor ``#``), which is what
lets IAM confine the audit writer to them with ``dynamodb:LeadingKeys``.

Usage (written from the API functions' log lines, :mod:`support_tickets.usage.metering`):
counters under ``TENANT#<t>|USAGE`` (sort key ``<YYYY-MM-DD>#<slot>``) and the
metering function's delivery journal under ``TENANT#<t>|USAGE#JOURNAL``. No
other partition key ends in ``|USAGE`` or ``|USAGE#JOURNAL``: the part after a
tenant's ``|`` is one of this module's fixed marks, or a ticket or webhook id
after its own mark (``TICKET#``, ``HISTORY#``, ...), and no id can hold ``|``.
That is what lets IAM confine the metering function to them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Final

from support_tickets.core.digits import is_digits

TENANT_ID_PATTERN: Final = r"^[a-z0-9-]{1,63}$"
TICKET_ID_PATTERN: Final = r"^[0-9A-Za-z_-]{1,64}$"
RESOLVER_PATTERN: Final = r"^[A-Za-z0-9._@-]{1,128}$"

_TENANT_ID = re.compile(TENANT_ID_PATTERN)
_TICKET_ID = re.compile(TICKET_ID_PATTERN)
# What an audit sort key is: <ISO 8601 UTC time, milliseconds>#<stream sequence
# number, 40 digits>#<stream event id>. The sequence number orders the changes
# of one ticket made within the same millisecond (they share a stream shard).
AUDIT_TIME_PATTERN: Final = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z"
EVENT_ID_PATTERN: Final = r"[0-9A-Za-z_-]{1,128}"
SEQUENCE_DIGITS: Final = 40
_AUDIT_SK = re.compile(rf"^{AUDIT_TIME_PATTERN}#[0-9]{{{SEQUENCE_DIGITS}}}#{EVENT_ID_PATTERN}$")
# Digits are ASCII digits ([0-9], never \d: a str pattern's \d also matches "٣").
_DAY = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_AUDIT_DAY_SUFFIX = re.compile(r"^AUDIT#[0-9]{4}-[0-9]{2}-[0-9]{2}#[0-9]{1,2}$")

SUMMARY_SK: Final = "SUMMARY"
TICKET_MARK: Final = "TICKET#"
COMMENT_SK_PREFIX: Final = "COMMENT#"
# A deleted ticket's tombstone, in its partition from the delete that removed
# its summary until the last of its comments is gone (TicketRepository.delete_ticket):
# its INSERT (and the MODIFY of a further pass) is what the audit-trail function
# finishes the delete from. It sorts after the comments and before SUMMARY.
DELETING_SK: Final = "DELETING"
GSI1_NAME: Final = "GSI1"
# GSI1's sort key must exist for a ticket to appear in status lists, so an
# unassigned ticket stores this value; "#" can't occur in a user name.
UNASSIGNED_RESOLVER: Final = "#UNASSIGNED"
CONFIG_SK: Final = "CONFIG"
# Set (true) by an offboarding on a ticket summary just before it erases it:
# the stream functions' FilterCriteria drop records that carry it, so erasing
# a tenant writes no counts and no audit events that would outlive it.
ERASING_ATTRIBUTE: Final = "erasing"
MAX_SHARDS: Final = 64
# Fixed, not the shard count: a replayed Idempotency-Key must find its record
# whatever the tenant's shard count is by then. 64 keys keep even 3,000
# idempotent creates/s of one tenant well under a partition's 1,000 WCU/s.
IDEMPOTENCY_BUCKETS: Final = 64
# Count items per (tenant, status): concurrent aggregator transactions from
# different stream shards rarely pick the same one, so they rarely conflict.
AGGREGATE_SLOTS: Final = 8
# Journal partitions per tenant for the aggregator's delivery journal.
AGGREGATE_JOURNAL_PARTITIONS: Final = 16
# Partitions of a tenant's audit trail per UTC day: 8 keep a tenant writing
# 4,000 changes/s (the benchmark's hot tenant) at 500 WCU/s per partition key,
# half of DynamoDB's per-partition limit; a reader queries 8 keys per day.
AUDIT_SHARDS: Final = 8


class TicketStatus(StrEnum):
    OPEN = "OPEN"
    IN_PROGRESS = "IN_PROGRESS"
    CLOSED = "CLOSED"


class InvalidTenantId(ValueError):
    """A tenant id that must never reach a key or a session tag."""


def validate_tenant_id(tenant_id: object) -> str:
    if not isinstance(tenant_id, str) or not _TENANT_ID.fullmatch(tenant_id):
        raise InvalidTenantId("tenant id must be 1-63 lowercase letters, digits or '-'")
    return tenant_id


def is_valid_ticket_id(ticket_id: str) -> bool:
    return bool(_TICKET_ID.fullmatch(ticket_id))


def tenant_prefix(tenant_id: str) -> str:
    return f"TENANT#{validate_tenant_id(tenant_id)}|"


def ticket_pk(tenant_id: str, ticket_id: str) -> str:
    if not is_valid_ticket_id(ticket_id):
        raise ValueError("invalid ticket id")
    return f"{tenant_prefix(tenant_id)}{ticket_suffix(ticket_id)}"


def ticket_suffix(ticket_id: str) -> str:
    """A ticket's partition key after its tenant's prefix."""
    return f"{TICKET_MARK}{ticket_id}"


def ticket_id_of_suffix(suffix: str) -> str | None:
    """The ticket id of a ticket's key suffix; ``None`` for any other suffix."""
    ticket_id = suffix.removeprefix(TICKET_MARK)
    return ticket_id if suffix.startswith(TICKET_MARK) and is_valid_ticket_id(ticket_id) else None


def own_suffix(tenant_id: str, pk: str) -> str | None:
    """What follows the tenant's prefix in ``pk``; ``None`` when ``pk`` is not under it."""
    prefix = tenant_prefix(tenant_id)
    return pk[len(prefix) :] if pk.startswith(prefix) else None


def tenant_key(tenant_id: str, suffix: str) -> str:
    """A key under the tenant's prefix with any suffix (a listing's resume position)."""
    return f"{tenant_prefix(tenant_id)}{suffix}"


def ticket_key(tenant_id: str, ticket_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": ticket_pk(tenant_id, ticket_id)}, "sk": {"S": SUMMARY_SK}}


def comment_sk(created_at: str, comment_id: str) -> str:
    return f"{COMMENT_SK_PREFIX}{created_at}#{comment_id}"


def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def validate_shard_count(shards: object) -> int:
    if not isinstance(shards, int) or isinstance(shards, bool) or not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shard count must be an integer from 1 to {MAX_SHARDS}")
    return shards


def ticket_shard(ticket_id: str, shards: int) -> int:
    """The GSI1 shard of a ticket under ``shards`` shards (a stable hash of its id)."""
    return _digest(ticket_id) % validate_shard_count(shards)


def tenant_status(tenant_id: str, status: TicketStatus | str, shard: int | None = None) -> str:
    """GSI1's partition key: ``TENANT#<t>|<STATUS>`` unsharded, ``…|<STATUS>#<k>`` for shard ``k``."""
    base = f"{tenant_prefix(tenant_id)}{TicketStatus(status).value}"
    if shard is None:
        return base
    if not isinstance(shard, int) or not 0 <= shard < MAX_SHARDS:
        raise ValueError("invalid shard")
    return f"{base}#{shard}"


def ticket_tenant_status(tenant_id: str, status: TicketStatus | str, ticket_id: str, shards: int) -> str:
    """Where a ticket of a tenant with ``shards`` shards sits in GSI1."""
    return tenant_status(tenant_id, status, None if shards == 1 else ticket_shard(ticket_id, shards))


def status_partitions(tenant_id: str, status: TicketStatus | str, shard_counts: Iterable[int]) -> list[str]:
    """Every GSI1 key a ticket in ``status`` can be under while writers use any of
    ``shard_counts``: each key once, in a stable order (unsharded first)."""
    found: set[int | None] = set()
    for shards in shard_counts:
        found.update([None] if validate_shard_count(shards) == 1 else range(shards))
    ordered = sorted(found, key=lambda shard: -1 if shard is None else shard)
    return [tenant_status(tenant_id, status, shard) for shard in ordered]


def status_from_tenant_status(value: str) -> TicketStatus:
    """The status in a GSI1 key, sharded or not."""
    return TicketStatus(value.rsplit("|", 1)[1].split("#", 1)[0])


def resolver_key(resolver: str | None) -> str:
    return UNASSIGNED_RESOLVER if resolver is None else resolver


def resolver_from_key(value: str) -> str | None:
    return None if value == UNASSIGNED_RESOLVER else value


def tenant_config_key(tenant_id: str) -> dict[str, dict[str, str]]:
    """The tenant record (shard count, tier, status): operators write it, tenants only read it."""
    return {"pk": {"S": f"{tenant_prefix(tenant_id)}CONFIG"}, "sk": {"S": CONFIG_SK}}


def aggregate_pk(tenant_id: str) -> str:
    return f"{tenant_prefix(tenant_id)}AGGREGATE"


def aggregate_sk(status: TicketStatus | str, slot: int | None = None) -> str:
    """A count item of ``status``: ``<STATUS>#<slot>`` (the stream's), or ``<STATUS>``
    (corrections by ``make reconcile``, and counts kept before slots existed)."""
    value = TicketStatus(status).value
    if slot is None:
        return value
    if not isinstance(slot, int) or not 0 <= slot < AGGREGATE_SLOTS:
        raise ValueError("invalid aggregate slot")
    return f"{value}#{slot}"


def aggregate_slot(delivery_id: str) -> int:
    return _digest("slot", delivery_id) % AGGREGATE_SLOTS


def status_from_aggregate_sk(value: str) -> TicketStatus | None:
    try:
        return TicketStatus(value.split("#", 1)[0])
    except ValueError:
        return None


def aggregate_journal_key(tenant_id: str, event_id: str) -> dict[str, dict[str, str]]:
    """The aggregator's journal of the delivery that starts at stream record ``event_id``."""
    partition = _digest("journal", event_id) % AGGREGATE_JOURNAL_PARTITIONS
    return {"pk": {"S": aggregate_journal_pk(tenant_id, partition)}, "sk": {"S": event_id}}


def aggregate_journal_pk(tenant_id: str, partition: int) -> str:
    if not isinstance(partition, int) or not 0 <= partition < AGGREGATE_JOURNAL_PARTITIONS:
        raise ValueError("invalid journal partition")
    return f"{aggregate_pk(tenant_id)}#JOURNAL#{partition}"


def aggregate_journal_partitions(tenant_id: str) -> list[str]:
    """Every journal partition of a tenant (to erase them without a Scan)."""
    return [aggregate_journal_pk(tenant_id, partition) for partition in range(AGGREGATE_JOURNAL_PARTITIONS)]


# ---------------------------------------------------------------- moves
# Partitions of a moving tenant's change marks (ops.move): while its items are
# being copied into another table, every write of a ticket's partition marks the
# ticket first, and every audit event written into a day's trail marks the event,
# so that the switch reads again only what changed.
MOVE_MARK_PARTITIONS: Final = 16


def move_mark_key(tenant_id: str, name: str) -> dict[str, dict[str, str]]:
    """The mark that ticket ``name``'s partition changed during a move's copy, or
    (``name`` an audit sort key, :func:`audit_sk`) that the audit event was written."""
    if not (is_valid_ticket_id(name) or is_audit_sk(name)):
        raise ValueError("invalid ticket id or audit event")
    partition = _digest("move", name) % MOVE_MARK_PARTITIONS
    return {"pk": {"S": move_mark_pk(tenant_id, partition)}, "sk": {"S": name}}


def move_mark_pk(tenant_id: str, partition: int) -> str:
    if not isinstance(partition, int) or not 0 <= partition < MOVE_MARK_PARTITIONS:
        raise ValueError("invalid move mark partition")
    return f"{tenant_prefix(tenant_id)}MOVE#{partition}"


def move_mark_partitions(tenant_id: str) -> list[str]:
    """Every move mark partition of a tenant."""
    return [move_mark_pk(tenant_id, partition) for partition in range(MOVE_MARK_PARTITIONS)]


# ---------------------------------------------------------------- audit trail
def history_pk(tenant_id: str, ticket_id: str) -> str:
    """A ticket's history: its audit events, oldest first (outlives the ticket)."""
    if not is_valid_ticket_id(ticket_id):
        raise ValueError("invalid ticket id")
    return f"{tenant_prefix(tenant_id)}HISTORY#{ticket_id}"


def audit_day_pk(tenant_id: str, day: str, shard: int) -> str:
    """Shard ``shard`` of a tenant's audit trail of UTC day ``day`` (``YYYY-MM-DD``)."""
    if not _DAY.fullmatch(day):
        raise ValueError("invalid day")
    if not isinstance(shard, int) or isinstance(shard, bool) or not 0 <= shard < AUDIT_SHARDS:
        raise ValueError("invalid audit shard")
    return f"{tenant_prefix(tenant_id)}AUDIT#{day}#{shard}"


def audit_event_key(tenant_id: str, sk: str) -> dict[str, dict[str, str]]:
    """The key of the audit event of sort key ``sk`` in its day's trail: the
    day and the shard are the sort key's (its time, its event id)."""
    if not is_audit_sk(sk):
        raise ValueError("invalid audit event")
    event_id = sk.split("#", 2)[2]
    return {"pk": {"S": audit_day_pk(tenant_id, sk[:10], audit_shard(event_id))}, "sk": {"S": sk}}


def is_audit_day_suffix(suffix: str) -> bool:
    """Whether a key suffix (:func:`own_suffix`) is a day's trail, ``AUDIT#<day>#<k>``."""
    return bool(_AUDIT_DAY_SUFFIX.fullmatch(suffix))


def audit_day_partitions(tenant_id: str, day: str) -> list[str]:
    return [audit_day_pk(tenant_id, day, shard) for shard in range(AUDIT_SHARDS)]


def audit_days_pk(tenant_id: str) -> str:
    """The UTC days on which a tenant has audit events (sort key ``YYYY-MM-DD``):
    how an offboarding finds the tenant's trail without a Scan."""
    return f"{tenant_prefix(tenant_id)}AUDIT#DAYS"


def is_day(value: str) -> bool:
    return bool(_DAY.fullmatch(value))


def audit_shard(event_id: str) -> int:
    return _digest("audit", event_id) % AUDIT_SHARDS


def audit_sk(at: str, sequence_number: str, event_id: str) -> str:
    """``<time>#<sequence number>#<event id>``: time-ordered, unique per stream record."""
    if not is_digits(sequence_number) or len(sequence_number) > SEQUENCE_DIGITS:
        raise ValueError("invalid stream sequence number")
    value = f"{at}#{sequence_number.zfill(SEQUENCE_DIGITS)}#{event_id}"
    if not _AUDIT_SK.fullmatch(value):
        raise ValueError("invalid audit event time or id")
    return value


def is_audit_sk(value: str) -> bool:
    return bool(_AUDIT_SK.fullmatch(value))


# ---------------------------------------------------------------- usage
# Counter items per (tenant, UTC day): the metering function picks one from the
# log stream (execution environment) a delivery comes from, so concurrent
# deliveries of one busy tenant rarely update the same item.
USAGE_SLOTS: Final = 8
USAGE_MARK: Final = "USAGE"


def usage_pk(tenant_id: str) -> str:
    """A tenant's usage counters (sort key ``<YYYY-MM-DD>#<slot>``, docs/usage.md)."""
    return f"{tenant_prefix(tenant_id)}{USAGE_MARK}"


def usage_sk(day: str, slot: int) -> str:
    if not _DAY.fullmatch(day):
        raise ValueError("invalid day")
    if not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot < USAGE_SLOTS:
        raise ValueError("invalid usage slot")
    return f"{day}#{slot}"


def moved_usage_sk(sort_key: str, from_cell: str, move_started_at: int) -> str | None:
    """Where a counter item of a cell's ledger goes in another cell's when its
    tenant moves there (``ops.cell_move``): ``<day>#<slot>``, the cell's own,
    gets ``#<cell>#<the move's start>`` (never the new cell's own item of that
    day and slot, nor one an earlier move carried: a tenant moved A to B, back,
    and to B again the same day brings A's own counters twice, each time under
    another key; a day's readers sum whatever follows ``<day>#``); one that names
    a cell already keeps its key; anything else of the partition: ``None``, no counter."""
    day, _, rest = sort_key.partition("#")
    if not rest or not _DAY.fullmatch(day):
        return None
    if not _TENANT_ID.fullmatch(from_cell):
        raise ValueError("invalid cell id")
    if isinstance(move_started_at, bool) or not isinstance(move_started_at, int) or move_started_at < 0:
        raise ValueError("invalid move start")
    return f"{sort_key}#{from_cell}#{move_started_at}" if is_digits(rest) else sort_key


def usage_day_prefix(day: str) -> str:
    """What every counter item of ``day`` starts with (``begins_with`` on the sort key)."""
    if not _DAY.fullmatch(day):
        raise ValueError("invalid day")
    return f"{day}#"


def usage_slot(log_stream: str) -> int:
    return _digest("usage", log_stream) % USAGE_SLOTS


def usage_journal_pk(tenant_id: str) -> str:
    """The metering function's delivery journal of a tenant (items expire by TTL)."""
    return f"{usage_pk(tenant_id)}#JOURNAL"


def usage_journal_key(tenant_id: str, delivery_digest: str) -> dict[str, dict[str, str]]:
    if not re.fullmatch(r"[0-9a-f]{64}", delivery_digest):
        raise ValueError("invalid delivery digest")
    return {"pk": {"S": usage_journal_pk(tenant_id)}, "sk": {"S": delivery_digest}}


def usage_partitions(tenant_id: str) -> list[str]:
    """Every usage partition of a tenant (to export or erase them without a Scan)."""
    return [usage_pk(tenant_id), usage_journal_pk(tenant_id)]


# ---------------------------------------------------------------- webhooks
WEBHOOK_ID_PATTERN: Final = r"^[0-9A-Za-z_-]{1,64}$"
_WEBHOOK_ID = re.compile(WEBHOOK_ID_PATTERN)
WEBHOOK_SK_PREFIX: Final = "WEBHOOK#"
WEBHOOK_COUNT_SK: Final = "COUNT"


def is_valid_webhook_id(webhook_id: str) -> bool:
    return bool(_WEBHOOK_ID.fullmatch(webhook_id))


def webhooks_pk(tenant_id: str) -> str:
    """A tenant's webhooks (at most 10) and their count share one partition."""
    return f"{tenant_prefix(tenant_id)}WEBHOOKS"


def webhook_key(tenant_id: str, webhook_id: str) -> dict[str, dict[str, str]]:
    if not is_valid_webhook_id(webhook_id):
        raise ValueError("invalid webhook id")
    return {"pk": {"S": webhooks_pk(tenant_id)}, "sk": {"S": f"{WEBHOOK_SK_PREFIX}{webhook_id}"}}


def webhook_count_key(tenant_id: str) -> dict[str, dict[str, str]]:
    """How many webhooks a tenant has: the race-safe limit's counter."""
    return {"pk": {"S": webhooks_pk(tenant_id)}, "sk": {"S": WEBHOOK_COUNT_SK}}


DELIVERY_ID_PATTERN: Final = r"^[0-9A-Za-z_-]{1,64}$"
_DELIVERY_ID = re.compile(DELIVERY_ID_PATTERN)
DELIVERY_SK_PREFIX: Final = "DELIVERY#"
_DELIVERIES_PK = re.compile(r"^TENANT#([a-z0-9-]{1,63})\|WEBHOOK#([0-9A-Za-z_-]{1,64})#DELIVERIES$")


def is_valid_delivery_id(delivery_id: str) -> bool:
    return bool(_DELIVERY_ID.fullmatch(delivery_id))


def webhook_deliveries_pk(tenant_id: str, webhook_id: str) -> str:
    """A webhook's delivery records (sort key ``DELIVERY#<delivery id>``; delivery
    ids sort by their event's time: :func:`support_tickets.webhooks.events.delivery_id`)."""
    if not is_valid_webhook_id(webhook_id):
        raise ValueError("invalid webhook id")
    return f"{tenant_prefix(tenant_id)}WEBHOOK#{webhook_id}#DELIVERIES"


def webhook_rate_pk(tenant_id: str) -> str:
    """A tenant's delivery counters, one item per second (sort key: the epoch second), expiring by TTL."""
    return f"{webhooks_pk(tenant_id)}#RATE"


# A tenant's attempt leases (its bound on deliveries in flight) share the rate counters' partition:
# LEASE#<n> (support_tickets.webhooks.slots).
WEBHOOK_LEASE_SK_PREFIX: Final = "LEASE#"


def delivery_key(tenant_id: str, webhook_id: str, delivery_id: str) -> dict[str, dict[str, str]]:
    if not is_valid_delivery_id(delivery_id):
        raise ValueError("invalid delivery id")
    return {
        "pk": {"S": webhook_deliveries_pk(tenant_id, webhook_id)},
        "sk": {"S": f"{DELIVERY_SK_PREFIX}{delivery_id}"},
    }


# A webhook's parked deliveries (docs/webhooks.md, "Parking"): its circuit item and the
# messages taken out of the queue while its endpoint fails, in one partition of their own.
WEBHOOK_CIRCUIT_SK: Final = "CIRCUIT"
PARKED_SK_PREFIX: Final = "PARKED#"
_PARKED_PK = re.compile(r"^TENANT#([a-z0-9-]{1,63})\|WEBHOOK#([0-9A-Za-z_-]{1,64})#PARKED$")


def webhook_parked_pk(tenant_id: str, webhook_id: str) -> str:
    """A webhook's parking partition: its circuit item (``CIRCUIT``) and its parked
    messages (``PARKED#<delivery id>``, in their events' order)."""
    if not is_valid_webhook_id(webhook_id):
        raise ValueError("invalid webhook id")
    return f"{tenant_prefix(tenant_id)}WEBHOOK#{webhook_id}#PARKED"


def webhook_circuit_key(tenant_id: str, webhook_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": webhook_parked_pk(tenant_id, webhook_id)}, "sk": {"S": WEBHOOK_CIRCUIT_SK}}


def parked_key(tenant_id: str, webhook_id: str, delivery_id: str) -> dict[str, dict[str, str]]:
    if not is_valid_delivery_id(delivery_id):
        raise ValueError("invalid delivery id")
    return {"pk": {"S": webhook_parked_pk(tenant_id, webhook_id)}, "sk": {"S": f"{PARKED_SK_PREFIX}{delivery_id}"}}


def parked_owner(pk: str) -> tuple[str, str] | None:
    """The (tenant id, webhook id) whose parking partition ``pk`` is; ``None`` for any other key."""
    match = _PARKED_PK.fullmatch(pk)
    return (match.group(1), match.group(2)) if match else None


def deliveries_owner(pk: str) -> tuple[str, str] | None:
    """The (tenant id, webhook id) whose deliveries partition ``pk`` is; ``None`` for any other key."""
    match = _DELIVERIES_PK.fullmatch(pk)
    return (match.group(1), match.group(2)) if match else None


def idempotency_pk(tenant_id: str, scope: str) -> str:
    """The partition of an idempotency record: one of :data:`IDEMPOTENCY_BUCKETS` per
    tenant, chosen by ``scope`` (the user and the Idempotency-Key)."""
    return f"{tenant_prefix(tenant_id)}IDEMPOTENCY#{_digest('idempotency', scope) % IDEMPOTENCY_BUCKETS}"


def idempotency_partitions(tenant_id: str) -> list[str]:
    """Every idempotency partition of a tenant (to export or erase them without a Scan)."""
    return [f"{tenant_prefix(tenant_id)}IDEMPOTENCY#{bucket}" for bucket in range(IDEMPOTENCY_BUCKETS)]


def tenant_of_key(pk: str) -> str:
    """The tenant id a partition key belongs to (inverse of :func:`tenant_prefix`)."""
    if not pk.startswith("TENANT#") or "|" not in pk:
        raise ValueError("not a tenant key")
    return validate_tenant_id(pk[len("TENANT#") : pk.index("|")])
