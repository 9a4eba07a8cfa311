"""The usage object of API.md from a day's counters (support_tickets.usage.report):
prices, the requested day's checks, when a day is final, and the sums of a
day's slots (support_tickets.usage.counters)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from bench.cost import PRICES
from stack_model.dedicated import dedicated_resources
from support_tickets.core.errors import ValidationFailed
from support_tickets.data.tenant_registry import TenantConfig
from support_tickets.usage import prices
from support_tickets.usage.counters import add_counters
from support_tickets.usage.report import (
    KEY_ROTATION_PERIOD_SECONDS,
    is_final,
    own_table_windows,
    parse_day,
    usage_object,
)

NOW = datetime(2026, 11, 25, 14, 30, tzinfo=UTC)


def test_the_benchmark_prices_with_the_layers_prices() -> None:
    assert PRICES["api_gateway_rest_per_million_usd"] == float(prices.API_GATEWAY_REST_PER_MILLION_USD) == 3.5
    assert PRICES["dynamodb_on_demand_per_million_wru_usd"] == float(prices.DYNAMODB_ON_DEMAND_PER_MILLION_WRU_USD)
    assert PRICES["dynamodb_on_demand_per_million_rru_usd"] == float(prices.DYNAMODB_ON_DEMAND_PER_MILLION_RRU_USD)
    assert PRICES["lambda_x86_per_gb_second_usd"] == float(prices.LAMBDA_X86_PER_GB_SECOND_USD)
    assert PRICES["sources"] == list(prices.SOURCES)


def test_a_days_slots_are_summed_exactly() -> None:
    pk = {"S": "TENANT#a|USAGE"}
    items = [
        {"pk": pk, "sk": {"S": "2026-11-25#0"}, "requests": {"N": "2"}, "read_units": {"N": "0.1"}},
        {"pk": pk, "sk": {"S": "2026-11-25#5"}, "requests": {"N": "3"}, "read_units": {"N": "0.2"}},
    ]
    assert add_counters({}, items) == {"requests": Decimal(5), "read_units": Decimal("0.3")}
    with pytest.raises(ValueError, match="requests"):
        add_counters({}, [{"requests": {"N": "x"}}])


def test_the_usage_object_of_known_counters() -> None:
    sums = {
        "requests": Decimal(3),
        "requests:GET /tickets": Decimal(2),
        "requests:POST /tickets": Decimal(1),
        "read_units": Decimal("4.5"),
        "write_units": Decimal(10),
        "dynamodb_calls": Decimal(5),
        "duration_ms": Decimal("30"),
        "mb_ms": Decimal(512 * 30),
    }
    usage = usage_object("acme", "2026-11-25", sums, NOW)
    gb_seconds = Decimal(512 * 30) / 1024 / 1000  # 0.015
    assert usage["requests"] == {"GET /tickets": 2, "POST /tickets": 1}
    assert usage["requests_total"] == 3
    assert usage["dynamodb"] == {"read_units": 4.5, "write_units": 10.0}
    assert usage["lambda"] == {"invocations": 3, "gb_seconds": float(gb_seconds)}
    api = Decimal(3) * Decimal("3.50") / 10**6
    lam = Decimal(3) * Decimal("0.20") / 10**6 + gb_seconds * Decimal("0.0000166667")
    ddb = (Decimal("4.5") * Decimal("0.125") + 10 * Decimal("0.625")) / 10**6
    cost = usage["cost_usd"]
    assert cost["api_gateway"] == float(api) == 0.0000105
    assert cost["lambda"] == float(lam.quantize(Decimal("1e-10")))
    assert cost["dynamodb"] == float(ddb.quantize(Decimal("1e-10")))
    assert cost["total"] == pytest.approx(cost["api_gateway"] + cost["lambda"] + cost["dynamodb"], abs=1e-15)
    assert usage["final"] is False


def test_a_day_without_counters_is_all_zero() -> None:
    usage = usage_object("acme", "2026-11-01", {}, NOW)
    assert usage["requests"] == {}
    assert usage["requests_total"] == 0
    assert usage["cost_usd"] == {"api_gateway": 0.0, "lambda": 0.0, "dynamodb": 0.0, "webhooks": 0.0, "total": 0.0}
    assert usage["webhooks"] == {"deliveries": 0, "attempts": 0}
    assert usage["final"] is True


def test_the_authorizers_and_stream_functions_counters_join_lambda() -> None:
    sums = {
        "requests": Decimal(1),
        "mb_ms": Decimal(1024 * 1000),
        "authorizer_invocations": Decimal(1),
        "authorizer_mb_ms": Decimal(2 * 1024 * 1000),
        "stream_mb_ms": Decimal(4 * 1024 * 1000),
    }
    usage = usage_object("acme", "2026-11-25", sums, NOW)
    # The stream functions' shares add GB-seconds, never a fraction of an invocation.
    assert usage["lambda"] == {"invocations": 2, "gb_seconds": 7.0}


def test_the_delivery_functions_work_joins_lambda_and_is_priced_in_webhooks() -> None:
    sums = {
        "requests": Decimal(1),
        "mb_ms": Decimal(1024 * 1000),
        "webhook_invocations": Decimal(3),
        "webhook_mb_ms": Decimal(9 * 1024 * 1000),
        "webhook_attempts": Decimal(5),
        "webhook_deliveries": Decimal(4),
        "webhook_sqs_requests": Decimal(2),
        "webhook_kms_requests": Decimal(1),
    }
    usage = usage_object("acme", "2026-11-25", sums, NOW)
    # Its invocations and GB-seconds are in lambda's figures, with the API function's
    assert usage["lambda"] == {"invocations": 4, "gb_seconds": 10.0}
    assert usage["webhooks"] == {"deliveries": 4, "attempts": 5}
    # and priced once: its Lambda cost, SQS FIFO and KMS requests in cost_usd.webhooks, not in lambda
    cost = usage["cost_usd"]
    assert Decimal(str(cost["lambda"])) == Decimal("0.2") / 10**6 + Decimal("0.0000166667")
    assert Decimal(str(cost["webhooks"])) == (
        3 * Decimal("0.2") / 10**6 + 9 * Decimal("0.0000166667") + 2 * Decimal("0.5") / 10**6 + Decimal(3) / 10**6
    )
    components = (cost["api_gateway"], cost["lambda"], cost["dynamodb"], cost["webhooks"])
    assert Decimal(str(cost["total"])) == sum((Decimal(str(amount)) for amount in components), Decimal(0))


@pytest.mark.parametrize(
    ("now", "final"),
    [
        (datetime(2026, 11, 25, 23, 59, tzinfo=UTC), False),  # the day itself
        (datetime(2026, 11, 26, 23, 59, 59, tzinfo=UTC), False),  # within the replay horizon
        (datetime(2026, 11, 27, 0, 0, tzinfo=UTC), True),  # 24 h after its end
    ],
)
def test_a_day_is_final_once_the_replay_horizon_passed(now: datetime, final: bool) -> None:
    assert is_final("2026-11-25", now) is final


def test_the_day_defaults_to_today_utc() -> None:
    assert parse_day(None, datetime(2026, 11, 25, 23, 30, tzinfo=UTC)) == "2026-11-25"
    assert parse_day("2026-11-25", NOW) == "2026-11-25"
    assert parse_day("2024-01-01", NOW) == "2024-01-01"


@pytest.mark.parametrize(
    "text",
    ["2026-11-26", "2026-02-30", "2026-W48-3", "20261125", "2026-11-25T00:00:00Z", "", "yesterday", "2023-12-31",
     "\u0662\u0660\u0662\u0666-11-25"],  # Arabic-Indic digits (a \d pattern would take them)
)  # fmt: skip
def test_a_bad_day_is_a_validation_error(text: str) -> None:
    with pytest.raises(ValidationFailed) as raised:
        parse_day(text, NOW)
    assert raised.value.body()["error"]["details"][0]["field"] == "day"


# ---------------------------------------------------------------- a dedicated tenant's own key
def epoch(year: int, month: int, day: int, hour: int = 0) -> int:
    return int(datetime(year, month, day, hour, tzinfo=UTC).timestamp())


def placed(
    placement: str = "pool", placed_at: int = 0, previous_table: str | None = None, previous_placed_at: int = 0
) -> TenantConfig:
    table = "SupportTicket-dedicated-acme" if placement == "dedicated" else None
    return TenantConfig(
        "acme",
        placement=placement,
        table=table,
        placed_at=placed_at,
        previous_table=previous_table,
        previous_placed_at=previous_placed_at,
    )


NOVEMBER_DAY = Decimal(1) / 30  # $1 a month over November's 30 days


def dedicated_cost(record: TenantConfig, day: str = "2026-11-20", now: datetime = NOW) -> Decimal | None:
    cost = usage_object("acme", day, {"requests": Decimal(1)}, now, own_table_windows(record))["cost_usd"]
    if "dedicated" not in cost:
        return None
    others = (cost["api_gateway"], cost["lambda"], cost["dynamodb"], cost["webhooks"], cost["dedicated"])
    assert Decimal(str(cost["total"])) == sum((Decimal(str(amount)) for amount in others), Decimal(0))
    return Decimal(str(cost["dedicated"]))


def test_a_pooled_tenant_has_no_dedicated_cost() -> None:
    assert dedicated_cost(placed()) is None


def test_a_dedicated_tenants_day_carries_its_keys_daily_share() -> None:
    # Placed in its own table before the day: the whole day's share of $1 a month (November: 30 days)
    assert dedicated_cost(placed("dedicated", epoch(2026, 11, 1))) == NOVEMBER_DAY.quantize(Decimal("1e-10"))
    # A 31-day month's day is a 31st
    december = dedicated_cost(placed("dedicated", epoch(2026, 11, 1)), "2026-12-03", datetime(2026, 12, 9, tzinfo=UTC))
    assert december == (Decimal(1) / 31).quantize(Decimal("1e-10"))
    # Placed at noon: half of it; placed after the day: nothing, but the component is there
    assert dedicated_cost(placed("dedicated", epoch(2026, 11, 20, 12))) == (NOVEMBER_DAY / 2).quantize(Decimal("1e-10"))
    assert dedicated_cost(placed("dedicated", epoch(2026, 11, 21))) == 0
    # Today: until now (14:30 of the 25th), not the whole day
    today = dedicated_cost(placed("dedicated", epoch(2026, 11, 1)), "2026-11-25")
    assert today == (NOVEMBER_DAY * Decimal("14.5") / 24).quantize(Decimal("1e-10"))


def test_its_first_two_yearly_rotations_add_a_dollar_each_and_later_ones_nothing() -> None:
    def days(dollars: int) -> Decimal:
        return (dollars * NOVEMBER_DAY).quantize(Decimal("1e-10"))

    year = 365 * 86_400
    assert dedicated_cost(placed("dedicated", epoch(2026, 11, 20) - year + 1)) == days(1)  # not yet rotated
    assert dedicated_cost(placed("dedicated", epoch(2026, 11, 20) - year)) == days(2)
    assert dedicated_cost(placed("dedicated", epoch(2026, 11, 20) - 2 * year)) == days(3)
    assert dedicated_cost(placed("dedicated", epoch(2026, 11, 20) - 5 * year)) == days(3)


def test_a_tenant_moved_back_to_the_pool_still_shows_the_days_it_was_in_its_own_table() -> None:
    # In its own table from the 10th until the 20th at 06:00, then in the pool again
    back = placed(
        placed_at=epoch(2026, 11, 20, 6),
        previous_table="SupportTicket-dedicated-acme",
        previous_placed_at=epoch(2026, 11, 10),
    )
    assert dedicated_cost(back, "2026-11-15") == NOVEMBER_DAY.quantize(Decimal("1e-10"))
    assert dedicated_cost(back, "2026-11-20") == (NOVEMBER_DAY / 4).quantize(Decimal("1e-10"))
    assert dedicated_cost(back, "2026-11-21") == 0
    assert dedicated_cost(back, "2026-11-09") == 0
    # A move from the pool to its own table is not a placement in its own table before it
    moved_in = placed("dedicated", epoch(2026, 11, 20, 18), previous_placed_at=epoch(2026, 11, 1))
    assert dedicated_cost(moved_in, "2026-11-20") == (NOVEMBER_DAY / 4).quantize(Decimal("1e-10"))


def test_the_key_rotation_period_is_the_templates() -> None:
    ((_, key),) = dedicated_resources("AWS::KMS::Key").items()
    assert key["Properties"]["EnableKeyRotation"] is True
    # Not set: KMS's default period, 365 days (the AWS::KMS::Key schema's default).
    days = key["Properties"].get("RotationPeriodInDays", 365)
    assert days * 86_400 == KEY_ROTATION_PERIOD_SECONDS
