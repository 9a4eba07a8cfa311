"""POST /tickets/{ticket_id}/comments: add a comment to a ticket."""

from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import Conflict, TenantMoving, TicketNotFound
from support_tickets.core.models import AddCommentRequest, Comment
from support_tickets.domain import tickets

app = create_app(RouteInput(body=AddCommentRequest))


@app.post(
    "/tickets/<ticket_id>/comments",
    summary="Add a comment",
    responses=openapi_responses(201, "The comment", TicketNotFound, Conflict, TenantMoving),
)
@tracer.capture_method
def add_comment(ticket_id: str) -> Response[Comment]:
    request: AddCommentRequest = app.checked_input.body
    comment = tickets.add_comment(current_caller(app), ticket_id, request)
    metrics.add_metric(name="CommentAdded", unit=MetricUnit.Count, value=1)
    return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=comment)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
