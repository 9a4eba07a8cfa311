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
  into its webhook's lot (DynamoDB: the partition below), and from then on,
  while the lot holds anything, so is every new message of that webhook (not
  attempted: the lot is in events' order, and a ticket's events must go out in
  order). The delivery is shown ``PENDING``.
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

The partition: all of it lives under ``TENANT#<t>|WEBHOOK#<w>#PARKED``
(:func:`support_tickets.core.keys.webhook_parked_pk`), in the tenant's table,
written only by the delivery function's role:

- ``SLOT#<n>`` (``n`` < the slots a webhook has): a *retry slot*. A message
  the function hands back to the queue to try later (a failed attempt, or one
  held by its tenant's bounds) holds one until it is due back plus a margin
  (``holder``: its delivery id, ``held_until``): a message in the queue waiting
  for its next attempt is one of SQS's messages *in flight*, and the slots are
  how many of those a webhook may have. A slot is free when never taken, given
  back, or expired (a crashed function holds nothing past ``held_until``), as
  the tenant's attempt leases are (:meth:`DeliveryRecords.take_lease`).
- ``PARKED#<delivery id>``: a message taken out of the queue (the queue message
  as received, its group and deduplication ids, when the fan-out first sent
  it), in its events' order (delivery ids sort by their event's time).
- ``RELEASED#<group digest>``: when messages of that message group were last
  sent back to the queue (``released_at``): a message of the group that the
  fan-out queued before then, received after, may be newer than one of them;
  and when one of them was last parked again (``reparked_at``): those sent back
  with it, behind it in the queue, must not go ahead of it.
- ``CIRCUIT``: ``parked`` (how many ``PARKED#`` items there are: each park and
  each release changes both in one transaction, so the count is exact),
  ``parked_bytes`` (their messages' UTF-8 bytes, kept the same way; the lot's
  cap, :data:`MAX_PARKED_MESSAGES` and :data:`MAX_PARKED_BYTES`, is a condition
  of the park's transaction on both),
  ``released_at`` (when parked messages were last sent back to the queue),
  ``last_success_at``, the drain's schedule (``next_release_at``,
  ``cooldown``) and its token's ``token`` generation and ``token_seen_at``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from botocore.exceptions import ClientError

from support_tickets.core import keys
from support_tickets.data.table import TenantTable, error_code, from_item, to_item
from support_tickets.webhooks.events import MAX_GROUP_ID_LENGTH, queue_message, read_queue_message
from support_tickets.webhooks.slots import ExpiringSlots

SLOT_SK_PREFIX: Final = "SLOT#"
RELEASED_SK_PREFIX: Final = "RELEASED#"
# DynamoDB's TransactWriteItems takes 100 actions: a release deletes up to 49 messages, marks
# their groups (49 at most) and counts them out (1).
MAX_RELEASE: Final = 49
# The parking partition's items expire with the deliveries they stand for.
EXPIRATION_SECONDS: Final = 30 * 86_400
# The most one webhook's lot holds (docs/webhooks.md, "The lot's cap"): past either, a message
# is not parked (:class:`LotFull`) and its delivery is FAILED, redeliverable.
MAX_PARKED_MESSAGES: Final = 10_000
MAX_PARKED_BYTES: Final = 100 * 1024 * 1024
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


class LotFull(Exception):
    """The webhook's lot is at its cap: the message was not parked."""


@dataclass(frozen=True, slots=True)
class Circuit:
    """A webhook's ``CIRCUIT`` item (zeros when it has none)."""

    parked: int = 0
    released_at: float = 0.0
    last_success_at: float = 0.0
    next_release_at: float = 0.0
    cooldown: float = 0.0
    token: int = 0
    token_active: bool = False
    token_seen_at: float = 0.0


@dataclass(frozen=True, slots=True)
class ParkedMessage:
    """A message taken out of the queue, to be sent back to it as it was."""

    delivery_id: str
    message: str
    group_id: str
    deduplication_id: str
    first_sent_at: float

    @property
    def size(self) -> int:
        """The message's UTF-8 bytes (what the lot's byte cap counts)."""
        return len(self.message.encode("utf-8", "surrogatepass"))


