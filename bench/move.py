"""Moving a tenant between the pool and its own table (``python -m bench
--move-only``): how fast the mover copies, and how long the tenant's writes
pause, for tenants of 1,000 and 10,000 tickets.

Each tenant is filled as the operator fills the bench's table
(:func:`bench.fill.ticket_items`, BatchWriteItem) with a comment per ticket,
and the local stack's stream functions are waited for (its counts, two audit
items per change and its day index); then :class:`ops.move.Mover` moves it into
its own table (made by the local stack, ``POST /_local/dedicated``), with its
defaults (1,000 items a second at most, 8 workers) but two waits shortened,
since no client runs: the record cache's (35 s in production, 2 s here) and the
drain (60 s, 5 s here). Neither is in any figure. With ``writers`` (the
default: one, :mod:`bench.move_writers`), clients write to the tenant through
the local stack's API during the whole move, and every write they were told
was made is looked for in its new table afterwards.

Figures: the copy's throughput (items written over its seconds, the rate
limit's waits included), the write pause (from the SWITCHING write to the
ERASING write: the sync of what the writers marked during the copy and of
the partitions that are neither a ticket's nor a day's, the recount, the flip,
then one ``SWITCH_WAIT_SECONDS``) and where its time went (:class:`TimedMover`:
the mover's steps and its DynamoDB calls in the pause), the writers' answers,
the whole move, and the machine's load average before each. The emulator is
one Python process answering every call (moto), where DynamoDB answers the
workers' calls in parallel: the copy and the sync are read-bound, so AWS's
figures scale with the workers, the emulator's do not.
"""

from __future__ import annotations

import io
import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from bench.fill import BATCH, ticket_items
from bench.move_writers import WRITER_RATE, Writers, chunks, local_sender, report, verify
from bench.stackproc import StackProcess
from bench.warm import progress
from local_stack.running_stack import local_admin
from ops.dedicated import deploy_to_local
from ops.move import DEFAULT_RATE, DEFAULT_WORKERS, Mover, Outcome
from ops.tenants import TenantAdmin
from support_tickets.core import keys
from support_tickets.core.ids import new_id
from support_tickets.data.placement import SWITCH_WAIT_SECONDS, MovePhase
from support_tickets.data.table import to_item

SIZES = (1_000, 10_000)
# The wait before the copy with no client writing (the record cache's 35 s in production: in no figure).
# Beside writers the production wait (TenantAdmin's): the functions' cached record and their timeout
# (a write that saw no move must land before the copy reads its ticket; with 2 s, writes were lost).
PHASE_SECONDS = 2.0
DRAIN_SECONDS = 5.0
FILL_DRAIN_TIMEOUT_S = 1800.0
# The writers start this long before the move (their functions' cold starts are not the move's).
WRITERS_WARMUP_S = 20.0
WRITERS_TIER = "premium"  # its rate (200 a second) never throttles the writers: no 429 in their answers
# The mover's steps timed during the pause (TimedMover).
STEPS = ("_sync", "_marked", "_sync_events", "_visit_all", "_recount", "_write", "_wait_until")


