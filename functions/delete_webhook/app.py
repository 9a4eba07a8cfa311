"""DELETE /webhooks/{webhook_id}: remove a webhook.

Nothing more is delivered to it. Tenant admins only."""

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.core.errors import TenantMoving, WebhookNotFound
from support_tickets.webhooks import operations

app = create_app(not_found=WebhookNotFound)


@app.delete(
    "/webhooks/<webhook_id>",
    summary="Delete a webhook (admin)",
    responses=openapi_responses(204, "Deleted", WebhookNotFound, TenantMoving),
)
@tracer.capture_method
def delete_webhook(webhook_id: str) -> Response[None]:
    operations.delete_webhook(current_caller(app), webhook_id)
    metrics.add_metric(name="WebhookDeleted", unit=MetricUnit.Count, value=1)
    return Response(status_code=204)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
