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
- The body holds the event as it will be sent (the same bytes on every
  attempt).

Which webhooks a tenant has comes from one Query of ``TENANT#<t>|WEBHOOKS``,
cached for :data:`SUBSCRIPTIONS_TTL_SECONDS` per container: a tenant without
webhooks costs one small Query per container and half minute, and nothing else.
A webhook registered less than that ago may miss the events of those seconds;
a deleted or disabled one receives nothing more, because the delivery function
reads the webhook again before every attempt.

Redeliveries: ``POST …/redeliver`` marks the delivery record; the stream
record of that change reaches this function (its FilterCriteria) and
:meth:`WebhookFanout.redeliver` sends the stored event again, with a new
deduplication id and the same event id.

A failed send raises: the stream record fails like any other and is retried
(its audit items are written once whatever happens, the messages deduplicated).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from support_tickets.core import keys
from support_tickets.core.audit import AuditEvent
from support_tickets.core.webhook_events import NotAnEvent, delivery_id, event_body, webhook_event, webhook_type
from support_tickets.data.delivery_records import REDELIVER_MARK, DeliveryRecords, Subscription
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.streams.audit_events import AuditRecord
from support_tickets.streams.audit_writer import audit_client
from support_tickets.streams.records import PoisonRecord, own_client

SUBSCRIPTIONS_TTL_SECONDS: Final = 30.0
MAX_CACHED_TENANTS: Final = 4096
MAX_GROUP_ID_LENGTH: Final = 128


def message_group(tenant_id: str, ticket_id: str, webhook_id: str) -> str:
    """``<tenant>#<ticket>#<webhook>``; past SQS's 128 characters, the ticket and
    webhook ids are digested (the tenant stays readable)."""
    group = f"{tenant_id}#{ticket_id}#{webhook_id}"
    if len(group) <= MAX_GROUP_ID_LENGTH:
        return group
    digest = hashlib.sha256(f"{ticket_id}\x1f{webhook_id}".encode()).hexdigest()[:40]
    return f"{tenant_id}#{digest}"


def message(
    *, tenant_id: str, webhook_id: str, delivery: str, ticket_id: str, body: str, redelivery: str | None = None
) -> str:
    """The message body the delivery function reads (:mod:`support_tickets.domain.webhook_delivery`)."""
    return json.dumps(
        {
            "tenant_id": tenant_id,
            "webhook_id": webhook_id,
            "delivery_id": delivery,
            "ticket_id": ticket_id,
            "event": body,
            "redelivery": redelivery,
        },
        separators=(",", ":"),
    )


@dataclass
class WebhookFanout:
    table_name: str
    client: Any  # DynamoDB, the audit writer's role
    sqs: Any
    queue_url: str
    ttl_seconds: float = SUBSCRIPTIONS_TTL_SECONDS
    clock: Callable[[], float] = time.monotonic
    _cache: OrderedDict[str, tuple[float, list[Subscription]]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def subscriptions(self, tenant_id: str) -> list[Subscription]:
        now = self.clock()
        with self._lock:
            cached = self._cache.get(tenant_id)
            if cached is not None and now - cached[0] < self.ttl_seconds:
                return cached[1]
        found = DeliveryRecords(TenantTable(tenant_id, self.table_name, OwnClient(self.client))).subscriptions()
        with self._lock:
            self._cache[tenant_id] = (now, found)
            self._cache.move_to_end(tenant_id)
            while len(self._cache) > MAX_CACHED_TENANTS:
                self._cache.popitem(last=False)
        return found

    def publish(
        self,
        tenant_id: str,
        audit: AuditEvent,
        old_image: Mapping[str, Any] | None,
        new_image: Mapping[str, Any] | None,
    ) -> int:
        """Send ``audit``'s event to each webhook of the tenant subscribed to it; how many messages."""
        kind = webhook_type(audit["type"])
        targets = [sub.webhook_id for sub in self.subscriptions(tenant_id) if kind in sub.events]
        if not targets:
            return 0
        body = event_body(webhook_event(tenant_id, audit, old_image, new_image))
        entries = []
        for index, webhook_id in enumerate(targets):
            delivery = delivery_id(audit["at"], audit["event_id"], webhook_id)
            entries.append(
                {
                    "Id": str(index),
                    "MessageBody": message(
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
        self._send(entries)
        return len(entries)

    def redeliver(self, pk: str, new_image: Mapping[str, Any] | None) -> int:
        """Send a delivery record's stored event again (the record was just marked for it)."""
        owner = keys.deliveries_owner(pk)
        image = new_image or {}
        requested_at, body, ticket_id = image.get(REDELIVER_MARK), image.get("event"), image.get("ticket_id")
        delivery = image.get("delivery_id")
        if owner is None or not all(isinstance(value, str) for value in (requested_at, body, ticket_id, delivery)):
            raise PoisonRecord("not a delivery record marked for redelivery")
        tenant_id, webhook_id = owner
        try:
            event = json.loads(str(body))
        except ValueError as exc:
            raise PoisonRecord("a delivery record whose event is not JSON") from exc
        if not isinstance(event, dict) or event.get("tenant_id") != tenant_id:
            raise PoisonRecord("security: a delivery record whose event names another tenant")
        stamp = "".join(char for char in str(requested_at) if char.isascii() and char.isalnum())[:40]
        self._send(
            [
                {
                    "Id": "0",
                    "MessageBody": message(
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
        return 1

    def _send(self, entries: list[dict[str, Any]]) -> None:
        # At most 10 webhooks per tenant: one SendMessageBatch call.
        response = self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
        failed = response.get("Failed") or []
        if failed:
            raise WebhookQueueError(f"{len(failed)} of {len(entries)} webhook messages were not queued")


class WebhookQueueError(RuntimeError):
    """Some messages of an event were not queued: the record fails and is retried."""


def is_delivery_record(keys_image: Mapping[str, Any]) -> bool:
    """A delivery record's change (only a redelivery mark passes the FilterCriteria)."""
    sk = keys_image.get("sk")
    return isinstance(sk, str) and sk.startswith(keys.DELIVERY_SK_PREFIX)


def publish_record(
    audited: AuditRecord, old_image: Mapping[str, Any] | None, new_image: Mapping[str, Any] | None
) -> int:
    """The webhook messages of one audited stream record (0 for a record without an event)."""
    if audited.event is None or audited.tenant_id is None:
        return 0
    try:
        return webhook_fanout().publish(audited.tenant_id, audited.event, old_image, new_image)
    except NotAnEvent as exc:
        raise PoisonRecord(f"images that make no webhook event: {exc}") from exc


@cache
def webhook_fanout() -> WebhookFanout:
    """The container's fanout (the audit writer's role; WEBHOOK_EVENTS_QUEUE_URL is required:
    a function without it fails its records rather than drop events)."""
    return WebhookFanout(
        table_name=os.environ["TABLE_NAME"],
        client=audit_client(),
        sqs=own_client("sqs"),
        queue_url=os.environ["WEBHOOK_EVENTS_QUEUE_URL"],
    )