def _seconds(value: float) -> Decimal:
    """Epoch seconds to the millisecond, as DynamoDB numbers are written (no floats)."""
    return Decimal(str(round(value, 3)))


def _number(row: dict[str, Any], name: str) -> float:
    value = row.get(name)
    return float(value) if value is not None else 0.0


@dataclass(frozen=True, slots=True)
class WebhookParking:
    """One webhook's parking partition in its tenant's table."""

    table: TenantTable
    webhook_id: str

    @property
    def _pk(self) -> str:
        return keys.webhook_parked_pk(self.table.tenant_id, self.webhook_id)

    def _circuit_key(self) -> dict[str, Any]:
        return keys.webhook_circuit_key(self.table.tenant_id, self.webhook_id)

    # ------------------------------------------------------------ the circuit
    def circuit(self) -> Circuit:
        """The circuit item, read strongly consistently."""
        response = self.table.call(
            "get_item", TableName=self.table.table_name, Key=self._circuit_key(), ConsistentRead=True
        )
        row = from_item(response.get("Item") or {})
        return Circuit(
            parked=int(_number(row, "parked")),
            released_at=_number(row, "released_at"),
            last_success_at=_number(row, "last_success_at"),
            next_release_at=_number(row, "next_release_at"),
            cooldown=_number(row, "cooldown"),
            token=int(_number(row, "token")),
            token_active=row.get("token_active") is True,
            token_seen_at=_number(row, "token_seen_at"),
        )

    def note_success(self, now: float) -> None:
        """An attempt of this webhook succeeded (the drain's sign that the endpoint is back)."""
        self._update("SET last_success_at = :now, expiration = :expiration", now=now)

    def schedule(self, *, next_release_at: float, cooldown: float, now: float) -> None:
        """The drain's next release, and that its token was seen now."""
        self._update(
            "SET next_release_at = :next, cooldown = :cooldown, token_seen_at = :now, expiration = :expiration",
            now=now,
            values={":next": _seconds(next_release_at), ":cooldown": _seconds(cooldown)},
        )

    def new_token(self, seen: int, now: float) -> bool:
        """Move the token's generation from ``seen`` to ``seen + 1`` (one writer wins:
        the caller that did sends the new token)."""
        return self._update(
            "SET #token = :next, token_active = :true, token_seen_at = :now, expiration = :expiration",
            now=now,
            condition="attribute_not_exists(#token) OR #token = :seen",
            values={":next": seen + 1, ":seen": seen, ":true": True},
            names={"#token": "token"},
        )

    def end_token(self, generation: int, now: float) -> bool:
        """The token of ``generation`` ends its drain: only while the lot is empty (a park
        meanwhile keeps it going); ``False`` when the lot is not empty or the token is not current."""
        return self._update(
            "SET token_active = :false, token_seen_at = :now, expiration = :expiration",
            now=now,
            condition="#token = :generation AND (attribute_not_exists(parked) OR parked <= :zero)",
            values={":false": False, ":generation": generation, ":zero": 0},
            names={"#token": "token"},
        )

    def recount(self, seen: int, now: float) -> bool:
        """The count set to 0 when it says ``seen`` and the lot was found empty (its items
        can expire by TTL, 30 days after their event, without a drain to count them out);
        ``False`` when a park changed it meanwhile."""
        return self._update(
            "SET parked = :zero, parked_bytes = :zero, recounted_at = :now, expiration = :expiration",
            now=now,
            condition="parked = :seen",
            values={":zero": 0, ":seen": seen},
        )

    def group_marks(self, group_id: str) -> tuple[float, float]:
        """When messages of ``group_id`` were last sent back to the queue, and when one of
        them was last parked again (0: never), read consistently."""
        response = self.table.call(
            "get_item",
            TableName=self.table.table_name,
            Key={"pk": {"S": self._pk}, "sk": {"S": _released_sk(group_id)}},
            ProjectionExpression="released_at, reparked_at",
            ConsistentRead=True,
        )
        row = from_item(response.get("Item") or {})
        return _number(row, "released_at"), _number(row, "reparked_at")

    def _update(
        self,
        expression: str,
        *,
        now: float,
        condition: str | None = None,
        values: dict[str, Any] | None = None,
        names: dict[str, str] | None = None,
    ) -> bool:
        """The circuit item updated; ``False`` when ``condition`` did not hold."""
        request: dict[str, Any] = {
            "TableName": self.table.table_name,
            "Key": self._circuit_key(),
            "UpdateExpression": expression,
            "ExpressionAttributeValues": to_item(
                {":now": _seconds(now), ":expiration": int(now) + EXPIRATION_SECONDS, **(values or {})}
            ),
        }
        if condition is not None:
            request["ConditionExpression"] = condition
        if names:
            request["ExpressionAttributeNames"] = names
        return self.table.call_if("update_item", **request)

    # ------------------------------------------------------------ retry slots
    def take_slot(self, slots: int, holder: str, now: float, until: float) -> bool:
        """One of the webhook's ``slots`` retry slots for ``holder`` (a delivery id)
        until ``until``: the one it holds already (renewed), else a free one;
        ``False`` when every one is held by another. A message handed back again
        renews its slot with one conditional ``UpdateItem`` where it found its first
        (:class:`ExpiringSlots`, ``direct``); otherwise one consistent Query of the
        slots, then a conditional ``UpdateItem``."""
        return self._slots(slots).take(holder, now, until, renew=True, direct=True) is not None

    def give_back_slot(self, holder: str, slots: int) -> None:
        """Free the slot ``holder`` holds, if it holds one: one conditional ``UpdateItem``
        where it took its first, else one consistent Query of the slots to find it."""
        self._slots(slots).give_back(holder)

    def _slots(self, slots: int) -> ExpiringSlots:
        return ExpiringSlots(self.table, self._pk, SLOT_SK_PREFIX, slots)

    # ------------------------------------------------------------ the lot
    def park(
        self,
        parked: ParkedMessage,
        now: float,
        *,
        released: bool = False,
        max_messages: int = MAX_PARKED_MESSAGES,
        max_bytes: int = MAX_PARKED_BYTES,
    ) -> bool:
        """Put ``parked`` in the lot and count it (and its bytes), in one transaction;
        ``False`` when the lot has it already (a message received again after it was
        parked); :class:`LotFull` when the lot holds ``max_messages`` already or has no
        room for its bytes under ``max_bytes`` (nothing written).
        ``released``: a message the drain sent back, parked again: its group is marked
        (``reparked_at``) in the same transaction, before the message leaves the queue,
        so that the group's messages sent back with it, behind it in the queue, go
        behind it again rather than ahead."""
        if parked.size > max_bytes or max_messages <= 0:
            raise LotFull(f"{parked.size} bytes; the lot holds at most {max_bytes} bytes")
        item = {
            **keys.parked_key(self.table.tenant_id, self.webhook_id, parked.delivery_id),
            **to_item(
                {
                    "message": parked.message,
                    "group_id": parked.group_id,
                    "deduplication_id": parked.deduplication_id,
                    "first_sent_at": _seconds(parked.first_sent_at),
                    "parked_at": _seconds(now),
                    "expiration": int(parked.first_sent_at) + EXPIRATION_SECONDS,
                }
            ),
        }
        try:
            self.table.call(
                "transact_write_items",
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table.table_name,
                            "Item": item,
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table.table_name,
                            "Key": self._circuit_key(),
                            "UpdateExpression": "ADD parked :one, parked_bytes :size SET expiration = :expiration",
                            "ConditionExpression": (
                                "(attribute_not_exists(parked) OR parked < :max_messages) "
                                "AND (attribute_not_exists(parked_bytes) OR parked_bytes <= :room)"
                            ),
                            "ExpressionAttributeValues": to_item(
                                {
                                    ":one": 1,
                                    ":size": parked.size,
                                    ":max_messages": max_messages,
                                    ":room": max_bytes - parked.size,
                                    ":expiration": int(now) + EXPIRATION_SECONDS,
                                }
                            ),
                        }
                    },
                    *(
                        [
                            {
                                "Update": {
                                    "TableName": self.table.table_name,
                                    "Key": {"pk": {"S": self._pk}, "sk": {"S": _released_sk(parked.group_id)}},
                                    "UpdateExpression": "SET reparked_at = :now, expiration = :expiration",
                                    "ExpressionAttributeValues": to_item(
                                        {":now": _seconds(now), ":expiration": int(now) + EXPIRATION_SECONDS}
                                    ),
                                }
                            }
                        ]
                        if released
                        else []
                    ),
                ],
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                return False
            if len(reasons) > 1 and reasons[1].get("Code") == "ConditionalCheckFailed":
                raise LotFull(f"the lot holds {max_messages} messages or {max_bytes} bytes") from exc
            raise
        return True

    def oldest(self, limit: int) -> list[ParkedMessage]:
        """The lot's first ``limit`` messages, oldest event first (one consistent Query)."""
        response = self.table.call(
            "query",
            TableName=self.table.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :parked)",
            ExpressionAttributeValues={":pk": {"S": self._pk}, ":parked": {"S": keys.PARKED_SK_PREFIX}},
            ConsistentRead=True,
            Limit=limit,
        )
        found: list[ParkedMessage] = []
        for item in response.get("Items", []):
            row = from_item(item)
            found.append(
                ParkedMessage(
                    delivery_id=str(row["sk"]).removeprefix(keys.PARKED_SK_PREFIX),
                    message=str(row["message"]),
                    group_id=str(row["group_id"]),
                    deduplication_id=str(row["deduplication_id"]),
                    first_sent_at=float(row["first_sent_at"]),
                )
            )
        return found

    def unpark(
        self, delivery_ids: Sequence[str], released_groups: Sequence[str], now: float, *, freed_bytes: int = 0
    ) -> None:
        """Take these messages out of the lot and count them (and their ``freed_bytes``) out, and mark the groups of
        those sent back to the queue, in one transaction (each message must still be
        there: two drains never both count one out)."""
        if not delivery_ids:
            return
        if len(delivery_ids) > MAX_RELEASE:
            raise ValueError(f"at most {MAX_RELEASE} messages at once")
        actions: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self.table.table_name,
                    "Key": keys.parked_key(self.table.tenant_id, self.webhook_id, delivery_id),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            }
            for delivery_id in delivery_ids
        ]
        for group_id in sorted(set(released_groups)):
            marker = {"released_at": _seconds(now), "expiration": int(now) + EXPIRATION_SECONDS}
            actions.append(
                {
                    "Update": {
                        "TableName": self.table.table_name,
                        "Key": {"pk": {"S": self._pk}, "sk": {"S": _released_sk(group_id)}},
                        "UpdateExpression": "SET released_at = :released_at, expiration = :expiration",
                        "ExpressionAttributeValues": to_item(
                            {":released_at": marker["released_at"], ":expiration": marker["expiration"]}
                        ),
                    }
                }
            )
        actions.append(
            {
                "Update": {
                    "TableName": self.table.table_name,
                    "Key": self._circuit_key(),
                    "UpdateExpression": (
                        "ADD parked :minus, parked_bytes :minus_bytes SET released_at = :now, expiration = :expiration"
                    ),
                    "ExpressionAttributeValues": to_item(
                        {
                            ":minus": -len(delivery_ids),
                            ":minus_bytes": -freed_bytes,
                            ":now": _seconds(now),
                            ":expiration": int(now) + EXPIRATION_SECONDS,
                        }
                    ),
                }
            }
        )
        self.table.call("transact_write_items", TransactItems=actions)


def _released_sk(group_id: str) -> str:
    # Group ids hold the tenant, ticket and webhook ids (up to 128 characters): a digest keeps the key short.
    return RELEASED_SK_PREFIX + hashlib.sha256(group_id.encode()).hexdigest()[:32]


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
