"""What the webhook benchmarks share (bench/webhooks.py, bench/parking.py, and
bench/cold.py's delivery function): a webhook registered through the local
stack's API, and a new event as the fan-out queues it for a webhook (with the
delivery record the fan-out writes before it queues the message)."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from bench.stackproc import StackProcess
from support_tickets.data.audit_items import iso_time
from support_tickets.webhooks.delivery_records import Attempt
from support_tickets.webhooks.events import delivery_id, delivery_message, event_body, message_group
from support_tickets.webhooks.fanout import queued_record

DELIVERY = "DeliverWebhookFunction"
# The tier of the tenant whose endpoint hangs: the smallest bounds, the case.
HANGING_TIER = "basic"


def api(stack: StackProcess, method: str, path: str, token: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(  # noqa: S310 - the local stack's API on loopback
        f"{stack.state['api_url']}{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return int(response.status), json.loads(response.read() or b"null")


def register(stack: StackProcess, admin: Any, tenant: str, url: str) -> str:
    """A webhook of ``tenant`` (onboarded first by ``admin``: its record and API key) for ``ticket.created``."""
    admin.ensure(tenant)
    token = stack.token(tenant, f"root-{tenant}", admin=True)
    status, created = api(stack, "POST", "/webhooks", token, {"url": url, "events": ["ticket.created"]})
    if status != 201:
        raise RuntimeError(f"webhook not registered: {status} {created}")
    return str(created["webhook_id"])


@dataclass(frozen=True, slots=True)
class QueuedEvent:
    """One new event for a webhook as the fan-out hands it over
    (:meth:`WebhookFanout.publish <support_tickets.webhooks.fanout.WebhookFanout.publish>`)."""

    entry: dict[str, str]  # SendMessage's body, group and deduplication id
    # The delivery record the fan-out writes before it queues the message (DeliveryRecords.record_queued).
    record: Attempt


def queued_event(tenant: str, webhook_id: str, ticket_id: str) -> QueuedEvent:
    """One new ``ticket.created`` event of ``tenant``'s ticket ``ticket_id`` for
    ``webhook_id``: its queue entry, and its record's ``Attempt`` built as the fan-out
    builds it (:func:`~support_tickets.webhooks.fanout.queued_record`)."""
    now = time.time()
    at = iso_time(now)
    event_id = uuid.uuid4().hex
    event = {
        "id": event_id,
        "type": "ticket.created",
        "timestamp": at,
        "tenant_id": tenant,
        "data": {"ticket_id": ticket_id, "title": "Printer on fire", "status": "OPEN", "version": 1},
    }
    body = event_body(event)
    delivery = delivery_id(at, event_id, webhook_id)
    entry = {
        "MessageBody": delivery_message(
            tenant_id=tenant, webhook_id=webhook_id, delivery=delivery, ticket_id=ticket_id, body=body
        ),
        "MessageGroupId": message_group(tenant, ticket_id, webhook_id),
        "MessageDeduplicationId": delivery,
    }
    record = queued_record(
        delivery_id=delivery,
        webhook_id=webhook_id,
        event_id=event_id,
        kind=str(event["type"]),
        ticket_id=ticket_id,
        body=body,
        now=now,
    )
    return QueuedEvent(entry, record)


def queue_entry(tenant: str, webhook_id: str, ticket_id: str) -> dict[str, str]:
    """One new event of ``tenant``'s ticket ``ticket_id`` for ``webhook_id``, as the fan-out
    sends it to the queue (``SendMessage``'s body, group and deduplication id; no record
    written)."""
    return queued_event(tenant, webhook_id, ticket_id).entry


def lambda_record(entry: dict[str, str]) -> dict[str, Any]:
    """A Lambda SQS record of the queue entry ``entry``, received once."""
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": uuid.uuid4().hex,
        "body": entry["MessageBody"],
        "attributes": {
            "MessageGroupId": entry["MessageGroupId"],
            "MessageDeduplicationId": entry["MessageDeduplicationId"],
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(int(time.time() * 1000)),
        },
        "eventSource": "aws:sqs",
    }


def sqs_record(tenant: str, webhook_id: str, number: int) -> dict[str, Any]:
    """A Lambda SQS record of one new event for ``webhook_id`` (as the fan-out sends it; no record written)."""
    return lambda_record(queue_entry(tenant, webhook_id, f"T{number:06d}"))
