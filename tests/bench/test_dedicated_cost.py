"""The benchmark's figure of what a dedicated tenant costs a month beyond its
requests comes from its template's resources, at the list prices."""

from __future__ import annotations

from typing import Any

from bench.cost import dedicated_fixed_cost


def test_the_dedicated_template_costs_its_key_and_its_alarms_metrics() -> None:
    fixed = dedicated_fixed_cost()
    assert (fixed["keys"], fixed["rotating_keys"], fixed["alarms"], fixed["alarm_metrics"]) == (1, 1, 2, 12)
    assert [(row["year"], row["keys_usd_per_month"], row["usd_per_month"]) for row in fixed["years"]] == [
        ("first", 1.0, 2.2),
        ("second", 2.0, 3.2),
        ("third and later", 3.0, 4.2),
    ]


def test_the_figure_follows_the_template() -> None:
    def alarm(metrics: int) -> dict[str, Any]:
        stats = [{"Id": f"m{n}", "MetricStat": {}} for n in range(metrics)]
        return {"Type": "AWS::CloudWatch::Alarm", "Properties": {"Metrics": [{"Id": "e", "Expression": "x"}, *stats]}}

    template = {
        "Resources": {
            "Key": {"Type": "AWS::KMS::Key", "Properties": {}},
            "Simple": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"MetricName": "Errors"}},
            "Math": alarm(3),
        }
    }
    fixed = dedicated_fixed_cost(template)
    assert (fixed["rotating_keys"], fixed["alarm_metrics"]) == (0, 4)
    # A key that does not rotate costs $1 a month in every year; 4 metrics, $0.40.
    assert {row["usd_per_month"] for row in fixed["years"]} == {1.4}
