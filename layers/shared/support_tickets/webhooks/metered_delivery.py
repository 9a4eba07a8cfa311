"""The delivery function's usage lines: one per tenant and invocation (docs/usage.md).

An invocation of the delivery function holds a batch of ``WebhookEventsQueue``
messages of several tenants (Lambda's FIFO batches mix message groups), run in
parallel threads. Each tenant with a message in the batch (or DynamoDB units
on its account) gets one ``"usage"`` line
(:data:`support_tickets.usage.meter.USAGE_MESSAGE`) carrying:

- ``messages``: the batch's messages of the tenant (a message whose body names
  no valid tenant, a poison message, is nobody's);
- ``attempts``: the delivery attempts its messages made in this invocation,
  as the delivery object's ``attempts`` counts them (an outcome recorded on
  the delivery record: a POST, or a URL refused at delivery). A message
  deferred unattempted (over the tier's rate or attempts in flight, a
  suspended tenant's hold), dropped or a duplicate is no attempt;
- ``deliveries``: the attempts that ended their delivery: ``DELIVERED`` (a 2xx)
  or ``FAILED`` (a 410, the retry window spent). A delivery retried n times is
  n attempts and, when it ends, one delivery;
- ``sqs_requests`` / ``kms_requests``: the function's own SQS calls for the
  tenant's messages (``ChangeMessageVisibility`` of a retry or a deferral,
  ``SendMessage`` to the dead-letter queue) and its KMS ``Decrypt`` calls (the
  secrets' cache misses), as botocore made them (``after-call``: one per API
  call, however many retries it took on the wire);
- ``stored_kb_days``: the DynamoDB storage its messages added, in KB (rounded
  up) x days, paid when it is written (:class:`MeteredRecords`): a delivery
  record, its size for its 30 days of TTL, paid by the first write here (the
  fan-out's record of a queued message is paid with it; rewritten by later
  attempts at the same size: counted once); a message parked, its size for the 26 h
  retry window (a parked message is sent back or ``FAILED`` within it, its
  storage never longer: an upper bound);
- ``read_units`` / ``write_units`` / ``dynamodb_calls``: every DynamoDB call of
  its messages, through :class:`~support_tickets.data.table.TenantTable`,
  which meters each call under its tenant;
- ``duration_ms``: the tenant's share of the invocation's billed duration
  (the handler's, rounded up to Lambda's 1 ms), apportioned by the time each of
  its messages took in its own thread (``perf_counter_ns`` around
  :meth:`Deliverer.deliver`): messages run in parallel, so their times add
  up to more than the invocation; their ratios share it, exactly
  (:func:`support_tickets.usage.lines.apportion`, largest remainder, a
  multiple of 0.001 ms each, the shares adding up to the duration). A poison
  message's share is nobody's;
- ``invocations``: 0 or 1. The invocation itself is apportioned like its
  duration, in whole invocations: it is the tenant's whose messages took the
  most of it (ties by tenant id), so the tenants' invocations add up to the
  function's exactly, and ``lambda.invocations`` stays an integer count.

The lines are written in a ``finally``: a failed invocation is billed too (and
the messages it returns to the queue are received, and billed, again).

Hooks, kept out of :mod:`support_tickets.webhooks.delivery`:
:class:`MeteredDeliverer` (a :class:`Deliverer` whose :meth:`deliver` runs in
a message scope and whose delivery records count attempts), :func:`count_calls`
(botocore's ``after-call`` event on the function's SQS and KMS clients) and
:func:`metered_batch` around the handler's call.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from support_tickets.data.tenant_registry import TenantConfig
from support_tickets.usage import meter
from support_tickets.usage.lines import DELIVER_WEBHOOK, DURATION_QUANTUM, apportion, log_usage_lines, usage_line
from support_tickets.webhooks.delivery import Deliverer, QueuedMessage
from support_tickets.webhooks.delivery_records import (
    DELIVERED,
    DELIVERY_RETENTION_SECONDS,
    FAILED,
    Attempt,
    DeliveryRecords,
    Progress,
)
from support_tickets.webhooks.events import RETRY_WINDOW_SECONDS
from support_tickets.webhooks.parking import ParkedMessage

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

# The counts a delivery line carries besides the units and the duration.
COUNTS: Final = (
    "messages",
    "attempts",
    "deliveries",
    "invocations",
    "sqs_requests",
    "kms_requests",
    "stored_kb_days",
)
# What a delivery record holds besides its event (names, ids, times, status, counts; DynamoDB's
# 100 bytes of overhead an item), and how long it is kept; a parked message at most its retry window.
RECORD_OVERHEAD_BYTES: Final = 600
RECORD_DAYS: Final = DELIVERY_RETENTION_SECONDS // 86_400
PARKED_OVERHEAD_BYTES: Final = 400
PARKED_DAYS: Final = Decimal(RETRY_WINDOW_SECONDS) / 86_400
FINAL_STATUSES: Final = frozenset({DELIVERED, FAILED})
# A message whose tenant is not known (a poison message): its time is nobody's.
NOBODY: Final = ""
SERVICES: Final = ("sqs", "kms")


@dataclass
class MessageUsage:
    """What one message's delivery used (its thread's)."""

    tenant_id: str = NOBODY
    attempts: int = 0
    deliveries: int = 0
    sqs_requests: int = 0
    kms_requests: int = 0
    stored_kb_days: int = 0
    # Whether the delivery's record existed when the message's delivery read it (None: not read).
    record_found: bool | None = None


@dataclass
class TenantTotals:
    messages: int = 0
    attempts: int = 0
    deliveries: int = 0
    sqs_requests: int = 0
    kms_requests: int = 0
    stored_kb_days: int = 0
    elapsed_ns: int = 0


class BatchMeter:
    """One invocation's usage per tenant; one per execution environment (Lambda runs
    one invocation at a time in it), messages adding from their threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = threading.local()
        self._totals: dict[str, TenantTotals] = {}

    def start(self) -> None:
        with self._lock:
            self._totals = {}

    @contextmanager
    def message(self) -> Iterator[MessageUsage]:
        """The scope of one message's delivery in the calling thread."""
        usage = MessageUsage()
        self._current.usage = usage
        started = time.perf_counter_ns()
        try:
            yield usage
        finally:
            elapsed = time.perf_counter_ns() - started
            self._current.usage = None
            with self._lock:
                totals = self._totals.setdefault(usage.tenant_id, TenantTotals())
                totals.messages += 1
                totals.attempts += usage.attempts
                totals.deliveries += usage.deliveries
                totals.sqs_requests += usage.sqs_requests
                totals.kms_requests += usage.kms_requests
                totals.stored_kb_days += usage.stored_kb_days
                totals.elapsed_ns += elapsed

    def current(self) -> MessageUsage | None:
        usage: MessageUsage | None = getattr(self._current, "usage", None)
        return usage

    def totals(self) -> dict[str, TenantTotals]:
        with self._lock:
            return dict(self._totals)


