"""How many bytes a response takes in Lambda's answer, and the page budget every list shares.

A REST function answers API Gateway with the Lambda proxy response: a JSON
object (``statusCode``, ``headers``, ``body``, ``isBase64Encoded``) whose
``body`` is itself a JSON text, serialized first by Powertools and then once
more, as a string, by the Lambda runtime. Lambda refuses a synchronous answer
over 6 MB (6,291,456 bytes), and API Gateway then answers 502: a ticket whose
comments outweigh that would be unreadable for its whole tenant. So every page
is cut by size as well as by count, here, once, for every route that pages.

What a value costs, exactly (``tests/unit/test_response_size.py`` compares it
with the real handler's envelope):

- Powertools serializes the body with ``json.dumps(..., separators=(",", ":"),
  cls=Encoder)``, ``ensure_ascii`` left on: every character outside ASCII is
  escaped, so the body is pure ASCII, and an astral character (an emoji) takes
  12 bytes (``\\ud83d\\ude00``), any other non-ASCII or control character 6.
- The runtime then writes that body as a JSON string inside the envelope:
  being ASCII, only ``"`` and ``\\`` are escaped once more (one byte each),
  whatever the runtime's own ``ensure_ascii``. An emoji thus costs 14 bytes,
  a control character 7, ``"`` 4; nothing costs more than 7 bytes per byte
  DynamoDB stores.

**The budget** (:data:`PAGE_BUDGET_BYTES`, 5 MiB) bounds the page's body as it
sits in the envelope, its fixed part (the ticket of ``GET /tickets/{id}``, the
longest cursor, the keys) included. The 1 MiB left below Lambda's limit holds
the rest of the envelope (``statusCode``, ``isBase64Encoded``, the headers:
a few hundred bytes) with room for whatever the runtime or Powertools add.

**A page always takes its first item**, so that paging always moves on, and
one item never fills the budget alone:

- By the API's limits, the largest item is a ticket: title 200 + description
  10,000 characters, every one an emoji (14 bytes) = 142,800 bytes, plus a
  128-character resolver and user name, ids and times and the keys, under
  1,000 bytes: at most 143,800 bytes. A comment: 10,000 emoji = 140,000 bytes
  plus under 500. An audit event carries a title twice (old and new): at most
  2 x 2,800 + under 1,500 bytes. So ``GET /tickets/{id}`` holds its ticket
  and 36 of the largest comments (5,242,880 - 143,800 - the longest
  cursor, over 140,500 per comment), and a page of 100 list rows (no
  description) is at most 100 x 4,500 bytes.
- Whatever was written outside the API (an operator, a migration), a
  DynamoDB item is at most 400 KB, and no stored byte costs more than 7: one
  item is at most 2,867,200 bytes, so even a ticket and one comment of that
  size stay under Lambda's limit (``tests/unit/test_response_size.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from aws_lambda_powertools.shared.json_encoder import Encoder

T = TypeVar("T")

LAMBDA_RESPONSE_LIMIT: Final = 6 * 1024 * 1024
PAGE_BUDGET_BYTES: Final = 5 * 1024 * 1024
# DynamoDB's largest item, and the most a stored byte can cost in the envelope (a control character).
MAX_ITEM_BYTES: Final = 400 * 1024
MAX_COST_PER_STORED_BYTE: Final = 7


def body_json(value: Any) -> str:
    """``value`` as Powertools serializes a route's return value (its resolver's default serializer)."""
    return json.dumps(value, separators=(",", ":"), cls=Encoder)


def envelope_bytes(value: Any) -> int:
    """The bytes ``value``'s JSON takes inside the Lambda proxy response's ``body`` string."""
    text = body_json(value)
    # ASCII only (ensure_ascii): in the envelope, each '"' and '\' gains one escaping backslash.
    return len(text) + text.count("\\") + text.count('"')


@dataclass(slots=True)
class PageBudget:
    """Decides where a page stops by size: items are offered in page order and
    each is admitted while the page, its fixed part (``reserved`` bytes) and
    the items admitted so far, stays within ``budget``. The first item is always
    admitted (the module docstring shows it always fits). Once an item is
    refused the page ends before it: the cursor continues at that item."""

    reserved: int = 0
    budget: int = PAGE_BUDGET_BYTES
    used: int = 0
    admitted: int = 0
    full: bool = False

    @classmethod
    def around(cls, shell: Any, budget: int = PAGE_BUDGET_BYTES) -> PageBudget:
        """A budget for the items of ``shell``: the page with no items and its
        longest possible cursor, whose bytes are reserved."""
        return cls(reserved=envelope_bytes(shell), budget=budget)

    def admit(self, item: Any) -> bool:
        if self.full:
            return False
        cost = envelope_bytes(item) + (1 if self.admitted else 0)  # the list's comma
        if self.admitted and self.reserved + self.used + cost > self.budget:
            self.full = True
            return False
        self.used += cost
        self.admitted += 1
        return True

    def take(self, items: Iterable[T]) -> list[T]:
        """The leading ``items`` the budget admits (the page's items, in order)."""
        taken: list[T] = []
        for item in items:
            if not self.admit(item):
                break
            taken.append(item)
        return taken
