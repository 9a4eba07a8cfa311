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
the answer to the request's meter (:mod:`support_tickets.core.metering`).

Only GetItem, Query, PutItem, UpdateItem, DeleteItem, BatchWriteItem and
TransactWriteItems are used: never Scan, never a filter expression.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from support_tickets.core import keys, metering
from support_tickets.core.errors import (
    Conflict,
    Forbidden,
    InvalidCursor,
    TenantMoving,
    Throttled,
    Unauthorized,
    Unavailable,
)
from support_tickets.data.session import EXPIRED_CREDENTIALS_CODES, THROTTLING_CODES

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
MAX_UNPROCESSED_ROUNDS: Final = 8


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
    fails costs the switch one read."""

    tenant_id: str
    table_name: str
    clients: ClientProvider
    writes_paused: bool = False
    marks_writes: bool = False

    def __post_init__(self) -> None:
        keys.validate_tenant_id(self.tenant_id)

    def call(self, operation: str, **kwargs: Any) -> Any:
        if operation in WRITE_OPERATIONS:
            self._before_write(operation, kwargs)
        if operation in metering.METERED_OPERATIONS:
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
                if code in THROTTLING_CODES:
                    raise Throttled() from exc
                if code == "TransactionConflictException":
                    # A transaction on the same item is in flight: it won, nothing changed here.
                    raise Conflict() from exc
                if code == "AccessDeniedException":
                    # Only a bug (or an attack) asks for another tenant's keys.
                    raise Forbidden("Access denied.") from exc
                if code in REFUSED_CREDENTIALS_CODES:
                    # Credentials no authorizer issued (a forged context): nothing was executed.
                    raise Unauthorized() from exc
                if code in UNAVAILABLE_CODES:
                    raise Unavailable() from exc
                raise
            except BotoCoreError as exc:
                raise Unavailable() from exc
            metering.add(operation, response, self.tenant_id)
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

    def _before_write(self, operation: str, request: Mapping[str, Any]) -> None:
        if self.writes_paused:
            raise TenantMoving()
        if not self.marks_writes:
            return
        # The marks before the write: a write that lands is always marked. A week: longer than any copy; a
        # move erases them with the tenant's old copy, a rolled back one leaves them to expire.
        expiration = {"N": str(int(time.time()) + MOVE_MARK_SECONDS)}
        marks = [
            {**keys.move_mark_key(self.tenant_id, name), "expiration": expiration}
            for name in sorted(written_marks(self.tenant_id, self.table_name, operation, request))
        ]
        unmarked = replace(self, marks_writes=False)
        if len(marks) == 1:
            unmarked.call("put_item", TableName=self.table_name, Item=marks[0])
        elif marks:
            unmarked._batch_write([{"PutRequest": {"Item": mark}} for mark in marks])

    def raise_for_cancellation(self, exc: ClientError) -> None:
        """What a cancelled transaction means when no item condition explains it."""
        codes = cancellation_codes(exc)
        if any(code in CANCELLATION_THROTTLING_CODES for code in codes):
            raise Throttled() from exc
        raise Conflict() from exc

    def idempotency_client(self) -> DynamoDBClient:
        """The client Powertools' idempotency layer stores its records with: its
        calls go through :meth:`call` too (429 on throttling, renewal of expired
        credentials), the mapped error as the wrapped exception's cause."""
        return cast("DynamoDBClient", _TableClient(self))


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


@dataclass(frozen=True, slots=True)
class _TableClient:
    """The four DynamoDB calls Powertools' idempotency layer makes, through
    :meth:`TenantTable.call` (conditional-check failures still reach it as the
    ``ClientError`` it handles)."""

    table: TenantTable

    def get_item(self, **kwargs: Any) -> Any:
        return self.table.call("get_item", **kwargs)

    def put_item(self, **kwargs: Any) -> Any:
        return self.table.call("put_item", **kwargs)

    def update_item(self, **kwargs: Any) -> Any:
        return self.table.call("update_item", **kwargs)

    def delete_item(self, **kwargs: Any) -> Any:
        return self.table.call("delete_item", **kwargs)
