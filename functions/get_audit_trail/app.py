"""GET /audit: the tenant's audit trail.

One time window of it, newest first, paged. Tenant admins only."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.parameters import PAGE, WINDOW_FROM, WINDOW_TO
from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.errors import InvalidCursor
from support_tickets.core.models import AuditPage
from support_tickets.domain import tickets

app = create_app(RouteInput(query=(WINDOW_FROM, WINDOW_TO, *PAGE)))


@app.get(
    "/audit",
    summary="The tenant's audit trail (admin)",
    description=(
        "Every change to the tenant's tickets in `[from, to)`, newest first. `from` and `to` are ISO 8601 "
        "dates or UTC times (`Z`); `to` defaults to now, `from` to a day before `to`; at most 31 days. "
        "A page may hold fewer than `limit` events and still have a `next_cursor` (a request reads at most "
        "7 days of the window)."
    ),
    responses=openapi_responses(200, "A page of events, newest first", InvalidCursor),
)
@tracer.capture_method
def get_audit_trail() -> AuditPage:
    query = app.checked_input.query
    return tickets.get_audit_trail(current_caller(app), query["from"], query["to"], query["limit"], query["cursor"])


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
