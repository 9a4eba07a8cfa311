"""Drive the real aggregator handler with real stream records from moto, the
way Lambda's event source mapping would (batches per shard, retries from the
lowest reported failure), plus the ways it may redeliver."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from local_stack.lambda_runtime import LambdaContext, function_specs, load_handler
from local_stack.stream_source import lambda_record, stream_source
from ops.reconcile import recount, stored_count
from support_tickets.keys import TicketStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

Record = dict[str, Any]


def aggregator() -> Callable[[dict[str, Any], Any], Any]:
    spec = function_specs()["AggregateCountsFunction"]
    return load_handler(spec.code_uri, spec.handler)


@dataclass
class StreamHarness:
    dynamodb: DynamoDBClient
    streams: Any
    table_name: str
    handler: Callable[[dict[str, Any], Any], Any] = field(default_factory=aggregator)
    _iterator: str | None = None
    _stream_arn: str = ""

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
        source = stream_source()
        return [record for record in records if source.matches(record)] if filtered else records

    def invoke(self, records: list[Record]) -> list[str]:
        """One invocation; the sequence numbers it reported as failed."""
        response = self.handler({"Records": records}, LambdaContext("AggregateCountsFunction"))
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
        return {status: stored_count(self.dynamodb, self.table_name, tenant_id, status)[0] for status in TicketStatus}

    def truth(self, tenant_id: str) -> dict[TicketStatus, int]:
        return {status: recount(self.dynamodb, self.table_name, tenant_id, status) for status in TicketStatus}
