"""What one request consumed, measured on its way: DynamoDB capacity units.

Every DynamoDB call of a tenant's request goes through
:meth:`support_tickets.data.table.TenantTable.call` (the idempotency store's
too), which asks for ``ReturnConsumedCapacity="TOTAL"`` (the table's units
plus its indexes') and adds the answer here. The resolver starts a request
with :func:`start` and writes what :func:`finish` returns into the request's
one ``"request handled"`` line (docs/usage.md): nothing is written anywhere
else on the request's path.

One meter per execution environment: Lambda runs one invocation at a time in
it, and the calls a request makes in parallel (the audit trail's scatter
reads) add under a lock. Units are kept as :class:`~decimal.Decimal`
(DynamoDB's are multiples of 0.5), so sums are exact.

The meter also keeps the units per tenant (each :class:`TenantTable` call
names its tenant; shared calls are apportioned by :func:`add_units`): an API
request has one tenant, but a stream function's invocation holds the records
of several, and its usage lines are per tenant
(:mod:`support_tickets.usage.lines`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

# Operations whose ConsumedCapacity is read units (every other metered one writes).
READ_OPERATIONS: Final = frozenset({"get_item", "query", "batch_get_item", "transact_get_items", "scan"})
# Operations that accept ReturnConsumedCapacity.
METERED_OPERATIONS: Final = READ_OPERATIONS | frozenset(
    {"put_item", "update_item", "delete_item", "batch_write_item", "transact_write_items"}
)
ZERO: Final = Decimal(0)
# The message of a usage line that is not a request's (the authorizer's, per
# verified token): the metering function's subscription filter selects it too.
USAGE_MESSAGE: Final = "usage"


@dataclass(frozen=True, slots=True)
class Consumed:
    """What a request consumed so far."""

    read_units: Decimal = ZERO
    write_units: Decimal = ZERO
    calls: int = 0
    elapsed_ms: float = 0.0


NOTHING: Final = Consumed()


def _units(value: Any) -> Decimal:
    return Decimal(str(value)) if value is not None else ZERO


def split_units(operation: str, consumed: Any) -> tuple[Decimal, Decimal]:
    """(read, write) units of one call's ``ConsumedCapacity`` (an object, or a
    list of them for batches and transactions). ``ReadCapacityUnits`` and
    ``WriteCapacityUnits`` when DynamoDB gives them, else ``CapacityUnits``
    by the kind of operation."""
    entries = consumed if isinstance(consumed, list) else [consumed] if isinstance(consumed, Mapping) else []
    read = write = ZERO
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        if "ReadCapacityUnits" in entry or "WriteCapacityUnits" in entry:
            read += _units(entry.get("ReadCapacityUnits"))
            write += _units(entry.get("WriteCapacityUnits"))
        elif operation in READ_OPERATIONS:
            read += _units(entry.get("CapacityUnits"))
        else:
            write += _units(entry.get("CapacityUnits"))
    return read, write


def response_units(operation: str, response: Any) -> tuple[Decimal, Decimal]:
    """(read, write) units of one call's response (none without ``ConsumedCapacity``)."""
    consumed = response.get("ConsumedCapacity") if isinstance(response, Mapping) else None
    return split_units(operation, consumed)


class RequestMeter:
    """The units of the request in progress (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read = ZERO
        self._write = ZERO
        self._calls = 0
        self._started = time.perf_counter()
        self._by_tenant: dict[str, list[Any]] = {}  # tenant -> [read, write, calls]

    def start(self) -> None:
        with self._lock:
            self._read = self._write = ZERO
            self._calls = 0
            self._started = time.perf_counter()
            self._by_tenant = {}

    def add(self, operation: str, response: Any, tenant_id: str | None = None) -> None:
        """Count one call's answer (a response without ``ConsumedCapacity`` adds no units),
        on ``tenant_id``'s account too when the call is wholly that tenant's."""
        read, write = response_units(operation, response)
        self.add_units(read, write, tenant_id)

    def add_units(self, read: Decimal, write: Decimal, tenant_id: str | None = None, calls: int = 1) -> None:
        """Count units (a call's, or a tenant's share of a shared call's)."""
        with self._lock:
            self._read += read
            self._write += write
            self._calls += calls
            if tenant_id is not None:
                mine = self._by_tenant.get(tenant_id)
                if mine is None:
                    self._by_tenant[tenant_id] = [read, write, calls]
                else:
                    mine[0] += read
                    mine[1] += write
                    mine[2] += calls

    def current(self) -> Consumed:
        with self._lock:
            return Consumed(self._read, self._write, self._calls, (time.perf_counter() - self._started) * 1000)

    def by_tenant(self) -> dict[str, Consumed]:
        """The units counted on each tenant's account since :meth:`start` (no elapsed time)."""
        with self._lock:
            return {tenant: Consumed(read, write, calls) for tenant, (read, write, calls) in self._by_tenant.items()}


METER: Final = RequestMeter()


def start() -> None:
    METER.start()


def add(operation: str, response: Any, tenant_id: str | None = None) -> None:
    METER.add(operation, response, tenant_id)


def finish() -> Consumed:
    return METER.current()


def invocation_fields(function: str, context: Any, consumed: Consumed) -> dict[str, Any]:
    """An invocation's usage on behalf of one tenant (a ``"usage"`` line, docs/usage.md):
    ``function`` says whose (``authorizer``)."""
    return {"function": function, **consumed_fields(context, consumed)}


def consumed_fields(context: Any, consumed: Consumed) -> dict[str, Any]:
    """What an invocation consumed, as every usage record carries it (a request's
    ``"request handled"`` line, an invocation's ``"usage"`` line)."""
    return {
        "request_id": getattr(context, "aws_request_id", None),
        "read_units": float(consumed.read_units),
        "write_units": float(consumed.write_units),
        "dynamodb_calls": consumed.calls,
        "duration_ms": round(consumed.elapsed_ms, 3),
        "memory_mb": int(getattr(context, "memory_limit_in_mb", 0) or 0),
    }
