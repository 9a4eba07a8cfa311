"""A tenant's items, found without a Scan: what ``make export`` reads and
``make offboard`` erases.

Every item of a tenant is under a partition key the tenant's id and the keys
module name, or that another of its items names:

- its tickets: GSI1, every status, every shard key of every shard count
  1..64 (65 keys a status, whatever its record says: a record lost or edited
  by hand can't hide a ticket); each ticket's item collection holds its
  comments;
- its audit trail: the days listed in ``TENANT#<t>|AUDIT#DAYS``, each day's
  partitions, whose events name the tickets whose histories
  (``TENANT#<t>|HISTORY#<id>``) exist, deleted tickets' included;
- fixed partitions: counts, the aggregator's 16 journals, the 64
  idempotency partitions, and the tenant record;
- its usage ledger (the metering function's counters and journal, always in
  the pool table): the operator's record of what the tenant used, not the
  tenant's data; ``make offboard`` keeps it (:func:`ledger_partitions`);
- its webhooks' partition, and the deliveries and parking partitions of each
  webhook it lists (a deleted webhook's, until their TTL, only the
  offboarding's final check finds).

Rows are read through the operator's client (:class:`~support_tickets.data.table.OwnClient`)
and checked to be the tenant's own: GSI keys are not confined by IAM, so a
row whose item is another tenant's is skipped.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TextIO

from botocore.exceptions import ClientError

from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from support_tickets.data.table import TenantTable, error_code, from_item

ALL_SHARD_COUNTS: Final = range(1, keys.MAX_SHARDS + 1)
# The final check's parallel Scan segments (make offboard's and a move's).
SCAN_SEGMENTS: Final = 4
OFFBOARDED_SK: Final = "OFFBOARDED"


def ticket_ids(table: TenantTable) -> Iterator[str]:
    """Every ticket id of the tenant, from GSI1 (eventually consistent: a ticket
    written the moment before may show up only in a later read)."""
    own = keys.tenant_prefix(table.tenant_id) + "TICKET#"
    for status in TicketStatus:
        for partition in keys.status_partitions(table.tenant_id, status, ALL_SHARD_COUNTS):
            query = {
                "TableName": table.table_name,
                "IndexName": keys.GSI1_NAME,
                "KeyConditionExpression": "tenant_status = :ts",
                "ExpressionAttributeValues": {":ts": {"S": partition}},
                "ProjectionExpression": "pk",
            }
            for page in table.query_pages(query):
                for item in page:
                    pk = str(item["pk"]["S"])
                    ticket_id = pk[len(own) :]
                    if pk.startswith(own) and keys.is_valid_ticket_id(ticket_id):
                        yield ticket_id


def partition_pages(
    table: TenantTable, pk: str, projection: str = "pk, sk", *, consistent: bool = True
) -> Iterator[list[dict[str, Any]]]:
    """The pages of one of the tenant's partitions (raw DynamoDB items)."""
    if not pk.startswith(keys.tenant_prefix(table.tenant_id)):
        raise ValueError("not a partition of this tenant")
    query: dict[str, Any] = {
        "TableName": table.table_name,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": pk}},
        "ProjectionExpression": projection,
        "ConsistentRead": consistent,
    }
    return table.query_pages(query)


def audit_days(table: TenantTable) -> Iterator[list[dict[str, Any]]]:
    """Pages of the tenant's day index (items whose ``sk`` is a day with events)."""
    return partition_pages(table, keys.audit_days_pk(table.tenant_id))


def fixed_partitions(tenant_id: str) -> list[str]:
    """The partitions every tenant may have whatever its tickets: counts,
    the aggregator's journals, idempotency records (its usage ledger is not
    among them: :func:`ledger_partitions`)."""
    return [
        keys.aggregate_pk(tenant_id),
        *keys.aggregate_journal_partitions(tenant_id),
        *keys.idempotency_partitions(tenant_id),
    ]


def ledger_partitions(tenant_id: str) -> frozenset[str]:
    """The tenant's usage ledger in the pool table: the usage counters and the
    metering function's journal (its items expire by their TTL). What it used
    is billable after it leaves: an offboarding keeps them (docs/usage.md)."""
    return frozenset(keys.usage_partitions(tenant_id))


