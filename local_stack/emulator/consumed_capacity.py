"""Realistic ``ConsumedCapacity`` from the emulator, from the capacity model.

moto answers ``ReturnConsumedCapacity`` with a constant (0.5 or 1.0 whatever
the items), which would make every local usage figure wrong. This WSGI
middleware sits between the guard and moto (it sees only requests the guard
let through, one at a time) and, for a DynamoDB call that asks for
``TOTAL`` or ``INDEXES``, replaces moto's figure with the units of
:class:`stack_model.capacity.CapacityMeter` (the benchmark's model: the items
the call touches, looked up in moto just before and just after it).

The lookups are requests of their own to moto, made here in-process with the
caller's headers (moto attributes a request to an account by its
``Authorization`` header and checks no signature: the guard did) and never
seen by the guard, the stream pollers or the caller. The answer keeps moto's
shape: one ``ConsumedCapacity`` object (a list of one for
``TransactWriteItems`` and ``BatchWriteItem``) with ``CapacityUnits``, the
read or write part, and with ``INDEXES`` the same total under ``Table`` (the
model sums GSI1's writes into the total; it does not split them out).

Every table of the stack is metered on its own: the pool table, and each
dedicated tenant's table (``<pool table>-dedicated-<tenant>``,
:mod:`stack_model.dedicated`), whose items are looked up in that table and
whose units are answered under its name. A dedicated table has the pool
table's shape (keys, GSI1 and its projection; ``tests/unit/test_dedicated_template.py``
holds the two templates equal), so its sizes follow the same rules. A call
that names two tables at once (a batch or transaction across the pool and a
dedicated table) keeps moto's answer: the model sizes one table per call.
What the model does not have, for any table: throughput limits, partitions
and throttling (nothing here is ever throttled).
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Callable, Iterable
from typing import Any

from local_stack import wsgi
from stack_model.capacity import CapacityMeter, TableShape
from stack_model.dedicated import TABLE_INFIX

Environ = dict[str, Any]
WsgiApp = Callable[[Environ, Callable[..., Any]], Iterable[bytes]]

_TARGET_PREFIX = "DynamoDB_20120810."
# What the model sizes; anything else keeps moto's answer.
METERED = frozenset({"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
_LISTED = frozenset({"TransactWriteItems", "BatchWriteItem"})
_READS = frozenset({"GetItem", "Query"})


class _Lookups:
    """``get_item`` and ``query`` as :class:`CapacityMeter` calls them, answered
    by moto directly (not through the guard), as the caller's account."""

    def __init__(self, app: WsgiApp, environ: Environ) -> None:
        self._app = app
        self._environ = environ

    def _ask(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        environ = dict(self._environ)
        environ["HTTP_X_AMZ_TARGET"] = _TARGET_PREFIX + operation
        status, _, data = wsgi.call(self._app, environ, json.dumps(params).encode())
        if not status.startswith("200"):
            raise RuntimeError(f"capacity lookup {operation} failed: {status} {data[:200]!r}")
        answer: dict[str, Any] = json.loads(data)
        return answer

    def get_item(self, **params: Any) -> dict[str, Any]:
        return self._ask("GetItem", params)

    def query(self, **params: Any) -> dict[str, Any]:
        return self._ask("Query", params)


def consumed_capacity(operation: str, table_name: str, read: float, write: float, mode: str) -> Any:
    """The ``ConsumedCapacity`` DynamoDB answers for these units."""
    total = read + write
    consumed: dict[str, Any] = {"TableName": table_name, "CapacityUnits": total}
    if operation in _READS:
        consumed["ReadCapacityUnits"] = read
    else:
        consumed["WriteCapacityUnits"] = write
    if mode == "INDEXES":
        consumed["Table"] = {"CapacityUnits": total}
    return [consumed] if operation in _LISTED else consumed


class CapacityUnits:
    """WSGI middleware over moto: model units in ``ConsumedCapacity`` (see the module docstring)."""

    def __init__(self, app: WsgiApp, table_name: str) -> None:
        self._app = app
        self._pool = table_name
        # By table name: the pool's, and each dedicated table's once it is called.
        self._shapes = {table_name: TableShape.from_template(table_name)}

    def __call__(self, environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
        operation = self._metered_operation(environ)
        if operation is None:
            return self._app(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        params = json.loads(body or b"{}")
        mode = params.get("ReturnConsumedCapacity", "NONE") if isinstance(params, dict) else "NONE"
        shape = self._shape(operation, params) if mode in ("TOTAL", "INDEXES") else None
        if shape is None:
            status, headers, data = wsgi.call(self._app, environ, body)
            start_response(status, headers)
            return [data]
        meter = CapacityMeter(_Lookups(self._app, dict(environ)), shape)
        meter.before(operation, params)
        status, headers, data = wsgi.call(self._app, environ, body)
        if status.startswith("200"):
            answer = json.loads(data)
            read, write = meter.after(operation, answer)
            answer["ConsumedCapacity"] = consumed_capacity(operation, shape.name, read, write, mode)
            data = json.dumps(answer).encode()
            headers = [
                (name, value) for name, value in headers if name.lower() not in ("content-length", "x-amz-crc32")
            ]
            headers += [("Content-Length", str(len(data))), ("x-amz-crc32", str(binascii.crc32(data)))]
        start_response(status, headers)
        return [data]

    @staticmethod
    def _metered_operation(environ: Environ) -> str | None:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if not target.startswith(_TARGET_PREFIX):
            return None
        operation = target.removeprefix(_TARGET_PREFIX)
        return operation if operation in METERED else None

    def _shape(self, operation: str, params: dict[str, Any]) -> TableShape | None:
        """The shape of the one table every item of the call is in, if the model
        knows it (the pool table or a dedicated table of the stack); else None."""
        if operation == "TransactWriteItems":
            names = {body.get("TableName") for action in params.get("TransactItems", []) for body in action.values()}
        elif operation == "BatchWriteItem":
            names = set(params.get("RequestItems", {}))
        else:
            names = {params.get("TableName")}
        if len(names) != 1:
            return None
        (name,) = names
        if not isinstance(name, str):
            return None
        if name not in self._shapes:
            if not name.startswith(self._pool + TABLE_INFIX):
                return None
            # The dedicated template's table: the pool table's shape under its own name.
            self._shapes[name] = TableShape.from_template(name)
        return self._shapes[name]