@dataclass
class TimedMover(Mover):
    """The mover, its steps and its DynamoDB calls timed (the bench's instrument:
    the same methods, each called through a timer)."""

    spans: list[tuple[str, float, float]] = field(default_factory=list, init=False, repr=False)
    calls: list[tuple[str, float, float]] = field(default_factory=list, init=False, repr=False)
    pause: list[float] = field(default_factory=list, init=False, repr=False)  # [SWITCHING written, ERASING written]
    _span_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            with self._span_lock:
                self.spans.append((name, started, time.monotonic()))

    def _copy(self, *args: Any, **kwargs: Any) -> Any:
        with self._timed("_copy"):
            return super()._copy(*args, **kwargs)

    def copy_wait(self) -> float:
        """The wait inside the copy before it reads anything (every function sees the move),
        which the mover's ``copy_seconds`` includes and the copy's figures do not."""
        copies = [(started, ended) for span, started, ended in self.spans if span == "_copy"]
        return sum(
            ended - started
            for span, started, ended in self.spans
            if span == "_wait_until" and any(begin <= started and ended <= end for begin, end in copies)
        )

    def _sync(self, *args: Any, **kwargs: Any) -> Any:
        with self._timed("_sync"):
            return super()._sync(*args, **kwargs)

    def _marked(self, *args: Any, **kwargs: Any) -> Any:
        with self._timed("_marked"):
            return super()._marked(*args, **kwargs)

    def _sync_events(self, *args: Any, **kwargs: Any) -> Any:
        with self._timed("_sync_events"):
            return super()._sync_events(*args, **kwargs)

    def _visit_all(self, *args: Any, **kwargs: Any) -> Any:
        with self._timed("_visit_all"):
            return super()._visit_all(*args, **kwargs)

    def _recount(self, *args: Any, **kwargs: Any) -> Any:
        with self._timed("_recount"):
            return super()._recount(*args, **kwargs)

    def _wait_until(self, *args: Any, **kwargs: Any) -> Any:
        with self._timed("_wait_until"):
            return super()._wait_until(*args, **kwargs)

    def _write(self, changes: dict[str, Any]) -> Any:
        with self._timed("_write"):
            record = super()._write(changes)
        if changes.get("move_phase") in (MovePhase.SWITCHING, MovePhase.ERASING):
            self.pause.append(time.monotonic())
        return record

    def count_calls(self, client: Any) -> None:
        """Time each DynamoDB call of ``client`` (the mover's) from now on."""

        def before(context: dict[str, Any], **_: Any) -> None:
            context["bench_started"] = time.monotonic()

        def after(model: Any, context: dict[str, Any], **_: Any) -> None:
            started = context.get("bench_started")
            if started is not None:
                with self._span_lock:
                    self.calls.append((str(model.name), float(started), time.monotonic()))

        client.meta.events.register("before-call.dynamodb", before, unique_id="bench-move-before")
        client.meta.events.register("after-call.dynamodb", after, unique_id="bench-move-after")

    @staticmethod
    def stop_counting(client: Any) -> None:
        """The next mover's timers can go on ``client`` (a unique id is registered once)."""
        client.meta.events.unregister("before-call.dynamodb", unique_id="bench-move-before")
        client.meta.events.unregister("after-call.dynamodb", unique_id="bench-move-after")

    def breakdown(self) -> dict[str, Any] | None:
        """Where the pause's seconds went: each step's (summed over threads where they overlap) and
        the DynamoDB calls made in it, by operation (count, total and median seconds)."""
        if len(self.pause) < 2:
            return None
        begin, end = self.pause[0], self.pause[1]
        steps: dict[str, float] = {}
        for name, started, ended in self.spans:
            if started >= begin and ended <= end:
                steps[name] = steps.get(name, 0.0) + ended - started
        durations: dict[str, list[float]] = {}
        for name, started, ended in self.calls:
            if started >= begin and ended <= end:
                durations.setdefault(name, []).append(ended - started)
        return {
            "steps_seconds": {name: round(steps.get(name, 0.0), 2) for name in STEPS},
            "calls": {
                name: {
                    "count": len(values),
                    "seconds": round(sum(values), 2),
                    "median_ms": round(statistics.median(values) * 1000, 1),
                }
                for name, values in sorted(durations.items())
            },
        }


def comment_item(summary: dict[str, Any]) -> dict[str, Any]:
    """A comment on the ticket ``summary`` is (DynamoDB JSON), as the API stores one."""
    created = "2026-11-21T10:05:00.000Z"
    comment_id = new_id()
    return {
        "pk": summary["pk"],
        **to_item(
            {
                "sk": keys.comment_sk(created, comment_id),
                "comment_id": comment_id,
                "author": "filler",
                "body": "Benchmark comment. " * 4,
                "created_at": created,
            }
        ),
    }


