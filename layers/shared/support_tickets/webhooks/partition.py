"""The Query of a tenant's webhooks (``TENANT#<t>|WEBHOOKS``, the ``WEBHOOK#`` items,
never its count item), as both of its readers make it: the management routes
(:mod:`support_tickets.webhooks.admin_repository`) and the delivery side
(:mod:`support_tickets.webhooks.delivery_records`), each projected to what it may read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from support_tickets.core import keys
from support_tickets.data.table import TenantTable


def webhooks_query(table: TenantTable, attributes: Sequence[str]) -> dict[str, Any]:
    """One Query of ``table``'s tenant's webhooks, projected to ``attributes`` (all aliased)."""
    return {
        "TableName": table.table_name,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :webhook)",
        "ExpressionAttributeValues": {
            ":pk": {"S": keys.webhooks_pk(table.tenant_id)},
            ":webhook": {"S": keys.WEBHOOK_SK_PREFIX},
        },
        "ProjectionExpression": ", ".join(f"#{name}" for name in attributes),
        "ExpressionAttributeNames": {f"#{name}": name for name in attributes},
    }
