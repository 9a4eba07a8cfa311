"""GET /tickets: list tickets by status.

OPEN by default, optionally for one resolver."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.parameters import PAGE, RESOLVER, STATUS
from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import InvalidCursor
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import TicketPage
from support_tickets.domain import tickets

app = create_app(RouteInput(query=(STATUS, RESOLVER, *PAGE)))


@app.get(
    "/tickets",
    summary="List tickets by status",
    responses=openapi_responses(200, "A page of tickets (without description)", InvalidCursor),
)
@tracer.capture_method
def list_tickets() -> TicketPage:
    query = app.checked_input.query
    status = TicketStatus(query["status"])
    return tickets.list_tickets(current_caller(app), status, query["resolver"], query["limit"], query["cursor"])


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
