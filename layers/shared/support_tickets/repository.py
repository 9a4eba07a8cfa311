"""Every access pattern of the single-table model, for one tenant.

A :class:`TicketRepository` is bound to one tenant and reaches DynamoDB only
through that tenant's scoped client (see ``session``). Only GetItem, Query,
PutItem, UpdateItem, DeleteItem, BatchWriteItem and TransactWriteItems are
used; never Scan, never a filter expression. Keys come from ``keys``.

All calls go through :meth:`TicketRepository._call`, the one place that maps
AWS errors: throttling that outlived botocore's retries becomes ``Throttled``
(429), other service failures ``Unavailable`` (503), and credentials that
expired under a cached client are renewed once and the call retried (nothing
was executed: DynamoDB authenticates before it acts).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from support_tickets import keys
from support_tickets.clock import utc_now_iso
from support_tickets.cursor import decode_cursor, encode_cursor, query_fingerprint
from support_tickets.errors import Conflict, Forbidden, Throttled, TicketNotFound, Unavailable, VersionMismatch
from support_tickets.ids import new_id
from support_tickets.keys import TicketStatus
from support_tickets.models import (
    AggregatesResponse,
    BatchStatusResponse,
    Comment,
    CommentItem,
    CreateTicketRequest,
    Ticket,
    TicketItem,
    TicketPage,
    TicketWithComments,
)
from support_tickets.session import EXPIRED_CREDENTIALS_CODES, THROTTLING_CODES

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

BATCH_WRITE_SIZE = 25
MAX_UNPROCESSED_ROUNDS = 8
LIST_KEY_ATTRIBUTES = frozenset({"pk", "sk", "tenant_status", "resolver"})
COMMENT_KEY_ATTRIBUTES = frozenset({"pk", "sk"})
# Codes DynamoDB puts in a transaction's CancellationReasons when it throttled.
CANCELLATION_THROTTLING_CODES = THROTTLING_CODES | {"ThrottlingError", "ProvisionedThroughputExceeded"}


class ClientProvider(Protocol):
    def dynamodb(self, tenant_id: str) -> DynamoDBClient: ...

    def invalidate(self, tenant_id: str) -> None: ...


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _serializer.serialize(value) for name, value in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


@dataclass(frozen=True, slots=True)
class TicketRepository:
    tenant_id: str
    table_name: str
    clients: ClientProvider

    # ------------------------------------------------------------ plumbing
    def _call(self, operation: str, **kwargs: Any) -> Any:
        for attempt in (1, 2):
            client = self.clients.dynamodb(self.tenant_id)
            try:
                return getattr(client, operation)(**kwargs)
            except ClientError as exc:
                code = error_code(exc)
                if code in EXPIRED_CREDENTIALS_CODES:
                    self.clients.invalidate(self.tenant_id)
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
                if code in {"InternalServerError", "ServiceUnavailable", "ServiceUnavailableException"}:
                    raise Unavailable() from exc
                raise
            except BotoCoreError as exc:
                raise Unavailable() from exc
        raise Unavailable()  # pragma: no cover - the loop returns or raises

    def idempotency_client(self) -> DynamoDBClient:
        """The client Powertools' idempotency layer stores its records with:
        its calls go through :meth:`_call` too (429 on throttling, renewal of
        expired credentials), the mapped error as the wrapped exception's cause."""
        return cast("DynamoDBClient", _RepositoryClient(self))

    def _ticket_pk(self, ticket_id: str) -> str:
        if not keys.is_valid_ticket_id(ticket_id):
            # An id that can't exist is "not found", exactly like a missing one.
            raise TicketNotFound()
        return keys.ticket_pk(self.tenant_id, ticket_id)

    # ------------------------------------------------------------ tickets
    def create_ticket(self, request: CreateTicketRequest, created_by: str) -> Ticket:
        now = utc_now_iso()
        ticket_id = new_id()
        item = TicketItem(
            pk=keys.ticket_pk(self.tenant_id, ticket_id),
            sk=keys.SUMMARY_SK,
            tenant_status=keys.tenant_status(self.tenant_id, TicketStatus.OPEN),
            resolver=keys.resolver_key(request.resolver),
            ticket_id=ticket_id,
            title=request.title,
            description=request.description,
            created_by=created_by,
            created_at=now,
            updated_at=now,
            version=1,
        )
        self._call(
            "put_item",
            TableName=self.table_name,
            Item=to_item(item.model_dump()),
            ConditionExpression="attribute_not_exists(pk)",
        )
        return item.ticket()

    def get_ticket_summary(self, ticket_id: str) -> Ticket:
        response = self._call(
            "get_item",
            TableName=self.table_name,
            Key={"pk": {"S": self._ticket_pk(ticket_id)}, "sk": {"S": keys.SUMMARY_SK}},
            ConsistentRead=True,
        )
        if "Item" not in response:
            raise TicketNotFound()
        return TicketItem.model_validate(from_item(response["Item"])).ticket()

    def get_ticket_with_comments(self, ticket_id: str, limit: int, cursor: str | None) -> TicketWithComments:
        """One Query over the item collection: comments (``COMMENT#…`` sorts first,
        oldest first) and then the summary. When the rest of the comments fit in
        the page the summary comes with them in that same call; when more
        comments follow, the page ends early and one GetItem fetches the summary."""
        pk = self._ticket_pk(ticket_id)
        fingerprint = query_fingerprint(self.tenant_id, "comments", ticket_id)
        query: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
            "ConsistentRead": True,
            "Limit": limit + 1,
        }
        if cursor is not None:
            start = decode_cursor(
                cursor,
                fingerprint,
                COMMENT_KEY_ATTRIBUTES,
                lambda key: key["pk"] == pk and key["sk"].startswith(keys.COMMENT_SK_PREFIX),
            )
            query["ExclusiveStartKey"] = to_item(start)
        items = [from_item(item) for item in self._call("query", **query)["Items"]]
        summary = next((item for item in items if item["sk"] == keys.SUMMARY_SK), None)
        comment_items = [item for item in items if item["sk"].startswith(keys.COMMENT_SK_PREFIX)]
        next_cursor = None
        if summary is None:
            if not comment_items:
                raise TicketNotFound()
            comment_items = comment_items[:limit]
            if len(items) > limit:
                last = comment_items[-1]
                next_cursor = encode_cursor(fingerprint, {"pk": last["pk"], "sk": last["sk"]})
            ticket = self.get_ticket_summary(ticket_id)
        else:
            ticket = TicketItem.model_validate(summary).ticket()
        comments = [CommentItem.model_validate(item).comment() for item in comment_items]
        return TicketWithComments(ticket=ticket, comments=comments, next_cursor=next_cursor)

    def list_tickets_by_status(
        self, status: TicketStatus, resolver: str | None, limit: int, cursor: str | None
    ) -> TicketPage:
        """GSI1 query: ``tenant_status`` = ``TENANT#<t>|<STATUS>``, optionally one
        ``resolver``. Reads ``limit + 1`` rows so the last page has no cursor."""
        status_key = keys.tenant_status(self.tenant_id, status)
        condition = "tenant_status = :ts"
        values: dict[str, Any] = {":ts": {"S": status_key}}
        if resolver is not None:
            condition += " AND resolver = :r"
            values[":r"] = {"S": resolver}
        fingerprint = query_fingerprint(self.tenant_id, "list", status.value, resolver or "")
        query: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": keys.GSI1_NAME,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "Limit": limit + 1,
        }
        if cursor is not None:
            prefix = keys.tenant_prefix(self.tenant_id) + "TICKET#"

            def in_this_query(key: Mapping[str, str]) -> bool:
                return (
                    key["tenant_status"] == status_key
                    and (resolver is None or key["resolver"] == resolver)
                    and key["sk"] == keys.SUMMARY_SK
                    and key["pk"].startswith(prefix)
                    and keys.is_valid_ticket_id(key["pk"][len(prefix) :])
                )

            start = decode_cursor(cursor, fingerprint, LIST_KEY_ATTRIBUTES, in_this_query)
            query["ExclusiveStartKey"] = to_item(start)
        rows = [from_item(item) for item in self._call("query", **query)["Items"]]
        next_cursor = None
        if len(rows) > limit:
            rows = rows[:limit]
            last = rows[-1]
            next_cursor = encode_cursor(fingerprint, {name: last[name] for name in LIST_KEY_ATTRIBUTES})
        items = [TicketItem.model_validate(row).list_item() for row in rows]
        return TicketPage(items=items, next_cursor=next_cursor)

    def update_ticket(self, ticket_id: str, changes: Mapping[str, Any], expected_version: int | None) -> Ticket:
        """Conditional update; status and resolver move the ticket within GSI1."""
        pk = self._ticket_pk(ticket_id)
        names = {"#version": "version", "#updated_at": "updated_at"}
        values: dict[str, Any] = {":one": {"N": "1"}, ":now": {"S": utc_now_iso()}}
        assignments = ["#version = #version + :one", "#updated_at = :now"]
        stored: dict[str, Any] = {}
        for field, value in changes.items():
            if field == "status":
                stored["tenant_status"] = keys.tenant_status(self.tenant_id, value)
            elif field == "resolver":
                stored["resolver"] = keys.resolver_key(value)
            else:
                stored[field] = value
        for attribute, value in stored.items():
            names[f"#{attribute}"] = attribute
            values[f":{attribute}"] = _serializer.serialize(value)
            assignments.append(f"#{attribute} = :{attribute}")
        condition = "attribute_exists(pk)"
        if expected_version is not None:
            condition += " AND #version = :expected"
            values[":expected"] = {"N": str(expected_version)}
        try:
            response = self._call(
                "update_item",
                TableName=self.table_name,
                Key={"pk": {"S": pk}, "sk": {"S": keys.SUMMARY_SK}},
                UpdateExpression="SET " + ", ".join(assignments),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            if "Item" not in exc.response:
                raise TicketNotFound() from exc
            current = int(exc.response["Item"]["version"]["N"])  # type: ignore[typeddict-item]
            raise VersionMismatch(details={"current_version": current}) from exc
        return TicketItem.model_validate(from_item(response["Attributes"])).ticket()

    def change_status(self, ticket_ids: Sequence[str], status: TicketStatus) -> BatchStatusResponse:
        """All or nothing in one TransactWriteItems (≤100 items, one tenant).
        Every update is conditional on the ticket existing, so a missing or
        foreign id cancels the whole transaction and names itself."""
        for ticket_id in ticket_ids:
            if not keys.is_valid_ticket_id(ticket_id):
                raise TicketNotFound(details={"missing_ticket_ids": [ticket_id]})
        now = utc_now_iso()
        status_key = keys.tenant_status(self.tenant_id, status)
        updates = [
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": {"pk": {"S": keys.ticket_pk(self.tenant_id, ticket_id)}, "sk": {"S": keys.SUMMARY_SK}},
                    "UpdateExpression": "SET tenant_status = :ts, #version = #version + :one, updated_at = :now",
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeNames": {"#version": "version"},
                    "ExpressionAttributeValues": {":ts": {"S": status_key}, ":one": {"N": "1"}, ":now": {"S": now}},
                }
            }
            for ticket_id in ticket_ids
        ]
        try:
            self._call("transact_write_items", TransactItems=updates)
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons", [])
            missing = [
                ticket_id
                for ticket_id, reason in zip(ticket_ids, reasons, strict=False)
                if reason.get("Code") == "ConditionalCheckFailed"
            ]
            if missing:
                raise TicketNotFound(details={"missing_ticket_ids": missing}) from exc
            if any(reason.get("Code") in CANCELLATION_THROTTLING_CODES for reason in reasons):
                raise Throttled() from exc
            raise Conflict() from exc
        return BatchStatusResponse(updated=list(ticket_ids), status=status)

    def delete_ticket(self, ticket_id: str) -> None:
        """Remove the summary first (so no comment can be added any more and the
        ticket leaves every list at once), then the comments, 25 per
        BatchWriteItem. A retry after a partial failure finishes the job."""
        pk = self._ticket_pk(ticket_id)
        found = False
        summary_deleted = False
        for page in self._item_collection_keys(pk):
            found = found or bool(page)
            if not summary_deleted:
                self._call(
                    "delete_item",
                    TableName=self.table_name,
                    Key={"pk": {"S": pk}, "sk": {"S": keys.SUMMARY_SK}},
                )
                summary_deleted = True
            comment_keys = [key for key in page if key["sk"]["S"] != keys.SUMMARY_SK]
            for start in range(0, len(comment_keys), BATCH_WRITE_SIZE):
                self._batch_delete(comment_keys[start : start + BATCH_WRITE_SIZE])
        if not found:
            raise TicketNotFound()

    def _item_collection_keys(self, pk: str) -> Iterator[list[dict[str, Any]]]:
        query: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
        }
        while True:
            response = self._call("query", **query)
            yield response["Items"]
            if "LastEvaluatedKey" not in response:
                return
            query["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _batch_delete(self, item_keys: list[dict[str, Any]]) -> None:
        requests: list[Any] = [{"DeleteRequest": {"Key": key}} for key in item_keys]
        for round_number in range(MAX_UNPROCESSED_ROUNDS):
            response = self._call("batch_write_item", RequestItems={self.table_name: requests})
            requests = response.get("UnprocessedItems", {}).get(self.table_name, [])
            if not requests:
                return
            time.sleep(min(0.05 * 2**round_number, 1.0))
        raise Throttled()

    # ------------------------------------------------------------ comments
    def add_comment(self, ticket_id: str, author: str, body: str) -> Comment:
        """Put the comment only if the ticket exists, atomically (a ConditionCheck
        on the summary), so a deleted ticket can't collect orphan comments."""
        pk = self._ticket_pk(ticket_id)
        now = utc_now_iso()
        comment_id = new_id()
        item = CommentItem(
            pk=pk, sk=keys.comment_sk(now, comment_id), comment_id=comment_id, author=author, body=body, created_at=now
        )
        try:
            self._call(
                "transact_write_items",
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self.table_name,
                            "Key": {"pk": {"S": pk}, "sk": {"S": keys.SUMMARY_SK}},
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table_name,
                            "Item": to_item(item.model_dump()),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ],
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons", [])
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                raise TicketNotFound() from exc
            if any(reason.get("Code") in CANCELLATION_THROTTLING_CODES for reason in reasons):
                raise Throttled() from exc
            raise Conflict() from exc
        return item.comment()

    # ------------------------------------------------------------ aggregates
    def get_aggregates(self) -> AggregatesResponse:
        response = self._call(
            "query",
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": keys.aggregate_pk(self.tenant_id)}},
            ProjectionExpression="sk, #count",
            ExpressionAttributeNames={"#count": "count"},
        )
        counts = dict.fromkeys(TicketStatus, 0)
        for item in response["Items"]:
            status = item["sk"]["S"]
            if status in TicketStatus.__members__:
                counts[TicketStatus(status)] = int(item.get("count", {}).get("N", "0"))
        return AggregatesResponse(counts=counts, total=sum(counts.values()))


@dataclass(frozen=True, slots=True)
class _RepositoryClient:
    """The four DynamoDB calls Powertools' idempotency layer makes, through a
    repository's :meth:`TicketRepository._call` (conditional-check failures
    still reach it as the ``ClientError`` it handles)."""

    repository: TicketRepository

    def get_item(self, **kwargs: Any) -> Any:
        return self.repository._call("get_item", **kwargs)

    def put_item(self, **kwargs: Any) -> Any:
        return self.repository._call("put_item", **kwargs)

    def update_item(self, **kwargs: Any) -> Any:
        return self.repository._call("update_item", **kwargs)

    def delete_item(self, **kwargs: Any) -> Any:
        return self.repository._call("delete_item", **kwargs)
