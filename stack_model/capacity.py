"""DynamoDB capacity units, computed from item sizes.

moto answers ``ReturnConsumedCapacity`` with constants (0.5 or 1.0 whatever
the item), so the units are computed here instead, by DynamoDB's published
rules, from the items each call actually touches. Two users, one model: the
local emulator answers ``ConsumedCapacity`` with these units
(:mod:`local_stack.emulator.consumed_capacity`), and the benchmark sizes its calls with them.
The meter looks the items up (with a client that sees every item: the
operator's, or the emulator's own backend) just before and just after the
call (never timed):

- reads: item sizes summed per call (a Query sums all items it reads, before
  any projection; a GSI Query the index entries), rounded up to 4 KB; 1 RRU
  per 4 KB strongly consistent, 0.5 eventually consistent; a read that finds
  nothing still costs the minimum;
- writes: the larger of the item before and after (an UpdateItem of an
  existing item too, as "Capacity unit consumption for write operations" says:
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html),
  rounded up to 1 KB, 1 WRU per KB (2 inside TransactWriteItems); plus GSI1's
  own writes: 1 per KB of index entry when a projected attribute changes, 2
  entries when its key changes (delete + put), billed as standard writes;
- a ConditionCheck in TransactWriteItems is counted like a transactional
  write of the checked item (2 per KB): an assumption, stated in the results.

Item size: attribute names plus values (strings and binaries by length,
numbers about one byte per two significant digits plus one, lists and maps
3 bytes plus one per element), as DynamoDB documents it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stack_model.template import table_definition

Key = tuple[str, str]
Item = Mapping[str, Any]

TRANSACTION_FACTOR = 2
READ_UNIT_BYTES = 4096
WRITE_UNIT_BYTES = 1024
ASSUMPTIONS = (
    "units computed from item sizes (moto's ConsumedCapacity is a constant); "
    "ConditionCheck counted as a transactional write of the checked item; "
    "GSI writes counted as standard writes"
)


def value_size(value: Mapping[str, Any]) -> int:  # noqa: PLR0911 - one return per type
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        return _number_size(str(inner))
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(element).encode()) for element in inner)
    if kind == "NS":
        return sum(_number_size(str(element)) for element in inner)
    if kind == "BS":
        return sum(len(element) for element in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(element) for element in inner)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + value_size(element) for name, element in inner.items())
    raise ValueError(f"unknown attribute type {kind}")


def _number_size(number: str) -> int:
    mantissa = re.split(r"[eE]", number, maxsplit=1)[0]
    digits = re.sub(r"[^0-9]", "", mantissa).strip("0") or "0"
    return math.ceil(len(digits) / 2) + 1


def item_size(item: Item | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


@dataclass(frozen=True)
class TableShape:
    name: str
    keys: tuple[str, ...]  # the table's own key attributes
    # index name -> (its key attributes, the other attributes it projects, or None for ALL)
    indexes: dict[str, tuple[tuple[str, ...], frozenset[str] | None]]

    @classmethod
    def from_template(cls, table_name: str) -> TableShape:
        definition = table_definition()
        indexes: dict[str, tuple[tuple[str, ...], frozenset[str] | None]] = {}
        for index in definition.get("GlobalSecondaryIndexes", []):
            projection = index["Projection"]
            projected: frozenset[str] | None = None
            if projection["ProjectionType"] == "INCLUDE":
                projected = frozenset(projection.get("NonKeyAttributes", []))
            elif projection["ProjectionType"] == "KEYS_ONLY":
                projected = frozenset()
            indexes[index["IndexName"]] = (tuple(key["AttributeName"] for key in index["KeySchema"]), projected)
        return cls(table_name, tuple(key["AttributeName"] for key in definition["KeySchema"]), indexes)

    def key_of(self, item: Item) -> Key:
        pk, sk = self.keys
        return (str(item[pk]["S"]), str(item[sk]["S"]))

    def index_entry(self, index: str, item: Item | None) -> dict[str, Any] | None:
        if not item:
            return None
        index_keys, projected = self.indexes[index]
        if any(name not in item for name in index_keys):
            return None  # sparse: not in the index
        names = set(self.keys) | set(index_keys) | (set(item) if projected is None else set(projected))
        return {name: value for name, value in item.items() if name in names}


def write_units(size: int, factor: int = 1) -> float:
    return float(factor * max(1, math.ceil(size / WRITE_UNIT_BYTES)))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units if consistent else units / 2)


@dataclass
class _Pending:
    operation: str
    params: dict[str, Any]
    before: dict[Key, Item | None] = field(default_factory=dict)
    read_items: list[Item] = field(default_factory=list)


class CapacityMeter:
    """Sizes DynamoDB calls; ``client`` is the operator's (sees every item)."""

    def __init__(self, client: Any, shape: TableShape) -> None:
        self.client = client
        self.shape = shape
        self._pending: list[_Pending] = []

    def _get(self, key: Key) -> Item | None:
        pk, sk = self.shape.keys
        response = self.client.get_item(
            TableName=self.shape.name, Key={pk: {"S": key[0]}, sk: {"S": key[1]}}, ConsistentRead=True
        )
        item: Item | None = response.get("Item")
        return item

    def _write_keys(self, operation: str, params: Mapping[str, Any]) -> list[tuple[str, Key]]:
        if operation in ("PutItem",):
            return [("Put", self.shape.key_of(params["Item"]))]
        if operation in ("UpdateItem", "DeleteItem", "GetItem"):
            return [(operation, self.shape.key_of(params["Key"]))]
        if operation == "TransactWriteItems":
            found: list[tuple[str, Key]] = []
            for action in params["TransactItems"]:
                ((kind, body),) = action.items()
                found.append((kind, self.shape.key_of(body["Item"] if kind == "Put" else body["Key"])))
            return found
        if operation == "BatchWriteItem":
            found = []
            for requests in params["RequestItems"].values():
                for request in requests:
                    if "PutRequest" in request:
                        found.append(("Put", self.shape.key_of(request["PutRequest"]["Item"])))
                    else:
                        found.append(("Delete", self.shape.key_of(request["DeleteRequest"]["Key"])))
            return found
        return []

    def before(self, operation: str, params: Mapping[str, Any]) -> None:
        pending = _Pending(operation, dict(params))
        if operation == "Query":
            pending.read_items = self._items_read(params)
        else:
            for _, key in self._write_keys(operation, params):
                pending.before[key] = self._get(key)
        self._pending.append(pending)

    def _items_read(self, params: Mapping[str, Any]) -> list[Item]:
        """The same Query as the operator, without its projection: every item
        (or index entry) it reads, whole."""
        query = {name: value for name, value in params.items() if name not in ("ProjectionExpression", "Select")}
        names = query.get("ExpressionAttributeNames")
        if names:
            used = " ".join(str(query.get(part, "")) for part in ("KeyConditionExpression", "FilterExpression"))
            kept = {alias: name for alias, name in names.items() if alias in used}
            if kept:
                query["ExpressionAttributeNames"] = kept
            else:
                query.pop("ExpressionAttributeNames")
        items: list[Item] = self.client.query(**query)["Items"]
        index = query.get("IndexName")
        if index is not None:
            return [entry for item in items if (entry := self.shape.index_entry(index, item)) is not None]
        return items

    def after(self, operation: str, parsed: Mapping[str, Any]) -> tuple[float, float]:
        """(read units, write units) of the call that just returned."""
        if not self._pending or self._pending[-1].operation != operation:
            return 0.0, 0.0
        pending = self._pending.pop()
        params = pending.params
        if "Error" in parsed:
            return 0.0, 0.0
        if operation == "Query":
            total = sum(item_size(item) for item in pending.read_items)
            return read_units(total, bool(params.get("ConsistentRead"))), 0.0
        if operation == "GetItem":
            ((_, key),) = self._write_keys(operation, params)
            return read_units(item_size(pending.before[key]), bool(params.get("ConsistentRead"))), 0.0
        factor = TRANSACTION_FACTOR if operation == "TransactWriteItems" else 1
        wru = 0.0
        for kind, key in self._write_keys(operation, params):
            old = pending.before.get(key)
            if kind == "ConditionCheck":
                wru += write_units(item_size(old), factor)
                continue
            new = self._get(key)
            wru += write_units(max(item_size(old), item_size(new)), factor)
            for index in self.shape.indexes:
                wru += self._index_writes(index, old, new)
        return 0.0, wru

    def _index_writes(self, index: str, old: Item | None, new: Item | None) -> float:
        before, after = self.shape.index_entry(index, old), self.shape.index_entry(index, new)
        if before is None and after is None:
            return 0.0
        if before is None or after is None:
            return write_units(item_size(before or after))
        index_keys = self.shape.indexes[index][0]
        if any(before[name] != after[name] for name in index_keys):
            return write_units(item_size(before)) + write_units(item_size(after))
        if before == after:
            return 0.0
        return write_units(max(item_size(before), item_size(after)))
