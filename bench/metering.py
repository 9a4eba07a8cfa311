"""What the per-tenant metering costs (docs/usage.md): the usage fields' bytes
in a request's log line, the metering function's own invocations, GB-seconds
and writes per delivery, and its latency overhead on the warm request path.

- **Line bytes**: a ``"request handled"`` line as the resolver's logger
  formats it (Powertools' JSON formatter, a real Lambda context), with and
  without its ``usage`` object: the difference is what CloudWatch Logs
  ingests more per request.
- **Deliveries**: the metering function's handler, in this process, against
  the local stack's emulator with the function's own role, fed deliveries of
  ``lines`` usage lines of ``tenants`` tenants each (CloudWatch Logs batches
  a log stream's events per delivery; a busy execution environment serves
  many tenants), each delivery's DynamoDB write units from the capacity
  model (a transactional write bills 2 WRU per KB per item).
- **Warm overhead**: one read route and one write route through their
  handlers, requests interleaved between the shipped path and the same path
  with the metering off (``ReturnConsumedCapacity`` not asked, the line
  without its usage fields; switched in this process only, as the benchmark's
  counterfactual): the median difference over the unmetered median, in the
  function's own CPU time (the calling thread's: what Lambda bills, and
  what AWS would see of it: a larger response to parse, the meter, the usage
  fields, a longer line) and in wall-clock time. Measured against a stack of
  its own started with ``--no-capacity-model`` (moto's constant
  ``ConsumedCapacity``): the capacity model looks the items up around every
  call that asks for units, which DynamoDB does not make anyone wait for,
  and a thread that waited milliseconds longer resumes with colder caches
  (about 0.1 ms more CPU per request here, checked by making the unmetered
  design wait as long: the difference shrank to a third).
"""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from decimal import Decimal
from typing import Any

from bench.calls import CallRecorder
from bench.routes import Fixtures, Invoker, check
from bench.stackproc import StackProcess, stack_process
from bench.stats import summary
from bench.warm import progress, quiet_stdout
from local_stack.lambda_.runtime import LambdaContext, environment
from stack_model.capacity import CapacityMeter, TableShape
from stack_model.functions import FunctionSpec, load_handler
from support_tickets.usage import prices

METERING = "MeteringFunction"
# The routes the warm overhead is measured on: a GetItem read and a PutItem write.
OVERHEAD_FUNCTIONS = ("GetTicketSummaryFunction", "CreateTicketFunction")
LOG_INGESTION_PER_GB_USD = Decimal("0.50")  # https://aws.amazon.com/cloudwatch/pricing/ (us-east-1, standard logs)


@contextmanager
def metering_off() -> Iterator[None]:
    """The request path without its metering: no ReturnConsumedCapacity, no usage fields."""
    from support_tickets.api import resolver
    from support_tickets.usage import meter

    operations, fields = meter.METERED_OPERATIONS, resolver.usage_fields
    meter.METERED_OPERATIONS = frozenset()  # type: ignore[misc]
    resolver.usage_fields = lambda *args: {}
    try:
        yield
    finally:
        meter.METERED_OPERATIONS = operations  # type: ignore[misc]
        resolver.usage_fields = fields


def usage_line_bytes() -> dict[str, int]:
    """A ``"request handled"`` line's bytes as the resolver's logger writes it, with and without its usage."""
    from support_tickets.api.resolver import REQUEST_OUTCOME_MESSAGE, logger, usage_fields
    from support_tickets.usage.meter import Consumed

    context = LambdaContext(function_name="GetTicketSummaryFunction", memory_limit_in_mb=512, timeout_s=10)
    event = {"httpMethod": "GET", "resource": "/tickets/{ticket_id}/summary"}
    consumed = Consumed(Decimal("1.5"), Decimal("0"), 2, 12.3456)
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    sizes = {}
    usage = usage_fields(event, context, consumed)  # type: ignore[arg-type]  # the local runtime's context
    for name, fields in (("with_usage", usage), ("without_usage", None)):
        written = io.StringIO()
        previous, handler.stream = handler.stream, written
        try:
            logger.append_keys(tenant_id="tenant-0123", user="user-0123", function_request_id=str(uuid.uuid4()))
            extra: dict[str, Any] = {"method": "GET", "resource": event["resource"], "status": 200}
            if fields is not None:
                extra["usage"] = fields
            logger.info(REQUEST_OUTCOME_MESSAGE, extra=extra)
        finally:
            handler.stream = previous
            logger.remove_keys(["tenant_id", "user", "function_request_id"])
        sizes[name] = len(written.getvalue().rstrip("\n").encode())
    return {**sizes, "usage_fields": sizes["with_usage"] - sizes["without_usage"]}


