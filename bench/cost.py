"""Cost per million requests, from the measured calls, capacity units and
durations, at published us-east-1 on-demand prices.

The prices are :mod:`support_tickets.usage.prices` (with where they come from;
not fetched live: check the pages before quoting a figure). Durations are this
machine's, against the local emulator, so the Lambda line is indicative;
the request, API Gateway and DynamoDB lines do not depend on the machine.
"""

from __future__ import annotations

import math
from typing import Any

from stack_model.functions import FunctionSpec
from support_tickets.usage import prices

# The list prices live in the layer (the API prices usage with them): one copy.
PRICES: dict[str, Any] = {
    "region": prices.REGION,
    "as_of": prices.AS_OF,
    "lambda_x86_per_gb_second_usd": float(prices.LAMBDA_X86_PER_GB_SECOND_USD),
    "lambda_per_million_requests_usd": float(prices.LAMBDA_PER_MILLION_REQUESTS_USD),
    "api_gateway_rest_per_million_usd": float(prices.API_GATEWAY_REST_PER_MILLION_USD),
    "dynamodb_on_demand_per_million_wru_usd": float(prices.DYNAMODB_ON_DEMAND_PER_MILLION_WRU_USD),
    "dynamodb_on_demand_per_million_rru_usd": float(prices.DYNAMODB_ON_DEMAND_PER_MILLION_RRU_USD),
    "sts_per_call_usd": float(prices.STS_PER_CALL_USD),
    "sources": list(prices.SOURCES),
}


# Hourly prices of what a VPC-attached function might need to reach AWS services
# (us-east-1): https://aws.amazon.com/privatelink/pricing/ and
# https://aws.amazon.com/vpc/pricing/ (NAT gateway). Gateway endpoints, VPCs,
# subnets, route tables, security groups and Lambda's VPC interfaces are free.
NETWORK_PRICES: dict[str, float] = {
    "interface_endpoint_per_az_hour_usd": 0.01,
    "nat_gateway_per_hour_usd": 0.045,
}
HOURS_PER_MONTH = 730


def perimeter_fixed_cost(template: dict[str, Any] | None = None) -> dict[str, Any]:
    """The perimeter's fixed monthly cost as deployed (from the template's own
    resources: since webhooks, the KMS interface endpoint in each of the two
    AZs), against the two ways the functions could have kept calling Cognito
    from inside the VPC (an interface endpoint, or a NAT gateway, in each of
    the two AZs), on top of that."""
    from stack_model.template import load_template

    resources = (template or load_template())["Resources"].values()
    kinds = [resource["Type"] for resource in resources]
    zones = sum(kind == "AWS::EC2::Subnet" for kind in kinds)
    interface = sum(
        resource["Type"] == "AWS::EC2::VPCEndpoint" and resource["Properties"].get("VpcEndpointType") == "Interface"
        for resource in resources
    )
    nat = kinds.count("AWS::EC2::NatGateway")
    hours = HOURS_PER_MONTH
    endpoint_month = NETWORK_PRICES["interface_endpoint_per_az_hour_usd"] * hours
    nat_month = NETWORK_PRICES["nat_gateway_per_hour_usd"] * hours
    ours = interface * zones * endpoint_month + nat * nat_month
    return {
        "region": PRICES["region"],
        "hours_per_month": hours,
        "designs": [
            {
                "design": "ours: DynamoDB gateway endpoint, the token exchange in the authorizer, "
                "KMS (webhook secrets) through an interface endpoint",
                "resources": f"VPC, {zones} private subnets, 1 gateway endpoint, {interface} interface endpoints, "
                f"{nat} NAT gateways",
                "usd_per_month": round(ours, 2),
            },
            {
                "design": "the functions exchange tokens through a Cognito interface endpoint",
                "resources": f"+ 1 interface endpoint in {zones} AZs (plus $0.01 per GB)",
                "usd_per_month": round(ours + zones * endpoint_month, 2),
            },
            {
                "design": "the functions reach Cognito through NAT gateways",
                "resources": f"+ {zones} NAT gateways and public subnets (plus $0.045 per GB)",
                "usd_per_month": round(ours + zones * nat_month, 2),
            },
        ],
    }


# Beyond the layer's prices, for a dedicated tenant's own resources (us-east-1):
# https://aws.amazon.com/cloudwatch/pricing/ (an alarm at standard resolution,
# $0.10 a month per metric it evaluates: a metric math alarm pays for each metric
# it reads) and https://aws.amazon.com/dynamodb/pricing/on-demand/ (Standard
# table class: storage, and continuous backups by the table's size).
ALARM_METRIC_PER_MONTH_USD = 0.10
DYNAMODB_STORAGE_PER_GB_MONTH_USD = 0.25
DYNAMODB_PITR_PER_GB_MONTH_USD = 0.20


