"""Parking a failing webhook's messages out of the queue (docs/webhooks.md, "Parking").

Why: a message the delivery function hands back to the queue to try later
(its visibility changed, reported failed) stays one of the queue's messages
*in flight* until it is received again, and an SQS FIFO queue has at most
120,000 of those (past that, receives answer nothing: every tenant's
deliveries wait). A webhook whose endpoint fails or hangs under a steady flow
of events would otherwise keep one in flight per ticket with events, for the
whole 26 h retry window. Bounds (one webhook's messages in flight, whatever
its events and its endpoint do):

- **Retry slots**: a message handed back holds one of its webhook's
  :data:`RETRY_SLOTS` slots until it is due back (plus a margin); a single
  failing ticket holds one, and nothing else of the webhook waits for it.
- **Parking**: a message that finds every slot held is taken out of the queue
  into its webhook's lot (DynamoDB, :mod:`support_tickets.webhooks.parking`), and
  from then on, while the lot holds anything, so is every new message of that
  webhook (not attempted: the lot is in events' order, and a ticket's events
  must go out in order). The delivery is shown ``PENDING``.
- **The drain**: one message per webhook with a lot, its *token*, comes back
  from the queue on the drain's schedule: the lot's oldest messages are sent
  back to the queue (:func:`release_size` at a time: what the tenant's tier
  lets it start until the next release; marked *released*: they are attempted
  even while the lot still holds others), every
  :data:`RELEASE_INTERVAL_SECONDS` while attempts succeed, and after a
  wait that doubles from :data:`FIRST_COOLDOWN_SECONDS` to
  :data:`MAX_COOLDOWN_SECONDS` while none does. A parked message whose retry
  window has passed is ``FAILED`` (redeliverable), not sent back.

So a webhook has at most :data:`RETRY_SLOTS` messages waiting in flight, plus
the attempts under way (its tenant's bound) and one release. Order per ticket
holds: a released message goes to the back of its group, behind nothing of its
ticket (everything newer of the webhook was parked behind it); a message the
fan-out queued before a release and that is received only once the lot is
empty may be newer than a released one of its ticket, so it is sent to the back
of its group again (:meth:`Deliverer.deliver`), not attempted ahead of it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Final

from support_tickets.webhooks.events import queue_message, read_queue_message
from support_tickets.webhooks.fanout import MAX_GROUP_ID_LENGTH, batches
from support_tickets.webhooks.parking import MAX_RELEASE, ParkedMessage

# A webhook's messages that may wait in the queue at once (SQS FIFO: 120,000 in flight for
# the whole queue, shared by every tenant).
RETRY_SLOTS: Final = 100
# A slot is held until the message is due back plus this (it is then received and takes it again).
SLOT_MARGIN_SECONDS: Final = 120.0
FIRST_COOLDOWN_SECONDS: Final = 30.0
MAX_COOLDOWN_SECONDS: Final = 1800.0
# Between releases while attempts succeed; each sends back what the tenant's tier lets it start
# in that time (its deliveries a second), so the lot drains at the tier's rate.
RELEASE_INTERVAL_SECONDS: Final = 2.0
# The most one release sends back (a tenant of no tier bound, or of a very high one).
MAX_RELEASED: Final = 10 * MAX_RELEASE
# A token not seen for this long is taken for lost (a new one is sent by the next park).
TOKEN_STALE_SECONDS: Final = MAX_COOLDOWN_SECONDS + 600.0
PARKED_TOO_LONG: Final = "its retry window passed while its webhook's deliveries were parked"


def release_size(rate: int | None) -> int:
    """How many parked messages a release sends back, for a tenant that may start
    ``rate`` deliveries a second (``None``: unbounded): what it may start until the next."""
    if rate is None:
        return MAX_RELEASED
    return max(1, min(MAX_RELEASED, math.ceil(rate * RELEASE_INTERVAL_SECONDS)))


def next_cooldown(previous: float, *, succeeded: bool) -> float:
    """The wait before the next release: short while attempts succeed, doubling while none does."""
    if succeeded:
        return RELEASE_INTERVAL_SECONDS
    if previous < FIRST_COOLDOWN_SECONDS:
        return FIRST_COOLDOWN_SECONDS
    return min(previous * 2, MAX_COOLDOWN_SECONDS)


@dataclass(frozen=True, slots=True)
class DrainToken:
    """The message that brings a webhook's drain back: ``{"drain": <webhook id>, "tenant_id", "token"}``."""

    tenant_id: str
    webhook_id: str
    generation: int

    def body(self) -> str:
        return json.dumps({"drain": self.webhook_id, "tenant_id": self.tenant_id, "token": self.generation})

    @classmethod
    def parse(cls, raw: str) -> DrainToken | None:
        """The token ``raw`` is, or ``None`` when it is not one (a delivery's message)."""
        if not raw.startswith('{"drain"'):
            return None
        try:
            parsed = json.loads(raw)
            token = cls(str(parsed["tenant_id"]), str(parsed["drain"]), int(parsed["token"]))
        except (ValueError, KeyError, TypeError):
            return None
        return token

    def group_id(self) -> str:
        """Its own message group: a token never waits behind a ticket's messages, nor they behind it."""
        group = f"{self.tenant_id}#drain#{self.webhook_id}"
        if len(group) <= MAX_GROUP_ID_LENGTH:
            return group
        return f"{self.tenant_id}#drain#{hashlib.sha256(self.webhook_id.encode()).hexdigest()[:40]}"

    def deduplication_id(self) -> str:
        return hashlib.sha256(
            f"drain\x1f{self.tenant_id}\x1f{self.webhook_id}\x1f{self.generation}".encode()
        ).hexdigest()

    def entry(self) -> dict[str, Any]:
        return {
            "MessageBody": self.body(),
            "MessageGroupId": self.group_id(),
            "MessageDeduplicationId": self.deduplication_id(),
        }


def released_entries(parked: list[ParkedMessage], released_at: float) -> list[dict[str, Any]]:
    """``SendMessageBatch`` entries for parked messages sent back: each marked released,
    with when the fan-out first sent it (its retry window's start), in its own group,
    under a new deduplication id (SQS drops a repeated one for 5 minutes)."""
    entries = []
    for index, message in enumerate(parked):
        body, _event, routing = read_queue_message(message.message)
        routing = {**routing, "released": True, "released_at": released_at, "first_sent_at": message.first_sent_at}
        deduplication = hashlib.sha256(f"{message.deduplication_id}\x1frelease\x1f{released_at}".encode()).hexdigest()
        entries.append(
            {
                "Id": str(index),
                "MessageBody": queue_message(body, routing),
                "MessageGroupId": message.group_id,
                "MessageDeduplicationId": deduplication,
            }
        )
    return entries


__all__ = [
    "FIRST_COOLDOWN_SECONDS",
    "MAX_COOLDOWN_SECONDS",
    "PARKED_TOO_LONG",
    "RELEASE_INTERVAL_SECONDS",
    "RETRY_SLOTS",
    "SLOT_MARGIN_SECONDS",
    "TOKEN_STALE_SECONDS",
    "DrainToken",
    "batches",
    "next_cooldown",
    "release_size",
    "released_entries",
]