def usage_delivery(lines: int, tenants: list[str], stream: str, at_ms: int) -> dict[str, Any]:
    from local_stack.event_sources.log_subscriptions import awslogs_event

    events = []
    for index in range(lines):
        usage = {
            "route": "GET /tickets/{ticket_id}/summary",
            "request_id": str(uuid.uuid4()),
            "read_units": 1.5,
            "write_units": 0.0,
            "dynamodb_calls": 2,
            "duration_ms": 12.346,
            "memory_mb": 512,
        }
        message = {"level": "INFO", "message": "request handled", "tenant_id": tenants[index % len(tenants)]}
        events.append(
            {"id": f"{at_ms:020d}{index:036d}", "timestamp": at_ms, "message": json.dumps({**message, "usage": usage})}
        )
    return awslogs_event("/aws/lambda/GetTicketSummaryFunction", stream, ["bench"], events)


def run_deliveries(
    stack: StackProcess,
    specs: dict[str, FunctionSpec],
    *,
    deliveries: int,
    lines: int,
    tenants: int,
    tenant_prefix: str,
) -> dict[str, Any]:
    """``deliveries`` warm invocations of the metering function, each ``lines`` lines of ``tenants`` tenants."""
    spec = specs[METERING]
    recorder = CallRecorder()
    meter = CapacityMeter(stack.operator("dynamodb"), TableShape.from_template(str(stack.state["table_name"])))
    durations: list[float] = []
    wru: list[float] = []
    names = [f"{tenant_prefix}-{index}" for index in range(tenants)]
    recorder.install()
    try:
        with environment(stack.function_environment(spec)), quiet_stdout():
            handler = load_handler(spec.code_uri, spec.handler, module_name="_bench_metering")
            context = LambdaContext(function_name=METERING, memory_limit_in_mb=spec.memory_mb, timeout_s=spec.timeout_s)
            for number in range(deliveries + 1):  # the first one warms the container up: not measured
                event = usage_delivery(lines, names, f"2026/11/25/[$LATEST]{uuid.uuid4().hex}", int(time.time() * 1000))
                recorder.meter = meter if number else None
                with recorder.request() as tally:
                    started = time.perf_counter_ns()
                    result = handler(event, context)
                    elapsed = time.perf_counter_ns() - started
                recorder.meter = None
                if result.get("failed") or result.get("applied") != min(tenants, lines):
                    raise RuntimeError(f"a delivery was not applied whole: {result}")
                if number:
                    durations.append(elapsed / 1e6)
                    wru.append(tally.wru)
    finally:
        recorder.uninstall()
    return {
        "deliveries": deliveries,
        "lines_per_delivery": lines,
        "tenants_per_delivery": tenants,
        "memory_mb": spec.memory_mb,
        "duration_ms": summary(durations),
        "wru_per_delivery": sum(wru) / len(wru),
    }


def run_overhead(
    stack: StackProcess, specs: dict[str, FunctionSpec], *, runs: int, tenant_prefix: str
) -> list[dict[str, Any]]:
    """Each overhead route, ``runs`` requests metered and ``runs`` not, interleaved,
    against ``stack`` (another stack than the other phases': the containers'
    caches, which name a stack's endpoint and app client, start empty and are
    left empty)."""
    _fresh_containers()
    try:
        return _measure_overhead(stack, specs, runs=runs, tenant_prefix=tenant_prefix)
    finally:
        _fresh_containers()


def _fresh_containers() -> None:
    """What a new execution environment starts without (this process stands for them)."""
    from support_tickets.core.settings import get_settings
    from support_tickets.data.session import tenant_clients, token_exchange
    from support_tickets.data.tenant_registry import tenant_configs

    for cached in (get_settings, token_exchange, tenant_clients, tenant_configs):
        cached.cache_clear()


