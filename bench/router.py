"""The edge router's own work per request: ``router/edge_router.js`` timed under Node.

``python -m bench.router`` measures it and puts it into the results already in
``bench/`` (results.json's ``router``, and results.md again); a whole ``python -m
bench`` run measures it too. It needs Node (``node`` on the PATH), as the edge
router's tests do.

What it says: the microseconds of JavaScript the function runs for a routed
request (decode the token's payload, two store reads, choose the origin), with a
store of 10,000 tenants. CloudFront runs it on its own runtime at the edge, so
this is the function's work, not the latency CloudFront's edge adds in front of
a cell's API (a network hop this machine cannot measure).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.stats import summary
from stack_model.template import PROJECT_ROOT

HERE = Path(__file__).resolve().parent
TIMING = HERE / "router_timing.cjs"
ROUTER = PROJECT_ROOT / "router" / "edge_router.js"
TENANTS, CELLS = 10_000, 4


def run_router(*, requests: int = 20_000, warmup: int = 2_000) -> dict[str, Any]:
    """The function's time per routed request, in microseconds (median, p95...)."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("the router's timing needs Node (node on the PATH)")
    request = {"source": str(ROUTER), "tenants": TENANTS, "cells": CELLS, "requests": requests, "warmup": warmup}
    completed = subprocess.run(  # noqa: S603 - our script, our input
        [node, str(TIMING)], input=json.dumps(request), capture_output=True, text=True, check=True, timeout=300
    )
    measured = json.loads(completed.stdout)
    if measured["routed"] != requests:
        raise RuntimeError(f"{requests - measured['routed']} requests were not routed: the store or tokens are wrong")
    node_version = subprocess.run(  # noqa: S603
        [node, "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return {
        "function_us": summary([ns / 1000 for ns in measured["ns"]]),
        "tenants": TENANTS,
        "cells": CELLS,
        "warmup": warmup,
        "node": node_version,
    }


def main(argv: list[str] | None = None) -> int:
    from bench.charts import write_charts
    from bench.report import markdown

    parser = argparse.ArgumentParser(prog="python -m bench.router", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where results.json and results.md are")
    args = parser.parse_args(argv)
    path = args.out / "results.json"
    if not path.is_file():
        parser.error(f"needs the results of a whole run in {path}")
    results = json.loads(path.read_text(encoding="utf-8"))
    results["router"] = run_router()
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    charts = write_charts(results, args.out)
    (args.out / "results.md").write_text(markdown(results, charts=[chart.name for chart in charts]), encoding="utf-8")
    sys.stdout.write(json.dumps(results["router"], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
