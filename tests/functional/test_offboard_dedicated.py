"""Offboarding a dedicated tenant against a deployed stack, on moto's
CloudFormation, DynamoDB and KMS (``ops.offboard`` with
``ops.dedicated_teardown.StackTables``): tenants ``1`` and ``10`` each in a
table of its own (deployed by ``ops.dedicated`` beside a pool stack of
stand-ins); offboarding ``1`` erases its items in the pool (the usage ledger),
deletes its table (deletion protection turned off first), schedules its key's
deletion with the waiting period asked for, deletes its stack, and places its
record in the pool until the record goes; ``10``'s table, key, stack and items
are untouched. A tenant whose data is moving is refused, nothing written.
The export an operator makes first reads the tenant's own table.

moto's CloudFormation keeps a retained resource (``DeletionPolicy: Retain``)
when its stack is deleted, as AWS does: what the teardown relies on, the
table and the key being deleted by the command itself."""

from __future__ import annotations

import io
import json
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.kms.models import kms_backends

from local_stack.local_values import offline_values
from ops import dedicated as ops_dedicated
from ops import export, offboard
from ops import usage as ops_usage
from ops.api_keys import ApiKeys, offboarded_at
from ops.dedicated_teardown import StackTables
from ops.offboard import OffboardError, Offboarding
from ops.stack_target import Target
from ops.tenant_data import Progress
from ops.tenants import TenantAdmin, TenantOffboarded
from stack_model.dedicated import dedicated_values, stack_name
from stack_model.dedicated import table_definition as dedicated_table_definition
from stack_model.template import ACCOUNT_ID, REGION
from support_tickets.core import keys
from support_tickets.data.tenant_registry import tenant_configs
from support_tickets.usage.report import own_table_windows
from tests.conftest import all_items
from tests.functional.api_harness import Api, User
from tests.functional.conftest import STACK_NAME, local_state_file, stack_usage_plans
from tests.functional.test_dedicated_routing import items_of
from tests.functional.test_ops_dedicated import POOL_STACK, pool_template

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

POOL_TABLE = "SupportTicket"  # the stand-in pool stack's TableName export
WAITING_DAYS = 7


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC).timestamp()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def key_state(key_arn: str) -> tuple[str, datetime | None]:
    """The key's state and deletion date as moto holds them (DescribeKey fails
    on a key moto's CloudFormation made: its policy stays unserialized)."""
    key = kms_backends[ACCOUNT_ID][REGION].keys[key_arn.rsplit("/", 1)[-1]]
    return str(key.key_state), key.deletion_date


def summary(tenant: str) -> dict[str, Any]:
    return {**keys.ticket_key(tenant, "T1"), "ticket_id": {"S": "T1"}, "title": {"S": f"{tenant}'s"}}


def ledger(tenant: str) -> dict[str, Any]:
    return {"pk": {"S": keys.usage_pk(tenant)}, "sk": {"S": keys.usage_sk("2026-11-25", 0)}, "requests": {"N": "3"}}


@pytest.fixture
def placed(aws: None, dynamodb: DynamoDBClient, table_name: str) -> dict[str, dict[str, str]]:
    """Tenants 1 and 10, each in its own table (its stack deployed beside the
    pool stack), with a ticket there and its usage ledger in the pool."""
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(StackName=POOL_STACK, TemplateBody=pool_template())
    admin = TenantAdmin(dynamodb, table_name, phase_seconds=0.0, sleep=lambda _: None)
    outputs = {}
    for tenant in ("1", "10"):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*CloudWatch::Alarm.*")
            outputs[tenant] = ops_dedicated.deploy_to_aws(cloudformation, POOL_STACK, tenant)
        own = outputs[tenant]["TableName"]
        since = int(datetime.now(UTC).timestamp()) - 86_400
        admin.write(admin.record(tenant), {"placement": "dedicated", "table": own, "placed_at": since})
        dynamodb.put_item(TableName=own, Item=summary(tenant))
        dynamodb.put_item(TableName=table_name, Item=ledger(tenant))
    return outputs


