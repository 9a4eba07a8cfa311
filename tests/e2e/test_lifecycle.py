"""The audit trail and a tenant's lifecycle end to end, over HTTP against the
local stack: the stream poller feeds the audit writer from the template's
event source; ``make tenant STATUS=``, ``make export`` and ``make offboard``
run as the commands they are (``python -m ops.<command> --local``)."""

from __future__ import annotations

import datetime
import json
import subprocess
import time
from decimal import Decimal
from typing import Any

import pytest

from ops.routes import api_routes
from ops.tenant_data import ledger_partitions
from support_tickets.usage.counters import read_day
from tests.e2e.conftest import (
    TENANT_CONFIG_TTL_SECONDS,
    Caller,
    RunningStack,
    is_usage_item,
    new_tenant_id,
    python_module,
    run_main,
)

PHASE_SECONDS = str(TENANT_CONFIG_TTL_SECONDS + 1)


def command(stack: RunningStack, module: str, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """``make <command>`` against the running stack: ``python -m ops.<module> --local``,
    in-process (its ``main``), or as a real process with ``process``."""
    state = str(stack.state_dir / "stack.json")
    if process:
        return python_module(f"ops.{module}", *args, "--local", "--local-state", state, timeout=600)
    return run_main(f"ops.{module}", *args, "--local", "--local-state", state)


def tenant_items(stack: RunningStack, tenant: str) -> list[dict[str, Any]]:
    """Every item of a tenant (a Scan, as an assertion only: no command scans), filtered
    on its prefix in the emulator: the session's table holds every other test's items
    too, and only the tenant's cross the wire."""
    dynamodb = stack.operator("dynamodb")
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": stack.state["table_name"],
        "FilterExpression": "begins_with(pk, :prefix)",
        "ExpressionAttributeValues": {":prefix": {"S": f"TENANT#{tenant}|"}},
    }
    while True:
        page = dynamodb.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def tenant_data(stack: RunningStack, tenant: str) -> list[dict[str, Any]]:
    """A tenant's items but its usage counters (their exactness: tests/e2e/test_usage.py)."""
    return [item for item in tenant_items(stack, tenant) if not is_usage_item(item)]


def populate(stack: RunningStack, tenant: str) -> dict[str, str]:
    """A tenant with users, tickets, comments, a change, a deletion, an
    idempotency record; the stream drained (counts, journals, audit trail)."""
    member, admin = f"m-{tenant}", f"a-{tenant}"
    tokens = {"member": stack.token(tenant, member), "admin": stack.token(tenant, admin, admin=True)}
    ids = []
    for n in range(3):
        created = stack.request("POST", "/tickets", token=tokens["member"], body={"title": f"{tenant} {n}"})
        assert created.status == 201, created.body
        ids.append(created.body["ticket_id"])
        comment = stack.request("POST", f"/tickets/{ids[-1]}/comments", token=tokens["member"], body={"body": "c"})
        assert comment.status == 201
    changed = stack.request("PATCH", f"/tickets/{ids[0]}", token=tokens["admin"], body={"status": "CLOSED"})
    assert changed.status == 200
    assert stack.request("DELETE", f"/tickets/{ids[1]}", token=tokens["admin"]).status == 204
    idempotent = stack.request(
        "POST", "/tickets", token=tokens["member"], body={"title": "once"}, headers={"Idempotency-Key": "k1"}
    )
    assert idempotent.status == 201
    # Its usage lines delivered too: a delivery arriving after an offboarding
    # would count its requests again under the erased tenant (docs/usage.md).
    assert stack.drain_logs()["drained"] is True
    assert stack.drain()["drained"] is True
    return {**tokens, "kept": ids[0], "deleted": ids[1]}