METER: Final = BatchMeter()


def stored_kb_days(size_bytes: int, days: Decimal | int) -> int:
    """KB (rounded up) x days, rounded up: what ``size_bytes`` held for ``days`` counts."""
    return math.ceil(math.ceil(size_bytes / 1024) * Decimal(days))


def record_bytes(attempt: Attempt) -> int:
    return len(attempt.body.encode("utf-8", "surrogatepass")) + RECORD_OVERHEAD_BYTES


class MeteredRecords(DeliveryRecords):
    """A tenant's delivery records that count each recorded attempt for the message in
    scope, and the storage of each record its message creates."""

    def progress(self, webhook_id: str, delivery_id: str) -> Progress:
        found = super().progress(webhook_id, delivery_id)
        usage = METER.current()
        if usage is not None:
            # Every record has a status; one as the fan-out queued it is paid by the first write here.
            usage.record_found = found.status is not None and not found.as_queued
        return found

    def _created(self, attempt: Attempt) -> None:
        usage = METER.current()
        if usage is not None and usage.record_found is False:
            usage.record_found = True
            usage.stored_kb_days += stored_kb_days(record_bytes(attempt), RECORD_DAYS)

    def record_attempt(self, attempt: Attempt) -> None:
        super().record_attempt(attempt)
        self._created(attempt)
        usage = METER.current()
        if usage is not None:
            usage.attempts += 1
            usage.deliveries += attempt.status in FINAL_STATUSES

    def hold(self, attempt: Attempt) -> None:
        super().hold(attempt)
        self._created(attempt)

    def fail_unattempted(self, attempt: Attempt, reason: str) -> None:
        super().fail_unattempted(attempt, reason)
        self._created(attempt)


