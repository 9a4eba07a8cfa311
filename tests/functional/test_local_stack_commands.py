"""The local stack's commands where no local stack runs: ``make token``
without ``make dev`` says so; ``make onboard STACK=`` finds a deployed stack by
its outputs (moto's CloudFormation, Cognito, DynamoDB and API Gateway stand in
for AWS) and creates the users, the tenant record and its API key there. The
commands run in-process (their ``main(argv)``); with a running stack:
tests/e2e/test_cli.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local_stack.__main__ import main
from stack_model.template import table_definition
from tests.e2e.conftest import run_main


def test_token_without_a_running_stack_says_so(tmp_path: Path) -> None:
    result = run_main("local_stack", "--state-dir", str(tmp_path), "token", "--tenant", "acme", "--user", "alice")
    assert result.returncode == 1
    assert "make dev" in result.stderr


def test_onboard_a_deployed_stack_found_by_its_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    # moto's CloudFormation and Cognito stand in for AWS; the command uses the
    # default credential chain and region, as it would against a real account.
    with mock_aws():
        cognito = boto3.client("cognito-idp", region_name="eu-west-1")
        pool_id = cognito.create_user_pool(PoolName="p")["UserPool"]["Id"]
        cognito.create_group(UserPoolId=pool_id, GroupName="admin")
        dynamodb = boto3.client("dynamodb", region_name="eu-west-1")
        dynamodb.create_table(**table_definition())
        apigateway = boto3.client("apigateway", region_name="eu-west-1")
        plans = {tier: apigateway.create_usage_plan(name=tier)["id"] for tier in ("basic", "standard", "premium")}
        template = {
            "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
            "Outputs": {
                "UserPoolId": {"Value": pool_id},
                "TableName": {"Value": table_definition()["TableName"]},
                **{f"UsagePlanId{tier.capitalize()}": {"Value": plan} for tier, plan in plans.items()},
            },
        }
        boto3.client("cloudformation", region_name="eu-west-1").create_stack(
            StackName="support-tickets", TemplateBody=json.dumps(template)
        )

        code = main(["onboard", "--tenant", "initech", "--users", "peter", "--admins", "bill",
                     "--stack", "support-tickets", "--region", "eu-west-1"])  # fmt: skip

        assert code == 0
        out = capsys.readouterr().out
        assert f"user pool {pool_id}" in out
        assert out.count("temporary password") == 2
        peter = cognito.admin_get_user(UserPoolId=pool_id, Username="peter")
        assert {"Name": "custom:tenant_id", "Value": "initech"} in peter["UserAttributes"]
        assert peter["UserStatus"] == "FORCE_CHANGE_PASSWORD"
        groups = cognito.admin_list_groups_for_user(UserPoolId=pool_id, Username="bill")["Groups"]
        assert [group["GroupName"] for group in groups] == ["admin"]
        # And the tenant got its record, with the defaults
        record = dynamodb.get_item(
            TableName=table_definition()["TableName"],
            Key={"pk": {"S": "TENANT#initech|CONFIG"}, "sk": {"S": "CONFIG"}},
        )["Item"]
        assert (record["shards"]["N"], record["tier"]["S"], record["status"]["S"]) == ("1", "basic", "ACTIVE")
        assert "1 shard(s), tier basic, ACTIVE" in out
        # and its API key, in the basic plan, named in the record for the authorizer
        (key,) = apigateway.get_api_keys(nameQuery="support-tickets.initech", includeValues=True)["items"]
        assert (record["api_key_id"]["S"], record["api_key"]["S"]) == (key["id"], key["value"])
        assert [plan["id"] for plan in apigateway.get_usage_plans(keyId=key["id"])["items"]] == [plans["basic"]]
        assert (
            main(["onboard", "--tenant", "initech", "--users", "x", "--stack", "missing", "--region", "eu-west-1"]) != 0
        )


@pytest.mark.parametrize("count", ["1", "9", "0", "two", "2.5", "-2", "", "٣"])
def test_serve_cells_outside_2_to_8_is_a_one_line_usage_error_before_anything_starts(
    tmp_path: Path, count: str
) -> None:
    result = run_main("local_stack", "--state-dir", str(tmp_path), "serve", "--port", "0", "--cells", count)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error: --cells takes 2 to 8 (cells), not {count!r}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--parameter", "CellId=cell-z"], "--parameter CellId="),
        (["--parameter", "UserPoolId=us-east-1_x", "--parameter", "UserPoolClientId=c"], "--parameter UserPoolId="),
        (["--user-pool-url", "http://127.0.0.1:1"], "--user-pool-url"),
        (["--emulator-port", "4566"], "--emulator-port"),
    ],
)
def test_serve_cells_refuses_what_the_set_decides_for_each_cell(tmp_path: Path, options: list[str], named: str) -> None:
    result = run_main("local_stack", "--state-dir", str(tmp_path), "serve", "--port", "0", "--cells", "2", *options)
    assert (result.returncode, result.stdout) == (2, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: "), line
    assert named in line, line
    assert list(tmp_path.iterdir()) == []


def test_every_other_serve_option_reaches_each_cell_as_given() -> None:
    from local_stack.__main__ import cell_options, command_line

    given = command_line().parse_args(
        ["serve", "--cells", "2", "--tenant-isolation", "--authorizer-cache-seconds", "0", "--queue-concurrency", "2"]
    )
    assert cell_options(given) == [
        "--tenant-isolation",
        "--authorizer-cache-seconds",
        "0.0",
        "--queue-concurrency",
        "2",
    ]
    assert cell_options(command_line().parse_args(["serve", "--cells", "2"])) == []


def test_a_set_of_cells_is_refused_where_a_stack_runs_and_touches_nothing_of_it(tmp_path: Path) -> None:
    from local_stack.cells import CellSet, CellSetOptions

    # Given a running stack's state file (its process: this one, alive) and a store beside it
    running = {"pid": os.getpid(), "api_url": "http://127.0.0.1:3000"}
    (tmp_path / "stack.json").write_text(json.dumps(running))
    (tmp_path / "router-store.json").write_text("{}")
    (tmp_path / "cells").mkdir()
    before = sorted(path.name for path in tmp_path.iterdir())
    # When a set of cells starts there, Then it is refused, and leaves everything as it was
    with pytest.raises(RuntimeError, match=rf"already running \(pid {os.getpid()}, http://127.0.0.1:3000\)"):
        CellSet(CellSetOptions(cells=2, port=0, state_dir=tmp_path)).start()
    assert sorted(path.name for path in tmp_path.iterdir()) == before
    assert json.loads((tmp_path / "stack.json").read_text()) == running


def test_drain_drains_every_cell_of_a_running_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import local_stack.__main__ as command

    # Given a running set of two cells (their processes: this one), the set's own state the default cell's
    cells = {cell: tmp_path / "cells" / cell for cell in ("cell-a", "cell-b")}
    for cell, directory in cells.items():
        directory.mkdir(parents=True)
        (directory / "stack.json").write_text(json.dumps({"pid": os.getpid(), "control_url": f"http://{cell}"}))
    set_state = {"pid": os.getpid(), "control_url": "http://cell-a", "cells": {c: str(d) for c, d in cells.items()}}
    (tmp_path / "stack.json").write_text(json.dumps(set_state))
    called: list[tuple[str, str]] = []

    def drain_call(state: dict[str, str], path: str, *, timeout: float) -> dict[str, object]:
        called.append((state["control_url"], path.partition("/")[0]))
        return {"drained": True, "delivered": 0}

    monkeypatch.setattr(command, "control_call", drain_call)
    # When the drain command runs
    assert main(["--state-dir", str(tmp_path), "drain", "--timeout", "5"]) == 0
    # Then every source of each cell was drained (until a round moved nothing), and the outcome names each cell
    rounds = [(f"http://{cell}", source) for cell in cells for _ in range(2) for source in ("stream", "queues", "logs")]
    assert sorted(called) == sorted(rounds)
    drained = json.loads(capsys.readouterr().out)
    assert drained["drained"] is True
    assert set(drained["cells"]) == set(cells)
    assert drained["cells"]["cell-b"] == {
        "drained": True,
        "rounds": 2,
        **{source: {"delivered": 0} for source in ("stream", "queues", "logs")},
    }


def test_events_take_the_sample_tenants_credentials_and_stream_from_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import local_stack.__main__ as command
    from ops import sample_events, stack_target, users

    # Given a running set whose directory places acme in cell-b, not the default cell
    def cell_state(cell: str) -> dict[str, object]:
        return {
            "pid": os.getpid(),
            "region": "us-east-1",
            "emulator_url": f"http://{cell}",
            "identity_pool_id": f"us-east-1:{cell}",
            "stream_arn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{cell}/stream/1",
        }

    cells = {cell: tmp_path / "cells" / cell for cell in ("cell-a", "cell-b")}
    for cell, directory in cells.items():
        directory.mkdir(parents=True)
        (directory / "stack.json").write_text(json.dumps(cell_state(cell)))
    pool = {"user_pool_url": "http://control", "user_pool_id": "us-east-1_Shared9", "user_pool_client_id": "c"}
    shared = {**pool, "user_pool_provider_name": "cognito-idp.us-east-1.amazonaws.com/us-east-1_Shared9"}
    set_state = {**cell_state("cell-a"), **shared, "admin_group": "admin", "directory_table": "Directory"}
    (tmp_path / "stack.json").write_text(json.dumps({**set_state, "cells": {c: str(d) for c, d in cells.items()}}))
    monkeypatch.setattr(stack_target, "tenants_cell", lambda state, tenant: {"acme": "cell-b"}[tenant])
    monkeypatch.setattr(command, "operator_client", lambda url, service, region: (url, service))
    exchanged: list[tuple[object, ...]] = []
    monkeypatch.setattr(users, "tenant_credentials", lambda *args: exchanged.append(args))
    written: list[tuple[str, str]] = []

    def write_local(directory: Path, user_pool: users.UserPool, credentials_for: Any, stream_arn: str) -> list[Path]:
        credentials_for("token")
        written.append((user_pool.pool_id, stream_arn))
        return []

    monkeypatch.setattr(sample_events, "write_local", write_local)
    # When make events runs
    assert main(["--state-dir", str(tmp_path), "events"]) == 0
    # Then acme's tokens are the shared pool's, exchanged at cell-b's identity pool, its events naming cell-b's stream
    assert exchanged == [
        (("http://cell-b", "cognito-identity"), "us-east-1:cell-b", shared["user_pool_provider_name"], "token")
    ]
    assert written == [("us-east-1_Shared9", str(cell_state("cell-b")["stream_arn"]))]