def _measure_overhead(
    stack: StackProcess, specs: dict[str, FunctionSpec], *, runs: int, tenant_prefix: str
) -> list[dict[str, Any]]:
    invoker = Invoker(specs)
    measured = []
    env = stack.function_environment(specs["CreateTicketFunction"])
    with environment(env), quiet_stdout():
        fixtures = Fixtures(invoker, tenant_prefix, stack.token, stack.authorizer_credentials)
        routes = fixtures.routes(deletes=0, only=set(OVERHEAD_FUNCTIONS))
        for route in routes:
            with environment(stack.function_environment(specs[route.function])):
                handler, counter = invoker.handler(route.function), 0
                times: dict[str, list[float]] = {"metered": [], "unmetered": []}
                cpu: dict[str, list[float]] = {"metered": [], "unmetered": []}
                for round_number in range(runs + 2):  # two warm-up rounds
                    order = ("metered", "unmetered") if round_number % 2 == 0 else ("unmetered", "metered")
                    for design in order:
                        event, counter = route.event(counter), counter + 1
                        context = invoker.context(route.function)
                        with metering_off() if design == "unmetered" else _nothing():
                            started, started_cpu = time.perf_counter_ns(), time.thread_time_ns()
                            response = handler(event, context)
                            elapsed = time.perf_counter_ns() - started
                            elapsed_cpu = time.thread_time_ns() - started_cpu
                        check(response, route.expect)
                        if round_number >= 2:
                            times[design].append(elapsed / 1e6)
                            cpu[design].append(elapsed_cpu / 1e6)
            metered, unmetered = summary(times["metered"]), summary(times["unmetered"])
            metered_cpu, unmetered_cpu = summary(cpu["metered"]), summary(cpu["unmetered"])
            measured.append(
                {
                    "route": route.name,
                    "function": route.function,
                    "metered_ms": metered,
                    "unmetered_ms": unmetered,
                    "metered_cpu_ms": metered_cpu,
                    "unmetered_cpu_ms": unmetered_cpu,
                    # The function's own work (what Lambda bills and AWS would see too).
                    "overhead": round((metered_cpu["median"] - unmetered_cpu["median"]) / unmetered_cpu["median"], 4),
                    # Wall clock: also the local emulator's capacity model, which looks the
                    # items up around each call that asks for ConsumedCapacity (DynamoDB doesn't).
                    "overhead_wall": round((metered["median"] - unmetered["median"]) / unmetered["median"], 4),
                }
            )
            progress(f"  metering overhead, {route.name}: done")
    return measured


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def metering_cost(lines: dict[str, int], deliveries: dict[str, Any]) -> dict[str, Any]:
    """The metering's own cost per million requests, in USD, by line item."""
    per_delivery = deliveries["lines_per_delivery"]
    invocations = Decimal(1_000_000) / per_delivery
    seconds = Decimal(str(deliveries["duration_ms"]["median"])) / 1000
    gb_seconds = invocations * seconds * deliveries["memory_mb"] / 1024
    wru = invocations * Decimal(str(deliveries["wru_per_delivery"]))
    ingested_gb = Decimal(lines["usage_fields"]) * 1_000_000 / 10**9
    items = {
        "log_ingestion": ingested_gb * LOG_INGESTION_PER_GB_USD,
        "lambda": prices.lambda_usd(int(invocations), gb_seconds),
        "dynamodb_writes": prices.dynamodb_usd(Decimal(0), wru),
    }
    made = {name: round(float(value), 4) for name, value in items.items()}
    made["total"] = round(sum(made.values()), 4)
    made["api_gateway_for_comparison"] = float(prices.API_GATEWAY_REST_PER_MILLION_USD)
    return {
        "assumptions": {"invocations": int(invocations), "gb_seconds": round(float(gb_seconds), 2), "wru": float(wru)},
        **made,
    }


def run_metering(
    stack: StackProcess, specs: dict[str, FunctionSpec], *, runs: int, deliveries: int, lines: int, tenants: int,
    tenant_prefix: str, quick: bool = False,
) -> dict[str, Any]:  # fmt: skip
    progress("metering: warm overhead, deliveries, line bytes")
    # The API functions' modules first, in their environment (Powertools reads it when the layer is imported).
    # The overhead is measured against a stack that answers at once; a quick run's figures are read by
    # nobody, and it measures on its own stack rather than start a second one.
    control = nullcontext(stack) if quick else stack_process("--no-capacity-model")
    with control as answering_at_once:
        overhead = run_overhead(answering_at_once, specs, runs=runs, tenant_prefix=f"{tenant_prefix}-o")
    delivered = run_deliveries(
        stack, specs, deliveries=deliveries, lines=lines, tenants=tenants, tenant_prefix=f"{tenant_prefix}-d"
    )
    line_bytes = usage_line_bytes()
    return {
        "line_bytes": line_bytes,
        "deliveries": delivered,
        "overhead": overhead,
        "cost_per_million_requests": metering_cost(line_bytes, delivered),
    }
