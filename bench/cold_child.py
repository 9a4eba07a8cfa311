"""Run in a fresh interpreter by :mod:`bench.cold` (``python -S -P``: the
standard library plus ``PYTHONPATH`` = the built layer and one function's
build directory, as in Lambda). Imports the handler, serves one request,
writes the timings as JSON to the file named by ``argv[1]``; with no handler,
only this prelude runs (what every sample pays before the handler's import). Standard library
only: nothing here may warm an import the handler makes."""

import time

STARTED = time.perf_counter()
STARTED_WALL = time.time()

import importlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import uuid  # noqa: E402


class Context:
    def __init__(self, name: str, memory: int, remaining_ms: int) -> None:
        self.function_name = name
        self.memory_limit_in_mb = memory
        self.remaining_ms = remaining_ms
        self.aws_request_id = str(uuid.uuid4())
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        job = json.load(handle)
    if not job["handler"]:  # the prelude alone (bench.cold subtracts its instructions from every sample)
        with open(job["out"], "w", encoding="utf-8") as handle:
            json.dump({"started_wall": STARTED_WALL}, handle)
        return
    module_name, _, function_name = job["handler"].rpartition(".")
    before_import = time.perf_counter()
    module = importlib.import_module(module_name)
    handler = getattr(module, function_name)
    imported = time.perf_counter()
    response = handler(job["event"], Context(job["function"], job["memory"], job["remaining_ms"]))
    served = time.perf_counter()
    status = response.get("statusCode") if isinstance(response, dict) else None
    failures = response.get("batchItemFailures") if isinstance(response, dict) else None
    with open(job["out"], "w", encoding="utf-8") as handle:
        json.dump(
            {
                "started_wall": STARTED_WALL,
                "import_ms": (imported - before_import) * 1000,
                "first_request_ms": (served - imported) * 1000,
                "prelude_ms": (before_import - STARTED) * 1000,
                "status": status,
                "batch_item_failures": failures,
            },
            handle,
        )


main()
