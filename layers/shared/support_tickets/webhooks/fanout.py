"""The audit writer's second job: a tenant's ticket events onto the webhook queue.

For each audit event (:mod:`support_tickets.streams.audit_events`) of a tenant
with ACTIVE webhooks subscribed to its type, one message **per (event,
webhook)** goes to the FIFO ``WebhookEventsQueue`` (docs/webhooks.md, "Delivery
pipeline"):

- ``MessageGroupId`` ``<tenant>#<ticket id>#<webhook id>``: one ticket's events
  reach one webhook in order; a webhook that fails holds back only its own
  group, never the tenant's other webhooks (nor, a fortiori, another tenant's).
- ``MessageDeduplicationId`` the delivery id (the event id and the webhook id
  digested): the stream's redelivery of a record is absorbed by SQS, and past
  its 5-minute window by the delivery function, which skips a delivery
  already ``DELIVERED``.
- The body is the event as it will be sent, byte for byte (the same bytes on
  every attempt, signed as they are), first member of one JSON object that
  also carries the routing fields (:func:`~support_tickets.webhooks.events.queue_message`):
  ``{"event":<event>,"tenant_id":…,"webhook_id":…,"delivery_id":…,"ticket_id":…,"redelivery":…}``.
  The event is UTF-8 JSON without ASCII escapes (an emoji costs its 4 bytes),
  never encoded a second time; only the characters SQS refuses are escaped
  (:func:`~support_tickets.webhooks.events.event_body`). A message is the
  event plus about 200 bytes.

Sizes (:func:`~support_tickets.webhooks.events.batches`): SQS takes a message
of up to 1,048,576 bytes (1 MiB) and a ``SendMessageBatch`` whose messages add
up to 1 MiB, counted in UTF-8 bytes of the body plus message attributes (none
here)
(https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html;
the maximum was 256 KiB until 2025, and the template sets the queues'
``MaximumMessageSize`` to 1 MiB rather than rely on a default). An event's
messages go in as few batches as fit both bounds and SQS's 10 entries. On the
reading side, Lambda's SQS event source hands the delivery function 1 MiB
messages and bounds a batch by its 6 MB invoke payload
(https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-parameters.html,
``BatchSize``), so every message the queue takes can be delivered. The API
bounds a ticket's description at 10,000 characters, so an event through the
API is at most ~130 KB (the description three times over in an update, 4
bytes a character): a delivery record's :data:`MAX_RECORDED_EVENT_BYTES` (DynamoDB's
400 KB item) bounds other writers of the table; an event over it is never
queued (below).

**The record before the message** (an outbox): each delivery's record is
written ``PENDING`` with 0 attempts, its event, ``created_at`` and expiration
(:meth:`DeliveryRecords.record_queued`), under the message's own tenant, in
the table its stream record came from, **before** its message is sent; a
message is sent only once its record is stored. So no queued message exists
without a record: the deliveries list shows it (``PENDING``, 0 attempts), and
a cell move hands it over to the new cell (``ops.cell_move``) even if the old
cell's queue never handed it to its delivery function. The write is
conditional on ``attribute_not_exists(pk)``: a stream redelivery of the event
never resets a record already attempted, refused or marked (its message is
sent again all the same: the first send may have failed; SQS or the delivery
function absorbs a duplicate). Cost: one conditional ``UpdateItem`` per
(event, webhook), one write unit per KB of the record (the event plus ~600
bytes: 1 unit for most events, up to ~185 for the largest the API makes; a
redelivered event's failed condition costs the same), the usual tenant's 1-3
webhooks 1-3 writes an event, made one after the other before the batch is
sent; the delivery function's first attempt then updates the record as it
always did. An event larger than a record can hold is recorded ``FAILED``
without its body and never queued.

A message SQS refuses for good (over 1 MiB, a refused character: a sender's
fault in SQS's answer) is not retried: its delivery is recorded ``FAILED``
with a ``failure_reason`` (:meth:`DeliveryRecords.record_refusal`, the body
stored when it fits a record), visible in the deliveries list and
redeliverable. A transient failure (throttling, SQS unavailable, an entry
``Failed`` by SQS's fault) raises :class:`WebhookQueueError`: the stream record
fails and is retried, its deliveries' records left ``PENDING``.

Which webhooks a tenant has (:meth:`WebhookFanout.subscriptions`): once per
tenant and batch of stream records, one strongly consistent ``GetItem`` of the
tenant's webhook count item (``TENANT#<t>|WEBHOOKS``/``COUNT``), whose
``version`` every create and delete of a webhook moves in the transaction
that makes the change. The container keeps each tenant's webhooks with the
version they were read at: the same version, the same webhooks (no Query); a
count of 0 (or no count item), no webhooks and no Query; otherwise one
strongly consistent Query. A tenant without webhooks costs one small read
(1 read unit) per batch it appears in, and nothing else.

Why every change committed after a webhook's 201 reaches it: the 201 answers
after the create's transaction committed, version bump included. A stream
record exists only once its change has committed, so a change committed after
the 201 reaches this function after the bump; the version is read after the
batch arrived, strongly consistently, so it is the bump's or a later one, and
the webhooks read with it (cached at that version, or queried consistently
then) include the new webhook. Reading once per batch is enough for the same
reason: every record of the batch committed before the batch was handed over.
(The other idea, trusting the cache for records created well before it was
filled, needs the stream record's ``ApproximateCreationDateTime``, which
DynamoDB rounds down to the second, and a bound on the clocks' skew: it holds
no such proof.)

A deleted or disabled webhook receives nothing more, whatever is cached: the
delivery function reads the webhook again before every attempt. A disable (by
a receiver's 410) does not move the version; the cached webhooks are read again
after :data:`SUBSCRIPTIONS_TTL_SECONDS` anyway, so a disabled webhook stops
costing messages within that time.

Redeliveries: ``POST …/redeliver`` marks the delivery record; the stream
record of that change reaches this function (its FilterCriteria) and
:meth:`WebhookFanout.redeliver` sends the stored event again, with a new
deduplication id and the same event id.

A transient failure raises: the stream record fails like any other and is
retried (its audit items are written once whatever happens, the messages
deduplicated).

Tables (:mod:`support_tickets.streams.routing`): a tenant's webhooks are read
from the table of its placement now (a record of the table it left, handled
late, still reaches its webhooks after the move erased the old copy); the
cache is per table and tenant. A delivery's record (queued or refused) is
written into the table the stream record came from, beside its audit event (a
move's sync or trailing copy carries it with them).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from support_tickets.core import keys
from support_tickets.core.audit import AuditEvent
from support_tickets.data.audit_items import iso_time
from support_tickets.data.table import OwnClient, TenantTable, error_code
from support_tickets.streams.audit_events import AuditRecord
from support_tickets.streams.audit_writer import audit_client
from support_tickets.streams.records import PoisonRecord, own_client
from support_tickets.streams.routing import RecordRoute
from support_tickets.webhooks.delivery_records import (
    DELIVERY_RETENTION_SECONDS,
    FAILURE_REASON,
    MAX_RECORDED_EVENT_BYTES,
    PENDING,
    REDELIVER_MARK,
    Attempt,
    DeliveryRecords,
    Refusal,
    Subscription,
    pending_redelivery,
)
from support_tickets.webhooks.events import (
    MAX_MESSAGE_BYTES,
    NotAnEvent,
    batches,
    delivery_id,
    delivery_message,
    event_body,
    message_group,
    message_size,
    webhook_event,
    webhook_type,
)

# The function's Logger's child: JSON lines in its log group.
logger = Logger(child=True)

SUBSCRIPTIONS_TTL_SECONDS: Final = 30.0
MAX_CACHED_TENANTS: Final = 4096


@dataclass(frozen=True, slots=True)
class Refused:
    """An entry SQS refused for good, and why."""

    entry: dict[str, Any]
    reason: str


# SQS's answers that no retry changes: the request's or the entry's own fault.
PERMANENT_REFUSALS: Final = ("BatchRequestTooLong", "InvalidParameterValue", "InvalidMessageContents")


def _permanent(code: str) -> bool:
    # Through the JSON protocol SQS names some codes with a prefix (AWS.SimpleQueueService.…).
    return code.rsplit(".", 1)[-1] in PERMANENT_REFUSALS


@dataclass(frozen=True, slots=True)
class _Cached:
    version: int
    filled_at: float
    found: list[Subscription]
    checked_in: int  # the batch whose version read confirmed it


class _Batches:
    """Which batch of stream records the function is in (0: none started)."""

    current = 0


_BATCHES = _Batches()


@dataclass
class WebhookFanout:
    table_name: str
    client: Any  # DynamoDB, the audit writer's role
    sqs: Any
    queue_url: str
    ttl_seconds: float = SUBSCRIPTIONS_TTL_SECONDS
    clock: Callable[[], float] = time.monotonic
    # Epoch seconds: a queued delivery's created_at and expiration.
    now: Callable[[], float] = time.time
    _cache: OrderedDict[tuple[str, str], _Cached] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def subscriptions(self, tenant_id: str, table_name: str | None = None) -> list[Subscription]:
        """The tenant's ACTIVE webhooks in ``table_name`` (its placement's table; the
        pool table by default) as of a strongly consistent read made during this batch
        (module docstring): the cached ones if the version is unchanged."""
        now, batch = self.clock(), _BATCHES.current
        table = table_name or self.table_name
        cache_key = (table, tenant_id)
        with self._lock:
            cached = self._cache.get(cache_key)
        fresh = cached is not None and now - cached.filled_at < self.ttl_seconds
        if cached is not None and fresh and batch and cached.checked_in == batch:
            return cached.found
        records = DeliveryRecords(TenantTable(tenant_id, table, OwnClient(self.client)))
        current = records.webhooks_version()
        if current.count == 0:
            entry = _Cached(current.version, now, [], batch)
        elif cached is not None and fresh and cached.version == current.version:
            entry = _Cached(current.version, cached.filled_at, cached.found, batch)
        else:
            entry = _Cached(current.version, now, records.subscriptions(), batch)
        with self._lock:
            self._cache[cache_key] = entry
            self._cache.move_to_end(cache_key)
            while len(self._cache) > MAX_CACHED_TENANTS:
                self._cache.popitem(last=False)
        return entry.found

    def publish(
        self,
        tenant_id: str,
        audit: AuditEvent,
        old_image: Mapping[str, Any] | None,
        new_image: Mapping[str, Any] | None,
        route: RecordRoute | None = None,
    ) -> int:
        """Send ``audit``'s event to each webhook of the tenant subscribed to it; how many
        messages. ``route``: where its stream record belongs (the pool table by default)."""
        kind = webhook_type(audit["type"])
        current = route.current if route is not None else None
        targets = [sub.webhook_id for sub in self.subscriptions(tenant_id, current) if kind in sub.events]
        if not targets:
            return 0
        body = event_body(webhook_event(tenant_id, audit, old_image, new_image))
        source = route.source if route is not None else None
        entries = []
        for index, webhook_id in enumerate(targets):
            delivery = delivery_id(audit["at"], audit["event_id"], webhook_id)
            entries.append(
                {
                    "Id": str(index),
                    "MessageBody": delivery_message(
                        tenant_id=tenant_id,
                        webhook_id=webhook_id,
                        delivery=delivery,
                        ticket_id=audit["ticket_id"],
                        body=body,
                    ),
                    "MessageGroupId": message_group(tenant_id, audit["ticket_id"], webhook_id),
                    "MessageDeduplicationId": delivery,
                }
            )
        size = len(body.encode("utf-8", "surrogatepass"))
        if size > MAX_RECORDED_EVENT_BYTES:  # no record can hold it: never queued
            reason = f"EventTooLarge: {size} bytes, over a delivery record's {MAX_RECORDED_EVENT_BYTES}"
            refused = [Refused(entry, reason) for entry in entries]
        else:
            records = self._records(tenant_id, source)
            now = self.now()
            for entry, webhook_id in zip(entries, targets, strict=True):
                records.record_queued(
                    queued_record(
                        delivery_id=str(entry["MessageDeduplicationId"]),
                        webhook_id=webhook_id,
                        event_id=audit["event_id"],
                        kind=kind,
                        ticket_id=audit["ticket_id"],
                        body=body,
                        now=now,
                    )
                )
            refused = self._send(entries)
        for refusal in refused:
            webhook_id = targets[int(refusal.entry["Id"])]
            self._record_refusal(
                tenant_id,
                source,
                Refusal(
                    delivery_id=str(refusal.entry["MessageDeduplicationId"]),
                    webhook_id=webhook_id,
                    event_id=audit["event_id"],
                    type=kind,
                    ticket_id=audit["ticket_id"],
                    body=body,
                    reason=refusal.reason,
                    at=audit["at"],
                    expiration=int(time.time()) + DELIVERY_RETENTION_SECONDS,
                ),
            )
        return len(entries) - len(refused)

    def redeliver(self, pk: str, new_image: Mapping[str, Any] | None, route: RecordRoute | None = None) -> int:
        """Send a delivery record's stored event again (the record was just marked for it;
        ``route``: where its stream record belongs, the pool table by default)."""
        source = route.source if route is not None else None
        owner = keys.deliveries_owner(pk)
        image = new_image or {}
        requested_at = pending_redelivery(image.get(REDELIVER_MARK))
        body, ticket_id, delivery = image.get("event"), image.get("ticket_id"), image.get("delivery_id")
        # A mark the route did not write (tenant credentials may set it, nothing else of
        # the record) is poison, never a message: its value becomes part of one.
        if owner is None or not all(isinstance(value, str) for value in (requested_at, ticket_id, delivery)):
            raise PoisonRecord("not a delivery record marked for redelivery")
        tenant_id, webhook_id = owner
        if not isinstance(body, str):
            if image.get(FAILURE_REASON) is None:
                raise PoisonRecord("not a delivery record marked for redelivery")
            # A refused event too large to store: the redelivery fails as the delivery did.
            self._refuse_again(tenant_id, webhook_id, image, str(image[FAILURE_REASON]), source)
            return 0
        try:
            event = json.loads(str(body))
        except ValueError as exc:
            raise PoisonRecord("a delivery record whose event is not JSON") from exc
        if not isinstance(event, dict) or event.get("tenant_id") != tenant_id:
            raise PoisonRecord("security: a delivery record whose event names another tenant")
        stamp = "".join(char for char in str(requested_at) if char.isascii() and char.isalnum())[:40]
        refused = self._send(
            [
                {
                    "Id": "0",
                    "MessageBody": delivery_message(
                        tenant_id=tenant_id,
                        webhook_id=webhook_id,
                        delivery=str(delivery),
                        ticket_id=str(ticket_id),
                        body=str(body),
                        redelivery=str(requested_at),
                    ),
                    "MessageGroupId": message_group(tenant_id, str(ticket_id), webhook_id),
                    "MessageDeduplicationId": f"{delivery}.r{stamp}",
                }
            ]
        )
        for refusal in refused:
            self._refuse_again(tenant_id, webhook_id, image, refusal.reason, source)
        return 1 - len(refused)

    def _refuse_again(
        self, tenant_id: str, webhook_id: str, image: Mapping[str, Any], reason: str, table_name: str | None
    ) -> None:
        body = image.get("event")
        self._record_refusal(
            tenant_id,
            table_name,
            Refusal(
                delivery_id=str(image.get("delivery_id")),
                webhook_id=webhook_id,
                event_id=str(image.get("event_id") or ""),
                type=str(image.get("type") or ""),
                ticket_id=str(image.get("ticket_id")),
                body=body if isinstance(body, str) else "",
                reason=reason,
                at=str(image.get("created_at") or ""),
                expiration=int(time.time()) + DELIVERY_RETENTION_SECONDS,
            ),
        )

    def _record_refusal(self, tenant_id: str, table_name: str | None, refusal: Refusal) -> None:
        """``refusal`` recorded FAILED in ``table_name`` (its stream record's table; the pool's by default)."""
        logger.warning(
            "webhook event refused by the queue: recorded FAILED",
            extra={
                "tenant_id": tenant_id,
                "webhook_id": refusal.webhook_id,
                "delivery_id": refusal.delivery_id,
                "reason": refusal.reason,
            },
        )
        self._records(tenant_id, table_name).record_refusal(refusal)

    def _records(self, tenant_id: str, table_name: str | None) -> DeliveryRecords:
        """The tenant's delivery records in ``table_name`` (its stream record's table; the
        pool's by default), under its own prefix (``TenantTable`` refuses any other key)."""
        return DeliveryRecords(TenantTable(tenant_id, table_name or self.table_name, OwnClient(self.client)))

    def _send(self, entries: list[dict[str, Any]]) -> list[Refused]:
        """Queue ``entries`` in batches that SQS takes (``events.batches``); the entries it
        refused for good. Raises :class:`WebhookQueueError` when some could not be
        queued for now (after the refusals are known: the caller records them first
        only if nothing is transient; a retry of the record sees them again)."""
        refused: list[Refused] = []
        transient = 0
        sendable = []
        for entry in entries:
            size = message_size(entry)
            if size > MAX_MESSAGE_BYTES:
                refused.append(Refused(entry, f"MessageTooLong: {size} bytes, over SQS's {MAX_MESSAGE_BYTES}"))
            else:
                sendable.append(entry)
        pending = batches(sendable)
        while pending:
            batch = pending.pop(0)
            try:
                response = self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=batch)
            except ClientError as exc:
                code = error_code(exc)
                if not _permanent(code):
                    raise
                if len(batch) > 1:  # which entry? each on its own
                    pending[:0] = [[entry] for entry in batch]
                    continue
                refused.append(Refused(batch[0], f"{code}: {exc.response.get('Error', {}).get('Message', '')}"))
                continue
            by_id = {entry["Id"]: entry for entry in batch}
            for failure in response.get("Failed") or []:
                if failure.get("SenderFault") and _permanent(str(failure.get("Code", ""))):
                    reason = f"{failure.get('Code')}: {failure.get('Message', '')}"
                    refused.append(Refused(by_id[failure["Id"]], reason))
                else:
                    transient += 1
        if transient:
            raise WebhookQueueError(f"{transient} of {len(entries)} webhook messages were not queued")
        return refused