def dedicated_fixed_cost(template: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a dedicated tenant's own resources cost a month beyond its requests, from
    its template's resources: its keys (with the rotations KMS bills, by the key's
    year), its alarms' metrics; and what it costs per GB (not fixed: the same per GB
    as its items in the pool). ``in_cost_usd_dedicated``: the keys' part, which the
    usage object's ``cost_usd.dedicated`` prices day by day."""
    from stack_model.dedicated import DEDICATED_TEMPLATE_PATH
    from stack_model.template import load_template

    resources = list((template or load_template(DEDICATED_TEMPLATE_PATH))["Resources"].values())
    keys = [resource for resource in resources if resource["Type"] == "AWS::KMS::Key"]
    rotating = sum(bool(key["Properties"].get("EnableKeyRotation")) for key in keys)
    alarms = [resource for resource in resources if resource["Type"] == "AWS::CloudWatch::Alarm"]
    alarm_metrics = sum(
        sum("MetricStat" in metric for metric in alarm["Properties"].get("Metrics", ())) or 1 for alarm in alarms
    )
    alarms_month = alarm_metrics * ALARM_METRIC_PER_MONTH_USD
    years = []
    for year, rotations in (("first", 0), ("second", 1), ("third and later", prices.KMS_BILLED_ROTATIONS)):
        keys_month = len(keys) * float(prices.KMS_KEY_PER_MONTH_USD) + rotating * rotations * float(
            prices.KMS_ROTATION_PER_MONTH_USD
        )
        years.append(
            {
                "year": year,
                "keys_usd_per_month": round(keys_month, 2),
                "alarms_usd_per_month": round(alarms_month, 2),
                "usd_per_month": round(keys_month + alarms_month, 2),
            }
        )
    return {
        "region": PRICES["region"],
        "keys": len(keys),
        "rotating_keys": rotating,
        "alarms": len(alarms),
        "alarm_metrics": alarm_metrics,
        "years": years,
        "in_cost_usd_dedicated": "keys",
        "per_gb_month_usd": {
            "storage": DYNAMODB_STORAGE_PER_GB_MONTH_USD,
            "pitr": DYNAMODB_PITR_PER_GB_MONTH_USD,
        },
    }


def per_million(
    *, duration_ms: float, memory_mb: int, rru: float, wru: float, api_gateway: bool = True
) -> dict[str, float]:
    """USD per million invocations, by line item (Lambda bills whole milliseconds)."""
    billed_seconds = math.ceil(duration_ms) / 1000
    lines = {
        "lambda_requests": PRICES["lambda_per_million_requests_usd"],
        "lambda_duration": 1e6 * billed_seconds * memory_mb / 1024 * PRICES["lambda_x86_per_gb_second_usd"],
        "api_gateway": PRICES["api_gateway_rest_per_million_usd"] if api_gateway else 0.0,
        "dynamodb_reads": rru * PRICES["dynamodb_on_demand_per_million_rru_usd"],
        "dynamodb_writes": wru * PRICES["dynamodb_on_demand_per_million_wru_usd"],
    }
    lines = {name: round(value, 4) for name, value in lines.items()}
    lines["total"] = round(sum(lines.values()), 4)
    return lines


def route_costs(warm: list[dict[str, Any]], specs: dict[str, FunctionSpec]) -> list[dict[str, Any]]:
    made = []
    for route in warm:
        memory = specs[route["function"]].memory_mb
        row: dict[str, Any] = {"route": route["route"], "memory_mb": memory}
        for design in ("ours", "naive"):
            figures = route[design]
            row[design] = per_million(
                duration_ms=figures["latency_ms"]["median"],
                memory_mb=memory,
                rru=figures["rru_per_request"],
                wru=figures["wru_per_request"],
            )
            row[design]["credential_calls"] = figures["credential_calls_per_request"] * 1e6
        row["naive_over_ours"] = round(row["naive"]["total"] / row["ours"]["total"], 3)
        made.append(row)
    return made


def aggregation_cost(aggregation: dict[str, Any], memory_mb: int) -> dict[str, Any]:
    """USD per million stream records, at the measured batch size."""
    batches = 1e6 / aggregation["records_per_batch"]
    made: dict[str, Any] = {}
    for design in ("ours", "naive"):
        figures = aggregation[design]
        per_batch = per_million(
            duration_ms=figures["batch_seconds"]["median"] * 1000,
            memory_mb=memory_mb,
            rru=figures["rru_per_batch"],
            wru=figures["wru_per_batch"],
            api_gateway=False,
        )
        made[design] = {name: round(value * batches / 1e6, 4) for name, value in per_batch.items()}
    return made