class MeteredDeliverer(Deliverer):
    """The :class:`Deliverer` with each message metered (see the module docstring)."""

    def deliver(self, queued: QueuedMessage) -> str:
        with METER.message():
            return super().deliver(queued)

    def tenant_record(self, tenant_id: str) -> TenantConfig:
        # A message's tenant is known once its body was read and checked (the
        # deliverer asks for that tenant's record first): the message is that tenant's.
        usage = METER.current()
        if usage is not None:
            usage.tenant_id = tenant_id
        return super().tenant_record(tenant_id)

    def repository(self, tenant_id: str, config: TenantConfig) -> DeliveryRecords:
        records = super().repository(tenant_id, config)
        return MeteredRecords(**{field.name: getattr(records, field.name) for field in fields(records)})

    def _parked(self, parked: ParkedMessage) -> None:
        usage = METER.current()
        if usage is not None:
            usage.stored_kb_days += stored_kb_days(parked.size + PARKED_OVERHEAD_BYTES, PARKED_DAYS)


def _count(service: str) -> Any:
    def counted(**_: Any) -> None:
        usage = METER.current()
        if usage is not None:
            if service == "sqs":
                usage.sqs_requests += 1
            else:
                usage.kms_requests += 1

    return counted


def count_calls(client: Any, service: str) -> Any:
    """``client`` (``sqs`` or ``kms``), each of its API calls counted for the message in scope."""
    if service not in SERVICES:
        raise ValueError(f"not a metered service: {service}")
    client.meta.events.register(f"after-call.{service}", _count(service), unique_id=f"webhook-usage-{service}")
    return client


def billed_ms(elapsed_ms: float) -> Decimal:
    """Lambda's billed duration of a handler's elapsed time: rounded up to the millisecond."""
    return Decimal(math.ceil(elapsed_ms))


def usage_lines(
    context: Any, totals: dict[str, TenantTotals], consumed: dict[str, meter.Consumed], elapsed_ms: float
) -> dict[str, dict[str, Any]]:
    """Each tenant's usage fields of one invocation (tenant -> the line's ``usage``)."""
    weights = {tenant: max(total.elapsed_ns // 1000, 1) for tenant, total in totals.items()}
    durations = apportion(billed_ms(elapsed_ms), weights, DURATION_QUANTUM)
    invocations = apportion(Decimal(1), weights, Decimal(1))
    lines: dict[str, dict[str, Any]] = {}
    for tenant in sorted((set(totals) | set(consumed)) - {NOBODY}):
        total = totals.get(tenant, TenantTotals())
        counts = {
            "messages": total.messages,
            "attempts": total.attempts,
            "deliveries": total.deliveries,
            "invocations": int(invocations.get(tenant, 0)),
            "sqs_requests": total.sqs_requests,
            "kms_requests": total.kms_requests,
            "stored_kb_days": total.stored_kb_days,
        }
        units = consumed.get(tenant, meter.NOTHING)
        lines[tenant] = usage_line(DELIVER_WEBHOOK, context, counts, units, durations.get(tenant, meter.ZERO))
    return lines


@contextmanager
def metered_batch(logger: Logger, context: Any) -> Iterator[None]:
    """Meter the block (one invocation of the delivery function) and log its usage
    lines, one per tenant, when it ends, also when it fails."""
    meter.start()
    METER.start()
    try:
        yield
    finally:
        elapsed_ms = meter.finish().elapsed_ms
        log_usage_lines(logger, usage_lines(context, METER.totals(), meter.METER.by_tenant(), elapsed_ms))
