"""GET /usage through its handler, over moto, fed by the real pipeline: the API
functions' own ``"request handled"`` lines, delivered to the metering function
as CloudWatch Logs delivers them, then read back by each tenant's admin.
Admins only, each tenant its own usage only (tenants 1 and 10), a bad day 400."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from local_stack.local_values import offline_values
from stack_model.dedicated import dedicated_values
from stack_model.dedicated import table_definition as dedicated_table_definition
from support_tickets.data.tenant_registry import tenant_configs
from support_tickets.usage import prices
from tests.conftest import all_items, instant_tenant_admin
from tests.functional.api_harness import Api, User, assert_error
from tests.functional.conftest import TENANT_PAIRS
from tests.functional.test_metering import METERING, load_function, payload

if TYPE_CHECKING:
    from types import ModuleType

    from mypy_boto3_dynamodb import DynamoDBClient

from local_stack.lambda_.runtime import LambdaContext

LogLines = Callable[[], list[dict[str, Any]]]


@pytest.fixture
def metering(aws: None, dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    function = load_function()
    monkeypatch.setattr(function, "metering_client", lambda: dynamodb)
    yield function
    sys.modules.pop(function.__name__, None)


def log_events(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``"request handled"`` lines as CloudWatch Logs events (each its own id)."""
    now_ms = int(time.time() * 1000)
    handled = [line for line in lines if line.get("message") == "request handled"]
    return [
        {"id": f"{now_ms}{index:08d}", "timestamp": now_ms, "message": json.dumps(line)}
        for index, line in enumerate(handled)
    ]


def deliver(metering: ModuleType, events: list[dict[str, Any]], stream: str = "2026/11/25/[$LATEST]f00d") -> None:
    """One subscription delivery of ``events`` (as CloudWatch Logs sends it)."""
    result = metering.lambda_handler(payload(events, stream), LambdaContext(METERING))
    assert result["failed"] == 0, result


def usage(api: Api, admin: User, **query: str) -> dict[str, Any]:
    response = api.call("usage", admin, query=query or None)
    assert response.status == 200, response.body
    body: dict[str, Any] = response.body
    return body


def today() -> str:
    return datetime.now(UTC).date().isoformat()


def test_a_known_mix_of_requests_appears_exactly(
    api: Api, admin: User, metering: ModuleType, log_lines: LogLines
) -> None:
    # Given three creates, two lists and a summary, delivered to the metering function
    ticket_ids = [api.new_ticket(admin, title=f"t{n}")["ticket_id"] for n in range(3)]
    api.list_tickets(admin)
    api.list_tickets(admin, status="CLOSED")
    api.summary(admin, ticket_ids[0])
    lines = [line for line in log_lines() if line.get("message") == "request handled"]
    assert len(lines) == 6
    events = log_events(lines)
    deliver(metering, events)
    # When the tenant's admin asks for today's usage
    day = today()
    got = usage(api, admin, day=day)
    # Then every request is there once, with the lines' own units, and a cost
    assert got["tenant_id"] == admin.tenant_id
    assert got["day"] == day
    assert got["requests"] == {"POST /tickets": 3, "GET /tickets": 2, "GET /tickets/{ticket_id}/summary": 1}
    assert got["requests_total"] == 6
    reads = sum(line["usage"]["read_units"] for line in lines)
    writes = sum(line["usage"]["write_units"] for line in lines)
    assert got["dynamodb"] == {"read_units": pytest.approx(reads), "write_units": pytest.approx(writes)}
    assert got["dynamodb"]["write_units"] > 0
    assert got["dynamodb"]["read_units"] > 0
    assert got["lambda"]["invocations"] == 6
    mb_ms = sum(line["usage"]["duration_ms"] * line["usage"]["memory_mb"] for line in lines)
    assert got["lambda"]["gb_seconds"] == pytest.approx(mb_ms / 1024 / 1000, abs=1e-9)
    cost = got["cost_usd"]
    assert cost["api_gateway"] == pytest.approx(6 * float(prices.API_GATEWAY_REST_PER_MILLION_USD) / 1e6)
    assert cost["dynamodb"] > 0
    assert cost["lambda"] > 0
    assert cost["total"] == pytest.approx(cost["api_gateway"] + cost["lambda"] + cost["dynamodb"])
    assert got["final"] is False
    # and the same delivery again (a redelivery) changes nothing
    deliver(metering, events)
    assert usage(api, admin, day=day) == got


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_each_tenant_sees_only_its_own_usage(
    api: Api, owner: str, other: str, metering: ModuleType, log_lines: LogLines
) -> None:
    owner_admin, other_admin = User(owner, "root", admin=True), User(other, "root", admin=True)
    api.new_ticket(owner_admin)
    api.new_ticket(owner_admin)
    api.list_tickets(other_admin)
    # one delivery holding both tenants' lines (one execution environment serves any tenant)
    deliver(metering, log_events(log_lines()))
    day = today()
    mine, theirs = usage(api, owner_admin, day=day), usage(api, other_admin, day=day)
    assert (mine["tenant_id"], mine["requests"]) == (owner, {"POST /tickets": 2})
    assert (theirs["tenant_id"], theirs["requests"]) == (other, {"GET /tickets": 1})
    assert mine["dynamodb"]["write_units"] > 0
    assert theirs["dynamodb"]["write_units"] == 0


