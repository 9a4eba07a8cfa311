"""Where moto differs from AWS in ways this project observes.

moto's backends are plain Python objects without locks: two requests served
at once can corrupt each other (``TransactWriteItems`` deep-copies every
table while another thread appends to one: "dictionary changed size during
iteration"). AWS serves each request atomically, so the fix is to make every
moto request atomic: the emulator's server holds :data:`MOTO_LOCK` around each
request, and :func:`apply` makes moto's in-process dispatcher (``mock_aws``,
used by the tests beside threads such as the stream poller) take the same lock.
Code between requests (handlers, the poller, the aggregator) still runs
concurrently.

moto's user pools sign with a key from moto's package and ignore their own
settings: :mod:`local_stack.cognito` fixes both. moto's identity pools issue
fixed credentials for any identity, unchecked: :mod:`local_stack.identity_pool`
answers instead.

``TransactWriteItems`` costs what it touches. moto 5.2.5 deep-copies every
table a transaction names before applying it, so that it can swap the copies
back in if the transaction is cancelled: each transaction costs time
proportional to the whole table (365 ms for a comment and 2.3 s for a 10-ticket
status change once the benchmark's table held a few thousand items, against
12 ms for a PATCH). :func:`transact_write_items` is moto's method with one
change, written so that it could be offered upstream: before each operation it
snapshots only the item that operation targets (as it was, or "absent"; a copy
only where moto changes the stored item in place) and the length of its table's
stream; on cancellation it puts those
items back, newest first, and drops the stream records the transaction appended.
The tables, their stream shards and every other item are never copied or
replaced.

That also keeps what the previous fix here ensured: a cancelled transaction
leaves no trace in the stream. (moto's swap put back a copy of the table with
its own copy of the stream shard, so the cancelled records stayed visible to
iterators opened before and the next records reused their sequence numbers.)

A ``Query`` on the table reads its partition only. moto's ``Table.query``
collects a base-table query's candidates from ``all_items()``, which sorts every
item of the table, and keeps those of the partition: every ``GET
/tickets/{id}`` paid for the whole table. :func:`apply` gives such a query the
partition's items instead (upstream, a one-line change in ``Table.query``; the
method is too long to copy here, so ``all_items`` is shadowed on the table for
the duration of the call, which :data:`MOTO_LOCK` makes safe). Index queries
are unchanged: moto keeps no index structure, so a GSI query still reads the
whole table.

:func:`apply` is idempotent and applied by the emulator and by the tests' moto
fixtures.
"""

from __future__ import annotations

import copy
import functools
import threading
from typing import Any

from moto.core.botocore_stubber import BotocoreStubber
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

from local_stack import cognito, identity_pool

_applied = False
# moto's backends are not thread-safe: every request, in-process or through the
# emulator's server, holds it while moto serves it.
MOTO_LOCK = threading.RLock()


def apply() -> None:
    global _applied  # noqa: PLW0603 - patch once per process
    if _applied:
        return
    _serialize_in_process_requests()
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    _query_reads_only_its_partition()
    cognito.install()
    identity_pool.install()
    _applied = True


def _serialize_in_process_requests() -> None:
    """``mock_aws`` serves a request in the calling thread; hold :data:`MOTO_LOCK`
    meanwhile, as the emulator's server does for its requests."""
    original = BotocoreStubber.process_request

    @functools.wraps(original)
    def process_request(self: BotocoreStubber, request: Any) -> Any:
        with MOTO_LOCK:
            return original(self, request)

    BotocoreStubber.process_request = process_request  # type: ignore[method-assign]


_INDEX_NAME_POSITION = 7  # Table.query(hash_key, ..., projection_expressions, index_name, ...)


