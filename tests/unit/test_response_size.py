"""The page budget's arithmetic (``support_tickets.core.response_size``): what
a value costs in Lambda's proxy response, and why one item never fills a page."""

from __future__ import annotations

import json

from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import AuditEvent, Comment, Ticket, TicketListItem, TicketWithComments
from support_tickets.core.response_size import (
    LAMBDA_RESPONSE_LIMIT,
    MAX_COST_PER_STORED_BYTE,
    MAX_ITEM_BYTES,
    PAGE_BUDGET_BYTES,
    PageBudget,
    body_json,
    envelope_bytes,
)
from support_tickets.data import cursor, listing

EMOJI = "\N{GRINNING FACE}"
TIME = "2026-11-21T10:00:00.000Z"
USER = "u" * 128  # a Cognito user name's longest


def envelope(body: object) -> int:
    """The proxy response as the runtime writes it, less its body string's own bytes' neighbours."""
    response = {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": body_json(body)}
    return len(json.dumps(response, ensure_ascii=False).encode())


def largest_ticket() -> Ticket:
    return Ticket(
        ticket_id="T" * 64,
        title=EMOJI * 200,
        status=TicketStatus.IN_PROGRESS,
        resolver="r" * 128,
        created_by=USER,
        created_at=TIME,
        updated_at=TIME,
        version=10**18,
        description=EMOJI * 10_000,
    )


def largest_comment() -> Comment:
    return Comment(comment_id="C" * 26, author=USER, body=EMOJI * 10_000, created_at=TIME)


def test_envelope_bytes_is_what_a_value_adds_to_the_real_envelope() -> None:
    for value in (largest_comment(), {"s": '"\\\x00\x7f\u00e9\u20ac' + EMOJI}, [1, None, "x"]):
        assert envelope({"v": [value]}) - envelope({"v": []}) == envelope_bytes(value)


def test_an_emoji_costs_14_bytes_and_no_stored_byte_more_than_7() -> None:
    assert envelope_bytes(EMOJI * 1000) - envelope_bytes("") == 14_000
    for char in ("\x00", "\x1f", '"', "\\", "\u00e9", "\u20ac", EMOJI):
        cost = envelope_bytes(char) - envelope_bytes("")
        assert cost <= MAX_COST_PER_STORED_BYTE * len(char.encode())


def test_one_item_at_the_apis_limits_is_far_below_the_budget() -> None:
    ticket, comment = envelope_bytes(largest_ticket()), envelope_bytes(largest_comment())
    assert ticket <= 143_800
    assert comment <= 140_500
    row = TicketListItem(**{name: getattr(largest_ticket(), name) for name in TicketListItem.__dataclass_fields__})
    assert envelope_bytes(row) <= 4_500
    event = AuditEvent(
        event_id="e" * 128,
        ticket_id="T" * 64,
        type="updated",
        actor=USER,
        at=TIME,
        version=10**18,
        changes=[
            {"field": "title", "old": EMOJI * 200, "new": EMOJI * 200},
            {"field": "resolver", "old": "r" * 128, "new": "s" * 128},
            {"field": "status", "old": "OPEN", "new": "IN_PROGRESS"},
        ],
        description_changed=True,
        comment_id=None,
    )
    assert envelope_bytes(event) <= 2 * 2_800 + 1_500


def test_a_comments_page_holds_the_ticket_and_36_of_the_largest_comments() -> None:
    shell = TicketWithComments(ticket=largest_ticket(), comments=[], next_cursor="c" * cursor.MAX_CURSOR_LENGTH)
    budget = PageBudget.around(shell)
    taken = budget.take([largest_comment()] * 100)
    assert len(taken) == 36
    page = TicketWithComments(ticket=largest_ticket(), comments=taken, next_cursor="c" * cursor.MAX_CURSOR_LENGTH)
    assert envelope(page) <= PAGE_BUDGET_BYTES + 200 < LAMBDA_RESPONSE_LIMIT


def test_even_the_largest_dynamodb_items_fit_one_answer_two_at_a_time() -> None:
    # Written outside the API: 400 KB items of the costliest bytes (the first item
    # of a page is always taken, with the ticket of GET /tickets/{id}).
    worst = MAX_ITEM_BYTES * MAX_COST_PER_STORED_BYTE
    assert worst < PAGE_BUDGET_BYTES
    assert 2 * worst + 64 * 1024 < LAMBDA_RESPONSE_LIMIT


def test_the_first_item_is_always_admitted_and_a_refusal_ends_the_page() -> None:
    budget = PageBudget(reserved=0, budget=10)
    assert budget.admit("x" * 100)
    assert not budget.admit("y")
    assert budget.full
    assert not budget.admit("")


def test_the_list_cursor_reserved_is_the_longest_one() -> None:
    assert listing.MAX_CURSOR_LENGTH < cursor.MAX_CURSOR_LENGTH
    assert keys.MAX_SHARDS == listing.MAX_ORDINAL
