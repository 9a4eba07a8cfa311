"""DynamoDB Streams → exact ``TENANT#<t>|AGGREGATE`` counts per status.

The event source (template.yaml) delivers only ticket-summary records
(FilterCriteria on the key) for INSERT, MODIFY and REMOVE. Powertools'
BatchProcessor reads each record into count changes; the ledger applies the
delivery exactly once, in order, and says how many leading records are done:
the rest are reported as batch item failures, so Lambda retries from the first
of them. Why that is exact under any redelivery, with bookkeeping bounded by
the batch size, is explained in ``support_tickets.streams.aggregation``.

A batch is one stream's, the pool table's or a dedicated tenant's: its counts
go to that table, and the records that are not their tenant's changes (a
move's copy or erase) count nothing (``support_tickets.streams.routing``).
"""

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.core.tracing import make_tracer
from support_tickets.data.tenant_registry import tenant_configs
from support_tickets.streams.aggregation import (
    CountLedger,
    LedgerRecord,
    aggregator_client,
    batch_table,
    ledger_record_from_stream,
    routed,
)
from support_tickets.streams.records import report_poison
from support_tickets.streams.routing import SKIPPED_METRIC, StreamRouter
from support_tickets.usage.lines import AGGREGATE_COUNTS, StreamInvocation, metered_invocation

logger = Logger()
tracer = make_tracer()
metrics = Metrics()
# Never raise on a fully failed batch: failures are reported per record, and a
# function error would make Lambda bisect the batch instead of retrying it.
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


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


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records", [])
    # One usage line per tenant of the batch: its units and its share (usage/lines.py).
    with metered_invocation(logger, AGGREGATE_COUNTS, context, records) as invocation:
        return aggregate(records, invocation)


def aggregate(records: list[dict[str, Any]], invocation: StreamInvocation | None = None) -> dict[str, Any]:
    pool_table = os.environ["TABLE_NAME"]
    table = batch_table(records, pool_table)
    router = StreamRouter(pool_table, aggregator_client(), tenant_configs())

    def read_record(record: DynamoDBRecord) -> LedgerRecord:
        return routed(ledger_record_from_stream(record), record, router, table)

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
        replay_horizon_seconds=int(os.environ.get("REPLAY_HORIZON_SECONDS", "4500")),
    )
    result = ledger.apply(readable)
    if invocation is not None:
        # The journaled prefix was applied by an earlier delivery: its share is the
        # next record's tenant's, the one this redelivery is for (usage/lines.py).
        for index in range(result.skipped):
            invocation.found_applied(index)
    failed = [str(record["dynamodb"]["SequenceNumber"]) for record in records[result.applied :]]
    metrics.add_metric(name="AggregateRecords", unit=MetricUnit.Count, value=len(records))
    metrics.add_metric(name="AggregateWrites", unit=MetricUnit.Count, value=result.count_writes)
    if failed:
        logger.warning("batch item failures", extra={"failed": len(failed), "applied": result.applied})
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
