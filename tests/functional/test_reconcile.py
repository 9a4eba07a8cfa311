"""ops.reconcile: recount the tenant's own ticket summaries on GSI1 (keys only),
report drift, repair it only when it is stable and the stream function did not
write meanwhile; rows another tenant planted under its keys are never counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest

from ops.reconcile import main, reconcile
from ops.tenants import TenantAdmin
from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import CreateTicketRequest
from tests.conftest import REGION, RepoFactory, random_tenant_id
from tests.functional.conftest import OPERATOR_STATE
from tests.functional.stream_harness import StreamHarness

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@pytest.fixture
def harness(aws: None, dynamodb: DynamoDBClient, table_name: str) -> StreamHarness:
    return StreamHarness(dynamodb, boto3.client("dynamodbstreams", region_name=REGION), table_name)


def seed(repo_for: RepoFactory, harness: StreamHarness, tenant_id: str) -> None:
    repo = repo_for(tenant_id)
    ids = [repo.create_ticket(CreateTicketRequest(title="t"), created_by="a").ticket_id for _ in range(4)]
    repo.change_status(ids[:1], TicketStatus.CLOSED, actor="alice")
    harness.deliver(harness.new_records())


def corrupt(dynamodb: DynamoDBClient, table_name: str, tenant_id: str, status: str, delta: int) -> None:
    """Drift as a lost stream record leaves it (no rev bump: the stream never wrote)."""
    dynamodb.update_item(
        TableName=table_name,
        Key={"pk": {"S": keys.aggregate_pk(tenant_id)}, "sk": {"S": status}},
        UpdateExpression="ADD #count :d",
        ExpressionAttributeNames={"#count": "count"},
        ExpressionAttributeValues={":d": {"N": str(delta)}},
    )


def test_no_drift_after_the_stream_drains(
    repo_for: RepoFactory, harness: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = random_tenant_id()
    seed(repo_for, harness, tenant)
    report = reconcile(dynamodb, table_name, tenant, repair=True, sleep=lambda _: None)
    assert not report.drifted
    assert {count.status: count.actual for count in report.counts} == {"OPEN": 3, "IN_PROGRESS": 0, "CLOSED": 1}
    assert report.repaired == {}


def test_drift_is_reported_then_repaired_for_that_tenant_only(
    repo_for: RepoFactory, harness: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    seed(repo_for, harness, "1")
    seed(repo_for, harness, "10")
    corrupt(dynamodb, table_name, "1", "OPEN", -2)
    corrupt(dynamodb, table_name, "10", "OPEN", 5)
    report_only = reconcile(dynamodb, table_name, "1")
    assert [(c.status, c.drift) for c in report_only.counts if c.drift] == [("OPEN", 2)]
    assert harness.counts("1")[TicketStatus.OPEN] == 1  # reporting changes nothing

    report = reconcile(dynamodb, table_name, "1", repair=True, sleep=lambda _: None)
    assert report.repaired == {"OPEN": 2}
    assert harness.counts("1") == harness.truth("1")
    assert harness.counts("10")[TicketStatus.OPEN] == 8  # tenant 10 untouched


def test_repair_is_skipped_when_the_stream_writes_meanwhile(
    repo_for: RepoFactory, harness: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = random_tenant_id()
    seed(repo_for, harness, tenant)
    corrupt(dynamodb, table_name, tenant, "OPEN", 3)
    repo = repo_for(tenant)

    def stream_catches_up(_: float) -> None:
        repo.create_ticket(CreateTicketRequest(title="new"), created_by="a")
        harness.deliver(harness.new_records())

    report = reconcile(dynamodb, table_name, tenant, repair=True, sleep=stream_catches_up)
    assert report.repaired == {}
    assert "OPEN" in report.skipped
    assert harness.counts(tenant)[TicketStatus.OPEN] == harness.truth(tenant)[TicketStatus.OPEN] + 3


def test_recount_uses_keys_only_queries_on_gsi1_only(
    repo_for: RepoFactory, harness: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = random_tenant_id()
    seed(repo_for, harness, tenant)
    calls: list[tuple[str, dict[str, object]]] = []
    dynamodb = boto3.client("dynamodb", region_name=REGION)  # its own: it listens to the calls
    dynamodb.meta.events.register(
        "before-parameter-build.dynamodb.*", lambda model, params, **_: calls.append((model.name, params))
    )
    reconcile(dynamodb, table_name, tenant)
    queries = [params for name, params in calls if name == "Query"]
    assert {name for name, _ in calls} == {"Query", "GetItem"}  # GetItem: the tenant record
    counting = [params for params in queries if "IndexName" in params]
    assert len(counting) == 3
    assert all(params["ProjectionExpression"] == "pk, sk" and params["IndexName"] == "GSI1" for params in counting)
    assert all("Select" not in params and "FilterExpression" not in params for params in counting)
    (stored,) = [params for params in queries if "IndexName" not in params]
    assert stored["ExpressionAttributeValues"] == {":pk": {"S": keys.aggregate_pk(tenant)}}


def plant(dynamodb: DynamoDBClient, table_name: str, pk: str, tenant_status: str, sk: str = keys.SUMMARY_SK) -> None:
    """An item whose GSI1 key is ``tenant_status``, written by the operator's client."""
    dynamodb.put_item(
        TableName=table_name,
        Item={
            "pk": {"S": pk},
            "sk": {"S": sk},
            "tenant_status": {"S": tenant_status},
            "resolver": {"S": keys.UNASSIGNED_RESOLVER},
        },
    )


