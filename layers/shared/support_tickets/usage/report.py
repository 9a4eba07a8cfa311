"""API.md's usage object: a tenant's UTC day, from the metering function's counters.

How each figure is measured: docs/usage.md.

What is counted and priced (at :mod:`support_tickets.usage.prices`):

- **API Gateway**: one request per ``"request handled"`` line, that is every
  request that reached an API function with the tenant's verified token (its
  4xx and 5xx included: API Gateway bills them). A request the authorizer
  refused (no valid token, a suspended tenant) or the usage plan throttled
  runs no function and is not counted; API Gateway does not bill it either.
- **Lambda**: the API functions' invocations (one per request) and
  GB-seconds (memory size x the handler's duration), plus the authorizer's
  invocations per verified token and their GB-seconds, and the stream
  functions' shares of their invocations' GB-seconds (by records per tenant;
  their invocations themselves are shared, on no tenant's figure)
  (:data:`EXTRA_INVOCATIONS`, :data:`EXTRA_MB_MS`).
- **DynamoDB**: the read and write request units DynamoDB reported for every
  call the tenant's requests made (``ReturnConsumedCapacity="TOTAL"``: the
  table's and its indexes'), the delivery function's for its webhooks included.
- **Webhooks**: the delivery function's work for the tenant's endpoints
  (``webhook_*`` counters): its invocations and GB-seconds are in ``lambda``
  (the figures) and, priced with its SQS and KMS requests, in
  ``cost_usd.webhooks`` (not in ``cost_usd.lambda``: each amount is priced
  once); ``webhooks`` says how many deliveries ended and how many attempts
  were made.

- **Dedicated** (``cost_usd.dedicated``, only for a tenant whose record places
  it, or last placed it, in a table of its own): the day's share of its own
  key, a customer managed key at its list price ($1 a month, prorated; each of
  its first two yearly rotations adds $1), for the part of the day its record
  placed it there (:func:`own_table_windows`). Its rotations are counted from
  the start of that placement (the key is at least that old). API.md's "its
  backups" are in it as this key, the only fixed monthly cost they have (every
  backup and restore point is encrypted under it). Not in it: the
  table's storage and point-in-time recovery, billed per GB as the pool
  table's are for a pooled tenant's items (which no tenant's figure prices
  either), nor the table's two alarms (shared operations, as the pool's).

Shared and not apportioned (on no tenant's figure): the metering function
itself, log ingestion and storage, the failure queues, the fan-out's sends and
the event source's receives and deletes of webhook messages, the VPC
endpoints' hours.

A day is **final** once it ended more than the replay horizon ago
(:data:`~support_tickets.usage.counters.REPLAY_HORIZON_SECONDS`, 24 h):
CloudWatch Logs delivers within seconds to minutes, Lambda retries an
asynchronous delivery for at most 6 h, and a delivery kept in the failure
queue is redriven within the horizon, so no line of the day arrives after it.

A day the API answers for: a calendar date ``YYYY-MM-DD``, not after today
(UTC) and not before :data:`EARLIEST_DAY`; anything else is a 400
``VALIDATION_ERROR``.
"""

from __future__ import annotations

import calendar
import dataclasses
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Final

from support_tickets.core.errors import ValidationFailed
from support_tickets.core.identity import Caller
from support_tickets.core.models import UsageCost, UsageResponse
from support_tickets.core.settings import get_settings
from support_tickets.data.placement import PlacedRecord, Placement
from support_tickets.data.tenant_registry import tenant_configs
from support_tickets.domain.tenancy import table_for
from support_tickets.usage import counters, prices
from support_tickets.usage.counters import UsageRepository

