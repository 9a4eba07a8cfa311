"""PATCH /tickets/{ticket_id}: change title, description, status or resolver."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.parameters import IF_MATCH
from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import Conflict, TenantMoving, TicketNotFound, VersionMismatch
from support_tickets.core.models import Ticket, UpdateTicketRequest
from support_tickets.domain import tickets

app = create_app(RouteInput(body=UpdateTicketRequest, headers=(IF_MATCH,)))


@app.patch(
    "/tickets/<ticket_id>",
    summary="Update a ticket",
    responses=openapi_responses(200, "The updated ticket", TicketNotFound, Conflict, VersionMismatch, TenantMoving),
)
@tracer.capture_method
def update_ticket(ticket_id: str) -> Ticket:
    given = app.checked_input
    ticket = tickets.update_ticket(current_caller(app), ticket_id, given.body, given.headers[IF_MATCH.name])
    metrics.add_metric(name="TicketUpdated", unit=MetricUnit.Count, value=1)
    return ticket


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
