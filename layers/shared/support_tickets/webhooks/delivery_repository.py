"""A webhook's deliveries as its tenant's admins see them: the list, and redelivery.

The records themselves, and why they are keyed as they are, are
:mod:`support_tickets.webhooks.delivery_records`'s. These reads and writes run with
the caller's own tenant credentials (the API functions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from support_tickets.core import keys
from support_tickets.core.errors import DeliveryNotFound, WebhookNotFound
from support_tickets.core.models import Delivery, DeliveryPage, MalformedItem
from support_tickets.data.cursor import decode_cursor, encode_cursor, query_fingerprint
from support_tickets.data.table import TenantTable, error_code, to_item
from support_tickets.webhooks.delivery_records import FAILURE_REASON, PENDING, REDELIVER_MARK, pending_redelivery

_PUBLIC: Final = (
    "delivery_id",
    "event_id",
    "type",
    "status",
    "attempts",
    "last_status_code",
    "next_attempt_at",
    "created_at",
    FAILURE_REASON,
)
_PROJECTED: Final = ("pk", "sk", *_PUBLIC, REDELIVER_MARK)
_KEY_ATTRIBUTES: Final = frozenset({"pk", "sk"})


def delivery_of_row(row: Mapping[str, Any]) -> Delivery:
    """The delivery object of a stored record; a malformed one is :class:`MalformedItem`.
    A record marked for redelivery is ``PENDING``, its next attempt the request's
    time, until the delivery function records that attempt (and removes the mark)."""
    try:
        code = row.get("last_status_code")
        redelivery = pending_redelivery(row.get(REDELIVER_MARK))
        next_attempt_at = None if row.get("next_attempt_at") is None else str(row["next_attempt_at"])
        return Delivery(
            delivery_id=str(row["delivery_id"]),
            event_id=str(row["event_id"]),
            type=str(row["type"]),
            status=PENDING if redelivery is not None else str(row["status"]),
            attempts=int(row.get("attempts", 0)),
            last_status_code=None if code is None else int(code),
            next_attempt_at=redelivery if redelivery is not None else next_attempt_at,
            created_at=str(row["created_at"]),
            failure_reason=None if row.get(FAILURE_REASON) is None else str(row[FAILURE_REASON]),
        )
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
        raise MalformedItem(f"delivery: {exc}") from exc


@dataclass(frozen=True, slots=True)
class DeliveryRepository:
    table: TenantTable

    def require_webhook(self, webhook_id: str) -> None:
        """:class:`WebhookNotFound` unless the tenant has this webhook."""
        if not self.webhook_exists(webhook_id):
            raise WebhookNotFound()

    def webhook_exists(self, webhook_id: str) -> bool:
        if not keys.is_valid_webhook_id(webhook_id):
            return False
        response = self.table.call(
            "get_item",
            TableName=self.table.table_name,
            Key=keys.webhook_key(self.table.tenant_id, webhook_id),
            ProjectionExpression="webhook_id",
        )
        return bool(response.get("Item"))

    def list_deliveries(self, webhook_id: str, limit: int, cursor: str | None) -> DeliveryPage:
        """A page of the webhook's deliveries, newest first: one Query. Only an
        empty first page costs a GetItem, to tell a webhook without deliveries
        from a missing one (404). Like a ticket's history, deliveries outlive
        their webhook until they expire (30 days)."""
        if not keys.is_valid_webhook_id(webhook_id):
            raise WebhookNotFound()
        pk = keys.webhook_deliveries_pk(self.table.tenant_id, webhook_id)
        fingerprint = query_fingerprint(self.table.tenant_id, "deliveries", webhook_id)
        query: dict[str, Any] = {
            "TableName": self.table.table_name,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :delivery)",
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":delivery": {"S": keys.DELIVERY_SK_PREFIX}},
            "ScanIndexForward": False,
            "ProjectionExpression": ", ".join(f"#{name}" for name in _PROJECTED),
            "ExpressionAttributeNames": {f"#{name}": name for name in _PROJECTED},
        }
        if cursor is not None:
            start = decode_cursor(cursor, fingerprint, _KEY_ATTRIBUTES, lambda key: _own_delivery_key(key, pk))
            query["ExclusiveStartKey"] = to_item(start)
        rows, more = self.table.query_up_to(query, limit, from_cursor=cursor is not None)
        if not rows and cursor is None:
            self.require_webhook(webhook_id)
        rows = rows[:limit]
        items = []
        for row in rows:
            try:
                items.append(delivery_of_row(row))
            except MalformedItem:
                continue  # an operator's or a bug's row: left out, never a 500
        next_cursor = encode_cursor(fingerprint, {"pk": rows[-1]["pk"], "sk": rows[-1]["sk"]}) if more else None
        return DeliveryPage(items=items, next_cursor=next_cursor)

    def request_redelivery(self, webhook_id: str, delivery_id: str, at: str) -> None:
        """Mark a delivery for redelivery (404s: the webhook, then the delivery)."""
        self.require_webhook(webhook_id)
        if not keys.is_valid_delivery_id(delivery_id):
            raise DeliveryNotFound()
        try:
            self.table.call(
                "update_item",
                TableName=self.table.table_name,
                Key=keys.delivery_key(self.table.tenant_id, webhook_id, delivery_id),
                # The key and the mark, nothing else: all TenantAccessRole may write of a
                # delivery record (its Deny TenantsOnlyMarkDeliveriesForRedelivery). Only the
                # delivery function creates records, always with their event.
                UpdateExpression=f"SET {REDELIVER_MARK} = :at",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":at": {"S": at}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            raise DeliveryNotFound() from exc


def _own_delivery_key(key: Mapping[str, str], pk: str) -> bool:
    sk = key.get("sk", "")
    return key.get("pk") == pk and sk.startswith(keys.DELIVERY_SK_PREFIX) and keys.is_valid_delivery_id(sk[9:])
