"""GET /tickets/{ticket_id}/summary: the ticket only."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.core.errors import TicketNotFound
from support_tickets.core.models import Ticket
from support_tickets.domain import tickets

app = create_app()


@app.get(
    "/tickets/<ticket_id>/summary",
    summary="Get a ticket summary",
    responses=openapi_responses(200, "The ticket", TicketNotFound),
)
@tracer.capture_method
def get_ticket_summary(ticket_id: str) -> Ticket:
    return tickets.get_ticket_summary(current_caller(app), ticket_id)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
