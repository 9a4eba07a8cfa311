"""Scatter-gather over a tenant's GSI1 shards: one page, one cursor.

``GET /tickets`` asks every GSI1 key the tenant's tickets of a status can be
under (:func:`support_tickets.core.keys.status_partitions`) in parallel, and merges
the rows into one page, ordered by resolver (unassigned first: ``#UNASSIGNED``
sorts before every user name), ties by partition (unsharded key first, then
shard 0, 1, …), then in each partition's own index order. Each partition is read
until it gave ``limit + 1`` of the caller's tickets (following DynamoDB's 1 MB
pages), so the merge never runs a partition dry while it may hold a smaller row
than the others; rows that are not the caller's tickets are read past within a
budget (the repository's ``MAX_SKIPPED_ROWS``, ``MAX_QUERY_PAGES``), beyond which
the partition says ``more`` and the page stops at its last row read. A page
also stops before a row that would take the response past its byte budget
(:class:`~support_tickets.core.response_size.PageBudget`).

**The cursor is one position in that merge order** (a :class:`Boundary`): the
merge always takes the smallest head, and stops as soon as a partition that
may hold more runs dry, so what a page read is exactly everything up to its
last row. From the last row (resolver ``r``, partition ``p``, its position in
``p``) every partition's position follows: a partition before ``p`` resumes
past ``r``, ``p`` after the row, a partition after ``p`` at ``r``. A partition
that appears while the shard count changes takes its place in that order, one
that disappears is dropped; the cursor is bound to the tenant and the query
(status, resolver) and nothing else.

**A cursor is small, and every cursor the API emits is one it accepts.** It
never carries a string longer than :data:`MAX_NAMED_KEY_CHARS` characters:

- Resolvers: a ticket's resolver is a user name (``[A-Za-z0-9._@-]{1,128}``) or
  ``#UNASSIGNED``; a row with any other resolver is not a ticket (it is dropped,
  and reported), and no ticket can sort between it and the next resolver that
  is one (:func:`next_resolver`), so the position after it is "at" that one.
- Keys: a ticket's own key (``TICKET#<id>``, ``SUMMARY``), the edges of the
  caller's key space, or a malformed own row's key when it is printable ASCII of
  at most :data:`MAX_NAMED_KEY_CHARS` characters. After an own row whose key is
  longer (or not printable), the position is the last nameable position before
  it with a count of such rows to read past (``skip``): only rows of that kind
  are ever read past, so a ticket written meanwhile is never skipped.

So the longest cursor follows from these limits (:data:`MAX_CURSOR_LENGTH`,
1,148 characters; ``tests/unit/test_list_cursor.py`` builds the worst states,
64 shards, 128-character resolvers, 64-character ticket ids, and round-trips
them), far inside API Gateway's shortest URL limit (8,192 characters, for
edge-optimized and private APIs; 10,240 for regional ones: "Quotas for
configuring and running a REST API in API Gateway").

**A position never names another tenant's key**, in a cursor or in the next
Query of the same request. A row of another tenant (an item whose GSI1 key
names the caller) is never shown and the position after it is derived from
the caller's own key space, using that GSI1 orders rows of equal resolver by
their table key (``pk``, then ``sk``): when the row's ``pk`` sorts before the
caller's prefix, the position is the smallest own key (``TENANT#<t>|``) at the
row's resolver, so the caller's rows of that resolver are all still ahead;
when it sorts after, every own row of that resolver was already read, so the
position is "past that resolver" (the next read asks for ``resolver > :r``;
with a resolver filter, the partition is done). Either way no own row is
skipped and the planted rows are not read again. Positions are checked value
by value before they become a start key (within this query, under the
caller's own prefix): a forged cursor is ``INVALID_CURSOR``, never a
DynamoDB ``ValidationException``.

The cursor is compressed JSON (zlib, base64url); decompression is bounded.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import math
import re
import string
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from support_tickets.core import keys
from support_tickets.core.errors import InvalidCursor

_RESOLVER = re.compile(keys.RESOLVER_PATTERN)
# The characters of a user name, in DynamoDB's (UTF-8 byte, here code point) order.
_RESOLVER_ALPHABET: Final = "".join(sorted("-._@" + string.digits + string.ascii_letters))
MAX_RESOLVER_CHARS: Final = 128
# The longest own-key part (after the tenant's prefix, and a sort key) a cursor names as it is.
MAX_NAMED_KEY_CHARS: Final = 128
_NAMEABLE = re.compile(rf"[\x20-\x7e]{{0,{MAX_NAMED_KEY_CHARS}}}")
# More rows than a partition can hold (a count DynamoDB's 10 GB partitions never reach).
MAX_SKIP: Final = 2**53 - 1
# The partitions' places in the merge order: -1 (before every partition), the
# unsharded key (0), shard k (k + 1).
BEFORE_ALL: Final = -1
MAX_ORDINAL: Final = keys.MAX_SHARDS
_KEY, _PAST, _AT = "k", "p", "a"


def is_resolver_key(value: str) -> bool:
    """Whether a ticket can have ``value`` as its GSI1 sort key."""
    return value == keys.UNASSIGNED_RESOLVER or bool(_RESOLVER.fullmatch(value))


def next_resolver(value: str) -> str | None:
    """The smallest resolver key (:func:`is_resolver_key`) greater than ``value``;
    ``None`` when there is none."""
    candidates = [keys.UNASSIGNED_RESOLVER] if value < keys.UNASSIGNED_RESOLVER else []
    valid = 0  # the longest prefix of value made of user-name characters
    while valid < min(len(value), MAX_RESOLVER_CHARS) and value[valid] in _RESOLVER_ALPHABET:
        valid += 1
    if valid == len(value) and valid < MAX_RESOLVER_CHARS:
        candidates.append(value + _RESOLVER_ALPHABET[0])  # the smallest extension of value itself
    else:
        # Keep the longest prefix that can be raised at its next character by the least.
        for cut in range(min(valid, len(value) - 1, MAX_RESOLVER_CHARS - 1), -1, -1):
            higher = [c for c in _RESOLVER_ALPHABET if c > value[cut]]
            if higher:
                candidates.append(value[:cut] + higher[0])
                break
    return min(candidates) if candidates else None


def _nameable(part: str) -> bool:
    return bool(_NAMEABLE.fullmatch(part))


@dataclass(frozen=True, slots=True)
class Position:
    """Where one partition resumes. ``kind``: after the GSI1 row ``resolver`` of
    the item ``<tenant prefix><suffix>``, ``sk`` (an own key, real or the smallest:
    ``_KEY``); after every row of ``resolver`` (``_PAST``); at the first row of
    ``resolver`` (``_AT``; ``""``: the partition's start). Then ``skip`` own rows
    whose keys no cursor names are read past."""

    resolver: str
    suffix: str = ""
    sk: str = keys.SUMMARY_SK
    kind: str = _KEY
    skip: int = 0

    @classmethod
    def of_ticket(cls, ticket_id: str, resolver: str) -> Position:
        return cls(resolver, keys.ticket_suffix(ticket_id))

    @classmethod
    def past(cls, resolver: str) -> Position:
        return cls(resolver, kind=_PAST)

    @classmethod
    def at(cls, resolver: str) -> Position:
        return cls(resolver, kind=_AT)

    @property
    def is_past(self) -> bool:
        return self.kind == _PAST

    @property
    def is_at(self) -> bool:
        return self.kind == _AT

    def after_unnamed(self) -> Position:
        """The position after one more own row that no cursor can name."""
        return replace(self, skip=self.skip + 1)

    def start_key(self, tenant_id: str, partition: str) -> dict[str, Any]:
        return {
            "pk": {"S": keys.tenant_key(tenant_id, self.suffix)},
            "sk": {"S": self.sk},
            "tenant_status": {"S": partition},
            "resolver": {"S": self.resolver},
        }


START: Final = Position.at("")


def own_row_position(resolver: str, suffix: str, sk: str, previous: Position) -> tuple[Position, bool]:
    """The position after the caller's own row (``resolver`` a resolver key), and
    whether a cursor can name it; if not, ``previous`` (the position before the row)
    with one more row to read past."""
    if _nameable(suffix) and sk and _nameable(sk):
        return Position(resolver, suffix, sk), True
    return previous.after_unnamed(), False


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One GSI1 row as read: its resolver (where it sorts), where its partition
    resumes after it (``None``: the row's resolver is no ticket's, resume at
    :func:`next_resolver`), and the ticket row when it is one of the caller's
    tickets; else ``row`` is ``None`` and ``dropped`` holds what was read
    (``foreign``: another tenant's item). ``named``: whether the position is
    this row's own (not the one before it with a count to read past)."""

    resolver: str
    position: Position | None
    row: dict[str, Any] | None
    dropped: dict[str, Any] | None = None
    foreign: bool = False
    named: bool = True


@dataclass
class PartitionRead:
    """What one partition gave for a page: its rows in index order, and whether
    more may follow them."""

    partition: str
    rows: list[IndexRow]
    more: bool


@dataclass(frozen=True, slots=True)
class Boundary:
    """Everything before this point of the merge order was read: the rows up to
    resolver ``resolver`` in partitions before ``ordinal``, the rows up to
    ``position`` in partition ``ordinal``, the rows before ``resolver`` in the
    partitions after it. ``ordinal`` :data:`BEFORE_ALL`: every partition at ``resolver``."""

    resolver: str
    ordinal: int = BEFORE_ALL
    position: Position | None = None

    def position_of(self, ordinal: int) -> Position:
        if ordinal < self.ordinal:
            return Position.past(self.resolver)
        if ordinal > self.ordinal or self.position is None:
            return Position.at(self.resolver)
        return self.position

    @classmethod
    def after(cls, ordinal: int, entry: IndexRow) -> Boundary | None:
        """The boundary just after ``entry`` (of partition ``ordinal``); ``None``
        when no ticket can follow it."""
        if entry.position is None:
            following = next_resolver(entry.resolver)
            return None if following is None else cls(following)
        return cls(entry.resolver, ordinal, entry.position)


@dataclass
class Page:
    rows: list[dict[str, Any]]
    last: tuple[int, IndexRow] | None = None  # the last row consumed: its read's index, and the row
    exhausted: bool = field(default=False)


def merge(
    reads: Sequence[PartitionRead],
    limit: int,
    accept: Callable[[dict[str, Any]], bool],
    drop: Callable[[IndexRow], None] = lambda _: None,
    fits: Callable[[dict[str, Any]], bool] = lambda _: True,
) -> Page:
    """Take up to ``limit`` accepted rows from ``reads`` in merge order. Dropped
    rows (handed to ``drop`` as they are consumed, so each is reported once)
    and rows that ``accept`` refuses are consumed but not returned. An accepted
    row that does not ``fit`` (the page's byte budget) ends the page before it:
    it is not consumed, the next page starts with it."""
    queues = [deque(read.rows) for read in reads]
    heap = [(queue[0].resolver, index) for index, queue in enumerate(queues) if queue]
    heapq.heapify(heap)
    taken: list[dict[str, Any]] = []
    last: tuple[int, IndexRow] | None = None
    while heap and len(taken) < limit:
        _, index = heap[0]
        entry = queues[index][0]
        if entry.row is not None and accept(entry.row):
            if not fits(entry.row):
                return Page(rows=taken, last=last)
            taken.append(entry.row)
        elif entry.row is None:
            drop(entry)
        heapq.heappop(heap)
        queues[index].popleft()
        last = (index, entry)
        if queues[index]:
            heapq.heappush(heap, (queues[index][0].resolver, index))
        elif reads[index].more:
            break  # its next row might sort before every other head: stop the page here
    exhausted = not any(queues) and not any(read.more for read in reads)
    return Page(rows=taken, last=last, exhausted=exhausted)


# ---------------------------------------------------------------- the cursor
def _max_cursor_json_bytes() -> int:
    """The longest cursor JSON, from the limits: the worst value of every field
    (a name of ``"`` characters, each escaped to two)."""
    name = '"' * MAX_NAMED_KEY_CHARS
    resolver = "a" * MAX_RESOLVER_CHARS
    anchor = [_KEY, resolver, name, name, MAX_SKIP]
    payload = {"q": "f" * 24, "r": resolver, "o": MAX_ORDINAL, "p": anchor}
    return len(json.dumps(payload, separators=(",", ":")))


MAX_CURSOR_JSON_BYTES: Final = _max_cursor_json_bytes()
# zlib never adds more than 11 bytes to input under 64 KiB (one stored block: 5, header 2, checksum 4).
MAX_CURSOR_LENGTH: Final = math.ceil((MAX_CURSOR_JSON_BYTES + 11) * 4 / 3)


def encode_cursor(fingerprint: str, boundary: Boundary) -> str:
    payload: dict[str, Any] = {"q": fingerprint, "r": boundary.resolver, "o": boundary.ordinal}
    if boundary.position is not None:
        position = boundary.position
        payload["p"] = [position.kind, position.resolver, position.suffix, position.sk, position.skip]
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode_cursor(cursor: str, fingerprint: str, resolver_filter: str | None) -> Boundary:
    """The boundary in ``cursor``, checked against this tenant's query, or :class:`InvalidCursor`."""
    if not cursor or len(cursor) > MAX_CURSOR_LENGTH:
        raise InvalidCursor()
    try:
        compressed = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(compressed, MAX_CURSOR_JSON_BYTES)
        if inflater.unconsumed_tail or not inflater.eof:
            raise InvalidCursor()
        payload = json.loads(raw)
    except (binascii.Error, zlib.error, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidCursor() from exc
    if not isinstance(payload, dict) or payload.get("q") != fingerprint:
        raise InvalidCursor()
    ordinal, resolver = payload.get("o"), payload.get("r")
    if not isinstance(ordinal, int) or not _whole(ordinal, BEFORE_ALL, MAX_ORDINAL) or not isinstance(resolver, str):
        raise InvalidCursor()
    if set(payload) != ({"q", "r", "o"} if ordinal == BEFORE_ALL else {"q", "r", "o", "p"}):
        raise InvalidCursor()
    if not _resolver_ok(resolver, resolver_filter, start=ordinal == BEFORE_ALL):
        raise InvalidCursor()
    if ordinal == BEFORE_ALL:
        return Boundary(resolver)
    return Boundary(resolver, ordinal, _position(payload["p"], resolver, resolver_filter))


def _position(value: Any, boundary_resolver: str, resolver_filter: str | None) -> Position:
    if not isinstance(value, list) or len(value) != 5:
        raise InvalidCursor()
    kind, resolver, suffix, sk, skip = value
    if kind not in (_KEY, _PAST, _AT) or not isinstance(resolver, str) or not _whole(skip, 0, MAX_SKIP):
        raise InvalidCursor()
    if not _resolver_ok(resolver, resolver_filter, start=kind == _AT) or resolver > boundary_resolver:
        raise InvalidCursor()
    if kind != _KEY:
        if (suffix, sk) != ("", keys.SUMMARY_SK):
            raise InvalidCursor()
        return Position(resolver, kind=kind, skip=skip)
    if not (isinstance(suffix, str) and isinstance(sk, str) and _nameable(suffix) and sk and _nameable(sk)):
        raise InvalidCursor()
    return Position(resolver, suffix, sk, skip=skip)


def _resolver_ok(resolver: str, resolver_filter: str | None, *, start: bool) -> bool:
    """A resolver key of this query (``""``, the start, where ``start`` allows it)."""
    if resolver == "":
        return start
    if resolver_filter is not None:
        return resolver == keys.resolver_key(resolver_filter)
    return is_resolver_key(resolver)


def _whole(value: Any, least: int, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and least <= value <= most


def partition_suffix(tenant_id: str, status: keys.TicketStatus, partition: str) -> str:
    """``""`` for the unsharded key, the shard number otherwise."""
    base = keys.tenant_status(tenant_id, status)
    return partition[len(base) + 1 :] if partition != base else ""


def ordinal(suffix: str) -> int:
    """A partition's place in the merge order (``partition_suffix``'s ``""`` first)."""
    return 0 if suffix == "" else int(suffix) + 1
