"""A fixed number of items, each held by one holder until a time.

They are the tenant's attempt leases (:meth:`DeliveryRecords.take_lease
<support_tickets.webhooks.delivery_records.DeliveryRecords.take_lease>`) and a
webhook's retry slots (:meth:`WebhookParking.take_slot
<support_tickets.webhooks.parking.WebhookParking.take_slot>`).

Slot ``n`` is the item ``<prefix><n>`` of one partition, with ``held_until``
(epoch seconds) and ``holder``. A slot is free when never taken, given back, or
expired: a crashed function holds nothing past ``held_until``. Taking one is a
conditional ``UpdateItem``, so two takers never hold the same slot.

Why each taker starts at a slot of its own (:func:`first_slot`): the takers of a
batch run at once, and when each tried the free slots from the first, all but one
lost each race and tried the next (a webhook's retry slots: 1.8 conditional writes
per slot taken, in the benchmark's hanging endpoint). Why a holder that keeps its
slot across invocations tries that slot before reading any (``direct``): a
message handed back again and again renews its retry slot each time, and reading
all of a webhook's slots to find its own cost a Query of up to 100 items per
renewal (about 9 KB: 3 read units, consistent) where one conditional write does.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from support_tickets.data.table import TenantTable, from_item

# Items of a slot outlive its hold by an hour (then TTL removes what nobody takes again).
KEPT_AFTER_HOLD_SECONDS = 3600


def first_slot(holder: str, count: int) -> int:
    """The slot ``holder`` tries first: its own, spread over ``count`` by a stable hash
    (the same in every invocation, whatever the interpreter's hash seed)."""
    return zlib.crc32(holder.encode()) % count


def _seconds(value: float) -> Decimal:
    return Decimal(str(round(value, 3)))


@dataclass(frozen=True, slots=True)
class ExpiringSlots:
    """Slots ``<prefix>0`` .. ``<prefix><count - 1>`` of partition ``pk`` in ``table``."""

    table: TenantTable
    pk: str
    prefix: str
    count: int

    def key(self, number: int) -> dict[str, dict[str, str]]:
        if not 0 <= number < self.count:
            raise ValueError("invalid slot")
        return {"pk": {"S": self.pk}, "sk": {"S": f"{self.prefix}{number}"}}

    def take(self, holder: str, now: float, until: float, *, renew: bool = False, direct: bool = False) -> int | None:
        """A slot for ``holder`` until ``until``, or ``None`` when every one is held by
        another (or there are none). ``renew``: the slot ``holder`` holds already counts as free (its hold is
        extended). ``direct``: :func:`first_slot` is tried with one conditional write
        before the slots are read (a holder that keeps its slot across calls finds it
        there without a read). Otherwise, and when that fails: one consistent Query of
        the slots, then a conditional ``UpdateItem`` of ``holder``'s own (``renew``),
        else of the free ones from :func:`first_slot` on, wrapping round; another taker
        winning one moves on to the next."""
        if self.count <= 0:
            return None
        first = first_slot(holder, self.count)
        if direct and self._claim(first, holder, now, until, renew=renew):
            return first
        held: dict[int, str] = {}
        for row in self._rows(now):
            held[int(str(row["sk"]).removeprefix(self.prefix))] = str(row.get("holder"))
        mine = [number for number, who in held.items() if renew and who == holder and number < self.count]
        rotated = [(first + offset) % self.count for offset in range(self.count)]
        free = [number for number in rotated if number not in held and not (direct and number == first)]
        for number in mine + free:
            if self._claim(number, holder, now, until, renew=renew):
                return number
        return None

    def give_back(self, holder: str, number: int | None = None) -> None:
        """Free the slot ``holder`` holds: ``number`` if known (a conditional write that
        does nothing if another holds it now, its hold having expired), else the one a
        consistent Query of the slots finds, after :func:`first_slot`'s (one conditional
        write) where the holder keeps its slot across calls."""
        if number is not None:
            self._release(number, holder)
            return
        if self.count > 0 and self._release(first_slot(holder, self.count), holder):
            return
        for row in self._rows(None):
            if row.get("holder") == holder:
                self._release(int(str(row["sk"]).removeprefix(self.prefix)), holder)

    def _rows(self, now: float | None) -> list[dict[str, Any]]:
        """The slots' items (``now``: only those held at ``now``), read consistently."""
        response = self.table.call(
            "query",
            TableName=self.table.table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": self.pk}, ":prefix": {"S": self.prefix}},
            ProjectionExpression="sk, held_until, holder",
            ConsistentRead=True,
        )
        rows = [from_item(item) for item in response.get("Items", [])]
        if now is None:
            return [row for row in rows if row.get("holder") is not None]
        return [row for row in rows if row.get("held_until") is not None and float(row["held_until"]) > now]

    def _claim(self, number: int, holder: str, now: float, until: float, *, renew: bool) -> bool:
        condition = "attribute_not_exists(held_until) OR held_until <= :now"
        return self.table.call_if(
            "update_item",
            TableName=self.table.table_name,
            Key=self.key(number),
            UpdateExpression="SET held_until = :until, holder = :holder, expiration = :expiration",
            ConditionExpression=f"{condition} OR holder = :holder" if renew else condition,
            ExpressionAttributeValues={
                ":until": {"N": str(_seconds(until))},
                ":holder": {"S": holder},
                ":now": {"N": str(_seconds(now))},
                ":expiration": {"N": str(int(until) + KEPT_AFTER_HOLD_SECONDS)},
            },
        )

    def _release(self, number: int, holder: str) -> bool:
        """``False`` when ``holder`` does not hold slot ``number``."""
        return self.table.call_if(
            "update_item",
            TableName=self.table.table_name,
            Key=self.key(number),
            UpdateExpression="REMOVE held_until, holder",
            ConditionExpression="holder = :holder",
            ExpressionAttributeValues={":holder": {"S": holder}},
        )
