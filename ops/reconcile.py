"""Recount a tenant's tickets per status and repair drift in its aggregates.

    python -m ops.reconcile --tenant acme [--stack support-tickets | --local] [--repair]

The truth is a keys-only query per status on GSI1 (``ProjectionExpression``
``pk, sk``), over every key the tenant's tickets of that status can be under
(every shard of every shard count in its tenant record), counting only the
rows that are the tenant's own ticket summaries: GSI1 keys are not confined by
IAM, so a row another tenant planted under this tenant's key (its ``pk`` is
that tenant's) or a malformed one is not counted (``Select=COUNT`` would count
it, and a repair would write it into this tenant's counts); the rows left out
are reported. No Scan. The stored count
of a status is the sum of its count items (``<STATUS>#<slot>`` written by the
stream function, ``<STATUS>`` written by this command). Drift is what the
stream function could not apply (records that ended in the on-failure queue,
or writes made while the function was broken).

Repairing without racing the stream function: a repair is one transaction
that adds the drift to the ``<STATUS>`` item and checks that no count item of
that status changed its ``rev`` (which every stream write bumps). It is
applied only when the same drift is seen twice, ``--settle`` seconds apart,
with the same revisions in between (the stream function did not touch the
counts, so the drift is not records in flight); if the stream writes in
between, the repair is skipped and reported, never applied on stale numbers.
Run it when the stream is caught up (the function's IteratorAge near zero):
records still waiting for a retry would be counted twice. A tenant that has no
record is a one-line error and exit status 1.

Where: the table the tenant lives in, the pool table or a dedicated tenant's
own (its record, always in the pool table, names it): its tickets, its GSI1
keys and its counts are all there. A tenant whose data is moving between
tables is reported, never repaired (the move recounts its counts at its
switch).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ops.stack_target import add_target_arguments, dynamodb_target
from ops.tenants import NoSuchTenant, existing_record
from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from support_tickets.data.placement import data_table
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.data.tenant_registry import TenantConfig, read_tenant_config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class StatusCount:
    status: str
    actual: int
    stored: int
    revisions: dict[str, str]  # count item sk -> its rev
    # GSI1 rows under the tenant's keys that are not its ticket summaries
    # (planted by another tenant, or malformed): not counted, reported.
    ignored: int = 0

    @property
    def drift(self) -> int:
        return self.actual - self.stored


@dataclass
class Report:
    tenant_id: str
    counts: list[StatusCount]
    repaired: dict[str, int]
    skipped: dict[str, str]

    @property
    def drifted(self) -> bool:
        return any(count.drift for count in self.counts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "counts": [{**asdict(count), "drift": count.drift} for count in self.counts],
            "repaired": self.repaired,
            "skipped": self.skipped,
        }


NO_REVISION = "-"  # a count item no stream write ever touched
MOVING = "the tenant's data is moving between tables (the move recounts its counts); run again after it"


def _unchanged(revision: str) -> tuple[str, dict[str, Any]]:
    """A condition that the item's rev is still ``revision``, and its values."""
    if revision == NO_REVISION:
        return "attribute_not_exists(#rev)", {}
    return "#rev = :rev", {":rev": {"N": revision}}


def tenant_config(client: DynamoDBClient, table_name: str, tenant_id: str) -> TenantConfig:
    return read_tenant_config(TenantTable(tenant_id, table_name, OwnClient(client)))


def recount(
    client: DynamoDBClient, table_name: str, tenant_id: str, status: TicketStatus, shard_counts: list[int] | None = None
) -> int:
    """Tickets of ``tenant_id`` in ``status``, counted on GSI1 over every key they
    can be under (paginated keys-only queries), the tenant's own summaries only."""
    return recount_rows(client, table_name, tenant_id, status, shard_counts)[0]


def recount_rows(
    client: DynamoDBClient, table_name: str, tenant_id: str, status: TicketStatus, shard_counts: list[int] | None = None
) -> tuple[int, int]:
    """(the tenant's own ticket summaries, other rows under its keys) in ``status``."""
    if shard_counts is None:
        shard_counts = list(tenant_config(client, table_name, tenant_id).read_shards)
    own = others = 0
    for partition in keys.status_partitions(tenant_id, status, shard_counts):
        query: dict[str, Any] = {
            "TableName": table_name,
            "IndexName": keys.GSI1_NAME,
            "KeyConditionExpression": "tenant_status = :ts",
            "ExpressionAttributeValues": {":ts": {"S": partition}},
            "ProjectionExpression": "pk, sk",
        }
        while True:
            page = client.query(**query)
            for item in page["Items"]:
                if _own_summary(tenant_id, item):
                    own += 1
                else:
                    others += 1
            if "LastEvaluatedKey" not in page:
                break
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return own, others


def _own_summary(tenant_id: str, item: dict[str, Any]) -> bool:
    """What the stream function counts: a ticket summary of this tenant."""
    suffix = keys.own_suffix(tenant_id, str(item.get("pk", {}).get("S", "")))
    return (
        suffix is not None
        and keys.ticket_id_of_suffix(suffix) is not None
        and item.get("sk", {}).get("S") == keys.SUMMARY_SK
    )


