"""Comments of one tenant's tickets, and the ticket read with its comments.

A ticket's comments live in its item collection (``TENANT#<t>|TICKET#<id>``,
``COMMENT#<created_at>#<comment_id>``), so they sort oldest first before the
``SUMMARY`` item, and one Query reads a page of comments and, on the last
page, the summary too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from support_tickets.core import keys
from support_tickets.core.clock import utc_now_iso
from support_tickets.core.errors import TicketNotFound
from support_tickets.core.ids import new_id
from support_tickets.core.models import Comment, CommentItem, MalformedItem, TicketWithComments
from support_tickets.core.response_size import PageBudget
from support_tickets.data.cursor import MAX_CURSOR_LENGTH, decode_cursor, encode_cursor, query_fingerprint
from support_tickets.data.table import TenantTable, cancellation_codes, error_code, from_item, to_item
from support_tickets.data.ticket_repository import (
    SUMMARY_SHAPE,
    SUMMARY_SHAPE_NAMES,
    SUMMARY_SHAPE_VALUES,
    TicketRepository,
    report_malformed_item,
    ticket_of,
)

COMMENT_KEY_ATTRIBUTES: Final = frozenset({"pk", "sk"})
# Exactly what comment_sk() writes: a start key of any other shape never reaches DynamoDB.
_COMMENT_SK = re.compile(rf"^COMMENT#{keys.AUDIT_TIME_PATTERN}#[0-9A-Z]{{26}}$")


@dataclass(frozen=True, slots=True)
class CommentRepository:
    table: TenantTable

    def _tickets(self) -> TicketRepository:
        return TicketRepository(self.table)

    def add_comment(self, ticket_id: str, author: str, body: str) -> Comment:
        """Put the comment only if the ticket exists, atomically (a ConditionCheck
        on the summary), so a deleted ticket can't collect orphan comments."""
        pk = self._tickets().ticket_pk(ticket_id)
        now = utc_now_iso()
        comment_id = new_id()
        item = CommentItem(
            pk=pk, sk=keys.comment_sk(now, comment_id), comment_id=comment_id, author=author, body=body, created_at=now
        )
        stored = to_item(item.stored())
        try:
            self.table.call(
                "transact_write_items",
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self.table.table_name,
                            "Key": {"pk": {"S": pk}, "sk": {"S": keys.SUMMARY_SK}},
                            # A malformed summary takes no comments, like a missing one.
                            "ConditionExpression": f"attribute_exists(pk) AND {SUMMARY_SHAPE}",
                            "ExpressionAttributeNames": SUMMARY_SHAPE_NAMES,
                            "ExpressionAttributeValues": SUMMARY_SHAPE_VALUES,
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
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
                # DynamoDB answers a retried call with the same token as the first
                # (for 10 minutes): botocore's retry after a lost answer is a no-op.
                ClientRequestToken=comment_id,
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            codes = cancellation_codes(exc)
            reasons = exc.response.get("CancellationReasons", [])
            if len(reasons) > 1 and codes[1] == "ConditionalCheckFailed" and _is_own_comment(reasons[1], stored):
                return item.comment()  # its first attempt landed: it succeeded once
            if codes and codes[0] == "ConditionalCheckFailed":
                if reasons and reasons[0].get("Item"):
                    report_malformed_item(from_item(reasons[0]["Item"]), "not a well-formed ticket summary")
                raise TicketNotFound() from exc
            self.table.raise_for_cancellation(exc)
        return item.comment()

    def get_ticket_with_comments(self, ticket_id: str, limit: int, cursor: str | None) -> TicketWithComments:
        """One Query over the item collection: comments (``COMMENT#…`` sorts first,
        oldest first) and then the summary. When the rest of the comments fit in
        the page the summary comes with them in that same call; when more
        comments follow, the page ends early and one GetItem fetches the summary.
        DynamoDB ends a Query page at 1 MB: the read follows it until it has
        ``limit + 1`` items or the collection ends, so no comment is skipped. A
        page also ends before a comment that would take the response past its
        byte budget (:class:`~support_tickets.core.response_size.PageBudget`):
        the cursor then continues at that comment."""
        tickets = self._tickets()
        pk = tickets.ticket_pk(ticket_id)
        fingerprint = query_fingerprint(self.table.tenant_id, "comments", ticket_id)
        query: dict[str, Any] = {
            "TableName": self.table.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
            "ConsistentRead": True,
        }
        if cursor is not None:
            start = decode_cursor(cursor, fingerprint, COMMENT_KEY_ATTRIBUTES, lambda key: _own_comment_key(key, pk))
            query["ExclusiveStartKey"] = to_item(start)
        items, _ = self.table.query_up_to(query, limit + 1, from_cursor=cursor is not None)
        summary = next((item for item in items if item["sk"] == keys.SUMMARY_SK), None)
        comment_items = [item for item in items if item["sk"].startswith(keys.COMMENT_SK_PREFIX)]
        if summary is None:
            if not comment_items:
                raise TicketNotFound()
            ticket = tickets.get_ticket_summary(ticket_id)
        else:
            ticket = ticket_of(summary)
        # The page ends at `limit` comments or at the response's byte budget (the ticket
        # counts). A malformed comment is left out; the cursor names the last row read.
        budget = PageBudget.around(TicketWithComments(ticket=ticket, comments=[], next_cursor="c" * MAX_CURSOR_LENGTH))
        rows = comment_items[:limit]
        readable = [(row, comment) for row in rows if (comment := _comment(row)) is not None]
        comments = budget.take(comment for _, comment in readable)
        last_row: dict[str, Any] | None = None
        if len(comments) < len(readable):
            last_row = readable[len(comments) - 1][0]  # cut by size: continue at the next readable one
        elif len(rows) < len(comment_items):
            last_row = rows[-1]  # cut by count
        next_cursor = None
        if last_row is not None:
            next_cursor = encode_cursor(fingerprint, {"pk": last_row["pk"], "sk": last_row["sk"]})
        return TicketWithComments(ticket=ticket, comments=comments, next_cursor=next_cursor)


def _comment(row: dict[str, Any]) -> Comment | None:
    """The comment of this row; a malformed one (an operator's or a bug's) is
    reported and left out, as a malformed GSI row is, never a 500."""
    try:
        return CommentItem.from_row(row).comment()
    except MalformedItem as exc:
        report_malformed_item(row, str(exc), answer="left out of the ticket's comments")
        return None


def _is_own_comment(reason: Mapping[str, Any], written: Mapping[str, Any]) -> bool:
    found = reason.get("Item") or {}
    return bool(found) and found.get("comment_id") == written["comment_id"] and found.get("author") == written["author"]


def _own_comment_key(key: Mapping[str, str], pk: str) -> bool:
    return key["pk"] == pk and bool(_COMMENT_SK.fullmatch(key["sk"]))
