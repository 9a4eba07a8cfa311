"""The stream functions' usage lines: one per tenant and invocation (docs/usage.md).

An invocation of a stream function (the aggregator, the audit writer) holds
the records of several tenants. Each tenant present in the batch gets one
``"usage"`` line (:data:`support_tickets.core.metering.USAGE_MESSAGE`, the
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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any, Final

from support_tickets.core import keys, metering
from support_tickets.core.identity import CONTEXT_TENANT

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

# The ``function`` a stream function's usage lines name (the metering function accepts these).
AGGREGATE_COUNTS: Final = "aggregate_counts"
AUDIT_TRAIL: Final = "audit_trail"
STREAM_FUNCTIONS: Final = frozenset({AGGREGATE_COUNTS, AUDIT_TRAIL})
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
    read, write = metering.response_units(operation, response)
    reads, writes = apportion(read, weights), apportion(write, weights)
    for tenant in sorted({tenant for tenant, weight in weights.items() if weight > 0}):
        metering.METER.add_units(reads.get(tenant, metering.ZERO), writes.get(tenant, metering.ZERO), tenant)


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


def usage_lines(
    function: str,
    context: Any,
    records: Mapping[str, int],
    consumed: Mapping[str, metering.Consumed],
    elapsed_ms: float,
) -> dict[str, dict[str, Any]]:
    """Each tenant's usage fields of one invocation (tenant -> the line's ``usage``)."""
    duration = Decimal(repr(elapsed_ms)).quantize(DURATION_QUANTUM, rounding=ROUND_FLOOR)
    shares = apportion(duration, records, DURATION_QUANTUM)
    memory_mb = int(getattr(context, "memory_limit_in_mb", 0) or 0)
    lines: dict[str, dict[str, Any]] = {}
    for tenant in sorted(set(records) | set(consumed)):
        units = consumed.get(tenant, metering.NOTHING)
        lines[tenant] = {
            "function": function,
            "request_id": getattr(context, "aws_request_id", None),
            "records": records.get(tenant, 0),
            "read_units": float(units.read_units),
            "write_units": float(units.write_units),
            "dynamodb_calls": units.calls,
            "duration_ms": float(shares.get(tenant, metering.ZERO)),
            "memory_mb": memory_mb,
        }
    return lines


@contextmanager
def metered_invocation(logger: Logger, function: str, context: Any, records: Iterable[Any]) -> Iterator[None]:
    """Meter the block (one invocation of a stream function over ``records``)
    and log its usage lines, one per tenant, when it ends, also when it fails."""
    metering.start()
    tenants = records_by_tenant(records)
    try:
        yield
    finally:
        elapsed_ms = metering.finish().elapsed_ms
        for tenant, usage in usage_lines(function, context, tenants, metering.METER.by_tenant(), elapsed_ms).items():
            logger.info(metering.USAGE_MESSAGE, extra={CONTEXT_TENANT: tenant, "usage": usage})
