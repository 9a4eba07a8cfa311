"""POST /webhooks/{webhook_id}/secret: a new signing secret, shown once.

Tenant admins only. The previous one still signs for 24 hours."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.core.errors import TenantMoving, WebhookNotFound
from support_tickets.core.models import RotatedSecret
from support_tickets.webhooks import operations

app = create_app(not_found=WebhookNotFound)


@app.post(
    "/webhooks/<webhook_id>/secret",
    summary="Rotate a webhook's signing secret (admin)",
    responses=openapi_responses(
        200, "The new secret (shown only now); the previous one signs for 24 h", WebhookNotFound, TenantMoving
    ),
)
@tracer.capture_method
def rotate_webhook_secret(webhook_id: str) -> RotatedSecret:
    rotated = operations.rotate_secret(current_caller(app), webhook_id)
    metrics.add_metric(name="WebhookSecretRotated", unit=MetricUnit.Count, value=1)
    return rotated


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
