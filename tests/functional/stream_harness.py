"""Drive the real aggregator handler with real stream records from moto, the
way Lambda's event source mapping would (batches per shard, retries from the
lowest reported failure), plus the ways it may redeliver."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from local_stack.event_sources.stream_sources import lambda_record, stream_source
from local_stack.lambda_.runtime import LambdaContext
from ops.reconcile import recount, stored_counts
from stack_model.functions import function_specs, load_handler
from support_tickets.core.keys import TicketStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

Record = dict[str, Any]


def stream_handler(function: str = "AggregateCountsFunction") -> Callable[[dict[str, Any], Any], Any]:
    spec = function_specs()[function]
    return load_handler(spec.code_uri, spec.handler)


def aggregator() -> Callable[[dict[str, Any], Any], Any]:
    return stream_handler("AggregateCountsFunction")


@dataclass
class StreamHarness:
    """One function's event source over the table's stream (its own iterator:
    several harnesses read the same stream independently, as Lambda's event
    source mappings do)."""

    dynamodb: DynamoDBClient
    streams: Any
    table_name: str
    function: str = "AggregateCountsFunction"
    handler: Callable[[dict[str, Any], Any], Any] = field(default_factory=aggregator)
    _iterator: str | None = None
    _stream_arn: str = ""

    @classmethod
    def of(cls, function: str, dynamodb: DynamoDBClient, streams: Any, table_name: str) -> StreamHarness:
        return cls(dynamodb, streams, table_name, function=function, handler=stream_handler(function))

    def __post_init__(self) -> None:
        self._stream_arn = self.dynamodb.describe_table(TableName=self.table_name)["Table"]["LatestStreamArn"]
        (shard,) = self.streams.describe_stream(StreamArn=self._stream_arn)["StreamDescription"]["Shards"]
        self._iterator = self.streams.get_shard_iterator(
            StreamArn=self._stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]

    def new_records(self, *, filtered: bool = True) -> list[Record]:
        """Records written since the last call, as Lambda would deliver them."""
        records: list[Record] = []
        while True:
            page = self.streams.get_records(ShardIterator=self._iterator)
            self._iterator = page.get("NextShardIterator")
            records.extend(lambda_record(record, self._stream_arn) for record in page["Records"])
            if not page["Records"]:
                break
        source = stream_source(self.function)
        return [record for record in records if source.matches(record)] if filtered else records

    def invoke(self, records: list[Record]) -> list[str]:
        """One invocation; the sequence numbers it reported as failed."""
        response = self.handler({"Records": records}, LambdaContext(self.function))
        return [failure["itemIdentifier"] for failure in response["batchItemFailures"]]

    def deliver(self, records: list[Record], batch_size: int = 100, max_attempts: int = 10) -> None:
        """What the event source mapping does for one shard: batches in order;
        after reported failures, the next batch starts at the lowest one."""
        position, attempts = 0, 0
        while position < len(records):
            batch = records[position : position + batch_size]
            failed = self.invoke(batch)
            if not failed:
                position += len(batch)
                continue
            attempts += 1
            assert attempts <= max_attempts, "the batch kept failing"
            lowest = min(int(sequence) for sequence in failed)
            position = next(
                index for index, record in enumerate(records) if int(record["dynamodb"]["SequenceNumber"]) == lowest
            )

    def counts(self, tenant_id: str) -> dict[TicketStatus, int]:
        stored = stored_counts(self.dynamodb, self.table_name, tenant_id)
        return {status: stored[status][0] for status in TicketStatus}

    def truth(self, tenant_id: str) -> dict[TicketStatus, int]:
        return {status: recount(self.dynamodb, self.table_name, tenant_id, status) for status in TicketStatus}


class Crash(RuntimeError):
    """The invocation died (timeout, out of memory) after whatever it wrote landed."""


class FailingTransactions:
    """A stream function's client; chosen TransactWriteItems calls (counted from
    1) fail (nothing applied), are cancelled by a conflict (nothing applied), or
    crash the invocation after they landed. Every other call goes through."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.fail_calls: set[int] = set()
        self.conflict_calls: set[int] = set()
        self.crash_after_calls: set[int] = set()
        self.calls = 0

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls in self.fail_calls:
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "TransactWriteItems")
        if self.calls in self.conflict_calls:
            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                    "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
                },
                "TransactWriteItems",
            )
        response = self._client.transact_write_items(**kwargs)
        if self.calls in self.crash_after_calls:
            raise Crash("the invocation died after this transaction landed")
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@dataclass
class ShardMapping:
    """One shard of Lambda's event source mapping, with every way it redelivers.

    ``checkpoint`` is the index of the first record not yet done. An invocation
    gets ``records[checkpoint:checkpoint + n]`` (or a queued bisected half);
    reported failures move the checkpoint to the lowest failed record; a
    function error (``Crash``) retries the batch, bisected in two when
    ``bisect`` is on; :meth:`lose_checkpoints` rewinds to an earlier checkpoint,
    as when the mapping's committed position lags behind (records are then
    delivered again, in new batch boundaries)."""

    records: list[Record]
    invoke: Callable[[list[Record]], list[str]]
    bisect: bool = True
    checkpoint: int = 0
    committed: list[int] = field(default_factory=lambda: [0])
    _halves: list[tuple[int, int]] = field(default_factory=list)
    invocations: int = 0
    crashes: int = 0

    @property
    def done(self) -> bool:
        return self.checkpoint >= len(self.records) and not self._halves

    def step(self, batch_size: int) -> None:
        start, end = self._halves.pop(0) if self._halves else (self.checkpoint, self.checkpoint + batch_size)
        end = min(end, len(self.records))
        batch = self.records[start:end]
        self.invocations += 1
        try:
            failed = self.invoke(batch)
        except Crash:
            self.crashes += 1
            if self.bisect and len(batch) > 1:
                middle = start + len(batch) // 2
                self._halves[:0] = [(start, middle), (middle, end)]
            else:
                self._halves[:0] = [(start, end)]
            return
        if failed:
            lowest = min(int(sequence) for sequence in failed)
            self.checkpoint = next(
                index
                for index, record in enumerate(self.records)
                if int(record["dynamodb"]["SequenceNumber"]) == lowest
            )
            self._halves.clear()
        else:
            self.checkpoint = end
        self.committed.append(self.checkpoint)

    def lose_checkpoints(self, how_many: int) -> None:
        """The last ``how_many`` checkpoint commits never reached the mapping's store."""
        if self._halves or how_many <= 0:
            return
        kept = self.committed[: max(1, len(self.committed) - how_many)]
        self.committed = kept
        self.checkpoint = kept[-1]


def split_into_shards(records: list[Record], shards: int) -> list[list[Record]]:
    """Records of one item stay in one shard, in order; shards interleave freely."""
    by_shard: list[list[Record]] = [[] for _ in range(shards)]
    for record in records:
        by_shard[zlib.crc32(record["dynamodb"]["Keys"]["pk"]["S"].encode()) % shards].append(record)
    return by_shard
