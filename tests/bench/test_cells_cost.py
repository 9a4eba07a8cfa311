"""The benchmark's cells figures come from template.yaml's resources and the list prices: a
cell's fixed monthly cost, the router's per million requests, the shared quotas' bounds."""

from __future__ import annotations

from typing import Any

from bench.cost import ROUTER_PRICES, cells_cost
from stack_model.functions import function_specs
from stack_model.template import load_template


def test_a_cell_costs_its_endpoint_keys_alarms_and_dashboard() -> None:
    figures = cells_cost()
    cell = figures["cell"]
    assert (cell["keys"], cell["rotating_keys"], cell["dashboards"], cell["metrics_insights_alarms"]) == (2, 2, 1, 2)
    # Each Metrics Insights alarm reads every function's metric; the others their own metrics.
    assert cell["alarm_metrics"] == 2 * len(function_specs()) + (cell["alarms"] - 2) + 1
    first, second, third = (row["usd_per_month"] for row in cell["years"])
    # $14.60 of endpoint, $0.10 a metric, $3 of dashboard, $1 a key, each rotation $1 more (two billed).
    assert first == round(14.6 + 0.1 * cell["alarm_metrics"] + 3 + 2, 2)
    assert (second - first, third - first) == (2.0, 4.0)


def test_the_router_costs_a_request_a_function_and_two_reads() -> None:
    router = cells_cost()["router"]
    assert router["usd_per_million_requests"] == round(
        ROUTER_PRICES["cloudfront_https_per_million_requests_usd"]
        + ROUTER_PRICES["cloudfront_function_per_million_invocations_usd"]
        + 2 * ROUTER_PRICES["keyvaluestore_per_million_reads_usd"],
        2,
    )


def test_the_quotas_bound_the_tenants_per_store_and_the_cells_per_account() -> None:
    quotas = cells_cost()["quotas"]
    assert quotas["cells_per_account_region_by_metrics_insights_alarms"] == 100
    assert quotas["tenants_per_store_at_longest_ids"] * quotas["entry_bytes_at_longest_ids"] <= 5 * 1024 * 1024


def test_the_figures_follow_the_template() -> None:
    template: dict[str, Any] = load_template()
    resources = {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] not in ("AWS::CloudWatch::Dashboard", "AWS::KMS::Key")
    }
    fixed = cells_cost({**template, "Resources": resources})["cell"]
    assert (fixed["keys"], fixed["dashboards"]) == (0, 0)
    assert {row["usd_per_month"] for row in fixed["years"]} == {round(14.6 + 0.1 * fixed["alarm_metrics"], 2)}
