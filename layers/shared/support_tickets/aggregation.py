"""Exactly-once ticket counts per (tenant, status), from the table's stream.

The stream function hands every ticket-summary record to :class:`CountLedger`,
which turns it into count changes (INSERT +1 to the new status, REMOVE -1 from
the old one, MODIFY -1/+1 when the status moved) and folds a whole batch into
one write per touched ``TENANT#<t>|AGGREGATE`` / ``<STATUS>`` item.

Why a plain ``ADD`` is not enough: Lambda delivers stream records at least
once. With ReportBatchItemFailures it retries a batch from the lowest failed
record, possibly with newer records appended; with BisectBatchOnFunctionError
it retries halves; and batches of several shards update the same aggregate
item concurrently. The textbook fix, a per-shard sequence-number watermark on
the aggregate item, is not available: Lambda's DynamoDB Streams events carry
no shard id (``eventID`` is an opaque hash), and sequence numbers of different
shards are not comparable.

The scheme, per aggregate item and per batch:

1. Every write also adds the ids of the records it applied to the item's
   string set ``applied`` (``"<creation epoch>#<eventID>"``, unique per record
   and identical on every redelivery) in the same ``UpdateItem``.
2. A batch comes from one shard, in order, and a pair's write applies all of
   its records in the batch or none. So the records of a pair that were
   already applied always form a *prefix* of that pair's records in any
   redelivered batch (by induction over retries). The fast path therefore
   only needs to know whether the pair's *first* record was applied:
   ``ADD count :delta, applied :ids`` with the condition
   ``NOT contains(applied, :first)`` (plus a size cap). One write, no read.
3. If the condition fails (a redelivery, or the set is due for pruning), the
   slow path reads the item consistently, applies only the records not yet
   in ``applied``, drops ids older than the replay horizon (records older than
   the event source's ``MaximumRecordAgeInSeconds`` are never delivered again)
   and writes with an optimistic lock on ``rev``.

Every touched pair is written even when its net delta is 0 (a +1 and a -1 in
the same batch): the record ids must be remembered, or a retry starting
between them would count only one. Writes per batch = distinct (tenant,
status) pairs touched. Counts stay exact under any replay of a batch or a
suffix of it, any number of times, across shards; records the event source
gives up on (after its retries, in the on-failure queue) are what
``ops.reconcile`` repairs.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from support_tickets import keys
from support_tickets.keys import TicketStatus

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
    from mypy_boto3_dynamodb import DynamoDBClient

# Above this many remembered record ids the fast path steps aside and the slow
# path prunes (about 45 bytes an id: ~180 KB, half the 400 KB item limit).
APPLIED_SET_CAP = 4000
SLOW_PATH_ATTEMPTS = 5
DEFAULT_REPLAY_HORIZON_SECONDS = 4500


class PoisonRecord(ValueError):
    """A record that can never be counted (not a valid ticket summary)."""


@dataclass(frozen=True, slots=True, order=True)
class CountChange:
    sequence: int  # position in the shard: records of one batch are ordered by it
    record_id: str  # "<creation epoch>#<eventID>", the same on every redelivery
    tenant_id: str
    status: TicketStatus
    delta: int


def _status_of(image: Mapping[str, Any] | None, tenant_id: str) -> TicketStatus | None:
    if not image:
        return None
    value = image.get("tenant_status")
    if not isinstance(value, str) or not value.startswith(keys.tenant_prefix(tenant_id)):
        raise PoisonRecord("ticket summary without a tenant_status of its own tenant")
    try:
        return keys.status_from_tenant_status(value)
    except ValueError as exc:
        raise PoisonRecord(f"unknown status in {value!r}") from exc


def changes_from_record(
    *,
    event_name: str,
    sequence_number: str,
    event_id: str,
    created_epoch: float | int,
    keys_image: Mapping[str, Any],
    old_image: Mapping[str, Any] | None,
    new_image: Mapping[str, Any] | None,
) -> list[CountChange]:
    """The count changes one ticket-summary stream record stands for."""
    pk, sk = keys_image.get("pk"), keys_image.get("sk")
    if not isinstance(pk, str) or sk != keys.SUMMARY_SK:
        raise PoisonRecord("not a ticket summary")
    try:
        tenant_id = keys.tenant_of_key(pk)
        sequence = int(sequence_number)
    except ValueError as exc:
        raise PoisonRecord(str(exc)) from exc
    old_status = _status_of(old_image, tenant_id) if event_name in {"MODIFY", "REMOVE"} else None
    new_status = _status_of(new_image, tenant_id) if event_name in {"INSERT", "MODIFY"} else None
    if event_name not in {"INSERT", "MODIFY", "REMOVE"}:
        raise PoisonRecord(f"unknown event {event_name!r}")
    if (event_name != "INSERT" and old_status is None) or (event_name != "REMOVE" and new_status is None):
        raise PoisonRecord("the stream must carry NEW_AND_OLD_IMAGES")
    if old_status == new_status:
        return []
    record_id = f"{int(created_epoch)}#{event_id}"
    made = []
    if old_status is not None:
        made.append(CountChange(sequence, record_id, tenant_id, old_status, -1))
    if new_status is not None:
        made.append(CountChange(sequence, record_id, tenant_id, new_status, +1))
    return made


def changes_from_stream_record(record: DynamoDBRecord) -> list[CountChange]:
    """:func:`changes_from_record` for a record as Lambda delivers it (Powertools' data class)."""
    stream = record.dynamodb
    if stream is None or record.event_name is None or stream.sequence_number is None:
        raise PoisonRecord("incomplete stream record")
    return changes_from_record(
        event_name=record.event_name.name,
        sequence_number=stream.sequence_number,
        event_id=record.event_id or "",
        created_epoch=stream.approximate_creation_date_time or 0,
        keys_image=stream.keys,
        old_image=stream.old_image,
        new_image=stream.new_image,
    )


@dataclass
class PairResult:
    records: int
    applied: int
    writes: int
    slow_path: bool


@dataclass
class CountLedger:
    """Folds a batch's count changes and applies them, one write per pair."""

    table_name: str
    client: DynamoDBClient
    replay_horizon_seconds: int = DEFAULT_REPLAY_HORIZON_SECONDS
    clock: Any = time.time
    _pairs: dict[tuple[str, TicketStatus], list[CountChange]] = field(default_factory=lambda: defaultdict(list))
    _sequences_by_record: dict[str, str] = field(default_factory=dict)

    def add(self, changes: Iterable[CountChange]) -> None:
        for change in changes:
            self._pairs[(change.tenant_id, change.status)].append(change)
            # Stream sequence numbers are canonical decimal integers.
            self._sequences_by_record[change.record_id] = str(change.sequence)

    @property
    def pairs(self) -> int:
        return len(self._pairs)

    def apply(self) -> list[str]:
        """Write every pair; return the sequence numbers of the records whose
        pair could not be written (to report as batch item failures)."""
        failed: list[str] = []
        for (tenant_id, status), changes in self._pairs.items():
            try:
                self.apply_pair(tenant_id, status, sorted(changes))
            except (ClientError, BotoCoreError):
                failed.extend(self._sequences_by_record[change.record_id] for change in changes)
        return failed

    def apply_pair(self, tenant_id: str, status: TicketStatus, changes: list[CountChange]) -> PairResult:
        key = {"pk": {"S": keys.aggregate_pk(tenant_id)}, "sk": {"S": status.value}}
        names = {"#count": "count", "#applied": "applied", "#rev": "rev"}
        ids = sorted({change.record_id for change in changes})
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=key,
                UpdateExpression="ADD #count :delta, #applied :ids, #rev :one",
                ConditionExpression=(
                    "attribute_not_exists(#applied) OR (size(#applied) < :cap AND NOT contains(#applied, :first))"
                ),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    ":delta": {"N": str(sum(change.delta for change in changes))},
                    ":ids": {"SS": ids},
                    ":one": {"N": "1"},
                    ":cap": {"N": str(APPLIED_SET_CAP)},
                    ":first": {"S": changes[0].record_id},
                },
            )
            return PairResult(records=len(changes), applied=len(changes), writes=1, slow_path=False)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        return self._apply_pair_slowly(key, names, changes)

    def _apply_pair_slowly(self, key: dict[str, Any], names: dict[str, str], changes: list[CountChange]) -> PairResult:
        for _ in range(SLOW_PATH_ATTEMPTS):
            item = self.client.get_item(TableName=self.table_name, Key=key, ConsistentRead=True).get("Item", {})
            remembered = set(item.get("applied", {}).get("SS", []))
            revision = item.get("rev", {}).get("N")
            pending = [change for change in changes if change.record_id not in remembered]
            cutoff = self.clock() - self.replay_horizon_seconds
            expired = {record_id for record_id in remembered if int(record_id.split("#", 1)[0]) < cutoff}
            if not pending and not expired:
                return PairResult(records=len(changes), applied=0, writes=0, slow_path=True)
            kept = (remembered - expired) | {change.record_id for change in pending}
            values: dict[str, Any] = {
                ":delta": {"N": str(sum(change.delta for change in pending))},
                ":one": {"N": "1"},
            }
            update = "ADD #count :delta, #rev :one"
            if kept:
                update += " SET #applied = :kept"
                values[":kept"] = {"SS": sorted(kept)}
            else:
                update += " REMOVE #applied"
            if revision is None:
                condition = "attribute_not_exists(#rev)"
            else:
                condition = "#rev = :rev"
                values[":rev"] = {"N": revision}
            try:
                self.client.update_item(
                    TableName=self.table_name,
                    Key=key,
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
                return PairResult(records=len(changes), applied=len(pending), writes=1, slow_path=True)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
        raise ClientError(
            {"Error": {"Code": "ConditionalCheckFailedException", "Message": "aggregate kept changing"}},
            "UpdateItem",
        )


@cache
def aggregator_client() -> DynamoDBClient:
    """The aggregator's own client (its execution role: aggregate items only)."""
    import boto3

    from support_tickets.session import BOTO_CONFIG

    return boto3.client(
        "dynamodb",
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        endpoint_url=os.environ.get("AWS_ENDPOINT_OVERRIDE") or None,
        config=BOTO_CONFIG,
    )