def fill_tenant(stack: StackProcess, tenant: str, tickets: int) -> tuple[int, list[str]]:
    """The tenant's tickets and a comment each, the stream functions caught up; items written, ticket ids."""
    dynamodb = stack.operator("dynamodb")
    table = str(stack.state["table_name"])
    summaries = ticket_items(tickets, [tenant], seed=tickets)
    items = [item for summary in summaries for item in (summary, comment_item(summary))]
    for start in range(0, len(items), BATCH):
        requests: dict[str, Any] = {table: [{"PutRequest": {"Item": item}} for item in items[start : start + BATCH]]}
        while requests:
            requests = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}
    stack.drain(timeout=FILL_DRAIN_TIMEOUT_S)
    return len(items), [str(summary["ticket_id"]["S"]) for summary in summaries]


def stored_tickets(stack: StackProcess, table: str, tenant: str, ticket_ids: set[str]) -> dict[str, tuple[str, int]]:
    """Title and version of each of these tickets in ``table`` (read consistently, as the operator)."""
    dynamodb = stack.operator("dynamodb")
    stored: dict[str, tuple[str, int]] = {}
    for ids in chunks(sorted(ticket_ids), 100):
        request: dict[str, Any] = {
            table: {
                "Keys": [
                    {"pk": {"S": keys.ticket_pk(tenant, ticket_id)}, "sk": {"S": keys.SUMMARY_SK}} for ticket_id in ids
                ],
                "ConsistentRead": True,
            }
        }
        while request:
            response = dynamodb.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(table, []):
                stored[item["ticket_id"]["S"]] = (item["title"]["S"], int(item["version"]["N"]))
            request = response.get("UnprocessedKeys") or {}
    return stored


def run_move(
    stack: StackProcess, *, sizes: tuple[int, ...] = SIZES, writers: tuple[int, ...] = (1,), tenant_prefix: str
) -> dict[str, Any]:
    """One move into its own table per size and number of writers; the figures of each."""
    rows = []
    api_keys = local_admin(stack.state).keys
    for tickets in sizes:
        for writer_count in writers:
            tenant = f"{tenant_prefix}-{tickets}-w{writer_count}"
            rows.append(_one_move(stack, api_keys, tenant, tickets=tickets, writer_count=writer_count))
    return {
        "rows": rows,
        "rate": DEFAULT_RATE,
        "workers": DEFAULT_WORKERS,
        "phase_seconds": PHASE_SECONDS,
        "phase_seconds_with_writers": TenantAdmin.phase_seconds,
        "drain_seconds": DRAIN_SECONDS,
        "writer_rate": WRITER_RATE,
    }


def _one_move(stack: StackProcess, api_keys: Any, tenant: str, *, tickets: int, writer_count: int) -> dict[str, Any]:
    table = str(stack.state["table_name"])
    admin = TenantAdmin(stack.operator("dynamodb"), table, keys=api_keys)
    if not writer_count:
        admin.phase_seconds = PHASE_SECONDS
    admin.ensure(tenant)
    admin.set_tier(tenant, WRITERS_TIER)
    progress(f"move: filling {tenant} with {tickets:,} tickets and a comment each")
    written, ticket_ids = fill_tenant(stack, tenant, tickets)
    log = io.StringIO()
    mover = TimedMover(
        admin,
        deploy=lambda tenant_id: deploy_to_local(stack.state, tenant_id)["TableName"],
        drain_seconds=DRAIN_SECONDS,
        stream=log,
    )
    mover.count_calls(admin.client)
    send = local_sender(str(stack.state["api_url"]), stack.token(tenant, f"writer-{tenant}"))
    clients = Writers(send, ticket_ids, writers=writer_count)
    writing = start_writers(clients)
    load = os.getloadavg()[0]
    progress(f"move: {tenant} into its own table, {writer_count} writer(s) (load average {load:.1f})")
    started = time.monotonic()
    try:
        outcome = mover.move(tenant, "dedicated")
    finally:
        clients.stop()
        mover.stop_counting(admin.client)
    seconds = time.monotonic() - started
    assert outcome.record.placement == "dedicated", log.getvalue()
    row = outcome_row(outcome, mover, tickets=tickets, written=written, seconds=seconds, load=load)
    row["writers"] = writer_count
    if writer_count:
        written_tickets = {write.ticket_id for write in clients.writes if write.acknowledged and write.ticket_id}
        new_table = str(outcome.record.table)
        lost = verify(clients.writes, stored_tickets(stack, new_table, tenant, written_tickets))
        row["writes"] = report(clients.writes, lost, seconds=time.monotonic() - writing)
        if lost:
            progress(f"move: BUG: {len(lost)} acknowledged write(s) LOST in {new_table}: {lost[:5]}")
    progress(f"move: {row}")
    return row


