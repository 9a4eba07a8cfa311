"""The query and header parameters routes declare (:class:`RouteInput`), each once."""

from __future__ import annotations

from typing import Final

from support_tickets.api.validation import Parameter
from support_tickets.core.keys import RESOLVER_PATTERN, TicketStatus
from support_tickets.core.models import STATUS_SCHEMA
from support_tickets.domain.tickets import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from support_tickets.usage.report import DAY_PATTERN

LIMIT: Final = Parameter(
    "limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": DEFAULT_PAGE_SIZE}
)
CURSOR: Final = Parameter("cursor", {"type": "string", "description": "The `next_cursor` of the previous page."})
PAGE: Final = (LIMIT, CURSOR)

STATUS: Final = Parameter("status", {**STATUS_SCHEMA, "default": TicketStatus.OPEN.value})
RESOLVER: Final = Parameter("resolver", {"type": "string", "pattern": RESOLVER_PATTERN})

# The audit window's ends; the domain reads them (dates or UTC times).
WINDOW_FROM: Final = Parameter("from", {"type": "string", "maxLength": 40})
WINDOW_TO: Final = Parameter("to", {"type": "string", "maxLength": 40})

# Checked by the domain, which answers their own 400 details.
IDEMPOTENCY_KEY: Final = Parameter("Idempotency-Key")
IF_MATCH: Final = Parameter("If-Match")

# GET /usage's day; the domain checks it is a calendar day in range.
USAGE_DAY: Final = Parameter(
    "day", {"type": "string", "pattern": DAY_PATTERN, "description": "A UTC day, `YYYY-MM-DD` (default: today)."}
)
