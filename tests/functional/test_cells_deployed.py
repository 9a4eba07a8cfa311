"""Deployed cells: the operator commands reach the control plane by its stack's outputs
(``--control-plane``, ``CONTROL_PLANE=``: ``ops.control_plane``). moto serves
CloudFormation (the control plane's and each cell's stack, by their outputs),
DynamoDB (the directory, each cell's table), Cognito and API Gateway; moto has no
``cloudfront-keyvaluestore``: the store's requests are checked with botocore's
``Stubber`` on a real client (its service model validates each one), its behaviour
with the local ``FileKeyValueStore`` under the control plane's ARN. A move writes the
directory (epoch + 1), then the store; without a control plane it is refused before
anything is written; ``make cells`` lists each cell the directory names (registered
from its stack's outputs); onboarding places a new tenant; tenants ``1`` and ``10``
keep their own entries throughout."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import moto.core.responses
import moto.dynamodb.models.table
import pytest
from botocore.client import BaseClient
from botocore.stub import Stubber

from local_stack.__main__ import main as local_stack_main
from ops import cell_report, control_plane, offboard, tenant_data, tenants
from ops import usage as ops_usage
from ops.cell_move import CellMover
from ops.cell_routes import tenant_route
from ops.cells import STORE_OUTPUT, Directory, Placement, Routes, deployed_routes
from ops.control_plane import NO_CONTROL_PLANE
from ops.local_routes import FileKeyValueStore
from stack_model.control_plane import directory_table_arguments
from support_tickets.core import keys
from support_tickets.core.identity import ADMIN_GROUP
from support_tickets.usage.report import usage_object
from tests.conftest import REGION
from tests.functional.api_harness import Api
from tests.functional.cell_harness import CELL_A, CELL_B, Cells
from tests.functional.move_harness import FakeClock

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CONTROL_PLANE = "support-tickets-control"
STORE_ARN = "arn:aws:cloudfront::123456789012:key-value-store/0a1b2c3d-4e5f-6789-abcd-ef0123456789"
API_DOMAINS = {
    CELL_A: "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com",
    CELL_B: "f6g7h8i9j0.execute-api.us-east-1.amazonaws.com",
}
CREATED = datetime(2026, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 11, 25, 15, 0, tzinfo=UTC)


# ---------------------------------------------------------------- the store's requests
def described(etag: str) -> dict[str, Any]:
    return {"KvsARN": STORE_ARN, "ETag": etag, "ItemCount": 2, "TotalSizeInBytes": 64, "Created": CREATED}


def test_the_deployed_store_is_written_at_its_etag_and_never_with_an_older_epoch() -> None:
    # Given the control plane's store, its client a real cloudfront-keyvaluestore one
    session = boto3.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    routes = deployed_routes(session, {STORE_OUTPUT: STORE_ARN})
    assert routes.kvs_arn == STORE_ARN
    assert isinstance(routes.client, BaseClient)
    arn = {"KvsARN": STORE_ARN}
    stored = {"ItemCount": 2, "TotalSizeInBytes": 64}
    stubber = Stubber(routes.client)
    # 10 moves to cell-b at epoch 3 (the store says cell-a at 2): read the version, the entry, then write at it
    stubber.add_response("describe_key_value_store", described("v1"), arn)
    stubber.add_response(
        "get_key", {"Key": "tenant/10", "Value": tenant_route(CELL_A, 2), **stored}, {**arn, "Key": "tenant/10"}
    )
    expected_put = {**arn, "Key": "tenant/10", "Value": tenant_route(CELL_B, 3), "IfMatch": "v1"}
    stubber.add_response("put_key", {"ETag": "v2", **stored}, expected_put)
    # 1, never routed: its own key, written at the version read
    stubber.add_response("describe_key_value_store", described("v2"), arn)
    stubber.add_client_error("get_key", "ResourceNotFoundException", expected_params={**arn, "Key": "tenant/1"})
    put_one = {**arn, "Key": "tenant/1", "Value": tenant_route(CELL_A, 1), "IfMatch": "v2"}
    stubber.add_response("put_key", {"ETag": "v3", **stored}, put_one)
    # 10 at epoch 2 again (a command resumed late): the store holds 3, nothing written
    stubber.add_response("describe_key_value_store", described("v3"), arn)
    stubber.add_response(
        "get_key", {"Key": "tenant/10", "Value": tenant_route(CELL_B, 3), **stored}, {**arn, "Key": "tenant/10"}
    )
    # 10 at epoch 4, the version moving under the first write: read again, written at the new one
    stubber.add_response("describe_key_value_store", described("v3"), arn)
    stubber.add_response(
        "get_key", {"Key": "tenant/10", "Value": tenant_route(CELL_B, 3), **stored}, {**arn, "Key": "tenant/10"}
    )
    moving = {**arn, "Key": "tenant/10", "Value": tenant_route(CELL_A, 4)}
    stubber.add_client_error(
        "put_key", "ConflictException", http_status_code=409, expected_params=moving | {"IfMatch": "v3"}
    )
    stubber.add_response("describe_key_value_store", described("v4"), arn)
    stubber.add_response(
        "get_key", {"Key": "tenant/10", "Value": tenant_route(CELL_B, 3), **stored}, {**arn, "Key": "tenant/10"}
    )
    stubber.add_response("put_key", {"ETag": "v5", **stored}, moving | {"IfMatch": "v4"})

    with stubber:
        assert routes.publish(Placement("10", CELL_B, 3)) is True
        assert routes.publish(Placement("1", CELL_A, 1)) is True
        assert routes.publish(Placement("10", CELL_A, 2)) is False
        assert routes.publish(Placement("10", CELL_A, 4)) is True
    stubber.assert_no_pending_responses()


# ---------------------------------------------------------------- the control plane and its cells, deployed
class RecordingStore(FileKeyValueStore):
    """The router's store under the control plane's ARN; each write notes where the
    directory placed the tenant at that moment."""

    def __init__(self, path: Path, arn: str, directory: Directory) -> None:
        super().__init__(path, arn)
        self.directory = directory
        self.writes: list[tuple[str, Placement | None]] = []

    def put_key(self, **kwargs: str) -> Any:
        key = kwargs["Key"]
        placed = self.directory.placement(key.removeprefix("tenant/")) if key.startswith("tenant/") else None
        self.writes.append((key, placed))
        return super().put_key(**kwargs)


@dataclass
class Deployed:
    cells: Cells
    directory: Directory
    store: RecordingStore
    pool_id: str

    def route(self, tenant: str) -> dict[str, Any]:
        return dict(json.loads(self.store.items()[f"tenant/{tenant}"]))


def create_stack(name: str, outputs: dict[str, str]) -> None:
    template = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation", region_name=REGION).create_stack(StackName=name, TemplateBody=json.dumps(template))


@pytest.fixture
def deployed(
    aws: None, api: Api, dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Deployed:
    """The control plane's stack (the directory table, the store's ARN, the shared
    pool) and a stack per cell (its table, usage plans, webhook key alias, CellId and
    ApiUrl), by their outputs; the store a file under the control plane's ARN."""
    clock = FakeClock()
    monkeypatch.setattr(moto.core.responses, "utcnow", clock.utc)
    monkeypatch.setattr(moto.dynamodb.models.table, "utcnow", clock.utc)
    cells = Cells(api, dynamodb, clock)
    table = directory_table_arguments()
    dynamodb.create_table(**table)
    cognito = boto3.client("cognito-idp", region_name=REGION)
    pool_id = cognito.create_user_pool(PoolName="shared")["UserPool"]["Id"]
    cognito.create_group(UserPoolId=pool_id, GroupName=ADMIN_GROUP)
    create_stack(
        CONTROL_PLANE,
        {"DirectoryTableName": table["TableName"], "KeyValueStoreArn": STORE_ARN, "UserPoolId": pool_id},
    )
    kms = boto3.client("kms", region_name=REGION)
    for cell, stack in cells.stacks.items():
        kms.create_alias(AliasName=f"alias/{stack.stack}-webhook-secrets", TargetKeyId=stack.key_arn)
        plans = {f"UsagePlanId{tier.capitalize()}": plan for tier, plan in stack.plans.items()}
        api_url = f"https://{API_DOMAINS[cell]}/v1"
        outputs = {"TableName": stack.table, "CellId": cell, "ApiUrl": api_url, "UserPoolId": pool_id}
        create_stack(stack.stack, {**outputs, **plans})
    directory = Directory(boto3.client("dynamodb", region_name=REGION), table["TableName"])
    store = RecordingStore(tmp_path / "store.json", STORE_ARN, directory)

    def routes_of(session: Any, outputs: dict[str, str]) -> Routes:
        assert outputs[STORE_OUTPUT] == STORE_ARN  # the store the control plane's output names
        return Routes(store, outputs[STORE_OUTPUT])

    monkeypatch.setattr(control_plane, "deployed_routes", routes_of)
    return Deployed(cells, directory, store, pool_id)


