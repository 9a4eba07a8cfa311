"""DELETE /tickets/{ticket_id}: remove a ticket and its comments.

Tenant admins only."""

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.core.errors import TenantMoving, TicketNotFound
from support_tickets.domain import tickets

app = create_app()


@app.delete(
    "/tickets/<ticket_id>",
    summary="Delete a ticket (admin)",
    responses=openapi_responses(204, "Deleted, with its comments", TicketNotFound, TenantMoving),
)
@tracer.capture_method
def delete_ticket(ticket_id: str) -> Response[None]:
    tickets.delete_ticket(current_caller(app), ticket_id, app.lambda_context)
    metrics.add_metric(name="TicketDeleted", unit=MetricUnit.Count, value=1)
    return Response(status_code=204)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
