"""Scatter-gather over a tenant's GSI1 shards: one page, one cursor.

``GET /tickets`` asks every GSI1 key the tenant's tickets of a status can be
under (:func:`support_tickets.core.keys.status_partitions`) in parallel, and merges
the rows into one page, ordered by resolver (unassigned first: ``#UNASSIGNED``
sorts before every user name), ties by partition (unsharded key first, then
shard 0, 1, …), then in each partition's own index order. Each partition is read
until it gave ``limit + 1`` of the caller's tickets (following
``LastEvaluatedKey`` past DynamoDB's 1 MB pages), so the merge never runs a
partition dry while it may hold a smaller row than the others; rows that are
not the caller's tickets are read past within a budget (the repository's
``MAX_SKIPPED_ROWS``, ``MAX_QUERY_PAGES``), beyond which the partition says
``more`` and the page stops at its last row read.

The cursor holds every partition's position: where the partition resumes
after the last row the page read from it (a partition not in the cursor starts
from its beginning). It is bound to the tenant and the query (status, resolver)
and nothing else, so it stays valid while the tenant's shard count changes:
a partition that appears meanwhile is read from its start, one that
disappears is dropped. Positions are checked value by value before they
become a start key (within this query, under the caller's own prefix): a
forged cursor is ``INVALID_CURSOR``, never a DynamoDB ``ValidationException``.

A position never names another tenant's key. A ticket's is its own key
(``(ticket_id, resolver)`` in the cursor). A row that is not one of the
caller's tickets (another tenant's item whose GSI1 key names the caller, or a
malformed one) is never shown: after the caller's own malformed row the
position is that row's key (the caller's own); after another tenant's row it
is derived from the caller's own key space, using that GSI1 orders rows of
equal resolver by their table key (``pk``, then ``sk``): when the row's
``pk`` sorts before the caller's prefix, the position is the smallest own key
(``TENANT#<t>|``) at the row's resolver, so the caller's rows of that resolver
are all still ahead; when it sorts after, every own row of that resolver was
already read, so the position is "past that resolver" (the next read asks for
``resolver > :r``; with a resolver filter, the partition is done). Either way
no own row is skipped and the planted rows are not read again. The cursor
carries no other tenant's key, and IAM, which confines
``dynamodb:LeadingKeys`` (the start key's ``pk`` too, in the local guard) to
the caller's prefix, never sees one.

The cursor is compressed JSON (zlib, base64url) so that 64 shards' positions
fit an URL; decompression is bounded.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
import re
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from support_tickets.core import keys
from support_tickets.core.errors import InvalidCursor

MAX_CURSOR_LENGTH: Final = 8192
MAX_CURSOR_JSON_BYTES: Final = 32 * 1024
_RESOLVER = re.compile(keys.RESOLVER_PATTERN)
_TICKET_ID = re.compile(keys.TICKET_ID_PATTERN)

# A key element's most bytes (DynamoDB: partition key 2,048, sort key 1,024).
MAX_KEY_PART_BYTES: Final = 1024
MAX_PARTITION_KEY_BYTES: Final = 2048


@dataclass(frozen=True, slots=True)
class Position:
    """Where a partition resumes: just after the GSI1 row ``resolver`` of the
    item ``<tenant prefix><suffix>``, ``sk`` (an own key, real or the smallest);
    with ``past``, after every row of ``resolver``."""

    resolver: str
    suffix: str = ""
    sk: str = keys.SUMMARY_SK
    past: bool = False

    @classmethod
    def of_ticket(cls, ticket_id: str, resolver: str) -> Position:
        return cls(resolver, keys.ticket_suffix(ticket_id))

    @property
    def ticket_id(self) -> str | None:
        """The ticket whose summary this is the key of, if it is one."""
        return keys.ticket_id_of_suffix(self.suffix) if self.sk == keys.SUMMARY_SK and not self.past else None

    def start_key(self, tenant_id: str, partition: str) -> dict[str, Any]:
        return {
            "pk": {"S": keys.tenant_key(tenant_id, self.suffix)},
            "sk": {"S": self.sk},
            "tenant_status": {"S": partition},
            "resolver": {"S": self.resolver},
        }


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One GSI1 row as read: where its partition resumes after it, and the
    ticket row when it is one of the caller's tickets; else ``row`` is
    ``None`` and ``dropped`` holds what was read (``foreign``: another
    tenant's item)."""

    position: Position
    row: dict[str, Any] | None
    dropped: Mapping[str, Any] | None = None
    foreign: bool = False


@dataclass
class PartitionRead:
    """What one partition gave for a page: its rows in index order, and whether
    more may follow them."""

    partition: str
    rows: list[IndexRow]
    more: bool


@dataclass
class Page:
    rows: list[dict[str, Any]]
    positions: dict[str, Position]
    exhausted: bool = field(default=False)


