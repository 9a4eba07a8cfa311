"""Offboarding a dedicated tenant in the running local stack, as an operator
does it (``python -m ops.offboard --local``): its table deleted, its key's
deletion scheduled with the waiting period asked for, its stream no longer
polled, its pool items erased and its record (kept, suspended, until its
tokens expire) placing it in the pool; the neighbour whose id extends its own
(``<n>`` and ``<n>0``, as ``1`` and ``10``) keeps its table, key, items and
stream. Fresh tenants, so that the session's other tests are not touched.
The record's own erasure, a last pass later, is ``tests/functional``'s (each
pass walks every GSI1 shard of the tenant: seconds here)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError

from ops.tenants import TenantAdmin
from support_tickets.core import keys
from tests.e2e.conftest import RunningStack, new_tenant_id, run_main
from tests.e2e.test_dedicated_tables import deploy, summary

WAITING_DAYS = 7


def test_offboarding_a_dedicated_tenant_deletes_its_table_and_schedules_its_key(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    other = tenant + "0"
    operator, kms = stack.operator("dynamodb"), stack.operator("kms")
    pool = str(stack.state["table_name"])
    admin = TenantAdmin(operator, pool, phase_seconds=0.0, sleep=lambda _: None)
    # Given both placed in tables of their own, with a ticket there and usage in the pool
    tables = {t: deploy(stack, t) for t in (tenant, other)}
    for t in (tenant, other):
        stack.onboard(t)
        changes = {"placement": "dedicated", "table": tables[t]["TableName"], "placed_at": 1_700_000_000}
        admin.write(admin.record(t), changes)
        operator.put_item(TableName=tables[t]["TableName"], Item=summary(t, f"{t}'s"))
        ledger = {"pk": {"S": keys.usage_pk(t)}, "sk": {"S": keys.usage_sk("2026-11-25", 0)}, "requests": {"N": "1"}}
        operator.put_item(TableName=pool, Item=ledger)
    stack.drain()

    # When the first is offboarded
    result = run_main(
        "ops.offboard", "--tenant", tenant, "--confirm", tenant, "--local",
        "--local-state", str(stack.state_dir / "stack.json"), "--phase-seconds", "0", "--grace-seconds", "3600",
        "--settle", "0", "--key-waiting-days", str(WAITING_DAYS),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["record"].startswith("kept until ")
    assert outcome["own_table"]["table"] == tables[tenant]["TableName"]
    assert f"its table {tables[tenant]['TableName']} is deleted" in result.stderr

    # Then its table is gone and its key pending deletion for the waiting period asked
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        operator.describe_table(TableName=tables[tenant]["TableName"])
    key = kms.describe_key(KeyId=tables[tenant]["KeyArn"].rsplit("/", 1)[-1])["KeyMetadata"]
    assert key["KeyState"] == "PendingDeletion"
    waiting = key["DeletionDate"] - datetime.now(UTC)
    assert timedelta(days=WAITING_DAYS, minutes=-5) < waiting <= timedelta(days=WAITING_DAYS)
    # its ledger stays in the pool (with the offboarding's note), and its record, suspended, places it in the pool
    record = admin.record(tenant)
    assert (record.status, record.placement, record.table) == ("SUSPENDED", "pool", None)
    assert record.previous_table == tables[tenant]["TableName"]
    ledger = operator.query(
        TableName=pool,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": keys.usage_pk(tenant)}},
    )["Items"]
    assert {item["sk"]["S"] for item in ledger} >= {keys.usage_sk("2026-11-25", 0), "OFFBOARDED"}

    # and the neighbour keeps its table, its item, its key, its record, and its stream's pollers
    theirs = tables[other]["TableName"]
    assert operator.get_item(TableName=theirs, Key=keys.ticket_key(other, "T1"))["Item"]["title"]["S"] == f"{other}'s"
    neighbour_key = kms.describe_key(KeyId=tables[other]["KeyArn"].rsplit("/", 1)[-1])["KeyMetadata"]
    assert neighbour_key["KeyState"] == "Enabled"
    assert admin.record(other).table == theirs
    before = stack.drain()
    operator.put_item(TableName=theirs, Item=summary(other, "still polled"))
    after = stack.drain()
    assert after["drained"]
    assert after["delivered"] - before["delivered"] == 2  # the aggregator's and the audit writer's
