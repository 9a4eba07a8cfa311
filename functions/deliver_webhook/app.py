"""WebhookEventsQueue (SQS FIFO) → the tenants' endpoints: signed POSTs, retried
with backoff, recorded (``support_tickets.webhooks.delivery``).

Runs outside the VPC (it must reach the internet) with its own role, the only
principal that may decrypt webhook secrets. The event source reports batch
item failures: a message to retry has had its visibility set to the backoff
delay before it is reported.

Each invocation logs one ``"usage"`` line per tenant of its batch (its
attempts, deliveries, SQS and KMS calls, DynamoDB units and share of the
invocation: ``support_tickets.webhooks.metered_delivery``), which the metering
function folds into the tenant's usage.
"""

import os
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.core.settings import get_settings
from support_tickets.core.tracing import make_tracer
from support_tickets.data.tenant_registry import tenant_configs
from support_tickets.streams.records import own_client
from support_tickets.webhooks.delivery import Deliverer, SecretOpener, Sender, tier_rates
from support_tickets.webhooks.metered_delivery import MeteredDeliverer, count_calls, metered_batch

logger = Logger()
tracer = make_tracer()
metrics = Metrics()


@cache
def deliverer() -> Deliverer:
    """The container's deliverer, from the function's environment (cold start)."""
    settings = get_settings()
    if settings.webhook_key_arn is None:
        raise RuntimeError("WEBHOOK_KEY_ARN is required")
    # Metered: each tenant's share of the invocation in its usage line (webhooks.metered_delivery).
    return MeteredDeliverer(
        # The pool table, where the tenants' records are: each names the table of the tenant's webhooks.
        table_name=settings.table_name,
        dynamodb=own_client("dynamodb"),
        sender=Sender(
            secrets=SecretOpener(count_calls(own_client("kms"), "kms"), settings.webhook_key_arn),
            allow_local_http=settings.webhook_allow_local_http,
            local_stack_ports=settings.webhook_local_stack_ports,
        ),
        sqs=count_calls(own_client("sqs"), "sqs"),
        queue_url=os.environ["WEBHOOK_EVENTS_QUEUE_URL"],
        dead_letter_queue_url=os.environ["WEBHOOK_DEAD_LETTER_QUEUE_URL"],
        tier_rates=tier_rates(os.environ.get("WEBHOOK_TIER_RATES", "")),
        tier_in_flight=tier_rates(os.environ.get("WEBHOOK_TIER_IN_FLIGHT", "")),
        tenant_configs=tenant_configs(),
    )


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    with metered_batch(logger, context):  # one "usage" line per tenant of the batch, also when it fails
        failed = deliverer().process_batch(event.get("Records") or [])
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}
