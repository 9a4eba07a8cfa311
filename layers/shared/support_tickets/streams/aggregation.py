"""Exactly-once ticket counts per (tenant, status), from the table's stream.

Its bookkeeping's size never grows with a tenant's change rate.

The stream function turns each ticket-summary record into count changes
(INSERT +1 to the new status, REMOVE -1 from the old one, MODIFY -1/+1 when
the status moved) and :class:`CountLedger` applies a delivery (one Lambda
invocation's records) as a few atomic transactions.

Why a plain ``ADD`` is not enough: Lambda delivers stream records at least
once. It redelivers from a shard's checkpoint: the same batch again (after a
function error, or when a checkpoint was lost), possibly with newer records
appended; a suffix starting at the lowest record reported in
``batchItemFailures``; the halves of a batch after a function error
(``BisectBatchOnFunctionError``), also when the error (a timeout) came after
our writes committed. Batches of several shards update the same counts
concurrently, and Lambda's DynamoDB events carry no shard id.

The scheme: a **delivery journal**. A checkpoint is always a record at which
an earlier delivery began, or the first record we reported as failed. So:

1. Records are applied in order, in *chunks* (a prefix of the remaining
   records touching at most 99 count items, at most 250 records). Each chunk is one
   ``TransactWriteItems``: one ``ADD`` per (tenant, status) it touches, plus a
   journal item created for it (``attribute_not_exists``), keyed by the
   chunk's first record and listing the ids of all its records in order. All
   of it lands or none of it does.
2. A delivery starting at a record that has a journal is a redelivery: the
   ledger walks the journals (each one ends where the next chunk began) and
   skips every record they list, then applies what follows as new chunks.
3. A delivery that ends inside a journaled range (the first half of a
   bisected batch) carries the rest forward: it writes the journal of its
   next record (the next delivery's first), listing the rest of the range.
4. A chunk that fails is reported from its first record on, and nothing from
   there on was applied: the retry starts at a record with no journal.

What any item holds is bounded, whatever the change rate and the batch size:
a journal lists at most :data:`MAX_CHUNK_RECORDS` records (250: under 25 KB),
a count item holds a count and a revision. Journals expire with the ``expiration`` TTL after the replay
horizon (``REPLAY_HORIZON_SECONDS``, longer than the event source's
``MaximumRecordAgeInSeconds``, after which nothing is redelivered).

Usage per tenant (docs/usage.md): every call asks for
``ReturnConsumedCapacity="TOTAL"``, and its units go to the tenants whose
records caused it (:func:`support_tickets.usage.lines.add_shared`). DynamoDB
reports a transaction's units per table, not per item, so a chunk's are
apportioned by its items: each count item (all alike: a count and a revision)
is its tenant's, the journal (which lists every record of the chunk) is
shared by records per tenant. A journal's read and a carried-forward journal
are shared by records per tenant of the records they are about, except that
the records a redelivery finds applied (the journaled prefix of a delivery,
:attr:`ApplyResult.skipped`) are charged to the tenant of the first record
after them, the one the redelivery is for (``support_tickets.usage.lines``,
"Retries are charged to the record that caused them"); with no such record
they stay their own. The reads are charged once :meth:`CountLedger.apply`
knows which records were applied.

Costs: one write per (tenant, status) per chunk (a batch is one chunk unless
it touches more than 99 pairs) plus one journal item per chunk, all
transactional (twice the WCU of standard writes). A count change that nets to
zero within a chunk writes nothing.

Poison records (not a ticket summary of its own tenant, e.g. a summary whose
``tenant_status`` names another tenant than its key) are never counted: they
are logged, counted in a metric and sent to the failure queue by the
function itself, and then treated as processed, so one bad record can't stall
a shard. Records whose key holds no valid tenant id can't be journaled (every
key of the table starts with a tenant); they are only ever poison.

Tables (docs/architecture.md, "Where a tenant's data lives"): a batch holds the
records of one stream, the pool table's or a dedicated tenant's, and its
counts and journals are written into that table (:func:`batch_table`). A
record that is not one of its tenant's changes (a move's copy or erase,
:mod:`support_tickets.streams.routing`) is *skipped*: journaled like the
others, so that every redelivery finds it, with no count change; the mover
recounts the counts of the table it moves a tenant to.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from support_tickets.data.tenant_registry import tenant_configs
from support_tickets.streams.records import PoisonRecord, own_client, record_fields, report_poison
from support_tickets.streams.routing import DEDICATED_INFIX, SKIPPED_METRIC, StreamRouter, source_table
from support_tickets.usage.lines import add_shared, payer_of

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.utilities.batch import BatchProcessor
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
    from mypy_boto3_dynamodb import DynamoDBClient

    from support_tickets.usage.lines import StreamInvocation

DEFAULT_REPLAY_HORIZON_SECONDS: Final = 4500
MAX_TRANSACTION_ITEMS: Final = 100
# Records a journal lists at most (<eventID> <tenant>: under 100 bytes each), so a
# journal stays under 25 KB whatever the size of the batch Lambda delivers.
MAX_CHUNK_RECORDS: Final = 250
# Conflicts with another shard's transaction on the same count item: retried here
# (nothing was applied), then reported so that Lambda retries the records.
TRANSACTION_ATTEMPTS: Final = 4


class JournalMismatch(RuntimeError):
    """A journal disagrees with the records delivered: never guess, never count."""


@dataclass(frozen=True, slots=True)
class CountChange:
    tenant_id: str
    status: TicketStatus
    delta: int


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """What the ledger needs of one stream record."""

    event_id: str
    sequence_number: str
    tenant_id: str | None  # from the record's key; None if it holds no valid tenant
    changes: tuple[CountChange, ...] = ()
    poison: str | None = None
    # Not one of its tenant's changes (a move's copy or erase: support_tickets.streams.routing):
    # journaled like any record, counted nowhere.
    skipped: bool = False

    @property
    def entry(self) -> str:
        return f"{self.event_id} {self.tenant_id or ''}"


def _status_of(image: Mapping[str, Any] | None, tenant_id: str) -> TicketStatus | None:
    if not image:
        return None
    value = image.get("tenant_status")
    if not isinstance(value, str) or not value.startswith(keys.tenant_prefix(tenant_id)):
        raise PoisonRecord("ticket summary whose tenant_status is not of its own tenant")
    try:
        return keys.status_from_tenant_status(value)
    except ValueError as exc:
        raise PoisonRecord(f"unknown status in {value[:100]!r}") from exc


def ledger_record(
    *,
    event_name: str,
    sequence_number: str,
    event_id: str,
    keys_image: Mapping[str, Any],
    old_image: Mapping[str, Any] | None,
    new_image: Mapping[str, Any] | None,
) -> LedgerRecord:
    """One ticket-summary stream record as count changes, or as poison."""
    pk, sk = keys_image.get("pk"), keys_image.get("sk")
    tenant_id: str | None = None
    try:
        if not isinstance(pk, str) or sk != keys.SUMMARY_SK:
            raise PoisonRecord("not a ticket summary")
        try:
            tenant_id = keys.tenant_of_key(pk)
        except ValueError as exc:
            raise PoisonRecord("a key without a valid tenant") from exc
        if event_name not in {"INSERT", "MODIFY", "REMOVE"}:
            raise PoisonRecord(f"unknown event {event_name[:20]!r}")
        old_status = _status_of(old_image, tenant_id) if event_name in {"MODIFY", "REMOVE"} else None
        new_status = _status_of(new_image, tenant_id) if event_name in {"INSERT", "MODIFY"} else None
        if (event_name != "INSERT" and old_status is None) or (event_name != "REMOVE" and new_status is None):
            raise PoisonRecord("the stream must carry NEW_AND_OLD_IMAGES")
    except PoisonRecord as exc:
        return LedgerRecord(event_id, sequence_number, tenant_id, poison=str(exc))
    changes: list[CountChange] = []
    if old_status != new_status:
        if old_status is not None:
            changes.append(CountChange(tenant_id, old_status, -1))
        if new_status is not None:
            changes.append(CountChange(tenant_id, new_status, +1))
    return LedgerRecord(event_id, sequence_number, tenant_id, tuple(changes))


def records_per_tenant(records: Sequence[LedgerRecord]) -> Counter[str]:
    """How many of ``records`` each tenant has (a record without a tenant is nobody's)."""
    return Counter(record.tenant_id for record in records if record.tenant_id is not None)


def chunk_weights(chunk: Sequence[LedgerRecord], count_items: Sequence[str]) -> dict[str, int]:
    """Each tenant's weight in a chunk's transaction: its count items (one each,
    ``count_items`` lists their tenants) and its records' share of the one
    journal item, in integers (everything times the chunk's tenant records)."""
    records = records_per_tenant(chunk)
    whole = sum(records.values())
    items = Counter(count_items)
    return {tenant: items[tenant] * whole + records[tenant] for tenant in set(records) | set(items)}


def ledger_record_from_stream(record: DynamoDBRecord) -> LedgerRecord:
    """:func:`ledger_record` for a record as Lambda delivers it (Powertools' data class)."""
    return ledger_record(**record_fields(record))


def batch_table(records: Sequence[Mapping[str, Any]], pool_table: str) -> str:
    """The table a batch's counts and journal go to: the one its stream is of (an
    invocation holds one event source mapping's records), read from the first record
    naming the pool table or a dedicated one; the pool table if none does (a batch of
    poison, journaled there)."""
    for record in records:
        try:
            table = source_table(record.get("eventSourceARN"))
        except PoisonRecord:
            continue
        if table == pool_table or table.startswith(pool_table + DEDICATED_INFIX):
            return table
    return pool_table


def routed(ledger: LedgerRecord, record: DynamoDBRecord, router: StreamRouter, table: str) -> LedgerRecord:
    """``ledger`` as its batch's ledger (in ``table``) takes it: poison when it is of no
    table of its tenant's or not of the batch's stream (and then nobody's: nothing is
    journaled under its tenant in a table that is not the tenant's), skipped (no count
    change, still journaled) when it is not one of its tenant's changes
    (support_tickets.streams.routing)."""
    if ledger.poison is not None or ledger.tenant_id is None:
        return ledger
    stream = record.dynamodb
    created = stream.get("ApproximateCreationDateTime") if stream is not None else None
    try:
        route = router.route(ledger.tenant_id, record.event_source_arn, created)
        if route.source != table:
            raise PoisonRecord("a record of another stream than its batch's")
    except PoisonRecord as exc:
        return replace(ledger, tenant_id=None, changes=(), poison=str(exc))
    return ledger if route.owned else replace(ledger, changes=(), skipped=True)


@dataclass
class Journal:
    start: int  # index in the delivery of the journal's first record
    entries: list[str]


@dataclass
class ApplyResult:
    """``applied``: how many leading records of the delivery are done (applied
    now or before); the rest must be reported as failures."""

    applied: int
    transactions: int = 0
    count_writes: int = 0
    journal_writes: int = 0
    journal_reads: int = 0
    skipped: int = 0
    poison: int = 0


PoisonHandler = Callable[[LedgerRecord], None]


@dataclass
class CountLedger:
    """Applies one delivery's records exactly once (see the module docstring)."""

    table_name: str
    client: DynamoDBClient
    on_poison: PoisonHandler
    replay_horizon_seconds: int = DEFAULT_REPLAY_HORIZON_SECONDS
    clock: Callable[[], float] = time.time
    max_transaction_items: int = MAX_TRANSACTION_ITEMS
    max_chunk_records: int = MAX_CHUNK_RECORDS
    sleep: Callable[[float], None] = time.sleep
    _result: ApplyResult = field(default_factory=lambda: ApplyResult(0))
    # (position, answer) of each journal read of the delivery, charged when it ends.
    _journal_reads: list[tuple[int, Any]] = field(default_factory=list)

    def apply(self, records: Sequence[LedgerRecord]) -> ApplyResult:
        self._result = ApplyResult(0)
        self._journal_reads = []
        try:
            return self._apply(records)
        finally:
            self._charge_journal_reads(records)

    def _charge_journal_reads(self, records: Sequence[LedgerRecord]) -> None:
        """Each journal read shared by the records it was about, those found applied
        (the leading ``skipped``) charged to the first tenant record after them."""
        skipped = range(self._result.skipped)
        payer = payer_of([record.tenant_id for record in records], skipped)
        for start, answer in self._journal_reads:
            weights: Counter[str] = Counter()
            for index in range(start, len(records)):
                tenant = payer if payer is not None and index in skipped else records[index].tenant_id
                if tenant is not None:
                    weights[tenant] += 1
            add_shared("get_item", answer, weights)
        self._journal_reads = []

    def _apply(self, records: Sequence[LedgerRecord]) -> ApplyResult:
        result = self._result
        position = 0
        # Poison is queued before its chunk's transaction; with poison about, ask
        # first whether the delivery is a redelivery, so it is queued only once.
        optimistic = not any(record.poison for record in records)
        while position < len(records):
            journal = self._read_journal(records, position, optimistic=optimistic)
            if journal is None:
                applied = self._apply_new(records, position)
                if applied is None:  # its first chunk found a journal: a redelivery after all
                    journal = self._read_journal(records, position, optimistic=False)
                    if journal is None:
                        raise JournalMismatch("a journal was reported and then not found")
                else:
                    result.applied = applied
                    return result
            position = self._skip(records, journal)
        result.applied = len(records)
        return result

    # ------------------------------------------------------------ journals
    def _journal_key(self, records: Sequence[LedgerRecord], start: int) -> dict[str, Any] | None:
        tenant = next((record.tenant_id for record in records[start:] if record.tenant_id), None)
        return None if tenant is None else keys.aggregate_journal_key(tenant, records[start].event_id)

    def _read_journal(self, records: Sequence[LedgerRecord], start: int, *, optimistic: bool = True) -> Journal | None:
        if start == 0 and optimistic:
            return None  # the first chunk's transaction finds out: no read when the delivery is new
        key = self._journal_key(records, start)
        if key is None:
            return None
        self._result.journal_reads += 1
        answer = self.client.get_item(
            TableName=self.table_name, Key=key, ConsistentRead=True, ReturnConsumedCapacity="TOTAL"
        )
        self._journal_reads.append((start, answer))
        item = answer.get("Item")
        if item is None:
            return None
        return Journal(start, [str(value["S"]) for value in item["records"]["L"]])

    def _skip(self, records: Sequence[LedgerRecord], journal: Journal) -> int:
        """Skip the records ``journal`` lists; carry the rest forward if the delivery ends inside it."""
        listed = journal.entries
        delivered = [record.entry for record in records[journal.start : journal.start + len(listed)]]
        if listed[: len(delivered)] != delivered:
            raise JournalMismatch("the journal does not list the records delivered from its first one")
        self._result.skipped += len(delivered)
        end = journal.start + len(delivered)
        if len(listed) > len(delivered):
            self._carry_forward(listed[len(delivered) :])
        return end

    def _carry_forward(self, rest: list[str]) -> None:
        """The next delivery starts with ``rest`` (they were applied): journal them at its first record."""
        pending = [_from_entry(entry) for entry in rest]
        key = self._journal_key(pending, 0)
        if key is None:
            return  # only records without a tenant: poison, nothing was counted
        self._result.journal_writes += 1
        weights = records_per_tenant(pending)
        try:
            answer = self.client.put_item(
                TableName=self.table_name,
                Item=self._journal_item(key, rest),
                ConditionExpression="attribute_not_exists(pk)",
                ReturnConsumedCapacity="TOTAL",
            )
            add_shared("put_item", answer, weights)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            # Written by an earlier attempt of this same delivery: it must say the same.
            found = self.client.get_item(
                TableName=self.table_name, Key=key, ConsistentRead=True, ReturnConsumedCapacity="TOTAL"
            )
            add_shared("get_item", found, weights)
            item = found["Item"]
            stored = [str(value["S"]) for value in item["records"]["L"]]
            if stored[: len(rest)] != rest[: len(stored)]:
                raise JournalMismatch("a carried-forward journal disagrees") from exc

    def _journal_item(self, key: dict[str, Any], entries: list[str]) -> dict[str, Any]:
        return {
            **key,
            "records": {"L": [{"S": entry} for entry in entries]},
            "expiration": {"N": str(int(self.clock()) + self.replay_horizon_seconds)},
        }

    # ------------------------------------------------------------ new records
    def _chunks(self, records: Sequence[LedgerRecord], start: int) -> list[tuple[int, int]]:
        """``[start, end)`` ranges of at most ``max_transaction_items - 1`` count
        items and ``max_chunk_records`` records each."""
        chunks: list[tuple[int, int]] = []
        begin, pairs = start, set[tuple[str, TicketStatus]]()
        for index in range(start, len(records)):
            touched = {(change.tenant_id, change.status) for change in records[index].changes}
            full = index - begin >= self.max_chunk_records
            if (full or len(pairs | touched) > self.max_transaction_items - 1) and index > begin:
                chunks.append((begin, index))
                begin, pairs = index, set()
            pairs |= touched
        chunks.append((begin, len(records)))
        return chunks

    def _apply_new(self, records: Sequence[LedgerRecord], start: int) -> int | None:
        """Apply ``records[start:]`` as new; how many leading records are done,
        or ``None`` when the first chunk finds a journal already at ``start``."""
        for begin, end in self._chunks(records, start):
            chunk = records[begin:end]
            for record in chunk:
                if record.poison is not None:
                    self._result.poison += 1
                    try:
                        self.on_poison(record)
                    except (ClientError, BotoCoreError):
                        return begin
            key = self._journal_key(records, begin)
            if key is None:
                continue  # nothing countable and nothing to journal under
            outcome = self._transact(key, chunk)
            if outcome == "journaled" and begin == start:
                return None
            if outcome != "applied":
                return begin
        return len(records)

    def _transact(self, journal_key: dict[str, Any], chunk: Sequence[LedgerRecord]) -> str:
        """One chunk, all or nothing: ``applied``, ``journaled`` (its journal
        exists: applied before) or ``failed`` (nothing applied)."""
        deltas: defaultdict[tuple[str, TicketStatus], int] = defaultdict(int)
        for record in chunk:
            for change in record.changes:
                deltas[(change.tenant_id, change.status)] += change.delta
        slot = keys.aggregate_slot(chunk[0].event_id)
        changed = sorted((pair, delta) for pair, delta in deltas.items() if delta != 0)
        updates = [
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": {"pk": {"S": keys.aggregate_pk(tenant)}, "sk": {"S": keys.aggregate_sk(status, slot)}},
                    "UpdateExpression": "ADD #count :delta, #rev :one",
                    "ExpressionAttributeNames": {"#count": "count", "#rev": "rev"},
                    "ExpressionAttributeValues": {":delta": {"N": str(delta)}, ":one": {"N": "1"}},
                }
            }
            for (tenant, status), delta in changed
        ]
        weights = chunk_weights(chunk, [tenant for (tenant, _), _ in changed])
        journal = {
            "Put": {
                "TableName": self.table_name,
                "Item": self._journal_item(journal_key, [record.entry for record in chunk]),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        for attempt in range(TRANSACTION_ATTEMPTS):
            try:
                answer = self.client.transact_write_items(
                    TransactItems=[journal, *updates],  # type: ignore[list-item]
                    ReturnConsumedCapacity="TOTAL",
                )
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                if code != "TransactionCanceledException":
                    return "failed"
                reasons = [reason.get("Code") for reason in exc.response.get("CancellationReasons", [])]
                if reasons and reasons[0] == "ConditionalCheckFailed":
                    return "journaled"
                if attempt + 1 < TRANSACTION_ATTEMPTS:
                    self.sleep(random.uniform(0, 0.05 * 2**attempt))  # noqa: S311 - jitter, not crypto
                continue
            except BotoCoreError:
                return "failed"
            add_shared("transact_write_items", answer, weights)
            self._result.transactions += 1
            self._result.count_writes += len(updates)
            self._result.journal_writes += 1
            return "applied"
        return "failed"


def _from_entry(entry: str) -> LedgerRecord:
    event_id, _, tenant_id = entry.partition(" ")
    return LedgerRecord(event_id=event_id, sequence_number="", tenant_id=tenant_id or None)


@cache
def aggregator_client() -> DynamoDBClient:
    """The aggregator's own client (its execution role: aggregate items only)."""
    client: DynamoDBClient = own_client("dynamodb")
    return client


def aggregate(
    records: list[dict[str, Any]],
    *,
    processor: BatchProcessor,
    logger: Logger,
    metrics: Metrics,
    invocation: StreamInvocation | None = None,
) -> dict[str, Any]:
    """The aggregator function's work on one batch (the handler gives it its Powertools
    objects): each record read into count changes by Powertools' ``processor`` and
    routed (:func:`routed`), the readable prefix applied by the :class:`CountLedger`
    of the batch's table, exactly once; the records from the first one not applied on
    reported as batch item failures, so that Lambda retries from there. A poison
    record is reported (log, metric, the failure queue) and counts as done.
    ``invocation``: the batch's usage lines, told which records an earlier delivery
    applied (their share is the next record's tenant's, the one this redelivery is
    for: :mod:`support_tickets.usage.lines`)."""
    pool_table = os.environ["TABLE_NAME"]
    table = batch_table(records, pool_table)
    router = StreamRouter(pool_table, aggregator_client(), tenant_configs())

    def read_record(record: DynamoDBRecord) -> LedgerRecord:
        return routed(ledger_record_from_stream(record), record, router, table)

    def send_to_failure_queue(record: LedgerRecord) -> None:
        """A record that can never be counted: on record for an operator, then done
        (a shard never stalls on it)."""
        report_poison(
            logger,
            metrics,
            reason=record.poison or "poison",
            event_id=record.event_id,
            sequence_number=record.sequence_number,
            tenant_id=record.tenant_id,
            default_function="AggregateCountsFunction",
        )

    with processor(records=records, handler=read_record):
        outcomes = processor.process()
    readable: list[LedgerRecord] = []
    for outcome in outcomes:
        if outcome[0] != "success":
            break  # the ledger applies a prefix in order: stop at the first unreadable record
        readable.append(outcome[1])
    skipped = sum(record.skipped for record in readable)
    if skipped:
        logger.debug("records of a move skipped", extra={"skipped": skipped, "table": table})
        metrics.add_metric(name=SKIPPED_METRIC, unit=MetricUnit.Count, value=skipped)
    ledger = CountLedger(
        table_name=table,
        client=aggregator_client(),
        on_poison=send_to_failure_queue,
        replay_horizon_seconds=int(os.environ.get("REPLAY_HORIZON_SECONDS", str(DEFAULT_REPLAY_HORIZON_SECONDS))),
    )
    result = ledger.apply(readable)
    if invocation is not None:
        for index in range(result.skipped):
            invocation.found_applied(index)
    failed = [str(record["dynamodb"]["SequenceNumber"]) for record in records[result.applied :]]
    metrics.add_metric(name="AggregateRecords", unit=MetricUnit.Count, value=len(records))
    metrics.add_metric(name="AggregateWrites", unit=MetricUnit.Count, value=result.count_writes)
    if failed:
        logger.warning("batch item failures", extra={"failed": len(failed), "applied": result.applied})
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
