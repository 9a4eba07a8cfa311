"""A tenant's usage counters of one UTC day, as the metering function keeps them.

Their shapes: docs/usage.md, "Record shapes".

The counters of a day are spread over at most ``keys.USAGE_SLOTS`` items of
the tenant's ``TENANT#<t>|USAGE`` partition (``<day>#<slot>``: a slot per
execution environment's log stream, so that a busy tenant's deliveries do not
contend on one item). One Query (``begins_with(sk, "<day>#")``) reads them and
their number attributes are summed. The attribute names are defined here, for
the writer (:mod:`support_tickets.usage.metering`) and the readers alike.

Reads are strongly consistent: a usage figure just after a delivery was
applied includes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Final

from support_tickets.core import keys
from support_tickets.data.table import TenantTable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Counter attributes (every one ``ADD``ed by the metering function).
REQUESTS: Final = "requests"
REQUESTS_PREFIX: Final = "requests:"  # + "<METHOD> <route path>": requests per route
READ_UNITS: Final = "read_units"
WRITE_UNITS: Final = "write_units"
DYNAMODB_CALLS: Final = "dynamodb_calls"
DURATION_MS: Final = "duration_ms"
MB_MS: Final = "mb_ms"  # memory size (MB) x duration (ms): GB-seconds = mb_ms / 1024 / 1000
# The authorizer's invocations per verified token of the tenant, and their MB x ms
# (its DynamoDB units join read_units / write_units).
AUTHORIZER_INVOCATIONS: Final = "authorizer_invocations"
AUTHORIZER_MB_MS: Final = "authorizer_mb_ms"
# The stream functions' shares of their invocations' MB x ms (their DynamoDB
# units join read_units / write_units). No invocations: an invocation shared by
# several tenants' records is no tenant's whole one (docs/usage.md).
STREAM_MB_MS: Final = "stream_mb_ms"
# The delivery function's work for the tenant's webhooks (its lines: support_tickets.webhooks.metered_delivery):
# its share of the invocations' MB x ms, and webhook_<count> for invocations, attempts,
# deliveries, sqs_requests and kms_requests (its DynamoDB units join read_units / write_units).
WEBHOOK_PREFIX: Final = "webhook_"
WEBHOOK_MB_MS: Final = "webhook_mb_ms"
WEBHOOK_INVOCATIONS: Final = "webhook_invocations"
WEBHOOK_ATTEMPTS: Final = "webhook_attempts"
WEBHOOK_DELIVERIES: Final = "webhook_deliveries"
WEBHOOK_SQS_REQUESTS: Final = "webhook_sqs_requests"
WEBHOOK_KMS_REQUESTS: Final = "webhook_kms_requests"
# The storage its delivery records and parked messages hold, KB x days (docs/usage.md).
WEBHOOK_STORED_KB_DAYS: Final = "webhook_stored_kb_days"
# How long a delivery can still arrive (and its journal is kept): Lambda keeps
# an asynchronous event at most 6 h; a failed delivery may be redriven from the
# failure queue within this horizon.
REPLAY_HORIZON_SECONDS: Final = 86_400

Counters = dict[str, Decimal]


def day_query(table_name: str, tenant_id: str, day: str) -> dict[str, Any]:
    """The Query of a tenant's counter items of ``day`` (every slot)."""
    return {
        "TableName": table_name,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :day)",
        "ExpressionAttributeValues": {
            ":pk": {"S": keys.usage_pk(tenant_id)},
            ":day": {"S": keys.usage_day_prefix(day)},
        },
        "ConsistentRead": True,
    }


def add_counters(sums: Counters, items: Iterable[Mapping[str, Any]]) -> Counters:
    """``sums`` plus every number attribute of ``items`` (DynamoDB JSON); keys
    and non-number attributes are not counters."""
    for item in items:
        for name, value in item.items():
            if name in {"pk", "sk"} or not isinstance(value, Mapping) or "N" not in value:
                continue
            try:
                amount = Decimal(str(value["N"]))
            except InvalidOperation as exc:
                raise ValueError(f"counter {name!r} is not a number") from exc
            sums[name] = sums.get(name, Decimal(0)) + amount
    return sums


def day_items(client: DynamoDBClient, table_name: str, tenant_id: str, day: str) -> list[dict[str, Any]]:
    """A tenant's counter items of ``day`` with any client (the operator's: ``make usage``)."""
    items: list[dict[str, Any]] = []
    query = day_query(table_name, tenant_id, day)
    while True:
        page = client.query(**query)
        items += page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return items
        query["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def read_day(client: DynamoDBClient, table_name: str, tenant_id: str, day: str) -> Counters:
    """A tenant's counters of ``day`` with any client (the operator's: ``make usage``)."""
    return add_counters({}, day_items(client, table_name, tenant_id, day))


@dataclass(frozen=True, slots=True)
class UsageRepository:
    """The caller's tenant's counters, read with its own credentials (the
    tenant role may read its usage items, never write them)."""

    table: TenantTable

    def read_day(self, day: str) -> Counters:
        sums: Counters = {}
        for items in self.table.query_pages(day_query(self.table.table_name, self.table.tenant_id, day)):
            add_counters(sums, items)
        return sums