# ---------------------------------------------------------------- the audit trail
def test_every_change_reaches_the_trail_with_its_actor(stack: RunningStack, tenant_pair: tuple[Caller, Caller]) -> None:
    owner, intruder = tenant_pair
    admin = stack.token(owner.tenant_id, f"root-{owner.tenant_id}", admin=True)
    created = stack.request("POST", "/tickets", token=owner.token, body={"title": "Printer", "description": "secret"})
    ticket_id = created.body["ticket_id"]
    assert stack.request("PATCH", f"/tickets/{ticket_id}", token=admin, body={"resolver": "johnd"}).status == 200
    assert stack.request("POST", f"/tickets/{ticket_id}/comments", token=owner.token, body={"body": "hi"}).status == 201
    assert stack.request("DELETE", f"/tickets/{ticket_id}", token=admin).status == 204
    assert stack.drain()["drained"] is True
    history = stack.request("GET", f"/tickets/{ticket_id}/history", token=owner.token)
    assert history.status == 200, history.body
    events = [(event["type"], event["actor"]) for event in history.body["events"]]
    root = f"root-{owner.tenant_id}"
    member = owner.username
    assert events == [("created", member), ("updated", root), ("comment_added", member), ("deleted", root)]
    trail = stack.request("GET", "/audit", token=admin)
    assert [event["type"] for event in trail.body["events"]] == ["deleted", "comment_added", "updated", "created"]
    assert "secret" not in json.dumps(trail.body)
    # the other tenant (whose id has this one's as a prefix) sees none of it
    assert stack.request("GET", f"/tickets/{ticket_id}/history", token=intruder.token).status == 404
    intruder_admin = stack.token(intruder.tenant_id, f"root-{intruder.tenant_id}", admin=True)
    assert stack.request("GET", "/audit", token=intruder_admin).body["events"] == []
    assert stack.request("GET", "/audit", token=owner.token).error_code == "FORBIDDEN"


