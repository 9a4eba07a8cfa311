"""POST /tickets: create a ticket.

Idempotent with an ``Idempotency-Key`` header."""

from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.parameters import IDEMPOTENCY_KEY
from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import Conflict, TenantMoving
from support_tickets.core.models import CreateTicketRequest, Ticket
from support_tickets.domain import tickets

app = create_app(RouteInput(body=CreateTicketRequest, headers=(IDEMPOTENCY_KEY,)))


@app.post(
    "/tickets",
    summary="Create a ticket",
    responses=openapi_responses(201, "Created; `Location: /tickets/<id>`", Conflict, TenantMoving),
)
@tracer.capture_method
def create_ticket() -> Response[Ticket]:
    given = app.checked_input
    ticket = tickets.create_ticket(
        current_caller(app), given.body, given.headers[IDEMPOTENCY_KEY.name], app.lambda_context
    )
    metrics.add_metric(name="TicketCreated", unit=MetricUnit.Count, value=1)
    return Response(
        status_code=201,
        content_type=content_types.APPLICATION_JSON,
        body=ticket,
        headers={"Location": f"/tickets/{ticket.ticket_id}"},
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
