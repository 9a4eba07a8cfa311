"""The largest webhook event the API can cause fits every bound on its way, worst case computed.

The API bounds a ticket's text in characters (API.md: title 1-200, description 0-10,000;
a resolver is 1-128 ASCII characters); the bounds on the way are in bytes:

- SQS: a message and a ``SendMessageBatch`` of at most 1 MiB, counted in UTF-8 bytes
  (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html);
  the message is asserted under SQS's former 256 KiB too, so it does not depend on the queue's
  ``MaximumMessageSize`` being raised;
- DynamoDB: an item of at most 400 KB, the names' and the values' UTF-8 bytes
  (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html), for the
  delivery record (the event as sent) and a parked message (the queue message);
- Lambda: a synchronous invocation's payload of at most 6 MB
  (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html), for the delivery
  function's batch of 10 messages as the SQS event source hands it over.

Per character, the event's UTF-8 JSON (``event_body``, no ASCII escapes) costs at most 6 bytes
(a control character or U+FFFE/U+FFFF, written ``\\u00XX``; ``"`` and ``\\`` 2, CJK 3, an emoji 4);
in a JSON document with ASCII escapes (the worst Lambda's event can be) at most 12 (an emoji, a
surrogate pair of ``\\uXXXX``). An update's event holds the title and the description three times
(``data``, and the change's old and new)."""

from __future__ import annotations

import json
from typing import Any, Final

import pytest

from support_tickets.core import keys
from support_tickets.core.audit import AuditEvent
from support_tickets.webhooks import events
from support_tickets.webhooks.delivery_records import MAX_STORED_EVENT_BYTES
from support_tickets.webhooks.events import delivery_id, event_body, webhook_event
from support_tickets.webhooks.parking import ParkedMessage, released_entries

TENANT: Final = "t" * 63
TICKET: Final = "T" * 64
WEBHOOKS: Final = [f"{index}" + "w" * 63 for index in range(10)]  # the tenant's limit
SQS_FORMER_MAXIMUM: Final = 262_144
SQS_MAXIMUM: Final = 1_048_576  # a message, and a batch's messages together
DYNAMODB_ITEM_MAXIMUM: Final = 400 * 1024
LAMBDA_PAYLOAD_MAXIMUM: Final = 6 * 1024 * 1024
CLASSES: Final = {"control": "\x01", "sqs refused": "\ufffe", "emoji": "\U0001f600", "cjk": "\u4e2d", "quote": '"'}


def ticket_row(text: str, version: int, resolver: str) -> dict[str, Any]:
    return {
        "pk": keys.ticket_pk(TENANT, TICKET),
        "sk": keys.SUMMARY_SK,
        "tenant_status": keys.tenant_status(TENANT, "IN_PROGRESS" if version > 1 else "OPEN"),
        "resolver": resolver,
        "ticket_id": TICKET,
        "title": text * 200,
        "description": text * 10_000,
        "created_by": "u" * 128,
        "updated_by": "u" * 128,
        "created_at": "2026-11-21T10:00:00.000Z",
        "updated_at": "2026-11-21T10:00:00.000Z",
        "version": version,
    }


def largest_event(char: str) -> str:
    """The largest ``ticket.updated`` event's body: every text field at its limit, all changed."""
    audit: AuditEvent = {
        "event_id": "e" * 40,
        "ticket_id": TICKET,
        "type": "updated",
        "actor": "u" * 128,
        "at": "2026-11-21T10:00:00.000Z",
        "version": 2,
        "changes": [
            {"field": "title", "old": char * 200, "new": char * 200},
            {"field": "status", "old": "OPEN", "new": "IN_PROGRESS"},
            {"field": "resolver", "old": "a" * 128, "new": "b" * 128},
        ],
        "description_changed": True,
        "comment_id": None,
    }
    return event_body(webhook_event(TENANT, audit, ticket_row(char, 1, "a" * 128), ticket_row(char, 2, "b" * 128)))


def entries(body: str) -> list[dict[str, Any]]:
    """The fan-out's entries of one event for the tenant's 10 webhooks."""
    return [
        {
            "Id": str(index),
            "MessageBody": events.delivery_message(
                tenant_id=TENANT,
                webhook_id=webhook,
                delivery=delivery_id("2026-11-21T10:00:00.000Z", "e" * 40, webhook),
                ticket_id=TICKET,
                body=body,
                redelivery="2026-11-21T10:00:00.000Z",
            ),
            "MessageGroupId": events.message_group(TENANT, TICKET, webhook),
            "MessageDeduplicationId": delivery_id("2026-11-21T10:00:00.000Z", "e" * 40, webhook),
        }
        for index, webhook in enumerate(WEBHOOKS)
    ]


