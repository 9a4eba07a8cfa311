"""Warm request path, per route: ours against the naive design, interleaved.

The handlers run in this process (the warm Lambda container) with API Gateway
REST events (``stack_model.events.rest_event``); every AWS call they make is a
real, signed HTTP request over loopback to the emulator in the local stack's
process. The two designs share everything (handler modules, events, data,
emulator, the one warm-up that loads botocore's models) except the tenant
credentials the domain layer gets (:class:`bench.naive.Designs`). Requests
alternate between the designs (ours first on even rounds, naive first on odd
ones), so drift in the emulator (a growing table, the stream poller) falls on
both alike.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

from bench.calls import CallRecorder, Tally
from bench.naive import Designs
from bench.routes import Fixtures, Invoker, Route, check
from bench.stackproc import StackProcess, operator_put
from bench.stats import summary
from local_stack.lambda_.runtime import environment
from stack_model.capacity import CapacityMeter, TableShape
from stack_model.functions import FunctionSpec
from support_tickets.data.session import tenant_clients

DESIGNS = ("ours", "naive")
MAX_ATTEMPTS = 3
# The calls that obtain credentials: the identity pool's exchange, and STS.
CREDENTIAL_SERVICES = ("cognito-identity", "sts")


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """The functions' log lines (one per request, as in Lambda) still get
    written, to /dev/null instead of the terminal."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


def progress(message: str) -> None:
    sys.stderr.write(f"[bench] {message}\n")
    sys.stderr.flush()


@dataclass
class DesignRun:
    latencies_ms: list[float] = field(default_factory=list)
    tallies: list[Tally] = field(default_factory=list)
    rru: float = 0.0
    wru: float = 0.0

    def result(self) -> dict[str, Any]:
        calls = [tally.total for tally in self.tallies]
        credential = [sum(tally.service(name) for name in CREDENTIAL_SERVICES) for tally in self.tallies]
        sts = [tally.service("sts") for tally in self.tallies]
        dynamodb = [tally.service("dynamodb") for tally in self.tallies]
        by_call: dict[str, float] = {}
        for tally in self.tallies:
            for name, count in tally.calls.items():
                by_call[name] = by_call.get(name, 0) + count
        n = len(self.tallies)
        return {
            "latency_ms": summary(self.latencies_ms),
            "aws_calls_per_request": sum(calls) / n,
            "credential_calls_per_request": sum(credential) / n,
            "sts_calls_per_request": sum(sts) / n,
            "dynamodb_calls_per_request": sum(dynamodb) / n,
            "http_attempts_per_request": sum(tally.attempts for tally in self.tallies) / n,
            "calls_by_operation_per_request": {name: count / n for name, count in sorted(by_call.items())},
            "max_credential_calls_in_a_request": max(credential),
            "max_sts_calls_in_a_request": max(sts),
            "max_dynamodb_calls_in_a_request": max(dynamodb),
            # The tenant record is re-read once per TENANT_CONFIG_TTL_SECONDS per
            # tenant and container: those requests make one GetItem more.
            "requests_with_a_tenant_record_read": sum(
                1 for tally in self.tallies if tally.calls.get("dynamodb.GetItem", 0) and tally.service("dynamodb") > 1
            ),
            "dynamodb_calls_in_most_requests": max(set(dynamodb), key=dynamodb.count),
            "rru_per_request": self.rru,
            "wru_per_request": self.wru,
        }


