"""What Lambda's tenant isolation mode costs (``TenantIsolationMode=PER_TENANT``,
docs/isolation.md): more cold starts, each one charged.

**Measured** (:func:`run_isolation`, against the local stack's emulator): API
functions run in the local stack's execution environments
(:mod:`local_stack.lambda_.environments`, a process each) with the mode on and off,
each called by several tenants twice, interleaved. With the mode on each
active tenant of a function gets environments of its own: one cold start per
active tenant and function (per environment Lambda keeps), where without it
the tenants share the function's warm ones.

**Priced** (:func:`isolation_cost`): a new tenant environment costs Lambda's
charge per environment created (by memory, :func:`support_tickets.usage.prices.tenant_environment_usd`)
plus its init, billed since 2025-08-01 as duration is
(https://aws.amazon.com/blogs/compute/aws-lambda-standardizes-billing-for-init-phase/),
at the function's cold start as the cold-start bench measured it (import, the
Init Duration). Against it, the pool's own bill per request of the route
(this bench's cost table: Lambda, API Gateway, DynamoDB). With ``R`` requests a
day to a function and each of ``N`` active tenants creating ``k`` environments
of it a day (one each time Lambda has reclaimed its idle one; Lambda does not
document how long an idle environment lives, so ``k`` is an assumption, shown
at 1 and 24), the mode costs more than a share ``s`` of that function's bill
once ``N > s * R * c_request / (k * c_environment)``. Environments the pool
creates without the mode are not subtracted: an upper bound of the extra.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import time
from decimal import Decimal
from typing import Any

from bench.stackproc import StackProcess
from bench.warm import progress
from local_stack.lambda_.environments import FunctionEnvironments
from stack_model.events import rest_event, with_token
from stack_model.functions import FunctionSpec
from support_tickets.usage import prices

# Read routes: no data to set up, one request each (a missing ticket: 404 after its reads; an empty list).
REQUESTS: dict[str, tuple[str, str, dict[str, str] | None, int]] = {
    "GetTicketSummaryFunction": (
        "GET",
        "/tickets/{ticket_id}/summary",
        {"ticket_id": "01JD3ZZZZZZZZZZZZZZZZZZZZZ"},
        404,
    ),
    "ListTicketsFunction": ("GET", "/tickets", None, 200),
}
DEFAULT_SHARE = 0.10
REQUESTS_PER_DAY = 100_000
ENVIRONMENTS_PER_TENANT_DAY = (1, 24)


def _call(
    stack: StackProcess, environments: FunctionEnvironments, spec: FunctionSpec, tenant: str, isolated: bool
) -> float:
    """One request of ``tenant``'s user to ``spec``: milliseconds, end to end."""
    method, resource, path_parameters, expect = REQUESTS[spec.logical_id]
    token = stack.token(tenant, f"user-{tenant}")
    request = rest_event(method, resource, path_parameters=path_parameters)
    event = with_token(request, token, stack.authorizer_credentials(token))
    started = time.monotonic()
    response = environments.invoke(spec, event, tenant if isolated else None)
    elapsed = (time.monotonic() - started) * 1000
    if response.get("statusCode") != expect:
        raise RuntimeError(
            f"{spec.logical_id}: expected {expect}, got {response.get('statusCode')}: {response.get('body')}"
        )
    return elapsed


def _environments_started(environments: FunctionEnvironments, logical_id: str, isolated: bool) -> set[int]:
    if isolated:
        return {pid for pids in environments.tenant_pids(logical_id).values() for pid in pids}
    return set(environments.pids().get(logical_id, []))


def run_isolation(
    stack: StackProcess, specs: dict[str, FunctionSpec], *, tenants: int, tenant_prefix: str
) -> dict[str, Any]:
    """Per function of :data:`REQUESTS`, mode on and off: ``tenants`` tenants
    call it twice each (round one, then round two), in the local stack's
    execution environments; the environments started (cold starts) and the
    milliseconds of first and second requests."""
    names = [f"{tenant_prefix}-{n}" for n in range(tenants)]
    rows: list[dict[str, Any]] = []
    for logical_id in REQUESTS:
        for isolated in (True, False):
            spec = dataclasses.replace(specs[logical_id], tenant_isolation=isolated)
            progress(f"tenant isolation: {logical_id}, mode {'on' if isolated else 'off'}, {tenants} tenants")
            variables = stack.function_environment(specs[logical_id])
            environments = FunctionEnvironments(
                {logical_id: spec}, {logical_id: variables}, tenant_environments=tenants + 1
            )
            # The functions' log lines would go to this process's stdout, where results.md goes.
            with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
                try:
                    first = [_call(stack, environments, spec, tenant, isolated) for tenant in names]
                    second = [_call(stack, environments, spec, tenant, isolated) for tenant in names]
                    started = len(_environments_started(environments, logical_id, isolated))
                finally:
                    environments.stop()
            rows.append(
                {
                    "function": logical_id,
                    "mode": "PER_TENANT" if isolated else "NONE",
                    "tenants": tenants,
                    "requests": 2 * tenants,
                    "cold_starts": started,
                    "cold_starts_per_tenant": round(started / tenants, 3),
                    "first_round_ms_median": round(statistics.median(first), 1),
                    "second_round_ms_median": round(statistics.median(second), 1),
                }
            )
    return {"tenants": tenants, "rows": rows}