@pytest.fixture
def tables_only(aws: None, dynamodb: DynamoDBClient, table_name: str) -> dict[str, str]:
    """Tenants 1 and 10 placed in tables of their own made directly (the
    dedicated template's definition, no stack): for what needs no CloudFormation."""
    admin = TenantAdmin(dynamodb, table_name, phase_seconds=0.0, sleep=lambda _: None)
    pool_values = offline_values(user_pool_id="p", client_id="c", identity_pool_id="i")
    made = {}
    for tenant in ("1", "10"):
        definition = dedicated_table_definition(dedicated_values(tenant, pool_values))
        dynamodb.create_table(**definition)
        made[tenant] = str(definition["TableName"])
        admin.write(admin.record(tenant), {"placement": "dedicated", "table": made[tenant], "placed_at": 1})
    return made


def offboarding(
    dynamodb: DynamoDBClient, table_name: str, clock: Clock, grace: float = 0, api_keys: ApiKeys | None = None
) -> Offboarding:
    cognito = boto3.client("cognito-idp", region_name=REGION)
    pool_id = cognito.create_user_pool(PoolName="p")["UserPool"]["Id"]
    own_tables = StackTables(
        boto3.client("cloudformation", region_name=REGION),
        dynamodb,
        boto3.client("kms", region_name=REGION),
        pool_stack=POOL_STACK,
        pool_table=POOL_TABLE,
    )
    return Offboarding(
        Target(dynamodb, table_name, cognito, pool_id, audit_retention_days=400),
        TenantAdmin(dynamodb, table_name, phase_seconds=35, sleep=clock.sleep, clock=clock),
        grace_seconds=grace,
        sleep=clock.sleep,
        clock=clock,
        progress=Progress("erased", io.StringIO()),
        own_tables=own_tables,
        key_waiting_days=WAITING_DAYS,
        api_keys=api_keys,
    )


def stack_status(name: str) -> str | None:
    try:
        (stack,) = boto3.client("cloudformation", region_name=REGION).describe_stacks(StackName=name)["Stacks"]
    except ClientError:
        return None
    return str(stack["StackStatus"])


def table_exists(dynamodb: DynamoDBClient, name: str) -> bool:
    return name in dynamodb.list_tables()["TableNames"]


def test_offboarding_1_deletes_its_table_and_stack_and_schedules_its_key_and_leaves_10_alone(
    placed: dict[str, dict[str, str]], dynamodb: DynamoDBClient, table_name: str
) -> None:
    theirs = all_items(dynamodb, placed["10"]["TableName"])
    clock = Clock()
    # When tenant 1 is offboarded, its record kept a while (tokens issued before stay valid)
    outcome = offboarding(dynamodb, table_name, clock, grace=3_900).run("1", "1")
    # Then its table is gone, its key pending deletion for the waiting period asked, its stack deleted
    own = placed["1"]
    assert outcome.own_table is not None
    assert outcome.own_table.as_dict() == {
        "table": own["TableName"],
        "table_deleted": True,
        "key_arn": own["KeyArn"],
        "key_deletion_date": outcome.own_table.key_deletion_date,
        "stack_deleted": True,
    }
    assert not table_exists(dynamodb, own["TableName"])
    state, deletion = key_state(own["KeyArn"])
    assert state == "PendingDeletion"
    assert deletion is not None
    scheduled = deletion.replace(tzinfo=UTC) - datetime.now(UTC)
    assert timedelta(days=WAITING_DAYS, minutes=-5) < scheduled <= timedelta(days=WAITING_DAYS)
    assert stack_status(stack_name(POOL_STACK, "1")) in (None, "DELETE_COMPLETE")
    # its ledger stays in the pool (the operator's record), and its record places it in the pool, its table the
    # one before
    assert ledger("1") in all_items(dynamodb, table_name)
    record = TenantAdmin(dynamodb, table_name).record("1")
    assert (record.placement, record.table, record.previous_table) == ("pool", None, own["TableName"])
    assert own_table_windows(record)[0][1] == record.placed_at  # its key priced no longer
    # and tenant 10 keeps everything: its table and items, its key, its stack, its ledger
    assert all_items(dynamodb, placed["10"]["TableName"]) == theirs
    assert key_state(placed["10"]["KeyArn"]) == ("Enabled", None)
    assert stack_status(stack_name(POOL_STACK, "10")) == "CREATE_COMPLETE"
    assert ledger("10") in all_items(dynamodb, table_name)
    assert TenantAdmin(dynamodb, table_name).record("10").table == placed["10"]["TableName"]

    # When it runs again once the record may go, it erases the record and finds nothing else of it
    clock.sleep(3_901)
    again = offboarding(dynamodb, table_name, clock).run("1", "1")
    assert (again.record, again.own_table) == ("erased", None)
    assert TenantAdmin(dynamodb, table_name).record("1").version == 0
    assert key_state(own["KeyArn"])[0] == "PendingDeletion"


