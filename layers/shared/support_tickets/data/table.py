"""The one path from a tenant's repositories to DynamoDB, and its error mapping.

Every repository (tickets, comments, aggregates, the tenant record, the
idempotency store) is bound to one :class:`TenantTable`: one tenant (whose
keys it builds, from the caller's verified claims), one table, and the
clients of one caller (:mod:`support_tickets.data.session`: credentials bound to
the caller's token, which IAM confines to the token's tenant whatever tenant
the keys name). All their calls
go through :meth:`TenantTable.call`, the one place that maps AWS errors:
throttling that outlived botocore's retries becomes ``Throttled`` (429), other
service failures ``Unavailable`` (503), a refused key ``Forbidden`` (403),
credentials DynamoDB does not recognise ``Unauthorized`` (401), a
transaction conflict ``Conflict`` (409), and credentials that expired under a
cached client are renewed once and the call retried (nothing was executed:
DynamoDB authenticates before it acts). It is also where a request's DynamoDB
units are measured: every call asks for ``ReturnConsumedCapacity`` and adds
the answer to the request's meter (:mod:`support_tickets.usage.meter`).

Only GetItem, Query, PutItem, UpdateItem, DeleteItem, BatchWriteItem and
TransactWriteItems are used: never Scan, never a filter expression.

**The move fence.** While a move copies the tenant's data (the record says
``COPYING``), every write is fenced by the tenant record itself: it goes as
one TransactWriteItems with a ``ConditionCheck`` that the record (in the pool
table) still says ``COPYING`` for the same move (``move_started_at``), and
with the write's move marks. A write that lands after the mover set
``SWITCHING`` (an SDK retry after a read timeout, a slow network: however
late) fails its condition and changes nothing (503 ``TENANT_MOVING``); one
that lands before it is marked, so the switch reads it again. No wait of the
mover's is needed for that: the fence is DynamoDB's, not a clock's. An SDK
retry of a transaction that did land is not applied twice (botocore sends the
same ``ClientRequestToken``, which DynamoDB honours for 10 minutes).
Concurrent transactions that check the same record may cancel each other
(``TransactionConflict``): the fenced write is tried again, a few times with
jitter. The cost, during the copy only: a transactional write is two write
units per KB, plus the check's read.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from support_tickets.core import keys
from support_tickets.core.errors import (
    Conflict,
    Forbidden,
    InvalidCursor,
    TenantMoving,
    Throttled,
    Unauthorized,
    Unavailable,
)
from support_tickets.data.placement import MovePhase
from support_tickets.data.session import EXPIRED_CREDENTIALS_CODES, THROTTLING_CODES
from support_tickets.usage import meter

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

# Codes DynamoDB puts in a transaction's CancellationReasons when it throttled.
CANCELLATION_THROTTLING_CODES = THROTTLING_CODES | {"ThrottlingError", "ProvisionedThroughputExceeded"}
UNAVAILABLE_CODES = frozenset({"InternalServerError", "ServiceUnavailable", "ServiceUnavailableException"})
# DynamoDB authenticates before it acts: a wrong secret, an unknown key or a session token not the key's.
REFUSED_CREDENTIALS_CODES = frozenset(
    {"UnrecognizedClientException", "InvalidSignatureException", "IncompleteSignatureException"}
)
# What a tenant whose data is switching tables may not call (support_tickets.data.placement).
WRITE_OPERATIONS: Final = frozenset(
    {"put_item", "update_item", "delete_item", "batch_write_item", "transact_write_items"}
)
BATCH_WRITE_SIZE: Final = 25
# How long a move mark lasts (TenantTable.marks_writes): longer than any copy.
MOVE_MARK_SECONDS: Final = 7 * 86_400
# A mark's token of the write that made it (a new one each write): the mover's catch-up takes a mark
# back only if no write marked it again since it read it (ops.move).
MARK_WRITTEN: Final = "written"
MAX_UNPROCESSED_ROUNDS: Final = 8
# TransactWriteItems' limit on actions.
MAX_TRANSACTION_ACTIONS: Final = 100
# How often a fenced write is tried when another transaction on the tenant record cancelled it.
FENCE_CONFLICT_ATTEMPTS: Final = 5


class MovingRecord(Protocol):
    """What a fence reads of the tenant record (``TenantConfig`` has it)."""

    @property
    def move_phase(self) -> str | None: ...
    @property
    def move_started_at(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class MoveFence:
    """The move a write was made under (:class:`TenantTable`): the tenant
    record's table (the pool's) and its ``move_started_at``. A fenced write is
    made only if the record still says ``COPYING`` for this very move."""

    record_table: str
    move_started_at: int

    @classmethod
    def of(cls, record: MovingRecord, record_table: str) -> MoveFence | None:
        """The fence of a write made under ``record``: one while the move copies, none otherwise."""
        if record.move_phase != MovePhase.COPYING or record.move_started_at is None:
            return None
        return cls(record_table, record.move_started_at)

    def condition_check(self, tenant_id: str) -> dict[str, Any]:
        return {
            "ConditionCheck": {
                "TableName": self.record_table,
                "Key": keys.tenant_config_key(tenant_id),
                "ConditionExpression": "#phase = :copying AND #started = :started",
                "ExpressionAttributeNames": {"#phase": "move_phase", "#started": "move_started_at"},
                "ExpressionAttributeValues": {
                    ":copying": {"S": MovePhase.COPYING.value},
                    ":started": {"N": str(self.move_started_at)},
                },
            }
        }


class ClientProvider(Protocol):
    """The DynamoDB client of one caller: it takes no tenant id, so nothing
    that holds one can ask it for another tenant's access."""

    def dynamodb(self) -> DynamoDBClient: ...

    def invalidate(self) -> None:
        """The credentials were refused as expired: obtain new ones next time."""


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _serializer.serialize(value) for name, value in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def serialize(value: Any) -> dict[str, Any]:
    return cast("dict[str, Any]", _serializer.serialize(value))


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def cancellation_codes(exc: ClientError) -> list[str]:
    """The per-item codes of a cancelled transaction, in the order of its items."""
    return [str(reason.get("Code", "")) for reason in exc.response.get("CancellationReasons", [])]


