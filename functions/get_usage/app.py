"""GET /usage: what the caller's tenant consumed and cost on one UTC day.

Tenant admins only."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.parameters import USAGE_DAY
from support_tickets.api.resolver import create_app, current_caller, handle, logger, metrics, openapi_responses, tracer
from support_tickets.api.validation import RouteInput
from support_tickets.core.models import UsageResponse
from support_tickets.usage import report

app = create_app(RouteInput(query=(USAGE_DAY,)))


@app.get(
    "/usage",
    summary="The tenant's usage and cost of a UTC day (admin)",
    description=(
        "Requests per route, DynamoDB read and write units, Lambda invocations and GB-seconds, and a cost "
        "estimate per component at list prices (docs/usage.md), for `day` (`YYYY-MM-DD`, UTC; default today; "
        f"not after today, not before {report.EARLIEST_DAY.isoformat()}). Figures follow the logs within "
        "seconds; `final` is true once the day's figures no longer change (24 h after the day ended)."
    ),
    responses=openapi_responses(200, "The tenant's usage object of the day"),
)
@tracer.capture_method
def get_usage() -> UsageResponse:
    return report.get_usage(current_caller(app), app.checked_input.query["day"])


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
