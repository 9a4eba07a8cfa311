"""Delivering webhook events: the delivery function's logic (docs/webhooks.md).

The function reads ``WebhookEventsQueue`` (FIFO) through Lambda's SQS event
source with ``ReportBatchItemFailures``. A message is one event for one webhook
(:mod:`support_tickets.webhooks.fanout`). For each:

1. the webhook is read again (consistent ``GetItem`` under the tenant's
   prefix, taken from the message): deleted, ``DISABLED`` or no longer
   subscribed to the type → the message is dropped; a delivery already
   ``DELIVERED`` is not sent again unless this is a redelivery;
2. its URL is checked again (:func:`support_tickets.webhooks.urls.check_webhook_url`:
   DNS may have changed) and the POST goes to the address that check
   resolved (pinned: no second lookup), with TLS verified against the URL's
   host name, within one 10 s deadline for the whole exchange
   (:mod:`support_tickets.webhooks.post`); no redirect is followed (a
   3xx is a failed attempt);
3. the secret(s) are decrypted with KMS under ``{"tenant_id", "webhook_id"}``:
   only this function's role may, and a ciphertext copied into another
   tenant's item does not decrypt under that item's context; during a
   rotation both secrets sign;
4. the outcome is recorded on the delivery record: a 2xx within the timeout
   is ``DELIVERED``; a 410 disables the webhook (``FAILED``); anything else
   (3xx, 4xx, 5xx, a timeout, a refused URL) is retried after
   :func:`~support_tickets.webhooks.events.retry_delay` (the message's
   visibility is changed, then it is reported as a batch item failure), until
   :data:`~support_tickets.webhooks.events.RETRY_WINDOW_SECONDS` have passed since the
   message was sent; then the delivery is ``FAILED`` and the message goes to
   the dead-letter queue.

Independence: messages of different groups (ticket x webhook) are delivered
concurrently within a batch, each with its own timeout; within a group the
first failure stops the group (FIFO order), and the rest of its messages are
reported failed unattempted, as Lambda requires for FIFO queues. A hanging
attempt still holds its invocation (one of the event source's
``MaximumConcurrency``) for its whole deadline, so what bounds one tenant's
share of the pool is its attempts in flight (below), not its rate.

Tiers: a tenant may start at most its tier's deliveries per second
(``WEBHOOK_TIER_RATES``, a conditional counter per tenant and second) and
have at most its tier's attempts in flight at once (``WEBHOOK_TIER_IN_FLIGHT``:
a lease per attempt, :meth:`DeliveryRecords.take_lease`, held until the
attempt ends and expiring after :data:`LEASE_SECONDS`, the function's timeout,
so a crashed attempt holds nothing longer). A message over either returns in
2 to 60 s, no attempt made or counted, like a request over the tier's rate
gets a 429 — and, once it has waited a while, later: SQS moves a message to the
dead-letter queue on its ``maxReceiveCount``-th receive (100, the queue's
``RedrivePolicy``) without handing it to the function, so a message held by its
tenant's bounds for long spreads what is left of the retry window over the
receives it has left (its first 20 receives within a minute of each other, the
rest about 20 minutes apart),
and on its last receive before that it is given up: ``FAILED`` with its
``failure_reason``, unattempted, redeliverable, dead-lettered by the function
(never lost without a record).

The tenant's record (cached :data:`~support_tickets.core.settings.DEFAULT_TENANT_CONFIG_TTL_SECONDS`
per container, like every function's) decides first: an offboarded tenant's
messages are dropped, nothing written (its data is being erased); a
suspended tenant's are held: no attempt, the delivery shown ``PENDING``, the
message back in 1, 2, 4 … 30 minutes, until a reactivation lets it go (or
:data:`~support_tickets.webhooks.events.RETRY_WINDOW_SECONDS` after it
was sent, when it is ``FAILED`` and dead-lettered like any other).

The record (always in the pool table) also names the tenant's table
(:mod:`support_tickets.data.placement`): its webhooks, deliveries, rate
counters and leases are read and written there. While a move switches tables
(``SWITCHING``, ``FLIPPED``: the tenant's writes are paused) a message is held
without a read, an attempt or a write, back in 2, 4, 8 … 60 s; the record is
read again after the attempt (which may take the whole timeout), and the
outcome goes to the table it names then, or, should the switch have begun
meanwhile, nowhere: the message comes back and is sent again (deliveries are
at least once; the ``webhook-id`` is the same). While the move erases the old
table (``ERASING``), a webhook not found in the tenant's table is looked for
again later rather than dropped (dropping can't be undone; waiting costs a few
receives); once the move is over, a missing webhook drops the message as before.
A tenant arriving from another cell is held the same way; in the cell it moved
out of, its messages are dropped, nothing written: its webhooks, deliveries and
parked messages are the new cell's, which sends again what is still pending
(``ops.cell_move``).
"""

from __future__ import annotations

import base64
import http.client
import math
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final, NoReturn, Protocol

from aws_lambda_powertools import Logger

