"""Reading a tenant's audit trail: one ticket's history, and the tenant-wide trail.

Both follow the stream (seconds behind a change) and outlive the tickets they
describe, until their TTL (``AuditRetentionDays`` after the change).

- **A ticket's history** is one partition (``TENANT#<t>|HISTORY#<id>``), read
  oldest first, paged with a cursor bound to the tenant and the ticket. A
  ticket id with no history answers 404 unless the ticket itself exists
  (created before the stream caught up): another tenant's ticket, a missing
  one and an impossible id are the same 404. A deleted ticket's history stays
  readable (it ends with its ``deleted`` event) for the retention period.
- **The tenant's trail** of a time window, newest first: for each UTC day of
  the window, newest day first, the :data:`~support_tickets.core.keys.AUDIT_SHARDS`
  partitions of that day are merged by time, each read lazily (a share of
  the page in parallel first, more only from a partition that runs out), so a
  page reads about as many events as it returns. The
  cursor holds the day and each partition's position (and the window, so that
  a window ending "now" stays the same window from page to page); it is bound
  to the tenant and to the query's parameters. A request reads at most
  :data:`MAX_DAYS_PER_PAGE` days: a sparse trail can give a page with fewer
  events than ``limit`` and a ``next_cursor``.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from support_tickets.core import keys
from support_tickets.core.audit import AuditEvent
from support_tickets.core.errors import InvalidCursor, TicketNotFound, ValidationFailed
from support_tickets.core.models import AuditPage
from support_tickets.core.response_size import PageBudget
from support_tickets.data.audit_items import event_from_item
from support_tickets.data.cursor import MAX_CURSOR_LENGTH, decode_cursor, encode_cursor, query_fingerprint
from support_tickets.data.table import TenantTable, to_item
from support_tickets.data.ticket_repository import TicketRepository

MAX_WINDOW: Final = timedelta(days=31)
DEFAULT_WINDOW: Final = timedelta(days=1)
MAX_DAYS_PER_PAGE: Final = 7
HISTORY_KEY_ATTRIBUTES: Final = frozenset({"pk", "sk"})
_DAY_KEY: Final = "d"
_FROM_KEY: Final = "f"
_TO_KEY: Final = "t"
_SHARD_KEYS: Final = tuple(str(shard) for shard in range(keys.AUDIT_SHARDS))
TRAIL_CURSOR_ATTRIBUTES: Final = frozenset({_DAY_KEY, _FROM_KEY, _TO_KEY, *_SHARD_KEYS})
_NOT_STARTED: Final = ""
_EXHAUSTED: Final = "-"


def _page_budget() -> PageBudget:
    """A page of events, sized with the longest cursor either read can give."""
    return PageBudget.around(AuditPage(events=[], next_cursor="c" * MAX_CURSOR_LENGTH))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _millisecond(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond - moment.microsecond % 1000)


def parse_instant(value: str, field: str) -> datetime:
    """``YYYY-MM-DD`` (midnight UTC) or an ISO 8601 time in UTC (``Z`` or ``+00:00``)."""
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), datetime.min.time(), UTC)
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValidationFailed(details=[{"field": field, "message": "must be an ISO 8601 date or time"}]) from exc
    if moment.utcoffset() != timedelta(0):
        raise ValidationFailed(details=[{"field": field, "message": "must be in UTC (end with Z)"}])
    return moment


@dataclass(frozen=True, slots=True)
class AuditWindow:
    """``[start, end)`` as the sort keys compare them (ISO 8601, milliseconds, ``Z``)."""

    start: str
    end: str

    @classmethod
    def of(cls, start: datetime, end: datetime) -> AuditWindow:
        # As the sort keys hold them (milliseconds): a window that is empty there is empty,
        # and its last millisecond (last_day) is never before year 1.
        start, end = _millisecond(start), _millisecond(end)
        if start >= end:
            raise ValidationFailed(details=[{"field": "from", "message": "must be before to"}])
        if end - start > MAX_WINDOW:
            raise ValidationFailed(details=[{"field": "from", "message": f"at most {MAX_WINDOW.days} days before to"}])
        return cls(_iso(start), _iso(end))

    @classmethod
    def from_query(cls, start: str | None, end: str | None, now: datetime) -> AuditWindow:
        """The window a request asks for: ``to`` defaults to now, ``from`` to a day before ``to``."""
        until = parse_instant(end, "to") if end is not None else now
        if start is not None:
            since = parse_instant(start, "from")
        elif until - datetime.min.replace(tzinfo=UTC) < DEFAULT_WINDOW:
            message = f"must be at least {DEFAULT_WINDOW.days} day after 0001-01-01 when from is not given"
            raise ValidationFailed(details=[{"field": "to", "message": message}])
        else:
            since = until - DEFAULT_WINDOW
        return cls.of(since, until)

    @property
    def first_day(self) -> date:
        return date.fromisoformat(self.start[:10])

    @property
    def last_day(self) -> date:
        """The day of the last millisecond inside the window."""
        return (datetime.fromisoformat(self.end) - timedelta(milliseconds=1)).date()

    def holds(self, sk: str) -> bool:
        return self.start <= sk < self.end


@dataclass(slots=True)
class _DayPartition:
    """One partition of a day of the trail, read newest first a slice at a time."""

    shard: int
    start: str  # the sort key the next read starts after; _NOT_STARTED: from the window's end
    from_cursor: bool  # whether ``start`` came from a client's cursor
    buffer: deque[dict[str, Any]] = field(default_factory=deque)
    more: bool = True  # DynamoDB may hold more events after what was read


@dataclass(frozen=True, slots=True)
class AuditRepository:
    table: TenantTable

    @property
    def tenant_id(self) -> str:
        return self.table.tenant_id

    # ------------------------------------------------------------ one ticket
    def ticket_history(self, ticket_id: str, limit: int, cursor: str | None) -> AuditPage:
        """A ticket's events, oldest first (see the module docstring for the 404)."""
        if not keys.is_valid_ticket_id(ticket_id):
            raise TicketNotFound()
        pk = keys.history_pk(self.tenant_id, ticket_id)
        fingerprint = query_fingerprint(self.tenant_id, "history", ticket_id)
        query: dict[str, Any] = {
            "TableName": self.table.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
        }
        if cursor is not None:
            start = decode_cursor(
                cursor, fingerprint, HISTORY_KEY_ATTRIBUTES, lambda key: key["pk"] == pk and keys.is_audit_sk(key["sk"])
            )
            query["ExclusiveStartKey"] = to_item(start)
        items, _ = self.table.query_up_to(query, limit + 1, from_cursor=cursor is not None)
        if not items and cursor is None:
            TicketRepository(self.table).get_ticket_summary(ticket_id)  # 404 unless the ticket exists
        # The page ends at `limit` events or at the response's byte budget.
        events = _page_budget().take(event_from_item(item) for item in items[:limit])
        next_cursor = None
        if len(items) > len(events):
            last = items[len(events) - 1]
            next_cursor = encode_cursor(fingerprint, {"pk": last["pk"], "sk": last["sk"]})
        return AuditPage(events=events, next_cursor=next_cursor)

    # ------------------------------------------------------------ the tenant's trail
    def tenant_trail(
        self, start: str | None, end: str | None, limit: int, cursor: str | None, now: datetime
    ) -> AuditPage:
        """The tenant's events in ``[start, end)``, newest first (``start``/``end``
        as the request gave them; see :meth:`AuditWindow.from_query`)."""
        fingerprint = query_fingerprint(self.tenant_id, "audit", start or "", end or "")
        if cursor is None:
            window = AuditWindow.from_query(start, end, now)
            day, positions = window.last_day, dict.fromkeys(_SHARD_KEYS, _NOT_STARTED)
        else:
            window, day, positions = self._decode(cursor, fingerprint)
            asked = (
                _iso(parse_instant(start, "from")) if start is not None else window.start,
                _iso(parse_instant(end, "to")) if end is not None else window.end,
            )
            if asked != (window.start, window.end):
                raise InvalidCursor()
        events: list[AuditEvent] = []
        days_read = 0
        budget = _page_budget()
        while True:
            events.extend(self._read_day(window, day, positions, limit - len(events), budget))
            day_done = all(position == _EXHAUSTED for position in positions.values())
            if day_done and day <= window.first_day:
                return AuditPage(events=events, next_cursor=None)
            if day_done:
                day, positions = day - timedelta(days=1), dict.fromkeys(_SHARD_KEYS, _NOT_STARTED)
                days_read += 1
            if len(events) >= limit or days_read >= MAX_DAYS_PER_PAGE or budget.full:
                state = {_DAY_KEY: day.isoformat(), _FROM_KEY: window.start, _TO_KEY: window.end, **positions}
                return AuditPage(events=events, next_cursor=encode_cursor(fingerprint, state))

    def _read_day(
        self, window: AuditWindow, day: date, positions: dict[str, str], need: int, budget: PageBudget
    ) -> list[AuditEvent]:
        """Up to ``need`` of the day's newest events not read yet, across its
        partitions, while ``budget`` admits them; ``positions`` moves past what
        was taken (an event the budget refuses is the next page's first).

        A k-way merge that reads each partition lazily: first a share of
        ``need`` from every partition at once (an event's partition comes from
        a hash of its id, so they fill evenly), then, whenever a partition
        that may hold more has nothing left to offer, a share of what the page
        still needs from it. A page reads about ``need`` items and at most about
        twice as many, never ``need`` from each of the partitions."""
        parts = [
            _DayPartition(int(shard), position, from_cursor=position != _NOT_STARTED)
            for shard, position in positions.items()
            if position != _EXHAUSTED
        ]
        if need <= 0 or not parts:
            return []
        share = -(-need // len(parts))
        with ThreadPoolExecutor(max_workers=len(parts)) as pool:
            list(pool.map(lambda part: self._read_partition(window, day, part, share), parts))
        taken: list[AuditEvent] = []
        while len(taken) < need:
            # Before choosing the newest head, every partition that may hold more must show its next one.
            for part in parts:
                if not part.buffer and part.more:
                    open_parts = sum(1 for other in parts if other.buffer or other.more)
                    self._read_partition(window, day, part, -(-(need - len(taken)) // open_parts))
            heads = [part for part in parts if part.buffer]
            if not heads:
                break
            newest = max(heads, key=lambda part: str(part.buffer[0]["sk"]))
            event = event_from_item(newest.buffer[0])
            if not budget.admit(event):
                break
            item = newest.buffer.popleft()
            taken.append(event)
            positions[str(newest.shard)] = item["sk"]
        for part in parts:
            if not part.buffer and not part.more:
                positions[str(part.shard)] = _EXHAUSTED
        return taken

    def _read_partition(self, window: AuditWindow, day: date, part: _DayPartition, want: int) -> None:
        """The next ``want`` events of ``part`` (newest first) into its buffer."""
        pk = {"S": keys.audit_day_pk(self.tenant_id, day.isoformat(), part.shard)}
        query: dict[str, Any] = {
            "TableName": self.table.table_name,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :start AND :end",
            "ExpressionAttributeValues": {
                ":pk": pk,
                ":start": {"S": window.start},
                ":end": {"S": window.end},  # a sort key at `end` is `end#…`, after it: excluded
            },
            "ScanIndexForward": False,
        }
        if part.start != _NOT_STARTED:
            query["ExclusiveStartKey"] = {"pk": pk, "sk": {"S": part.start}}
        items, part.more = self.table.query_up_to(query, want, from_cursor=part.from_cursor)
        part.from_cursor = False
        if items:
            part.start = str(items[-1]["sk"])
            part.buffer.extend(items)

    def _decode(self, cursor: str, fingerprint: str) -> tuple[AuditWindow, date, dict[str, str]]:
        checked: dict[str, Any] = {}

        def check(state: dict[str, str] | Any) -> bool:
            try:
                window = AuditWindow.of(parse_instant(state[_FROM_KEY], "from"), parse_instant(state[_TO_KEY], "to"))
                day = date.fromisoformat(state[_DAY_KEY])
            except (ValidationFailed, ValueError, OverflowError):
                return False
            if (window.start, window.end) != (state[_FROM_KEY], state[_TO_KEY]):
                return False
            if not window.first_day <= day <= window.last_day:
                return False
            for shard in _SHARD_KEYS:
                position = state[shard]
                if position in (_NOT_STARTED, _EXHAUSTED):
                    continue
                if not (keys.is_audit_sk(position) and window.holds(position) and position[:10] == day.isoformat()):
                    return False
            checked.update(window=window, day=day)
            return True

        state = decode_cursor(cursor, fingerprint, TRAIL_CURSOR_ATTRIBUTES, check)
        if "window" not in checked:  # pragma: no cover - decode_cursor only returns what check accepted
            raise InvalidCursor()
        return checked["window"], checked["day"], {shard: state[shard] for shard in _SHARD_KEYS}
