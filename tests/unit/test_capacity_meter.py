"""The capacity model (:class:`stack_model.capacity.CapacityMeter`) bills an UpdateItem by the
larger of the item before and after it, rounded up to 1 KB, as DynamoDB does: an update of a
record someone else wrote first (the fan-out's delivery record, which the delivery function
then updates) is sized against that record, not against an absent item."""

from __future__ import annotations

from typing import Any

from stack_model.capacity import WRITE_UNIT_BYTES, CapacityMeter, TableShape, item_size

SHAPE = TableShape(name="t", keys=("pk", "sk"), indexes={})
KEY = {"pk": {"S": "TENANT#a|WEBHOOK#w#DELIVERIES"}, "sk": {"S": "DELIVERY#d"}}


class Items:
    """The operator's view of the table: one item at most, which the "call" replaces."""

    def __init__(self, item: dict[str, Any] | None) -> None:
        self.item = item

    def get_item(self, **request: Any) -> dict[str, Any]:
        return {"Item": self.item} if self.item is not None else {}


def _record(event_bytes: int) -> dict[str, Any]:
    return {**KEY, "event": {"S": "x" * event_bytes}}


def _update_units(before: dict[str, Any] | None, after: dict[str, Any]) -> float:
    """The WRU the meter bills an UpdateItem that turns ``before`` into ``after``."""
    items = Items(before)
    meter = CapacityMeter(items, SHAPE)
    params = {"TableName": "t", "Key": KEY, "UpdateExpression": "SET #event = :body"}
    meter.before("UpdateItem", params)
    items.item = after
    rru, wru = meter.after("UpdateItem", {})
    assert rru == 0.0
    return wru


def test_an_update_that_shrinks_an_item_is_billed_by_the_item_before() -> None:
    # 3 WRU, where the same update creating the small item would be 1.
    assert _update_units(None, _record(100)) == 1.0
    big, small = _record(2 * WRITE_UNIT_BYTES), _record(100)
    assert item_size(big) > 2 * WRITE_UNIT_BYTES >= WRITE_UNIT_BYTES > item_size(small)
    assert _update_units(big, small) == 3.0


def test_an_update_that_grows_an_item_is_billed_by_the_item_after() -> None:
    small, big = _record(100), _record(WRITE_UNIT_BYTES)
    assert _update_units(small, big) == 2.0
