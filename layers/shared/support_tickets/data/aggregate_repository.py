"""A tenant's ticket counts per status, as the stream function keeps them.

The counts of a status are spread over several items of the tenant's
``TENANT#<t>|AGGREGATE`` partition (``<STATUS>#<slot>``, written by the
stream function, and ``<STATUS>``, corrections by ``make reconcile`` and
counts kept before slots existed): one Query reads them all and sums them.
"""

from __future__ import annotations

from dataclasses import dataclass

from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import AggregatesResponse
from support_tickets.data.table import TenantTable


@dataclass(frozen=True, slots=True)
class AggregateRepository:
    table: TenantTable

    def get_aggregates(self) -> AggregatesResponse:
        query = {
            "TableName": self.table.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": keys.aggregate_pk(self.table.tenant_id)}},
            "ProjectionExpression": "sk, #count",
            "ExpressionAttributeNames": {"#count": "count"},
        }
        counts = dict.fromkeys(TicketStatus, 0)
        while True:
            response = self.table.call("query", **query)
            for item in response["Items"]:
                status = keys.status_from_aggregate_sk(item["sk"]["S"])
                if status is not None:
                    counts[status] += int(item.get("count", {}).get("N", "0"))
            if "LastEvaluatedKey" not in response:
                break
            query["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return AggregatesResponse(counts=counts, total=sum(counts.values()))