def written_marks(tenant_id: str, table_name: str, operation: str, request: Mapping[str, Any]) -> set[str]:
    """What a write request (``operation``) in ``table_name`` changes that a move's
    switch must read again (:func:`~support_tickets.core.keys.move_mark_key`): the
    tickets whose partitions it writes, and the sort keys of the audit events it
    puts into a day's trail. Of ``tenant_id``'s keys only."""
    written: list[Mapping[str, Any]] = []
    if operation == "put_item":
        written.append(request["Item"])
    elif operation in ("update_item", "delete_item"):
        written.append(request["Key"])
    elif operation == "transact_write_items":
        for action in request["TransactItems"]:
            for name, field in (("Put", "Item"), ("Update", "Key"), ("Delete", "Key")):
                if name in action and action[name]["TableName"] == table_name:
                    written.append(action[name][field])
    elif operation == "batch_write_item":
        for write in request["RequestItems"].get(table_name, ()):
            written.append(write["PutRequest"]["Item"] if "PutRequest" in write else write["DeleteRequest"]["Key"])
    marks: set[str] = set()
    for item in written:
        suffix = keys.own_suffix(tenant_id, str(item["pk"]["S"])) or ""
        ticket_id = keys.ticket_id_of_suffix(suffix)
        if ticket_id is not None:
            marks.add(ticket_id)
        elif keys.is_audit_day_suffix(suffix) and keys.is_audit_sk(str(item["sk"]["S"])):
            marks.add(str(item["sk"]["S"]))
    return marks