def merge(
    reads: Sequence[PartitionRead],
    limit: int,
    accept: Callable[[dict[str, Any]], bool],
    drop: Callable[[IndexRow], None] = lambda _: None,
) -> Page:
    """Take up to ``limit`` accepted rows from ``reads`` in merge order. Dropped
    rows (handed to ``drop`` as they are consumed, so each is reported once)
    and rows that ``accept`` refuses are consumed (the cursor moves past them)
    but not returned."""
    queues = [deque(read.rows) for read in reads]
    heap = [(queue[0].position.resolver, index) for index, queue in enumerate(queues) if queue]
    heapq.heapify(heap)
    taken: list[dict[str, Any]] = []
    positions: dict[str, Position] = {}
    while heap and len(taken) < limit:
        _, index = heapq.heappop(heap)
        entry = queues[index].popleft()
        positions[reads[index].partition] = entry.position
        if entry.row is None:
            drop(entry)
        elif accept(entry.row):
            taken.append(entry.row)
        if queues[index]:
            heapq.heappush(heap, (queues[index][0].position.resolver, index))
        elif reads[index].more:
            break  # its next row might sort before every other head: stop the page here
    exhausted = not any(queues) and not any(read.more for read in reads)
    return Page(rows=taken, positions=positions, exhausted=exhausted)


def encode_cursor(fingerprint: str, positions: Mapping[str, Position], resolver_filter: str | None) -> str:
    """``positions`` maps a partition suffix ("" unsharded, else the shard number) to a position."""
    packed = {suffix: _pack(position, resolver_filter) for suffix, position in sorted(positions.items())}
    raw = json.dumps({"q": fingerprint, "p": packed}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def _pack(position: Position, resolver_filter: str | None) -> Any:
    ticket_id = position.ticket_id
    if ticket_id is not None and _valid_resolver(position.resolver):
        return ticket_id if resolver_filter is not None else [ticket_id, position.resolver]
    if position.past:
        return {"a": position.resolver if resolver_filter is None else ""}
    other: dict[str, str] = {"k": position.suffix, "s": position.sk}
    if resolver_filter is None:
        other["r"] = position.resolver
    return other


def decode_cursor(cursor: str, fingerprint: str, resolver_filter: str | None) -> dict[str, Position]:
    """The positions in ``cursor``, checked against this tenant's query, or :class:`InvalidCursor`."""
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
    if not isinstance(payload, dict) or set(payload) != {"q", "p"} or payload["q"] != fingerprint:
        raise InvalidCursor()
    packed = payload["p"]
    if not isinstance(packed, dict) or len(packed) > keys.MAX_SHARDS + 1:
        raise InvalidCursor()
    positions: dict[str, Position] = {}
    for suffix, value in packed.items():
        if suffix != "" and not (suffix.isdigit() and str(int(suffix)) == suffix and int(suffix) < keys.MAX_SHARDS):
            raise InvalidCursor()
        positions[suffix] = _unpack(value, resolver_filter)
    return positions


def _unpack(value: Any, resolver_filter: str | None) -> Position:
    if isinstance(value, dict) and set(value) == {"a"}:
        past = value["a"]
        if resolver_filter is not None:
            if past != "":
                raise InvalidCursor()
            return Position(keys.resolver_key(resolver_filter), past=True)
        if not _key_part(past):
            raise InvalidCursor()
        return Position(past, past=True)
    if isinstance(value, dict):
        fields = {"k", "s"} if resolver_filter is not None else {"k", "s", "r"}
        if set(value) != fields:
            raise InvalidCursor()
        resolver = keys.resolver_key(resolver_filter) if resolver_filter is not None else value["r"]
        suffix, sk = value["k"], value["s"]
        if not (_key_part(suffix, empty=True, most=MAX_PARTITION_KEY_BYTES) and _key_part(sk) and _key_part(resolver)):
            raise InvalidCursor()
        return Position(resolver, suffix, sk)
    if resolver_filter is not None:
        ticket_id, resolver = value, keys.resolver_key(resolver_filter)
    elif isinstance(value, list) and len(value) == 2:
        ticket_id, resolver = value
    else:
        raise InvalidCursor()
    if not isinstance(ticket_id, str) or not _TICKET_ID.fullmatch(ticket_id):
        raise InvalidCursor()
    if not _valid_resolver(resolver):
        raise InvalidCursor()
    return Position.of_ticket(ticket_id, resolver)


def _valid_resolver(resolver: Any) -> bool:
    return isinstance(resolver, str) and (resolver == keys.UNASSIGNED_RESOLVER or bool(_RESOLVER.fullmatch(resolver)))


def _key_part(value: Any, *, empty: bool = False, most: int = MAX_KEY_PART_BYTES) -> bool:
    """A string DynamoDB takes as (part of) a key: UTF-8, not too long."""
    if not isinstance(value, str) or (not value and not empty):
        return False
    try:
        return len(value.encode()) <= most
    except UnicodeEncodeError:  # a lone surrogate from JSON's \ud800
        return False


def partition_suffix(tenant_id: str, status: keys.TicketStatus, partition: str) -> str:
    """``""`` for the unsharded key, the shard number otherwise (the cursor's names)."""
    base = keys.tenant_status(tenant_id, status)
    return partition[len(base) + 1 :] if partition != base else ""
