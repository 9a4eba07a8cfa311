"""The API's Lambda authorizer: what it costs per request, warm, with API
Gateway's result cache hit (no invocation at all) and missed (one warm
invocation: the JWKS and the tenant record already in the container), and
per million API requests at a stated cache hit rate.

API Gateway caches the authorizer's answer per ``Authorization`` header for
``ReauthorizeEvery`` (300 s): a client that keeps its token (an hour) and
calls more than once per 5 minutes per API Gateway cache hits the cache for
every request but the first of each 300 s. :data:`HIT_RATE` is an assumption
(stated in the report), not a measurement: it depends on how chatty clients are.
"""

from __future__ import annotations

import time
from typing import Any

from bench.cost import per_million
from bench.stackproc import StackProcess
from bench.stats import summary
from bench.warm import progress
from local_stack.lambda_.runtime import LambdaContext, environment
from stack_model.functions import FunctionSpec, load_handler
from support_tickets.core.settings import get_settings

FUNCTION = "AuthorizerFunction"
HIT_RATE = 0.9  # assumed share of requests answered from API Gateway's authorizer cache
METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:local/v1/GET/tickets"


def run_authorizer(
    stack: StackProcess, specs: dict[str, FunctionSpec], *, runs: int, tenant_prefix: str
) -> dict[str, Any]:
    """``runs`` warm invocations, each a cache miss (a token never seen before)."""
    from local_stack.running_stack import local_admin

    spec = specs[FUNCTION]
    tenant = f"{tenant_prefix}-auth"
    local_admin(stack.state).ensure(tenant)
    tokens = [stack.token(tenant, f"{tenant}-u{index}") for index in range(runs + 1)]
    handler = load_handler(spec.code_uri, spec.handler, module_name=f"_bench_{FUNCTION}")
    timings: list[float] = []
    with environment(stack.function_environment(spec)):
        # Its own container: its settings (the emulator's main listener, not the
        # API functions' gateway endpoint), read at its cold start.
        get_settings.cache_clear()
        for index, token in enumerate(tokens):
            event = {"type": "TOKEN", "authorizationToken": f"Bearer {token}", "methodArn": METHOD_ARN}
            started = time.perf_counter()
            answer = handler(event, LambdaContext(function_name=FUNCTION, memory_limit_in_mb=spec.memory_mb))
            elapsed = (time.perf_counter() - started) * 1000
            if "usageIdentifierKey" not in answer:
                raise RuntimeError(f"the authorizer did not allow {tenant}: {answer}")
            if index:  # the first is the container's cold request (JWKS and record fetched)
                timings.append(elapsed)
    get_settings.cache_clear()
    progress(f"  authorizer: {runs} warm cache misses")
    miss = summary(timings)
    cost_miss = per_million(duration_ms=miss["median"], memory_mb=spec.memory_mb, rru=0.5, wru=0, api_gateway=False)
    # A hit invokes nothing; a miss within the container's record TTL reads no record.
    per_request = {name: round(value * (1 - HIT_RATE), 4) for name, value in cost_miss.items()}
    return {
        "runs": runs,
        "miss_ms": miss,
        "hit_ms": 0.0,
        "hit_rate_assumed": HIT_RATE,
        "cost_per_million_invocations_usd": cost_miss,
        "cost_per_million_requests_usd": per_request,
        "memory_mb": spec.memory_mb,
    }


def markdown(result: dict[str, Any]) -> list[str]:
    miss, cost = result["miss_ms"], result["cost_per_million_requests_usd"]
    invocation = result["cost_per_million_invocations_usd"]
    return [
        "### The Lambda authorizer",
        "",
        "| API Gateway's authorizer cache | Lambda invocations | p50 / p95 ms added | USD per million |",
        "|---|---:|---:|---:|",
        "| hit (the same token within 300 s) | 0 | 0 / 0 | 0.00 |",
        f"| miss (a new token; JWKS and tenant record cached in the container) | 1 | "
        f"{miss['median']:.1f} / {miss['p95']:.1f} | {invocation['total']:.2f} per million invocations |",
        f"| **{result['hit_rate_assumed']:.0%} hits (assumed)** | {1 - result['hit_rate_assumed']:.2f} per request | "
        f"| **{cost['total']:.2f} per million API requests** |",
        "",
        f"How: a miss is one warm invocation of `AuthorizerFunction` ({result['memory_mb']} MB; median of "
        f"{result['runs']}), each with a token it had not seen; a tenant record read is counted at 0.5 RRU, an upper "
        "bound (the container keeps records for `TENANT_CONFIG_TTL_SECONDS`). The hit rate is an assumption: a "
        "client that reuses its token and calls at least once per 300 s misses once per 300 s.",
        "",
    ]
