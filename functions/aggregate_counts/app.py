"""DynamoDB Streams → exact ``TENANT#<t>|AGGREGATE`` counts per status.

The event source (template.yaml) delivers only ticket-summary records
(FilterCriteria on the key) for INSERT, MODIFY and REMOVE. Powertools'
BatchProcessor turns each record into count changes (a record that can't be
one is reported as a batch item failure); the ledger then folds the batch into
one conditional write per (tenant, status) and reports the records of any pair
it could not write. How that stays exact under redelivery is explained in
``support_tickets.aggregation``.
"""

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.aggregation import CountLedger, aggregator_client, changes_from_stream_record

logger = Logger()
tracer = Tracer()
metrics = Metrics()
# Never raise on a fully failed batch: failures are reported per record, and a
# function error would make Lambda bisect the batch instead of retrying it.
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


def count_changes(record: DynamoDBRecord, ledger: CountLedger) -> None:
    ledger.add(changes_from_stream_record(record))


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    ledger = CountLedger(
        table_name=os.environ["TABLE_NAME"],
        client=aggregator_client(),
        replay_horizon_seconds=int(os.environ.get("REPLAY_HORIZON_SECONDS", "4500")),
    )
    with processor(records=event.get("Records", []), handler=lambda record: count_changes(record, ledger)):
        processor.process()
    unreadable = [str(failure["itemIdentifier"]) for failure in processor.response()["batchItemFailures"]]
    unwritten = ledger.apply()
    metrics.add_metric(name="AggregateRecords", unit=MetricUnit.Count, value=len(event.get("Records", [])))
    metrics.add_metric(name="AggregateWrites", unit=MetricUnit.Count, value=ledger.pairs)
    if unreadable or unwritten:
        logger.warning("batch item failures", extra={"unreadable": len(unreadable), "unwritten": len(unwritten)})
    failed = sorted(set(unreadable) | set(unwritten), key=int)
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
