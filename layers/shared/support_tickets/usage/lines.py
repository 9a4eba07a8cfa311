"""The stream functions' usage lines: one per tenant and invocation (docs/usage.md).

An invocation of a stream function (the aggregator, the audit writer) holds
the records of several tenants. Each tenant present in the batch gets one
``"usage"`` line (:data:`support_tickets.usage.meter.USAGE_MESSAGE`, the
message the metering function's subscription filter selects), carrying:

- ``records``: how many of the batch's records are the tenant's (the tenant of
  the record's key; a record whose key names no valid tenant is nobody's);
- ``read_units`` / ``write_units`` / ``dynamodb_calls``: what the tenant's
  records caused. A call that is wholly the tenant's (the audit writer's, all
  through :class:`~support_tickets.data.table.TenantTable`, which meters
  them under its tenant) is the tenant's; a call shared by several tenants'
  records (the aggregator's transaction of a chunk, its journal reads and
  writes) has its units apportioned by the weights its caller gives
  (:func:`add_shared`) and counts as a call of each tenant in it;
- ``duration_ms``: the tenant's share of the invocation's duration, by
  records; with ``memory_mb`` the metering function makes it MB x ms.

Shares are exact: each is a multiple of :data:`UNIT_QUANTUM` (or of
:data:`DURATION_QUANTUM`) and the shares of one amount add up to it exactly
(largest remainder), so a tenant never gets another's fraction and nothing
is lost or made up by rounding. The invocation itself (Lambda's request
charge) is on no tenant's figure: ``lambda.invocations`` is an integer per
tenant, and a shared invocation is nobody's whole one.

The lines are written in a ``finally``: an invocation that fails is billed
too (and its retry is another invocation, billed again).

**Retries are charged to the record that caused them.** Lambda retries a
stream batch from its first failed record (``ReportBatchItemFailures``), or
the halves of a batch whose invocation failed (``BisectBatchOnFunctionError``):
the records after the failed one come again with it, up to
``MaximumRetryAttempts`` times, whoever's they are. Both functions can tell a
record whose work was already done (the audit writer finds its event written,
``attribute_not_exists``; the aggregator finds it in a delivery journal), and
the invocation marks it (:meth:`StreamInvocation.found_applied`). The rule:
within an invocation, the share of the records found already applied (their
duration share, and the units their handling cost: the audit writer's
calls measured around the record, the aggregator's journal reads shared by
records) is charged to the tenant of the earliest record of the batch that
has a tenant and was *not* already applied (:meth:`StreamInvocation.payer`):
the one whose failure made Lambda send them again. If there is none (every
record was done: Lambda's own redelivery, a timeout after the work, a lost
checkpoint), each stays its own tenant's. ``records`` still counts a tenant's
own records. Why this and not "the records' own tenant": a neighbour's 15
records behind a failing one would pay six invocations for one piece of
work (docs/usage.md). What it cannot know: which record made an invocation
*fail* (a crash or a timeout names none); the earliest record not applied is
where the work stopped, and the one a retry is about. Moving a share keeps
every amount exact: the duration is apportioned by charged records (largest
remainder), the units move as measured.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any, Final

from support_tickets.core import keys
from support_tickets.core.identity import CONTEXT_TENANT
from support_tickets.usage import meter

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

# The ``function`` a stream function's usage lines name (the metering function accepts these).
AGGREGATE_COUNTS: Final = "aggregate_counts"
AUDIT_TRAIL: Final = "audit_trail"
STREAM_FUNCTIONS: Final = frozenset({AGGREGATE_COUNTS, AUDIT_TRAIL})
# The delivery function's lines (support_tickets.webhooks.metered_delivery; named here so the
# metering function need not import the delivery code).
DELIVER_WEBHOOK: Final = "deliver_webhook"
# Units are shared to a millionth (the metering function reads at most 6 fraction
# digits), durations to a microsecond (0.001 ms, as the API functions' lines).
UNIT_QUANTUM: Final = Decimal("0.000001")
DURATION_QUANTUM: Final = Decimal("0.001")


def apportion(total: Decimal, weights: Mapping[str, int], quantum: Decimal = UNIT_QUANTUM) -> dict[str, Decimal]:
    """``total`` shared by ``weights`` (tenant -> non-negative integer), each
    share a multiple of ``quantum``, the shares summing to ``total`` exactly
    (``total`` itself a multiple of ``quantum``). Largest remainder: each gets
    the floor of its exact share, and the quanta left go to the largest
    remainders (ties by tenant id, so the result is deterministic). Tenants of
    weight 0 get nothing; no weight at all, nobody gets anything."""
    positive = {tenant: weight for tenant, weight in weights.items() if weight > 0}
    whole = sum(positive.values())
    if whole == 0:
        return {}
    quanta = int((total / quantum).to_integral_value(rounding=ROUND_FLOOR))
    floors = {tenant: quanta * weight // whole for tenant, weight in positive.items()}
    left = quanta - sum(floors.values())
    by_remainder = sorted(positive, key=lambda tenant: (-((quanta * positive[tenant]) % whole), tenant))
    for tenant in by_remainder[:left]:
        floors[tenant] += 1
    return {tenant: count * quantum for tenant, count in floors.items()}


def add_shared(operation: str, response: Any, weights: Mapping[str, int]) -> None:
    """Count a call shared by several tenants' records: its units apportioned by
    ``weights``, and one call on each tenant's account."""
    read, write = meter.response_units(operation, response)
    reads, writes = apportion(read, weights), apportion(write, weights)
    for tenant in sorted({tenant for tenant, weight in weights.items() if weight > 0}):
        meter.METER.add_units(reads.get(tenant, meter.ZERO), writes.get(tenant, meter.ZERO), tenant)


