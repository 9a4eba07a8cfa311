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

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.core.tracing import make_tracer
from support_tickets.streams.aggregation import aggregate
from support_tickets.usage.lines import AGGREGATE_COUNTS, metered_invocation

logger = Logger()
tracer = make_tracer()
metrics = Metrics()
# Never raise on a fully failed batch: failures are reported per record, and a
# function error would make Lambda bisect the batch instead of retrying it.
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    records = event.get("Records", [])
    # One usage line per tenant of the batch: its units and its share (usage/lines.py).
    with metered_invocation(logger, AGGREGATE_COUNTS, context, records) as invocation:
        return aggregate(records, processor=processor, logger=logger, metrics=metrics, invocation=invocation)
