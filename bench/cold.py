"""Cold starts, per function, from the ``sam build`` output.

Each sample is a fresh interpreter (``python -S -P``: no site-packages, only
the standard library and ``PYTHONPATH``) with the built layer
(``.aws-sam/build/SharedLayer/python``) and the function's build directory
on the path, the function's environment (pointed at the emulator, its
execution role's credentials) and ``PYTHONDONTWRITEBYTECODE=1`` (Lambda's
code is read-only: what the build did not compile is compiled on every cold
start). It imports the handler and serves its first request (for the API
functions: the caller's token exchanged with the identity pool, GetId then
GetCredentialsForIdentity, a new DynamoDB client, the call). Reported: import,
first request, their sum (what Lambda calls Init Duration plus the first
Duration, without the runtime's own bootstrap), and the whole process.

The floor is ``bench/floor/app.py``: imports boto3 only (the same boto3,
from the same layer) and does one GetItem with credentials already scoped to
a tenant. Samples of all functions and the floor are interleaved, in a
rotating order, run after run. One more run per function under
``-X importtime`` names its heaviest imports.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.aggregation import synthesize
from bench.routes import Fixtures, Invoker
from bench.stackproc import StackProcess
from bench.stats import summary
from bench.warm import progress, quiet_stdout
from local_stack.lambda_runtime import FunctionSpec, environment
from local_stack.template import PROJECT_ROOT

BUILD_DIR = PROJECT_ROOT / ".aws-sam" / "build"
LAYER_DIR = BUILD_DIR / "SharedLayer" / "python"
CHILD = Path(__file__).with_name("cold_child.py")
FLOOR_DIR = Path(__file__).with_name("floor")
FLOOR = "Floor (boto3 + one GetItem)"
AGGREGATOR = "AggregateCountsFunction"
AGGREGATOR_RECORDS = 100
# "compiled": the build output byte-compiled ahead of time (the headline: how a
# Python process normally runs); "as_built": exactly what `sam build` writes,
# no bytecode: Lambda's code directories are read-only, so every import
# compiles its module on every cold start. Fewer runs of the latter.
VARIANTS = ("compiled", "as_built")
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")


class BuildMissing(RuntimeError):
    pass


def _check_build(specs: dict[str, FunctionSpec]) -> None:
    missing = [str(path) for path in [LAYER_DIR, *(BUILD_DIR / name for name in specs)] if not path.is_dir()]
    if missing:
        raise BuildMissing(f"run `sam build` (make build) first; missing: {', '.join(missing)}")


def deployment_copy(specs: dict[str, FunctionSpec], target: Path, *, compiled: bool) -> Path:
    """What Lambda would get: the build output without any ``__pycache__``
    that runs from it left behind (tests import from it); with ``compiled``,
    byte-compiled with ``compileall --invalidation-mode checked-hash`` (valid
    whatever the files' mtimes after unzipping)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(LAYER_DIR, target / "SharedLayer" / "python", ignore=ignore)
    for name in specs:
        shutil.copytree(BUILD_DIR / name, target / name, ignore=ignore)
    shutil.copytree(FLOOR_DIR, target / "Floor", ignore=ignore)
    if compiled:
        subprocess.run(  # noqa: S603 - our interpreter, the standard library's compileall
            [sys.executable, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "checked-hash", str(target)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return target


def _spawn(
    root: Path,
    name: str,
    *,
    code_dir: Path,
    handler: str,
    memory: int,
    event: Any,
    env: dict[str, str],
    importtime: bool = False,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as directory:
        job_path, out_path = Path(directory) / "job.json", Path(directory) / "out.json"
        job = {"handler": handler, "function": name, "memory": memory, "event": event, "out": str(out_path)}
        job_path.write_text(json.dumps(job), encoding="utf-8")
        child_env = {
            **env,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "TZ": ":UTC",
            "PYTHONPATH": os.pathsep.join([str(code_dir), str(root / "SharedLayer" / "python")]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "LAMBDA_TASK_ROOT": str(code_dir),
        }
        flags = ["-S", "-P", *(["-X", "importtime"] if importtime else [])]
        started = time.time()
        completed = subprocess.run(  # noqa: S603 - our interpreter, our script
            [sys.executable, *flags, str(CHILD), str(job_path)],
            cwd=directory,
            env=child_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
            timeout=120,
        )
        ended = time.time()
        if completed.returncode != 0 or not out_path.exists():
            raise RuntimeError(f"cold start of {name} failed:\n{completed.stderr.decode(errors='replace')[-3000:]}")
        result: dict[str, Any] = json.loads(out_path.read_text(encoding="utf-8"))
    result["process_ms"] = (ended - started) * 1000
    result["interpreter_start_ms"] = (result.pop("started_wall") - started) * 1000
    if importtime:
        result["imports"] = heaviest_imports(completed.stderr.decode(errors="replace"))
    status, failures = result.get("status"), result.get("batch_item_failures")
    if (status is not None and status >= 300) or failures:
        raise RuntimeError(f"cold start of {name}: first request answered {status} {failures}")
    return result


def heaviest_imports(stderr: str, top: int = 5) -> list[dict[str, Any]]:
    """From ``-X importtime``: the top-level packages that cost the most,
    their own modules' self times summed (no double counting)."""
    by_package: dict[str, int] = defaultdict(int)
    for line in stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match is None:
            continue
        self_us, module = int(match.group(1)), match.group(4)
        by_package[module.split(".")[0]] += self_us
    ranked = sorted(by_package.items(), key=lambda item: item[1], reverse=True)[:top]
    return [{"package": package, "ms": round(us / 1000, 1)} for package, us in ranked]


def run_cold(
    stack: StackProcess,
    all_specs: dict[str, FunctionSpec],
    *,
    runs: int,
    as_built_runs: int,
    tenant_prefix: str,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Cold starts of every function (or of ``only``) and of the floor."""
    specs = {name: spec for name, spec in all_specs.items() if only is None or name in only}
    _check_build(specs)
    invoker = Invoker(all_specs)
    api_env = stack.function_environment(all_specs["CreateTicketFunction"])
    with environment(api_env), quiet_stdout():
        progress("cold starts: creating test data")
        fixtures = Fixtures(invoker, tenant_prefix, stack.token)
        routes = {route.function: route for route in fixtures.routes(runs + as_built_runs + 4)}
        floor_tenant = f"{tenant_prefix}-floor"
        floor_ticket = fixtures.create(floor_tenant, f"{floor_tenant}-user", "Printer on fire")
    environments = {name: stack.function_environment(spec) for name, spec in specs.items()}
    floor_env = {
        "TABLE_NAME": str(stack.state["table_name"]),
        "AWS_ENDPOINT_OVERRIDE": stack.emulator_url,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        **stack.tenant_credentials(stack.token(floor_tenant, f"{floor_tenant}-user")),
    }
    floor_event = {"pk": f"TENANT#{floor_tenant}|TICKET#{floor_ticket}", "sk": "SUMMARY"}
    stream_arn = str(stack.state["stream_arn"])

    def sample(root: Path, name: str, run: int, importtime: bool = False) -> dict[str, Any]:
        if name == FLOOR:
            return _spawn(
                root,
                name,
                code_dir=root / "Floor",
                handler="app.lambda_handler",
                memory=512,
                event=floor_event,
                env=floor_env,
                importtime=importtime,
            )
        spec = specs[name]
        if name == AGGREGATOR:
            tenants = [f"{tenant_prefix}-agg-{run}-{number}" for number in range(5)]
            event: dict[str, Any] = {
                "Records": synthesize(AGGREGATOR_RECORDS, tenants, seed=1000 + run, stream_arn=stream_arn)[0]
            }
        else:
            event = routes[name].event(run)
        return _spawn(
            root,
            name,
            code_dir=root / name,
            handler=spec.handler,
            memory=spec.memory_mb,
            event=event,
            env=environments[name],
            importtime=importtime,
        )

    names = [*specs, FLOOR]
    runs_of = {"compiled": runs, "as_built": as_built_runs}
    measured = [variant for variant in VARIANTS if runs_of[variant] > 0]
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {
        variant: {name: [] for name in names} for variant in measured
    }
    imports: dict[str, dict[str, list[dict[str, Any]]]] = {variant: {} for variant in measured}
    with tempfile.TemporaryDirectory(prefix="bench-deploy-") as directory:
        roots = {
            variant: deployment_copy(specs, Path(directory) / variant, compiled=variant == "compiled")
            for variant in measured
        }
        requests = dict.fromkeys(names, 0)  # the n-th request of each function (its own data)

        def next_request(name: str) -> int:
            requests[name] += 1
            return requests[name] - 1

        for run in range(max(runs_of.values())):
            rotation = run % len(names)
            variants = [variant for variant in measured if run < runs_of[variant]]
            for name in names[rotation:] + names[:rotation]:
                for variant in variants if run % 2 == 0 else reversed(variants):
                    samples[variant][name].append(sample(roots[variant], name, next_request(name)))
            progress(f"  cold-start run {run + 1}/{max(runs_of.values())}")
        for variant in measured:
            for name in names:
                imports[variant][name] = sample(roots[variant], name, next_request(name), importtime=True)["imports"]

    def stats(variant: str, name: str) -> dict[str, Any]:
        rows = samples[variant][name]
        return {
            "import_ms": summary([row["import_ms"] for row in rows]),
            "first_request_ms": summary([row["first_request_ms"] for row in rows]),
            "init_plus_first_ms": summary([row["import_ms"] + row["first_request_ms"] for row in rows]),
            "process_ms": summary([row["process_ms"] for row in rows]),
            "interpreter_start_ms": summary([row["interpreter_start_ms"] for row in rows]),
            "heaviest_imports": imports[variant][name],
        }

    result: dict[str, Any] = {"runs": runs_of, "floor_name": FLOOR, "variants": {}}
    for variant in measured:
        floor = stats(variant, FLOOR)
        functions = {}
        for name in specs:
            found = stats(variant, name)
            found["over_floor"] = round(
                found["init_plus_first_ms"]["median"] / floor["init_plus_first_ms"]["median"], 2
            )
            functions[name] = found
        result["variants"][variant] = {"floor": floor, "functions": functions}
    return result