def tenant_of_record(record: Mapping[str, Any]) -> str | None:
    """The tenant of a stream record as Lambda delivers it (its key's), or ``None``."""
    stream = record.get("dynamodb")
    pk = stream.get("Keys", {}).get("pk", {}).get("S") if isinstance(stream, Mapping) else None
    if not isinstance(pk, str):
        return None
    try:
        return keys.tenant_of_key(pk)
    except ValueError:
        return None


def records_by_tenant(records: Iterable[Any]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for record in records:
        tenant = tenant_of_record(record) if isinstance(record, Mapping) else None
        if tenant is not None:
            counts[tenant] += 1
    return counts


def payer_of(tenants: Sequence[str | None], applied_before: Collection[int]) -> str | None:
    """Who is charged for the records found already applied: the tenant of the
    earliest record (with a tenant) not among ``applied_before`` (indexes into
    ``tenants``, the batch's records' tenants in order), or ``None``."""
    return next(
        (tenant for index, tenant in enumerate(tenants) if tenant is not None and index not in applied_before), None
    )


def charged_records(tenants: Sequence[str | None], applied_before: Collection[int]) -> Counter[str]:
    """The records each tenant is charged for: its own, except those found
    already applied, which are :func:`payer_of`'s (when there is one)."""
    payer = payer_of(tenants, applied_before)
    charged: Counter[str] = Counter()
    for index, tenant in enumerate(tenants):
        charged_to = payer if payer is not None and index in applied_before else tenant
        if charged_to is not None:
            charged[charged_to] += 1
    return charged


def _minus(a: meter.Consumed, b: meter.Consumed) -> meter.Consumed:
    return meter.Consumed(a.read_units - b.read_units, a.write_units - b.write_units, a.calls - b.calls)


def _plus(a: meter.Consumed, b: meter.Consumed) -> meter.Consumed:
    return meter.Consumed(a.read_units + b.read_units, a.write_units + b.write_units, a.calls + b.calls)


@dataclass
class StreamInvocation:
    """One invocation's records (their tenants, in order) and those found
    already applied, with what handling them again cost (module docstring)."""

    tenants: list[str | None]
    sequence_numbers: dict[str, int] = field(default_factory=dict)
    applied_before: set[int] = field(default_factory=set)
    _again: dict[int, meter.Consumed] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Iterable[Any]) -> StreamInvocation:
        tenants: list[str | None] = []
        sequence_numbers: dict[str, int] = {}
        for index, record in enumerate(records):
            tenants.append(tenant_of_record(record) if isinstance(record, Mapping) else None)
            stream = record.get("dynamodb") if isinstance(record, Mapping) else None
            sequence = stream.get("SequenceNumber") if isinstance(stream, Mapping) else None
            if isinstance(sequence, str):
                sequence_numbers.setdefault(sequence, index)
        return cls(tenants, sequence_numbers)

    def index_of(self, sequence_number: str | None) -> int | None:
        return None if sequence_number is None else self.sequence_numbers.get(sequence_number)

    def units_so_far(self, index: int | None) -> meter.Consumed:
        """What the record's tenant has consumed so far in this invocation (to
        measure one record's handling: before and after)."""
        tenant = self.tenants[index] if index is not None else None
        return meter.METER.by_tenant().get(tenant, meter.NOTHING) if tenant else meter.NOTHING

    def found_applied(self, index: int | None, since: meter.Consumed | None = None) -> None:
        """Record ``index`` was found already applied (its work done by an earlier
        delivery); ``since``: its tenant's units before it was handled, when the
        units of handling it again are its own to move (the audit writer's)."""
        if index is None or self.tenants[index] is None:
            return
        self.applied_before.add(index)
        if since is not None:
            self._again[index] = _minus(self.units_so_far(index), since)

    def payer(self) -> str | None:
        return payer_of(self.tenants, self.applied_before)

    def charged_records(self) -> Counter[str]:
        return charged_records(self.tenants, self.applied_before)

    def charged_units(self, consumed: Mapping[str, meter.Consumed]) -> dict[str, meter.Consumed]:
        """``consumed`` (per tenant) with the units of records handled again moved to the payer."""
        charged = dict(consumed)
        payer = self.payer()
        if payer is None:
            return charged
        for index, units in self._again.items():
            tenant = self.tenants[index]
            if tenant is None or tenant == payer:
                continue
            charged[tenant] = _minus(charged.get(tenant, meter.NOTHING), units)
            charged[payer] = _plus(charged.get(payer, meter.NOTHING), units)
        return charged


