"""GET /tickets: list tickets by status (default OPEN), optionally for one resolver."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.core.errors import InvalidCursor
from support_tickets.core.keys import RESOLVER_PATTERN, TicketStatus
from support_tickets.core.models import TicketPage
from support_tickets.domain import tickets

app = create_app()


@app.get(
    "/tickets",
    summary="List tickets by status",
    responses=openapi_responses(200, "A page of tickets (without description)", InvalidCursor),
)
@tracer.capture_method
def list_tickets(
    status: Annotated[TicketStatus, Query()] = TicketStatus.OPEN,
    resolver: Annotated[str | None, Query(pattern=RESOLVER_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=tickets.MAX_PAGE_SIZE)] = tickets.DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query()] = None,
) -> TicketPage:
    return tickets.list_tickets(current_caller(app), status, resolver, limit, cursor)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
