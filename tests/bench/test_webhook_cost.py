"""The benchmark's cost of a webhook delivery (:func:`bench.webhooks.delivery_cost`): its
DynamoDB line counts the fan-out's write of the delivery's record, made before the message
is queued, besides the delivery function's own units and the fan-out's version read; a
failed attempt adds the delivery function's write again, never the fan-out's."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from bench.webhooks import delivery_cost
from support_tickets.usage import prices


def _warm(*, wru: float, fanout_wru: float) -> dict[str, Any]:
    """Warm delivery figures as :func:`bench.webhooks.run_warm_deliveries` returns them."""
    return {
        "deliveries": 10,
        "memory_mb": 512,
        "duration_ms": {"median": 200.0, "p95": 250.0, "min": 150.0, "max": 300.0, "n": 10},
        "calls_per_delivery": {"dynamodb.GetItem": 3, "dynamodb.Query": 1, "dynamodb.UpdateItem": 4},
        "rru_per_delivery": 4.0,
        "wru_per_delivery": wru,
        "fanout_wru_per_delivery": fanout_wru,
    }


def test_the_dynamodb_line_counts_the_fanouts_record_write() -> None:
    cost = delivery_cost(_warm(wru=4.0, fanout_wru=1.0), fanout_rru=1.0)
    # Per delivery: the delivery function's 4 RRU and the fan-out's version read (1 RRU); the
    # delivery function's 4 WRU and the fan-out's record write (1 WRU). Per million deliveries:
    million = Decimal(1_000_000)
    expected = prices.dynamodb_usd(million * 5, million * 5)
    assert cost["dynamodb"] == pytest.approx(float(expected), abs=1e-4)
    assert cost["assumptions"]["wru_per_delivery"] == 5.0
    assert cost["assumptions"]["fanout_wru_per_delivery"] == 1.0
    assert cost["assumptions"]["rru_per_delivery"] == 5.0
    # The fan-out's write is one WRU per million deliveries more than without it.
    without = delivery_cost(_warm(wru=4.0, fanout_wru=0.0), fanout_rru=1.0)
    assert cost["dynamodb"] - without["dynamodb"] == pytest.approx(
        float(prices.DYNAMODB_ON_DEMAND_PER_MILLION_WRU_USD), abs=1e-4
    )
    assert cost["total"] - without["total"] == pytest.approx(
        float(prices.DYNAMODB_ON_DEMAND_PER_MILLION_WRU_USD), abs=1e-3
    )


def test_a_retry_adds_the_delivery_functions_write_not_the_fanouts() -> None:
    # The fan-out writes the record once, before the first attempt; each retry is the delivery function's alone.
    once = delivery_cost(_warm(wru=4.0, fanout_wru=1.0), fanout_rru=1.0)
    never = delivery_cost(_warm(wru=4.0, fanout_wru=0.0), fanout_rru=1.0)
    assert once["per_million_retries"] == never["per_million_retries"]