def start_writers(clients: Writers) -> float:
    """The writers started, and once they write (their functions warm), when they started."""
    clients.start()
    writing = time.monotonic()
    if clients.writers:
        while clients.acknowledged() < 5 and time.monotonic() - writing < WRITERS_WARMUP_S:
            time.sleep(0.5)
    return writing


def outcome_row(
    outcome: Outcome, mover: TimedMover, *, tickets: int, written: int, seconds: float, load: float
) -> dict[str, Any]:
    """The figures of one move (``seconds``: the whole move; ``load``: the load average before it)."""
    assert outcome.copy_seconds is not None
    assert outcome.pause_seconds is not None
    copying = max(outcome.copy_seconds - mover.copy_wait(), 1e-9)  # the wait before it is in no figure
    return {
        "tickets": tickets,
        "items_filled": written,
        "items_copied": outcome.copied,
        "copy_seconds": round(copying, 1),
        "copy_items_per_second": round(outcome.copied / copying),
        "copy_wait_seconds": round(mover.copy_wait(), 1),
        "synced_again": outcome.synced,
        "sync_tickets": outcome.sync_tickets,
        "sync_events": outcome.sync_events,
        "pause_seconds": round(outcome.pause_seconds, 1),
        "sync_seconds": round(outcome.pause_seconds - SWITCH_WAIT_SECONDS, 1),
        "pause_breakdown": mover.breakdown(),
        "trailing": outcome.trailing,
        "erased": outcome.erased,
        "strays": outcome.strays,
        "verified": outcome.verified,
        "move_seconds": round(seconds, 1),
        "load_average": round(load, 1),
        "load_average_after": round(os.getloadavg()[0], 1),
    }