def item_bytes(item: dict[str, Any]) -> int:
    """DynamoDB's size of an item of strings and numbers (a number: at most 21 bytes)."""
    return sum(
        len(name.encode())
        + (21 if isinstance(value, int | float) else len(str(value).encode("utf-8", "surrogatepass")))
        for name, value in item.items()
    )


@pytest.mark.parametrize("char", CLASSES.values(), ids=CLASSES.keys())
def test_the_largest_event_fits_sqs_dynamodb_and_lambda(char: str) -> None:
    body = largest_event(char)
    size = len(body.encode("utf-8", "surrogatepass"))
    assert json.loads(body)["data"]["changes"][-1]["new"] == char * 10_000
    # At most 6 bytes a character, three times, plus the fixed fields
    assert size <= 6 * 3 * (10_000 + 200) + 4_000
    # The queue: the message as the fan-out sends it, and as the drain sends it back (its extra
    # routing), under 256 KiB; the 10 webhooks' messages in batches SQS takes, none left out
    queued = entries(body)
    (released,) = released_entries(
        [
            ParkedMessage(
                queued[0]["MessageDeduplicationId"],
                queued[0]["MessageBody"],
                queued[0]["MessageGroupId"],
                "d" * 64,
                1.8e9,
            )
        ],
        1.8e9,
    )
    largest = max(events.message_size(entry) for entry in [*queued, released])
    assert largest <= SQS_FORMER_MAXIMUM
    assert events.MAX_MESSAGE_BYTES <= SQS_MAXIMUM
    batches = events.batches(queued)
    assert [entry for batch in batches for entry in batch] == queued
    for batch in batches:
        assert len(batch) <= events.MAX_BATCH_ENTRIES
        assert sum(events.message_size(entry) for entry in batch) <= SQS_MAXIMUM
    # DynamoDB: the delivery record (every attribute any writer sets) and the parked message
    record = {
        "pk": keys.webhook_deliveries_pk(TENANT, WEBHOOKS[0]),
        "sk": "DELIVERY#" + "d" * 34,
        "delivery_id": "d" * 34,
        "webhook_id": WEBHOOKS[0],
        "event_id": "e" * 40,
        "type": "ticket.updated",
        "ticket_id": TICKET,
        "event": body,
        "status": "PENDING",
        "next_attempt_at": "2026-11-21T10:00:00.000Z",
        "last_status_code": 503,
        "last_attempt_at": "2026-11-21T10:00:00.000Z",
        "created_at": "2026-11-21T10:00:00.000Z",
        "expiration": 1_800_000_000,
        "attempts": 99,
        "failure_reason": "x" * 1_000,
        "redeliver_requested_at": "2026-11-21T10:00:00.000Z",
    }
    assert size <= MAX_STORED_EVENT_BYTES  # a refused event keeps its body too
    assert item_bytes(record) <= DYNAMODB_ITEM_MAXIMUM
    parked = {
        "pk": keys.webhook_parked_pk(TENANT, WEBHOOKS[0]),
        "sk": keys.PARKED_SK_PREFIX + "d" * 34,
        "message": queued[0]["MessageBody"],
        "group_id": queued[0]["MessageGroupId"],
        "deduplication_id": "d" * 64,
        "first_sent_at": 1.8e9,
        "parked_at": 1.8e9,
        "expiration": 1_800_000_000,
    }
    assert item_bytes(parked) <= DYNAMODB_ITEM_MAXIMUM
    # Lambda: a batch of 10 such messages as the event source hands them over, in JSON with ASCII
    # escapes (the worst its payload can be: an emoji 12 bytes), with each record's attributes
    records = [
        {
            "messageId": "m" * 36,
            "receiptHandle": "r" * 1_024,
            "body": entry["MessageBody"],
            "attributes": {"MessageGroupId": entry["MessageGroupId"], "MessageDeduplicationId": "d" * 128},
            "messageAttributes": {},
            "md5OfBody": "0" * 32,
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:" + "q" * 80,
            "awsRegion": "us-east-1",
        }
        for entry in [released] * 10
    ]
    assert len(json.dumps({"Records": records}, ensure_ascii=True).encode()) <= LAMBDA_PAYLOAD_MAXIMUM
