"""Webhook events and their delivery, as pure functions (docs/webhooks.md).

- :func:`webhook_event`: the event a tenant's endpoints receive for an audit
  event (API.md's ``{"id", "type", "timestamp", "tenant_id", "data"}``),
  built from the stream record's images. Its id is the audit event's id (the
  stream record's), so a redelivered record makes the same event.
- :func:`event_body`, :func:`queue_message` and :func:`delivery_message`: the
  event's bytes and the webhook queue's messages, with :func:`message_group`
  and :func:`batches` (SQS's bounds);
- :func:`delivery_id`: one per (event, webhook), the same on every retry of
  that pair, sorting by the event's time.
- :func:`retry_delay`: exponential backoff with jitter.
- :func:`signature_header`: Standard Webhooks' ``webhook-signature``, one
  ``v1,<sig>`` per valid secret (the maintained ``standardwebhooks`` package
  signs).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, Final, Literal

from standardwebhooks.webhooks import Webhook as StandardWebhook

from support_tickets.core.audit import AuditEvent

# A webhook's status: ACTIVE receives events; DISABLED (a receiver's 410) does not.
ACTIVE: Final = "ACTIVE"
DISABLED: Final = "DISABLED"

WebhookEventType = Literal["ticket.created", "ticket.updated", "ticket.deleted", "comment.added"]
EVENT_TYPES: Final[tuple[WebhookEventType, ...]] = (
    "ticket.created",
    "ticket.updated",
    "ticket.deleted",
    "comment.added",
)
_OF_AUDIT: Final[dict[str, WebhookEventType]] = {
    "created": "ticket.created",
    "updated": "ticket.updated",
    "deleted": "ticket.deleted",
    "comment_added": "comment.added",
}

# Backoff: min(5 s x 2^n, 6 h) ± 20 %, never more than SQS's 12 h of visibility,
# for at least 24 h: the attempt that finds 26 h gone since the first one is the last.
BASE_DELAY_SECONDS: Final = 5
MAX_DELAY_SECONDS: Final = 6 * 3600
JITTER: Final = 0.2
MAX_VISIBILITY_SECONDS: Final = 12 * 3600
RETRY_WINDOW_SECONDS: Final = 26 * 3600


class NotAnEvent(ValueError):
    """A stream record whose images do not make the event its audit event names."""


def webhook_type(audit_type: str) -> WebhookEventType:
    return _OF_AUDIT[audit_type]


def webhook_event(
    tenant_id: str,
    audit: AuditEvent,
    old_image: Mapping[str, Any] | None,
    new_image: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The event of ``audit`` (a record's audit event) with the ticket or comment as ``data``.

    ``data`` is the ticket as ``GET /tickets/{id}/summary`` shows it (the
    deleted ticket as it was), or the comment with its ``ticket_id``; an
    update carries ``changes`` (title, status and resolver as the audit trail
    records them, and the description, which the trail notes without copying:
    the receiver is the tenant's own, and ``data`` holds the new one anyway).
    """
    # Imported here: the audit-trail function loads the item models only for a
    # tenant with webhooks (its cold start stays without them, tests/functional/test_cold_imports.py).
    from support_tickets.core.models import CommentItem, TicketItem

    kind = webhook_type(audit["type"])
    try:
        if kind == "comment.added":
            comment = CommentItem.from_row(new_image or {}).comment()
            data: dict[str, Any] = {**asdict(comment), "ticket_id": audit["ticket_id"]}
        else:
            image = old_image if kind == "ticket.deleted" else new_image
            data = asdict(TicketItem.from_row(image or {}).ticket())
    except (ValueError, TypeError) as exc:
        raise NotAnEvent(str(exc)) from exc
    data = {name: (str(value) if name == "status" else value) for name, value in data.items()}
    if kind == "ticket.updated":
        changes: list[dict[str, Any]] = [dict(change) for change in audit["changes"]]
        if audit["description_changed"]:
            old, new = (old_image or {}).get("description", ""), (new_image or {}).get("description", "")
            changes.append({"field": "description", "old": old, "new": new})
        data["changes"] = changes
    return {"id": audit["event_id"], "type": kind, "timestamp": audit["at"], "tenant_id": tenant_id, "data": data}


def event_body(event: Mapping[str, Any]) -> str:
    """The bytes every attempt of an event sends (stored with the delivery, so a
    redelivery sends the same body): compact JSON in UTF-8, no ASCII escapes (an
    emoji is its 4 bytes, not a 12-byte surrogate pair), except for the characters
    SQS refuses in a message (:data:`SQS_REFUSED`, which JSON would otherwise let
    through unescaped): those become ``\\uXXXX`` escapes, valid JSON of the same
    meaning, so the event can always be queued."""
    text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return SQS_REFUSED.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


# What SQS refuses in a message and json.dumps(ensure_ascii=False) leaves as it is
# (it escapes the control characters itself): lone surrogates, U+FFFE and U+FFFF. SQS
# takes only #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF
# (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html).
SQS_REFUSED: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_QUEUE_MESSAGE_HEAD: Final = re.compile(r'\{\s*"event"\s*:\s*')
_MEMBER_SEPARATOR: Final = re.compile(r"\s*,")
_DECODER: Final = json.JSONDecoder()


