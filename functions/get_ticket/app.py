"""GET /tickets/{ticket_id}: the ticket with its comments.

Its comments come oldest first, paged."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.parameters import PAGE
from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import InvalidCursor, TicketNotFound
from support_tickets.core.models import TicketWithComments
from support_tickets.domain import tickets

app = create_app(RouteInput(query=PAGE))


@app.get(
    "/tickets/<ticket_id>",
    summary="Get a ticket with its comments",
    responses=openapi_responses(
        200, "The ticket and a page of its comments, oldest first", InvalidCursor, TicketNotFound
    ),
)
@tracer.capture_method
def get_ticket(ticket_id: str) -> TicketWithComments:
    query = app.checked_input.query
    return tickets.get_ticket(current_caller(app), ticket_id, query["limit"], query["cursor"])


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
