"""The price of Lambda's tenant isolation mode (bench/isolation.py): a tenant
environment's charge by memory at the list price, its init billed as
duration, and the number of active tenants past which the mode costs more
than a share of a function's bill."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from bench.isolation import ENVIRONMENTS_PER_TENANT_DAY, REQUESTS_PER_DAY, isolation_cost, isolation_markdown
from stack_model.functions import function_specs
from support_tickets.usage import prices


def test_the_environment_charge_is_the_price_pages_example() -> None:
    # Lambda's pricing page: a 1,024 MB function creating 200,000 tenant environments in a month, $33.40.
    assert prices.tenant_environment_usd(1024) * 200_000 == Decimal("33.40")
    assert prices.tenant_environment_usd(512) * 2 == prices.tenant_environment_usd(1024)


def results(init_ms: float, per_million_usd: float) -> dict[str, Any]:
    """What the bench measured, reduced to what the model reads: one route's cost and its cold start."""
    return {
        "warm": [{"route": "GET /tickets/{id}/summary", "function": "GetTicketSummaryFunction"}],
        "cost": {"routes": [{"route": "GET /tickets/{id}/summary", "ours": {"total": per_million_usd}}]},
        "cold": {"functions": {"GetTicketSummaryFunction": {"import_ms": {"median": init_ms}}}},
    }


@pytest.mark.parametrize("share", [0.05, 0.10, 0.5])
def test_past_n_active_tenants_the_mode_costs_more_than_the_share(share: float) -> None:
    specs = function_specs()
    cost = isolation_cost(results(800.0, 3.875), specs, share=share)
    (row,) = cost["rows"]
    memory = specs["GetTicketSummaryFunction"].memory_mb
    # A tenant environment: the charge by memory, and 800 ms of init billed at 512 MB.
    init = Decimal("0.8") * memory / 1024 * prices.LAMBDA_X86_PER_GB_SECOND_USD
    environment = prices.tenant_environment_usd(memory) + init
    assert row["per_environment_usd"] == pytest.approx(float(environment))
    request = Decimal("3.875") / 1_000_000
    pool_share = Decimal(str(share)) * REQUESTS_PER_DAY * request
    for k in ENVIRONMENTS_PER_TENANT_DAY:
        tenants = row[f"tenants_over_share_at_{k}_per_day"]
        # N tenants each creating k environments a day stay within the share; one more does not.
        assert tenants * k * environment <= pool_share < (tenants + 1) * k * environment
    assert f"| `GET /tickets/{{id}}/summary` | {memory} |" in "\n".join(isolation_markdown({"cost": cost}))


def test_a_route_without_a_cold_start_figure_is_left_out() -> None:
    given = results(800.0, 3.875)
    given["cold"] = {"functions": {}}
    assert isolation_cost(given, function_specs())["rows"] == []
