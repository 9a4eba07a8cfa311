"""Exactly-once usage counters per (tenant, UTC day), from the functions' usage log lines.

They are the API functions' ``"request handled"`` log lines, the authorizer's ``"usage"`` lines (one per
verified token: ``authorizer_invocations``, ``authorizer_mb_ms``, its DynamoDB
units with the tenant's) and the stream functions' ``"usage"`` lines (one per
tenant and invocation: ``stream_mb_ms``, their DynamoDB units with the
tenant's; no invocation: a shared invocation is no tenant's whole one) and
the delivery function's ``"usage"`` lines (one per tenant and invocation:
``webhook_*`` counters, its DynamoDB units with the tenant's;
:mod:`support_tickets.webhooks.metered_delivery`) (docs/usage.md).

A CloudWatch Logs subscription filter delivers the matching lines of one log
stream (one execution environment) to the metering function: ``awslogs.data``
is base64 of gzip of ``{"messageType", "logGroup", "logStream", "logEvents":
[{"id", "timestamp", "message"}]}``, each ``message`` one JSON log line. Lambda
invokes the function asynchronously, so a delivery can arrive more than once
(Lambda's retries after an error or a timeout resend the same event).

The scheme: a **delivery journal** per (tenant, day).

1. A delivery's usage lines are grouped by (tenant, UTC day of the event's
   timestamp); a line whose event id already occurred in the delivery is a
   duplicate and is not counted again.
2. Each group is one ``TransactWriteItems`` of two items: a journal item
   ``TENANT#<t>|USAGE#JOURNAL`` / ``<digest>`` (``attribute_not_exists``,
   ``expiration`` TTL), the digest being SHA-256 of the log group, the log
   stream, the day and the group's sorted event ids; and one ``ADD`` of the
   group's summed counters on ``TENANT#<t>|USAGE`` / ``<day>#<slot>`` (the
   slot from the log stream, :func:`support_tickets.core.keys.usage_slot`).
   All of it lands or none of it does.
3. A redelivered group finds its journal: the transaction is cancelled on the
   journal's condition (``ReturnValuesOnConditionCheckFailure`` hands back the
   journal, whose line count must agree) and the group is skipped. Any other
   cancellation (a conflict with another delivery on the same counter item,
   throttling) applied nothing and is retried; a group still failing is left
   for Lambda's retry of the whole delivery, where the groups that did commit
   are skipped by their journals.
4. The transaction also holds a ``ConditionCheck`` on the tenant's record
   (``TENANT#<t>|CONFIG``: ``offboarding_since`` absent or NULL): a
   group of a tenant being offboarded (or offboarded: ``make offboard`` keeps
   the record, marked, until no delivery can arrive any more, the replay
   horizon included) is cancelled on it, writes nothing, and is skipped and
   reported. A delivery that Lambda retried for hours (or an operator redrove)
   after the offboarding erased the tenant's usage partitions thus never
   writes them again. The check is part of the group's transaction: no extra
   round trip, and no race with the offboarding marking the record (either the
   group committed before, and the offboarding's erasure, which follows the
   mark, removes it; or the check fails). An active tenant's stored record
   holds the mark as NULL; a tenant without a record (never stored: the
   defaults) is counted too.

Counters (all ``ADD``, numbers only: DynamoDB's ``ADD`` works on numbers and
sets, not on a map's members, so requests per route are top-level attributes
named ``requests:<METHOD> <path>``, through ``ExpressionAttributeNames``; one
item per day and slot keeps a day one Query): ``requests``,
``requests:<route>``, ``read_units``, ``write_units``, ``dynamodb_calls``,
``duration_ms`` and ``mb_ms`` (memory size times duration, MB·ms: GB-seconds are
``mb_ms / 1024 / 1000``, kept exact). Numbers are read from the JSON as
:class:`~decimal.Decimal`, so sums are exact.

What the bookkeeping holds: one journal item per (delivery, tenant, day), of
fixed size (a digest, a line count, a TTL), expiring after the replay horizon
(:data:`DEFAULT_REPLAY_HORIZON_SECONDS`, 24 h: Lambda keeps an asynchronous
event at most 6 h). The counters never grow with traffic.

Assumed of CloudWatch Logs (documented, not ours to enforce): a redelivery
resends the same events; two different deliveries never share an event. A line
that is not a usage line is ignored; a usage line that can't be counted (not
JSON, a field missing or out of range, no valid tenant) is *malformed*: counted
and reported, never a reason to fail the delivery.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
import random
import re
import time
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from support_tickets.core import keys
from support_tickets.data.tenant_registry import OFFBOARDING_SINCE
from support_tickets.streams.records import own_client
from support_tickets.usage import counters
from support_tickets.usage.counters import REPLAY_HORIZON_SECONDS, REQUESTS_PREFIX
from support_tickets.usage.lines import DELIVER_WEBHOOK, STREAM_FUNCTIONS
from support_tickets.usage.meter import USAGE_MESSAGE as USAGE_LINE_MESSAGE

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

USAGE_MESSAGE: Final = "request handled"
# The "usage" lines: functions whose invocations they attribute to a tenant.
INVOCATION_MESSAGE: Final = USAGE_LINE_MESSAGE
REQUEST: Final = "request"
AUTHORIZER: Final = "authorizer"
INVOCATION_FUNCTIONS: Final = frozenset({AUTHORIZER, DELIVER_WEBHOOK}) | STREAM_FUNCTIONS
# What a delivery line counts besides units and duration (their bounds: far above a batch's 10 messages).
WEBHOOK_COUNTS: Final = ("invocations", "attempts", "deliveries", "sqs_requests", "kms_requests", "stored_kb_days")
MAX_WEBHOOK_COUNT: Final = 10**6
# Storage: a release's 200 parked messages of up to ~190 KB, or 10 records of 30 days, in KB x days.
MAX_WEBHOOK_STORED_KB_DAYS: Final = 10**9
DEFAULT_REPLAY_HORIZON_SECONDS: Final = REPLAY_HORIZON_SECONDS
TRANSACTION_ATTEMPTS: Final = 4
CHECK_FAILED: Final = "ConditionalCheckFailed"
# The position of the tenant record's check in a group's transaction (journal, counters, check).
OFFBOARDING_CHECK: Final = 2
# Bounds a line's numbers must be within to be counted (a request's units and
# duration: far above any real request, far below DynamoDB's 38 digits).
MAX_UNITS: Final = Decimal(10**9)
MAX_DURATION_MS: Final = Decimal(15 * 60 * 1000)
MAX_MEMORY_MB: Final = 10_240
MAX_FRACTION_DIGITS: Final = 6
MAX_TIMESTAMP_MS: Final = 10**13  # the year 2286: a calendar day for any real event
# "<METHOD> <API Gateway resource path>", as the resolver writes it.
ROUTE_PATTERN: Final = re.compile(r"^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) /[A-Za-z0-9_./{}-]{0,200}$")


class MalformedDelivery(ValueError):
    """A payload that is not a CloudWatch Logs delivery at all (nothing in it can be read)."""


class JournalMismatch(RuntimeError):
    """A journal with this delivery's digest disagrees with it: never guess, never count."""