def stored_counts(
    client: DynamoDBClient, table_name: str, tenant_id: str
) -> dict[TicketStatus, tuple[int, dict[str, str]]]:
    """Per status: the sum of its count items and each item's revision (one Query)."""
    stored: dict[TicketStatus, tuple[int, dict[str, str]]] = {status: (0, {}) for status in TicketStatus}
    query: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": keys.aggregate_pk(tenant_id)}},
        "ConsistentRead": True,
    }
    while True:
        page = client.query(**query)
        for item in page["Items"]:
            status = keys.status_from_aggregate_sk(item["sk"]["S"])
            if status is None:
                continue
            total, revisions = stored[status]
            revisions[item["sk"]["S"]] = item.get("rev", {}).get("N", NO_REVISION)
            stored[status] = (total + int(item.get("count", {}).get("N", "0")), revisions)
        if "LastEvaluatedKey" not in page:
            return stored
        query["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def stored_count(client: DynamoDBClient, table_name: str, tenant_id: str, status: TicketStatus) -> int:
    return stored_counts(client, table_name, tenant_id)[status][0]


def measure(
    client: DynamoDBClient, table_name: str, tenant_id: str, record: TenantConfig | None = None
) -> list[StatusCount]:
    """Per status, the recount and the stored count, both in the table the
    tenant lives in (its record, in the pool table ``table_name``, says which)."""
    record = record or tenant_config(client, table_name, tenant_id)
    data = data_table(record, table_name)
    shard_counts = list(record.read_shards)
    stored = stored_counts(client, data, tenant_id)
    counts = []
    for status in TicketStatus:
        own, others = recount_rows(client, data, tenant_id, status, shard_counts)
        counts.append(StatusCount(status.value, own, stored[status][0], stored[status][1], others))
    return counts


def _repair(client: DynamoDBClient, table_name: str, tenant_id: str, count: StatusCount) -> bool:
    pk = keys.aggregate_pk(tenant_id)
    correction = keys.aggregate_sk(count.status)
    unchanged = []
    for sk, revision in sorted(count.revisions.items()):
        if sk == correction:
            continue
        condition, values = _unchanged(revision)
        check: dict[str, Any] = {
            "TableName": table_name,
            "Key": {"pk": {"S": pk}, "sk": {"S": sk}},
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#rev": "rev"},
        }
        if values:
            check["ExpressionAttributeValues"] = values
        unchanged.append({"ConditionCheck": check})
    condition, values = _unchanged(count.revisions.get(correction, NO_REVISION))
    update = {
        "Update": {
            "TableName": table_name,
            "Key": {"pk": {"S": pk}, "sk": {"S": correction}},
            "UpdateExpression": "ADD #count :drift, #rev :one",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#count": "count", "#rev": "rev"},
            "ExpressionAttributeValues": {":drift": {"N": str(count.drift)}, ":one": {"N": "1"}, **values},
        }
    }
    try:
        client.transact_write_items(TransactItems=[*unchanged, update])  # type: ignore[list-item]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
            return False
        raise
    return True


def reconcile(
    client: DynamoDBClient,
    table_name: str,
    tenant_id: str,
    *,
    repair: bool = False,
    settle_seconds: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Report:
    keys.validate_tenant_id(tenant_id)
    before_record = tenant_config(client, table_name, tenant_id)
    first = measure(client, table_name, tenant_id, before_record)
    report = Report(tenant_id=tenant_id, counts=first, repaired={}, skipped={})
    if not repair or not report.drifted:
        return report
    sleep(settle_seconds)
    record = tenant_config(client, table_name, tenant_id)
    second = {count.status: count for count in measure(client, table_name, tenant_id, record)}
    report.counts = list(second.values())
    data = data_table(record, table_name)
    if record.moving or before_record.moving or data != data_table(before_record, table_name):
        # The mover recounts the counts in the new table at its switch.
        report.skipped = {count.status: MOVING for count in first if count.drift}
        return report
    for before in first:
        after = second[before.status]
        if not before.drift and not after.drift:
            continue
        if (before.drift, before.revisions) != (after.drift, after.revisions):
            report.skipped[before.status] = "still moving (stream writes or ticket changes); run again later"
        elif _repair(client, data, tenant_id, after):
            report.repaired[before.status] = after.drift
        else:
            report.skipped[before.status] = "the stream function wrote meanwhile; run again later"
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.reconcile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenant", required=True)
    add_target_arguments(parser)
    parser.add_argument("--repair", action="store_true", help="apply stable drift (default: report only)")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds between the two measurements")
    args = parser.parse_args(argv)
    try:
        keys.validate_tenant_id(args.tenant)
    except keys.InvalidTenantId as exc:
        parser.error(str(exc))
    client, table_name = dynamodb_target(args)
    try:
        existing_record(client, table_name, args.tenant)
    except NoSuchTenant as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    report = reconcile(client, table_name, args.tenant, repair=args.repair, settle_seconds=args.settle)
    json.dump(report.as_dict(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 1 if report.drifted and not report.repaired else 0


if __name__ == "__main__":
    raise SystemExit(main())
