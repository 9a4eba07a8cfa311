"""DynamoDB Streams → the audit trail (``TENANT#<t>|HISTORY#<id>`` and
``TENANT#<t>|AUDIT#<day>#<k>`` items), each event exactly once.

The event source (template.yaml) delivers only ticket-summary records and
comment inserts (FilterCriteria), never those of an item an offboarding
erases. Powertools' BatchProcessor runs each record on its own: the record
becomes at most one event, written with a condition keyed by the record
(``support_tickets.streams.audit_events``), so a redelivered record writes nothing again
and records need no order. A record that fails (throttling...) is reported in
``batchItemFailures``; Lambda retries from the first one reported, and the
records after it that were written are found written. A poison record goes
to the failure queue and counts as done.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.core.tracing import make_tracer
from support_tickets.streams.audit_events import audit_record_from_stream
from support_tickets.streams.audit_writer import audit_writer
from support_tickets.streams.records import PoisonRecord, report_poison
from support_tickets.streams.usage import AUDIT_TRAIL, metered_invocation

logger = Logger()
tracer = make_tracer()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


def record_handler(record: DynamoDBRecord) -> None:
    try:
        audited = audit_record_from_stream(record)
    except PoisonRecord as exc:  # not even readable as a stream record
        report_poison(
            logger,
            metrics,
            reason=str(exc),
            event_id=str(record.event_id or ""),
            sequence_number=str(record.dynamodb.sequence_number if record.dynamodb else ""),
            tenant_id=None,
            default_function="AuditTrailFunction",
        )
        return
    if audited.poison is not None:
        report_poison(
            logger,
            metrics,
            reason=audited.poison,
            event_id=audited.event_id,
            sequence_number=audited.sequence_number,
            tenant_id=audited.tenant_id,
            default_function="AuditTrailFunction",
        )
        return
    written = audit_writer().write(audited)
    metrics.add_metric(name="AuditItemsWritten", unit=MetricUnit.Count, value=written)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with metered_invocation(logger, AUDIT_TRAIL, context, event.get("Records", [])):  # usage per tenant
        response = process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    return dict(response)
