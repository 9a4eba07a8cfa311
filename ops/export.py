"""A tenant's tickets out, as JSON lines: ``make export TENANT=<t> [STACK=<s>] > <t>.jsonl``.

    python -m ops.export --tenant acme (--local | --stack <s> [--region <r>])

One line per ticket, ``{"ticket": {...}, "comments": [...], "history": [...]}``,
in the API's shapes (``Ticket``, ``Comment``, ``AuditEvent``), found without a
Scan (:mod:`ops.tenant_data`). Streamed: tickets are read one at a time and
their comments and history a page at a time, each written as it arrives, so
memory does not grow with the tenant (nor with a ticket's comments). Progress
goes to stderr; stdout is only the export.

Consistency: tickets are enumerated from GSI1 by status. On a tenant that is
still ACTIVE a ticket that changes status during the export may be written
twice or missed, as when a client pages through a list; suspend the tenant
first (``make tenant TENANT=<t> STATUS=SUSPENDED``) for a stable copy (the
command warns when it is not). What the export does not hold: the history of
tickets already deleted (it is in the tenant's trail, ``GET /audit``, for the
retention period), counts and idempotency records (derived data). A tenant
that has no record is a one-line error and exit status 1. A tenant placed in
a table of its own is read there (its record, in the pool table, names it):
export it before ``make offboard`` deletes that table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from aws_lambda_powertools.shared.json_encoder import Encoder
from botocore.exceptions import BotoCoreError, ClientError

from ops.stack_target import TargetError, add_target_arguments, dynamodb_target
from ops.tenant_data import Progress, ticket_ids
from ops.tenants import NoSuchTenant, existing_record
from support_tickets.core import keys
from support_tickets.core.audit import AuditEvent
from support_tickets.core.errors import ApiError, TicketNotFound
from support_tickets.core.models import Comment
from support_tickets.data.audit_repository import AuditRepository
from support_tickets.data.comment_repository import CommentRepository
from support_tickets.data.placement import data_table
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.data.tenant_registry import TenantStatus

PAGE_SIZE = 100


def _json_line(value: Any) -> str:
    """Compact, UTF-8 as it is; a dataclass as its fields (Powertools' encoder, as the API writes them)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, cls=Encoder)


def _comments(comments: CommentRepository, ticket_id: str, first: list[Comment], cursor: str | None) -> Iterator[str]:
    yield from (_json_line(comment) for comment in first)
    while cursor is not None:
        try:
            page = comments.get_ticket_with_comments(ticket_id, PAGE_SIZE, cursor)
        except TicketNotFound:
            return  # deleted while being written: what was read stays a valid line
        yield from (_json_line(comment) for comment in page.comments)
        cursor = page.next_cursor


def _history(audit: AuditRepository, ticket_id: str) -> Iterator[str]:
    cursor: str | None = None
    while True:
        try:
            page = audit.ticket_history(ticket_id, PAGE_SIZE, cursor)
        except TicketNotFound:
            return  # no history yet, and the ticket deleted meanwhile
        events: list[AuditEvent] = page.events
        yield from (_json_line(event) for event in events)
        cursor = page.next_cursor
        if cursor is None:
            return


def _write_list(out: TextIO, parts: Iterator[str]) -> None:
    out.write("[")
    for index, part in enumerate(parts):
        out.write(("," if index else "") + part)
    out.write("]")


def export_tenant(table: TenantTable, out: TextIO, progress: Progress) -> int:
    """Write every ticket of ``table``'s tenant to ``out``; how many."""
    comments = CommentRepository(table)
    audit = AuditRepository(table)
    for ticket_id in ticket_ids(table):
        try:
            first = comments.get_ticket_with_comments(ticket_id, PAGE_SIZE, None)
        except TicketNotFound:
            continue  # deleted since the index listed it
        out.write('{"ticket":' + _json_line(first.ticket) + ',"comments":')
        _write_list(out, _comments(comments, ticket_id, first.comments, first.next_cursor))
        out.write(',"history":')
        _write_list(out, _history(audit, ticket_id))
        out.write("}\n")
        progress.step("tickets")
    out.flush()
    progress.done("tickets exported ")
    return progress.count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenant", required=True)
    add_target_arguments(parser)
    args = parser.parse_args(argv)
    try:
        keys.validate_tenant_id(args.tenant)
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    progress = Progress(f"export {args.tenant}")
    try:
        client, table_name = dynamodb_target(args)
        record = existing_record(client, table_name, args.tenant)
        # The table its reads go to: the pool's, or its own (whatever phase a move is in).
        table = TenantTable(args.tenant, data_table(record, table_name), OwnClient(client))
        if record.status is not TenantStatus.SUSPENDED:
            progress.note(
                f"warning: {args.tenant} is ACTIVE: a ticket changed meanwhile may be written twice or missed; "
                "suspend it first for a stable copy"
            )
        export_tenant(table, sys.stdout, progress)
    except NoSuchTenant as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except (TargetError, ApiError, ClientError, BotoCoreError) as exc:
        sys.stderr.write(f"\nerror: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
