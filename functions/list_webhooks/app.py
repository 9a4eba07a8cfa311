"""GET /webhooks: the tenant's webhooks, without their secrets.

Tenant admins only."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.core.models import WebhookPage
from support_tickets.webhooks import operations

app = create_app()


@app.get(
    "/webhooks",
    summary="List the tenant's webhooks (admin)",
    responses=openapi_responses(200, "The tenant's webhooks, oldest first; never a secret"),
)
@tracer.capture_method
def list_webhooks() -> WebhookPage:
    return operations.list_webhooks(current_caller(app))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