def test_members_may_not_read_usage(api: Api, user: User) -> None:
    assert_error(api.call("usage", user), 403, "FORBIDDEN")


def test_a_day_without_usage_is_zero_and_final_once_closed(api: Api, admin: User) -> None:
    got = usage(api, admin, day="2025-01-31")
    assert got["requests"] == {}
    assert got["requests_total"] == 0
    assert got["lambda"] == {"invocations": 0, "gb_seconds": 0.0}
    assert got["cost_usd"]["total"] == 0.0
    assert got["final"] is True
    assert usage(api, admin)["day"] == today()  # the default: today, UTC


@pytest.mark.parametrize(
    "day", ["2026-13-01", "2026-02-30", "26-11-25", "2023-12-31", "9999-12-31", "today", "2026-11-25 "]
)
def test_a_bad_day_is_a_validation_error(api: Api, admin: User, day: str) -> None:
    error = assert_error(api.call("usage", admin, query={"day": day}), 400, "VALIDATION_ERROR")
    assert [detail["field"] for detail in error["details"]] == ["day"]


def test_route_counts_are_per_method_and_route_path(
    api: Api, admin: User, metering: ModuleType, log_lines: LogLines
) -> None:
    ticket_id = api.new_ticket(admin)["ticket_id"]
    api.get(admin, ticket_id)
    api.get(admin, "01JD3Z9A2B3C4D5E6F7G8H9J0K")  # a 404 is a request too
    lines = log_lines()
    deliver(metering, log_events(lines))
    counted = Counter(line["usage"]["route"] for line in lines if line.get("message") == "request handled")
    assert usage(api, admin)["requests"] == dict(counted) == {"POST /tickets": 1, "GET /tickets/{ticket_id}": 2}


@pytest.mark.parametrize(("dedicated", "pooled"), TENANT_PAIRS)
def test_a_dedicated_tenants_usage_is_read_from_the_pool_and_prices_its_own_key(
    api: Api, dynamodb: DynamoDBClient, table_name: str, dedicated: str, pooled: str, metering: ModuleType,
    log_lines: LogLines,
) -> None:  # fmt: skip
    # Given a tenant placed in a table of its own since yesterday (its record, in the pool, says so)...
    own = own_table(dynamodb, dedicated)
    record = instant_tenant_admin(dynamodb, table_name).record(dedicated)
    since = int(time.time()) - 86_400
    instant_tenant_admin(dynamodb, table_name).write(
        record, {"placement": "dedicated", "table": own, "placed_at": since}
    )
    tenant_configs().clear()
    # ...whose requests, and a pooled neighbour's, were metered (the ledger stays in the pool table)
    admin, neighbour = User(dedicated, "root", admin=True), User(pooled, "root", admin=True)
    api.new_ticket(admin)
    api.list_tickets(admin)
    api.new_ticket(neighbour)
    deliver(metering, log_events(log_lines()))
    assert all(item["pk"]["S"] != f"TENANT#{dedicated}|USAGE" for item in all_items(dynamodb, own))
    # When each admin asks for today's usage
    mine, theirs = usage(api, admin), usage(api, neighbour)
    # Then the dedicated tenant's figures are its requests', with its key's share of the day so far
    assert mine["requests"] == {"POST /tickets": 1, "GET /tickets": 1}
    assert mine["dynamodb"]["write_units"] > 0
    assert 0 < mine["cost_usd"]["dedicated"] <= float(prices.KMS_KEY_PER_MONTH_USD) / 28
    parts = ("api_gateway", "lambda", "dynamodb", "webhooks", "dedicated")
    assert mine["cost_usd"]["total"] == pytest.approx(sum(mine["cost_usd"][part] for part in parts))
    # and the pooled neighbour's have no such component, nor anything of the other's
    assert theirs["requests"] == {"POST /tickets": 1}
    assert "dedicated" not in theirs["cost_usd"]


def own_table(dynamodb: DynamoDBClient, tenant: str) -> str:
    """The tenant's dedicated table, made in moto from the dedicated template's definition."""
    values = dedicated_values(tenant, offline_values(user_pool_id="p", client_id="c", identity_pool_id="i"))
    definition = dedicated_table_definition(values)
    dynamodb.create_table(**definition)
    return str(definition["TableName"])
