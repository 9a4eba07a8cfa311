"""Many callers on one warm API function: what each new caller costs it.

A warm Lambda container serves every user of every tenant that API Gateway
routes to it, each request with the caller's own ``TenantAccessRole``
credentials (a new set per token, so a busy tenant brings new ones every hour
even with a few users). This runs one function's handler in this process (the
warm container), with Lambda's limit of 1,024 file descriptors and connections
kept alive as AWS keeps them (:mod:`bench.keepalive`), and sends it
``callers`` distinct credential sets from the local stack's identity pool: for
each, a first request (a new caller on a warm container) and a repeat (the
same caller again). Recorded:

- open file descriptors and resident memory after 0, 10, 100, ... callers:
  flat when the container's cost does not grow with the callers it has served;
- the first request's latency against the repeat's (medians, and their ratio):
  a new caller builds nothing when the two are alike;
- the first caller that was not answered 200, if any (a container out of
  descriptors answers 503 to everyone after that: the run stops there).

``python -m bench.callers [--callers N] [--out FILE]`` runs it on its own
(its own local stack), as ``python -m bench`` does in its warm phase.
``GetAuditTrailFunction`` is the function measured: its request reads 8
partitions in parallel, so it holds the most connections per request.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3

from bench.keepalive import keepalive_front
from bench.routes import Invoker
from bench.stackproc import StackProcess, stack_process
from bench.stats import summary
from bench.warm import progress, quiet_stdout
from local_stack.lambda_.runtime import environment
from ops.users import tenant_credentials
from stack_model.events import rest_event, with_token
from stack_model.functions import FunctionSpec, function_specs
from support_tickets.data.session import tenant_clients

FUNCTION = "GetAuditTrailFunction"
LAMBDA_FILE_DESCRIPTORS = 1024  # Lambda's quota per execution environment, not adjustable
TENANTS = 4
CHECKPOINTS = (0, 10, 100, 250, 500, 750, 1000, 2000)


def open_descriptors() -> int:
    """Counted without opening one (listing /proc/self/fd would need a free one)."""
    limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    count = 0
    for descriptor in range(min(limit, 65536)):
        try:
            os.fstat(descriptor)
        except OSError:
            continue
        count += 1
    return count


def resident_mb() -> float | None:
    """Resident memory now; None when no descriptor is left to read it with."""
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS in /proc/self/status")


@contextmanager
def descriptor_limit(limit: int) -> Iterator[None]:
    """This process's open-file limit lowered to Lambda's for the run."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def run_callers(
    stack: StackProcess, specs: dict[str, FunctionSpec], *, callers: int, tenant_prefix: str
) -> dict[str, Any]:
    invoker = Invoker(specs)
    spec = specs[FUNCTION]
    # A fresh container: no client or session left by an earlier phase.
    boto3.DEFAULT_SESSION = None
    tenant_clients.cache_clear()
    pool = stack.identity_pool()
    identity_pool_id = str(stack.state["identity_pool_id"])
    provider = str(stack.state["user_pool_provider_name"])
    tokens = [
        stack.token(f"{tenant_prefix}-{number}", f"admin-{tenant_prefix}-{number}", admin=True)
        for number in range(TENANTS)
    ]
    first_ms: list[float] = []
    repeat_ms: list[float] = []
    checkpoints: list[dict[str, Any]] = []
    first_failure: dict[str, Any] | None = None
    handler = invoker.handler(FUNCTION)

    def request(event: dict[str, Any]) -> tuple[float, int]:
        # Each invocation its own context, as Lambda gives it: the request's deadline is
        # its invocation's (a context kept across the run would refuse every call once the
        # function's timeout had passed since the first).
        context = invoker.context(FUNCTION)
        started = time.perf_counter()
        response = handler(event, context)
        return (time.perf_counter() - started) * 1000, int(response.get("statusCode", 0))

    # New credential sets, as the authorizer passes for new tokens: obtained
    # before the measured container runs (they are the authorizer's work).
    credential_sets = [
        tenant_credentials(pool, identity_pool_id, provider, tokens[number % TENANTS])
        for number in range(1, callers + 1)
    ]
    with (
        keepalive_front(str(stack.state["vpc_endpoint_url"])) as front,
        environment({**stack.function_environment(spec), "AWS_ENDPOINT_OVERRIDE": front}),
        quiet_stdout(),
        descriptor_limit(LAMBDA_FILE_DESCRIPTORS),
    ):
        # Warm: the handler imported, the tenants' records read, botocore's models loaded.
        for token in tokens:
            warm = with_token(rest_event("GET", "/audit"), token, stack.authorizer_credentials(token))
            for _ in range(2):
                request(warm)
        checkpoints.append({"callers": 0, "open_descriptors": open_descriptors(), "rss_mb": resident_mb()})
        for number, credentials in enumerate(credential_sets, start=1):
            event = with_token(rest_event("GET", "/audit"), tokens[number % TENANTS], credentials)
            first, status = request(event)
            again, repeat_status = request(event)
            if (status, repeat_status) != (200, 200):
                # Out of descriptors, the container answers 503 to every caller from here on.
                first_failure = {
                    "caller": number,
                    "status": status if status != 200 else repeat_status,
                    "open_descriptors": open_descriptors(),
                }
                checkpoints.append({"callers": number, "open_descriptors": open_descriptors(), "rss_mb": resident_mb()})
                break
            first_ms.append(first)
            repeat_ms.append(again)
            if number in CHECKPOINTS or number == callers:
                checkpoints.append({"callers": number, "open_descriptors": open_descriptors(), "rss_mb": resident_mb()})
    start, end = checkpoints[0], checkpoints[-1]
    return {
        "function": FUNCTION,
        "callers": callers,
        "tenants": TENANTS,
        "descriptor_limit": LAMBDA_FILE_DESCRIPTORS,
        "checkpoints": checkpoints,
        "descriptors_growth": end["open_descriptors"] - start["open_descriptors"],
        "rss_growth_mb": round(end["rss_mb"] - start["rss_mb"], 1) if end["rss_mb"] is not None else None,
        "first_request_ms": summary(first_ms),
        "repeat_request_ms": summary(repeat_ms),
        "first_over_repeat": round(summary(first_ms)["median"] / summary(repeat_ms)["median"], 3),
        "first_failure": first_failure,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.callers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=1000)
    parser.add_argument("--out", type=Path, help="write the result as JSON here (default: stdout)")
    args = parser.parse_args(argv)
    progress("starting the local stack")
    with stack_process() as stack:
        progress(f"{args.callers} callers on one warm {FUNCTION}")
        result = run_callers(stack, function_specs(), callers=args.callers, tenant_prefix=f"c{os.getpid()}")
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
