"""POST /webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver: send that event again.

Tenant admins only. The event goes to the webhook again with the same id and body."""

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.core import keys
from support_tickets.core.errors import ApiError, DeliveryNotFound, TenantMoving, WebhookNotFound
from support_tickets.webhooks import operations


def _not_found(path: Mapping[str, str]) -> ApiError:
    """The 404 of a path the route can't match: the webhook's, unless only the delivery id is unlike any."""
    return DeliveryNotFound() if keys.is_valid_webhook_id(path.get("webhook_id") or "") else WebhookNotFound()


app = create_app(not_found=_not_found)


@app.post(
    "/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver",
    summary="Redeliver an event (admin)",
    description="Accepted: the delivery is PENDING again and its event is sent within seconds, same webhook-id.",
    responses=openapi_responses(202, "Accepted", WebhookNotFound, DeliveryNotFound, TenantMoving),
)
@tracer.capture_method
def redeliver_webhook(webhook_id: str, delivery_id: str) -> Response[None]:
    operations.redeliver(current_caller(app), webhook_id, delivery_id)
    metrics.add_metric(name="WebhookRedeliveryRequested", unit=MetricUnit.Count, value=1)
    return Response(status_code=202)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