from support_tickets.core import keys
from support_tickets.core.errors import InvalidWebhookUrl
from support_tickets.data.placement import CellPhase, MovePhase, data_table, writes_paused
from support_tickets.data.table import MoveFence, OwnClient, TenantTable
from support_tickets.data.tenant_registry import TenantConfig, TenantConfigCache, TenantStatus
from support_tickets.webhooks import urls
from support_tickets.webhooks.delivery_records import (
    DELIVERED,
    DELIVERY_RETENTION_SECONDS,
    FAILED,
    PENDING,
    Attempt,
    DeliveryRecords,
    DeliveryTarget,
)
from support_tickets.webhooks.events import (
    ACTIVE,
    EVENT_TYPES,
    JITTER,
    RETRY_WINDOW_SECONDS,
    batches,
    queue_message,
    read_queue_message,
    retry_delay,
    webhook_headers,
)
from support_tickets.webhooks.parking import (
    FIRST_COOLDOWN_SECONDS,
    MAX_PARKED_BYTES,
    MAX_PARKED_MESSAGES,
    MAX_RELEASE,
    PARKED_TOO_LONG,
    RETRY_SLOTS,
    SLOT_MARGIN_SECONDS,
    TOKEN_STALE_SECONDS,
    Circuit,
    DrainToken,
    LotFull,
    ParkedMessage,
    WebhookParking,
    next_cooldown,
    release_size,
    released_entries,
)
from support_tickets.webhooks.post import pinned_post
from support_tickets.webhooks.urls import CheckedUrl, Resolver

# The function's Logger's child: JSON lines with the extras, in its log group.
logger = Logger(child=True)

# The whole attempt: connect, TLS, the request, the response's status line and headers.
DELIVERY_TIMEOUT_SECONDS: Final = 10.0
MAX_GROUPS_IN_PARALLEL: Final = 10
THROTTLED_MAX_DELAY_SECONDS: Final = 60
# An attempt lease's life: the function's Timeout (template.yaml), which no attempt outlives.
LEASE_SECONDS: Final = 30.0
# A suspended tenant's messages come back in 1, 2, 4 ... 30 minutes: at most ~57 receives in
# the 26 h retry window (the queue's maxReceiveCount is 100), and out within 30 minutes of a
# reactivation.
SUSPENDED_FIRST_DELAY_SECONDS: Final = 60
SUSPENDED_MAX_DELAY_SECONDS: Final = 1800
SECRET_CACHE_SECONDS: Final = 300.0
MAX_CACHED_SECRETS: Final = 1024
# The webhook queue's maxReceiveCount (template.yaml, WebhookEventsQueue's RedrivePolicy; a
# test holds them equal): SQS dead-letters a message on that receive without invoking us.
MAX_RECEIVES: Final = 100
# SQS's longest visibility timeout (ChangeMessageVisibility: 12 hours).
MAX_VISIBILITY_SECONDS: Final = 43_200
# A held message's first receives come back within a minute (a burst drains at its tier's
# bounds in about a quarter of an hour); the rest share what is left of the retry window.
QUICK_RECEIVES: Final = 20
HELD_TOO_LONG: Final = "held by its tenant's delivery bounds until the queue's last receive"
LOT_FULL: Final = "its webhook's parked deliveries were at their cap (docs/webhooks.md, \"The lot's cap\")"


class PoisonMessage(ValueError):
    """A message that can never be delivered (not what the fanout sends)."""


class RetryLater(Exception):
    """The attempt failed; the message's visibility was set to the backoff delay."""


