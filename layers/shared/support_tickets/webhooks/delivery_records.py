"""What the delivery side reads of a tenant's webhooks, and writes of their deliveries.

Keys come from :mod:`support_tickets.core.keys`: a webhook's deliveries live
under ``TENANT#<t>|WEBHOOK#<webhook id>#DELIVERIES`` (sort key
``DELIVERY#<delivery id>``, time-ordered), so the same ``dynamodb:LeadingKeys``
conditions confine them as every other item of the tenant.

A delivery record holds the delivery object of API.md, the event's body as it
was sent (a redelivery sends the same bytes, the same ``webhook-id``), and a
TTL (``expiration``). Writers:

- the audit writer's fan-out, before it queues the message: the record
  ``PENDING`` with 0 attempts, unless it exists
  (:meth:`DeliveryRecords.record_queued`), so every queued message has one
  (what a cell move hands over); and ``FAILED`` for a message the queue refused
  for good (:meth:`DeliveryRecords.record_refusal`);
- the delivery function (its own role): one ``UpdateItem`` per attempt
  (:meth:`DeliveryRecords.record_attempt`), which also clears a pending
  redelivery mark;
- ``POST …/redeliver`` (the tenant's own credentials): sets
  ``redeliver_requested_at`` and nothing else
  (:meth:`support_tickets.webhooks.admin_repository.DeliveryRepository.request_redelivery`):
  ``TenantAccessRole`` may write no other attribute of a delivery record, so
  the status, attempts and event a tenant reads are the delivery function's
  alone. While the mark is set the delivery is shown ``PENDING``
  (:func:`pending_redelivery`). The audit-trail function's stream filter sees
  that change and puts the stored event on the queue again
  (:mod:`support_tickets.webhooks.fanout`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from support_tickets.core import keys
from support_tickets.data.table import TenantTable, from_item, to_item
from support_tickets.webhooks.events import ACTIVE, DISABLED
from support_tickets.webhooks.slots import ExpiringSlots

PENDING: Final = "PENDING"
DELIVERED: Final = "DELIVERED"
FAILED: Final = "FAILED"
# How long a delivery record is kept (TTL from its creation).
DELIVERY_RETENTION_SECONDS: Final = 30 * 86_400
REDELIVER_MARK: Final = "redeliver_requested_at"
# Why a delivery is FAILED without ever having been queued (the audit writer's refusal record).
FAILURE_REASON: Final = "failure_reason"
# A refused event larger than this is recorded without its body (DynamoDB's items hold
# 400 KB): its record is visible, and a redelivery of it fails again with the same reason.
MAX_STORED_EVENT_BYTES: Final = 300_000
# DynamoDB's 400 KB item less 4 KB for a record's other attributes: an event larger than this can
# have no delivery record, so the fan-out never queues it (it is recorded FAILED without its body).
MAX_RECORDED_EVENT_BYTES: Final = 400 * 1024 - 4 * 1024
# What the route writes as the mark: the request's time (ISO 8601 UTC, milliseconds).
_MARK = re.compile(rf"^{keys.AUDIT_TIME_PATTERN}$")


def pending_redelivery(mark: object) -> str | None:
    """The time a redelivery was requested, if ``mark`` (a record's
    :data:`REDELIVER_MARK`) is one the route writes; ``None`` otherwise (no mark,
    or a value tenant credentials wrote by hand, which nothing acts on)."""
    return mark if isinstance(mark, str) and _MARK.fullmatch(mark) else None


def webhooks_query(table: TenantTable, attributes: Sequence[str]) -> dict[str, Any]:
    """One Query of ``table``'s tenant's webhooks (``TENANT#<t>|WEBHOOKS``, the ``WEBHOOK#``
    items, never its count item), projected to ``attributes`` (all aliased): the one both
    sides make, each projected to what it may read (the admins' list: never a secret)."""
    return {
        "TableName": table.table_name,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :webhook)",
        "ExpressionAttributeValues": {
            ":pk": {"S": keys.webhooks_pk(table.tenant_id)},
            ":webhook": {"S": keys.WEBHOOK_SK_PREFIX},
        },
        "ProjectionExpression": ", ".join(f"#{name}" for name in attributes),
        "ExpressionAttributeNames": {f"#{name}": name for name in attributes},
    }