class WebhookQueueError(RuntimeError):
    """Some messages of an event were not queued: the record fails and is retried."""


def is_delivery_record(keys_image: Mapping[str, Any]) -> bool:
    """A delivery record's change (only a redelivery mark passes the FilterCriteria)."""
    sk = keys_image.get("sk")
    return isinstance(sk, str) and sk.startswith(keys.DELIVERY_SK_PREFIX)


def delivery_record_tenant(keys_image: Mapping[str, Any]) -> str:
    """The tenant of a delivery record's stream record (poison for a key of no webhook's deliveries)."""
    owner = keys.deliveries_owner(str(keys_image.get("pk")))
    if owner is None:
        raise PoisonRecord("not a delivery record marked for redelivery")
    return owner[0]


def publish_record(
    audited: AuditRecord,
    old_image: Mapping[str, Any] | None,
    new_image: Mapping[str, Any] | None,
    route: RecordRoute | None = None,
) -> int:
    """The webhook messages of one audited stream record (0 for a record without an event)."""
    if audited.event is None or audited.tenant_id is None:
        return 0
    try:
        return webhook_fanout().publish(audited.tenant_id, audited.event, old_image, new_image, route)
    except NotAnEvent as exc:
        raise PoisonRecord(f"images that make no webhook event: {exc}") from exc