def queue_message(body: str, routing: Mapping[str, str | None]) -> str:
    """A webhook queue message: one JSON object whose first member is the event
    itself, its bytes exactly ``body`` (never encoded again), then the routing
    fields (tenant, webhook, delivery, ticket, redelivery). Its size is the event's
    plus about 200 bytes."""
    return '{"event":' + body + "," + json.dumps(dict(routing), separators=(",", ":"), ensure_ascii=False)[1:]


def read_queue_message(raw: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(body, event, routing)`` of a :func:`queue_message`: ``body`` is the event's
    bytes as queued (what is signed and sent), ``event`` their parse. ``ValueError``
    for anything else (another shape, a second ``event`` member)."""
    head = _QUEUE_MESSAGE_HEAD.match(raw)
    if head is None:
        raise ValueError("not a webhook queue message")
    event, end = _DECODER.raw_decode(raw, head.end())
    separator = _MEMBER_SEPARATOR.match(raw, end)
    if separator is None:
        raise ValueError("not a webhook queue message")
    routing = json.loads("{" + raw[separator.end() :])
    if not isinstance(event, dict) or not isinstance(routing, dict) or "event" in routing:
        raise ValueError("not a webhook queue message")
    return raw[head.end() : end], event, routing


# SQS's bounds (support_tickets.webhooks.fanout's docstring, "Sizes"): a message group id,
# a message, a batch's messages added up, a batch's entries.
MAX_GROUP_ID_LENGTH: Final = 128
MAX_MESSAGE_BYTES: Final = 1_048_576
MAX_BATCH_BYTES: Final = 1_048_576
MAX_BATCH_ENTRIES: Final = 10


def delivery_message(
    *, tenant_id: str, webhook_id: str, delivery: str, ticket_id: str, body: str, redelivery: str | None = None
) -> str:
    """The queue message of one delivery, as the delivery function reads it
    (:class:`~support_tickets.webhooks.delivery.DeliveryMessage`)."""
    routing = {
        "tenant_id": tenant_id,
        "webhook_id": webhook_id,
        "delivery_id": delivery,
        "ticket_id": ticket_id,
        "redelivery": redelivery,
    }
    return queue_message(body, routing)


def message_group(tenant_id: str, ticket_id: str, webhook_id: str) -> str:
    """``<tenant>#<ticket>#<webhook>``; past SQS's 128 characters, the ticket and
    webhook ids are digested (the tenant stays readable)."""
    group = f"{tenant_id}#{ticket_id}#{webhook_id}"
    if len(group) <= MAX_GROUP_ID_LENGTH:
        return group
    digest = hashlib.sha256(f"{ticket_id}\x1f{webhook_id}".encode()).hexdigest()[:40]
    return f"{tenant_id}#{digest}"


def message_size(entry: Mapping[str, Any]) -> int:
    """An entry's size as SQS counts it: its body in UTF-8 (no message attributes)."""
    return len(str(entry["MessageBody"]).encode("utf-8", "surrogatepass"))


def batches(entries: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``entries`` in order, in batches of at most :data:`MAX_BATCH_ENTRIES` whose sizes add
    up to at most :data:`MAX_BATCH_BYTES` (an entry over it alone in its batch, for SQS to judge)."""
    found: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        entry_size = message_size(entry)
        if current and (len(current) == MAX_BATCH_ENTRIES or size + entry_size > MAX_BATCH_BYTES):
            found.append(current)
            current, size = [], 0
        current.append(entry)
        size += entry_size
    if current:
        found.append(current)
    return found


def delivery_id(event_time: str, event_id: str, webhook_id: str) -> str:
    """``<event time, ms, 13 digits>-<digest of event and webhook>``: ``[0-9A-Za-z_-]``,
    34 characters, time-ordered, the same for every attempt of (event, webhook)."""
    millis = int(datetime.fromisoformat(event_time).timestamp() * 1000)
    digest = hashlib.sha256(f"{event_id}\x1f{webhook_id}".encode()).digest()[:15]
    return f"{millis:013d}-{base64.urlsafe_b64encode(digest).decode()}"


def retry_delay(failed_attempts: int, uniform: Callable[[], float] = random.random) -> int:
    """Seconds before the next attempt after ``failed_attempts`` failures (1, 2, ...)."""
    base = min(BASE_DELAY_SECONDS * 2 ** max(failed_attempts - 1, 0), MAX_DELAY_SECONDS)
    jittered = base * (1 - JITTER + 2 * JITTER * uniform())
    return int(min(max(1, round(jittered)), MAX_VISIBILITY_SECONDS))


def signature_header(event_id: str, timestamp: int, body: str, secrets: Sequence[str]) -> str:
    """``webhook-signature``: ``v1,<base64 HMAC-SHA256>`` per secret, space-separated."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return " ".join(StandardWebhook(secret).sign(event_id, moment, body) for secret in secrets)


def webhook_headers(event_id: str, timestamp: int, body: str, secrets: Sequence[str]) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt."""
    return {
        "content-type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(event_id, timestamp, body, secrets),
    }
