"""``python -m bench`` (``make bench``): run every benchmark against the local
stack, write ``bench/results.json`` and ``bench/results.md``, print the tables.

``--quick`` runs everything on tiny sizes (the test suite's smoke run): the
figures prove the harness works, not how fast anything is. ``--cold-only``
measures the cold starts alone and puts them into the results already in
``--out`` (every other section, and its figures, as they were);
``--metering-only`` does the same for the per-tenant metering's figures, and
``--webhooks-only`` for the webhook deliveries', and ``--isolation-only`` for
what tenant isolation mode costs (bench/isolation.py). ``--move-only`` moves
tenants of 1,000 and 10,000 tickets into their own tables (bench/move.py), beside
``--move-writers`` clients writing to each (bench/move_writers.py): a
whole run keeps the figures of the last ``--move-only`` run, as it does not
move anyone itself. ``--cell-move-only`` moves tenants of the same sizes from one
cell to another under a writer (bench/cell_move.py), kept by a whole run likewise.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.aggregation import AGGREGATOR, run_aggregation
from bench.authorizer import run_authorizer
from bench.callers import run_callers
from bench.cell_move import SERVE_ARGUMENTS, run_cell_move
from bench.charts import write_charts
from bench.cold import run_cold
from bench.cost import PRICES, aggregation_cost, route_costs
from bench.credentials import run_credentials
from bench.fill import fill_table
from bench.heat import run_heat
from bench.isolation import DEFAULT_SHARE, isolation_cost, run_isolation
from bench.metering import run_metering
from bench.move import run_move
from bench.report import goals, machine, markdown
from bench.router import run_router
from bench.routes import SETUP_RETRIES
from bench.stackproc import StackProcess, stack_process
from bench.warm import progress, run_warm
from bench.webhooks import queue_concurrency, run_webhooks
from stack_model.functions import FunctionSpec, function_specs

HERE = Path(__file__).resolve().parent
# The many-callers figures of the design before one client per container (a
# client per credential set), measured with bench/callers.py at e1f0191.
BEFORE_CALLERS = HERE / "callers_before.json"

METHOD = (
    "The local stack runs in its own process (`python -m local_stack serve`: moto behind the IAM guard, on "
    "loopback). Warm requests, the aggregator and the webhook functions run in-process: the real handlers, with "
    "the function's template environment, its role's credentials and real ID tokens of the local user pool, every "
    "AWS call a real HTTP request to the emulator, counted with botocore's `before-call` hooks. The naive design "
    "(`bench/naive.py`, never in production code) differs only in the credentials the domain layer gets. Cold "
    "starts are fresh interpreters over the `sam build` output. The emulator's latencies are not AWS's: quote "
    "ratios and counts, not milliseconds."
)

AGGREGATION_NOTE = (
    "How: ours applies a batch in transactions of up to 99 (tenant, status) pairs, one ADD per pair whose count "
    "moved plus one journal item listing the batch's records (exactly once under redelivery: "
    "`support_tickets.streams.aggregation`); the naive design writes once per change and double-counts on any "
    "redelivery. Transactional writes cost twice the WRU; the journal grows with the batch (about 45 bytes a "
    "record), never with the change rate."
)

COLD_NOTE = (
    "How: `x floor` is the ratio of instructions executed (callgrind, which the machine's load does not move; the "
    "1.5x goal is judged on it) by the handler's import and first request, over the floor's, the interpreter's "
    "start subtracted from both; `x floor (ms)`, the same ratio of timed medians. A first request is what invokes "
    "the function in the template (a route, a token, a stream batch, a message, a log delivery). On the "
    "`sam build` output, read-only, boto3 the runtime's stand-in; tracing off but in the `Tracing: Active` row."
)


def _phases(args: argparse.Namespace, started: float) -> Callable[[str], None]:
    """What reports the start of each phase on stderr (a run takes minutes)."""
    phases = ["cold starts", "filling the table", "warm requests", "aggregation", "partition heat"]
    phases = phases[1 if args.skip_cold else 0 : 1 if args.cold_only else None]

    def phase(name: str) -> None:
        progress(f"phase {phases.index(name) + 1}/{len(phases)}: {name} ({time.monotonic() - started:.0f} s so far)")

    return phase


def _measure(
    stack: StackProcess,
    args: argparse.Namespace,
    specs: dict[str, FunctionSpec],
    prefix: str,
    phase: Callable[[str], None],
) -> dict[str, Any]:
    """Every phase that needs the local stack."""
    results: dict[str, Any] = {}
    if not args.skip_cold:
        phase("cold starts")
        cold = run_cold(
            stack,
            specs,
            runs=args.cold_runs,
            tenant_prefix=f"{prefix}-c",
            only=["GetTicketSummaryFunction", "AuthorizerFunction"] if args.quick else None,
            instructions=args.cold_instructions,
            breakdown=not args.quick,
        )
        cold["note"] = COLD_NOTE
        if args.cold_only:  # its own date: the other sections keep their run's
            cold["machine"] = {**machine(), "command": "python -m bench --cold-only"}
        results["cold"] = cold
    if args.cold_only:
        return results
    if args.metering_only:
        results["metering"] = _metering(stack, args, specs, prefix)
        return results
    if args.webhooks_only:
        results["webhooks"] = _webhooks(stack, args, specs, prefix)
        return results
    if args.isolation_only:
        results["isolation"] = _isolation(stack, args, specs, prefix)
        return results
    if args.move_only or args.cell_move_only:
        results.update(_moves(stack, args, prefix))
        return results
    phase("filling the table")
    results["table"] = fill_table(
        stack, tickets=args.table_tickets, tenants=args.table_tenants, tenant_prefix=f"{prefix}-f"
    )
    phase("warm requests")
    warm = run_warm(
        stack,
        specs,
        runs=args.warm_runs,
        warmup=5 if not args.quick else 1,
        tenant_prefix=f"{prefix}-w",
        spare_deletes=4 if args.quick else 10,
    )
    results["warm"] = warm["routes"]
    results["naive_overhead"] = warm["naive_overhead"]
    results["credentials"] = run_credentials(stack, f"{prefix}-x", quick=args.quick)
    results["callers"] = run_callers(stack, specs, callers=args.callers, tenant_prefix=f"{prefix}-m")
    if BEFORE_CALLERS.is_file():
        results["callers_before"] = json.loads(BEFORE_CALLERS.read_text(encoding="utf-8"))
    results["authorizer"] = run_authorizer(stack, specs, runs=args.warm_runs, tenant_prefix=f"{prefix}-z")
    phase("aggregation")
    results["aggregation"] = run_aggregation(
        stack,
        specs,
        records=args.batch_records,
        tenants=args.batch_tenants,
        runs=args.batch_runs,
        tenant_prefix=f"{prefix}-a",
    )
    results["aggregation"]["note"] = AGGREGATION_NOTE
    results["metering"] = _metering(stack, args, specs, prefix)
    results["webhooks"] = _webhooks(stack, args, specs, prefix)
    results["isolation"] = _isolation(stack, args, specs, prefix)
    return results


def _moves(stack: StackProcess, args: argparse.Namespace, prefix: str) -> dict[str, Any]:
    """``--move-only``'s or ``--cell-move-only``'s section, each with its own date (the others keep their run's)."""
    if args.cell_move_only:
        sizes = tuple(int(size) for size in args.cell_move_tickets.split(","))
        moved = run_cell_move(stack, sizes=sizes, tenant_prefix=f"{prefix}-k")
        return {"cell_move": {**moved, "machine": {**machine(), "command": "python -m bench --cell-move-only"}}}
    sizes = tuple(int(size) for size in args.move_tickets.split(","))
    writers = tuple(int(count) for count in args.move_writers.split(","))
    moved = run_move(stack, sizes=sizes, writers=writers, tenant_prefix=f"{prefix}-v")
    return {"move": {**moved, "machine": {**machine(), "command": "python -m bench --move-only"}}}


def _isolation(stack: StackProcess, args: argparse.Namespace, specs: dict[str, FunctionSpec], prefix: str) -> Any:
    # Its cold starts take seconds each: none under --quick (the price model still runs, on the quick figures).
    tenants, tenant_prefix = args.isolation_tenants, f"{prefix}-i"
    measured = None if args.quick else run_isolation(stack, specs, tenants=tenants, tenant_prefix=tenant_prefix)
    isolation: dict[str, Any] = {"measured": measured}
    if args.isolation_only:  # its own date: the other sections keep their run's
        isolation["machine"] = {**machine(), "command": "python -m bench --isolation-only"}
    return isolation


def _metering(stack: StackProcess, args: argparse.Namespace, specs: dict[str, FunctionSpec], prefix: str) -> Any:
    sizes = {"runs": 2, "deliveries": 1, "lines": 10, "tenants": 2} if args.quick else {
        "runs": args.warm_runs, "deliveries": 20, "lines": 100, "tenants": 10
    }  # fmt: skip
    metering = run_metering(stack, specs, tenant_prefix=f"{prefix}-u", quick=args.quick, **sizes)
    if args.metering_only:  # its own date: the other sections keep their run's
        metering["machine"] = {**machine(), "command": "python -m bench --metering-only"}
    return metering


def _webhooks(stack: StackProcess, args: argparse.Namespace, specs: dict[str, FunctionSpec], prefix: str) -> Any:
    # The delay: quick, one change and the hang's few-second version; else 4 rounds of B's 25
    # changes and 25 events alone, then 25 events beside a hanging neighbour (bench/webhooks.py).
    sizes = {"deliveries": 1, "tenants": 1, "changes": 1, "rounds": 0, "batches": 1} if args.quick else {
        "deliveries": args.warm_runs, "tenants": 12, "changes": 25, "rounds": 4, "batches": args.warm_runs
    }  # fmt: skip
    webhooks = run_webhooks(stack, specs, tenant_prefix=f"{prefix}-h", **sizes)
    if args.webhooks_only:  # its own date: the other sections keep their run's
        webhooks["machine"] = {**machine(), "command": "python -m bench --webhooks-only"}
    return webhooks


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: prove the harness works (tests)")
    parser.add_argument("--out", type=Path, default=HERE, help="where results.json and results.md go")
    parser.add_argument("--warm-runs", type=int, default=100, help="measured requests per route and design")
    parser.add_argument("--cold-runs", type=int, default=10, help="cold starts per function (fresh processes)")
    parser.add_argument("--table-tickets", type=int, default=10_000, help="tickets in the table before the warm phase")
    parser.add_argument("--table-tenants", type=int, default=20, help="tenants those tickets belong to")
    parser.add_argument("--batch-records", type=int, default=1000)
    parser.add_argument("--batch-tenants", type=int, default=10)
    parser.add_argument("--batch-runs", type=int, default=5)
    parser.add_argument("--heat-fraction", type=float, default=0.1, help="share of a hot tenant's second simulated")
    parser.add_argument("--callers", type=int, default=1000, help="distinct callers on one warm container")
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument(
        "--cold-only",
        action="store_true",
        help="only the cold starts, replacing them in the results already in --out (the rest kept as it was)",
    )
    parser.add_argument(
        "--metering-only",
        action="store_true",
        help="only the metering's figures, put into the results already in --out (the rest kept as it was)",
    )
    parser.add_argument(
        "--webhooks-only",
        action="store_true",
        help="only the webhook deliveries' figures, put into the results already in --out (the rest kept as it was)",
    )
    parser.add_argument(
        "--isolation-only",
        action="store_true",
        help="only tenant isolation mode's figures, put into the results already in --out (the rest kept as it was)",
    )
    parser.add_argument(
        "--move-only",
        action="store_true",
        help="only the moves of tenants into their own tables, put into the results already in --out",
    )
    parser.add_argument(
        "--move-tickets", default="1000,10000", help="the moved tenants' ticket counts, comma-separated"
    )
    parser.add_argument(
        "--move-writers",
        default="1",
        help="clients writing to each moving tenant (5 writes/s each; 0: none); comma-separated: a move per count",
    )
    parser.add_argument(
        "--cell-move-only",
        action="store_true",
        help="only the moves of tenants between two cells, put into the results already in --out",
    )
    parser.add_argument(
        "--cell-move-tickets", default="1000,10000", help="the tenants moved between cells' ticket counts"
    )
    parser.add_argument("--isolation-tenants", type=int, default=5, help="tenants per function in the isolation runs")
    parser.add_argument(
        "--isolation-share", type=float, default=DEFAULT_SHARE, help="the share of a function's bill priced against"
    )
    parser.add_argument(
        "--cold-instructions",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="count each cold start's instructions under valgrind's callgrind (the ratios to the floor)",
    )
    args = parser.parse_args(argv)
    if args.cold_only and args.skip_cold:
        parser.error("--cold-only and --skip-cold exclude each other")
    if args.cold_only and not (args.out / "results.json").is_file():
        parser.error(f"--cold-only needs the results of a whole run in {args.out / 'results.json'}")
    if args.metering_only and (args.cold_only or not (args.out / "results.json").is_file()):
        parser.error(f"--metering-only needs the results of a whole run in {args.out / 'results.json'}, alone")
    only = args.metering_only or args.webhooks_only
    if args.webhooks_only and (args.cold_only or args.metering_only or not (args.out / "results.json").is_file()):
        parser.error(f"--webhooks-only needs the results of a whole run in {args.out / 'results.json'}, alone")
    if args.isolation_only and (
        args.cold_only or args.metering_only or args.webhooks_only or not (args.out / "results.json").is_file()
    ):
        parser.error(f"--isolation-only needs the results of a whole run in {args.out / 'results.json'}, alone")
    if args.move_only and (
        args.cold_only
        or args.metering_only
        or args.webhooks_only
        or args.isolation_only
        or not (args.out / "results.json").is_file()
    ):
        parser.error(f"--move-only needs the results of a whole run in {args.out / 'results.json'}, alone")
    others = args.cold_only or args.metering_only or args.webhooks_only or args.isolation_only or args.move_only
    if args.cell_move_only and (others or not (args.out / "results.json").is_file()):
        parser.error(f"--cell-move-only needs the results of a whole run in {args.out / 'results.json'}, alone")
    if only or args.isolation_only or args.move_only or args.cell_move_only:
        args.skip_cold = True
    if args.quick:
        args.warm_runs, args.cold_runs = 2, 1
        args.table_tickets, args.table_tenants = 25, 4
        # 3 tenants: at most 9 (tenant, status) pairs, still one transaction of ours against 20-odd naive writes
        args.batch_records, args.batch_tenants, args.batch_runs = 50, 3, 1
        args.heat_fraction = 0.005
        args.callers = 12  # past the descriptors' bound of 10 the smoke test holds: a socket per caller fails it
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    started = time.monotonic()
    specs = function_specs()
    prefix = f"b{secrets.token_hex(3)}"
    parameters: dict[str, Any] = {
        "quick": args.quick,
        "warm_runs": args.warm_runs,
        "warm_warmup": 5 if not args.quick else 1,
        "cold_runs": args.cold_runs,
        "table_tickets": args.table_tickets,
        "batch_records": args.batch_records,
        "batch_tenants": args.batch_tenants,
        "batch_runs": args.batch_runs,
        "heat_fraction": args.heat_fraction,
    }
    results: dict[str, Any] = {"machine": machine(), "method": METHOD, "parameters": parameters}
    alone = (
        args.cold_only
        or args.metering_only
        or args.webhooks_only
        or args.isolation_only
        or args.move_only
        or args.cell_move_only
    )
    if alone:
        # The earlier run's sections and parameters, with this run's cold starts, metering, webhooks, isolation
        # or moves.
        earlier = json.loads((args.out / "results.json").read_text(encoding="utf-8"))
        if args.cold_only:
            earlier["parameters"]["cold_runs"] = args.cold_runs
        results = {**earlier, "method": METHOD}
    elif not args.quick and (args.out / "results.json").is_file():
        # A whole run moves nobody: the last --move-only and --cell-move-only runs' figures stay.
        earlier = json.loads((args.out / "results.json").read_text(encoding="utf-8"))
        results.update({name: earlier[name] for name in ("move", "cell_move") if name in earlier})
    progress("starting the local stack")
    phase = _phases(args, started)
    # The webhook queue's event source at the template's MaximumConcurrency (make dev keeps 4).
    serve = SERVE_ARGUMENTS if args.cell_move_only else ("--queue-concurrency", str(queue_concurrency()))
    with stack_process(*serve) as stack:
        results.update(_measure(stack, args, specs, prefix, phase))
    if not alone:
        # In memory, after the local stack has stopped: it needs no emulator.
        phase("partition heat")
        results["heat"] = run_heat(fraction=args.heat_fraction)
        results["router"] = run_router(requests=200, warmup=20) if args.quick else run_router()
        memory = specs[AGGREGATOR].memory_mb
        results["cost"] = {
            "prices": PRICES,
            "memory_mb": memory,
            "routes": route_costs(results["warm"], specs),
            "aggregation": aggregation_cost(results["aggregation"], memory),
        }
        results["setup_retries"] = SETUP_RETRIES
    if "isolation" in results:  # priced on this run's figures (or the earlier run's, kept)
        results["isolation"]["cost"] = isolation_cost(results, specs, share=args.isolation_share)
    results["goals"] = goals(results)
    if not alone:
        results["seconds"] = round(time.monotonic() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    charts = write_charts(results, args.out)
    table = markdown(results, charts=[path.name for path in charts])
    (args.out / "results.md").write_text(table, encoding="utf-8")
    sys.stdout.write(table)
    written = ", ".join(str(path) for path in [args.out / "results.json", args.out / "results.md", *charts])
    progress(f"done in {time.monotonic() - started:.1f} s: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
