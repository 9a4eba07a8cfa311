"""DynamoDB Streams → the audit trail (``TENANT#<t>|HISTORY#<id>`` and
``TENANT#<t>|AUDIT#<day>#<k>`` items), each event exactly once, and the
tenant's webhook events onto the webhook queue.

The event source (template.yaml) delivers only ticket-summary records,
comment inserts and delivery records marked for redelivery (FilterCriteria),
never those of an item an offboarding erases. Powertools' BatchProcessor runs
each record on its own: the record becomes at most one event, written with a
condition keyed by the record (``support_tickets.streams.audit_events``), so a
redelivered record writes nothing again and records need no order; then the
event goes to each subscribed webhook (``support_tickets.streams.webhook_fanout``,
deduplicated by the queue). A record that fails (throttling, the queue...) is
reported in ``batchItemFailures``; Lambda retries from the first one reported,
and the records after it that were written are found written. A poison record
goes to the failure queue and counts as done.
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
from support_tickets.streams.records import PoisonRecord, record_fields, report_poison
from support_tickets.streams.usage import AUDIT_TRAIL, StreamInvocation, metered_invocation
from support_tickets.streams.webhook_fanout import is_delivery_record, publish_record, start_batch, webhook_fanout

logger = Logger()
tracer = make_tracer()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


def _poison(reason: str, event_id: str, sequence_number: str, tenant_id: str | None) -> None:
    report_poison(
        logger,
        metrics,
        reason=reason,
        event_id=event_id,
        sequence_number=sequence_number,
        tenant_id=tenant_id,
        default_function="AuditTrailFunction",
    )


def record_handler(record: DynamoDBRecord, invocation: StreamInvocation | None = None) -> None:
    stream = record.dynamodb
    event_id, sequence_number = str(record.event_id or ""), str(stream.sequence_number if stream else "")
    index = invocation.index_of(sequence_number) if invocation is not None else None
    before = invocation.units_so_far(index) if invocation is not None else None
    if stream is not None and is_delivery_record(stream.keys or {}):
        try:
            webhook_fanout().redeliver(str((stream.keys or {}).get("pk")), stream.new_image)
        except PoisonRecord as exc:
            _poison(str(exc), event_id, sequence_number, None)
            return
        metrics.add_metric(name="WebhookMessagesQueued", unit=MetricUnit.Count, value=1)
        return
    try:
        audited = audit_record_from_stream(record)
    except PoisonRecord as exc:  # not even readable as a stream record
        _poison(str(exc), event_id, sequence_number, None)
        return
    if audited.poison is not None:
        _poison(audited.poison, audited.event_id, audited.sequence_number, audited.tenant_id)
        return
    written = audit_writer().write(audited)
    metrics.add_metric(name="AuditItemsWritten", unit=MetricUnit.Count, value=written)
    fields = record_fields(record)
    try:
        queued = publish_record(audited, fields["old_image"], fields["new_image"])
    except PoisonRecord as exc:
        _poison(str(exc), audited.event_id, audited.sequence_number, audited.tenant_id)
        return
    metrics.add_metric(name="WebhookMessagesQueued", unit=MetricUnit.Count, value=queued)
    if invocation is not None and audited.event is not None and written == 0:
        # Its event was written by an earlier delivery: this is a retry Lambda made
        # for another record (streams/usage.py charges it to that record's tenant).
        invocation.found_applied(index, since=before)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    start_batch()  # each tenant's webhooks are checked once per batch (webhook_fanout)
    with metered_invocation(logger, AUDIT_TRAIL, context, event.get("Records", [])) as invocation:  # usage per tenant

        def handle(record: DynamoDBRecord) -> None:
            record_handler(record, invocation)

        response = process_partial_response(event=event, record_handler=handle, processor=processor, context=context)
    return dict(response)
