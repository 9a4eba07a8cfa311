"""Against the local stack: each request's ``"request handled"`` line carries
realistic DynamoDB units (the emulator answers ``ConsumedCapacity`` with the
capacity model's units, not moto's constants), under its own tenant only."""

from __future__ import annotations

import io
import json
import math
import time
from decimal import Decimal
from typing import Any

from ops import usage as ops_usage
from stack_model.capacity import TableShape, item_size
from support_tickets.core import keys
from support_tickets.usage.counters import read_day
from tests.e2e.conftest import STATE_FILE, Caller, RunningStack, server_log

DESCRIPTION_BYTES = 9000  # a ticket of about 9.1 KB: 10 write units, 3 x 4 KB to read


def usage_lines(stack: RunningStack, tenant_id: str) -> list[dict[str, Any]]:
    found = []
    for text in server_log(stack).splitlines():
        if '"request handled"' not in text or tenant_id not in text:
            continue
        try:
            line = json.loads(text[text.index("{") :])
        except ValueError:
            continue
        if line.get("message") == "request handled" and line.get("tenant_id") == tenant_id:
            found.append(line)
    return found


def wait_for_lines(stack: RunningStack, tenant_id: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while (lines := usage_lines(stack, tenant_id)) and len(lines) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return lines


def test_units_are_the_models_for_a_known_item(stack: RunningStack, tenant_pair: tuple[Caller, Caller]) -> None:
    caller, other = tenant_pair
    # Given a ticket of about 9 KB, created and then read by its summary
    created = stack.request(
        "POST", "/tickets", token=caller.token, body={"title": "big", "description": "d" * DESCRIPTION_BYTES}
    )
    assert created.status == 201, created.body
    ticket_id = created.body["ticket_id"]
    summary = stack.request("GET", f"/tickets/{ticket_id}/summary", token=caller.token)
    assert summary.status == 200
    # The item as stored, sized by the model
    table = str(stack.state["table_name"])
    stored = stack.operator("dynamodb").get_item(TableName=table, Key=keys.ticket_key(caller.tenant_id, ticket_id))
    size = item_size(stored["Item"])
    index_entry = TableShape.from_template(table).index_entry("GSI1", stored["Item"])
    # Then the lines say what DynamoDB would bill, not moto's constant 1.0 / 0.5
    lines = wait_for_lines(stack, caller.tenant_id, 2)
    by_route = {line["usage"]["route"]: line["usage"] for line in lines}
    create_usage, summary_usage = by_route["POST /tickets"], by_route["GET /tickets/{ticket_id}/summary"]
    item_writes = math.ceil(size / 1024) + (math.ceil(item_size(index_entry) / 1024) if index_entry else 0)
    # Each route's own call, plus one strongly consistent read of the (small)
    # tenant record when the function's cache of it had expired: 1 unit.
    tenant_record_reads = {name: usage["dynamodb_calls"] - 1 for name, usage in by_route.items()}
    assert (create_usage["write_units"], create_usage["read_units"]) == (
        item_writes,  # the item's 10 KB plus its GSI1 entry's 1
        tenant_record_reads["POST /tickets"] * 1.0,
    )
    assert item_writes >= 10
    item_reads = math.ceil(size / 4096)  # a strongly consistent GetItem: 3 x 4 KB
    assert (summary_usage["read_units"], summary_usage["write_units"]) == (
        item_reads + tenant_record_reads["GET /tickets/{ticket_id}/summary"] * 1.0,
        0.0,
    )
    # and the other tenant's lines (none here) never carry this tenant's requests
    assert all(line["tenant_id"] == other.tenant_id for line in usage_lines(stack, other.tenant_id))
    assert not [line for line in usage_lines(stack, other.tenant_id) if line["usage"]["route"] == "POST /tickets"]


def test_a_known_mix_of_two_tenants_appears_exactly_in_get_usage_and_make_usage(
    stack: RunningStack, tenant_pair: tuple[Caller, Caller]
) -> None:
    first, second = (caller.tenant_id for caller in tenant_pair)  # "<t>" and "<t>0"
    admin_1 = stack.token(first, f"a-{first}", admin=True)
    admin_10 = stack.token(second, f"a-{second}", admin=True)
    # Given a known mix of requests of each tenant (a 404 is a request too)
    for title in ("a", "b"):
        assert stack.request("POST", "/tickets", token=admin_1, body={"title": title}).status == 201
    assert stack.request("GET", "/tickets", token=admin_1).status == 200
    own = stack.request("POST", "/tickets", token=admin_10, body={"title": "c"}).body["ticket_id"]
    assert stack.request("GET", f"/tickets/{own}/summary", token=admin_10).status == 200
    first_ticket = stack.request("GET", "/tickets", token=admin_1).body["items"][0]["ticket_id"]
    assert stack.request("GET", f"/tickets/{first_ticket}/summary", token=admin_10).status == 404
    # When the stream functions have processed the changes and every function's log
    # lines reached the metering function (no sleep: the drains)
    assert stack.drain()["drained"]
    drained = stack.drain_logs()
    assert drained["drained"], drained
    assert drained["given_up"] == 0
    # Then each tenant's admin sees exactly its own requests, with units and a cost
    expected = {
        first: {"POST /tickets": 2, "GET /tickets": 2},
        second: {"POST /tickets": 1, "GET /tickets/{ticket_id}/summary": 2},
    }
    answers = {}
    for tenant, token in ((first, admin_1), (second, admin_10)):
        response = stack.request("GET", "/usage", token=token)
        assert response.status == 200, response.body
        usage = answers[tenant] = response.body
        assert (usage["tenant_id"], usage["requests"]) == (tenant, expected[tenant])
        assert usage["requests_total"] == sum(expected[tenant].values())
        # one per request, and the authorizer's for the admin's new token (its answer is cached)
        assert usage["lambda"]["invocations"] >= usage["requests_total"] + 1
        assert usage["lambda"]["gb_seconds"] > 0
        assert usage["dynamodb"]["write_units"] > 0
        assert usage["dynamodb"]["read_units"] > 0
        assert usage["cost_usd"]["total"] > usage["cost_usd"]["api_gateway"] > 0
        assert usage["final"] is False
    # with the stream functions' work on the tenants whose tickets caused it: the
    # aggregator's and the audit writer's shares are in the GB-seconds and the units
    for tenant, usage in answers.items():
        counters = read_day(stack.operator("dynamodb"), str(stack.state["table_name"]), tenant, usage["day"])
        assert counters["stream_mb_ms"] > 0, tenant
        mb_ms = counters["mb_ms"] + counters["authorizer_mb_ms"] + counters["stream_mb_ms"]
        assert usage["lambda"]["gb_seconds"] == float((mb_ms / 1024 / 1000).quantize(Decimal("1e-9")))
    # members may not
    assert stack.request("GET", "/usage", token=tenant_pair[0].token).status == 403
    # and make usage says the same, now with the GET /usage requests counted too
    # (the member's refused one included: it reached the function under its tenant)
    assert stack.drain_logs()["drained"]
    expected[first]["GET /usage"] = 2
    expected[second]["GET /usage"] = 1
    state = str(stack.state_dir / STATE_FILE)
    for tenant in (first, second):
        out = io.StringIO()
        assert ops_usage.main(["--tenant", tenant, "--local", "--local-state", state], out=out) == 0
        made = json.loads(out.getvalue())
        assert (made["tenant_id"], made["requests"]) == (tenant, expected[tenant])
        assert made["dynamodb"]["write_units"] == answers[tenant]["dynamodb"]["write_units"]  # reading writes nothing
        assert made["dynamodb"]["read_units"] > answers[tenant]["dynamodb"]["read_units"]  # its Query read
    table = io.StringIO()
    assert ops_usage.main(["--local", "--local-state", state], out=table) == 0
    rows = {line.split()[0]: line.split() for line in table.getvalue().splitlines()[3:]}
    assert rows[first][1] == str(sum(expected[first].values()))
    assert rows[second][1] == str(sum(expected[second].values()))


def test_requests_refused_as_too_large_are_the_tokens_tenants(
    stack: RunningStack, tenant_pair: tuple[Caller, Caller]
) -> None:
    caller, other = tenant_pair
    table = str(stack.state["table_name"])
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert stack.drain_logs()["drained"]
    before = {t: read_day(stack.operator("dynamodb"), table, t, day) for t in (caller.tenant_id, other.tenant_id)}
    # Given three POST /tickets over 64 KiB with a valid token (API Gateway ran the
    # authorizer and invoked the function: both are billed)
    oversized = json.dumps({"title": "t", "description": "x" * (64 * 1024)}).encode()
    for _ in range(3):
        refused = stack.request("POST", "/tickets", token=caller.token, raw=oversized)
        assert (refused.status, refused.error_code) == (413, "PAYLOAD_TOO_LARGE")
    assert stack.drain_logs()["drained"]
    after = {t: read_day(stack.operator("dynamodb"), table, t, day) for t in (caller.tenant_id, other.tenant_id)}
    # Then they are the token's tenant's requests (one invocation each), and nobody else's
    zero = Decimal(0)
    moved = {
        name: after[caller.tenant_id].get(name, zero) - before[caller.tenant_id].get(name, zero)
        for name in ("requests", "requests:POST /tickets", "mb_ms")
    }
    assert (moved["requests"], moved["requests:POST /tickets"]) == (Decimal(3), Decimal(3))
    assert moved["mb_ms"] > 0
    assert after[other.tenant_id] == before[other.tenant_id]
