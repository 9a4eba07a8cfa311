"""A tenant's webhooks and their deliveries as its admins reach them.

The management routes' reads and writes, with the caller's own tenant credentials.

Webhooks (:class:`WebhookRepository`), and the encryption of their signing
secrets (:class:`SecretSealer`). Keys come from :mod:`support_tickets.core.keys`: a tenant's webhooks (at most
:data:`MAX_WEBHOOKS`) and their count share ``TENANT#<t>|WEBHOOKS``. The limit
is race-safe: a create adds 1 to the count under the condition ``count <
limit`` in the same transaction that puts the webhook, a delete takes 1 off in
the transaction that deletes it. Both add 1 to the count item's ``version``:
the audit writer reads it (strongly consistent) to know whether the webhooks it
cached are still the tenant's (:mod:`support_tickets.webhooks.fanout`).

Secrets are stored only as KMS ciphertext (base64), encrypted with the
caller's own tenant credentials under the encryption context
``{"tenant_id", "webhook_id"}`` (docs/webhooks.md): IAM lets tenant credentials
encrypt only under their own tenant id, and KMS binds the context to the
ciphertext. Listing reads the public attributes only: a list request never
even reads a ciphertext.

Deliveries (:class:`DeliveryRepository`): a webhook's deliveries as its
tenant's admins see them, the list and the redelivery mark. The records
themselves, and why they are keyed as they are, are
:mod:`support_tickets.webhooks.delivery_records`'s.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from support_tickets.core import keys
from support_tickets.core.errors import (
    Conflict,
    DeliveryNotFound,
    Forbidden,
    Throttled,
    TooManyWebhooks,
    Unavailable,
    WebhookNotFound,
)
from support_tickets.core.models import Delivery, DeliveryPage, MalformedItem, Webhook
from support_tickets.data.cursor import decode_cursor, encode_cursor, query_fingerprint
from support_tickets.data.session import THROTTLING_CODES
from support_tickets.data.table import TenantTable, cancellation_codes, error_code, from_item, to_item
from support_tickets.webhooks.delivery_records import (
    FAILURE_REASON,
    PENDING,
    REDELIVER_MARK,
    pending_redelivery,
    webhooks_query,
)

MAX_WEBHOOKS: Final = 10
# What a list reads: never the secrets.
_PUBLIC_ATTRIBUTES: Final = ("webhook_id", "url", "events", "description", "status", "created_at")


@dataclass(frozen=True)
class WebhookItem:
    """A webhook as stored: ``secret`` (and ``previous_secret`` during a rotation) are KMS ciphertext, base64."""

    pk: str
    sk: str
    webhook_id: str
    url: str
    events: list[str]
    description: str
    status: str
    created_at: str
    secret: str

    def stored(self) -> dict[str, Any]:
        return asdict(self)

    def webhook(self) -> Webhook:
        return webhook_of_row(self.stored())


def webhook_of_row(row: Mapping[str, Any]) -> Webhook:
    """The public view of a stored webhook (plain values); a malformed row is :class:`MalformedItem`."""
    events = row.get("events")
    if not isinstance(events, list) or not all(isinstance(event, str) for event in events):
        raise MalformedItem("events: expected a list of strings")
    text = {name: row.get(name) for name in _PUBLIC_ATTRIBUTES if name != "events"}
    strings = {name: value for name, value in text.items() if isinstance(value, str)}
    if len(strings) != len(text):
        raise MalformedItem("webhook: expected string attributes")
    return Webhook(events=list(events), **strings)


@dataclass(frozen=True, slots=True)
class SecretSealer:
    """KMS encryption of a tenant's webhook secrets, with its caller's credentials."""

    kms: Any  # the container's KMS client, signing with the caller's credentials
    key_arn: str
    tenant_id: str

    def seal(self, webhook_id: str, secret: str) -> str:
        """``secret`` encrypted under ``{"tenant_id", "webhook_id"}``, as base64."""
        try:
            response = self.kms.encrypt(
                KeyId=self.key_arn,
                Plaintext=secret.encode(),
                EncryptionContext={"tenant_id": keys.validate_tenant_id(self.tenant_id), "webhook_id": webhook_id},
            )
        except ClientError as exc:
            code = error_code(exc)
            if code in THROTTLING_CODES:
                raise Throttled() from exc
            if code == "AccessDeniedException":
                raise Forbidden("Access denied.") from exc
            raise Unavailable() from exc
        except BotoCoreError as exc:
            raise Unavailable() from exc
        return base64.b64encode(response["CiphertextBlob"]).decode()


@dataclass(frozen=True, slots=True)
class WebhookRepository:
    table: TenantTable

    def list_webhooks(self) -> list[Webhook]:
        """The tenant's webhooks, oldest first (their ids are time-ordered); one Query."""
        query = webhooks_query(self.table, _PUBLIC_ATTRIBUTES)
        found: list[Webhook] = []
        for page in self.table.query_pages(query):
            found.extend(webhook_of_row(from_item(item)) for item in page)
        return found

    def create_webhook(self, item: WebhookItem) -> None:
        """Store a new webhook, unless the tenant has :data:`MAX_WEBHOOKS` already (409)."""
        stored = to_item(item.stored())
        try:
            self.table.call(
                "transact_write_items",
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table.table_name,
                            "Key": keys.webhook_count_key(self.table.tenant_id),
                            "UpdateExpression": "ADD #count :one, #version :one",
                            "ConditionExpression": "attribute_not_exists(#count) OR #count < :limit",
                            "ExpressionAttributeNames": {"#count": "count", "#version": "version"},
                            "ExpressionAttributeValues": {":one": {"N": "1"}, ":limit": {"N": str(MAX_WEBHOOKS)}},
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table.table_name,
                            "Item": stored,
                            "ConditionExpression": "attribute_not_exists(pk)",
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                ],
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            codes = cancellation_codes(exc)
            reasons = exc.response.get("CancellationReasons", [])
            if len(reasons) > 1 and codes[1] == "ConditionalCheckFailed":
                found = reasons[1].get("Item") or {}
                if found.get("webhook_id") == stored["webhook_id"] and found.get("secret") == stored["secret"]:
                    return  # a retry of a transaction that landed: it succeeded once
                raise Conflict() from exc
            if codes and codes[0] == "ConditionalCheckFailed":
                raise TooManyWebhooks() from exc
            self.table.raise_for_cancellation(exc)

    def delete_webhook(self, webhook_id: str) -> None:
        """Delete a webhook of this tenant (404 if it has none with that id)."""
        if not keys.is_valid_webhook_id(webhook_id):
            raise WebhookNotFound()
        try:
            self.table.call(
                "transact_write_items",
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self.table.table_name,
                            "Key": keys.webhook_key(self.table.tenant_id, webhook_id),
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table.table_name,
                            "Key": keys.webhook_count_key(self.table.tenant_id),
                            "UpdateExpression": "ADD #count :minus_one, #version :one",
                            "ConditionExpression": "#count > :zero",
                            "ExpressionAttributeNames": {"#count": "count", "#version": "version"},
                            "ExpressionAttributeValues": {
                                ":minus_one": {"N": "-1"},
                                ":zero": {"N": "0"},
                                ":one": {"N": "1"},
                            },
                        }
                    },
                ],
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            if cancellation_codes(exc)[:1] == ["ConditionalCheckFailed"]:
                raise WebhookNotFound() from exc
            self.table.raise_for_cancellation(exc)

    def rotate_secret(self, webhook_id: str, sealed: str, previous_expires_at: str) -> None:
        """Make ``sealed`` the webhook's secret; its current one becomes the
        previous secret until ``previous_expires_at`` (404 if there is no such webhook)."""
        if not keys.is_valid_webhook_id(webhook_id):
            raise WebhookNotFound()
        try:
            self.table.call(
                "update_item",
                TableName=self.table.table_name,
                Key=keys.webhook_key(self.table.tenant_id, webhook_id),
                UpdateExpression=(
                    "SET #previous = #secret, #secret = :sealed, #previous_expires_at = :previous_expires_at"
                ),
                ConditionExpression="attribute_exists(pk) AND #secret <> :sealed",
                ExpressionAttributeNames={
                    "#secret": "secret",
                    "#previous": "previous_secret",
                    "#previous_expires_at": "previous_secret_expires_at",
                },
                ExpressionAttributeValues={
                    ":sealed": {"S": sealed},
                    ":previous_expires_at": {"S": previous_expires_at},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            response: Mapping[str, Any] = exc.response
            if (response.get("Item") or {}).get("secret") == {"S": sealed}:
                return  # a retry of an update that landed
            raise WebhookNotFound() from exc


_DELIVERY_ATTRIBUTES: Final = (
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
_DELIVERY_PROJECTION: Final = ("pk", "sk", *_DELIVERY_ATTRIBUTES, REDELIVER_MARK)
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
            "ProjectionExpression": ", ".join(f"#{name}" for name in _DELIVERY_PROJECTION),
            "ExpressionAttributeNames": {f"#{name}": name for name in _DELIVERY_PROJECTION},
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
