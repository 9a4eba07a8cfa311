"""Run Lambda handlers as the Lambda runtime would: a Lambda context object,
the function's environment for the time of an invocation (for handlers run
in-process by the tests and benchmarks), and the runtime of an execution
environment of the local stack (:func:`main`, the child's side of
:mod:`local_stack.lambda_.environments`).

The functions themselves, and how the tests load a handler, are
:mod:`stack_model.functions`. This module imports only the standard library:
it is what an environment process runs before the function's own code, as
Lambda's runtime interface client is, and it must not put anything of the
local stack into the function's modules.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import IO, Any


@dataclass
class LambdaContext:
    """The attributes Powertools and our code read from the Lambda context."""

    function_name: str
    memory_limit_in_mb: int = 512
    timeout_s: float = 10
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    # The invocation's tenant, for a function in tenant isolation mode (None otherwise):
    # https://docs.aws.amazon.com/lambda/latest/dg/tenant-isolation-context.html
    tenant_id: str | None = None

    def __post_init__(self) -> None:
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"
        self._deadline_ms = _now_ms() + int(self.timeout_s * 1000)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - _now_ms())


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@contextmanager
def environment(variables: Mapping[str, str]) -> Iterator[None]:
    """Set a function's environment for the duration of an invocation."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# ---------------------------------------------------------------- an execution environment's runtime
def error_payload(exc: BaseException, error_type: str | None = None) -> dict[str, Any]:
    """An error as Lambda's Python runtime reports it."""
    return {
        "errorType": error_type or type(exc).__name__,
        "errorMessage": str(exc),
        "stackTrace": traceback.format_tb(exc.__traceback__),
    }


def _marshal(value: Any) -> str:
    # Lambda's Python runtime serializes a result with json, Decimal as a number.
    def default(item: Any) -> Any:
        if isinstance(item, Decimal):
            return float(item)
        raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")

    return json.dumps(value, default=default)


def _send(channel: IO[bytes], message: Mapping[str, Any]) -> None:
    channel.write(json.dumps(message).encode() + b"\n")
    channel.flush()


def _report(error: Mapping[str, Any], request_id: str | None = None) -> None:
    """Log an invocation's error as Lambda's Python runtime does: with the JSON log
    format (``LoggingConfig``, as the template sets), one JSON record on one line
    (a TOKEN authorizer's refusal, ``Exception("Unauthorized")``, included); with
    the text format, ``[ERROR] <type>: <message>`` and the traceback.
    https://docs.aws.amazon.com/lambda/latest/dg/python-logging.html (awslambdaric's
    ``log_error``)."""
    if os.environ.get("AWS_LAMBDA_LOG_FORMAT", "").upper() == "JSON":
        moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        record = {"timestamp": moment, "log_level": "ERROR", **error, "requestId": request_id or ""}
        sys.stderr.write(json.dumps(record) + "\n")
    else:
        trace = "".join(error.get("stackTrace", []))
        sys.stderr.write(f"[ERROR] {error['errorType']}: {error['errorMessage']}\n{trace}")
    sys.stderr.flush()


def _load(handler: str) -> Callable[[Any, Any], Any]:
    module_name, _, function_name = handler.rpartition(".")
    module = importlib.import_module(module_name.replace("/", "."))
    function: Callable[[Any, Any], Any] = getattr(module, function_name)
    return function


def serve(requests: IO[bytes], responses: IO[bytes]) -> int:
    """Import the handler (the environment's init), then answer one invocation
    per request line until the stack closes ``requests``.

    Requests are ``{"request_id": ..., "event": ...}`` (and ``"tenant_id"``, the
    context's, for a function in tenant isolation mode); the first line written
    is ``{"init": {}}`` or ``{"init": {"error": ...}}`` (then the environment
    ends, as Lambda discards an environment whose init failed), then one
    ``{"result": ...}`` or ``{"error": ...}`` per request."""
    name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
    try:
        handler = _load(os.environ["_HANDLER"])
    except Exception as exc:
        error = error_payload(exc, "Runtime.ImportModuleError" if isinstance(exc, ImportError) else None)
        _report(error)
        _send(responses, {"init": {"error": error}})
        return 1
    _send(responses, {"init": {}})
    for line in requests:
        request = json.loads(line)
        context = LambdaContext(
            function_name=name,
            memory_limit_in_mb=int(os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"]),
            timeout_s=float(request["timeout_s"]),
            aws_request_id=str(request["request_id"]),
            log_group_name=os.environ["AWS_LAMBDA_LOG_GROUP_NAME"],
            log_stream_name=os.environ["AWS_LAMBDA_LOG_STREAM_NAME"],
            tenant_id=request.get("tenant_id"),
        )
        try:
            result = handler(request["event"], context)
        except Exception as exc:
            error = error_payload(exc)
            _report(error, str(request["request_id"]))
            _send(responses, {"error": error})
            continue
        try:
            body = _marshal(result)
        except (TypeError, ValueError) as exc:
            error = error_payload(exc, "Runtime.MarshalError")
            _report(error)
            _send(responses, {"error": error})
            continue
        responses.write(b'{"result": ' + body.encode() + b"}\n")
        responses.flush()
    return 0


def _end_with(stack_pid: int) -> None:
    # An environment busy when the stack was killed (no stop, no closed pipe to
    # read) would otherwise run on, orphaned, for as long as its handler does.
    while os.getppid() == stack_pid:
        time.sleep(1.0)
    os._exit(1)


def main(argv: list[str]) -> int:
    """``python -P runtime.py <request fd> <response fd> <stack pid>``,
    run by the local stack in a fresh interpreter with the function's
    environment."""
    request_fd, response_fd, stack_pid = int(argv[0]), int(argv[1]), int(argv[2])
    threading.Thread(target=_end_with, args=(stack_pid,), name="end-with-the-stack", daemon=True).start()
    with os.fdopen(request_fd, "rb") as requests, os.fdopen(response_fd, "wb") as responses:
        try:
            return serve(requests, responses)
        except BrokenPipeError:
            # The stack went away mid-answer: nobody is left to answer.
            return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Lambda ends an environment by shutting its sandbox down, not by running the
    # interpreter's finalization (half a second of a stop with boto3 loaded).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
