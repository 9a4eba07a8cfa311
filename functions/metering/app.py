"""CloudWatch Logs subscription → exact ``TENANT#<t>|USAGE`` counters per UTC day.

Each API function's log group sends its ``"request handled"`` lines here
(template.yaml: a subscription filter per log group). The delivery is read
into usage lines, grouped by (tenant, day) and applied one transaction per
group with a delivery journal, so that Lambda's retries of the same delivery
count nothing twice: see ``support_tickets.usage.metering``.

Malformed lines are counted (``UsageLinesMalformed``) and logged with their
reason, never their content, and the rest of the delivery is counted. A group
that could not be written makes the invocation fail, after every other group
was tried: Lambda retries the delivery (the committed groups are skipped by
their journals), then sends it to the failure queue. A group of a tenant
being offboarded is skipped (logged, ``UsageGroupsOffboarded``): its usage
is being erased, and a late delivery must not write it again.
"""

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.core.tracing import make_tracer
from support_tickets.usage.metering import (
    DEFAULT_REPLAY_HORIZON_SECONDS,
    UsageLedger,
    metering_client,
    read_delivery,
)

logger = Logger()
tracer = make_tracer()
metrics = Metrics()


class DeliveryIncomplete(RuntimeError):
    """Some groups of the delivery were not written: Lambda must retry it."""


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    delivery = read_delivery(event)  # MalformedDelivery: nothing in it can be read; fail, so it is kept
    if delivery.control:
        return {"control": True}
    if delivery.malformed:
        logger.warning(
            "malformed usage lines",
            extra={
                "log_group": delivery.log_group,
                "log_stream": delivery.log_stream,
                "malformed": len(delivery.malformed),
                "reasons": sorted(set(delivery.malformed))[:10],
            },
        )
    ledger = UsageLedger(
        # The pool table: every tenant's usage ledger stays there, whatever its placement.
        table_name=os.environ["TABLE_NAME"],
        client=metering_client(),
        replay_horizon_seconds=int(os.environ.get("REPLAY_HORIZON_SECONDS", DEFAULT_REPLAY_HORIZON_SECONDS)),
    )
    result = ledger.apply(delivery)
    metrics.add_metric(name="UsageLines", unit=MetricUnit.Count, value=len(delivery.lines))
    metrics.add_metric(name="UsageLinesMalformed", unit=MetricUnit.Count, value=len(delivery.malformed))
    metrics.add_metric(name="UsageGroupsRedelivered", unit=MetricUnit.Count, value=result.redelivered)
    if result.offboarded:
        # A late delivery of a tenant being (or already) offboarded: its usage was erased, and stays so.
        logger.warning(
            "usage of an offboarded tenant skipped",
            extra={"groups": [{"tenant_id": g.tenant_id, "day": g.day, "lines": g.lines} for g in result.offboarded]},
        )
        metrics.add_metric(name="UsageGroupsOffboarded", unit=MetricUnit.Count, value=len(result.offboarded))
    summary = {
        "events": delivery.events,
        "lines": len(delivery.lines),
        "ignored": delivery.ignored,
        "duplicates": delivery.duplicates,
        "malformed": len(delivery.malformed),
        "groups": result.groups,
        "applied": result.applied,
        "redelivered": result.redelivered,
        "offboarded": len(result.offboarded),
        "failed": result.failed,
    }
    if not result.complete:
        logger.warning("usage groups not written", extra=summary)
        raise DeliveryIncomplete(f"{result.failed} of {result.groups} usage groups not written; retry the delivery")
    return summary