def _init_ms(results: dict[str, Any], logical_id: str) -> float | None:
    """The function's Init Duration as the cold-start bench measured it (median import)."""
    measured = (results.get("cold") or {}).get("functions", {}).get(logical_id)
    return float(measured["import_ms"]["median"]) if measured else None


def isolation_cost(
    results: dict[str, Any], specs: dict[str, FunctionSpec], *, share: float = DEFAULT_SHARE
) -> dict[str, Any]:
    """Per API route with a cold-start figure: what a tenant environment costs,
    what a request costs the pool, how many requests a tenant environment must
    serve for the mode to cost at most ``share`` of the route's bill, and the
    active tenants per function past which it costs more."""
    by_route = {route["route"]: route for route in results.get("cost", {}).get("routes", [])}
    warm = {route["route"]: route["function"] for route in results.get("warm", [])}
    rows: list[dict[str, Any]] = []
    for route, cost in by_route.items():
        function = warm.get(route)
        init_ms = _init_ms(results, function) if function else None
        if function is None or init_ms is None:
            continue
        memory_mb = specs[function].memory_mb
        charge = prices.tenant_environment_usd(memory_mb)
        init = Decimal(str(init_ms)) / 1000 * Decimal(memory_mb) / 1024 * prices.LAMBDA_X86_PER_GB_SECOND_USD
        environment = charge + init
        request = Decimal(str(cost["ours"]["total"])) / prices.MILLION
        row: dict[str, Any] = {
            "route": route,
            "function": function,
            "memory_mb": memory_mb,
            "init_ms": round(init_ms, 1),
            "environment_charge_usd": float(charge),
            "init_usd": float(round(init, 10)),
            "per_environment_usd": float(round(environment, 10)),
            "per_request_usd": float(request),
            # Requests each tenant environment must serve for the mode to stay within the share.
            "requests_per_environment_for_share": round(float(environment / (Decimal(str(share)) * request))),
        }
        for k in ENVIRONMENTS_PER_TENANT_DAY:
            tenants = Decimal(str(share)) * REQUESTS_PER_DAY * request / (k * environment)
            row[f"tenants_over_share_at_{k}_per_day"] = int(tenants)
        rows.append(row)
    return {
        "share": share,
        "requests_per_day": REQUESTS_PER_DAY,
        "environments_per_tenant_day": list(ENVIRONMENTS_PER_TENANT_DAY),
        "environment_charge_per_gb_usd": float(prices.LAMBDA_TENANT_ENVIRONMENT_PER_GB_USD),
        "rows": rows,
    }


def isolation_markdown(isolation: dict[str, Any]) -> list[str]:
    """The section of results.md."""
    cost = isolation["cost"]
    share = f"{cost['share']:.0%}"
    lines = ["## Tenant isolation mode (`TenantIsolationMode=PER_TENANT`): what it costs", ""]
    measured = isolation.get("measured")
    if measured:
        lines += [
            "| function | mode | requests | cold starts | per active tenant | first round (ms, median) "
            "| second round (ms, median) |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for row in measured["rows"]:
            lines.append(
                f"| {row['function']} | {row['mode']} | {row['requests']} | {row['cold_starts']} | "
                f"{row['cold_starts_per_tenant']} | {row['first_round_ms_median']} | {row['second_round_ms_median']} |"
            )
        lines.append("")
    else:
        lines += ["Cold starts: not measured in this run (`--quick`).", ""]
    lines += [
        "| route | MB | init (ms) | per environment (USD) | per request (USD) "
        f"| requests per environment for <= {share} | N at k = 1 | N at k = 24 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in cost["rows"]:
        lines.append(
            f"| `{row['route']}` | {row['memory_mb']} | {row['init_ms']} | {row['per_environment_usd']:.7f} | "
            f"{row['per_request_usd']:.7f} | {row['requests_per_environment_for_share']:,} | "
            f"{row['tenants_over_share_at_1_per_day']:,} | {row['tenants_over_share_at_24_per_day']:,} |"
        )
    lines.append("")
    if cost["rows"]:
        ratios = [row["per_environment_usd"] / row["per_request_usd"] for row in cost["rows"]]
        init_shares = [row["init_usd"] / row["per_environment_usd"] for row in cost["rows"]]
        lines += [
            f"A tenant environment costs what {_span(ratios, '{:.0f}')} of its function's requests cost the whole "
            f"pool (its init {_span(init_shares, '{:.0%}')} of that): the mode stays cheap while each tenant's "
            "environments serve many requests.",
            "",
        ]
    tenants = f"{measured['tenants']} tenants" if measured else "tenants"
    lines += [
        f"How: {tenants} each call the function twice, interleaved, with the mode on and off. An environment costs "
        f"Lambda's charge (${cost['environment_charge_per_gb_usd']} per GB) plus its init billed as duration; N is "
        f"the active tenants past which the mode costs over {share} of the function's bill at "
        f"{cost['requests_per_day']:,} requests a day, each tenant creating k environments a day (24: idle ones "
        "reclaimed hourly, which Lambda does not document).",
        "",
    ]
    return lines


def _span(values: list[float], form: str) -> str:
    low, high = form.format(min(values)), form.format(max(values))
    return low if low == high else f"{low} to {high}"
