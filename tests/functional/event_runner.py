"""Invoke sample events against the `sam build` output, in a clean interpreter.

Run by tests/functional/test_events.py as ``python -I -S event_runner.py`` with a
JSON job on stdin. Nothing of the source tree is importable: ``sys.path`` is the
standard library, then, per function, its built code directory, the built layer
(``.aws-sam/build/SharedLayer/python``) and what the python3.13 runtime provides
(``.aws-sam/lambda-runtime/python``: boto3 and its dependencies, nothing else),
in Lambda's order. Every handler module is imported with only those (a
dependency missing from the layer or a wrong handler path fails here); only then
are the venv's site-packages appended, after the build directories, for moto,
which provides the table each event runs against, and the project root (last),
for ``local_stack.cognito.identity_pool``, which serves the template's identity pool in
moto for the tests' signing key.

The job: ``{"build_root", "layer_dir", "runtime_dir", "site_packages": [...], "table":
CreateTable arguments, "project_root", "identity_pool": {"identity_pool_id",
"user_pool_id", "client_id", "jwks"}, "output": path, "cases": [{"name", "function",
"function_dir", "handler", "environment", "event", "seed": [items]}]}``. The
results (each handler's return value, or the error) are written to ``output``
as JSON, since the handlers log to stdout.
"""

import functools
import importlib
import json
import os
import sys
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


class LambdaContext:
    """What the Lambda runtime passes as ``context`` (the parts handlers read)."""

    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "2026/11/21/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        # API Gateway's 29 s, the longest an API function may run (tests/functional/api_harness.py's
        # IN_PROCESS_TIMEOUT_S: nothing cuts an invocation here, and a first client built on a loaded
        # machine must not meet the invocation's deadline).
        return 29_000


def import_handler(function_dir: str, handler: str) -> Callable[..., Any]:
    """Import ``handler`` ("app.lambda_handler") from the function's build directory
    the way the runtime does: that directory first on ``sys.path``."""
    module_name, _, attribute = handler.rpartition(".")
    sys.path.insert(0, function_dir)
    try:
        sys.modules.pop(module_name, None)
        module = importlib.import_module(module_name)
        function: Callable[..., Any] = getattr(module, attribute)
    finally:
        sys.path.remove(function_dir)
        sys.modules.pop(module_name, None)  # the next function has its own "app"
    return function


def modules_outside(allowed: list[str]) -> list[str]:
    """Imported modules whose file is neither in the stdlib nor under ``allowed``."""
    stdlib = [os.path.dirname(os.__file__)]
    outside = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and os.path.abspath(path) == os.path.abspath(__file__):
            continue  # this runner (as __main__, and __mp_main__ once multiprocessing is imported)
        if path and not any(os.path.abspath(path).startswith(root) for root in stdlib + allowed):
            outside.append(f"{name}: {path}")
    return outside


def clear_layer_caches() -> None:
    """Forget the warm-container caches (settings, tenant sessions, clients)
    between events, as a fresh container would."""
    for name, module in list(sys.modules.items()):
        if name == "support_tickets" or name.startswith("support_tickets."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", None) == name:
                    value.cache_clear()


def authorize(event: dict[str, Any]) -> None:
    """What the API's authorizer adds to a REST event: the tenant credentials of
    its token, exchanged now with the identity pool of this mock (the event
    file's placeholder credentials stand for them)."""
    context = (event.get("requestContext") or {}).get("authorizer") or {}
    if "access_key_id" not in context:
        return
    from support_tickets.core.identity import IdToken, bearer_token, token_payload
    from support_tickets.data.session import token_exchange

    authorization = next(value for name, value in event["headers"].items() if name.lower() == "authorization")
    token, payload = bearer_token(authorization), token_payload(authorization)
    assert token is not None, "a REST event without a token"
    assert payload is not None, "a REST event without a token"
    credentials = token_exchange().credentials(IdToken(token, str(payload["sub"]), int(payload["exp"])))
    context.update(credentials.as_context())


def main() -> None:
    job = json.load(sys.stdin)
    build_root = os.path.abspath(job["build_root"])
    sys.path[:0] = [job["layer_dir"], job["runtime_dir"]]
    os.environ.update(FAKE_AWS)

    handlers: dict[str, Callable[..., Any]] = {}
    import_errors: dict[str, str] = {}
    for case in job["cases"]:
        os.environ.update(case["environment"])
        try:
            handlers[case["name"]] = import_handler(case["function_dir"], case["handler"])
        except Exception:
            import_errors[case["name"]] = traceback.format_exc()

    import support_tickets

    report: dict[str, Any] = {
        "support_tickets_file": support_tickets.__file__,
        "outside_build": modules_outside([build_root, os.path.abspath(job["runtime_dir"])]),
        "import_errors": import_errors,
        "results": {},
    }

    # Only now the test harness: moto and its dependencies, after the build.
    sys.path.extend(job["site_packages"])
    sys.path.append(job["project_root"])
    import boto3
    import botocore.loaders
    import botocore.session
    from moto import mock_aws

    # Every case's fresh sessions would read and parse botocore's service models
    # again (half of this run's time): one loader for the run, as a warm
    # container's one session has. The models are read-only data; the layer's
    # caches of sessions and clients are still cleared between cases.
    botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)

    from local_stack.cognito import identity_pool
    from local_stack.emulator import moto_fixes

    moto_fixes.apply()
    pool_of_the_tests = identity_pool.in_process(**job["identity_pool"])
    # The authorizer fetches the user pool's JWKS over HTTPS (urllib, which moto
    # does not intercept): the tests' pool's keys, and no network.
    import support_tickets.auth.jwks

    jwks_url = (
        f"https://cognito-idp.us-east-1.amazonaws.com/{job['identity_pool']['user_pool_id']}/.well-known/jwks.json"
    )

    def fetch_jwks(url: str) -> dict[str, Any]:
        if url != jwks_url:
            raise RuntimeError(f"no network here: {url}")
        jwks: dict[str, Any] = job["identity_pool"]["jwks"]
        return jwks

    support_tickets.auth.jwks.fetch_json = fetch_jwks

    for case in job["cases"]:
        if case["name"] not in handlers:
            continue
        clear_layer_caches()
        # Only this function's variables: an empty WEBHOOK_KEY_ARN another
        # function's environment left (at import) is invalid for every function.
        os.environ.pop("WEBHOOK_KEY_ARN", None)
        os.environ.update(case["environment"])
        with mock_aws():
            client = boto3.client("dynamodb", region_name=FAKE_AWS["AWS_REGION"])
            client.create_table(**job["table"])
            for item in case["seed"]:
                client.put_item(TableName=job["table"]["TableName"], Item=item)
            if "WEBHOOK_KEY_ARN" in case["environment"]:
                # The stack's webhook secrets key (the template's ARN is the deployment's).
                key = boto3.client("kms", region_name=FAKE_AWS["AWS_REGION"]).create_key()["KeyMetadata"]
                os.environ["WEBHOOK_KEY_ARN"] = key["Arn"]
            identity_pool.register(pool_of_the_tests)
            try:
                authorize(case["event"])
                result = handlers[case["name"]](case["event"], LambdaContext(case["function"]))
                report["results"][case["name"]] = {"response": result}
            except Exception:
                report["results"][case["name"]] = {"error": traceback.format_exc()}

    Path(job["output"]).write_text(json.dumps(report, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
