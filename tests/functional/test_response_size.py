"""Every answer fits Lambda's 6 MB response, as actually serialized: the proxy
response whose ``body`` is the JSON text Powertools wrote (``ensure_ascii``:
an emoji is 12 bytes, 14 once escaped in the envelope). Pages that would
outgrow it end early, and their cursors go on exactly where they stopped
(nothing skipped, nothing repeated): ``support_tickets.core.response_size``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from support_tickets.core import keys
from support_tickets.core.response_size import LAMBDA_RESPONSE_LIMIT
from support_tickets.data.audit_items import epoch_of
from support_tickets.streams.audit_events import audit_record
from support_tickets.streams.audit_writer import audit_writer
from tests.conftest import FRESH_AWS
from tests.functional.api_harness import Api, ApiResponse, User
from tests.functional.conftest import TENANT_PAIRS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = FRESH_AWS

EMOJI = "\N{GRINNING FACE}"  # astral: \ud83d\ude00 in the body, 14 bytes in the envelope


def every_page(fetch: Callable[[str | None], ApiResponse], key: str) -> list[list[Any]]:
    """Each page's items, following next_cursor; every answer a 200 within Lambda's limit."""
    pages: list[list[Any]] = []
    cursor: str | None = None
    for _ in range(100):
        response = fetch(cursor)
        assert response.status == 200, response.body
        assert response.envelope_bytes <= LAMBDA_RESPONSE_LIMIT, response.envelope_bytes
        pages.append(response.body[key])
        cursor = response.body["next_cursor"]
        if cursor is None:
            return pages
    raise AssertionError("paging did not end")


def send(api: Api, route: str, user: User, body: dict[str, Any], ticket_id: str | None = None) -> ApiResponse:
    """A request whose body is UTF-8 as a client sends it (escaped, 10,000 emoji would be over 64 KiB)."""
    return api.call(route, user, ticket_id=ticket_id, raw_body=json.dumps(body, ensure_ascii=False))


def cursor_query(limit: int, cursor: str | None) -> dict[str, str]:
    return {"limit": str(limit), **({"cursor": cursor} if cursor else {})}


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_a_ticket_with_the_largest_comments_reads_in_pages_under_lambdas_limit(
    api: Api, owner: str, other: str
) -> None:
    # Given a ticket of the largest fields, with 60 comments of 10,000 emoji each
    # (a page of 50 of them was a 7 MB answer: a 502 in AWS)
    user = User(owner, "alice")
    fields = {"title": EMOJI * 200, "description": EMOJI * 10_000, "resolver": "r" * 128}
    ticket = send(api, "create", user, fields).body
    bodies = [f"{n:02d}" + EMOJI * 9_998 for n in range(60)]
    for body in bodies:
        assert send(api, "comment", user, {"body": body}, ticket["ticket_id"]).status == 201
    # And the other tenant's ticket of the same kind
    stranger = User(other, "bob")
    theirs = api.new_ticket(stranger, title="theirs")
    assert send(api, "comment", stranger, {"body": EMOJI * 10_000}, theirs["ticket_id"]).status == 201
    # When the owner reads it 50 comments at a time
    pages = every_page(lambda cursor: api.get(user, ticket["ticket_id"], **cursor_query(50, cursor)), "comments")
    # Then every answer fits, each page holds what fits, and together they are every comment once, in order
    assert len(pages) >= 2
    assert all(pages)
    assert [comment["body"] for page in pages for comment in page] == bodies
    # And the other tenant reads only its own
    response = api.get(stranger, theirs["ticket_id"])
    assert [comment["body"] for comment in response.body["comments"]] == [EMOJI * 10_000]


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_a_status_list_of_oversized_rows_pages_under_lambdas_limit(
    api: Api, dynamodb: DynamoDBClient, table_name: str, owner: str, other: str
) -> None:
    # Given 12 of the owner's tickets whose titles an operator made huge (a 400 KB item
    # holds 90,000 emoji: 1.26 MB each in the answer), among ordinary ones
    user = User(owner, "alice")
    ordinary = [api.new_ticket(user, title=f"small {n}")["ticket_id"] for n in range(5)]
    huge = [api.new_ticket(user, title=f"huge {n}")["ticket_id"] for n in range(12)]
    for ticket_id in huge:
        dynamodb.update_item(
            TableName=table_name,
            Key=keys.ticket_key(owner, ticket_id),
            UpdateExpression="SET title = :t",
            ExpressionAttributeValues={":t": {"S": EMOJI * 90_000}},
        )
    api.new_ticket(User(other, "bob"), title="theirs")
    # When the owner lists them 100 at a time
    pages = every_page(lambda cursor: api.list_tickets(user, **cursor_query(100, cursor)), "items")
    # Then every answer fits, and the pages hold every ticket of the owner once
    assert len(pages) > 1
    assert sorted(item["ticket_id"] for page in pages for item in page) == sorted(ordinary + huge)


def write_events(tenant_id: str, ticket_id: str, count: int, title: str) -> None:
    """``count`` audit events of ``ticket_id`` (as the stream's writer stores them), each with ``title``."""
    for n in range(count):
        at = f"2026-11-21T10:00:{n:02d}.000Z"
        record = audit_record(
            event_name="INSERT",
            event_id=f"{n + 1:032x}",
            sequence_number=str(n + 1),
            recorded_at=epoch_of(at),
            keys_image={"pk": keys.ticket_pk(tenant_id, ticket_id), "sk": keys.SUMMARY_SK},
            old_image=None,
            new_image={
                "tenant_status": keys.tenant_status(tenant_id, "OPEN"),
                "title": title,
                "resolver": keys.UNASSIGNED_RESOLVER,
                "created_by": "alice",
                "created_at": at,
                "version": 1,
            },
        )
        assert record.event is not None, record.poison
        assert audit_writer().write(record) == 2


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_history_and_trail_of_oversized_events_page_under_lambdas_limit(api: Api, owner: str, other: str) -> None:
    # Given 9 events whose title an operator's write made huge (60,000 emoji: 840 KB each in the answer)
    ticket_id = "01JD3Z8W1X4K6M9P2R5T7V0BQE"
    write_events(owner, ticket_id, 9, EMOJI * 60_000)
    write_events(other, ticket_id, 2, "theirs")
    admin = User(owner, "root", admin=True)
    # When the history and the day's trail are read 100 at a time
    history = every_page(lambda cursor: api.history(admin, ticket_id, **cursor_query(100, cursor)), "events")
    window = {"from": "2026-11-21", "to": "2026-11-22"}
    trail = every_page(lambda cursor: api.audit(admin, **window, **cursor_query(100, cursor)), "events")
    # Then every answer fits, and each is every event once
    for pages in (history, trail):
        assert len(pages) > 1
        ids = [event["event_id"] for page in pages for event in page]
        assert len(ids) == len(set(ids)) == 9
