"""Scatter-gather over a tenant's GSI1 shards: one page, one cursor.

``GET /tickets`` asks every GSI1 key the tenant's tickets of a status can be
under (:func:`support_tickets.core.keys.status_partitions`) in parallel, and merges
the rows into one page, ordered by resolver (unassigned first: ``#UNASSIGNED``
sorts before every user name), ties by partition (unsharded key first, then
shard 0, 1, …), then in each partition's own index order. Each partition is read
``limit + 1`` rows deep (following ``LastEvaluatedKey`` past DynamoDB's 1 MB
pages), so the merge never runs a partition dry while it may hold a smaller
row than the others.

The cursor holds every partition's position: the ``(ticket_id, resolver)`` of
the last row the page took from it (a partition not in the cursor starts from
its beginning). It is bound to the tenant and the query (status, resolver)
and nothing else, so it stays valid while the tenant's shard count changes:
a partition that appears meanwhile is read from its start, one that
disappears is dropped. Positions are checked value by value before they
become a start key (a ticket id, a resolver, within this query): a forged
cursor is ``INVALID_CURSOR``, never a DynamoDB ``ValidationException``.

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

Position = tuple[str, str]  # (ticket_id, resolver as stored)


@dataclass
class PartitionRead:
    """What one partition gave for a page: its rows in index order, and whether
    more may follow them."""

    partition: str
    rows: list[dict[str, Any]]
    more: bool


@dataclass
class Page:
    rows: list[dict[str, Any]]
    positions: dict[str, Position]
    exhausted: bool = field(default=False)


def merge(reads: Sequence[PartitionRead], limit: int, accept: Callable[[dict[str, Any]], bool]) -> Page:
    """Take up to ``limit`` accepted rows from ``reads`` in merge order. Rows that
    ``accept`` refuses are consumed (the cursor moves past them) but not returned."""
    queues = [deque(read.rows) for read in reads]
    heap = [(queue[0]["resolver"], index) for index, queue in enumerate(queues) if queue]
    heapq.heapify(heap)
    taken: list[dict[str, Any]] = []
    positions: dict[str, Position] = {}
    while heap and len(taken) < limit:
        _, index = heapq.heappop(heap)
        row = queues[index].popleft()
        positions[reads[index].partition] = (str(row["ticket_id"]), str(row["resolver"]))
        if accept(row):
            taken.append(row)
        if queues[index]:
            heapq.heappush(heap, (queues[index][0]["resolver"], index))
        elif reads[index].more:
            break  # its next row might sort before every other head: stop the page here
    exhausted = not any(queues) and not any(read.more for read in reads)
    return Page(rows=taken, positions=positions, exhausted=exhausted)


def encode_cursor(fingerprint: str, positions: Mapping[str, Position], resolver_filter: str | None) -> str:
    """``positions`` maps a partition suffix ("" unsharded, else the shard number) to a position."""
    packed = {
        suffix: ticket_id if resolver_filter is not None else [ticket_id, resolver]
        for suffix, (ticket_id, resolver) in sorted(positions.items())
    }
    raw = json.dumps({"q": fingerprint, "p": packed}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


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
        if resolver_filter is not None:
            ticket_id, resolver = value, keys.resolver_key(resolver_filter)
        elif isinstance(value, list) and len(value) == 2:
            ticket_id, resolver = value
        else:
            raise InvalidCursor()
        if not isinstance(ticket_id, str) or not _TICKET_ID.fullmatch(ticket_id):
            raise InvalidCursor()
        if not isinstance(resolver, str) or not (resolver == keys.UNASSIGNED_RESOLVER or _RESOLVER.fullmatch(resolver)):
            raise InvalidCursor()
        positions[suffix] = (ticket_id, resolver)
    return positions


def partition_suffix(tenant_id: str, status: keys.TicketStatus, partition: str) -> str:
    """``""`` for the unsharded key, the shard number otherwise (the cursor's names)."""
    base = keys.tenant_status(tenant_id, status)
    return partition[len(base) + 1 :] if partition != base else ""
