"""POST /webhooks: register an endpoint for the tenant's ticket events.

Tenant admins only. The answer is the only time the webhook's signing secret is shown."""

from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import InvalidWebhookUrl, TenantMoving, TooManyWebhooks
from support_tickets.core.models import CreatedWebhook, CreateWebhookRequest
from support_tickets.webhooks import operations
from support_tickets.webhooks.urls import ResolutionTimedOut

app = create_app(RouteInput(body=CreateWebhookRequest))


@app.post(
    "/webhooks",
    summary="Register a webhook (admin)",
    responses=openapi_responses(
        201,
        "Created, with its signing secret (shown only now)",
        InvalidWebhookUrl,
        TooManyWebhooks,
        ResolutionTimedOut,  # 503 UNAVAILABLE: the URL's name lookup took over its 3 s bound
        TenantMoving,
    ),
)
@tracer.capture_method
def create_webhook() -> Response[CreatedWebhook]:
    webhook = operations.create_webhook(current_caller(app), app.checked_input.body)
    metrics.add_metric(name="WebhookCreated", unit=MetricUnit.Count, value=1)
    return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=webhook)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