# The router's list prices (us-east-1, https://aws.amazon.com/cloudfront/pricing/): HTTPS requests
# to North America and Europe ($0.0100 per 10,000), CloudFront Functions invocations, data from the
# edge to the origin; and CloudFront KeyValueStore reads from a function, read from summaries of
# that page, not from the page itself (check it before quoting a figure). The distribution, the
# function and the store cost nothing while no request comes.
ROUTER_PRICES: dict[str, float] = {
    "cloudfront_https_per_million_requests_usd": 1.00,
    "cloudfront_function_per_million_invocations_usd": 0.10,
    "keyvaluestore_per_million_reads_usd": 0.03,
    "cloudfront_to_origin_per_gb_usd": 0.02,
}
# What each routed request reads (router/edge_router.js): tenant/<t>, then cell/<c>.
ROUTER_READS_PER_REQUEST = 2
# A dashboard beyond an account's first three, a month (https://aws.amazon.com/cloudwatch/pricing/).
DASHBOARD_PER_MONTH_USD = 3.00
# Quotas the cells share (per account and Region unless said): a KeyValueStore's 5 MB and one store
# per function (CloudFront's quotas page); Metrics Insights alarms, 200 per Region (CloudWatch's
# "Metrics Insights quotas"); the identity pools' GetCredentialsForIdentity, 200 a second
# (Cognito's quotas page, measured against in results.md's credentials section).
KEYVALUESTORE_BYTES = 5 * 1024 * 1024
METRICS_INSIGHTS_ALARMS_PER_REGION = 200
# API Gateway's API keys, per account and Region, not adjustable (docs/operations.md, "Quotas").
API_KEYS_PER_ACCOUNT_REGION = 10_000
TENANT_ID_MAX = 63


def _metrics_insights(alarm: dict[str, Any]) -> bool:
    return any("SELECT" in str(metric.get("Expression", "")) for metric in alarm["Properties"].get("Metrics", ()))


def cells_cost(template: dict[str, Any] | None = None) -> dict[str, Any]:
    """What cells add: a cell's fixed monthly cost (template.yaml's resources that bill while
    idle: the perimeter's interface endpoint, its customer managed keys by the key's year, its
    alarms by the metrics each reads, its dashboard), the router's cost per million requests,
    and how far the quotas the cells share carry them. A Metrics Insights alarm is priced by the
    functions its query reads (one metric each): our reading of CloudWatch's page, an upper bound."""
    from stack_model.functions import function_specs
    from stack_model.template import load_template

    template = template or load_template()
    resources = list(template["Resources"].values())
    perimeter = perimeter_fixed_cost(template)["designs"][0]["usd_per_month"]
    keys = [resource for resource in resources if resource["Type"] == "AWS::KMS::Key"]
    rotating = sum(bool(key["Properties"].get("EnableKeyRotation")) for key in keys)
    alarms = [resource for resource in resources if resource["Type"] == "AWS::CloudWatch::Alarm"]
    insights = sum(_metrics_insights(alarm) for alarm in alarms)
    functions = len(function_specs())
    alarm_metrics = sum(
        functions
        if _metrics_insights(alarm)
        else sum("MetricStat" in metric for metric in alarm["Properties"].get("Metrics", ())) or 1
        for alarm in alarms
    )
    dashboards = sum(resource["Type"] == "AWS::CloudWatch::Dashboard" for resource in resources)
    fixed = perimeter + alarm_metrics * ALARM_METRIC_PER_MONTH_USD + dashboards * DASHBOARD_PER_MONTH_USD
    years = [
        {
            "year": year,
            "usd_per_month": round(
                fixed
                + len(keys) * float(prices.KMS_KEY_PER_MONTH_USD)
                + rotating * rotations * float(prices.KMS_ROTATION_PER_MONTH_USD),
                2,
            ),
        }
        for year, rotations in (("first", 0), ("second", 1), ("third and later", prices.KMS_BILLED_ROTATIONS))
    ]
    router = ROUTER_PRICES
    per_million = (
        router["cloudfront_https_per_million_requests_usd"]
        + router["cloudfront_function_per_million_invocations_usd"]
        + ROUTER_READS_PER_REQUEST * router["keyvaluestore_per_million_reads_usd"]
    )
    # A tenant's entry at its longest: the key and the value the operator's commands write.
    entry = len(f"tenant/{'t' * TENANT_ID_MAX}") + len('{"cell":"' + "c" * TENANT_ID_MAX + '","epoch":9999999999}')
    return {
        "region": PRICES["region"],
        "cell": {
            "perimeter_usd_per_month": perimeter,
            "keys": len(keys),
            "rotating_keys": rotating,
            "alarms": len(alarms),
            "metrics_insights_alarms": insights,
            "alarm_metrics": alarm_metrics,
            "dashboards": dashboards,
            "years": years,
        },
        "router": {
            "prices": dict(router),
            "reads_per_request": ROUTER_READS_PER_REQUEST,
            "usd_per_million_requests": round(per_million, 2),
            "api_gateway_usd_per_million_requests": PRICES["api_gateway_rest_per_million_usd"],
            "upload_usd_per_gb": router["cloudfront_to_origin_per_gb_usd"],
        },
        "quotas": {
            "tenants_per_store_at_longest_ids": KEYVALUESTORE_BYTES // entry,
            "entry_bytes_at_longest_ids": entry,
            "api_keys_per_account_region": API_KEYS_PER_ACCOUNT_REGION,
            "cells_per_account_region_by_metrics_insights_alarms": (
                METRICS_INSIGHTS_ALARMS_PER_REGION // max(insights, 1)
            ),
        },
    }
