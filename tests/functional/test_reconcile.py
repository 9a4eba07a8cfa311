"""ops.reconcile: recount the tenant's own ticket summaries on GSI1 (keys only),
report drift, repair it only when it is stable and the stream function did not
write meanwhile; rows another tenant planted under its keys are never counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest

from ops.reconcile import main, reconcile, stored_counts
from ops.tenants import TenantAdmin
from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import CreateTicketRequest
from support_tickets.data.tenant_registry import tenant_configs
from tests.conftest import REGION, RepoFactory, instant_tenant_admin, random_tenant_id
from tests.functional.api_harness import Api, User
from tests.functional.conftest import OPERATOR_STATE
from tests.functional.stream_harness import StreamHarness
from tests.functional.test_dedicated_routing import items_of, own_table

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


def tickets_in_each_status(api: Api, user: User) -> None:
    """Two OPEN tickets and one CLOSED, through the API (written where the tenant lives)."""
    for _ in range(2):
        api.new_ticket(user)
    closed = api.new_ticket(user)["ticket_id"]
    assert api.update(user, closed, {"status": "CLOSED"}).status == 200


def placed_pair(api: Api, dynamodb: DynamoDBClient, table_name: str, dedicated: str, pooled: str) -> dict[str, str]:
    """``dedicated`` in a table of its own and ``pooled`` in the pool, each with
    tickets whose counts no stream function wrote (drift: every ticket); the
    table each lives in."""
    admin = instant_tenant_admin(dynamodb, table_name)
    own = own_table(dynamodb, dedicated)
    admin.write(admin.record(dedicated), {"placement": "dedicated", "table": own, "placed_at": 1})
    admin.ensure(pooled)
    tenant_configs().clear()
    for tenant in (dedicated, pooled):
        tickets_in_each_status(api, User(tenant, "alice"))
    return {dedicated: own, pooled: table_name}


@pytest.mark.parametrize(("dedicated", "pooled"), [("1", "10"), ("10", "1")])
def test_each_tenant_is_recounted_and_repaired_in_the_table_it_lives_in_and_no_other_is_touched(
    api: Api, dynamodb: DynamoDBClient, table_name: str, dedicated: str, pooled: str
) -> None:
    where = placed_pair(api, dynamodb, table_name, dedicated, pooled)
    for tenant, other in ((dedicated, pooled), (pooled, dedicated)):
        untouched = items_of(dynamodb, where[other], other)
        # When the operator reconciles the tenant and repairs it
        report = reconcile(dynamodb, table_name, tenant, repair=True, sleep=lambda _: None)
        # Then its tickets were counted, and its counts repaired, in the table it lives in
        assert {count.status: count.actual for count in report.counts} == {"OPEN": 2, "IN_PROGRESS": 0, "CLOSED": 1}
        assert report.repaired == {"OPEN": 2, "CLOSED": 1}
        stored = stored_counts(dynamodb, where[tenant], tenant)
        assert {status.value: stored[status][0] for status in TicketStatus} == {
            "OPEN": 2,
            "IN_PROGRESS": 0,
            "CLOSED": 1,
        }
        assert not reconcile(dynamodb, table_name, tenant).drifted
        # and nothing of the other tenant changed
        assert items_of(dynamodb, where[other], other) == untouched
    # The dedicated tenant has nothing in the pool but its record
    assert [item["sk"]["S"] for item in items_of(dynamodb, table_name, dedicated)] == [keys.CONFIG_SK]


def test_a_tenant_whose_data_is_moving_is_reported_never_repaired(
    api: Api, dynamodb: DynamoDBClient, table_name: str
) -> None:
    where = placed_pair(api, dynamodb, table_name, "1", "10")
    admin = instant_tenant_admin(dynamodb, table_name)
    admin.write(admin.record("1"), {"move_to": "pool", "move_phase": "COPYING", "move_started_at": 1})
    before = items_of(dynamodb, where["1"], "1")
    report = reconcile(dynamodb, table_name, "1", repair=True, sleep=lambda _: None)
    assert [(count.status, count.drift) for count in report.counts if count.drift] == [("OPEN", 2), ("CLOSED", 1)]
    assert report.repaired == {}
    assert set(report.skipped) == {"OPEN", "CLOSED"}
    assert "moving" in report.skipped["OPEN"]
    assert items_of(dynamodb, where["1"], "1") == before
