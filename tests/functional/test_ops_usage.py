"""``make usage`` (ops.usage) over moto: a tenant's usage object as GET /usage
builds it, every tenant of the stack's directory (its API keys) costliest
first, the chart, and bad arguments as one-line errors."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest

from ops import usage as ops_usage
from ops.api_keys import ApiKeys
from support_tickets.core import keys
from support_tickets.usage.report import usage_object
from tests.conftest import instant_tenant_admin

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DAY = "2026-11-25"
NOW = datetime(2026, 11, 25, 15, 0, tzinfo=UTC)


def put_counters(dynamodb: DynamoDBClient, table_name: str, tenant: str, slot: int, **counters: str) -> None:
    item = {"pk": {"S": keys.usage_pk(tenant)}, "sk": {"S": keys.usage_sk(DAY, slot)}}
    item.update({name: {"N": value} for name, value in counters.items()})
    dynamodb.put_item(TableName=table_name, Item=item)


def test_one_tenants_usage_sums_its_slots(aws: None, dynamodb: DynamoDBClient, table_name: str) -> None:
    put_counters(dynamodb, table_name, "1", 0, requests="2", read_units="1.5", write_units="0", mb_ms="1024")
    put_counters(dynamodb, table_name, "1", 3, requests="1", read_units="0.5", write_units="10", mb_ms="2048")
    put_counters(dynamodb, table_name, "10", 0, requests="7", read_units="99", write_units="99", mb_ms="1")
    got = ops_usage.tenant_usage(dynamodb, table_name, "1", DAY, NOW)
    sums = {"requests": Decimal(3), "read_units": Decimal(2), "write_units": Decimal(10), "mb_ms": Decimal(3072)}
    assert got == usage_object("1", DAY, sums, NOW)
    assert got["requests_total"] == 3  # nothing of tenant 10


def test_a_dedicated_tenants_usage_prices_its_key_from_its_record(
    aws: None, dynamodb: DynamoDBClient, table_name: str
) -> None:
    # Given tenant 1 placed in its own table since the 1st, tenant 10 in the pool, both with usage
    admin = instant_tenant_admin(dynamodb, table_name)
    placed_at = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp())
    changes = {"placement": "dedicated", "table": f"{table_name}-dedicated-1", "placed_at": placed_at}
    admin.write(admin.record("1"), changes)
    admin.write(admin.record("10"), {"tier": "basic"})
    put_counters(dynamodb, table_name, "1", 0, requests="2", write_units="4")
    put_counters(dynamodb, table_name, "10", 0, requests="2", write_units="4")
    # When the operator reads them (a whole day's share: the day is over by NOW + 1 day)
    later = datetime(2026, 11, 26, 15, 0, tzinfo=UTC)
    mine, theirs = (ops_usage.tenant_usage(dynamodb, table_name, t, DAY, later) for t in ("1", "10"))
    # Then tenant 1's figure is GET /usage's, with its key's share of the day; tenant 10's has none
    assert mine["cost_usd"]["dedicated"] == float((Decimal(1) / 30).quantize(Decimal("1e-10")))
    assert "dedicated" not in theirs["cost_usd"]
    assert mine["cost_usd"]["total"] == pytest.approx(theirs["cost_usd"]["total"] + 1 / 30)
    # and the table shows the component (0 for a pooled tenant), the costliest first
    out = io.StringIO()
    ops_usage.write_table([theirs, mine], DAY, out)
    lines = out.getvalue().splitlines()
    header = lines[1].split()
    assert header[-4:] == ["webhooks", "dedicated", "total", "USD"]
    assert lines[3].split()[0] == "1"
    assert float(lines[3].split()[-2]) == pytest.approx(1 / 30, abs=1e-8)
    assert float(lines[4].split()[-2]) == 0.0


def test_the_directory_is_the_stacks_tenants_api_keys(aws: None) -> None:
    apigateway = boto3.client("apigateway", region_name="us-east-1")
    ours, other_stack = ApiKeys(apigateway, {}, "st"), ApiKeys(apigateway, {}, "other")
    for tenant in ("acme", "1", "10"):
        ours.ensure(tenant)
    other_stack.ensure("globex")
    apigateway.create_api_key(name="st.forged", tags={"stack": "other", "tenant": "forged"})
    assert ours.tenants() == ["1", "10", "acme"]


def usage_of(tenant: str, requests: int, writes: str) -> dict[str, object]:
    sums = {"requests": Decimal(requests), "write_units": Decimal(writes)}
    return dict(usage_object(tenant, DAY, sums, NOW))


def test_the_table_is_costliest_first_with_a_total() -> None:
    out = io.StringIO()
    usages = [usage_of("cheap", 1, "0"), usage_of("dear", 5, "100"), usage_of("middle", 5, "0")]
    ops_usage.write_table(usages, DAY, out)  # type: ignore[arg-type]
    lines = out.getvalue().splitlines()
    assert lines[0] == f"usage of {DAY} (UTC), not final yet: 3 tenants"
    assert lines[1].split()[0] == "tenant"
    assert [line.split()[0] for line in lines[3:6]] == ["dear", "middle", "cheap"]
    assert lines[-1].split()[:2] == ["total", "11"]
    dear_total = float(lines[3].split()[-1])
    assert dear_total == pytest.approx(5 * 3.5e-6 + 5 * 0.2e-6 + 100 * 0.625e-6)


def test_the_chart_is_a_png(tmp_path: Path) -> None:
    chart = tmp_path / "usage.png"
    ops_usage.draw_chart([usage_of("a", 3, "5"), usage_of("b", 1, "0")], DAY, chart)  # type: ignore[list-item]
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (["--tenant", "Not_A_Tenant"], "not a tenant id"),
        (["--day", "2026-11-26"], "not a day usage is kept for"),
        (["--day", "yesterday"], "not a day usage is kept for"),
        (["--chart", "usage.svg"], "the chart is a PNG file"),
        (["--chart", "/no/such/dir/usage.png"], "no such directory"),
        ([], "the local stack is not running"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    arguments: list[str], says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / "absent.json"
    code = ops_usage.main([*arguments, "--local", "--local-state", str(state)], out=io.StringIO(), now=NOW)
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    assert says in err