def start_batch() -> None:
    """A new batch of stream records (the audit-trail function's handler calls it before
    any record): each tenant's webhook version is read again, once, before its cached
    webhooks are trusted. Outside a batch (none started) it is read for every event."""
    _BATCHES.current += 1


@cache
def webhook_fanout() -> WebhookFanout:
    """The container's fanout (the audit writer's role; WEBHOOK_EVENTS_QUEUE_URL is required:
    a function without it fails its records rather than drop events)."""
    return WebhookFanout(
        table_name=os.environ["TABLE_NAME"],  # the pool table; a record's route names the tenant's
        client=audit_client(),
        sqs=own_client("sqs"),
        queue_url=os.environ["WEBHOOK_EVENTS_QUEUE_URL"],
    )


def queued_record(
    *, delivery_id: str, webhook_id: str, event_id: str, kind: str, ticket_id: str, body: str, now: float
) -> Attempt:
    """The record the fan-out writes for a delivery before it queues its message
    (``PENDING``, no attempt yet, kept for the delivery retention)."""
    return Attempt(
        delivery_id=delivery_id,
        webhook_id=webhook_id,
        event_id=event_id,
        type=kind,
        ticket_id=ticket_id,
        body=body,
        status=PENDING,
        status_code=None,
        next_attempt_at=None,
        at=iso_time(now),
        expiration=int(now) + DELIVERY_RETENTION_SECONDS,
    )
