"""Tickets of one tenant: create, read, update, change status in bulk, delete, list.

Keys come from :mod:`support_tickets.core.keys`, every call goes through the
tenant's :class:`~support_tickets.data.table.TenantTable`. Where a ticket sits in
GSI1 depends on the tenant's shard count (its tenant record, read through a
short per-container cache): writers place a ticket with the record's
``shards``, lists read every key of its ``read_shards``
(:mod:`support_tickets.data.listing`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, Final

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from support_tickets.core import keys
from support_tickets.core.clock import utc_now_iso
from support_tickets.core.errors import ApiError, Conflict, TicketNotFound, VersionMismatch
from support_tickets.core.ids import new_id
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import (
    BatchStatusResponse,
    CreateTicketRequest,
    MalformedItem,
    Ticket,
    TicketItem,
    TicketPage,
)
from support_tickets.core.response_size import PageBudget
from support_tickets.data import listing
from support_tickets.data.cursor import query_fingerprint
from support_tickets.data.pool import pool_view
from support_tickets.data.table import TenantTable, cancellation_codes, error_code, from_item, serialize, to_item
from support_tickets.data.tenant_registry import TenantConfig, tenant_configs

logger = Logger(child=True)

# Parallel GSI1 queries of one list request: enough for 16 shards in one round
# trip; more shards take a few rounds, within the function's timeout.
MAX_PARALLEL_QUERIES: Final = 16
# Deletes racing on one ticket re-mark it this often before one answers 409.
DELETE_ATTEMPTS: Final = 5
# How long a delete request goes on deleting a ticket's comments after the
# ticket is deleted (its tombstone put): the rest is the audit-trail function's.
DELETE_BUDGET_SECONDS: Final = 5.0
# Keys only: what a delete reads of a ticket's items (their content never leaves the table).
KEYS_ONLY: Final = "pk, sk"
FOREIGN_INDEX_ROW_METRIC: Final = "ForeignIndexRow"
MALFORMED_INDEX_ROW_METRIC: Final = "MalformedIndexRow"
MALFORMED_ITEM_METRIC: Final = "MalformedItem"
# Rows of a list request's GSI1 partitions that are not the caller's tickets
# (planted or malformed) read past beyond the rows the page needs: shared by
# the partitions, at least MIN_SKIPPED_ROWS each; and at most MAX_QUERY_PAGES
# Query pages (1 MB each) per partition. Past either, the page ends early with
# a cursor after the last row read: one request's work is bounded whatever
# was planted, and the next request goes on from there.
MAX_SKIPPED_ROWS: Final = 1000
MIN_SKIPPED_ROWS: Final = 16
MAX_QUERY_PAGES: Final = 16

ConfigProvider = Callable[[TenantTable], TenantConfig]
# The write that completes a create's idempotency record, given the new ticket's id.
RecordCompletion = Callable[[str], Mapping[str, Any]]
ForeignRowHook = Callable[[Mapping[str, Any]], None]


def tenant_record(table: TenantTable) -> TenantConfig:
    """The tenant's record (its shard counts), through the container's cache: read
    from the pool table, where it lives whatever table ``table`` is (a dedicated
    tenant's own table holds no record; reading one there would cache the defaults)."""
    return tenant_configs().get(pool_view(table))


def _is_own_write(exc: ClientError, written: Mapping[str, Any]) -> bool:
    """Whether the item a conditional put found is the one it was writing."""
    response: Mapping[str, Any] = exc.response
    found: Mapping[str, Any] = response.get("Item") or {}
    return bool(found) and all(found.get(name) == written[name] for name in ("ticket_id", "created_at", "created_by"))


def _is_own_update(
    current: Mapping[str, Any], expected: int, values: Mapping[str, Any], stored: Mapping[str, Any]
) -> bool:
    """Whether ``current`` is exactly what this update (from ``expected``) wrote."""
    if current.get("version", {}).get("N") != str(expected + 1) or current.get("updated_at") != values[":now"]:
        return False
    return all(current.get(attribute) == values[f":{attribute}"] for attribute in stored)


def _summary_shape() -> tuple[str, dict[str, str], dict[str, Any]]:
    """A condition that holds only for an item whose attributes have the types
    :meth:`TicketItem.from_row` reads (text, a number; an optional one absent),
    with its names and values."""
    names: dict[str, str] = {}
    checks: list[str] = []
    for number, item_field in enumerate(fields(TicketItem)):
        name = f"#shape{number}"
        names[name] = item_field.name
        check = f"attribute_type({name}, {':shape_n' if item_field.type == 'int' else ':shape_s'})"
        if item_field.default is None:
            check = f"(attribute_not_exists({name}) OR attribute_type({name}, :shape_null) OR {check})"
        elif item_field.default is not MISSING:
            check = f"(attribute_not_exists({name}) OR {check})"
        checks.append(check)
    return " AND ".join(checks), names, {":shape_s": {"S": "S"}, ":shape_n": {"S": "N"}, ":shape_null": {"S": "NULL"}}


# Every write that changes a summary holds only if the summary is one the API can
# read back: a malformed summary (written by an operator or a bug) fails the
# write's condition exactly as a missing one does, and nothing is changed.
SUMMARY_SHAPE, SUMMARY_SHAPE_NAMES, SUMMARY_SHAPE_VALUES = _summary_shape()


def report_malformed_item(row: Mapping[str, Any], reason: str, answer: str = "answered as a missing ticket") -> None:
    """A stored item of the caller's own partition the API cannot read (an
    operator's or a bug's), and how the request answered instead of a 500:
    reported with its keys and what is wrong, never its content."""
    logger.warning(
        f"MalformedItem: {answer}",
        extra={"row_pk": str(row.get("pk", ""))[:200], "row_sk": str(row.get("sk", ""))[:200], "reason": reason},
    )
    Metrics().add_metric(name=MALFORMED_ITEM_METRIC, unit=MetricUnit.Count, value=1)


def ticket_of(row: Mapping[str, Any]) -> Ticket:
    """The ticket a stored summary holds; a malformed one is :class:`TicketNotFound`."""
    try:
        return TicketItem.from_row(row).ticket()
    except MalformedItem as exc:
        report_malformed_item(row, str(exc))
        raise TicketNotFound() from exc


def _report_foreign_row(row: Mapping[str, Any]) -> None:
    logger.warning("security: dropped a GSI1 row of another tenant", extra={"row_pk": str(row.get("pk", ""))[:200]})
    Metrics().add_metric(name=FOREIGN_INDEX_ROW_METRIC, unit=MetricUnit.Count, value=1)


def _report_malformed_row(row: Mapping[str, Any]) -> None:
    logger.warning(
        "dropped a malformed GSI1 row",
        extra={"row_pk": str(row.get("pk", ""))[:200], "row_sk": str(row.get("sk", ""))[:200]},
    )
    Metrics().add_metric(name=MALFORMED_INDEX_ROW_METRIC, unit=MetricUnit.Count, value=1)


@dataclass(frozen=True, slots=True)
class Erased:
    """What :func:`erase_ticket_items` did: whether it found anything, and whether it is done."""

    found: bool
    done: bool


def erase_ticket_items(table: TenantTable, pk: str, *, deadline: float, batch: bool) -> Erased:
    """Delete every item of a deleted ticket's partition ``pk`` but a summary,
    its tombstone last, until ``deadline`` (``time.monotonic()``); ``done``
    when the tombstone is deleted. Keys-only consistent Queries; ``batch``:
    BatchWriteItem (tenant credentials), else DeleteItem one by one (the
    audit-trail function's role may not BatchWriteItem, which would also let
    it put). A partition whose summary is there is a live ticket's: nothing
    is deleted of it."""
    collection = {
        "TableName": table.table_name,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": pk}},
        "ProjectionExpression": KEYS_ONLY,
        "ConsistentRead": True,
    }
    found = False
    tombstone: dict[str, Any] | None = None
    for page in table.query_pages(collection):
        found = found or bool(page)
        if any(item["sk"]["S"] == keys.SUMMARY_SK for item in page):
            # A live ticket's (the callers check before): its summary sorts last, on this page.
            return Erased(found=True, done=False)
        for item in page:
            if item["sk"]["S"] == keys.DELETING_SK:
                tombstone = item
        doomed = [item for item in page if item["sk"]["S"] != keys.DELETING_SK]
        if batch:
            table.batch_delete(doomed)
            if time.monotonic() >= deadline:
                return Erased(found=True, done=False)
            continue
        for item in doomed:
            table.call("delete_item", TableName=table.table_name, Key={"pk": item["pk"], "sk": item["sk"]})
            if time.monotonic() >= deadline:
                return Erased(found=True, done=False)
    if tombstone is not None:
        table.call("delete_item", TableName=table.table_name, Key={"pk": tombstone["pk"], "sk": tombstone["sk"]})
    return Erased(found=found, done=True)


def finish_deleted_ticket(table: TenantTable, ticket_id: str, *, deadline: float) -> bool:
    """The audit-trail function's part of a delete (:meth:`TicketRepository.delete_ticket`):
    ``table`` holds the tombstone of ``ticket_id`` (its stream record said so);
    delete what is left of the ticket until ``deadline``, then the tombstone.
    True when nothing is left; False when the deadline came first: the
    tombstone is then touched (``passes``, its MODIFY record starts another
    pass). A partition that has a summary (a live ticket), or no tombstone
    any more (finished), is left alone. Its role reads keys only."""
    pk = keys.ticket_pk(table.tenant_id, ticket_id)
    last = table.call(
        "query",
        TableName=table.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
        ProjectionExpression=KEYS_ONLY,
        ConsistentRead=True,
        ScanIndexForward=False,
        Limit=2,
    )["Items"]
    sort_keys = [item["sk"]["S"] for item in last]
    if keys.SUMMARY_SK in sort_keys:
        logger.warning("security: a tombstone beside a live ticket's summary: nothing deleted", extra={"pk": pk})
        return True
    if keys.DELETING_SK not in sort_keys:
        return True  # the delete request (or an earlier pass) finished it
    if erase_ticket_items(table, pk, deadline=deadline, batch=False).done:
        return True
    table.call_if(
        "update_item",
        TableName=table.table_name,
        Key={"pk": {"S": pk}, "sk": {"S": keys.DELETING_SK}},
        UpdateExpression="ADD passes :one",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    return False


@dataclass(frozen=True, slots=True)
class TicketRepository:
    table: TenantTable
    config: ConfigProvider = field(default=tenant_record)
    on_foreign_row: ForeignRowHook = field(default=_report_foreign_row)
    on_malformed_row: ForeignRowHook = field(default=_report_malformed_row)

    @property
    def tenant_id(self) -> str:
        return self.table.tenant_id

    @property
    def table_name(self) -> str:
        return self.table.table_name

    def ticket_pk(self, ticket_id: str) -> str:
        if not keys.is_valid_ticket_id(ticket_id):
            # An id that can't exist is "not found", exactly like a missing one.
            raise TicketNotFound()
        return keys.ticket_pk(self.tenant_id, ticket_id)

    def _placement(self, ticket_id: str, status: TicketStatus) -> str:
        return keys.ticket_tenant_status(self.tenant_id, status, ticket_id, self.config(self.table).shards)

    # ------------------------------------------------------------ one ticket
    def create_ticket(
        self, request: CreateTicketRequest, created_by: str, completes: RecordCompletion | None = None
    ) -> Ticket:
        """A new ticket, OPEN, by ``created_by``. ``completes``: the write that
        completes the request's idempotency record with the new ticket's id
        (given that id), made in one transaction with the ticket's put
        (:meth:`_put_recorded`)."""
        now = utc_now_iso()
        ticket_id = new_id()
        item = TicketItem(
            pk=keys.ticket_pk(self.tenant_id, ticket_id),
            sk=keys.SUMMARY_SK,
            tenant_status=self._placement(ticket_id, TicketStatus.OPEN),
            resolver=keys.resolver_key(request.resolver),
            ticket_id=ticket_id,
            title=request.title,
            description=request.description,
            created_by=created_by,
            created_at=now,
            updated_at=now,
            version=1,
            updated_by=created_by,
        )
        stored = to_item(item.stored())
        if completes is not None:
            self._put_recorded(stored, completes(ticket_id))
            return item.ticket()
        try:
            self.table.call(
                "put_item",
                TableName=self.table_name,
                Item=stored,
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            # botocore retries a request whose answer was lost: if what is there is
            # this very write (a fresh ticket id, our timestamps), it succeeded once.
            if error_code(exc) != "ConditionalCheckFailedException" or not _is_own_write(exc, stored):
                raise
        return item.ticket()

    def _put_recorded(self, stored: Mapping[str, Any], completion: Mapping[str, Any]) -> None:
        """The ticket's put and the completion of its idempotency record, all or
        nothing: a ticket never exists without the record that names it, so an
        invocation killed after this write (or whose answer to it was lost) left
        a record that answers the client's retry with this ticket
        (:class:`~support_tickets.data.table.IdempotencyStore`). During a move's copy the
        fence adds the ticket's mark and its check to the same transaction."""
        put = {
            "Put": {
                "TableName": self.table_name,
                "Item": dict(stored),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        try:
            # The token makes botocore's retry of a transaction whose answer was lost
            # a no-op in DynamoDB (for 10 minutes), instead of a failed condition.
            self.table.call("transact_write_items", TransactItems=[put, dict(completion)], ClientRequestToken=new_id())
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            if cancellation_codes(exc)[1:2] == ["ConditionalCheckFailed"]:
                # The record is no longer the in-progress one this request put: its in-progress
                # expiry passed and another request with the key took it over. Nothing was written.
                raise Conflict("A request with this Idempotency-Key is still in progress.") from exc
            self.table.raise_for_cancellation(exc)

    def get_ticket_summary(self, ticket_id: str) -> Ticket:
        response = self.table.call(
            "get_item",
            TableName=self.table_name,
            Key={"pk": {"S": self.ticket_pk(ticket_id)}, "sk": {"S": keys.SUMMARY_SK}},
            ConsistentRead=True,
        )
        if "Item" not in response:
            raise TicketNotFound()
        return ticket_of(from_item(response["Item"]))

    def update_ticket(
        self, ticket_id: str, changes: Mapping[str, Any], expected_version: int | None, actor: str
    ) -> Ticket:
        """Conditional update; status and resolver move the ticket within GSI1.
        ``actor`` is stored as ``updated_by`` with the change (the audit trail's source)."""
        pk = self.ticket_pk(ticket_id)
        names = {"#version": "version", "#updated_at": "updated_at"}
        values: dict[str, Any] = {":one": {"N": "1"}, ":now": {"S": utc_now_iso()}}
        assignments = ["#version = #version + :one", "#updated_at = :now"]
        stored: dict[str, Any] = {"updated_by": actor}
        for name, value in changes.items():
            if name == "status":
                stored["tenant_status"] = self._placement(ticket_id, value)
            elif name == "resolver":
                stored["resolver"] = keys.resolver_key(value)
            else:
                stored[name] = value
        for attribute, value in stored.items():
            names[f"#{attribute}"] = attribute
            values[f":{attribute}"] = serialize(value)
            assignments.append(f"#{attribute} = :{attribute}")
        condition = f"attribute_exists(pk) AND {SUMMARY_SHAPE}"
        names.update(SUMMARY_SHAPE_NAMES)
        values.update(SUMMARY_SHAPE_VALUES)
        if expected_version is not None:
            condition += " AND #version = :expected"
            values[":expected"] = {"N": str(expected_version)}
        try:
            response = self.table.call(
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
            current: dict[str, Any] = exc.response["Item"]  # type: ignore[typeddict-item]
            found = ticket_of(from_item(current))  # a malformed summary is not found
            if expected_version is not None and _is_own_update(current, expected_version, values, stored):
                # A retry of this very update whose first attempt landed (same new
                # version, same timestamp, same values): it succeeded once.
                return found
            raise VersionMismatch(details={"current_version": found.version}) from exc
        return ticket_of(from_item(response["Attributes"]))

    def change_status(self, ticket_ids: Sequence[str], status: TicketStatus, actor: str) -> BatchStatusResponse:
        """All or nothing in one TransactWriteItems (≤100 items, one tenant).
        Every update is conditional on the ticket existing, so a missing or
        foreign id cancels the whole transaction and names itself."""
        for ticket_id in ticket_ids:
            if not keys.is_valid_ticket_id(ticket_id):
                raise TicketNotFound(details={"missing_ticket_ids": [ticket_id]})
        now = utc_now_iso()
        updates = [
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": {"pk": {"S": keys.ticket_pk(self.tenant_id, ticket_id)}, "sk": {"S": keys.SUMMARY_SK}},
                    "UpdateExpression": (
                        "SET tenant_status = :ts, #version = #version + :one, updated_at = :now, updated_by = :actor"
                    ),
                    "ConditionExpression": f"attribute_exists(pk) AND {SUMMARY_SHAPE}",
                    "ExpressionAttributeNames": {"#version": "version", **SUMMARY_SHAPE_NAMES},
                    "ExpressionAttributeValues": {
                        ":ts": {"S": self._placement(ticket_id, status)},
                        ":one": {"N": "1"},
                        ":now": {"S": now},
                        ":actor": {"S": actor},
                        **SUMMARY_SHAPE_VALUES,
                    },
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
            for ticket_id in ticket_ids
        ]
        try:
            # The token makes botocore's retry of a transaction whose answer was lost
            # a no-op in DynamoDB (for 10 minutes), instead of a second version bump.
            self.table.call("transact_write_items", TransactItems=updates, ClientRequestToken=new_id())
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            codes = cancellation_codes(exc)
            reasons = exc.response.get("CancellationReasons", [])
            missing = [
                ticket_id
                for ticket_id, code in zip(ticket_ids, codes, strict=False)
                if code == "ConditionalCheckFailed"
            ]
            for reason in reasons:
                if reason.get("Code") == "ConditionalCheckFailed" and reason.get("Item"):
                    report_malformed_item(from_item(reason["Item"]), "not a well-formed ticket summary")
            if missing:
                raise TicketNotFound(details={"missing_ticket_ids": missing}) from exc
            self.table.raise_for_cancellation(exc)
        return BatchStatusResponse(updated=list(ticket_ids), status=status)

    def delete_ticket(self, ticket_id: str, actor: str, time_left: Callable[[], float] | None = None) -> None:
        """Mark the summary with its deleter, then in one transaction delete it and
        put the ticket's tombstone (``DELETING``), then delete its comments and
        the tombstone last, for :data:`DELETE_BUDGET_SECONDS` at most
        (``time_left``: the invocation's remaining seconds, which bound it too).

        **Atomic for the client.** The transaction is the delete: before it,
        nothing the API shows changed; from it on, the ticket is gone from every
        read (no summary: 404, out of GSI1, out of ``make export``) and its
        tombstone says that the rest is the system's job. A ticket whose
        comments do not all go within the budget (thousands of comments, a
        throttled partition, a slow call) is answered 204 all the same, and
        the audit-trail function, which the tombstone's INSERT reaches
        (FilterCriteria), deletes what is left and then the tombstone:
        :func:`finish_deleted_ticket`, one more pass (the tombstone's MODIFY)
        as long as its own budget runs out first. A function killed at any
        point leaves the ticket as it was (before the transaction) or
        tombstoned (after it). Nothing depends on a retry the client has no
        reason to make; a retry finds the tombstone and finishes too (204).
        Why not the comments in the transaction itself: 100 actions bound it,
        a comment racing the delete could still land before it and be left
        behind without a tombstone, and a transaction's writes cost twice.

        Why it could take long: the comments are one partition (a ticket's item
        collection), and a partition takes about 1,000 write units a second,
        so a ticket with 1,000 comments of 10 KB is 10 s of deletes at best;
        BatchWriteItem's unprocessed items are retried with backoff
        (``TenantTable._batch_write``) and each call by botocore 3 times.

        **What the stream sees is what it saw before**: the mark (a MODIFY
        that changes no field the API shows and not the version), the summary's
        REMOVE (the ``deleted`` event, the count, ``ticket.deleted``), and the
        tombstone's records, which the aggregator never receives and the audit
        trail turns into no event; a comment's REMOVE is in no filter. The
        mark is how the REMOVE names who deleted the ticket: DynamoDB's delete
        carries no caller. The transaction's delete is conditional on this
        call's own mark: of two admins deleting the ticket at once, the delete
        that takes effect is the one whose mark the summary carries, hence the
        one the trail names (the other marks again and finds no summary).
        Should the transaction fail, the mark is taken back.

        The order summary-then-comments is what makes a racing comment safe: a
        comment is written only in a transaction that checks the summary
        exists, so once the summary is gone no comment can be added, and the
        comments are listed only after that (a consistent Query): every comment
        that made it is found and deleted. A ticket that is neither there nor
        has anything left in its partition is 404, so is another tenant's."""
        pk = self.ticket_pk(ticket_id)
        key = {"pk": {"S": pk}, "sk": {"S": keys.SUMMARY_SK}}
        removed = False
        for _ in range(DELETE_ATTEMPTS):
            mark = self._mark_deleted(key, actor)
            if mark is None:
                break
            if self._delete_marked(key, mark):
                removed = True
                break
            # Another delete marked the summary after this one did: mark it again, so that the
            # delete that takes effect is the one whose mark the REMOVE record carries.
        else:
            raise Conflict()
        budget = DELETE_BUDGET_SECONDS if time_left is None else min(DELETE_BUDGET_SECONDS, time_left() - 1.0)
        try:
            erased = erase_ticket_items(self.table, pk, deadline=time.monotonic() + budget, batch=True)
        except (ApiError, ClientError, BotoCoreError):
            if not removed:
                raise
            # The ticket is deleted (its tombstone committed with it): the stream finishes.
            logger.warning("a deleted ticket's comments are left to the audit-trail function", exc_info=True)
            return
        if not removed and not erased.found:
            raise TicketNotFound()

    def _mark_deleted(self, key: dict[str, Any], actor: str) -> dict[str, Any] | None:
        """Name the deleter on the summary; ``None`` when there is no summary."""
        mark = {":actor": {"S": actor}, ":at": {"S": utc_now_iso()}}
        marked = self._update_if(key, "SET deleted_by = :actor, deleted_at = :at", "attribute_exists(pk)", mark)
        return mark if marked else None

    def _delete_marked(self, key: dict[str, Any], mark: dict[str, Any]) -> bool:
        """Delete the summary if it still carries ``mark``, and put the ticket's
        tombstone, in one transaction; False when another delete's mark
        replaced it, or the summary is gone."""
        tombstone = {
            "pk": key["pk"],
            "sk": {"S": keys.DELETING_SK},
            "deleted_by": mark[":actor"],
            "deleted_at": mark[":at"],
        }
        try:
            self.table.call(
                "transact_write_items",
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self.table_name,
                            "Key": key,
                            "ConditionExpression": "deleted_by = :actor AND deleted_at = :at",
                            "ExpressionAttributeValues": mark,
                        }
                    },
                    {"Put": {"TableName": self.table_name, "Item": tombstone}},
                ],
                # A retry of this very call (its answer lost) is a no-op: DynamoDB answers it as the first.
                ClientRequestToken=new_id(),
            )
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException" and cancellation_codes(exc)[:1] == [
                "ConditionalCheckFailed"
            ]:
                return False
            self._unmark_deleted(key, mark)
            if error_code(exc) == "TransactionCanceledException":
                self.table.raise_for_cancellation(exc)
            raise
        except ApiError:
            self._unmark_deleted(key, mark)
            raise
        return True

    def _unmark_deleted(self, key: dict[str, Any], mark: dict[str, Any]) -> None:
        """Best effort: only our own mark, and a failure here never hides the delete's."""
        try:
            self._update_if(key, "REMOVE deleted_by, deleted_at", "deleted_by = :actor AND deleted_at = :at", mark)
        except (ApiError, ClientError):
            logger.warning("a failed delete left its mark on the ticket summary")

    def _update_if(self, key: dict[str, Any], update: str, condition: str, values: dict[str, Any]) -> bool:
        """A conditional UpdateItem; False when the condition did not hold."""
        return self.table.call_if(
            "update_item",
            TableName=self.table_name,
            Key=key,
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )

    # ------------------------------------------------------------ lists
    def list_tickets_by_status(
        self, status: TicketStatus, resolver: str | None, limit: int, cursor: str | None
    ) -> TicketPage:
        """Every GSI1 key of ``status`` the tenant's shard counts use, queried in
        parallel and merged (:mod:`support_tickets.data.listing`), optionally for one
        ``resolver``; a page ends at ``limit`` tickets or at the response's byte
        budget, whichever comes first.

        While a reshard migrates tickets from the keys of the old shard count
        to those of the new, the old-only keys are read first and the others
        after them: a ticket moved meanwhile is seen before its move or after
        it, never missed by this request (if seen twice, it is shown once)."""
        fingerprint = query_fingerprint(self.tenant_id, "list", status.value, resolver or "")
        start = None if cursor is None else listing.decode_cursor(cursor, fingerprint, resolver)
        config = self.config(self.table)
        partitions = keys.status_partitions(self.tenant_id, status, config.read_shards)
        current = set(keys.status_partitions(self.tenant_id, status, [config.shards]))
        ordinals = {
            partition: listing.ordinal(listing.partition_suffix(self.tenant_id, status, partition))
            for partition in partitions
        }
        skip = max(MIN_SKIPPED_ROWS, MAX_SKIPPED_ROWS // len(partitions))
        resolver_key = None if resolver is None else keys.resolver_key(resolver)

        def read(partition: str) -> listing.PartitionRead:
            position = None if start is None else start.position_of(ordinals[partition])
            return self._read_partition(partition, resolver_key, position, limit + 1, skip)

        reads: dict[str, listing.PartitionRead] = {}
        for round_of in ([p for p in partitions if p not in current], [p for p in partitions if p in current]):
            if len(round_of) == 1:
                reads[round_of[0]] = read(round_of[0])
            elif round_of:
                with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_QUERIES, len(round_of))) as pool:
                    reads.update(zip(round_of, pool.map(read, round_of), strict=True))
        shown: set[str] = set()

        def accept(row: Mapping[str, Any]) -> bool:
            if row["ticket_id"] in shown:
                return False
            shown.add(str(row["ticket_id"]))
            return True

        def drop(entry: listing.IndexRow) -> None:
            # Reported here, on the request's thread, once per row the cursor moves past.
            dropped = entry.dropped or {}
            (self.on_foreign_row if entry.foreign else self.on_malformed_row)(dropped)

        budget = PageBudget.around(TicketPage(items=[], next_cursor="c" * listing.MAX_CURSOR_LENGTH))
        ordered = [reads[partition] for partition in partitions]
        page = listing.merge(
            ordered,
            limit,
            accept=accept,
            drop=drop,
            fits=lambda row: budget.admit(TicketItem.from_row(row).list_item()),
        )
        items = [TicketItem.from_row(row).list_item() for row in page.rows]
        if page.exhausted:
            return TicketPage(items=items, next_cursor=None)
        boundary = start or listing.Boundary("")  # nothing read at all: the same place again
        if page.last is not None:
            index, entry = page.last
            after = listing.Boundary.after(ordinals[ordered[index].partition], entry)
            if after is None:  # past every resolver a ticket can have
                return TicketPage(items=items, next_cursor=None)
            boundary = after
        return TicketPage(items=items, next_cursor=listing.encode_cursor(fingerprint, boundary))

    def _partition_query(
        self, partition: str, resolver: str | None, position: listing.Position | None
    ) -> dict[str, Any] | None:
        """The Query that reads ``partition`` (``resolver`` only, when given) from
        ``position``; ``None`` when nothing can follow it. A start key is always
        one of the caller's own keys (``Position.start_key``)."""
        condition = "tenant_status = :ts"
        values: dict[str, Any] = {":ts": {"S": partition}}
        if resolver is not None:
            if position is not None and position.is_past:
                return None
            condition += " AND resolver = :r"
            values[":r"] = {"S": resolver}
        elif position is not None and position.is_past:
            condition += " AND resolver > :after"
            values[":after"] = {"S": position.resolver}
        elif position is not None and position.is_at and position.resolver:
            condition += " AND resolver >= :from"
            values[":from"] = {"S": position.resolver}
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": keys.GSI1_NAME,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if position is not None and not (position.is_past or position.is_at):
            request["ExclusiveStartKey"] = position.start_key(self.tenant_id, partition)
        return request

    def _continued_query(
        self, partition: str, resolver: str | None, last_key: Mapping[str, Any], last: listing.IndexRow
    ) -> dict[str, Any] | None:
        """The Query that goes on after ``last``, the last row a DynamoDB page
        gave (``last_key`` its ``LastEvaluatedKey``): from that very key when it
        is the caller's own, else from the position derived after the row, so that
        another tenant's key is never sent, as a start key neither."""
        if keys.own_suffix(self.tenant_id, str(last_key.get("pk", {}).get("S", ""))) is not None:
            request = self._partition_query(partition, resolver, None)
            return None if request is None else {**request, "ExclusiveStartKey": dict(last_key)}
        following = last.position
        if following is None:  # a resolver no ticket has: go on at the next one that can be
            after = listing.next_resolver(last.resolver)
            if after is None:
                return None
            following = listing.Position.at(after)
        return self._partition_query(partition, resolver, following)

    def _read_partition(
        self, partition: str, resolver: str | None, position: listing.Position | None, need: int, skip: int
    ) -> listing.PartitionRead:
        """Rows of ``partition`` in index order until ``need`` of them are the
        caller's tickets, the partition ends, or ``skip`` more rows than that
        or :data:`MAX_QUERY_PAGES` pages were read (``more`` then says so).

        Rows the position says were read already (``skip``) are read past
        silently. Past a DynamoDB page, the next Query starts where the last row
        leaves the partition: its ``LastEvaluatedKey`` when that is the caller's
        own key, else the position derived from the caller's key space after
        that row (another tenant's key is never sent back, as a start key
        neither; listing's docstring)."""
        request = self._partition_query(partition, resolver, position)
        if request is None:
            return listing.PartitionRead(partition, [], more=False)
        previous = listing.START if position is None else replace(position, skip=0)
        to_skip = 0 if position is None else position.skip
        rows: list[listing.IndexRow] = []
        tickets = 0
        from_cursor = position is not None
        for _ in range(MAX_QUERY_PAGES):
            # Rows that were not tickets widen the next page (bounded by what is left).
            wanted = min(need + skip - len(rows), max(need - tickets, len(rows)))
            request["Limit"] = need + min(to_skip, skip) if not rows else wanted
            response = self.table.query_from_cursor(request, from_cursor=from_cursor)
            from_cursor = False
            entry: listing.IndexRow | None = None
            for item in response["Items"]:
                entry = self._index_row(from_item(item), previous)
                previous = self._next_anchor(entry, previous)
                if to_skip and not entry.named:
                    to_skip -= 1  # read (and reported) by an earlier page
                    continue
                to_skip = 0
                rows.append(entry)
                tickets += entry.row is not None
            last_key = response.get("LastEvaluatedKey")
            if last_key is None or entry is None:
                return listing.PartitionRead(partition, rows, more=last_key is not None)
            if tickets >= need or len(rows) >= need + skip:
                return listing.PartitionRead(partition, rows, more=True)
            continued = self._continued_query(partition, resolver, last_key, entry)
            if continued is None:
                return listing.PartitionRead(partition, rows, more=False)
            request = continued
        return listing.PartitionRead(partition, rows, more=True)

    @staticmethod
    def _next_anchor(entry: listing.IndexRow, previous: listing.Position) -> listing.Position:
        """Where the partition resumes after ``entry``, as the next row's ``previous``:
        past a row whose resolver no ticket has, at the next resolver one can have."""
        if entry.position is not None:
            return entry.position
        after = listing.next_resolver(entry.resolver)
        return previous if after is None else listing.Position.at(after)

    def _index_row(self, row: dict[str, Any], previous: listing.Position) -> listing.IndexRow:
        """A GSI1 row and where its partition resumes after it (``previous``:
        where it resumed before it). GSI keys are not confined by IAM (only the
        table's partition key is): a row whose item belongs to another tenant,
        whose resolver is no ticket's, or that is not a well-formed ticket summary
        of this one, is dropped (and reported by the merge), and never named in
        a cursor."""
        pk, sk, resolver = (str(row.get(name, "")) for name in ("pk", "sk", "resolver"))
        suffix = keys.own_suffix(self.tenant_id, pk)
        if not listing.is_resolver_key(resolver):
            return listing.IndexRow(resolver, None, None, row, foreign=suffix is None)
        if suffix is None:
            # Derived from the caller's own key space on the row's side (listing's docstring).
            if pk < keys.tenant_key(self.tenant_id, ""):
                return listing.IndexRow(resolver, listing.Position(resolver), None, row, foreign=True)
            return listing.IndexRow(resolver, listing.Position.past(resolver), None, row, foreign=True)
        position, named = listing.own_row_position(resolver, suffix, sk, previous)
        ticket_id = keys.ticket_id_of_suffix(suffix)
        if ticket_id is None or sk != keys.SUMMARY_SK or row.get("ticket_id") != ticket_id:
            return listing.IndexRow(resolver, position, None, row, named=named)
        try:
            TicketItem.from_row(row)
        except MalformedItem:
            return listing.IndexRow(resolver, position, None, row, named=named)
        return listing.IndexRow(resolver, position, row)