@pytest.mark.parametrize(("victim", "attacker"), [("1", "10"), ("10", "1")])
def test_rows_planted_under_the_tenants_keys_are_not_counted_nor_repaired_in(
    repo_for: RepoFactory,
    harness: StreamHarness,
    dynamodb: DynamoDBClient,
    table_name: str,
    victim: str,
    attacker: str,
) -> None:
    # Given the victim's tickets, counted by the stream, and rows the attacker
    # (and a malformed own row) put under the victim's OPEN key
    seed(repo_for, harness, victim)
    open_key = keys.tenant_status(victim, TicketStatus.OPEN)
    for n in range(5):
        plant(dynamodb, table_name, keys.ticket_pk(attacker, f"planted{n}"), open_key)
    plant(dynamodb, table_name, keys.ticket_pk(victim, "stray"), open_key, sk="COMMENT#x")
    # When the operator reconciles and repairs the victim
    report = reconcile(dynamodb, table_name, victim, repair=True, sleep=lambda _: None)
    # Then nothing drifted: the planted rows are reported, never counted nor written into the counts
    open_count = next(count for count in report.counts if count.status == "OPEN")
    assert (open_count.actual, open_count.stored) == (3, 3)
    assert not report.drifted
    assert report.repaired == {}
    assert harness.counts(victim)[TicketStatus.OPEN] == 3
    assert open_count.ignored == 6
    assert report.as_dict()["counts"][0]["ignored"] == 6


def test_cli_against_the_local_stack_state_file(
    repo_for: RepoFactory,
    harness: StreamHarness,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    table_name: str,
) -> None:
    tenant = random_tenant_id()
    seed(repo_for, harness, tenant)
    TenantAdmin(harness.dynamodb, table_name).ensure(tenant)  # onboarded
    state = tmp_path / "stack.json"
    state.write_text(json.dumps({"emulator_url": None, "table_name": table_name, **OPERATOR_STATE}))
    capsys.readouterr()
    # endpoint_url None: the client goes to "AWS", which moto intercepts in this test.
    exit_code = main(["--tenant", tenant, "--local", "--local-state", str(state)])
    output = json.loads(capsys.readouterr().out)
    assert exit_code == 0
    assert output["tenant_id"] == tenant
    assert [count["drift"] for count in output["counts"]] == [0, 0, 0]


def test_cli_refuses_an_invalid_tenant(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--tenant", "a|b", "--local"])
    assert exited.value.code == 2
    assert "tenant id" in capsys.readouterr().err