class Held(Exception):
    """The tenant's bounds hold the message (no attempt made or counted)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class DeliveryMessage:
    tenant_id: str
    webhook_id: str
    delivery_id: str
    ticket_id: str
    body: str
    redelivery: str | None
    event_id: str
    type: str
    # Sent back to the queue by its webhook's drain (attempted even while others are parked).
    released: bool = False
    # When the fan-out first queued it (its retry window's start), if it was queued again since.
    first_sent_at: float | None = None
    # When the drain sent it back (with ``released``).
    released_at: float | None = None

    @classmethod
    def parse(cls, raw: str) -> DeliveryMessage:
        try:
            body, event, message = read_queue_message(raw)
            parsed = cls(
                tenant_id=keys.validate_tenant_id(message["tenant_id"]),
                webhook_id=message["webhook_id"],
                delivery_id=message["delivery_id"],
                ticket_id=message["ticket_id"],
                body=body,
                redelivery=message.get("redelivery"),
                event_id=event["id"],
                type=event["type"],
                released=message.get("released") is True,
                first_sent_at=_epoch(message.get("first_sent_at")),
                released_at=_epoch(message.get("released_at")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise PoisonMessage("not a webhook message") from exc
        texts = (parsed.webhook_id, parsed.delivery_id, parsed.ticket_id, parsed.body, parsed.event_id, parsed.type)
        if not all(isinstance(text, str) for text in texts) or not isinstance(parsed.redelivery, str | None):
            raise PoisonMessage("not a webhook message")
        if (
            not keys.is_valid_webhook_id(parsed.webhook_id)
            or not keys.is_valid_delivery_id(parsed.delivery_id)
            or parsed.type not in EVENT_TYPES
            or not isinstance(parsed.event_id, str)
            or event.get("tenant_id") != parsed.tenant_id
        ):
            raise PoisonMessage("security: a webhook message whose event is not its tenant's, or malformed")
        return parsed


def _let_go(config: TenantConfig) -> str | None:
    """Why a tenant's messages are let go unsent with nothing written, if they are: it
    is being offboarded (the erasure would miss what they wrote), or it moved out to
    another cell (its webhooks and deliveries are that cell's, which sends what is
    still pending)."""
    if config.offboarding_since is not None:
        return "dropped: offboarded"
    if config.cell_phase == CellPhase.MOVED_OUT:
        return "dropped: moved to another cell"
    return None


def _epoch(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


class Poster(Protocol):
    def __call__(self, checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int: ...


@dataclass
class SecretOpener:
    """KMS decryption of sealed secrets (the delivery role), briefly cached per container."""

    kms: Any
    key_arn: str
    clock: Callable[[], float] = time.monotonic
    _cache: OrderedDict[tuple[str, str, str], tuple[float, str]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def open(self, tenant_id: str, webhook_id: str, sealed: str) -> str:
        cache_key = (tenant_id, webhook_id, sealed)
        now = self.clock()
        with self._lock:
            cached = self._cache.get(cache_key)
            if cached is not None and now - cached[0] < SECRET_CACHE_SECONDS:
                return cached[1]
        plaintext = self.kms.decrypt(
            KeyId=self.key_arn,
            CiphertextBlob=base64.b64decode(sealed),
            EncryptionContext={"tenant_id": tenant_id, "webhook_id": webhook_id},
        )["Plaintext"].decode()
        with self._lock:
            self._cache[cache_key] = (now, plaintext)
            while len(self._cache) > MAX_CACHED_SECRETS:
                self._cache.popitem(last=False)
        return str(plaintext)


@dataclass(frozen=True)
class Sender:
    """One attempt of a delivery over the network: the webhook's URL checked again (DNS
    may have changed since it was registered), the event signed with the webhook's
    secrets, the POST to the address the check resolved; one deadline for all of it."""

    secrets: SecretOpener
    allow_local_http: bool = False
    # With allow_local_http: the local stack's own listeners, never a receiver.
    local_stack_ports: frozenset[int] = frozenset()
    resolve: Resolver = urls.system_resolver
    post: Poster = pinned_post
    timeout: float = DELIVERY_TIMEOUT_SECONDS

    def send(self, message: DeliveryMessage, target: DeliveryTarget, now: float) -> int | None:
        """The receiver's status code; ``None`` when nothing was answered (refused URL, network, timeout)."""
        # One deadline for the whole attempt, the name's lookup included (getaddrinfo has no
        # timeout of its own): the POST gets what the lookup and the signing left of it.
        deadline = time.monotonic() + self.timeout
        try:
            checked = urls.check_webhook_url(
                target.url,
                resolve=self.resolve,
                allow_local_http=self.allow_local_http,
                local_stack_ports=self.local_stack_ports,
                timeout=self.timeout,
            )
        except (InvalidWebhookUrl, urls.ResolutionTimedOut):
            logger.warning(
                "webhook URL refused at delivery",
                extra={"tenant_id": message.tenant_id, "webhook_id": message.webhook_id},
            )
            return None
        signing = [self.secrets.open(message.tenant_id, message.webhook_id, target.secret)]
        expires = target.previous_secret_expires_at
        if target.previous_secret is not None and expires is not None and expires > _iso(now):
            signing.append(self.secrets.open(message.tenant_id, message.webhook_id, target.previous_secret))
        headers = webhook_headers(message.event_id, int(now), message.body, signing)
        try:
            return self.post(checked, headers, message.body.encode(), deadline - time.monotonic())
        except (http.client.HTTPException, OSError) as exc:
            logger.info(
                "webhook receiver did not answer",
                extra={"tenant_id": message.tenant_id, "webhook_id": message.webhook_id, "error": type(exc).__name__},
            )
            return None


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    """What is read of an SQS record of Lambda's event."""

    message_id: str
    receipt_handle: str
    body: str
    group_id: str
    deduplication_id: str
    receive_count: int
    sent_at: float  # epoch seconds: when its retry window began
    enqueued_at: float = 0.0  # epoch seconds: when this message was sent to the queue

    @classmethod
    def of_record(cls, record: Mapping[str, Any]) -> QueuedMessage:
        attributes = record.get("attributes") or {}
        sent_at = int(attributes.get("SentTimestamp") or 0) / 1000
        return cls(
            message_id=str(record["messageId"]),
            receipt_handle=str(record["receiptHandle"]),
            body=str(record.get("body") or ""),
            group_id=str(attributes.get("MessageGroupId") or ""),
            deduplication_id=str(attributes.get("MessageDeduplicationId") or ""),
            receive_count=int(attributes.get("ApproximateReceiveCount") or 1),
            sent_at=sent_at,
            enqueued_at=sent_at,
        )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Deliverer:
    """Delivers one message (:meth:`deliver`) or one Lambda batch (:meth:`process_batch`):
    the tenant's records and bounds, the delivery records, retries and parking; each
    attempt's exchange with the receiver is its :class:`Sender`'s."""

    table_name: str
    dynamodb: Any
    sender: Sender
    sqs: Any
    queue_url: str
    dead_letter_queue_url: str
    clock: Callable[[], float] = time.time
    uniform: Callable[[], float] = random.random
    # Deliveries a tenant may start per second, by tier (None: unbounded).
    tier_rates: Mapping[str, int] | None = None
    # Attempts a tenant may have in flight at once, by tier (None: unbounded).
    tier_in_flight: Mapping[str, int] | None = None
    lease_seconds: float = LEASE_SECONDS
    # A webhook's messages that may wait in the queue at once (webhooks.parking).
    retry_slots: int = RETRY_SLOTS
    # The most a webhook's lot may hold (webhooks.parking): past it, a delivery is FAILED, redeliverable.
    max_parked: int = MAX_PARKED_MESSAGES
    max_parked_bytes: int = MAX_PARKED_BYTES
    tenant_configs: TenantConfigCache = field(default_factory=lambda: TenantConfigCache(30.0))

    def tenant_record(self, tenant_id: str) -> TenantConfig:
        """The tenant's record (cached per container), from the pool table (``table_name``)
        whatever the tenant's placement."""
        return self.tenant_configs.get(TenantTable(tenant_id, self.table_name, OwnClient(self.dynamodb)))

    def repository(self, tenant_id: str, config: TenantConfig) -> DeliveryRecords:
        """The tenant's webhooks and deliveries, in the table its record names (refusing
        writes while its data switches tables, and fencing them by the record while
        the move copies: a write that lands after the switch read its partition fails)."""
        table = data_table(config, self.table_name)
        fence = MoveFence.of(config, self.table_name)
        return DeliveryRecords(
            TenantTable(tenant_id, table, OwnClient(self.dynamodb), writes_paused(config), fence=fence)
        )

    # ------------------------------------------------------------ one message
    def deliver(self, queued: QueuedMessage) -> str:
        """Deliver one message; what happened (``delivered``, ``disabled``, ``gave up``,
        ``dropped``, ``parked``...). A failed attempt to retry raises :class:`RetryLater`."""
        token = DrainToken.parse(queued.body)
        if token is not None:
            return self._drain(token, queued)
        try:
            message = DeliveryMessage.parse(queued.body)
        except PoisonMessage as exc:
            logger.warning("poison webhook message", extra={"reason": str(exc), "message_id": queued.message_id})
            self._dead_letter(queued)
            return "poison"
        if message.first_sent_at is not None:
            queued = replace(queued, sent_at=message.first_sent_at)
        return self._deliver(message, queued)

    def _deliver(self, message: DeliveryMessage, queued: QueuedMessage) -> str:
        config = self.tenant_record(message.tenant_id)
        dropped = _let_go(config)
        if dropped is not None:
            return dropped
        if writes_paused(config):
            self._wait_for_move(message, queued)
        repository = self.repository(message.tenant_id, config)
        target = repository.target(message.webhook_id)
        if target is None and config.move_phase == MovePhase.ERASING:
            self._wait_for_move(message, queued)
        if target is None or target.status != ACTIVE or message.type not in target.events:
            # Deleted, disabled or unsubscribed since: nothing more is sent, and a
            # delivery left PENDING (a retry, a redelivery) says so.
            repository.settle_pending(message.webhook_id, message.delivery_id)
            return "dropped"
        progress = repository.progress(message.webhook_id, message.delivery_id)
        attempts = progress.attempts
        if message.redelivery is None and progress.status == DELIVERED:
            return "duplicate"
        now = self.clock()
        if config.status is TenantStatus.SUSPENDED:
            return self._hold(repository, message, queued, now)
        parking = WebhookParking(repository.table, message.webhook_id)
        circuit = parking.circuit()
        if self._behind_parked(parking, circuit, message, queued):
            return self._park(
                repository,
                parking,
                message,
                queued,
                now,
                release_in=0.0 if circuit.parked <= 0 else FIRST_COOLDOWN_SECONDS,
            )
        return self._attempt_within_bounds(
            repository, config, message, queued, target=target, attempts=attempts, now=now, circuit=circuit
        )

    @staticmethod
    def _behind_parked(
        parking: WebhookParking, circuit: Circuit, message: DeliveryMessage, queued: QueuedMessage
    ) -> bool:
        """Whether a message must go behind parked ones. One the drain sent back: when a
        message of its group sent back with it (ahead of it) was parked again since. Any
        other: when its webhook's lot holds older messages, maybe of its ticket; or when
        it was queued before messages of its group were sent back and is received after
        them, so it may be newer than they are and ahead of them in the queue."""
        if message.released:
            _, reparked_at = parking.group_marks(queued.group_id)
            return reparked_at > (message.released_at or 0.0)
        if circuit.parked > 0:
            return True
        if queued.enqueued_at >= circuit.released_at:
            return False
        released_at, _ = parking.group_marks(queued.group_id)
        return queued.enqueued_at < released_at

    def _attempt_within_bounds(
        self,
        repository: DeliveryRecords,
        config: TenantConfig,
        message: DeliveryMessage,
        queued: QueuedMessage,
        *,
        target: DeliveryTarget,
        attempts: int,
        now: float,
        circuit: Circuit,
    ) -> str:
        """The attempt, if the tenant's tier lets it start now (handed back to the queue
        if not, :meth:`_hand_back`, or, on the message's last receive,
        :meth:`_give_up_held`), and its outcome."""
        holder = uuid.uuid4().hex
        try:
            self._within_tier(repository, config, now)
            lease = self._lease(repository, config, holder, now)
        except Held as held:
            if queued.receive_count < MAX_RECEIVES - 1:
                delay = self._bound_delay(queued)
                return self._hand_back(repository, message, queued, delay=delay, reason=held.reason, now=now)
            return self._give_up_held(repository, message, queued, now)
        try:
            status_code = self.sender.send(message, target, now)
        finally:
            if lease is not None:
                repository.release_lease(lease, holder)
        recorder = self._recorder(message, queued)
        outcome = self._outcome(recorder, message, queued, status_code, attempts=attempts, now=now)
        if outcome == "parked":
            return outcome
        parking = WebhookParking(recorder.table, message.webhook_id)
        if queued.receive_count > 1:
            parking.give_back_slot(message.delivery_id, self.retry_slots)  # it may hold one since it was handed back
        if outcome == "delivered" and (circuit.parked > 0 or message.released):
            parking.note_success(now)  # the drain's sign that the endpoint answers again
        return outcome

    def _recorder(self, message: DeliveryMessage, queued: QueuedMessage) -> DeliveryRecords:
        """Where an attempt's outcome is recorded: the table the tenant's record names
        now (an attempt takes up to the whole timeout, a move may have switched tables
        meanwhile); none while its writes are paused (:meth:`_wait_for_move`)."""
        config = self.tenant_record(message.tenant_id)
        if writes_paused(config):
            self._wait_for_move(message, queued)
        return self.repository(message.tenant_id, config)

    def _wait_for_move(self, message: DeliveryMessage, queued: QueuedMessage) -> NoReturn:
        """The tenant's data is moving between tables: the message back in 2, 4, 8 … 60 s,
        nothing read further, attempted or written (:class:`RetryLater`)."""
        delay = self._bound_delay(queued)
        logger.info(
            "webhook delivery held: tenant moving",
            extra={"tenant_id": message.tenant_id, "delivery_id": message.delivery_id, "retry_in_seconds": delay},
        )
        self._defer(queued, delay, "tenant moving")

    def _outcome(
        self,
        repository: DeliveryRecords,
        message: DeliveryMessage,
        queued: QueuedMessage,
        status_code: int | None,
        *,
        attempts: int,
        now: float,
    ) -> str:
        """Record an attempt's outcome; a failure to retry raises :class:`RetryLater`."""
        if status_code is not None and 200 <= status_code < 300:
            self._record(repository, message, status=DELIVERED, status_code=status_code, next_attempt_at=None, now=now)
            return "delivered"
        if status_code == 410:
            repository.disable(message.webhook_id)
            self._record(repository, message, status=FAILED, status_code=status_code, next_attempt_at=None, now=now)
            return "disabled"
        if now - queued.sent_at >= RETRY_WINDOW_SECONDS:
            self._record(repository, message, status=FAILED, status_code=status_code, next_attempt_at=None, now=now)
            self._dead_letter(queued)
            return "gave up"
        # The n of the backoff: this message's receives (a redelivery starts again at 1), but
        # never more than the attempts made (a message that waited behind its group's first
        # one was received with it without being attempted).
        delay = retry_delay(min(queued.receive_count, attempts + 1), self.uniform)
        self._record(
            repository, message, status=PENDING, status_code=status_code, next_attempt_at=_iso(now + delay), now=now
        )
        parking = WebhookParking(repository.table, message.webhook_id)
        if not parking.take_slot(self.retry_slots, message.delivery_id, now, now + delay + SLOT_MARGIN_SECONDS):
            return self._park(repository, parking, message, queued, now)
        self.sqs.change_message_visibility(
            QueueUrl=self.queue_url, ReceiptHandle=queued.receipt_handle, VisibilityTimeout=delay
        )
        logger.info(
            "webhook attempt failed",
            extra={
                "tenant_id": message.tenant_id,
                "webhook_id": message.webhook_id,
                "delivery_id": message.delivery_id,
                "status_code": status_code,
                "retry_in_seconds": delay,
            },
        )
        raise RetryLater(f"retry in {delay} s")

    def _hold(self, repository: DeliveryRecords, message: DeliveryMessage, queued: QueuedMessage, now: float) -> str:
        """A suspended tenant's delivery: no attempt; the record ``PENDING`` (created with
        0 attempts if it had none), the message back later (:class:`RetryLater`), or,
        past the retry window, ``FAILED`` and dead-lettered without an attempt."""
        delay = min(
            SUSPENDED_FIRST_DELAY_SECONDS * 2 ** (min(queued.receive_count, 16) - 1), SUSPENDED_MAX_DELAY_SECONDS
        )
        delay = max(1, round(delay * (1 + JITTER * (2 * self.uniform() - 1))))
        repository.hold(self._attempt_record(message, status=PENDING, status_code=None, next_at=now + delay, now=now))
        if now - queued.sent_at >= RETRY_WINDOW_SECONDS:
            repository.settle_pending(message.webhook_id, message.delivery_id)
            self._dead_letter(queued)
            return "gave up: suspended"
        logger.info(
            "webhook delivery held: tenant suspended",
            extra={"tenant_id": message.tenant_id, "delivery_id": message.delivery_id, "retry_in_seconds": delay},
        )
        self._defer(queued, delay, "tenant suspended")

    def _within_tier(self, repository: DeliveryRecords, config: TenantConfig, now: float) -> None:
        """Raise :class:`Held` (no attempt made or counted) when the tenant has started
        its tier's deliveries of this second."""
        if self.tier_rates is None:
            return
        limit = self.tier_rates.get(config.tier)
        if limit is None or repository.take_rate_slot(int(now), limit):
            return
        raise Held("over the tier's rate")

    def _lease(self, repository: DeliveryRecords, config: TenantConfig, holder: str, now: float) -> int | None:
        """One of the tenant's attempt leases (``None``: unbounded); :class:`Held`
        (no attempt made or counted) when its tier's attempts in flight are all under way."""
        limit = None if self.tier_in_flight is None else self.tier_in_flight.get(config.tier)
        if limit is None:
            return None
        slot = repository.take_lease(limit, now, now + self.lease_seconds, holder)
        if slot is None:
            raise Held("the tier's attempts in flight are under way")
        return slot

    def _hand_back(
        self,
        repository: DeliveryRecords,
        message: DeliveryMessage,
        queued: QueuedMessage,
        *,
        delay: int,
        reason: str,
        now: float,
    ) -> str:
        """The message back in the queue in ``delay`` seconds holding one of its webhook's
        retry slots (:class:`RetryLater`), or, every slot held, parked (``parked``)."""
        parking = WebhookParking(repository.table, message.webhook_id)
        if not parking.take_slot(self.retry_slots, message.delivery_id, now, now + delay + SLOT_MARGIN_SECONDS):
            return self._park(repository, parking, message, queued, now)
        self._defer(queued, delay, reason)

    # ------------------------------------------------------------ parking
    def _park(
        self,
        repository: DeliveryRecords,
        parking: WebhookParking,
        message: DeliveryMessage,
        queued: QueuedMessage,
        now: float,
        *,
        release_in: float = FIRST_COOLDOWN_SECONDS,
    ) -> str:
        """Take the message out of the queue into its webhook's lot (``parked``: the
        caller lets it go), its delivery shown ``PENDING``; the lot's drain started
        (its token sent) if it has none. ``release_in``: when the drain of a lot this
        opens first sends messages back."""
        body, _event, routing = read_queue_message(queued.body)
        for sent_back in ("released", "released_at", "first_sent_at"):
            routing.pop(sent_back, None)
        parked = ParkedMessage(
            delivery_id=message.delivery_id,
            message=queue_message(body, routing),
            group_id=queued.group_id,
            deduplication_id=queued.deduplication_id or queued.message_id,
            first_sent_at=queued.sent_at,
        )
        try:
            # False: parked already (received again since)
            if parking.park(
                parked, now, released=message.released, max_messages=self.max_parked, max_bytes=self.max_parked_bytes
            ):
                self._parked(parked)
        except LotFull:
            return self._fail_lot_full(repository, parking, message, queued, now)
        if queued.receive_count > 1:
            parking.give_back_slot(message.delivery_id, self.retry_slots)
        circuit = parking.circuit()
        next_at = max(circuit.next_release_at, now) if circuit.token_active else now + release_in
        repository.hold(self._attempt_record(message, status=PENDING, status_code=None, next_at=next_at, now=now))
        if not circuit.token_active or circuit.token_seen_at < now - TOKEN_STALE_SECONDS:
            parking.schedule(next_release_at=now + release_in, cooldown=release_in, now=now)
            if parking.new_token(circuit.token, now):
                token = DrainToken(message.tenant_id, message.webhook_id, circuit.token + 1)
                self.sqs.send_message(QueueUrl=self.queue_url, **token.entry())
        logger.info(
            "webhook delivery parked",
            extra={
                "tenant_id": message.tenant_id,
                "webhook_id": message.webhook_id,
                "delivery_id": message.delivery_id,
            },
        )
        return "parked"

    def _parked(self, parked: ParkedMessage) -> None:
        """``parked`` went into its lot (a hook: the metered deliverer counts its storage)."""

    def _fail_lot_full(
        self,
        repository: DeliveryRecords,
        parking: WebhookParking,
        message: DeliveryMessage,
        queued: QueuedMessage,
        now: float,
    ) -> str:
        """A message its webhook's full lot can't take: ``FAILED`` with :data:`LOT_FULL`,
        attempts as they were, its event kept for ``POST …/redeliver``; let go from the queue."""
        repository.fail_unattempted(
            self._attempt_record(message, status=FAILED, status_code=None, next_at=None, now=now), LOT_FULL
        )
        if queued.receive_count > 1:
            parking.give_back_slot(message.delivery_id, self.retry_slots)
        logger.warning(
            "webhook delivery failed: its webhook's lot is full",
            extra={
                "tenant_id": message.tenant_id,
                "webhook_id": message.webhook_id,
                "delivery_id": message.delivery_id,
            },
        )
        return "failed: lot full"

    def _drain(self, token: DrainToken, queued: QueuedMessage) -> str:
        """A webhook's drain token: send the oldest of its lot back to the queue when
        due, and come back (:class:`RetryLater`) until the lot is empty."""
        try:
            keys.validate_tenant_id(token.tenant_id)
            if not keys.is_valid_webhook_id(token.webhook_id):
                raise ValueError("invalid webhook id")
        except ValueError:
            self._dead_letter(queued)
            return "poison"
        config = self.tenant_record(token.tenant_id)
        dropped = _let_go(config)
        if dropped is not None:
            return dropped
        if writes_paused(config):
            self._defer(queued, self._bound_delay(queued), "tenant moving")
        repository = self.repository(token.tenant_id, config)
        parking = WebhookParking(repository.table, token.webhook_id)
        circuit = parking.circuit()
        now = self.clock()
        if token.generation != circuit.token:
            return "drain: replaced"
        if circuit.parked <= 0 and parking.end_token(token.generation, now):
            return "drain: done"
        if queued.receive_count >= MAX_RECEIVES - 2:
            # SQS would dead-letter it on its next receives: a new token carries the drain on.
            if parking.new_token(circuit.token, now):
                self.sqs.send_message(QueueUrl=self.queue_url, **replace(token, generation=circuit.token + 1).entry())
            return "drain: token renewed"
        if config.status is TenantStatus.SUSPENDED:
            parking.schedule(next_release_at=circuit.next_release_at, cooldown=circuit.cooldown, now=now)
            self._defer(queued, SUSPENDED_MAX_DELAY_SECONDS, "tenant suspended")
        if now < circuit.next_release_at:
            parking.schedule(next_release_at=circuit.next_release_at, cooldown=circuit.cooldown, now=now)
            self._defer(queued, max(1, math.ceil(circuit.next_release_at - now)), "drain not due")
        released = self._release(repository, parking, config, circuit, now)
        if released is None:  # nothing to send: its webhook is gone, or the lot was found empty
            cooldown = 1.0
        else:
            cooldown = next_cooldown(circuit.cooldown, succeeded=circuit.last_success_at > circuit.released_at)
        parking.schedule(next_release_at=now + cooldown, cooldown=cooldown, now=now)
        logger.info(
            "webhook deliveries sent back from the lot",
            extra={"tenant_id": token.tenant_id, "webhook_id": token.webhook_id, "released": released},
        )
        self._defer(queued, max(1, math.ceil(cooldown)), "drain")

    def _release(
        self,
        repository: DeliveryRecords,
        parking: WebhookParking,
        config: TenantConfig,
        circuit: Circuit,
        now: float,
    ) -> int | None:
        """The lot's oldest messages sent back to the queue (those whose retry window
        has passed ``FAILED`` instead, redeliverable); how many were sent, ``None`` when
        none could be (the webhook is gone: they are settled; or the lot is empty)."""
        rate = None if self.tier_rates is None else self.tier_rates.get(config.tier)
        oldest = parking.oldest(release_size(rate))
        if not oldest:
            # Its items expired by TTL uncounted (no drain ran for 30 days): the count follows the lot.
            parking.recount(circuit.parked, now)
            return None
        target = repository.target(parking.webhook_id)
        if target is None or target.status != ACTIVE:
            # Deleted or disabled since: nothing more is sent, and the deliveries say so.
            for parked in oldest:
                repository.settle_pending(parking.webhook_id, parked.delivery_id)
            parking.unpark(
                [parked.delivery_id for parked in oldest], [], now, freed_bytes=sum(parked.size for parked in oldest)
            )
            return None
        live = [parked for parked in oldest if now - parked.first_sent_at < RETRY_WINDOW_SECONDS]
        for parked in oldest:
            if parked in live:
                continue
            message = DeliveryMessage.parse(parked.message)
            attempt = self._attempt_record(message, status=FAILED, status_code=None, next_at=None, now=now)
            repository.fail_unattempted(attempt, PARKED_TOO_LONG)
        # In the lot's order, a transaction's worth at a time: what was sent back is counted out
        # before the next is sent (a failure leaves the rest parked for the next release).
        for start in range(0, len(oldest), MAX_RELEASE):
            chunk = oldest[start : start + MAX_RELEASE]
            sent = [parked for parked in chunk if parked in live]
            for batch in batches(released_entries(sent, now)):
                response = self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=batch)
                if response.get("Failed"):
                    raise RuntimeError(f"{len(response['Failed'])} parked messages were not sent back")
            parking.unpark(
                [parked.delivery_id for parked in chunk],
                [parked.group_id for parked in sent],
                now,
                freed_bytes=sum(parked.size for parked in chunk),
            )
        return len(live)

    def _bound_delay(self, queued: QueuedMessage) -> int:
        # 2, 4, 8 ... 60 s: a tenant's backlog drains at its bounds without a receive per second;
        # and never so soon that the queue's receives run out before the retry window does.
        delay: int = min(2 ** min(queued.receive_count, 6), THROTTLED_MAX_DELAY_SECONDS)
        receives_left = MAX_RECEIVES - 1 - queued.receive_count
        window_left = RETRY_WINDOW_SECONDS - (self.clock() - queued.sent_at)
        if queued.receive_count > QUICK_RECEIVES and receives_left > 0 and window_left > 0:
            delay = max(delay, math.ceil(window_left / receives_left))
        return min(MAX_VISIBILITY_SECONDS, max(1, round(delay * (1 + JITTER * self.uniform()))))

    def _give_up_held(
        self, repository: DeliveryRecords, message: DeliveryMessage, queued: QueuedMessage, now: float
    ) -> str:
        """A message still held by its tenant's bounds on its last receive before SQS would
        dead-letter it unseen: ``FAILED`` with :data:`HELD_TOO_LONG`, no attempt, its body
        kept for a redelivery; dead-lettered here, then let go."""
        repository.fail_unattempted(
            self._attempt_record(message, status=FAILED, status_code=None, next_at=None, now=now), HELD_TOO_LONG
        )
        self._dead_letter(queued)
        logger.warning(
            "webhook delivery given up unattempted",
            extra={
                "tenant_id": message.tenant_id,
                "delivery_id": message.delivery_id,
                "receives": queued.receive_count,
            },
        )
        return "gave up: held"

    def _defer(self, queued: QueuedMessage, delay: int, reason: str) -> NoReturn:
        """The message back in ``delay`` seconds, unattempted: :class:`RetryLater`."""
        self.sqs.change_message_visibility(
            QueueUrl=self.queue_url, ReceiptHandle=queued.receipt_handle, VisibilityTimeout=delay
        )
        raise RetryLater(f"{reason}: in {delay} s")

    def _record(
        self,
        repository: DeliveryRecords,
        message: DeliveryMessage,
        *,
        status: str,
        status_code: int | None,
        next_attempt_at: str | None,
        now: float,
    ) -> None:
        attempt = self._attempt_record(message, status=status, status_code=status_code, next_at=None, now=now)
        repository.record_attempt(replace(attempt, next_attempt_at=next_attempt_at))

    def _attempt_record(
        self, message: DeliveryMessage, *, status: str, status_code: int | None, next_at: float | None, now: float
    ) -> Attempt:
        return Attempt(
            delivery_id=message.delivery_id,
            webhook_id=message.webhook_id,
            event_id=message.event_id,
            type=message.type,
            ticket_id=message.ticket_id,
            body=message.body,
            status=status,
            status_code=status_code,
            next_attempt_at=None if next_at is None else _iso(next_at),
            at=_iso(now),
            expiration=int(now) + DELIVERY_RETENTION_SECONDS,
        )

    def _dead_letter(self, queued: QueuedMessage) -> None:
        """Park a message in the dead-letter queue (the caller then lets it go from the queue)."""
        self.sqs.send_message(
            QueueUrl=self.dead_letter_queue_url,
            MessageBody=queued.body,
            MessageGroupId=queued.group_id or "poison",
            MessageDeduplicationId=queued.deduplication_id or queued.message_id,
        )

    # ------------------------------------------------------------ one batch
    def process_batch(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        """The message ids to report in ``batchItemFailures``. Groups run in
        parallel; within a group, in order, stopping at the first failure."""
        groups: dict[str, list[QueuedMessage]] = {}
        for record in records:
            queued = QueuedMessage.of_record(record)
            groups.setdefault(queued.group_id, []).append(queued)
        if not groups:
            return []
        workers = min(len(groups), MAX_GROUPS_IN_PARALLEL)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(self._process_group, groups.values()))
        failed = {message_id for result in results for message_id in result}
        return [str(record["messageId"]) for record in records if record["messageId"] in failed]

    def _process_group(self, messages: list[QueuedMessage]) -> list[str]:
        for index, queued in enumerate(messages):
            try:
                outcome = self.deliver(queued)
            except RetryLater:
                return [later.message_id for later in messages[index:]]
            except Exception:
                logger.exception("webhook delivery failed", extra={"message_id": queued.message_id})
                return [later.message_id for later in messages[index:]]
            logger.info("webhook message handled", extra={"outcome": outcome, "message_id": queued.message_id})
        return []


def tier_rates(text: str) -> dict[str, int] | None:
    """``basic=5,standard=25,premium=100`` as a mapping (``None`` when empty: unbounded)."""
    if not text.strip():
        return None
    rates: dict[str, int] = {}
    for part in text.split(","):
        tier, _, value = part.partition("=")
        rates[tier.strip()] = int(value)
        if rates[tier.strip()] < 1:
            raise ValueError("a tier's rate must be at least 1")
    return rates