def _query_reads_only_its_partition() -> None:
    original = Table.query

    @functools.wraps(original)
    def query(self: Table, hash_key: DynamoType | None, *args: Any, **kwargs: Any) -> Any:
        index_name = args[_INDEX_NAME_POSITION - 1] if len(args) >= _INDEX_NAME_POSITION else kwargs.get("index_name")
        if index_name or hash_key is None:
            return original(self, hash_key, *args, **kwargs)
        self.all_items = functools.partial(_partition_items, self, hash_key)  # type: ignore[method-assign]
        try:
            return original(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    Table.query = query  # type: ignore[method-assign]


def _partition_items(table: Table, hash_key: DynamoType) -> list[Item]:
    """``Table.all_items()`` of one partition, in the same order."""
    stored = table.items.get(hash_key)
    if stored is None:
        return []
    if table.range_key_attr is None:
        return [stored]  # type: ignore[list-item]
    return sorted(stored.values(), key=lambda item: item.range_key)


class _Snapshot:
    """The items a transaction is about to write, as they were before, and the
    length of each of their tables' streams: enough to undo the transaction."""

    def __init__(self) -> None:
        # (table, hash key, range key, the item before or None, whether its hash key had items)
        self._items: list[tuple[Table, DynamoType, DynamoType | None, Item | None, bool]] = []
        self._seen: set[tuple[int, DynamoType, DynamoType | None]] = set()
        self._streams: dict[int, tuple[Table, int]] = {}

    def remember(self, table: Table, key: dict[str, Any], *, changed_in_place: bool) -> None:
        hash_key = DynamoType(key[table.hash_key_attr])
        range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
        if (id(table), hash_key, range_key) in self._seen:
            return
        self._seen.add((id(table), hash_key, range_key))
        had_hash_key = hash_key in table.items
        before = table.get_item(hash_key, range_key) if had_hash_key else None
        # update_item changes the stored Item in place: keep a copy of it. Put and
        # Delete replace or remove the object and never change it: keep the object.
        kept = copy.deepcopy(before) if changed_in_place else before
        self._items.append((table, hash_key, range_key, kept, had_hash_key))
        if table.stream_shard is not None and id(table) not in self._streams:
            self._streams[id(table)] = (table, len(table.stream_shard.items))

    def restore(self) -> None:
        for table, hash_key, range_key, before, had_hash_key in reversed(self._items):
            if range_key is None:
                if before is None:
                    table.items.pop(hash_key, None)
                else:
                    table.items[hash_key] = before  # type: ignore[assignment]
                continue
            if before is not None:
                table.items[hash_key][range_key] = before
                continue
            collection = table.items.get(hash_key)
            if collection is not None:
                collection.pop(range_key, None)
                if not collection and not had_hash_key:
                    del table.items[hash_key]
        for table, length in self._streams.values():
            if table.stream_shard is not None:
                del table.stream_shard.items[length:]


Reason = tuple[str | None, str | None, dict[str, Any] | None]  # (code, message, item): a cancellation reason


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """moto 5.2.5's ``DynamoDBBackend.transact_write_items``, rolling back with a
    :class:`_Snapshot` of the items written instead of deep copies of the tables."""
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    snapshot = _Snapshot()
    targets: set[tuple[str, str]] = set()
    reasons: list[Reason] = []
    for item in transact_items:
        if len(list(item.keys())) > 1:
            raise TransactWriteSingleOpException
        try:
            reasons.append(_apply(self, item, snapshot, targets))
        except (MultipleTransactionsException, MockValidationException):
            snapshot.restore()
            raise
    if any(code is not None for code, _, _ in reasons):
        snapshot.restore()
        raise TransactionCanceledException(reasons)


def _apply(
    backend: DynamoDBBackend, item: dict[str, Any], snapshot: _Snapshot, targets: set[tuple[str, str]]
) -> Reason:
    """One operation of a transaction: applied, or the reason it cancels the transaction."""
    original_item: dict[str, Any] | None = None
    try:
        op_type, op = next(iter(item.items()))
        if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
            raise ValueError("Unsupported transaction operation")
        table_name = op["TableName"]
        table = backend.get_table(table_name)
        key = _key(table, op_type, op)
        target = (str(table_name), str(dict(sorted(key.items()))))
        if target in targets:
            raise MultipleTransactionsException()
        targets.add(target)
        condition = {
            "condition_expression": op.get("ConditionExpression"),
            "expression_attribute_names": op.get("ExpressionAttributeNames"),
            "expression_attribute_values": op.get("ExpressionAttributeValues"),
        }
        current = backend.get_item(table_name, key)
        checked = condition["condition_expression"] is not None
        if checked and not get_filter_expression(*condition.values()).expr(current):
            if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                original_item = current.to_json()["Attributes"]
            raise ConditionalCheckFailed(item=original_item)
        if op_type != "ConditionCheck":
            snapshot.remember(table, key, changed_in_place=op_type == "Update")
        if op_type == "Put":
            backend.put_item(table_name, op["Item"], **condition)
        elif op_type == "Delete":
            backend.delete_item(table_name, key, **condition)
        elif op_type == "Update":
            backend.update_item(table_name, key, update_expression=op["UpdateExpression"], **condition)
    except (MultipleTransactionsException, MockValidationException):
        raise
    except ConditionalCheckFailed as exc:
        return ("ConditionalCheckFailed", str(exc.message), original_item)
    except Exception as exc:  # moto reports any other failure as the operation's cancellation reason
        return (type(exc).__name__, str(exc), original_item)
    return (None, None, None)


def _key(table: Table, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    attrs = op["Item"]
    key = {table.hash_key_attr: attrs[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = attrs[table.range_key_attr]
    return key