# No usage line can predate the metering (and Lambda's JSON log format, which
# it reads, dates from late 2023): an earlier day is a mistake, not a question.
EARLIEST_DAY: Final = date(2024, 1, 1)
DAY_PATTERN: Final = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
# Counters the authorizer's and the stream functions' usage lines add (docs/usage.md).
EXTRA_INVOCATIONS: Final = (counters.AUTHORIZER_INVOCATIONS,)
EXTRA_MB_MS: Final = (counters.AUTHORIZER_MB_MS, counters.STREAM_MB_MS)
COST_PLACES: Final = Decimal("1e-10")  # a ten-thousandth of a micro-dollar: a read unit is 1.25e-7
GB_SECONDS_PLACES: Final = Decimal("1e-9")
MB_MS_PER_GB_SECOND: Final = Decimal(1024 * 1000)
# A dedicated table's key rotates every 365 days: templates/dedicated-table.yaml turns
# EnableKeyRotation on and leaves RotationPeriodInDays at KMS's default (a test holds them equal).
KEY_ROTATION_PERIOD_SECONDS: Final = 365 * 86_400
DAY_SECONDS: Final = 86_400
# When a record placed its tenant in its own table: [start, end) in epoch seconds, end None while it stays.
Window = tuple[int, int | None]


def parse_day(text: str | None, now: datetime) -> str:
    """The day a request asks for (default: today, UTC), checked."""
    today = now.astimezone(UTC).date()
    if text is None:
        return today.isoformat()
    try:
        # fromisoformat alone also takes week dates ("2026-W48-3") and "20261125".
        day = date.fromisoformat(text) if re.fullmatch(DAY_PATTERN, text) else None
    except ValueError:
        day = None
    if day is None:
        raise ValidationFailed(details=[{"field": "day", "message": "expected a date, YYYY-MM-DD"}])
    if day > today:
        raise ValidationFailed(details=[{"field": "day", "message": "a day after today (UTC) has no usage yet"}])
    if day < EARLIEST_DAY:
        raise ValidationFailed(details=[{"field": "day", "message": f"no usage before {EARLIEST_DAY.isoformat()}"}])
    return day.isoformat()