def move_markdown(move: dict[str, Any]) -> list[str]:
    """The section of results.md."""
    rate = move.get("writer_rate", WRITER_RATE)
    lines = [
        "## Moving a tenant into its own table",
        "",
        "| tickets | writers | items copied | copy (s) | copy (items/s) | write pause (s) | of which sync (s) "
        "| whole move (s) | load average |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in move["rows"]:
        lines.append(f"| {row['tickets']:,} | {row.get('writers', 0)} | {move_figures(row)} | {row['load_average']} |")
    lines += writes_table(move["rows"]) + pause_table(move["rows"])
    lines += [
        "",
        f"How: `python -m bench --move-only` moves a tenant of N tickets (a comment each) with `ops.move` at its "
        f"defaults ({move['rate']:,.0f} items/s, {move['workers']} workers; the waits before the copy, "
        f"{move['phase_seconds']:.0f} s alone or {move.get('phase_seconds_with_writers', 65):.0f} s beside writers, "
        f"and the drain are in no figure). Each writer sends {rate:g} writes/s through the local API, resending each "
        "503; afterwards the new table must hold every acknowledged write. The pause is the sync, the recount, the "
        f"flip and one {SWITCH_WAIT_SECONDS:g} s wait."
        # Rows measured before the copy's figures left that wait out: stale until measured again.
        + (
            " Copy (s) here includes it: stale until the next `--move-only` run."
            if any("copy_wait_seconds" not in row for row in move["rows"])
            else ""
        ),
    ]
    checked = [row for row in move["rows"] if "verified" in row]
    if checked:
        lines += [
            "",
            (
                "What the mover's final check found after each move (the erase also takes the counts and the "
                "aggregator's journals, recounted in the new table, not copied):"
            ),
            "",
        ]
        lines += [
            f"- {row['tickets']:,} tickets{_writers_label(row)}: {row['trailing']:,} items copied by the trailing "
            "copy after the switch, "
            f"{row['erased']:,} erased from the pool ({row['strays']:,} of them found only by the final Scan); "
            f"{row['verified']}."
            for row in checked
        ]
    measured = {row["tickets"] for row in move["rows"]}
    missing = [f"{size:,}" for size in SIZES if size not in measured]
    if missing:
        lines += [
            "",
            f"Not measured in this run (`--move-tickets`): {', '.join(missing)} tickets. The copy and the "
            "erase each read one partition per ticket, so their times grow with the tickets from the rows above.",
        ]
    lines.append("")
    return lines


def move_figures(row: dict[str, Any]) -> str:
    """A row's items copied, copy (s and items/s), write pause, its sync and whole move: table cells."""
    return (
        f"{row['items_copied']:,} | {row['copy_seconds']} | {row['copy_items_per_second']:,} | "
        f"{row['pause_seconds']} | {row['sync_seconds']} | {row['move_seconds']}"
    )


def writes_table(rows: list[dict[str, Any]]) -> list[str]:
    """The writers' answers of each row that had writers (none: no lines)."""
    lines: list[str] = []
    written = [row for row in rows if row.get("writes")]
    if written:
        lines += [
            "",
            "| tickets | writers | writes (/s) | acknowledged | 503 TENANT_MOVING answers | other answers "
            "| longest wait, first 503 to success (s) | acknowledged writes lost |",
            "|---:|---:|---:|---:|---:|---|---:|---:|",
        ]
        for row in written:
            writes = row["writes"]
            others = ", ".join(f"{label}: {count}" for label, count in writes["other_answers"].items()) or "none"
            lost = writes["lost"] if not writes["lost"] else f"**{writes['lost']} (a bug)**"
            lines.append(
                f"| {row['tickets']:,} | {row['writers']} | {writes['writes']:,} ({writes['writes_per_second']}) | "
                f"{writes['acknowledged']:,} | {writes['moving_answers']:,} | {others} | "
                f"{writes['longest_wait_seconds']} | {lost} |"
            )
    return lines


PAUSE_TABLE_INTRO: Final = (
    "Where the pause went (seconds; a step's time summed over the threads that ran it; the mover's DynamoDB calls in "
    "the pause, their number and median):"
)


def pause_table(rows: list[dict[str, Any]], intro: str = PAUSE_TABLE_INTRO) -> list[str]:
    """Where each timed row's write pause went (none timed: no lines)."""
    lines: list[str] = []
    timed = [row for row in rows if row.get("pause_breakdown")]
    if timed:
        lines += [
            "",
            intro,
            "",
            "| tickets | writers | tickets synced | events synced | sync | marks read | events read | partitions "
            "visited | recount | record writes | waits | DynamoDB calls (median ms) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for row in timed:
            steps = row["pause_breakdown"]["steps_seconds"]
            calls = row["pause_breakdown"]["calls"]
            total = sum(call["count"] for call in calls.values())
            slowest = sorted(calls.items(), key=lambda pair: -pair[1]["seconds"])[:3]
            named = ", ".join(f"{name} {call['count']} ({call['median_ms']})" for name, call in slowest)
            named = f"{total}: {named}" if calls else "not recorded"
            lines.append(
                f"| {row['tickets']:,} | {row.get('writers', 0)} | {row.get('sync_tickets', '')} | "
                f"{row.get('sync_events', '')} | {steps['_sync']} | {steps['_marked']} | {steps['_sync_events']} | "
                f"{steps['_visit_all']} | {steps['_recount']} | {steps['_write']} | {steps['_wait_until']} | "
                f"{named} |"
            )
    return lines


def _writers_label(row: dict[str, Any]) -> str:
    writers = row.get("writers")
    return "" if writers is None else f", {writers} writer{'' if writers == 1 else 's'}"
