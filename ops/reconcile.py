"""Recount a tenant's tickets per status and repair drift in its aggregates.

    python -m ops.reconcile --tenant acme [--stack support-tickets | --local] [--repair]

The truth is a ``Select=COUNT`` query per status on GSI1 (``tenant_status`` =
``TENANT#<t>|<STATUS>``): no Scan, no items transferred. Drift is what the
stream function could not apply (records that ended in the on-failure queue,
or writes made while the function was broken).

Repairing without racing the stream function: a repair is one conditional
``ADD count :drift`` guarded by the aggregate item's ``rev`` (which every
stream write bumps). It is applied only when the same drift is seen twice,
``--settle`` seconds apart, with ``rev`` unchanged in between (the stream
function did not touch the item, so the drift is not records in flight); if
the stream writes in between, the repair is skipped and reported, never
applied on stale numbers. Run it when the stream is caught up (the
function's IteratorAge near zero): records still waiting for a retry would be
counted twice.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from support_tickets import keys
from support_tickets.keys import TicketStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class StatusCount:
    status: str
    actual: int
    stored: int
    revision: str | None

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


def recount(client: DynamoDBClient, table_name: str, tenant_id: str, status: TicketStatus) -> int:
    """Tickets of ``tenant_id`` in ``status``, counted on GSI1 (paginated COUNT)."""
    query: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": keys.GSI1_NAME,
        "KeyConditionExpression": "tenant_status = :ts",
        "ExpressionAttributeValues": {":ts": {"S": keys.tenant_status(tenant_id, status)}},
        "Select": "COUNT",
    }
    total = 0
    while True:
        page = client.query(**query)
        total += page["Count"]
        if "LastEvaluatedKey" not in page:
            return total
        query["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def stored_count(
    client: DynamoDBClient, table_name: str, tenant_id: str, status: TicketStatus
) -> tuple[int, str | None]:
    item = client.get_item(
        TableName=table_name,
        Key={"pk": {"S": keys.aggregate_pk(tenant_id)}, "sk": {"S": status.value}},
        ConsistentRead=True,
        ProjectionExpression="#count, #rev",
        ExpressionAttributeNames={"#count": "count", "#rev": "rev"},
    ).get("Item", {})
    return int(item.get("count", {}).get("N", "0")), item.get("rev", {}).get("N")


def measure(client: DynamoDBClient, table_name: str, tenant_id: str) -> list[StatusCount]:
    counts = []
    for status in TicketStatus:
        stored, revision = stored_count(client, table_name, tenant_id, status)
        counts.append(StatusCount(status.value, recount(client, table_name, tenant_id, status), stored, revision))
    return counts


def _repair(client: DynamoDBClient, table_name: str, tenant_id: str, count: StatusCount) -> bool:
    values: dict[str, Any] = {":drift": {"N": str(count.drift)}, ":one": {"N": "1"}}
    if count.revision is None:
        condition = "attribute_not_exists(#rev)"
    else:
        condition = "#rev = :rev"
        values[":rev"] = {"N": count.revision}
    try:
        client.update_item(
            TableName=table_name,
            Key={"pk": {"S": keys.aggregate_pk(tenant_id)}, "sk": {"S": count.status}},
            UpdateExpression="ADD #count :drift, #rev :one",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#count": "count", "#rev": "rev"},
            ExpressionAttributeValues=values,
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
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
    first = measure(client, table_name, tenant_id)
    report = Report(tenant_id=tenant_id, counts=first, repaired={}, skipped={})
    if not repair or not report.drifted:
        return report
    sleep(settle_seconds)
    second = {count.status: count for count in measure(client, table_name, tenant_id)}
    report.counts = list(second.values())
    for before in first:
        after = second[before.status]
        if not before.drift and not after.drift:
            continue
        if (before.drift, before.revision) != (after.drift, after.revision):
            report.skipped[before.status] = "still moving (stream writes or ticket changes); run again later"
        elif _repair(client, table_name, tenant_id, after):
            report.repaired[before.status] = after.drift
        else:
            report.skipped[before.status] = "the stream function wrote meanwhile; run again later"
    return report


def _client_and_table(args: argparse.Namespace) -> tuple[DynamoDBClient, str]:
    import boto3

    if args.local:
        state = json.loads(Path(args.local_state).read_text())
        client = boto3.client(
            "dynamodb",
            region_name=state.get("region", "us-east-1"),
            endpoint_url=state["endpoint_url"],
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - the local emulator takes any key
        )
        return client, state["table_name"]
    session = boto3.Session(region_name=args.region) if args.region else boto3.Session()
    outputs = {
        output["OutputKey"]: output["OutputValue"]
        for output in session.client("cloudformation").describe_stacks(StackName=args.stack)["Stacks"][0]["Outputs"]
    }
    return session.client("dynamodb"), outputs["TableName"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.reconcile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenant", required=True)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--stack", help="deployed stack name (reads its TableName output)")
    target.add_argument("--local", action="store_true", help="the running `make dev` stack")
    parser.add_argument("--local-state", default=".local/stack.json", help=argparse.SUPPRESS)
    parser.add_argument("--region")
    parser.add_argument("--repair", action="store_true", help="apply stable drift (default: report only)")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds between the two measurements")
    args = parser.parse_args(argv)
    try:
        keys.validate_tenant_id(args.tenant)
    except keys.InvalidTenantId as exc:
        parser.error(str(exc))
    client, table_name = _client_and_table(args)
    report = reconcile(client, table_name, args.tenant, repair=args.repair, settle_seconds=args.settle)
    json.dump(report.as_dict(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 1 if report.drifted and not report.repaired else 0


if __name__ == "__main__":
    raise SystemExit(main())
