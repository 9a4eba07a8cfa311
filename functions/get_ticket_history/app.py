"""GET /tickets/{ticket_id}/history: the ticket's history.

Who changed the ticket, and how, oldest first, paged."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.parameters import PAGE
from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import InvalidCursor, TicketNotFound
from support_tickets.core.models import AuditPage
from support_tickets.domain import tickets

app = create_app(RouteInput(query=PAGE))


@app.get(
    "/tickets/<ticket_id>/history",
    summary="A ticket's history",
    description=(
        "Its audit events, oldest first; they follow the table's stream (seconds behind a change) and outlive "
        "the ticket: a deleted ticket's history ends with its `deleted` event."
    ),
    responses=openapi_responses(200, "A page of the ticket's events, oldest first", InvalidCursor, TicketNotFound),
)
@tracer.capture_method
def get_ticket_history(ticket_id: str) -> AuditPage:
    query = app.checked_input.query
    return tickets.get_ticket_history(current_caller(app), ticket_id, query["limit"], query["cursor"])


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
