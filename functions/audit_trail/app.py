"""DynamoDB stream → the audit trail, each event exactly once, and the tenants' webhook events onto their queue.

The trail's items: ``TENANT#<t>|HISTORY#<id>`` and ``TENANT#<t>|AUDIT#<day>#<k>``.

The event source (template.yaml) delivers only ticket-summary records,
comment inserts and delivery records marked for redelivery (FilterCriteria),
never those of an item an offboarding erases. Powertools' BatchProcessor runs
each record on its own: the record becomes at most one event, written with a
condition keyed by the record (``support_tickets.streams.audit_events``), so a
redelivered record writes nothing again and records need no order; then the
event goes to each subscribed webhook (``support_tickets.webhooks.fanout``,
deduplicated by the queue). A record that fails (throttling, the queue...) is
reported in ``batchItemFailures``; Lambda retries from the first one reported,
and the records after it that were written are found written. A poison record
goes to the failure queue and counts as done.

A batch is one stream's, the pool table's or a dedicated tenant's
(``support_tickets.streams.routing``): a record's audit items (and a refused
delivery's record) go into the table it came from, its tenant's webhooks are
read from the tenant's table now, and a record that is not its tenant's
change (a move's copy or erase) is skipped: no event, no webhook. While a move
copies the tenant out of that table, each event put into a day's trail is
marked first, so that the move's switch reads only those again
(``TenantTable.marks_writes``).
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.core.tracing import make_tracer
from support_tickets.data.tenant_registry import tenant_configs
from support_tickets.streams.audit_events import audit_record_from_stream
from support_tickets.streams.audit_writer import audit_client, audit_writer
from support_tickets.streams.records import PoisonRecord, record_fields, report_poison
from support_tickets.streams.routing import SKIPPED_METRIC, RecordRoute, StreamRouter
from support_tickets.streams.ticket_deletions import finish_pass, is_tombstone_record, tombstone_owner
from support_tickets.usage.lines import AUDIT_TRAIL, StreamInvocation, metered_invocation
from support_tickets.webhooks.fanout import (
    delivery_record_tenant,
    is_delivery_record,
    publish_record,
    start_batch,
    webhook_fanout,
)

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


def _route(record: DynamoDBRecord, router: StreamRouter, tenant_id: str) -> RecordRoute | None:
    """Where the record belongs; ``None`` (counted, logged at debug) for a record that is
    not its tenant's change. Raises :class:`PoisonRecord` for one of no table of its tenant's."""
    created = record.dynamodb.get("ApproximateCreationDateTime") if record.dynamodb is not None else None
    route = router.route(tenant_id, record.event_source_arn, created)
    if route.owned:
        return route
    logger.debug("a record of a move skipped", extra={"tenant_id": tenant_id, "table": route.source})
    metrics.add_metric(name=SKIPPED_METRIC, unit=MetricUnit.Count, value=1)
    return None


def _redeliver(record: DynamoDBRecord, router: StreamRouter, event_id: str, sequence_number: str) -> None:
    """A delivery record marked for redelivery: its stored event queued again."""
    stream = record.dynamodb
    keys_image = (stream.keys if stream is not None else None) or {}
    try:
        route = _route(record, router, delivery_record_tenant(keys_image))
        if route is None:
            return
        webhook_fanout().redeliver(str(keys_image.get("pk")), stream.new_image if stream else None, route)
    except PoisonRecord as exc:
        _poison(str(exc), event_id, sequence_number, None)
        return
    metrics.add_metric(name="WebhookMessagesQueued", unit=MetricUnit.Count, value=1)


def _finish_delete(
    record: DynamoDBRecord, router: StreamRouter, event_id: str, sequence_number: str, seconds_left: float
) -> None:
    """A deleted ticket's tombstone: what its delete left, deleted (streams/ticket_deletions.py).
    No event, no webhook; a failure is the record's (retried)."""
    stream = record.dynamodb
    keys_image = (stream.keys if stream is not None else None) or {}
    try:
        tenant_id, ticket_id = tombstone_owner(keys_image)
        route = _route(record, router, tenant_id)
    except PoisonRecord as exc:
        _poison(str(exc), event_id, sequence_number, None)
        return
    if route is None:
        return
    finished = finish_pass(tenant_id, ticket_id, route, router, client=audit_client(), seconds_left=seconds_left)
    metrics.add_metric(name="DeletesFinished" if finished else "DeletePassesLeft", unit=MetricUnit.Count, value=1)


def record_handler(
    record: DynamoDBRecord,
    router: StreamRouter,
    invocation: StreamInvocation | None = None,
    context: LambdaContext | None = None,
) -> None:
    stream = record.dynamodb
    event_id, sequence_number = str(record.event_id or ""), str(stream.sequence_number if stream else "")
    if stream is not None and is_delivery_record(stream.keys or {}):
        _redeliver(record, router, event_id, sequence_number)
        return
    if stream is not None and is_tombstone_record(stream.keys or {}):
        seconds_left = context.get_remaining_time_in_millis() / 1000 if context is not None else 60.0
        _finish_delete(record, router, event_id, sequence_number, seconds_left)
        return
    index = invocation.index_of(sequence_number) if invocation is not None else None
    before = invocation.units_so_far(index) if invocation is not None else None
    try:
        audited = audit_record_from_stream(record)
    except PoisonRecord as exc:  # not even readable as a stream record
        _poison(str(exc), event_id, sequence_number, None)
        return
    if audited.poison is not None or audited.tenant_id is None:
        _poison(audited.poison or "poison", audited.event_id, audited.sequence_number, audited.tenant_id)
        return
    try:
        route = _route(record, router, audited.tenant_id)
        if route is None:
            return
        marks = router.marks_writes(audited.tenant_id, route.source)
        written = audit_writer().write(audited, route.source, marks=marks)
        metrics.add_metric(name="AuditItemsWritten", unit=MetricUnit.Count, value=written)
        fields = record_fields(record)
        queued = publish_record(audited, fields["old_image"], fields["new_image"], route)
    except PoisonRecord as exc:  # of no table of its tenant's, or images that make no webhook event
        _poison(str(exc), audited.event_id, audited.sequence_number, audited.tenant_id)
        return
    metrics.add_metric(name="WebhookMessagesQueued", unit=MetricUnit.Count, value=queued)
    if invocation is not None and audited.event is not None and written == 0:
        # Its event was written by an earlier delivery: this is a retry Lambda made
        # for another record (usage/lines.py charges it to that record's tenant).
        invocation.found_applied(index, since=before)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    start_batch()  # each tenant's webhooks are checked once per batch (webhook_fanout)
    # Each tenant's record read at most once for the batch (streams/routing.py).
    router = StreamRouter(audit_writer().table_name, audit_client(), tenant_configs())
    with metered_invocation(logger, AUDIT_TRAIL, context, event.get("Records", [])) as invocation:  # usage per tenant

        def handle(record: DynamoDBRecord) -> None:
            record_handler(record, router, invocation, context)

        response = process_partial_response(event=event, record_handler=handle, processor=processor, context=context)
    return dict(response)