def offboarded_key(tenant_id: str) -> dict[str, dict[str, str]]:
    """The ledger's note that the tenant was offboarded (when, and where it
    lived), written by ``make offboard``: what ``make usage`` reads once the
    tenant record is gone. Its sort key is no day's (``<YYYY-MM-DD>#<slot>``):
    a day's Query never reads it."""
    return {"pk": {"S": keys.usage_pk(tenant_id)}, "sk": {"S": OFFBOARDED_SK}}


def webhook_partitions(table: TenantTable) -> list[str]:
    """The deliveries and parking partitions of the tenant's webhooks, then its webhooks' own partition."""
    found: list[str] = []
    for page in partition_pages(table, keys.webhooks_pk(table.tenant_id)):
        for item in deserialized(page):
            webhook_id = str(item["sk"]).removeprefix(keys.WEBHOOK_SK_PREFIX)
            if str(item["sk"]).startswith(keys.WEBHOOK_SK_PREFIX) and keys.is_valid_webhook_id(webhook_id):
                found.append(keys.webhook_deliveries_pk(table.tenant_id, webhook_id))
                found.append(keys.webhook_parked_pk(table.tenant_id, webhook_id))
    return [*found, keys.webhook_rate_pk(table.tenant_id), keys.webhooks_pk(table.tenant_id)]


def deserialized(page: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [from_item(item) for item in page]


class Progress:
    """A progress line on stderr: rewritten in place on a terminal, one line
    every ``every`` steps otherwise (and always the last)."""

    def __init__(self, label: str, stream: TextIO | None = None, every: int = 100) -> None:
        self._label = label
        self._stream = stream or sys.stderr
        self._every = every
        self._count = 0
        self._started = time.monotonic()
        self._tty = self._stream.isatty()

    @property
    def count(self) -> int:
        return self._count

    def step(self, detail: str = "", n: int = 1) -> None:
        before, self._count = self._count, self._count + n
        if self._tty:
            self._stream.write(f"\r{self._label}: {self._count} {detail}\033[K")
        elif before // self._every != self._count // self._every:
            self._stream.write(f"{self._label}: {self._count} {detail}\n")
        self._stream.flush()

    def note(self, message: str) -> None:
        self._stream.write(("\n" if self._tty else "") + message + "\n")
        self._stream.flush()

    def done(self, detail: str = "") -> None:
        elapsed = time.monotonic() - self._started
        self.note(f"{self._label}: {self._count} {detail}in {elapsed:.1f} s".replace("  ", " "))


def keys_under_prefix(table: TenantTable) -> list[dict[str, Any]]:
    """Keys of every item under the tenant's prefix: a keys-only, consistent Scan of
    the whole table in :data:`SCAN_SEGMENTS` parallel segments (the operator's
    credentials). The one Scan of the project: the final check of ``make offboard``
    and of a move, after the walks above, for what no key names."""

    def segment(number: int) -> list[dict[str, Any]]:
        request: dict[str, Any] = {
            "TableName": table.table_name,
            "Segment": number,
            "TotalSegments": SCAN_SEGMENTS,
            "ProjectionExpression": "pk, sk",
            "FilterExpression": "begins_with(pk, :prefix)",
            "ExpressionAttributeValues": {":prefix": {"S": keys.tenant_prefix(table.tenant_id)}},
            "ConsistentRead": True,
        }
        found: list[dict[str, Any]] = []
        while True:
            page = table.call("scan", **request)
            found.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return found
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    with ThreadPoolExecutor(max_workers=SCAN_SEGMENTS) as pool:
        return [item for items in pool.map(segment, range(SCAN_SEGMENTS)) for item in items]


def mark_erasing(table: TenantTable, key: dict[str, Any]) -> None:
    """Mark a ticket summary ``erasing`` before it is deleted (if it is still
    there): the stream functions' filters drop both records, so an erase
    (``make offboard``'s, a move's) is neither counted, audited nor sent."""
    try:
        table.call(
            "update_item",
            TableName=table.table_name,
            Key={"pk": key["pk"], "sk": key["sk"]},
            UpdateExpression="SET #erasing = :true",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#erasing": keys.ERASING_ATTRIBUTE},
            ExpressionAttributeValues={":true": {"BOOL": True}},
        )
    except ClientError as exc:
        if error_code(exc) != "ConditionalCheckFailedException":
            raise