def run_warm(
    stack: StackProcess,
    specs: dict[str, FunctionSpec],
    *,
    runs: int,
    warmup: int,
    tenant_prefix: str,
    spare_deletes: int = 10,
) -> dict[str, Any]:
    """``routes``: per route, both designs; ``naive_overhead``: where the naive
    design's extra time went (the token exchange, building the client).
    ``spare_deletes``: tickets to delete beyond one per request, for retried requests."""
    invoker = Invoker(specs)
    designs = Designs(cognito_endpoint_url=stack.emulator_url, identity_pool_id=str(stack.state["identity_pool_id"]))
    recorder = CallRecorder()
    recorder.install()
    # Sessions made before the hooks were installed (an earlier phase ran the
    # handlers) would go uncounted: start from a fresh container's state.
    boto3.DEFAULT_SESSION = None
    tenant_clients.cache_clear()
    meter = CapacityMeter(stack.operator("dynamodb"), TableShape.from_template(str(stack.state["table_name"])))
    env = stack.function_environment(specs["CreateTicketFunction"])
    # The fixtures create webhooks too: with the webhook key the webhook functions know.
    webhook_env = stack.function_environment(specs["CreateWebhookFunction"])
    env = {**env, **{name: value for name, value in webhook_env.items() if name.startswith("WEBHOOK_")}}
    results: list[dict[str, Any]] = []
    try:
        with environment(env), quiet_stdout():
            fixtures = Fixtures(
                invoker, tenant_prefix, stack.token, stack.authorizer_credentials, seed=operator_put(stack)
            )
            deletes = 2 * (warmup + runs + 1) + spare_deletes
            progress(f"warm path: creating test data ({deletes} tickets to delete)")
            routes = fixtures.routes(deletes)
            stack.drain()  # the aggregates of the data just created, before anything is timed
            for route in routes:
                with environment(stack.function_environment(specs[route.function])):
                    results.append(_measure(route, invoker, designs, recorder, meter, runs=runs, warmup=warmup))
                progress(f"  {route.name}: done")
    finally:
        recorder.uninstall()
    return {
        "routes": results,
        "naive_overhead": {
            "exchange_ms": summary(designs.timings.exchange_ms),
            "new_client_ms": summary(designs.timings.new_client_ms),
        },
    }


def _measure(
    route: Route,
    invoker: Invoker,
    designs: Designs,
    recorder: CallRecorder,
    meter: CapacityMeter,
    *,
    runs: int,
    warmup: int,
) -> dict[str, Any]:
    counter = 0
    handler = invoker.handler(route.function)
    runs = max(2, round(runs * route.share))

    unexpected: list[str] = []

    def one(design: str, record: DesignRun | None, sized: bool = False) -> None:
        nonlocal counter
        for _ in range(MAX_ATTEMPTS):
            event = route.event(counter)
            counter += 1
            context = invoker.context(route.function)
            recorder.meter = meter if sized else None
            with designs.use(design), recorder.request() as tally:
                started = time.perf_counter_ns()
                response = handler(event, context)
                elapsed = time.perf_counter_ns() - started
            recorder.meter = None
            if response.get("statusCode") == route.expect:
                break
            # Not measured; reported (the emulator answered something else).
            unexpected.append(f"{design}: {response.get('statusCode')} {response.get('body')}")
        check(response, route.expect)
        if record is None:
            return
        if sized:
            record.rru, record.wru = tally.rru, tally.wru
            return
        record.latencies_ms.append(elapsed / 1e6)
        record.tallies.append(tally)

    measured = {design: DesignRun() for design in DESIGNS}
    for round_number in range(warmup):
        for design in DESIGNS if round_number % 2 == 0 else reversed(DESIGNS):
            one(design, None)
    for round_number in range(runs):
        for design in DESIGNS if round_number % 2 == 0 else reversed(DESIGNS):
            one(design, measured[design])
    for design in DESIGNS:  # capacity units: one more request each, sized (not timed)
        one(design, measured[design], sized=True)
    ours, naive = measured["ours"].result(), measured["naive"].result()
    return {
        "route": route.name,
        "function": route.function,
        "read_only": route.read_only,
        "scatter": route.scatter,
        "ours": ours,
        "naive": naive,
        "naive_over_ours_median": round(naive["latency_ms"]["median"] / ours["latency_ms"]["median"], 2),
        "naive_over_ours_p95": round(naive["latency_ms"]["p95"] / ours["latency_ms"]["p95"], 2),
        "unexpected_responses": unexpected,
    }