# ---------------------------------------------------------------- suspension
def test_a_suspended_tenant_is_refused_everywhere_and_reactivated(
    stack: RunningStack, tenant_pair: tuple[Caller, Caller]
) -> None:
    tenant, neighbour = tenant_pair
    admin = stack.token(tenant.tenant_id, f"root-{tenant.tenant_id}", admin=True)
    ticket_id = stack.request("POST", "/tickets", token=tenant.token, body={"title": "t"}).body["ticket_id"]
    assert stack.drain()["drained"] is True
    before = tenant_items(stack, tenant.tenant_id)
    suspended = command(stack, "tenants", "--tenant", tenant.tenant_id, "--status", "SUSPENDED")
    assert suspended.returncode == 0, suspended.stderr
    assert json.loads(suspended.stdout)["status"] == "SUSPENDED"
    assert "TENANT_CONFIG_TTL_SECONDS" in suspended.stderr
    time.sleep(TENANT_CONFIG_TTL_SECONDS + 0.5)  # the stated propagation delay (1 s in this stack)
    for route in api_routes():  # every route of the template (ops/routes.py)
        response = stack.request(route.method, route.url(ticket_id), token=admin, body=route.body(ticket_id))
        assert (response.status, response.error_code) == (403, "TENANT_SUSPENDED"), (route.key, response.body)
    # its data is untouched (the record aside; its usage counters follow its
    # create asynchronously: see below), and its neighbour is not affected
    assert stack.drain()["drained"] is True

    def data(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [item for item in items if item["sk"]["S"] != "CONFIG" and not is_usage_item(item)]

    assert data(tenant_items(stack, tenant.tenant_id)) == data(before)
    # its usage counts its create only: the authorizer refused the rest at the
    # gateway (no function ran; API Gateway bills no refused authorization)
    assert stack.drain_logs()["drained"] is True
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    counted = read_day(stack.operator("dynamodb"), stack.state["table_name"], tenant.tenant_id, today)
    assert (counted["requests"], counted["requests:POST /tickets"]) == (Decimal(1), Decimal(1))
    assert stack.request("GET", "/tickets", token=neighbour.token).status == 200
    reactivated = command(stack, "tenants", "--tenant", tenant.tenant_id, "--status", "ACTIVE")
    assert reactivated.returncode == 0, reactivated.stderr
    time.sleep(TENANT_CONFIG_TTL_SECONDS + 0.5)
    assert stack.request("GET", f"/tickets/{ticket_id}", token=tenant.token).status == 200


# ---------------------------------------------------------------- export, then offboarding
def test_an_exported_then_offboarded_tenant_leaves_nothing_and_its_neighbours_untouched(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    neighbours = [tenant + "0", tenant + "-a"]  # as 1, 10 and 1-a
    made = populate(stack, tenant)
    for other in neighbours:
        populate(stack, other)
    # Its export: JSON lines of its own tickets, none of its neighbours'
    result = command(stack, "export", "--tenant", tenant, process=True)  # the smoke test of `python -m ops.*`
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert {line["ticket"]["title"] for line in lines} == {f"{tenant} 0", f"{tenant} 2", "once"}
    kept = next(line for line in lines if line["ticket"]["ticket_id"] == made["kept"])
    assert [comment["body"] for comment in kept["comments"]] == ["c"]
    assert [event["type"] for event in kept["history"]] == ["created", "comment_added", "updated"]
    assert "3 tickets exported" in result.stderr
    assert "is ACTIVE" in result.stderr
    # Then its offboarding
    kinds = {item["pk"]["S"].split("|", 1)[1].split("#", 1)[0] for item in tenant_items(stack, tenant)}
    assert kinds >= {"TICKET", "HISTORY", "AUDIT", "AGGREGATE", "IDEMPOTENCY"}
    # (their usage counters go on moving as the stream functions' and log deliveries' lines arrive)
    before = {other: tenant_data(stack, other) for other in neighbours}
    # refused without CONFIRM equal to the tenant id
    refused = command(stack, "offboard", "--tenant", tenant, "--confirm", tenant + "0")
    assert refused.returncode == 1
    assert "CONFIRM" in refused.stderr
    assert tenant_items(stack, tenant) != []
    # When it is offboarded (no grace for tokens here; the record kept for them while it lasts:
    # tests/functional/test_tenant_lifecycle.py)
    args = ["--tenant", tenant, "--confirm", tenant, "--phase-seconds", PHASE_SECONDS, "--settle", "1"]
    result = command(stack, "offboard", *args, "--grace-seconds", "0")
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert (outcome["record"], outcome["users_deleted"]) == ("erased", 2)
    assert stack.drain()["drained"] is True
    # Then nothing of it is left but its usage ledger, even after the stream drained; its users are gone
    ledger = ledger_partitions(tenant)
    assert [item for item in tenant_items(stack, tenant) if item["pk"]["S"] not in ledger] == []
    pool = stack.pool()
    for user in (f"m-{tenant}", f"a-{tenant}"):
        with pytest.raises(pool.cognito.exceptions.UserNotFoundException):
            pool.cognito.admin_get_user(UserPoolId=pool.pool_id, Username=user)
    # And its neighbours are untouched, item for item
    for other in neighbours:
        assert tenant_data(stack, other) == before[other], other
    # and a token its member still holds reaches nothing: its API key is a tombstone, tagged, disabled
    # and in no plan through the emulator's API Gateway (INVALID_API_KEY at the gateway while the
    # authorizer's answer from before is cached: 503 TENANT_MOVING, to retry; then the authorizer's 403)
    apigateway = stack.operator("apigateway")
    name = f"{stack.state['stack_name']}.{tenant}"
    (key,) = [item for item in apigateway.get_api_keys(nameQuery=name)["items"] if item["name"] == name]
    assert ("offboarded" in key["tags"], key["enabled"]) == (True, False)
    assert apigateway.get_usage_plans(keyId=key["id"])["items"] == []
    response = stack.request("GET", f"/tickets/{made['kept']}/history", token=made["member"])
    assert (response.status, response.error_code) == (503, "TENANT_MOVING")
    response = stack.request("POST", "/tickets", token=made["member"], body={"title": "still here?"})
    assert (response.status, response.error_code) == (503, "TENANT_MOVING")
    assert [item for item in tenant_items(stack, tenant) if item["pk"]["S"] not in ledger] == []
