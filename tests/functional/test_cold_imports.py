"""What each built function imports on its cold start, before its first request.

Each handler of the ``sam build`` output is imported in a fresh interpreter
(``python -S -P``: the standard library, the function, the layer and the
runtime's boto3, as Lambda has them; tracing off, as the tests and the local
stack run), and the modules it loaded are compared with what it must not load:
what makes a cold start slow and that function never calls (bench/results.md,
"Cold start as shipped", measures the rest). One subprocess per function.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from stack_model.functions import FunctionSpec, function_specs
from stack_model.template import PROJECT_ROOT
from tests.layers import modules_of

BUILD_DIR = PROJECT_ROOT / ".aws-sam" / "build"
LAYER_DIR = BUILD_DIR / "SharedLayer" / "python"
RUNTIME_DIR = PROJECT_ROOT / ".aws-sam" / "lambda-runtime" / "python"
AUTHORIZER = "AuthorizerFunction"
# The stream functions, and the metering function (fed by log subscriptions): no API machinery.
STREAM_FUNCTIONS = frozenset(
    {"AggregateCountsFunction", "AuditTrailFunction", "MeteringFunction", "DeliverWebhookFunction"}
)

# Never on any function's import: the authorizer's signature check (cryptography,
# loaded by its first token), PyJWT (nothing ships it any more), the X-Ray SDK
# with tracing off (support_tickets.core.tracing), Powertools' idempotency (the
# create route loads it when a request has a key), pydantic (no function ships
# it; support_tickets.core.models says why).
NEVER = (
    "cryptography",
    "jwt",
    "aws_xray_sdk.core",
    "aws_lambda_powertools.utilities.idempotency",
    "pydantic",
    "pydantic_core",
)
# The API's machinery, which neither the authorizer nor a stream function runs:
# Powertools' REST resolver, our API and domain layers (tests/layers.py), the API's models.
API_ONLY = (
    "aws_lambda_powertools.event_handler",
    *modules_of("api", "domain"),
    "support_tickets.core.models",
)
# Repositories an API function loads only when its operation runs (each route uses one).
ON_FIRST_USE = (
    "support_tickets.data.aggregate_repository",
    "support_tickets.data.audit_repository",
    "support_tickets.data.comment_repository",
)

PROBE = "import importlib, json, sys; importlib.import_module(sys.argv[1]); print(json.dumps(sorted(sys.modules)))"


def forbidden(name: str) -> tuple[str, ...]:
    if name == AUTHORIZER:
        # asyncio: Powertools' batch utility and its AppSync resolvers import it; the authorizer uses neither.
        return (*NEVER[1:], *API_ONLY, "asyncio", *ON_FIRST_USE)  # the first: its own, on its first token
    if name in STREAM_FUNCTIONS:
        return (*NEVER, *API_ONLY, *ON_FIRST_USE)
    return (*NEVER, *ON_FIRST_USE)


def loaded_modules(name: str, spec: FunctionSpec) -> set[str]:
    code = BUILD_DIR / name
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(str(path) for path in (code, LAYER_DIR, RUNTIME_DIR)),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_REGION": "us-east-1",
    }
    module = spec.handler.rpartition(".")[0]
    completed = subprocess.run(  # noqa: S603 - our interpreter, the standard library
        [sys.executable, "-S", "-P", "-c", PROBE, module],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return set(json.loads(completed.stdout))


def loads(modules: set[str], package: str) -> bool:
    return any(module == package or module.startswith(package + ".") for module in modules)


@pytest.mark.parametrize("name", sorted(function_specs()))
def test_a_cold_start_imports_nothing_the_function_does_not_call(name: str) -> None:
    spec = function_specs()[name]
    if not (BUILD_DIR / name).is_dir() or not LAYER_DIR.is_dir() or not RUNTIME_DIR.is_dir():
        pytest.fail("no `sam build` output: run `make build` (make test does it first)")
    # Given the function as sam build ships it, when its handler is imported in a fresh interpreter,
    modules = loaded_modules(name, spec)
    # then it loaded its handler, and none of what it must not load.
    assert spec.handler.rpartition(".")[0] in modules
    unexpected = [package for package in forbidden(name) if loads(modules, package)]
    assert not unexpected, f"{name} imports {unexpected} on its cold start"
