"""GET /aggregates: ticket counts per status for the caller's tenant.

Tenant admins only."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.core.models import AggregatesResponse
from support_tickets.domain import tickets

app = create_app()


@app.get(
    "/aggregates",
    summary="Ticket counts per status (admin)",
    responses=openapi_responses(200, "Counts per status (eventually consistent)"),
)
@tracer.capture_method
def get_aggregates() -> AggregatesResponse:
    return tickets.get_aggregates(current_caller(app))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