def test_a_half_done_teardown_finishes_when_run_again(
    placed: dict[str, dict[str, str]], dynamodb: DynamoDBClient, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run interrupted right after it deleted tenant 1's table (its key and stack still there)
    own = placed["1"]

    def interrupted(self: StackTables, key_arn: str, waiting_days: int) -> str:
        raise ClientError({"Error": {"Code": "ThrottlingException"}}, "ScheduleKeyDeletion")

    monkeypatch.setattr(StackTables, "_schedule_key_deletion", interrupted)
    with pytest.raises(ClientError, match="ThrottlingException"):
        offboarding(dynamodb, table_name, Clock(), grace=3_900).run("1", "1")
    assert not table_exists(dynamodb, own["TableName"])
    assert key_state(own["KeyArn"])[0] == "Enabled"
    assert stack_status(stack_name(POOL_STACK, "1")) == "CREATE_COMPLETE"
    # When it runs again, the stack's output still names the key: its deletion is scheduled, the stack deleted
    monkeypatch.undo()
    outcome = offboarding(dynamodb, table_name, Clock(), grace=3_900).run("1", "1")
    assert outcome.own_table is not None
    assert (outcome.own_table.table_deleted, outcome.own_table.key_arn) == (False, own["KeyArn"])
    assert key_state(own["KeyArn"])[0] == "PendingDeletion"
    assert stack_status(stack_name(POOL_STACK, "1")) in (None, "DELETE_COMPLETE")
    assert TenantAdmin(dynamodb, table_name).record("1").placement == "pool"
    assert table_exists(dynamodb, placed["10"]["TableName"])


def test_a_tenant_whose_data_is_moving_is_refused_with_nothing_written(
    tables_only: dict[str, str], dynamodb: DynamoDBClient, table_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = TenantAdmin(dynamodb, table_name)
    admin.write(admin.record("1"), {"move_to": "pool", "move_phase": "COPYING", "move_started_at": 1})
    before = all_items(dynamodb, table_name)
    with pytest.raises(OffboardError, match="moving to pool"):
        offboarding(dynamodb, table_name, Clock()).run("1", "1")
    boto3.client("cloudformation", region_name=REGION).create_stack(StackName=POOL_STACK, TemplateBody=pool_template())
    argv = ["--tenant", "1", "--confirm", "1", "--stack", POOL_STACK, "--region", REGION]
    assert offboard.main(argv) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: 1's data is moving to pool (COPYING): nothing changed")
    assert error.count("\n") == 1
    assert all_items(dynamodb, table_name) == before
    assert table_exists(dynamodb, tables_only["1"])
    assert TenantAdmin(dynamodb, table_name).record("1").status == "ACTIVE"


@pytest.mark.parametrize("days", ["6", "31", "0"])
def test_a_waiting_period_kms_does_not_take_is_a_one_line_error(
    aws: None, dynamodb: DynamoDBClient, table_name: str, days: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = all_items(dynamodb, table_name)
    argv = ["--tenant", "1", "--confirm", "1", "--stack", POOL_STACK, "--key-waiting-days", days]
    assert offboard.main(argv) == 1
    error = capsys.readouterr().err
    assert "7 to 30 days" in error
    assert error.count("\n") == 1
    assert all_items(dynamodb, table_name) == before


def test_the_export_before_an_offboarding_reads_the_tenants_own_table(
    tables_only: dict[str, str], api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a ticket of each tenant, written where its record places it (its own table)
    tenant_configs().clear()
    mine = api.new_ticket(User("1", "alice"), title="in 1's own table")["ticket_id"]
    api.new_ticket(User("10", "bob"), title="in 10's own table")
    capsys.readouterr()
    # When the operator exports tenant 1
    boto3.client("cloudformation", region_name=REGION).create_stack(StackName=POOL_STACK, TemplateBody=pool_template())
    assert export.main(["--tenant", "1", "--stack", POOL_STACK, "--region", REGION]) == 0
    # Then its ticket is there (its own table's), and nothing of 10's
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["ticket"]["ticket_id"], line["ticket"]["title"]) for line in lines] == [(mine, "in 1's own table")]


def usage_shown(tenant: str, state: Path, now: datetime) -> dict[str, Any]:
    """``make usage TENANT=<t>``'s JSON (today, UTC)."""
    out = io.StringIO()
    assert ops_usage.main(["--tenant", tenant, "--local", "--local-state", str(state)], out=out, now=now) == 0
    shown: dict[str, Any] = json.loads(out.getvalue())
    return shown


@pytest.mark.parametrize("placement", ["dedicated", "pool"])
@pytest.mark.parametrize(("leaving", "staying"), [("1", "10"), ("10", "1")])
def test_an_offboarded_tenants_usage_of_the_day_is_kept_and_reported_marked_offboarded(
    placed: dict[str, dict[str, str]],
    dynamodb: DynamoDBClient,
    table_name: str,
    tmp_path: Path,
    placement: str,
    leaving: str,
    staying: str,
) -> None:
    # Given both tenants with usage today (the leaving one in its own table, or moved back to the pool)
    now = datetime.now(UTC)
    today = now.date().isoformat()
    admin = TenantAdmin(dynamodb, table_name)
    if placement == "pool":
        record = admin.record(leaving)
        changes = {"placement": "pool", "table": None, "placed_at": int(now.timestamp()) - 3_600}
        admin.write(record, {**changes, "previous_table": record.table, "previous_placed_at": record.placed_at})
    for tenant in (leaving, staying):
        item = {"pk": {"S": keys.usage_pk(tenant)}, "sk": {"S": keys.usage_sk(today, 2)}, "requests": {"N": "7"}}
        dynamodb.put_item(TableName=table_name, Item=item)
    state = local_state_file(tmp_path, table_name)
    before = usage_shown(leaving, state, now)
    theirs = usage_shown(staying, state, now)
    ledger_of_staying = items_of(dynamodb, table_name, staying)
    clock = Clock()
    # When the leaving tenant is offboarded (its record kept a while, then erased)
    offboarding(dynamodb, table_name, clock, grace=3_900).run(leaving, leaving)
    during = usage_shown(leaving, state, now)
    clock.sleep(3_901)
    assert offboarding(dynamodb, table_name, clock).run(leaving, leaving).record == "erased"
    after = usage_shown(leaving, state, now)
    # Then its usage of the day is still reported, marked offboarded, its own key's share included
    assert before["requests_total"] == 7
    assert "offboarded_at" not in before
    for shown in (during, after):
        assert shown.pop("offboarded_at").startswith(today[:4])
        assert shown == before
    assert "dedicated" in before["cost_usd"]  # a day it was (or had been) in its own table
    # and its ledger is all that is left of it; the other tenant is untouched
    kept = {item["pk"]["S"] for item in items_of(dynamodb, table_name, leaving)}
    assert kept == {keys.usage_pk(leaving)}
    assert items_of(dynamodb, table_name, staying) == ledger_of_staying
    assert usage_shown(staying, state, now) == theirs


def report(state: Path, now: datetime, day: str | None = None) -> tuple[str, dict[str, list[str]]]:
    """``make usage``'s table (today, UTC, or ``day``): its first line, and each
    tenant's row by the tenant's label ("10", "1 (offboarded)"), its figures."""
    out = io.StringIO()
    days = ["--day", day] if day else []
    assert ops_usage.main([*days, "--local", "--local-state", str(state)], out=out, now=now) == 0
    first, _, _, *rows, _, _ = out.getvalue().splitlines()
    figures = len(ops_usage.COLUMNS) - 1
    return first, {" ".join(row.split()[:-figures]): row.split()[-figures:] for row in rows}


@pytest.mark.parametrize("placement", ["dedicated", "pool"])
@pytest.mark.parametrize(("leaving", "staying"), [("1", "10"), ("10", "1")])
def test_the_all_tenants_report_lists_an_offboarded_tenant_marked_and_its_key_stays_a_tombstone(
    placed: dict[str, dict[str, str]],
    dynamodb: DynamoDBClient,
    table_name: str,
    tmp_path: Path,
    placement: str,
    leaving: str,
    staying: str,
) -> None:
    # Given both tenants onboarded (their API keys list them in the report), with usage today
    now = datetime.now(UTC)
    today = now.date().isoformat()
    stack_keys = ApiKeys(boto3.client("apigateway", region_name=REGION), stack_usage_plans(), STACK_NAME)
    admin = TenantAdmin(dynamodb, table_name, keys=stack_keys)
    if placement == "pool":
        record = admin.record(leaving)
        changes = {"placement": "pool", "table": None, "placed_at": int(now.timestamp()) - 3_600}
        admin.write(record, {**changes, "previous_table": record.table, "previous_placed_at": record.placed_at})
    for tenant, requests in ((leaving, "7"), (staying, "5")):
        admin.ensure(tenant)
        item = {"pk": {"S": keys.usage_pk(tenant)}, "sk": {"S": keys.usage_sk(today, 2)}, "requests": {"N": requests}}
        dynamodb.put_item(TableName=table_name, Item=item)
    state = local_state_file(tmp_path, table_name)
    first, before = report(state, now)
    assert first.endswith(": 2 tenants")
    assert before[leaving][0] == "7"
    # When the leaving tenant is offboarded (its record erased)
    clock = Clock()
    assert offboarding(dynamodb, table_name, clock, api_keys=stack_keys).run(leaving, leaving).record == "erased"
    # Then the day's report still lists it, its row the same figures, marked offboarded; the other's unchanged
    first, after = report(state, now)
    assert first.endswith(": 2 tenants")
    assert after == {f"{leaving} (offboarded)": before[leaving], staying: before[staying]}
    # but not for a day it has no usage (its own table's share included): then the other tenant only
    _, earlier = report(state, now, (now - timedelta(days=3)).date().isoformat())
    assert list(earlier) == [staying]
    # Its key stays as a tombstone: tagged with when it left (as its ledger's note), in no usage plan, disabled
    key = stack_keys.describe(leaving)
    assert key is not None
    note = dynamodb.get_item(TableName=table_name, Key={"pk": {"S": keys.usage_pk(leaving)}, "sk": {"S": "OFFBOARDED"}})
    assert offboarded_at(key) == int(note["Item"]["offboarded_at"]["N"])
    assert key["enabled"] is False
    assert stack_keys.client.get_usage_plans(keyId=key["id"])["items"] == []
    # so it is never onboarded again, nothing written; the other tenant's key is still in its plan
    before_refusal = all_items(dynamodb, table_name)
    with pytest.raises(TenantOffboarded, match=f"tenant {leaving} was offboarded"):
        admin.ensure(leaving)
    assert all_items(dynamodb, table_name) == before_refusal
    assert stack_keys.describe(leaving) == key
    theirs = stack_keys.describe(staying)
    assert theirs is not None
    assert theirs["enabled"] is True
    assert offboarded_at(theirs) is None
    assert stack_keys.plans_of(theirs["id"]) == {stack_keys.plan_id("basic")}
