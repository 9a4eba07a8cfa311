"""The local stack's commands as `make token`, `make onboard` and `make dev`
run them: stdout and exit codes, state files, clean stops. The commands run
in-process (their ``main(argv)``); the `make dev` test runs them as real
processes, as a developer does."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from local_stack.lambda_.runtime import LambdaContext, environment
from local_stack.running_stack import EVENTS_DIR
from stack_model.events import SAMPLE_CLIENT_ID
from stack_model.functions import function_specs, load_handler
from stack_model.template import PROJECT_ROOT
from support_tickets.core.settings import get_settings
from support_tickets.data.session import token_exchange
from tests.e2e.conftest import (
    ENV_FILE,
    START_TIMEOUT_S,
    STATE_FILE,
    RunningStack,
    environment_function,
    environment_processes,
    http,
    new_tenant_id,
    python_module,
    run_main,
    running_environment,
    server_log,
    start_stack,
    stop_stack,
)
from tests.e2e.test_gateway import claims_of
from tests.e2e.test_isolation import table_state


def cli(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_main("local_stack", "--state-dir", str(state_dir), *args)


def cli_process(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return python_module("local_stack", "--state-dir", str(state_dir), *args)


def test_token_prints_only_an_id_token_that_the_api_accepts(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    result = cli(stack.state_dir, "token", "--tenant", tenant, "--user", f"u-{tenant}")
    assert result.returncode == 0, result.stderr
    (token,) = result.stdout.splitlines()
    assert claims_of(token)["custom:tenant_id"] == tenant
    assert stack.request("GET", "/tickets", token=token).status == 200
    assert stack.request("GET", "/aggregates", token=token).status == 403

    admin = cli(stack.state_dir, "token", "--tenant", tenant, "--user", f"a-{tenant}", "--admin")
    assert admin.returncode == 0, admin.stderr
    assert stack.request("GET", "/aggregates", token=admin.stdout.strip()).status == 200


def test_token_never_moves_a_user_to_another_tenant(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    assert cli(stack.state_dir, "token", "--tenant", tenant, "--user", f"u-{tenant}").returncode == 0
    other = cli(stack.state_dir, "token", "--tenant", tenant + "0", "--user", f"u-{tenant}")
    assert other.returncode == 1
    assert other.stdout == ""
    assert "another tenant" in other.stderr


@pytest.mark.parametrize("tenant", ["Bad", "a|b", "a*", "", "x" * 64])
def test_token_refuses_invalid_tenant_ids(stack: RunningStack, tenant: str) -> None:
    result = cli(stack.state_dir, "token", "--tenant", tenant, "--user", "someone")
    assert result.returncode == 1
    assert result.stdout == ""


def test_onboard_creates_users_and_admins_once(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    users, admin = [f"a-{tenant}", f"b-{tenant}"], f"c-{tenant}"
    first = cli(stack.state_dir, "onboard", "--tenant", tenant, "--users", *users, "--admins", admin)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("created") == 3
    again = cli(stack.state_dir, "onboard", "--tenant", tenant, "--users", *users, "--admins", admin)
    assert again.returncode == 0
    assert again.stdout.count("already there") == 3
    pool = stack.pool()
    groups = pool.cognito.admin_list_groups_for_user(UserPoolId=pool.pool_id, Username=admin)["Groups"]
    assert [group["GroupName"] for group in groups] == ["admin"]
    assert pool.cognito.admin_list_groups_for_user(UserPoolId=pool.pool_id, Username=users[0])["Groups"] == []
    user = pool.cognito.admin_get_user(UserPoolId=pool.pool_id, Username=users[0])
    assert {"Name": "custom:tenant_id", "Value": tenant} in user["UserAttributes"]


def test_onboard_changes_nothing_when_a_name_belongs_to_another_tenant(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    assert cli(stack.state_dir, "onboard", "--tenant", tenant, "--users", f"x-{tenant}").returncode == 0
    fresh = f"y-{tenant}"
    clash = cli(stack.state_dir, "onboard", "--tenant", tenant + "0", "--users", fresh, f"x-{tenant}")
    assert clash.returncode == 1
    assert "another tenant" in clash.stderr
    pool = stack.pool()
    with pytest.raises(pool.cognito.exceptions.UserNotFoundException):
        pool.cognito.admin_get_user(UserPoolId=pool.pool_id, Username=fresh)


def api_key_names(stack: RunningStack) -> list[str]:
    items = stack.operator("apigateway").get_api_keys(limit=500)["items"]
    return sorted(str(key["name"]) for key in items)


def test_operator_commands_refuse_a_tenant_that_does_not_exist_and_write_nothing(stack: RunningStack) -> None:
    # Given an onboarded tenant, and its name with a typo (no record, no user, no key)
    tenant = new_tenant_id()
    stack.onboard(tenant)
    typo = tenant + "e"
    state = ["--local", "--local-state", str(stack.state_dir / "stack.json")]
    commands = [
        ("ops.tenants", "--tenant", typo),
        ("ops.tenants", "--tenant", typo, "--status", "SUSPENDED"),
        ("ops.tenants", "--tenant", typo, "--tier", "premium", "--shards", "2"),
        ("ops.usage", "--tenant", typo),
        ("ops.export", "--tenant", typo),
        ("ops.reconcile", "--tenant", typo, "--repair", "--settle", "0"),
        ("ops.offboard", "--tenant", typo, "--confirm", typo, "--settle", "0", "--phase-seconds", "0"),
    ]
    before, keys_before = table_state(stack), api_key_names(stack)
    # When an operator runs each command on the typo
    for module, *args in commands:
        result = run_main(module, *args, *state)
        # Then each says so in one line, naming it, and exits 1
        assert (result.returncode, result.stdout) == (1, ""), (module, args, result)
        assert result.stderr == f"error: no tenant {typo!r}: it has no tenant record (make onboard creates tenants)\n"
    # and nothing was written: no record, no item, no API key
    assert table_state(stack) == before
    assert api_key_names(stack) == keys_before
    assert run_main("ops.tenants", "--tenant", tenant, *state).returncode == 0  # the real one is there


def port_open(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, int(port))) == 0


def operator_environment(state_dir: Path) -> dict[str, str]:
    """The credentials ``sam local`` passes a container from your environment:
    the emulator's operator key, as its state file names it (docs/local-stack.md)."""
    state = json.loads((state_dir / STATE_FILE).read_text())
    return {
        "AWS_ACCESS_KEY_ID": state["operator_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": state["operator_secret_access_key"],
    }


def invoke_as_sam_local(state_dir: Path, event_file: str, function: str) -> dict[str, Any]:
    """What ``AWS_ACCESS_KEY_ID=<operator key> AWS_SECRET_ACCESS_KEY=<its secret>
    sam local invoke <function> -e <state>/events/<file> --env-vars
    <state>/env.json`` runs: the function with env.json's variables (and the
    emulator's operator credentials) and the event as written."""
    spec = function_specs()[function]
    variables = json.loads((state_dir / ENV_FILE).read_text())[function]
    event = json.loads((state_dir / EVENTS_DIR / event_file).read_text())
    lambda_env = {"AWS_REGION": "us-east-1", **operator_environment(state_dir)}
    with environment({**variables, **lambda_env, "POWERTOOLS_METRICS_DISABLED": "true"}):
        get_settings.cache_clear()
        token_exchange.cache_clear()
        try:
            handler = load_handler(spec.code_uri, spec.handler)
            response: dict[str, Any] = handler(event, LambdaContext(function_name=function))
        finally:
            get_settings.cache_clear()
            token_exchange.cache_clear()
    return response


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = START_TIMEOUT_S) -> None:
    """What a client of `make dev` does: try to connect until the port answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the stack exited"
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.01)
    raise AssertionError(f"port {port} never answered")


def test_serve_answers_once_token_works_writes_its_state_and_leaves_nothing_behind(tmp_path: Path) -> None:
    # Given: a second stack, as `make dev` runs it (demo tenants seeded), on a known port
    port = free_port()
    running = start_stack(tmp_path, "--port", str(port), wait=False)
    try:
        # When a client waits for the port and asks for a token at once, it gets one
        wait_for_port(port, running.process)
        token = cli_process(tmp_path, "token", "--tenant", "acme", "--user", "alice")
        assert token.returncode == 0, token.stderr
        assert claims_of(token.stdout.strip())["custom:tenant_id"] == "acme"
        running.state = json.loads((tmp_path / STATE_FILE).read_text())
        state = running.state
        # a request runs two functions (the authorizer, the route's), each in a process of its own
        listed = http("GET", f"{state['api_url']}/tickets", token=token.stdout.strip())
        environments = environment_processes(running.process.pid)
        functions = sorted(environment_function(pid) for pid in environments)
        assert state["api_url"] == f"http://127.0.0.1:{port}"
        env_vars = json.loads((tmp_path / ENV_FILE).read_text())
        log = server_log(running)
        second = cli_process(tmp_path, "serve", "--port", "0")
        # The sample events with fresh tokens, for sam local invoke: they work against this stack
        events = {path.name: json.loads(path.read_text()) for path in (tmp_path / EVENTS_DIR).glob("*.json")}
        created = invoke_as_sam_local(tmp_path, "create_ticket.json", "CreateTicketFunction")
        refused = invoke_as_sam_local(tmp_path, "delete_ticket_non_admin.json", "DeleteTicketFunction")
        counted = invoke_as_sam_local(tmp_path, "get_aggregates_admin.json", "GetAggregatesFunction")
        # make events writes new tokens
        before = events["create_ticket.json"]["headers"]["Authorization"]
        refreshed = cli_process(tmp_path, "events")
        after = json.loads((tmp_path / EVENTS_DIR / "create_ticket.json").read_text())["headers"]["Authorization"]
    finally:
        code = stop_stack(running)

    # Then: env.json has one entry per function of the template, pointed at the emulator (the VPC
    # functions at its gateway endpoint's listener) and its identity pool (the authorizer's)
    specs = function_specs()
    assert set(env_vars) == set(specs)
    assert {name for name, spec in specs.items() if spec.in_vpc} >= {"CreateTicketFunction", "GetAuditTrailFunction"}
    for name, variables in env_vars.items():
        assert set(variables) == set(specs[name].environment)
        endpoint = state["vpc_endpoint_url"] if specs[name].in_vpc else state["emulator_url"]
        assert variables["AWS_ENDPOINT_OVERRIDE"] == endpoint, name
        assert variables["TABLE_NAME"] == state["table_name"]
        assert variables.get("IDENTITY_POOL_ID", state["identity_pool_id"]) == state["identity_pool_id"]
        assert variables["USER_POOL_PROVIDER_NAME"] == state["user_pool_provider_name"]
        assert variables["ALLOWED_CLIENT_IDS"] == state["user_pool_client_id"]
    # every sample event is there; the REST ones with a token of the local pool and its claims
    assert set(events) == {path.name for path in (PROJECT_ROOT / "events").glob("*.json")}
    for name, event in events.items():
        if "Records" in event or "awslogs" in event:  # the stream functions', the metering function's: no token
            continue
        if event.get("type") == "TOKEN":  # the authorizer's event: the token alone
            assert claims_of(event["authorizationToken"].removeprefix("Bearer "))["custom:tenant_id"] == "acme"
            continue
        token = event["headers"]["Authorization"].removeprefix("Bearer ")
        claims = claims_of(token)
        assert claims["iss"].endswith(state["user_pool_id"]), name
        assert claims["aud"] == state["user_pool_client_id"], name
        assert event["requestContext"]["authorizer"]["jti"] == claims["jti"], name
        assert event["requestContext"]["authorizer"]["tenant_id"] == "acme", name
        # and the credentials the authorizer would pass: the local identity pool's, not the placeholder
        assert event["requestContext"]["authorizer"]["access_key_id"] not in ("", "ASIAIOSFODNN7EXAMPLE"), name
    assert created["statusCode"] == 201, created
    assert json.loads(created["body"])["created_by"] == "alice"
    assert refused["statusCode"] == 403, refused
    assert counted["statusCode"] == 200, counted
    assert refreshed.returncode == 0, refreshed.stderr
    assert before != after
    # the quickstart was printed, with the demo tenants, and that the tenant isolation mode is off
    assert "make -s token TENANT=acme USER=alice" in log
    assert "Lambda tenant isolation mode: off" in log
    assert f"curl -s {state['api_url']}/tickets" in log
    # a second stack on the same state directory refuses to start
    assert second.returncode == 1
    assert "already running" in second.stderr
    # Ctrl-C stopped everything: exit 0, state files gone, ports closed, no function's process left
    assert code == 0, server_log(running)
    assert listed.status == 200, listed.body
    # The usage lines those two wrote reach the metering function by the log subscription, on
    # its own clock: its environment may have started by then, no other may have.
    assert [name for name in functions if name != "MeteringFunction"] == ["AuthorizerFunction", "ListTicketsFunction"]
    assert functions.count("MeteringFunction") <= 1, functions
    assert not [pid for pid in environments if running_environment(pid)]
    assert not (tmp_path / STATE_FILE).exists()
    assert not (tmp_path / ENV_FILE).exists()
    assert not (tmp_path / EVENTS_DIR).exists()
    assert not port_open(state["api_url"])
    assert not port_open(state["emulator_url"])


def test_the_documented_events_carry_no_token_and_get_no_data(stack: RunningStack) -> None:
    # events/ documents the shapes with a placeholder token: a function given one answers 401.
    variables = json.loads((stack.state_dir / ENV_FILE).read_text())["CreateTicketFunction"]
    event = json.loads((PROJECT_ROOT / "events" / "create_ticket.json").read_text())
    spec = function_specs()["CreateTicketFunction"]
    lambda_env = {"AWS_REGION": "us-east-1", **operator_environment(stack.state_dir)}
    with environment({**variables, **lambda_env, "ALLOWED_CLIENT_IDS": SAMPLE_CLIENT_ID}):
        get_settings.cache_clear()
        token_exchange.cache_clear()
        try:
            response = load_handler(spec.code_uri, spec.handler)(event, LambdaContext(function_name=spec.logical_id))
        finally:
            get_settings.cache_clear()
            token_exchange.cache_clear()
    assert response["statusCode"] == 401, response


def test_drain_command_waits_for_the_stream_the_queues_and_the_usage_lines(stack: RunningStack) -> None:
    # Given a request whose effects arrive later: counts and the trail by the stream,
    # its usage lines by the metering function's log subscription
    tenant = new_tenant_id()
    admin = stack.token(tenant, f"root-{tenant}", admin=True)
    assert stack.request("POST", "/tickets", token=admin, body={"title": "drained"}).status == 201
    # When the drain command returns
    result = cli(stack.state_dir, "drain", "--timeout", "60")
    # Then all of it has landed, and it says what each source delivered
    assert result.returncode == 0, result.stderr
    drained = json.loads(result.stdout)
    assert drained["drained"] is True
    assert drained["rounds"] >= 2  # the last round found nothing moving
    assert drained["stream"]["delivered"] > 0
    assert {"invocations", "deleted", "failed_invocations"} <= set(drained["queues"])
    assert drained["logs"]["delivered_lines"] > 0
    # (usage first: the GET /aggregates below is a request too, and its line may land at once)
    assert stack.request("GET", "/usage", token=admin).body["requests"] == {"POST /tickets": 1}
    assert stack.request("GET", "/aggregates", token=admin).body["counts"]["OPEN"] == 1
