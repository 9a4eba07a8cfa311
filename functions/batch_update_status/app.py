"""POST /tickets/status: change the status of up to 100 tickets, all or nothing."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import Conflict, TenantMoving, TicketNotFound
from support_tickets.core.models import BatchStatusRequest, BatchStatusResponse
from support_tickets.domain import tickets

app = create_app(RouteInput(body=BatchStatusRequest))


@app.post(
    "/tickets/status",
    summary="Change the status of many tickets atomically",
    description="All or nothing: a 404 names the missing ids in `details.missing_ticket_ids`, and nothing changed.",
    responses=openapi_responses(200, "Every ticket changed", TicketNotFound, Conflict, TenantMoving),
)
@tracer.capture_method
def batch_update_status() -> BatchStatusResponse:
    request: BatchStatusRequest = app.checked_input.body
    result = tickets.change_status(current_caller(app), request)
    metrics.add_metric(name="TicketsStatusChanged", unit=MetricUnit.Count, value=len(result.updated))
    return result


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
