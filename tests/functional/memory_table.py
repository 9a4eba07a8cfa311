"""The four DynamoDB calls the aggregator's ledger makes, in memory, for the
volume test (hundreds of thousands of records: moto's TransactWriteItems copies
the whole table on every call). ``test_aggregation`` checks that it leaves
exactly the items moto leaves for the same deliveries, so the volume test's
item sizes are the real ones.

Item sizes follow DynamoDB's rules (attribute name lengths plus value sizes:
strings in UTF-8 bytes, numbers about one byte per two digits plus one, a list
3 bytes plus one per element plus its elements)."""

from __future__ import annotations

import copy
import math
import re
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

_ADD = re.compile(r"^ADD #count :delta, #rev :one$")


def _key(key: dict[str, Any]) -> tuple[str, str]:
    return key["pk"]["S"], key["sk"]["S"]


def value_size(value: dict[str, Any]) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = len(inner.lstrip("-").replace(".", "").lstrip("0")) or 1
        return (digits + 1) // 2 + 1
    if kind == "L":
        return 3 + sum(1 + value_size(element) for element in inner)
    raise NotImplementedError(kind)


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


class MemoryTable:
    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.largest_item = 0
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _store(self, item: dict[str, Any]) -> None:
        self.items[_key(item)] = item
        self.largest_item = max(self.largest_item, item_size(item))

    def get_item(
        self,
        *,
        TableName: str,  # noqa: N803 - boto3's names
        Key: dict[str, Any],  # noqa: N803
        ConsistentRead: bool = False,  # noqa: N803
        ReturnConsumedCapacity: str = "NONE",  # noqa: N803
    ) -> dict[str, Any]:
        self._count("GetItem")
        item = self.items.get(_key(Key))
        # DynamoDB's rule: 4 KB read units, halved when eventually consistent (1 unit at least).
        units = math.ceil((item_size(item) if item else 1) / 4096) * (1 if ConsistentRead else 0.5)
        answer = {"Item": copy.deepcopy(item)} if item is not None else {}
        return answer | _consumed(TableName, ReturnConsumedCapacity, read=units)

    def put_item(
        self,
        *,
        TableName: str,  # noqa: N803
        Item: dict[str, Any],  # noqa: N803
        ConditionExpression: str,  # noqa: N803
        ReturnConsumedCapacity: str = "NONE",  # noqa: N803
    ) -> dict[str, Any]:
        self._count("PutItem")
        assert ConditionExpression == "attribute_not_exists(pk)"
        if _key(Item) in self.items:
            raise ClientError({"Error": {"Code": "ConditionalCheckFailedException", "Message": ""}}, "PutItem")
        self._store(copy.deepcopy(Item))
        return _consumed(TableName, ReturnConsumedCapacity, write=math.ceil(item_size(Item) / 1024))

    def transact_write_items(
        self,
        *,
        TransactItems: list[dict[str, Any]],  # noqa: N803
        ReturnConsumedCapacity: str = "NONE",  # noqa: N803
    ) -> dict[str, Any]:
        self._count("TransactWriteItems")
        reasons = []
        for action in TransactItems:
            if "Put" in action:
                exists = _key(action["Put"]["Item"]) in self.items
                reasons.append({"Code": "ConditionalCheckFailed" if exists else "None"})
            else:
                assert _ADD.match(action["Update"]["UpdateExpression"])
                reasons.append({"Code": "None"})
        if any(reason["Code"] != "None" for reason in reasons):
            raise ClientError(
                {"Error": {"Code": "TransactionCanceledException", "Message": ""}, "CancellationReasons": reasons},  # type: ignore[typeddict-item]
                "TransactWriteItems",
            )
        for action in TransactItems:
            if "Put" in action:
                self._store(copy.deepcopy(action["Put"]["Item"]))
                continue
            update = action["Update"]
            item = self.items.get(_key(update["Key"])) or copy.deepcopy(update["Key"])
            values = update["ExpressionAttributeValues"]
            for attribute, placeholder in (("count", ":delta"), ("rev", ":one")):
                total = Decimal(item.get(attribute, {"N": "0"})["N"]) + Decimal(values[placeholder]["N"])
                item[attribute] = {"N": str(total)}
            self._store(item)
        # Twice the units of the items' writes, per 1 KB of each, reported per table.
        written = [
            self.items[_key(action.get("Put", {}).get("Item") or action["Update"]["Key"])] for action in TransactItems
        ]
        units = sum(2 * math.ceil(item_size(item) / 1024) for item in written)
        table = (TransactItems[0].get("Put") or TransactItems[0]["Update"])["TableName"] if TransactItems else ""
        consumed = _consumed(table, ReturnConsumedCapacity, write=units)
        return {"ConsumedCapacity": [consumed["ConsumedCapacity"]]} if consumed else {}


def _consumed(table: str, asked: str, *, read: float = 0, write: float = 0) -> dict[str, Any]:
    """The ``ConsumedCapacity`` answer DynamoDB gives when asked for ``TOTAL``."""
    if asked == "NONE":
        return {}
    return {
        "ConsumedCapacity": {"TableName": table, "CapacityUnits": read + write}
        | ({"ReadCapacityUnits": read} if read else {})
        | ({"WriteCapacityUnits": write} if write else {})
    }