def usage_lines(
    function: str,
    context: Any,
    records: Mapping[str, int],
    consumed: Mapping[str, meter.Consumed],
    elapsed_ms: float,
    *,
    charged: Mapping[str, int] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each tenant's usage fields of one invocation (tenant -> the line's
    ``usage``): ``records`` its own, the duration shared by the records each
    is ``charged`` for (by default its own)."""
    duration = Decimal(repr(elapsed_ms)).quantize(DURATION_QUANTUM, rounding=ROUND_FLOOR)
    weights = records if charged is None else charged
    shares = apportion(duration, weights, DURATION_QUANTUM)
    tenants = sorted(set(records) | set(consumed) | {tenant for tenant, weight in weights.items() if weight > 0})
    return {
        tenant: usage_line(
            function,
            context,
            {"records": records.get(tenant, 0)},
            consumed.get(tenant, meter.NOTHING),
            shares.get(tenant, meter.ZERO),
        )
        for tenant in tenants
    }


def usage_line(
    function: str, context: Any, counts: Mapping[str, int], units: meter.Consumed, duration_ms: Decimal
) -> dict[str, Any]:
    """One tenant's ``usage`` fields of one invocation, whichever function logs it (the
    stream functions here, the delivery function in
    :mod:`support_tickets.webhooks.metered_delivery`): the function and the request, the
    function's own ``counts``, the DynamoDB units and calls, the tenant's share of the
    duration and the function's memory size (the metering function makes them MB x ms)."""
    return {
        "function": function,
        "request_id": getattr(context, "aws_request_id", None),
        **counts,
        "read_units": float(units.read_units),
        "write_units": float(units.write_units),
        "dynamodb_calls": units.calls,
        "duration_ms": float(duration_ms),
        "memory_mb": int(getattr(context, "memory_limit_in_mb", 0) or 0),
    }


def log_usage_lines(logger: Logger, lines: Mapping[str, Mapping[str, Any]]) -> None:
    """One :data:`~support_tickets.usage.meter.USAGE_MESSAGE` line per tenant (the
    message the metering function's subscription filter selects), under its tenant."""
    for tenant, usage in lines.items():
        logger.info(meter.USAGE_MESSAGE, extra={CONTEXT_TENANT: tenant, "usage": usage})


@contextmanager
def metered_invocation(
    logger: Logger, function: str, context: Any, records: Iterable[Any]
) -> Iterator[StreamInvocation]:
    """Meter the block (one invocation of a stream function over ``records``)
    and log its usage lines, one per tenant, when it ends, also when it fails.
    The block marks the records it finds already applied on the invocation it gets."""
    meter.start()
    records = list(records)
    tenants = records_by_tenant(records)
    invocation = StreamInvocation.of(records)
    try:
        yield invocation
    finally:
        elapsed_ms = meter.finish().elapsed_ms
        consumed = invocation.charged_units(meter.METER.by_tenant())
        log_usage_lines(
            logger, usage_lines(function, context, tenants, consumed, elapsed_ms, charged=invocation.charged_records())
        )
