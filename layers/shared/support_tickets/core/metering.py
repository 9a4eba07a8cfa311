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


class RequestMeter:
    """The units of the request in progress (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read = ZERO
        self._write = ZERO
        self._calls = 0
        self._started = time.perf_counter()

    def start(self) -> None:
        with self._lock:
            self._read = self._write = ZERO
            self._calls = 0
            self._started = time.perf_counter()

    def add(self, operation: str, response: Any) -> None:
        """Count one call's answer (a response without ``ConsumedCapacity`` adds no units)."""
        consumed = response.get("ConsumedCapacity") if isinstance(response, Mapping) else None
        read, write = split_units(operation, consumed)
        with self._lock:
            self._read += read
            self._write += write
            self._calls += 1

    def current(self) -> Consumed:
        with self._lock:
            return Consumed(self._read, self._write, self._calls, (time.perf_counter() - self._started) * 1000)


METER: Final = RequestMeter()


def start() -> None:
    METER.start()


def add(operation: str, response: Any) -> None:
    METER.add(operation, response)


def finish() -> Consumed:
    return METER.current()


def invocation_fields(function: str, context: Any, consumed: Consumed) -> dict[str, Any]:
    """An invocation's usage on behalf of one tenant (a ``"usage"`` line, docs/usage.md):
    ``function`` says whose (``authorizer``)."""
    return {
        "function": function,
        "request_id": getattr(context, "aws_request_id", None),
        "read_units": float(consumed.read_units),
        "write_units": float(consumed.write_units),
        "dynamodb_calls": consumed.calls,
        "duration_ms": round(consumed.elapsed_ms, 3),
        "memory_mb": int(getattr(context, "memory_limit_in_mb", 0) or 0),
    }
