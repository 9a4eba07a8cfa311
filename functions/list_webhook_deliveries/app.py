"""GET /webhooks/{webhook_id}/deliveries: a webhook's recent deliveries.

Newest first, paged. Tenant admins only."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.parameters import PAGE
from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import InvalidCursor, WebhookNotFound
from support_tickets.core.models import DeliveryPage
from support_tickets.webhooks import operations

app = create_app(RouteInput(query=PAGE), not_found=WebhookNotFound)


@app.get(
    "/webhooks/<webhook_id>/deliveries",
    summary="A webhook's deliveries (admin)",
    description=(
        "One item per event and webhook: PENDING while attempts go on (next_attempt_at says when the next one is "
        "due), then DELIVERED or FAILED. Kept 30 days."
    ),
    responses=openapi_responses(200, "A page of deliveries, newest first", InvalidCursor, WebhookNotFound),
)
@tracer.capture_method
def list_webhook_deliveries(webhook_id: str) -> DeliveryPage:
    query = app.checked_input.query
    return operations.list_deliveries(current_caller(app), webhook_id, query["limit"], query["cursor"])


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
