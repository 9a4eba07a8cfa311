"""GET /audit: the tenant's audit trail of a time window, newest first, paged (admins)."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.core.errors import InvalidCursor
from support_tickets.core.models import AuditPage
from support_tickets.domain import tickets

app = create_app()


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
def get_audit_trail(
    start: Annotated[str | None, Query(alias="from", max_length=40)] = None,
    end: Annotated[str | None, Query(alias="to", max_length=40)] = None,
    limit: Annotated[int, Query(ge=1, le=tickets.MAX_PAGE_SIZE)] = tickets.DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query()] = None,
) -> AuditPage:
    return tickets.get_audit_trail(current_caller(app), start, end, limit, cursor)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