def is_final(day: str, now: datetime) -> bool:
    """The day ended more than the replay horizon ago: its figures no longer change."""
    ended = datetime.combine(date.fromisoformat(day) + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    return now.astimezone(UTC) - ended >= timedelta(seconds=counters.REPLAY_HORIZON_SECONDS)


def _money(amount: Decimal) -> Decimal:
    return amount.quantize(COST_PLACES, rounding=ROUND_HALF_EVEN)


def own_table_windows(record: PlacedRecord) -> tuple[Window, ...]:
    """When the tenant's record places it in a table of its own: since
    ``placed_at`` if it is there now, and between ``previous_placed_at`` and
    ``placed_at`` if the table before was its own (a placement older than that
    is no longer on the record). Empty for a tenant that was never placed in its
    own table (as far as its record says)."""
    windows: list[Window] = []
    if record.placement == Placement.DEDICATED:
        windows.append((record.placed_at, None))
    if record.previous_table is not None and record.placed_at:
        windows.append((record.previous_placed_at, record.placed_at))
    return tuple(windows)


def dedicated_usd(day: str, windows: Sequence[Window], now: datetime) -> Decimal:
    """The day's share of the monthly price of the tenant's own key, for the
    seconds of ``day`` (until ``now``, for today) that ``windows`` cover: its
    month's price times those seconds over the month's seconds (KMS prorates
    the key hourly), with the rotations the key has had by then."""
    first = date.fromisoformat(day)
    start = int(datetime.combine(first, datetime.min.time(), tzinfo=UTC).timestamp())
    end = min(start + DAY_SECONDS, int(now.timestamp()))
    month_seconds = Decimal(calendar.monthrange(first.year, first.month)[1] * DAY_SECONDS)
    total = Decimal(0)
    for placed, left in windows:
        low, high = max(placed, start), min(end, end if left is None else left)
        if high > low:
            rotations = (low - placed) // KEY_ROTATION_PERIOD_SECONDS
            total += prices.kms_key_month_usd(rotations) * (high - low) / month_seconds
    return total


def usage_object(
    tenant_id: str,
    day: str,
    sums: Mapping[str, Decimal],
    now: datetime,
    own_table: Sequence[Window] = (),
) -> UsageResponse:
    """API.md's usage object of a day's summed counters; ``own_table``: when the
    tenant's record placed it in a table of its own (:func:`own_table_windows`):
    if any, ``cost_usd.dedicated`` (0 for a day none of them covers)."""
    zero = Decimal(0)
    requests_total = int(sums.get(counters.REQUESTS, zero))
    by_route = {
        name.removeprefix(counters.REQUESTS_PREFIX): int(count)
        for name, count in sorted(sums.items())
        if name.startswith(counters.REQUESTS_PREFIX) and count
    }
    read_units = sums.get(counters.READ_UNITS, zero)
    write_units = sums.get(counters.WRITE_UNITS, zero)
    invocations = requests_total + sum(int(sums.get(name, zero)) for name in EXTRA_INVOCATIONS)
    mb_ms = sums.get(counters.MB_MS, zero) + sum((sums.get(name, zero) for name in EXTRA_MB_MS), zero)
    webhook_invocations = int(sums.get(counters.WEBHOOK_INVOCATIONS, zero))
    webhook_gb_seconds = sums.get(counters.WEBHOOK_MB_MS, zero) / MB_MS_PER_GB_SECOND
    gb_seconds = mb_ms / MB_MS_PER_GB_SECOND
    api_gateway = _money(prices.api_gateway_usd(requests_total))
    lambda_cost = _money(prices.lambda_usd(invocations, gb_seconds))
    dynamodb = _money(prices.dynamodb_usd(read_units, write_units))
    webhooks = _money(
        prices.lambda_usd(webhook_invocations, webhook_gb_seconds)
        + prices.sqs_fifo_usd(int(sums.get(counters.WEBHOOK_SQS_REQUESTS, zero)))
        + prices.kms_usd(int(sums.get(counters.WEBHOOK_KMS_REQUESTS, zero)))
        + prices.dynamodb_storage_usd(int(sums.get(counters.WEBHOOK_STORED_KB_DAYS, zero)))
    )
    all_gb_seconds = gb_seconds + webhook_gb_seconds
    cost: UsageCost = {
        "api_gateway": float(api_gateway),
        "lambda": float(lambda_cost),
        "dynamodb": float(dynamodb),
        "webhooks": float(webhooks),
        "total": float(api_gateway + lambda_cost + dynamodb + webhooks),
    }
    if own_table:
        dedicated = _money(dedicated_usd(day, own_table, now))
        cost["dedicated"] = float(dedicated)
        cost["total"] = float(api_gateway + lambda_cost + dynamodb + webhooks + dedicated)
    return {
        "tenant_id": tenant_id,
        "day": day,
        "requests": by_route,
        "requests_total": requests_total,
        "dynamodb": {"read_units": float(read_units), "write_units": float(write_units)},
        "lambda": {
            "invocations": invocations + webhook_invocations,
            "gb_seconds": float(all_gb_seconds.quantize(GB_SECONDS_PLACES, rounding=ROUND_HALF_EVEN)),
        },
        "webhooks": {
            "deliveries": int(sums.get(counters.WEBHOOK_DELIVERIES, zero)),
            "attempts": int(sums.get(counters.WEBHOOK_ATTEMPTS, zero)),
        },
        "cost_usd": cost,
        "final": is_final(day, now),
    }


def get_usage(caller: Caller, day: str | None, now: datetime | None = None) -> UsageResponse:
    """The caller's tenant's usage of ``day`` (admins only; never another tenant's:
    the Query runs with the caller's tenant credentials). The counters are in
    the pool table whatever the tenant's placement (the usage ledger stays
    there), and so is its record, the one :func:`table_for` just read."""
    table = table_for(caller)
    caller.require_admin()
    ledger = dataclasses.replace(table, table_name=get_settings().table_name, writes_paused=False)
    record = tenant_configs().get(ledger)
    moment = now or datetime.now(UTC)
    checked = parse_day(day, moment)
    sums = UsageRepository(ledger).read_day(checked)
    return usage_object(ledger.tenant_id, checked, sums, moment, own_table_windows(record))