@dataclass(frozen=True, slots=True)
class UsageLine:
    """One request's usage, as its ``"request handled"`` line carries it
    (``kind`` :data:`REQUEST`), or one invocation's for a tenant, as a
    ``"usage"`` line carries it (``kind`` the function: :data:`AUTHORIZER`
    or a stream function's; ``route`` empty)."""

    event_id: str
    tenant_id: str
    day: str
    route: str
    read_units: Decimal
    write_units: Decimal
    dynamodb_calls: int
    duration_ms: Decimal
    memory_mb: int
    kind: str = REQUEST
    # The delivery function's counts (:data:`WEBHOOK_COUNTS`), zero on every other line.
    webhook: tuple[int, ...] = (0,) * len(WEBHOOK_COUNTS)


@dataclass(frozen=True, slots=True)
class Delivery:
    log_group: str
    log_stream: str
    lines: tuple[UsageLine, ...] = ()
    events: int = 0
    ignored: int = 0
    duplicates: int = 0
    malformed: tuple[str, ...] = ()  # the reason for each malformed line (never its content)
    control: bool = False


def _number(value: Any, *, maximum: Decimal, name: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise ValueError(f"{name} is not a number")
    number = Decimal(value)
    if not number.is_finite() or not 0 <= number <= maximum:
        raise ValueError(f"{name} out of range")
    exponent = number.as_tuple().exponent
    if not isinstance(exponent, int) or exponent < -MAX_FRACTION_DIGITS:
        raise ValueError(f"{name} has too many fraction digits")
    return number


def _integer(value: Any, *, maximum: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ValueError(f"{name} is not an integer in range")
    return value


def utc_day(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def _kind_and_route(message: str, usage: Mapping[str, Any]) -> tuple[str, str]:
    """A request's line names its route; an invocation's line its function."""
    if message == USAGE_MESSAGE:
        route = usage.get("route")
        if not isinstance(route, str) or not ROUTE_PATTERN.fullmatch(route):
            raise ValueError("no valid route")
        return REQUEST, route
    function = usage.get("function")
    if not isinstance(function, str) or function not in INVOCATION_FUNCTIONS:
        raise ValueError("no known function")
    return function, ""


def usage_line(event: Mapping[str, Any]) -> UsageLine | None:
    """The usage of one log event; ``None`` when it is not a usage line.
    :class:`ValueError` when it is one that can't be counted."""
    message = event.get("message")
    if not isinstance(message, str):
        raise ValueError("event without a message")
    try:
        line = json.loads(message, parse_float=Decimal)
    except (ValueError, RecursionError) as exc:
        if USAGE_MESSAGE in message:
            raise ValueError("a usage line that is not JSON") from exc
        return None
    if not isinstance(line, dict) or line.get("message") not in (USAGE_MESSAGE, INVOCATION_MESSAGE):
        return None
    usage = line.get("usage")
    if not isinstance(usage, dict):
        raise ValueError("no usage object")
    event_id, timestamp = event.get("id"), event.get("timestamp")
    if not isinstance(event_id, str) or not event_id or len(event_id) > 256:
        raise ValueError("no event id")
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not 0 <= timestamp < MAX_TIMESTAMP_MS:
        raise ValueError("no event timestamp")
    try:
        tenant_id = keys.validate_tenant_id(line.get("tenant_id"))
    except keys.InvalidTenantId as exc:
        raise ValueError("no valid tenant_id") from exc
    kind, route = _kind_and_route(line["message"], usage)
    request_id = usage.get("request_id")
    if not isinstance(request_id, str) or not request_id:
        raise ValueError("no request_id")
    webhook = (
        tuple(
            _integer(
                usage.get(name, 0 if name == "stored_kb_days" else None),  # lines written before it: none
                maximum=MAX_WEBHOOK_STORED_KB_DAYS if name == "stored_kb_days" else MAX_WEBHOOK_COUNT,
                name=name,
            )
            for name in WEBHOOK_COUNTS
        )
        if kind == DELIVER_WEBHOOK
        else (0,) * len(WEBHOOK_COUNTS)
    )
    if webhook[0] > 1:
        raise ValueError("invocations is 0 or 1")
    return UsageLine(
        event_id=event_id,
        tenant_id=tenant_id,
        day=utc_day(timestamp),
        route=route,
        read_units=_number(usage.get("read_units"), maximum=MAX_UNITS, name="read_units"),
        write_units=_number(usage.get("write_units"), maximum=MAX_UNITS, name="write_units"),
        dynamodb_calls=_integer(usage.get("dynamodb_calls"), maximum=10**6, name="dynamodb_calls"),
        duration_ms=_number(usage.get("duration_ms"), maximum=MAX_DURATION_MS, name="duration_ms"),
        memory_mb=_integer(usage.get("memory_mb"), maximum=MAX_MEMORY_MB, name="memory_mb"),
        kind=kind,
        webhook=webhook,
    )


def decode_payload(event: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON inside ``awslogs.data`` (base64 of gzip)."""
    awslogs = event.get("awslogs")
    data = awslogs.get("data") if isinstance(awslogs, Mapping) else None
    if not isinstance(data, str):
        raise MalformedDelivery("not a CloudWatch Logs delivery (no awslogs.data)")
    try:
        payload = json.loads(gzip.decompress(base64.b64decode(data, validate=True)))
    except (binascii.Error, OSError, EOFError, zlib.error, ValueError) as exc:
        raise MalformedDelivery("awslogs.data is not base64 of gzipped JSON") from exc
    if not isinstance(payload, dict):
        raise MalformedDelivery("awslogs.data is not a JSON object")
    return payload


def read_delivery(event: Mapping[str, Any]) -> Delivery:
    """A subscription delivery as the usage lines it holds, per event once."""
    payload = decode_payload(event)
    log_group, log_stream = payload.get("logGroup"), payload.get("logStream")
    if payload.get("messageType") == "CONTROL_MESSAGE":
        return Delivery(str(log_group or ""), str(log_stream or ""), control=True)
    events = payload.get("logEvents")
    if not isinstance(log_group, str) or not isinstance(log_stream, str) or not isinstance(events, list):
        raise MalformedDelivery("a delivery without logGroup, logStream or logEvents")
    lines: list[UsageLine] = []
    seen: set[str] = set()
    ignored = duplicates = 0
    malformed: list[str] = []
    for item in events:
        try:
            if not isinstance(item, dict):
                raise ValueError("a log event that is not an object")
            line = usage_line(item)
        except ValueError as exc:
            malformed.append(str(exc))
            continue
        if line is None:
            ignored += 1
        elif line.event_id in seen:
            duplicates += 1
        else:
            seen.add(line.event_id)
            lines.append(line)
    return Delivery(log_group, log_stream, tuple(lines), len(events), ignored, duplicates, tuple(malformed))


@dataclass
class Totals:
    """What a group of lines adds to its counter item."""

    lines: int = 0
    requests: int = 0
    by_route: Counter[str] = field(default_factory=Counter)
    read_units: Decimal = Decimal(0)
    write_units: Decimal = Decimal(0)
    dynamodb_calls: int = 0
    duration_ms: Decimal = Decimal(0)
    mb_ms: Decimal = Decimal(0)
    authorizer_invocations: int = 0
    authorizer_mb_ms: Decimal = Decimal(0)
    stream_lines: int = 0
    stream_mb_ms: Decimal = Decimal(0)
    webhook_lines: int = 0
    webhook_mb_ms: Decimal = Decimal(0)
    webhook_counts: Counter[str] = field(default_factory=Counter)

    def add(self, line: UsageLine) -> None:
        self.lines += 1
        self.read_units += line.read_units
        self.write_units += line.write_units
        self.dynamodb_calls += line.dynamodb_calls
        if line.kind == AUTHORIZER:
            self.authorizer_invocations += 1
            self.authorizer_mb_ms += line.duration_ms * line.memory_mb
            return
        if line.kind in STREAM_FUNCTIONS:
            self.stream_lines += 1
            self.stream_mb_ms += line.duration_ms * line.memory_mb
            return
        if line.kind == DELIVER_WEBHOOK:
            self.webhook_lines += 1
            self.webhook_mb_ms += line.duration_ms * line.memory_mb
            self.webhook_counts.update(dict(zip(WEBHOOK_COUNTS, line.webhook, strict=True)))
            return
        self.requests += 1
        self.by_route[line.route] += 1
        self.duration_ms += line.duration_ms
        self.mb_ms += line.duration_ms * line.memory_mb

    def counters(self) -> dict[str, Decimal | int]:
        """Attribute name -> amount to ``ADD`` (the item's attributes); the
        authorizer's and the stream functions' only when the group has their lines."""
        made: dict[str, Decimal | int] = {
            counters.REQUESTS: self.requests,
            **{f"{REQUESTS_PREFIX}{route}": count for route, count in sorted(self.by_route.items())},
            counters.READ_UNITS: self.read_units,
            counters.WRITE_UNITS: self.write_units,
            counters.DYNAMODB_CALLS: self.dynamodb_calls,
            counters.DURATION_MS: self.duration_ms,
            counters.MB_MS: self.mb_ms,
        }
        if self.authorizer_invocations:
            made[counters.AUTHORIZER_INVOCATIONS] = self.authorizer_invocations
            made[counters.AUTHORIZER_MB_MS] = self.authorizer_mb_ms
        if self.stream_lines:
            made[counters.STREAM_MB_MS] = self.stream_mb_ms
        if self.webhook_lines:
            made[counters.WEBHOOK_MB_MS] = self.webhook_mb_ms
            for name in WEBHOOK_COUNTS:
                made[counters.WEBHOOK_PREFIX + name] = self.webhook_counts[name]
        return made


@dataclass(frozen=True, slots=True)
class Group:
    tenant_id: str
    day: str
    event_ids: tuple[str, ...]
    totals: Totals

    def digest(self, delivery: Delivery) -> str:
        parts = [delivery.log_group, delivery.log_stream, self.tenant_id, self.day, *sorted(self.event_ids)]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def groups(delivery: Delivery) -> list[Group]:
    """The delivery's lines by (tenant, day), in a stable order."""
    by_key: dict[tuple[str, str], tuple[list[str], Totals]] = {}
    for line in delivery.lines:
        ids, totals = by_key.setdefault((line.tenant_id, line.day), ([], Totals()))
        ids.append(line.event_id)
        totals.add(line)
    return [Group(tenant, day, tuple(ids), totals) for (tenant, day), (ids, totals) in sorted(by_key.items())]


@dataclass(frozen=True, slots=True)
class SkippedGroup:
    """A group not counted because its tenant is being (or was) offboarded."""

    tenant_id: str
    day: str
    lines: int


@dataclass
class MeterResult:
    groups: int = 0
    applied: int = 0
    redelivered: int = 0
    failed: int = 0
    lines_applied: int = 0
    attempts: int = 0
    offboarded: list[SkippedGroup] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.failed == 0


@dataclass
class UsageLedger:
    """Applies one delivery's usage exactly once (see the module docstring)."""

    table_name: str
    client: DynamoDBClient
    replay_horizon_seconds: int = DEFAULT_REPLAY_HORIZON_SECONDS
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    def apply(self, delivery: Delivery) -> MeterResult:
        result = MeterResult()
        slot = keys.usage_slot(delivery.log_stream)
        for group in groups(delivery):
            result.groups += 1
            outcome = self._transact(delivery, group, slot, result)
            if outcome == "applied":
                result.applied += 1
                result.lines_applied += group.totals.lines
            elif outcome == "redelivered":
                result.redelivered += 1
            elif outcome == "offboarded":
                result.offboarded.append(SkippedGroup(group.tenant_id, group.day, group.totals.lines))
            else:
                result.failed += 1
        return result

    def _items(self, delivery: Delivery, group: Group, slot: int) -> list[dict[str, Any]]:
        journal = {
            **keys.usage_journal_key(group.tenant_id, group.digest(delivery)),
            "day": {"S": group.day},
            "lines": {"N": str(group.totals.lines)},
            "expiration": {"N": str(int(self.clock()) + self.replay_horizon_seconds)},
        }
        names: dict[str, str] = {}
        values: dict[str, dict[str, str]] = {}
        for index, (name, amount) in enumerate(group.totals.counters().items()):
            names[f"#c{index}"] = name
            values[f":c{index}"] = {"N": format(amount, "f")}  # never exponent notation
        return [
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": journal,
                    "ConditionExpression": "attribute_not_exists(pk)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": {"pk": {"S": keys.usage_pk(group.tenant_id)}, "sk": {"S": keys.usage_sk(group.day, slot)}},
                    "UpdateExpression": "ADD " + ", ".join(f"{name} {name.replace('#', ':')}" for name in names),
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            },
            {
                # Never for a tenant being offboarded (step 4 of the module docstring).
                "ConditionCheck": {
                    "TableName": self.table_name,
                    "Key": keys.tenant_config_key(group.tenant_id),
                    # A stored record holds every field: an active tenant's mark is NULL.
                    "ConditionExpression": "attribute_not_exists(#offboarding) OR attribute_type(#offboarding, :null)",
                    "ExpressionAttributeNames": {"#offboarding": OFFBOARDING_SINCE},
                    "ExpressionAttributeValues": {":null": {"S": "NULL"}},
                }
            },
        ]

    def _transact(self, delivery: Delivery, group: Group, slot: int, result: MeterResult) -> str:
        """``applied``, ``redelivered`` (its journal exists), ``offboarded`` (its
        tenant's record is marked) or ``failed`` (nothing applied)."""
        items = self._items(delivery, group, slot)
        for attempt in range(TRANSACTION_ATTEMPTS):
            result.attempts += 1
            try:
                self.client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    return "failed"
                reasons: Sequence[Mapping[str, Any]] = exc.response.get("CancellationReasons", [])
                if len(reasons) > OFFBOARDING_CHECK and reasons[OFFBOARDING_CHECK].get("Code") == CHECK_FAILED:
                    return "offboarded"
                if reasons and reasons[0].get("Code") == CHECK_FAILED:
                    self._check_journal(reasons[0].get("Item"), group)
                    return "redelivered"
                if attempt + 1 < TRANSACTION_ATTEMPTS:
                    self.sleep(random.uniform(0, 0.05 * 2**attempt))  # noqa: S311 - jitter, not crypto
                continue
            except BotoCoreError:
                return "failed"
            return "applied"
        return "failed"

    @staticmethod
    def _check_journal(item: Mapping[str, Any] | None, group: Group) -> None:
        if item is None:
            return  # an emulator that does not return it: the condition alone says it exists
        if item.get("lines", {}).get("N") != str(group.totals.lines) or item.get("day", {}).get("S") != group.day:
            raise JournalMismatch("a journal with this delivery's digest lists other lines")


@cache
def metering_client() -> DynamoDBClient:
    """The metering function's own client (its execution role: usage items only)."""
    client: DynamoDBClient = own_client("dynamodb")
    return client