class MalformedWebhook(ValueError):
    """A stored webhook without its url, events or secret."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """What the audit writer needs of a webhook to decide whether to send it an event."""

    webhook_id: str
    events: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class WebhooksVersion:
    """A tenant's webhook count item: how many webhooks, and a version that each
    create and delete moves (:mod:`support_tickets.webhooks.admin_repository`)."""

    count: int
    version: int


@dataclass(frozen=True, slots=True)
class DeliveryTarget:
    """A webhook as the delivery function reads it: the URL and the sealed secrets."""

    webhook_id: str
    url: str
    events: tuple[str, ...]
    status: str
    secret: str
    previous_secret: str | None
    previous_secret_expires_at: str | None


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one attempt changes on the delivery record."""

    delivery_id: str
    webhook_id: str
    event_id: str
    type: str
    ticket_id: str
    body: str
    status: str
    status_code: int | None
    next_attempt_at: str | None
    at: str
    expiration: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """A delivery the queue refused for good: what its FAILED record says."""

    delivery_id: str
    webhook_id: str
    event_id: str
    type: str
    ticket_id: str
    body: str
    reason: str
    at: str
    expiration: int


# A delivery record as the fan-out wrote it (DeliveryRecords.record_queued), no delivery function's
# write since: PENDING, no attempt, no next attempt set, no redelivery asked for.
AS_QUEUED: Final = (
    f"#status = :pending AND attempts = :zero AND attribute_not_exists({REDELIVER_MARK}) "
    "AND (attribute_not_exists(next_attempt_at) OR attribute_type(next_attempt_at, :null))"
)


@dataclass(frozen=True, slots=True)
class Progress:
    """A delivery as its record says before the delivery function acts on it."""

    status: str | None  # None: no record yet
    attempts: int
    # The record is the fan-out's as it wrote it (AS_QUEUED): no delivery function wrote it yet.
    as_queued: bool


# What every write of a delivery record sets from its event (queued, held or attempted),
# and the status, the next attempt and the record's age.
_EVENT_ASSIGNMENTS: Final = (
    "delivery_id = :delivery_id, webhook_id = :webhook_id, event_id = :event_id, #type = :type, "
    "ticket_id = :ticket_id, #event = :body, #status = :status, next_attempt_at = :next"
)


def _event_values(attempt: Attempt, status: str) -> dict[str, Any]:
    """The values of :data:`_EVENT_ASSIGNMENTS` (and ``:at``, ``:expiration``, ``:zero``)."""
    return {
        ":delivery_id": attempt.delivery_id,
        ":webhook_id": attempt.webhook_id,
        ":event_id": attempt.event_id,
        ":type": attempt.type,
        ":ticket_id": attempt.ticket_id,
        ":body": attempt.body,
        ":status": status,
        ":next": attempt.next_attempt_at,
        ":at": attempt.at,
        ":expiration": attempt.expiration,
        ":zero": 0,
    }