@dataclass(frozen=True, slots=True)
class TenantTable:
    """One tenant's view of one table. ``writes_paused``: the tenant's data is
    switching tables (its record said so when this view was made), and every
    write answers 503 ``TENANT_MOVING`` before it reaches DynamoDB.
    ``marks_writes``: the tenant's data is being copied into another table
    (``COPYING``, and ``SWITCHING`` for the stream functions that still write),
    and a write of a ticket's partition first marks the ticket, a write of an
    audit event into a day's trail the event (:func:`written_marks`), so that
    the move's switch reads again only what changed during the copy. A write
    whose marks were not written is not made (503); a mark whose write then
    fails costs the switch one read. ``fence``: the write is made only while
    the tenant record still says ``COPYING`` for that move, in the same
    transaction as its marks (the module's docstring)."""

    tenant_id: str
    table_name: str
    clients: ClientProvider
    writes_paused: bool = False
    marks_writes: bool = False
    fence: MoveFence | None = None

    def __post_init__(self) -> None:
        keys.validate_tenant_id(self.tenant_id)

    def call(self, operation: str, **kwargs: Any) -> Any:
        if operation in WRITE_OPERATIONS and (self.writes_paused or self.marks_writes or self.fence is not None):
            return self._moving_write(operation, kwargs)
        if operation in meter.METERED_OPERATIONS:
            # Table and index units, counted for the request's usage line (docs/usage.md).
            kwargs.setdefault("ReturnConsumedCapacity", "TOTAL")
        for attempt in (1, 2):
            client = self.clients.dynamodb()
            try:
                response = getattr(client, operation)(**kwargs)
            except ClientError as exc:
                code = error_code(exc)
                if code in EXPIRED_CREDENTIALS_CODES:
                    self.clients.invalidate()
                    if attempt == 1:
                        continue
                    # Fresh credentials refused too (e.g. a skewed clock): no loop, no 500.
                    raise Unavailable() from exc
                mapped = _api_error(exc)
                if mapped is None:
                    raise
                raise mapped from exc
            except BotoCoreError as exc:
                raise Unavailable() from exc
            meter.add(operation, response, self.tenant_id)
            return response
        raise Unavailable()  # pragma: no cover - the loop returns or raises

    def call_if(self, operation: str, **kwargs: Any) -> bool:
        """:meth:`call` of a conditional write: ``False`` when its condition did not hold
        (nothing was written)."""
        try:
            self.call(operation, **kwargs)
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def query_from_cursor(self, query: dict[str, Any], *, from_cursor: bool) -> Any:
        """A Query whose ``ExclusiveStartKey`` may come from a client's cursor:
        every value is checked before, and should DynamoDB still refuse the start
        key, that is the cursor's fault (400), never a 500."""
        try:
            return self.call("query", **query)
        except ClientError as exc:
            if from_cursor and error_code(exc) == "ValidationException":
                raise InvalidCursor() from exc
            raise

    def query_up_to(
        self, query: Mapping[str, Any], want: int, *, from_cursor: bool
    ) -> tuple[list[dict[str, Any]], bool]:
        """At least ``want`` items of ``query`` (or all there are), following
        DynamoDB's 1 MB pages so that a page never ends early; and whether more
        may follow them. ``from_cursor``: see :meth:`query_from_cursor`."""
        request = {**query, "Limit": want}
        items: list[dict[str, Any]] = []
        while True:
            response = self.query_from_cursor(request, from_cursor=from_cursor)
            items.extend(from_item(item) for item in response["Items"])
            last = response.get("LastEvaluatedKey")
            if last is None:
                return items, False
            if len(items) >= want:
                return items, True
            request["ExclusiveStartKey"] = last
            request["Limit"] = want - len(items)

    def query_pages(self, query: Mapping[str, Any]) -> Iterator[list[dict[str, Any]]]:
        """Every page of ``query``, its items as DynamoDB returns them (keys to delete)."""
        request = dict(query)
        while True:
            response = self.call("query", **request)
            yield response["Items"]
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def batch_delete(self, item_keys: Sequence[Mapping[str, Any]]) -> int:
        """Delete these items (``pk``/``sk`` as DynamoDB returns them), 25 per
        BatchWriteItem, retrying what DynamoDB leaves unprocessed; how many were
        asked for. Every key must be this tenant's: a key of another tenant is a
        bug here, never a delete."""
        prefix = keys.tenant_prefix(self.tenant_id)
        if any(not str(key["pk"]["S"]).startswith(prefix) for key in item_keys):
            raise ValueError("refusing to delete another tenant's item")
        self._batch_write([{"DeleteRequest": {"Key": {"pk": key["pk"], "sk": key["sk"]}}} for key in item_keys])
        return len(item_keys)

    def _batch_write(self, requests: Sequence[Mapping[str, Any]]) -> None:
        """These write requests, 25 per BatchWriteItem, retrying what DynamoDB leaves unprocessed."""
        for start in range(0, len(requests), BATCH_WRITE_SIZE):
            batch = list(requests[start : start + BATCH_WRITE_SIZE])
            for round_number in range(MAX_UNPROCESSED_ROUNDS):
                response = self.call("batch_write_item", RequestItems={self.table_name: batch})
                batch = response.get("UnprocessedItems", {}).get(self.table_name, [])
                if not batch:
                    break
                time.sleep(min(0.05 * 2**round_number, 1.0))
            else:
                raise Throttled()

    def _marks(self, operation: str, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The move marks of a write (:func:`written_marks`), as items. A week:
        longer than any copy; a move erases them with the tenant's old copy, a
        rolled back one leaves them to expire."""
        expiration = {"N": str(int(time.time()) + MOVE_MARK_SECONDS)}
        token = {"S": os.urandom(8).hex()}
        return [
            {**keys.move_mark_key(self.tenant_id, name), "expiration": expiration, MARK_WRITTEN: token}
            for name in sorted(written_marks(self.tenant_id, self.table_name, operation, request))
        ]

    def _moving_write(self, operation: str, request: dict[str, Any]) -> Any:
        """A write while the tenant's data moves: refused at the switch, fenced
        during the copy, otherwise (a stream function's) marked first: a write
        that lands is always marked."""
        if self.writes_paused:
            raise TenantMoving()
        if self.fence is not None:
            return self._fenced(self.fence, operation, request)
        return self._marked_around(operation, request)

    def _marked_around(self, operation: str, request: dict[str, Any]) -> Any:
        """The write with its marks put before it (a write that lands is always
        marked) and again after it, with a new token: a mover's catch-up that
        took the first mark back before the write landed finds the second."""
        marks = self._marks(operation, request) if self.marks_writes else []
        self._put_marks(marks)
        response = replace(self, marks_writes=False, fence=None).call(operation, **request)
        if marks:
            token = {"S": os.urandom(8).hex()}
            self._put_marks([{**mark, MARK_WRITTEN: token} for mark in marks])
        return response

    def _put_marks(self, marks: Sequence[Mapping[str, Any]]) -> None:
        unmarked = replace(self, marks_writes=False, fence=None)
        if len(marks) == 1:
            unmarked.call("put_item", TableName=self.table_name, Item=marks[0])
        elif marks:
            unmarked._batch_write([{"PutRequest": {"Item": mark}} for mark in marks])

    def _checked_after(self, fence: MoveFence, operation: str, request: dict[str, Any]) -> Any:
        """A write with no room left for the fence's check (a transaction of 100
        actions: a batch status change of 100 tickets), made marked and then
        checked: if the record still says ``COPYING`` after it returned, it
        landed before the switch began, which reads it again. Otherwise it may
        have landed after the switch read its tickets: not acknowledged (503
        ``UNAVAILABLE``, maybe applied; the client's retry is made in the new
        table), never acknowledged and lost."""
        response = replace(self, fence=None)._marked_around(operation, request)
        if not _record_still_copying(self, fence):
            raise Unavailable()
        return response

    def _fenced(self, fence: MoveFence, operation: str, request: dict[str, Any]) -> Any:
        """``operation`` as one transaction with its marks and the fence's check
        (the module's docstring); what the plain call would have answered, or
        raised: a failed condition of the write itself is its
        ``ConditionalCheckFailedException`` (with ``Item`` when asked for),
        the fence's :class:`TenantMoving`."""
        actions = _transaction_actions(operation, request)
        marks = self._marks(operation, request) if self.marks_writes else []
        if len(actions) + 1 > MAX_TRANSACTION_ACTIONS:
            return self._checked_after(fence, operation, request)
        if len(actions) + len(marks) + 1 > MAX_TRANSACTION_ACTIONS:
            self._put_marks(marks)  # marked first, as an unfenced write is; the write itself still fenced
            marks = []
        transaction: dict[str, Any] = {
            "TransactItems": [
                *actions,
                *({"Put": {"TableName": self.table_name, "Item": mark}} for mark in marks),
                fence.condition_check(self.tenant_id),
            ]
        }
        if "ClientRequestToken" in request:
            transaction["ClientRequestToken"] = request["ClientRequestToken"]
        plain = replace(self, marks_writes=False, fence=None)
        for attempt in range(FENCE_CONFLICT_ATTEMPTS):
            try:
                response = plain.call("transact_write_items", **transaction)
                break
            except ClientError as exc:
                if error_code(exc) != "TransactionCanceledException":
                    raise
                codes = cancellation_codes(exc)
                if codes and codes[-1] == "ConditionalCheckFailed":
                    raise TenantMoving() from exc  # the mover switched: nothing was written
                written = codes[: len(actions)]
                if "ConditionalCheckFailed" in written and operation != "transact_write_items":
                    raise _condition_failed(exc, written.index("ConditionalCheckFailed"), operation) from exc
                if operation == "transact_write_items" and any(code not in ("None", "") for code in written):
                    raise _cancelled_as(exc, len(actions)) from exc
                if not any(code == "TransactionConflict" for code in codes) or attempt + 1 == FENCE_CONFLICT_ATTEMPTS:
                    self.raise_for_cancellation(exc)
                time.sleep(random.uniform(0.01, 0.05 * 2**attempt))  # noqa: S311 - jitter, not a secret
        return _plain_response(self, operation, request, response)

    def raise_for_cancellation(self, exc: ClientError) -> None:
        """What a cancelled transaction means when no item condition explains it."""
        codes = cancellation_codes(exc)
        if any(code in CANCELLATION_THROTTLING_CODES for code in codes):
            raise Throttled() from exc
        raise Conflict() from exc


@dataclass(frozen=True, slots=True)
class OwnClient:
    """A client provider for code that does not run as a tenant: the stream
    functions (their execution role) and operator commands (the operator's
    credentials). What that client may reach is its role's business."""

    client: DynamoDBClient

    def dynamodb(self) -> DynamoDBClient:
        return self.client

    def invalidate(self) -> None:
        return


# The table's key attributes, which Powertools' idempotency layer is told to use for its records.
IDEMPOTENCY_KEY_ATTRIBUTES: Final = ("pk", "sk")


@dataclass(slots=True)
class IdempotencyStore:
    """The DynamoDB client Powertools' idempotency layer keeps one request's
    record with: its four calls go through :meth:`TenantTable.call` (429 on
    throttling, renewal of expired credentials, the move fence; the mapped
    error as the wrapped exception's cause, a failed condition the
    ``ClientError`` Powertools handles).

    Powertools puts the record in progress before the create runs and completes
    it (``save_success``) after the create returned. An invocation killed
    between the two (Lambda's timeout) would leave a ticket whose record is
    still in progress, set to expire at the invocation's deadline; API Gateway
    answers 502/504 only after that deadline, so the client's retry with the
    same key (API.md) would find the record expired and create a second
    ticket. So the store keeps the record this request put (``claimed``, the
    item as Powertools put it), and the create completes that very record in
    the transaction that puts the ticket (:meth:`completion`): a ticket never
    exists without the record that names it. Powertools' own completion
    afterwards writes the same again."""

    table: TenantTable
    claimed: dict[str, Any] | None = None

    def get_item(self, **kwargs: Any) -> Any:
        return self.table.call("get_item", **kwargs)

    def put_item(self, **kwargs: Any) -> Any:
        response = self.table.call("put_item", **kwargs)
        self.claimed = dict(kwargs["Item"])
        return response

    def update_item(self, **kwargs: Any) -> Any:
        return self.table.call("update_item", **kwargs)

    def delete_item(self, **kwargs: Any) -> Any:
        """Powertools' clean-up after a create that raised: the record goes only
        while it is still the in-progress one this request put. A create whose
        transaction landed but was never answered (a read timeout: 503, "may
        have been applied") completed it, and that record names a ticket that
        exists: it stays, and the client's retry answers that ticket. So does a
        record another request took over once this one's in-progress expiry passed."""
        if self.claimed is None or kwargs.get("Key") != self._key():
            return self.table.call("delete_item", **kwargs)
        condition, names, values = self._as_claimed()
        self.table.call_if(
            "delete_item",
            **kwargs,
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        return {}

    def completion(self, attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """The ``TransactWriteItems`` action that sets ``attributes`` (DynamoDB
        values by name) on the record this request put, on condition that it is
        still exactly as put: in progress, with this request's expiries and hash.
        Once its in-progress expiry passed, another request with the same key may
        have taken it over; then nothing of the transaction is written."""
        if self.claimed is None:
            raise RuntimeError("no idempotency record was put for this request")
        condition, names, values = self._as_claimed()
        assignments = []
        for number, (name, value) in enumerate(attributes.items()):
            names[f"#set{number}"] = name
            values[f":set{number}"] = dict(value)
            assignments.append(f"#set{number} = :set{number}")
        return {
            "Update": {
                "TableName": self.table.table_name,
                "Key": self._key(),
                "UpdateExpression": "SET " + ", ".join(assignments),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _key(self) -> dict[str, Any]:
        claimed = self.claimed or {}
        return {name: claimed[name] for name in IDEMPOTENCY_KEY_ATTRIBUTES if name in claimed}

    def _as_claimed(self) -> tuple[str, dict[str, str], dict[str, Any]]:
        """A condition that holds while the stored record is the one this
        request put (every attribute but its key as put), with its names and values."""
        claimed = self.claimed or {}
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        checks: list[str] = []
        for number, name in enumerate(sorted(set(claimed) - set(IDEMPOTENCY_KEY_ATTRIBUTES))):
            names[f"#claimed{number}"] = name
            values[f":claimed{number}"] = claimed[name]
            checks.append(f"#claimed{number} = :claimed{number}")
        return " AND ".join(checks), names, values


def _api_error(exc: ClientError) -> Exception | None:
    """What a DynamoDB error means for the caller (the module's docstring); ``None``: the caller's to handle."""
    code = error_code(exc)
    if _is_table_key_failure(exc):
        # A dedicated table's key disabled, pending deletion or refusing: the table is unusable
        # until an operator acts (docs/local-stack.md), not the caller's fault.
        return Unavailable()
    if code == "AccessDeniedException":
        # Only a bug (or an attack) asks for another tenant's keys.
        return Forbidden("Access denied.")
    meanings: tuple[tuple[frozenset[str], type[Exception]], ...] = (
        (THROTTLING_CODES, Throttled),
        # A transaction on the same item is in flight: it won, nothing changed here.
        (frozenset({"TransactionConflictException"}), Conflict),
        # Credentials no authorizer issued (a forged context): nothing was executed.
        (REFUSED_CREDENTIALS_CODES, Unauthorized),
        (UNAVAILABLE_CODES, Unavailable),
    )
    return next((meaning() for codes, meaning in meanings if code in codes), None)


def _is_table_key_failure(exc: ClientError) -> bool:
    """DynamoDB's answer when the table's KMS key can't be used for the caller: a
    ``ValidationException`` or ``AccessDeniedException`` whose message starts
    with "KMS" ("KMS key disabled error", "KMS validation error", "KMS key
    access denied error")."""
    error = exc.response.get("Error", {})
    return error.get("Code") in ("ValidationException", "AccessDeniedException") and str(
        error.get("Message", "")
    ).startswith("KMS ")


def _record_still_copying(table: TenantTable, fence: MoveFence) -> bool:
    """Whether the tenant record says ``COPYING`` for the fence's move now (a consistent read)."""
    response = table.call(
        "get_item",
        TableName=fence.record_table,
        Key=keys.tenant_config_key(table.tenant_id),
        ProjectionExpression="move_phase, move_started_at",
        ConsistentRead=True,
    )
    item = from_item(response.get("Item", {}))
    return bool(item.get("move_phase") == MovePhase.COPYING and item.get("move_started_at") == fence.move_started_at)


def _transaction_actions(operation: str, request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A write request as TransactWriteItems actions (the fields a transaction
    action takes; ``ReturnValues`` is answered by :func:`_plain_response`)."""
    if operation == "transact_write_items":
        return [dict(action) for action in request["TransactItems"]]
    if operation == "batch_write_item":
        actions: list[dict[str, Any]] = []
        for table_name, writes in request["RequestItems"].items():
            for write in writes:
                if "PutRequest" in write:
                    actions.append({"Put": {"TableName": table_name, "Item": write["PutRequest"]["Item"]}})
                else:
                    actions.append({"Delete": {"TableName": table_name, "Key": write["DeleteRequest"]["Key"]}})
        return actions
    name = {"put_item": "Put", "update_item": "Update", "delete_item": "Delete"}[operation]
    fields = {
        "TableName",
        "Key",
        "Item",
        "UpdateExpression",
        "ConditionExpression",
        "ExpressionAttributeNames",
        "ExpressionAttributeValues",
        "ReturnValuesOnConditionCheckFailure",
    }
    return [{name: {field: value for field, value in request.items() if field in fields}}]


def _condition_failed(exc: ClientError, index: int, operation: str) -> ClientError:
    """The ``ConditionalCheckFailedException`` the plain ``operation`` would have raised."""
    reason = exc.response.get("CancellationReasons", [])[index]
    response: dict[str, Any] = {
        "Error": {"Code": "ConditionalCheckFailedException", "Message": str(reason.get("Message", ""))},
        "ResponseMetadata": exc.response.get("ResponseMetadata", {}),
    }
    if "Item" in reason:
        response["Item"] = reason["Item"]
    name = {"put_item": "PutItem", "update_item": "UpdateItem"}.get(operation, "DeleteItem")
    return ClientError(response, name)  # type: ignore[arg-type]


def _cancelled_as(exc: ClientError, actions: int) -> ClientError:
    """The cancellation a plain transaction of ``actions`` actions would have had."""
    response = dict(exc.response)
    response["CancellationReasons"] = exc.response.get("CancellationReasons", [])[:actions]
    return ClientError(response, "TransactWriteItems")  # type: ignore[arg-type]


def _plain_response(table: TenantTable, operation: str, request: Mapping[str, Any], response: Any) -> Any:
    """What the plain call answers: an update's ``ALL_NEW`` attributes are read
    back (a transaction returns no values), consistently: this write is in
    them, and so may be a write made in between, never an older state; the
    consumed capacity is the transaction's."""
    answer: dict[str, Any] = {"ResponseMetadata": response.get("ResponseMetadata", {})}
    if "ConsumedCapacity" in response:
        answer["ConsumedCapacity"] = response["ConsumedCapacity"]
    if operation == "batch_write_item":
        answer["UnprocessedItems"] = {}
    if request.get("ReturnValues") == "ALL_NEW":
        read = table.call("get_item", TableName=request["TableName"], Key=request["Key"], ConsistentRead=True)
        answer["Attributes"] = read.get("Item", {})
    elif request.get("ReturnValues") not in (None, "NONE"):
        raise ValueError(f"a fenced write answers ReturnValues ALL_NEW or NONE, not {request['ReturnValues']}")
    return answer
