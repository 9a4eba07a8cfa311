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

    def get_item(self, *, TableName: str, Key: dict[str, Any], ConsistentRead: bool = False) -> dict[str, Any]:  # noqa: N803 - boto3's names
        self._count("GetItem")
        item = self.items.get(_key(Key))
        return {"Item": copy.deepcopy(item)} if item is not None else {}

    def put_item(self, *, TableName: str, Item: dict[str, Any], ConditionExpression: str) -> dict[str, Any]:  # noqa: N803
        self._count("PutItem")
        assert ConditionExpression == "attribute_not_exists(pk)"
        if _key(Item) in self.items:
            raise ClientError({"Error": {"Code": "ConditionalCheckFailedException", "Message": ""}}, "PutItem")
        self._store(copy.deepcopy(Item))
        return {}

    def transact_write_items(self, *, TransactItems: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
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
        return {}