@dataclass(frozen=True, slots=True)
class DeliveryRecords:
    """A tenant's webhooks as the delivery side sees them, and the attempts on their delivery records."""

    table: TenantTable

    # ------------------------------------------------------------ webhooks
    def webhooks_version(self) -> WebhooksVersion:
        """The tenant's webhook count and its version, read strongly consistently (one
        GetItem of ``TENANT#<t>|WEBHOOKS``/``COUNT``, which every create and delete of
        a webhook changes in its own transaction); 0 and 0 for a tenant that never had one."""
        response = self.table.call(
            "get_item",
            TableName=self.table.table_name,
            Key=keys.webhook_count_key(self.table.tenant_id),
            ProjectionExpression="#count, #version",
            ExpressionAttributeNames={"#count": "count", "#version": "version"},
            ConsistentRead=True,
        )
        row = from_item(response.get("Item") or {})
        return WebhooksVersion(count=int(row.get("count") or 0), version=int(row.get("version") or 0))

    def subscriptions(self) -> list[Subscription]:
        """The tenant's ACTIVE webhooks and the event types each wants (one strongly
        consistent Query, no secrets: every webhook whose create committed before it)."""
        query = {**webhooks_query(self.table, ("webhook_id", "events", "status")), "ConsistentRead": True}
        found: list[Subscription] = []
        for page in self.table.query_pages(query):
            for item in page:
                row = from_item(item)
                events, webhook_id = row.get("events"), row.get("webhook_id")
                if row.get("status") == ACTIVE and isinstance(webhook_id, str) and isinstance(events, list):
                    found.append(Subscription(webhook_id, tuple(str(event) for event in events)))
        return found

    def target(self, webhook_id: str) -> DeliveryTarget | None:
        """The webhook with its sealed secrets, read consistently; ``None`` if it is gone."""
        response = self.table.call(
            "get_item",
            TableName=self.table.table_name,
            Key=keys.webhook_key(self.table.tenant_id, webhook_id),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item:
            return None
        row = from_item(item)
        events = row.get("events")
        if (
            not isinstance(events, list)
            or not isinstance(row.get("url"), str)
            or not isinstance(row.get("secret"), str)
        ):
            raise MalformedWebhook("webhook: url, events or secret missing")
        return DeliveryTarget(
            webhook_id=webhook_id,
            url=row["url"],
            events=tuple(str(event) for event in events),
            status=str(row.get("status")),
            secret=row["secret"],
            previous_secret=row.get("previous_secret") if isinstance(row.get("previous_secret"), str) else None,
            previous_secret_expires_at=(
                row.get("previous_secret_expires_at")
                if isinstance(row.get("previous_secret_expires_at"), str)
                else None
            ),
        )

    def disable(self, webhook_id: str) -> None:
        """``DISABLED`` (the receiver answered 410 Gone); a deleted webhook stays deleted."""
        self.table.call_if(
            "update_item",
            TableName=self.table.table_name,
            Key=keys.webhook_key(self.table.tenant_id, webhook_id),
            UpdateExpression="SET #status = :disabled",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":disabled": {"S": DISABLED}},
        )

    def take_rate_slot(self, second: int, limit: int) -> bool:
        """One of the ``limit`` deliveries the tenant may start in epoch second
        ``second``; ``False`` when they are taken (a conditional ``ADD`` on the
        second's counter, which expires a minute later)."""
        return self.table.call_if(
            "update_item",
            TableName=self.table.table_name,
            Key={"pk": {"S": keys.webhook_rate_pk(self.table.tenant_id)}, "sk": {"S": str(second)}},
            UpdateExpression="ADD #count :one SET expiration = :expiration",
            ConditionExpression="attribute_not_exists(#count) OR #count < :limit",
            ExpressionAttributeNames={"#count": "count"},
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":limit": {"N": str(limit)},
                ":expiration": {"N": str(second + 60)},
            },
        )

    def _leases(self, limit: int) -> ExpiringSlots:
        return ExpiringSlots(
            self.table, keys.webhook_rate_pk(self.table.tenant_id), keys.WEBHOOK_LEASE_SK_PREFIX, limit
        )

    def take_lease(self, limit: int, now: float, until: float, holder: str) -> int | None:
        """One of the tenant's ``limit`` attempt leases, held until ``until`` (epoch
        seconds) by ``holder``; ``None`` when every one is held. One consistent
        Query of the leases, then a conditional ``UpdateItem`` of a free one (free:
        never taken, released, or expired: a crashed attempt holds nothing past
        ``until``); another taker winning the same one moves on to the next
        (:class:`ExpiringSlots`: the takers of a batch start at leases of their own).
        No direct write first: while every lease is held, which is when a tenant's
        messages keep coming back, that write would fail every time."""
        return self._leases(limit).take(holder, now, until)

    def release_lease(self, slot: int, holder: str) -> None:
        """Give lease ``slot`` back, if ``holder`` still holds it (once expired, another may)."""
        self._leases(slot + 1).give_back(holder, slot)  # a count that has ``slot``: the tier may have changed

    # ------------------------------------------------------------ deliveries
    def record_queued(self, attempt: Attempt) -> bool:
        """The audit writer's record of a delivery it is about to queue: ``PENDING``
        with 0 attempts, its event, ``created_at`` and expiration (what :meth:`hold`
        writes), only if the delivery has no record yet: a stream redelivery of the
        event never resets one already attempted, refused or marked. ``False`` when
        it had one."""
        return self._write_record(
            attempt,
            "last_status_code = :none, created_at = :at, expiration = :expiration, attempts = :zero",
            {**_event_values(attempt, PENDING), ":none": None},
            ConditionExpression="attribute_not_exists(pk)",
        )

    def hold(self, attempt: Attempt) -> None:
        """A delivery held without an attempt (its tenant is suspended, or its message
        parked): ``PENDING`` with 0 attempts and its next attempt, so the deliveries
        list shows it, if it has no record or the fan-out's as it wrote it
        (:data:`AS_QUEUED`); a record a delivery function wrote already (a failed
        attempt's, an earlier hold's) or one marked for redelivery is left as it
        is (a write that kept a redelivery mark would send the redelivery again)."""
        self._write_record(
            attempt,
            "last_status_code = :none, created_at = if_not_exists(created_at, :at), "
            "expiration = if_not_exists(expiration, :expiration), attempts = :zero",
            {**_event_values(attempt, PENDING), ":none": None, ":pending": PENDING, ":null": "NULL"},
            ConditionExpression=f"attribute_not_exists(pk) OR ({AS_QUEUED})",
        )

    def progress(self, webhook_id: str, delivery_id: str) -> Progress:
        """A delivery's status and attempts so far (``None`` and 0 without a record;
        ``PENDING`` and 0 as queued) and whether its record is still as queued."""
        response = self.table.call(
            "get_item",
            TableName=self.table.table_name,
            Key=keys.delivery_key(self.table.tenant_id, webhook_id, delivery_id),
            ProjectionExpression=f"#status, attempts, next_attempt_at, {REDELIVER_MARK}",
            ExpressionAttributeNames={"#status": "status"},
            ConsistentRead=True,
        )
        row = from_item(response.get("Item") or {})
        status = row["status"] if isinstance(row.get("status"), str) else None
        attempts = int(row["attempts"]) if row.get("attempts") is not None else 0
        untouched = row.get("next_attempt_at") is None and REDELIVER_MARK not in row
        return Progress(status, attempts, as_queued=status == PENDING and attempts == 0 and untouched)

    def settle_pending(self, webhook_id: str, delivery_id: str) -> None:
        """A ``PENDING`` delivery (or one marked for redelivery) whose webhook can't
        receive it any more (deleted, disabled, unsubscribed) becomes ``FAILED``,
        without an attempt; the mark goes."""
        self.table.call_if(
            "update_item",
            TableName=self.table.table_name,
            Key=keys.delivery_key(self.table.tenant_id, webhook_id, delivery_id),
            UpdateExpression=f"SET #status = :failed, next_attempt_at = :none REMOVE {REDELIVER_MARK}",
            ConditionExpression=f"#status = :pending OR attribute_exists({REDELIVER_MARK})",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":failed": {"S": FAILED},
                ":pending": {"S": PENDING},
                ":none": {"NULL": True},
            },
        )

    def record_attempt(self, attempt: Attempt) -> None:
        """One attempt's outcome (creating the record on the first); clears a redelivery mark."""
        self._write_record(
            attempt,
            "last_status_code = :code, last_attempt_at = :at, created_at = if_not_exists(created_at, :at), "
            "expiration = if_not_exists(expiration, :expiration), attempts = if_not_exists(attempts, :zero) + :one "
            f"REMOVE {REDELIVER_MARK}, {FAILURE_REASON}",
            {**_event_values(attempt, attempt.status), ":code": attempt.status_code, ":one": 1},
        )

    def _write_record(self, attempt: Attempt, assignments: str, values: dict[str, Any], **condition: str) -> bool:
        """The delivery record's event fields and ``assignments`` (after ``SET``, then
        any ``REMOVE``); ``False`` when ``condition`` did not hold."""
        return self.table.call_if(
            "update_item",
            TableName=self.table.table_name,
            Key=keys.delivery_key(self.table.tenant_id, attempt.webhook_id, attempt.delivery_id),
            UpdateExpression=f"SET {_EVENT_ASSIGNMENTS}, {assignments}",
            ExpressionAttributeNames={"#type": "type", "#event": "event", "#status": "status"},
            ExpressionAttributeValues=to_item(values),
            **condition,
        )

    def fail_unattempted(self, attempt: Attempt, reason: str) -> None:
        """A delivery given up without (another) attempt: ``FAILED`` with ``reason``,
        created with 0 attempts if it had no record, ``attempts`` as it was otherwise;
        the event kept for ``POST …/redeliver``; a redelivery mark goes."""
        self._write_record(
            attempt,
            f"{FAILURE_REASON} = :reason, created_at = if_not_exists(created_at, :at), "
            "expiration = if_not_exists(expiration, :expiration), attempts = if_not_exists(attempts, :zero) "
            f"REMOVE {REDELIVER_MARK}",
            {**_event_values(attempt, attempt.status), ":next": None, ":reason": reason},
        )

    def record_refusal(self, refusal: Refusal) -> None:
        """The audit writer's other write of a delivery record: an event the queue refused
        for good is ``FAILED`` with its :data:`FAILURE_REASON`, never attempted
        (``attempts`` as it was, 0 for a new record), its body stored when it fits so
        that ``POST …/redeliver`` can send it again; a redelivery mark goes. The
        role's policy names exactly the attributes of this write and of
        :meth:`record_queued` (template.yaml, ``DeliveryRecordsOnly``)."""
        stored = len(refusal.body.encode("utf-8", "surrogatepass")) <= MAX_STORED_EVENT_BYTES
        values: dict[str, Any] = {
            ":delivery_id": refusal.delivery_id,
            ":webhook_id": refusal.webhook_id,
            ":event_id": refusal.event_id,
            ":type": refusal.type,
            ":ticket_id": refusal.ticket_id,
            ":status": FAILED,
            ":reason": refusal.reason,
            ":none": None,
            ":at": refusal.at,
            ":expiration": refusal.expiration,
            ":zero": 0,
        }
        names = {"#type": "type", "#status": "status"}
        update = (
            "SET delivery_id = :delivery_id, webhook_id = :webhook_id, event_id = :event_id, #type = :type, "
            f"ticket_id = :ticket_id, #status = :status, {FAILURE_REASON} = :reason, next_attempt_at = :none, "
            "last_status_code = if_not_exists(last_status_code, :none), attempts = if_not_exists(attempts, :zero), "
            "created_at = if_not_exists(created_at, :at), expiration = if_not_exists(expiration, :expiration)"
        )
        if stored:
            update += ", #event = :body"
            names["#event"] = "event"
            values[":body"] = refusal.body
        self.table.call(
            "update_item",
            TableName=self.table.table_name,
            Key=keys.delivery_key(self.table.tenant_id, refusal.webhook_id, refusal.delivery_id),
            UpdateExpression=f"{update} REMOVE {REDELIVER_MARK}",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_item(values),
        )