def registered(deployed: Deployed) -> None:
    """``make cells CONTROL_PLANE=… REGISTER="<each cell's stack>"``."""
    stacks = " ".join(stack.stack for stack in deployed.cells.stacks.values())
    out = StringIO()
    assert cell_report.main(["--control-plane", CONTROL_PLANE, "--region", REGION, "--register", stacks], out) == 0


def test_make_cells_registers_deployed_cells_and_lists_each_with_its_tenants(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given both cells registered from their stacks' outputs, 1 in cell-a and 10 in cell-b
    registered(deployed)
    cells = {cell.cell_id: cell for cell in deployed.directory.cells()}
    assert {cell: (c.stack, c.region, c.api_domain, c.stage) for cell, c in cells.items()} == {
        cell: (stack.stack, REGION, API_DOMAINS[cell], "v1") for cell, stack in deployed.cells.stacks.items()
    }
    origins = deployed.store.items()
    assert json.loads(origins[f"cell/{CELL_B}"]) == {"domain": API_DOMAINS[CELL_B], "path": "/v1"}
    for tenant, cell in (("1", CELL_A), ("10", CELL_B)):
        deployed.cells.admin(cell).ensure(tenant)
        deployed.directory.place(tenant, cell, 1)
    # When make cells reads the deployed control plane (naming nothing but it)
    out = StringIO()
    assert cell_report.main(["--control-plane", CONTROL_PLANE, "--region", REGION], out) == 0
    # Then each cell is listed with its own tenant, read from the stack its directory item names
    listed = out.getvalue()
    assert f"{CELL_A}: 1 tenant(s), room 999 of 1000, origin {API_DOMAINS[CELL_A]}/v1, st\n" in listed
    assert f"{CELL_B}: 1 tenant(s), room 999 of 1000, origin {API_DOMAINS[CELL_B]}/v1, cellb\n" in listed
    section_a, section_b = listed.split(f"{CELL_B}: ")
    assert "  1       basic  pool       epoch 1" in section_a
    assert "  10 " not in section_a
    assert "  10      basic  pool       epoch 1" in section_b
    assert "  1 " not in section_b
    # A stack that is no cell, or no control plane, is one line
    assert cell_report.main(["--control-plane", CONTROL_PLANE, "--region", REGION, "--register", CONTROL_PLANE]) == 1
    assert capsys.readouterr().err.startswith(f"error: stack {CONTROL_PLANE} is not a cell")
    assert cell_report.main(["--control-plane", "no-such-stack", "--region", REGION]) == 1


def test_onboarding_with_the_control_plane_places_new_tenants_1_and_10_in_the_cells_with_most_room(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    registered(deployed)
    # A cell's stack alone is refused: the directory would never place the tenant
    alone = ["onboard", "--tenant", "10", "--users", "u10", "--stack", "st", "--region", REGION]
    assert local_stack_main(alone) == 1
    assert "is cell cell-a: onboard through the control plane" in capsys.readouterr().err
    assert deployed.directory.placement("10") is None
    assert not deployed.cells.admin(CELL_A).record("10").stored
    # When 10, then 1, are onboarded through the control plane
    for tenant in ("10", "1"):
        command = ["onboard", "--tenant", tenant, "--users", f"u{tenant}", "--control-plane", CONTROL_PLANE]
        assert local_stack_main([*command, "--region", REGION]) == 0
    out = capsys.readouterr().out
    # Then each is in the cell with the most room when it came: the directory, its record there, its route
    assert f"tenant 10 in cell {CELL_A} of control plane {CONTROL_PLANE} (user pool {deployed.pool_id})" in out
    assert f"tenant 1 in cell {CELL_B} of control plane {CONTROL_PLANE}" in out
    for tenant, cell, other in (("10", CELL_A, CELL_B), ("1", CELL_B, CELL_A)):
        assert deployed.directory.placement(tenant) == Placement(tenant, cell, 1)
        assert deployed.cells.admin(cell).record(tenant).stored
        assert not deployed.cells.admin(other).record(tenant).stored
        assert deployed.route(tenant) == {"cell": cell, "epoch": 1}
    user = boto3.client("cognito-idp", region_name=REGION).admin_get_user(UserPoolId=deployed.pool_id, Username="u1")
    assert {"Name": "custom:tenant_id", "Value": "1"} in user["UserAttributes"]


@dataclass
class NoAuthorizerCache(CellMover):
    """The mover against stacks whose API Gateway caches no authorizer answer (as the
    local test's state says): its wait is the switch's few seconds."""

    authorizer_cache_seconds: float = 0.0


def test_a_deployed_move_writes_the_directory_then_the_store_and_without_a_control_plane_nothing(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given both cells registered, 1 in cell-a and 10 in cell-b, each routed
    registered(deployed)
    cells = deployed.cells
    cells.populate("1", CELL_A)
    cells.admin(CELL_B).ensure("10")
    for tenant, cell in (("1", CELL_A), ("10", CELL_B)):
        deployed.directory.place(tenant, cell, 1)
        Routes(deployed.store, STORE_ARN).publish(Placement(tenant, cell, 1))
    before = (cells.items(CELL_A, "1"), deployed.store.items(), deployed.directory.placement("1"))
    command = ["--tenant", "1", "--stack", "st", "--region", REGION, "--cell", CELL_B]
    command += ["--phase-seconds", "0", "--drain-seconds", "0"]
    capsys.readouterr()  # what the set-up wrote (its functions' logs): not the command's
    # When it is moved without the control plane named (or the local set's named with it): refused, nothing written
    assert tenants.main(command) == 1
    assert capsys.readouterr().err == f"error: {NO_CONTROL_PLANE}\n"
    assert tenants.main(["--tenant", "1", "--local", "--control-plane", CONTROL_PLANE, "--cell", CELL_B]) == 1
    assert capsys.readouterr().err.startswith("error: --control-plane names a deployed control plane")
    assert (cells.items(CELL_A, "1"), deployed.store.items(), deployed.directory.placement("1")) == before
    assert not cells.admin(CELL_B).record("1").stored
    # When it is moved with the control plane named (its cells the directory's: no --cell-stack)
    monkeypatch.setattr(tenants, "CellMover", NoAuthorizerCache)
    writes_before = len(deployed.store.writes)
    assert tenants.main([*command, "--control-plane", CONTROL_PLANE]) == 0
    # Then it is in cell-b: the directory at the next epoch, then the store (written once the directory said so)
    assert json.loads(capsys.readouterr().out)["tenant_id"] == "1"
    assert cells.items(CELL_A, "1") == []
    assert cells.admin(CELL_B).record("1").stored
    assert deployed.directory.placement("1") == Placement("1", CELL_B, 2)
    assert deployed.store.writes[writes_before:] == [("tenant/1", Placement("1", CELL_B, 2))]
    assert deployed.route("1") == {"cell": CELL_B, "epoch": 2}
    # and 10 keeps its own entries
    assert deployed.directory.placement("10") == Placement("10", CELL_B, 1)
    assert deployed.route("10") == {"cell": CELL_B, "epoch": 1}
    assert {cell.cell_id: cell.tenants for cell in deployed.directory.cells()} == {CELL_A: 0, CELL_B: 2}


# ---------------------------------------------------------------- make usage across cells
def put_counter(deployed: Deployed, cell: str, tenant: str, sort_key: str, **counters: str) -> None:
    item = {"pk": {"S": keys.usage_pk(tenant)}, "sk": {"S": sort_key}}
    item.update({name: {"N": value} for name, value in counters.items()})
    deployed.cells.dynamodb.put_item(TableName=deployed.cells.stacks[cell].table, Item=item)


def test_make_usage_with_the_control_plane_is_one_row_per_tenant_summed_over_its_cells(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given both cells registered. 1, placed in cell-a, is moving to cell-b (its move started at
    # MOVE): cell-b's ledger holds its copy of cell-a's counter (behind it) and its own counter
    registered(deployed)
    cells, day, move = deployed.cells, NOW.date().isoformat(), 1_700_000_000
    for cell in (CELL_A, CELL_B):
        cells.admin(cell).ensure("1")
    arriving = {"cell_phase": "ARRIVING", "moving_from": CELL_A, "move_started_at": move}
    cells.admin(CELL_B).write(cells.admin(CELL_B).record("1"), arriving)
    deployed.directory.place("1", CELL_A, 1)
    put_counter(deployed, CELL_A, "1", f"{day}#3", requests="7", write_units="4")
    put_counter(deployed, CELL_B, "1", f"{day}#3#{CELL_A}#{move}", requests="5", write_units="3")
    put_counter(deployed, CELL_B, "1", f"{day}#1", requests="1", read_units="0.5")
    # 10, in cell-a: it came from cell-b earlier today (that move's copy in cell-a's ledger), and a
    # move back was rolled back: its own counter stays in cell-b, which has no key (nor record) of it
    cells.admin(CELL_A).ensure("10")
    deployed.directory.place("10", CELL_A, 1)
    put_counter(deployed, CELL_A, "10", f"{day}#0", requests="3")
    put_counter(deployed, CELL_A, "10", f"{day}#4#{CELL_B}#{move - 3600}", requests="2", mb_ms="2048")
    put_counter(deployed, CELL_B, "10", f"{day}#2", requests="4")
    assert "10" not in cells.keys(CELL_B).directory()
    sums = {
        "1": {"requests": Decimal(8), "write_units": Decimal(4), "read_units": Decimal("0.5")},
        "10": {"requests": Decimal(9), "mb_ms": Decimal(2048)},
    }
    expected = {tenant: usage_object(tenant, day, counted, NOW) for tenant, counted in sums.items()}
    target = ["--control-plane", CONTROL_PLANE, "--region", REGION, "--day", day]
    # When the operator lists the day's usage through the control plane
    out = StringIO()
    assert ops_usage.main(target, out, now=NOW) == 0
    # Then each tenant is one row, its counters summed over its cells (a copy counted once), costed from the sum
    table = StringIO()
    ops_usage.write_table(list(expected.values()), day, table)
    assert out.getvalue() == table.getvalue()
    # and each tenant's own object is that sum too
    for tenant in ("1", "10"):
        out = StringIO()
        assert ops_usage.main([*target, "--tenant", tenant], out, now=NOW) == 0
        assert json.loads(out.getvalue()) == json.loads(json.dumps(expected[tenant]))
    capsys.readouterr()


def test_offboarding_a_deployed_cells_tenant_with_the_control_plane_drops_its_route_and_directory_item(
    deployed: Deployed, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # (Its status lists walked at one shard, the tenants' count: the walk of every count is tests/functional/
    # test_tenant_lifecycle.py's, seconds of queries here.)
    monkeypatch.setattr(tenant_data, "ALL_SHARD_COUNTS", (1,))
    # Given both cells registered, 1 and 10 in cell-b, each routed
    registered(deployed)
    for tenant in ("1", "10"):
        deployed.cells.admin(CELL_B).ensure(tenant)
        deployed.directory.place(tenant, CELL_B, 1)
        Routes(deployed.store, STORE_ARN).publish(Placement(tenant, CELL_B, 1))
    # When 1 is offboarded from cell-b's stack, the control plane named (make offboard STACK= CONTROL_PLANE=)
    command = ["--tenant", "1", "--confirm", "1", "--stack", "cellb", "--region", REGION]
    command += ["--control-plane", CONTROL_PLANE, "--phase-seconds", "0", "--grace-seconds", "0", "--settle", "0"]
    capsys.readouterr()
    assert offboard.main(command) == 0
    assert json.loads(capsys.readouterr().out)["record"] == "erased"
    # Then the router's store and the directory forgot it, cell-b's count one less; 10 keeps its own
    assert "tenant/1" not in deployed.store.items()
    assert deployed.directory.placement("1") is None
    assert {cell.cell_id: cell.tenants for cell in deployed.directory.cells()} == {CELL_A: 0, CELL_B: 1}
    assert deployed.directory.placement("10") == Placement("10", CELL_B, 1)
    assert deployed.route("10") == {"cell": CELL_B, "epoch": 1}
