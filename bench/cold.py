"""Cold starts, per function, of what ``sam build`` ships.

What is measured is the build output exactly (``.aws-sam/build``: the
layer and each function, with the bytecode the build wrote), copied into a
directory that is then made read-only, as Lambda's ``/opt`` and
``/var/task`` are: whatever the build did not compile is compiled on every
cold start and cached nowhere. Beside it, a stand-in for what the python3.13
runtime provides (``.aws-sam/lambda-runtime``: boto3 and its dependencies at
the versions of ``layers/shared/lambda-runtime.txt``, byte-compiled, as the
runtime's are), after the layer on the import path.

Each sample is a fresh interpreter (``python -S -P``: no site-packages, only
the standard library and ``PYTHONPATH`` = function, layer, runtime) with the
function's environment (pointed at the emulator, its execution role's
credentials) and ``PYTHONDONTWRITEBYTECODE=1``. It imports the handler and
serves its first request (for the API functions: the caller's token exchanged
with the identity pool, GetId then GetCredentialsForIdentity, a new DynamoDB
client, the call). Reported: import, first request, their sum (what Lambda
calls Init Duration plus the first Duration, without the runtime's own
bootstrap), and the whole process.

The floor is ``bench/floor/app.py``: imports boto3 only (the runtime's) and
does one GetItem with credentials already scoped to a tenant. Samples of all
functions and the floor are interleaved, in a rotating order, run after run.
One more run per function under ``-X importtime`` names its heaviest imports.

Milliseconds on a shared machine move with its load; instructions do not. So
one more run per function (and the floor) executes under valgrind's callgrind,
which counts the instructions the process executes: the same sample, with
``PYTHONHASHSEED=0``, minus the instructions of the prelude alone (the
interpreter's start and this harness's own imports, one run of
``cold_child.py`` without a handler). That count, import plus first request,
is what the ratio to the floor and the 1.5x goal are computed from; the
milliseconds stay beside it. Without valgrind the ratio falls back to the
milliseconds' medians, and the results say so (``ratio_basis``).
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
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.aggregation import synthesize
from bench.metering import usage_delivery
from bench.routes import Fixtures, Invoker
from bench.stackproc import StackProcess, operator_put
from bench.stats import summary
from bench.warm import progress, quiet_stdout
from bench.webhook_setup import register, sqs_record
from bench.webhooks import receiving
from local_stack.apigateway.rest_api import authorizer_spec
from local_stack.lambda_.runtime import environment
from local_stack.running_stack import local_admin
from stack_model.functions import FunctionSpec
from stack_model.template import PROJECT_ROOT

BUILD_DIR = PROJECT_ROOT / ".aws-sam" / "build"
LAYER_DIR = BUILD_DIR / "SharedLayer" / "python"
RUNTIME_DIR = PROJECT_ROOT / ".aws-sam" / "lambda-runtime" / "python"
CHILD = Path(__file__).with_name("cold_child.py")
FLOOR_DIR = Path(__file__).with_name("floor")
FLOOR = "Floor (boto3 + one GetItem)"
AGGREGATOR = "AggregateCountsFunction"
# One function once more as deployed with `Tracing: Active`: what the X-Ray SDK
# adds to a cold start (the local stack and the other rows run with tracing off).
TRACED_FUNCTION = "GetTicketSummaryFunction"
TRACED = f"{TRACED_FUNCTION}, Tracing: Active"
TRACED_ENV = {
    "POWERTOOLS_TRACE_DISABLED": "false",
    # What Lambda sets for a traced invocation (not sampled: nothing is sent).
    "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0",
}
# A stream function's first batch holds one record, so that its first request is
# one DynamoDB write, like the floor's one read and the API functions' one call:
# a cold start, not the batch's work (the aggregation benchmark measures that).
# So does the metering function's first delivery (one usage line) and the delivery
# function's (one message).
AGGREGATOR_RECORDS = 1
# What a function's first request is, from what invokes it in the template.
API, AUTHORIZES, STREAM, QUEUE, LOGS = "api", "authorizer", "stream", "queue", "logs"
_EVENT_KINDS = {"DynamoDB": STREAM, "SQS": QUEUE, "CloudWatchLogs": LOGS}
# callgrind's summary on stderr: "==<pid>== Collected : <instructions>".
_COLLECTED = re.compile(r"^==\d+== Collected : (\d+)\s*$", re.MULTILINE)
VALGRIND = shutil.which("valgrind")
# Fresh processes under callgrind at once (its counts do not depend on the machine's load).
CALLGRIND_JOBS = 2
# The time left the first request's Lambda context reports (an API function's 10 s
# timeout), and how many times that under callgrind, which runs some 50 times slower: the
# invocation's deadline (support_tickets.data.deadline) must not refuse a call because the
# count is being taken.
REMAINING_MS = 10_000
CALLGRIND_SLOWDOWN = 50
PRELUDE = "prelude"
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")


class BuildMissing(RuntimeError):
    pass


def first_request(spec: FunctionSpec) -> str:
    """The kind of a function's first request in its cold start, read from the
    template: an API route's request (the API's definition), the API's authorizer's
    token (the function its ``DefaultAuthorizer`` names), a stream batch
    (``DynamoDB``), a queue's messages (``SQS``), a log subscription's delivery
    (``CloudWatchLogs``). A function invoked in any other way has no cold-start
    scenario yet: :func:`run_cold` fails on it rather than leave it out."""
    if spec.routes:
        return API
    kinds: set[str] = {_EVENT_KINDS.get(str(event["Type"]), str(event["Type"])) for event in spec.events.values()}
    if not kinds and spec.logical_id == authorizer_spec().function_logical_id:
        return AUTHORIZES
    if len(kinds) == 1 and kinds <= set(_EVENT_KINDS.values()):
        return kinds.pop()
    raise ValueError(f"{spec.logical_id}: the cold-start bench has no first request for its events {sorted(kinds)}")


def _check_build(specs: dict[str, FunctionSpec]) -> None:
    wanted = [LAYER_DIR, RUNTIME_DIR, *(BUILD_DIR / name for name in specs)]
    missing = [str(path) for path in wanted if not path.is_dir()]
    if missing:
        raise BuildMissing(f"run `make build` first; missing: {', '.join(missing)}")


def layer_size(layer: Path = LAYER_DIR.parent) -> dict[str, int]:
    """What the layer ships: bytes (as files, unzipped), files, and how many are
    source and bytecode."""
    files = [path for path in layer.rglob("*") if path.is_file()]
    return {
        "bytes": sum(path.stat().st_size for path in files),
        "files": len(files),
        "py": sum(1 for path in files if path.suffix == ".py"),
        "pyc": sum(1 for path in files if path.suffix == ".pyc"),
    }


def deployment_copy(specs: dict[str, FunctionSpec], target: Path) -> Path:
    """What Lambda would get, read-only: the build output exactly (its bytecode
    included) and the floor (byte-compiled as the build compiles a function);
    beside them, a link to the runtime's stand-in (already byte-compiled, by the
    Makefile, and nothing writes bytecode: copying its 3,000 files took seconds)."""
    shutil.copytree(LAYER_DIR, target / "SharedLayer" / "python")
    (target / "runtime").symlink_to(RUNTIME_DIR, target_is_directory=True)
    for name in specs:
        shutil.copytree(BUILD_DIR / name, target / name)
    shutil.copytree(FLOOR_DIR, target / "Floor", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run(  # noqa: S603 - our interpreter, the standard library's compileall
        [sys.executable, "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", str(target / "Floor")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    read_only(target)
    return target


def read_only(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~0o222)


def writable(root: Path) -> None:
    """So that the temporary directory can be removed."""
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)


def _spawn(
    root: Path,
    name: str,
    *,
    code_dir: Path,
    layers: list[Path],
    handler: str,
    memory: int,
    event: Any,
    env: dict[str, str],
    importtime: bool = False,
    callgrind: bool = False,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as directory:
        job_path, out_path = Path(directory) / "job.json", Path(directory) / "out.json"
        job = {
            "handler": handler,
            "function": name,
            "memory": memory,
            "remaining_ms": REMAINING_MS * (CALLGRIND_SLOWDOWN if callgrind else 1),
            "event": event,
            "out": str(out_path),
        }
        job_path.write_text(json.dumps(job), encoding="utf-8")
        child_env = {
            **env,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "TZ": ":UTC",
            "PYTHONPATH": os.pathsep.join(str(path) for path in [code_dir, *layers, root / "runtime"]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "LAMBDA_TASK_ROOT": str(code_dir),
        }
        flags = ["-S", "-P", *(["-X", "importtime"] if importtime else [])]
        wrapper: list[str] = []
        if callgrind:
            if VALGRIND is None:
                raise RuntimeError("valgrind is not installed")
            # Instructions, not the machine's cache model: nothing but the count is kept.
            wrapper = [VALGRIND, "--tool=callgrind", f"--callgrind-out-file={directory}/callgrind.out"]
            child_env["PYTHONHASHSEED"] = "0"  # the same dictionaries, the same instructions, run after run
        started = time.time()
        completed = subprocess.run(  # noqa: S603 - valgrind (found on PATH) or our interpreter, our script
            [*wrapper, sys.executable, *flags, str(CHILD), str(job_path)],
            cwd=directory,
            env=child_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
            timeout=900 if callgrind else 120,  # callgrind runs some 50 times slower
        )
        ended = time.time()
        if completed.returncode != 0 or not out_path.exists():
            raise RuntimeError(f"cold start of {name} failed:\n{completed.stderr.decode(errors='replace')[-3000:]}")
        result: dict[str, Any] = json.loads(out_path.read_text(encoding="utf-8"))
    result["process_ms"] = (ended - started) * 1000
    result["interpreter_start_ms"] = (result.pop("started_wall") - started) * 1000
    if importtime:
        result["imports"] = heaviest_imports(completed.stderr.decode(errors="replace"))
    if callgrind:
        collected = _COLLECTED.search(completed.stderr.decode(errors="replace"))
        if collected is None:
            raise RuntimeError(f"callgrind counted nothing for {name}:\n{completed.stderr.decode()[-3000:]}")
        result["instructions"] = int(collected.group(1))
    status, failures = result.get("status"), result.get("batch_item_failures")
    if (status is not None and status >= 300) or failures:
        log = completed.stderr.decode(errors="replace")[-3000:]
        raise RuntimeError(f"cold start of {name}: first request answered {status} {failures}:\n{log}")
    return result


# What an API function's import adds to the floor's, step by step: each step
# imports what the one before it did and more, in a fresh interpreter over the
# read-only build (the function's directory, the layer, the runtime's boto3),
# under callgrind. The last step is the handler's own import.
BREAKDOWN_FUNCTION = "GetTicketSummaryFunction"
_POWERTOOLS = "import boto3, aws_lambda_powertools"
_RESOLVERS = f"{_POWERTOOLS}, aws_lambda_powertools.event_handler"
_LAYER = f"{_RESOLVERS}, support_tickets.api.resolver, support_tickets.domain.tickets"
BREAKDOWN_STEPS: tuple[tuple[str, str], ...] = (
    ("boto3 (what the floor imports)", "import boto3"),
    ("Powertools' logger, metrics and tracer", _POWERTOOLS),
    ("Powertools' event handler (its __init__ imports every resolver, asyncio included)", _RESOLVERS),
    ("our layer: the API plumbing and request checks, models, domain, data access", _LAYER),
    ("the handler: its route and its repository", f"{_LAYER}; import app"),
)


def import_breakdown(root: Path, function: str = BREAKDOWN_FUNCTION) -> list[dict[str, Any]]:
    """Instructions of each :data:`BREAKDOWN_STEPS` import, and what each adds to the one before."""
    if VALGRIND is None:
        raise RuntimeError("valgrind is not installed")
    code_dir = root / function
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(
            str(path) for path in [code_dir, root / "SharedLayer" / "python", root / "runtime"]
        ),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "AWS_REGION": "us-east-1",
    }

    def count(code: str) -> int:
        completed = subprocess.run(  # noqa: S603 - valgrind (found on PATH), our interpreter
            [
                str(VALGRIND),
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                "-S",
                "-P",
                "-c",
                code,
            ],
            cwd=code_dir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
            timeout=900,
        )
        collected = _COLLECTED.search(completed.stderr.decode(errors="replace"))
        if completed.returncode != 0 or collected is None:
            raise RuntimeError(f"import breakdown failed for {code!r}:\n{completed.stderr.decode()[-3000:]}")
        return int(collected.group(1))

    codes = ["pass", *(code for _, code in BREAKDOWN_STEPS)]
    with ThreadPoolExecutor(max_workers=CALLGRIND_JOBS) as pool:
        counts = list(pool.map(count, codes))
    steps = []
    for index, (label, _) in enumerate(BREAKDOWN_STEPS, start=1):
        steps.append(
            {
                "step": label,
                "instructions_m": round((counts[index] - counts[0]) / 1e6, 1),
                "adds_m": round((counts[index] - counts[index - 1]) / 1e6, 1) if index > 1 else None,
            }
        )
    return steps


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


def run_cold(  # noqa: PLR0915 - one phase of the benchmark, read top to bottom
    stack: StackProcess,
    all_specs: dict[str, FunctionSpec],
    *,
    runs: int,
    tenant_prefix: str,
    only: list[str] | None = None,
    instructions: bool = True,
    breakdown: bool = True,
) -> dict[str, Any]:
    """Cold starts of every function (or of ``only``) and of the floor; with
    ``instructions`` (and valgrind installed), one more run of each under
    callgrind, and with ``breakdown`` too, :func:`import_breakdown`."""
    specs = {name: spec for name, spec in all_specs.items() if only is None or name in only}
    _check_build(specs)
    invoker = Invoker(all_specs)
    api_env = stack.function_environment(all_specs["CreateTicketFunction"])
    # The fixtures create webhooks too: with the webhook key the webhook functions know.
    webhook_env = stack.function_environment(all_specs["CreateWebhookFunction"])
    api_env = {**api_env, **{name: value for name, value in webhook_env.items() if name.startswith("WEBHOOK_")}}
    with environment(api_env), quiet_stdout():
        progress("cold starts: creating test data")
        fixtures = Fixtures(invoker, tenant_prefix, stack.token, stack.authorizer_credentials, seed=operator_put(stack))
        routes = {route.function: route for route in fixtures.routes(runs + 4, only=set(specs))}
        floor_tenant = f"{tenant_prefix}-floor"
        floor_ticket = fixtures.create(floor_tenant, f"{floor_tenant}-user", "Printer on fire")
    environments = {name: stack.function_environment(spec) for name, spec in specs.items()}
    floor_env = {
        "TABLE_NAME": str(stack.state["table_name"]),
        # Tenant credentials work only through the stack's gateway endpoint.
        "AWS_ENDPOINT_OVERRIDE": str(stack.state["vpc_endpoint_url"]),
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        **stack.tenant_credentials(stack.token(floor_tenant, f"{floor_tenant}-user")),
    }
    floor_event = {"pk": f"TENANT#{floor_tenant}|TICKET#{floor_ticket}", "sk": "SUMMARY"}
    kinds = {name: first_request(spec) for name, spec in specs.items()}
    authorizer_token = ""
    if AUTHORIZES in kinds.values():
        local_admin(stack.state).ensure(floor_tenant)
        authorizer_token = stack.token(floor_tenant, f"{floor_tenant}-user")
    stream_arn = str(stack.state["stream_arn"])
    # A queue's messages are deliveries to a webhook of their own tenant, on a receiver of this process.
    resources = ExitStack()
    hook_tenant, hook = f"{tenant_prefix}-hook", ""
    if QUEUE in kinds.values():
        receiver = resources.enter_context(receiving())
        hook = register(stack, local_admin(stack.state), hook_tenant, receiver.url)

    def sample(root: Path, name: str, run: int, importtime: bool = False, callgrind: bool = False) -> dict[str, Any]:
        if name in {FLOOR, PRELUDE}:
            return _spawn(
                root,
                name,
                code_dir=root / "Floor",
                layers=[],
                handler="" if name == PRELUDE else "app.lambda_handler",
                memory=512,
                event=floor_event,
                env=floor_env,
                importtime=importtime,
                callgrind=callgrind,
            )
        function = TRACED_FUNCTION if name == TRACED else name
        spec = specs[function]
        event: dict[str, Any]
        kind = kinds[function]
        if kind == AUTHORIZES:
            # A cache miss of API Gateway: a token of an onboarded tenant's user.
            event = {
                "type": "TOKEN",
                "authorizationToken": f"Bearer {authorizer_token}",
                "methodArn": "arn:aws:execute-api:us-east-1:123456789012:local/v1/GET/tickets",
            }
        elif kind == STREAM:  # a batch of ticket-summary changes, as the stream delivers it
            tenants = [f"{tenant_prefix}-agg-{run}"]
            event = {"Records": synthesize(AGGREGATOR_RECORDS, tenants, seed=1000 + run, stream_arn=stream_arn)[0]}
        elif kind == QUEUE:  # one new event for the tenant's webhook, as the fan-out queued it
            event = {"Records": [sqs_record(hook_tenant, hook, run)]}
        elif kind == LOGS:  # one usage line of one tenant, as a log subscription delivers it
            stream = f"2026/11/25/[$LATEST]{run:032x}"
            event = usage_delivery(AGGREGATOR_RECORDS, [f"{tenant_prefix}-use-{run}"], stream, int(time.time() * 1000))
        else:
            event = routes[function].event(run)
        return _spawn(
            root,
            name,
            code_dir=root / function,
            layers=[root / "SharedLayer" / "python"],
            handler=spec.handler,
            memory=spec.memory_mb,
            event=event,
            env={**environments[function], **(TRACED_ENV if name == TRACED else {})},
            importtime=importtime,
            callgrind=callgrind,
        )

    names = [*specs, *([TRACED] if TRACED_FUNCTION in specs else []), FLOOR]
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    imports: dict[str, list[dict[str, Any]]] = {}
    requests = dict.fromkeys(names, 0)  # the n-th request of each function (its own data)
    counting = instructions and VALGRIND is not None
    steps: list[dict[str, Any]] = []
    executed: dict[str, int] = {}  # instructions under callgrind, prelude included

    def next_request(name: str) -> int:
        requests[name] += 1
        return requests[name] - 1

    with resources, tempfile.TemporaryDirectory(prefix="bench-deploy-") as directory:
        root = deployment_copy(specs, Path(directory) / "deployed")
        try:
            for run in range(runs):
                rotation = run % len(names)
                for name in names[rotation:] + names[:rotation]:
                    samples[name].append(sample(root, name, next_request(name)))
                progress(f"  cold-start run {run + 1}/{runs} ({len(names)} processes)")
            for name in names:
                imports[name] = sample(root, name, next_request(name), importtime=True)["imports"]
            if counting:
                progress(f"  cold starts under callgrind ({len(names) + 1} processes, {CALLGRIND_JOBS} at a time)")
                jobs = [(PRELUDE, 0), *((name, next_request(name)) for name in names)]
                with ThreadPoolExecutor(max_workers=CALLGRIND_JOBS) as pool:
                    counted = pool.map(lambda job: sample(root, job[0], job[1], callgrind=True), jobs)
                    for (name, _), row in zip(jobs, counted, strict=True):
                        executed[name] = row["instructions"]
                if breakdown and BREAKDOWN_FUNCTION in specs:
                    progress(f"  {BREAKDOWN_FUNCTION}'s import, step by step, under callgrind")
                    steps = import_breakdown(root)
        finally:
            writable(root)

    def stats(name: str) -> dict[str, Any]:
        rows = samples[name]
        found: dict[str, Any] = {
            "import_ms": summary([row["import_ms"] for row in rows]),
            "first_request_ms": summary([row["first_request_ms"] for row in rows]),
            "init_plus_first_ms": summary([row["import_ms"] + row["first_request_ms"] for row in rows]),
            "process_ms": summary([row["process_ms"] for row in rows]),
            "interpreter_start_ms": summary([row["interpreter_start_ms"] for row in rows]),
            "heaviest_imports": imports[name],
        }
        if counting:
            # Import + first request: the whole process minus the prelude every sample runs.
            found["instructions_m"] = round((executed[name] - executed[PRELUDE]) / 1e6, 1)
        return found

    floor = stats(FLOOR)
    rows = {}
    for name in names[:-1]:
        found = stats(name)
        found["over_floor_ms"] = round(found["init_plus_first_ms"]["median"] / floor["init_plus_first_ms"]["median"], 2)
        found["over_floor"] = (
            round(found["instructions_m"] / floor["instructions_m"], 2) if counting else found["over_floor_ms"]
        )
        rows[name] = found
    functions = {name: row for name, row in rows.items() if name in specs}
    return {
        "runs": runs,
        "ratio_basis": "instructions" if counting else "ms",
        "prelude_instructions_m": round(executed[PRELUDE] / 1e6, 1) if counting else None,
        "import_breakdown": {"function": BREAKDOWN_FUNCTION, "steps": steps} if steps else None,
        "floor_name": FLOOR,
        "floor": floor,
        "functions": functions,
        "traced": {name: row for name, row in rows.items() if name not in specs},
        "layer": layer_size(),
    }
