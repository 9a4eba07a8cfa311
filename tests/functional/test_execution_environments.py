"""The local stack's functions run as Lambda runs them: each in execution
environments of its own (a process each, :mod:`local_stack.lambda_.environments`).

With a probe function (``environment_probe/app.py``, on the shared layer) run
under several names: what one function leaves in its modules (``os.environ``,
an attribute of a shared-layer module, ``sys.modules``, the layer's cached
failure-queue client) is invisible to every other function and still there
for its own next invocation; the import path is Lambda's (code, then layer;
nothing of the local stack importable); a function's error comes back as
Lambda reports it and keeps its environment warm; a crashed, killed or
timed-out environment is replaced by a cold one; functions run at once; and
stop leaves no process behind. Nothing here is timed: the timeout case uses a
function whose ``Timeout`` is 1 s and a handler that would sleep ten minutes.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local_stack.lambda_ import runtime as lambda_runtime
from local_stack.lambda_.environments import EnvironmentExited, FunctionError, FunctionTimeout
from local_stack.stack import FunctionRuntime, lambda_environment
from stack_model.functions import FunctionSpec
from stack_model.template import PROJECT_ROOT
from tests.e2e.conftest import environment_processes as environments_of
from tests.e2e.conftest import running_environment

PROBE_DIR = Path(__file__).with_name("environment_probe")
LAYER_DIR = PROJECT_ROOT / "layers" / "shared"
# The stack's endpoint is never called: nothing here reaches AWS or the emulator.
ENDPOINT = "http://127.0.0.1:9"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")


def probe(name: str, timeout_s: int = 30) -> FunctionSpec:
    return FunctionSpec(
        logical_id=name,
        code_uri=PROBE_DIR,
        handler="app.lambda_handler",
        environment={"FAILURE_QUEUE_URL": f"{ENDPOINT}/123456789012/{name}Queue"},
        memory_mb=256,
        timeout_s=timeout_s,
        layers=(LAYER_DIR,),
    )


def key_of(name: str) -> str:
    return f"AKIA{name.upper()[:16]:X<16}"


def runtime_for(*specs: FunctionSpec, max_environments: int = 1) -> FunctionRuntime:
    environments = {
        spec.logical_id: lambda_environment(
            spec,
            ENDPOINT,
            {
                "AWS_ACCESS_KEY_ID": key_of(spec.logical_id),
                "AWS_SECRET_ACCESS_KEY": f"secret-of-{spec.logical_id}",
                "AWS_SESSION_TOKEN": f"token-of-{spec.logical_id}",
            },
            f"test-{spec.logical_id}",
        )
        for spec in specs
    }
    return FunctionRuntime({spec.logical_id: spec for spec in specs}, environments, max_environments=max_environments)


@pytest.fixture
def runtime() -> Iterator[FunctionRuntime]:
    started = runtime_for(probe("Alpha"), probe("Beta"), probe("Gamma"), probe("Short", timeout_s=1))
    try:
        yield started
    finally:
        started.stop()


def call(runtime: FunctionRuntime, name: str, **event: Any) -> dict[str, Any]:
    result: dict[str, Any] = runtime.invoke(runtime.specs[name], event)
    return result


def environment_processes() -> set[int]:
    return environments_of(os.getpid())


def test_what_a_function_leaves_in_its_modules_no_other_function_sees(
    runtime: FunctionRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given: a developer's AWS profile in the stack's own environment
    monkeypatch.setenv("AWS_PROFILE", "developer")
    # When Alpha leaves state behind: a variable, an attribute of a layer module, a
    # module, and the layer's cached failure-queue client, built with its credentials
    left = call(runtime, "Alpha", action="leave")
    beta = call(runtime, "Beta", action="leave")
    gamma = call(runtime, "Gamma")
    alpha_again = call(runtime, "Alpha")
    # Then each function sees only its own, in a process of its own
    assert len({left["pid"], beta["pid"], gamma["pid"]}) == 3
    assert gamma["left_by_env"] is None
    assert gamma["left_in_layer"] is None
    assert gamma["left_modules"] == []
    assert gamma["queue_client_key"] is None
    assert (beta["left_by_env"], beta["left_in_layer"], beta["left_modules"]) == ("Beta", "Beta", ["left_by_Beta"])
    # the cached client of each function signs with its own role's credentials
    assert beta["queue_client_key"] == key_of("Beta")
    assert left["queue_client_key"] == key_of("Alpha")
    # and Alpha's next invocation is warm, with everything it left (and nothing of Beta's)
    assert alpha_again["pid"] == left["pid"]
    assert (alpha_again["cold_start"], left["cold_start"]) == (False, True)
    assert alpha_again["left_by_env"] == "Alpha"
    assert alpha_again["left_in_layer"] == "Alpha"
    assert alpha_again["left_modules"] == ["left_by_Alpha"]
    assert alpha_again["queue_client_key"] == key_of("Alpha")
    # Each runs with its role's credentials, never the stack's AWS settings
    assert [result["access_key"] for result in (left, beta, gamma)] == [key_of(n) for n in ("Alpha", "Beta", "Gamma")]
    assert {result["profile"] for result in (left, beta, gamma)} == {None}


def test_the_import_path_is_lambdas_and_the_context_is_the_functions(runtime: FunctionRuntime) -> None:
    result = call(runtime, "Alpha")
    # /var/task, then /opt/python; then the runtime's own packages (the venv's)
    assert result["sys_path"] == [str(PROBE_DIR), str(LAYER_DIR)]
    assert result["stack_importable"] == []
    assert result["function"] == "Alpha"
    assert result["memory"] == 256
    assert 0 < result["remaining_ms"] <= 30_000
    assert result["request_id"] != call(runtime, "Alpha")["request_id"]


def test_a_functions_error_is_lambdas_and_its_environment_stays_warm(runtime: FunctionRuntime) -> None:
    first = call(runtime, "Alpha")
    with pytest.raises(FunctionError) as raised:
        call(runtime, "Alpha", action="raise", message="Unauthorized")
    # API Gateway reads an authorizer's errorMessage: the gateway compares str(exc)
    assert str(raised.value) == "Unauthorized"
    assert raised.value.error_type == "RuntimeError"
    assert any("lambda_handler" in line for line in raised.value.stack_trace)
    with pytest.raises(FunctionError) as unmarshallable:
        call(runtime, "Alpha", action="unserializable")
    assert unmarshallable.value.error_type == "Runtime.MarshalError"
    after = call(runtime, "Alpha")
    assert (after["pid"], after["cold_start"]) == (first["pid"], False)


def test_a_crashed_environment_is_replaced_by_a_cold_one(runtime: FunctionRuntime) -> None:
    first = call(runtime, "Alpha")
    with pytest.raises(EnvironmentExited) as exited:
        call(runtime, "Alpha", action="exit", code=3)
    assert exited.value.error_type == "Runtime.ExitError"
    assert str(exited.value).endswith("Runtime exited with error: exit status 3")
    second = call(runtime, "Alpha")
    assert second["pid"] != first["pid"]
    assert second["cold_start"] is True
    assert runtime.pids()["Alpha"] == [second["pid"]]


def test_an_environment_killed_between_invocations_is_replaced_without_an_error(runtime: FunctionRuntime) -> None:
    first = call(runtime, "Alpha")
    os.kill(first["pid"], signal.SIGKILL)
    os.waitid(os.P_PID, first["pid"], os.WEXITED | os.WNOWAIT)
    second = call(runtime, "Alpha")
    assert second["pid"] != first["pid"]
    assert second["cold_start"] is True


def test_the_timeout_kills_the_environment_and_answers_as_lambda(runtime: FunctionRuntime) -> None:
    # Given a function whose template Timeout is 1 s, warm
    first = call(runtime, "Short")
    # When an invocation would run for ten minutes
    with pytest.raises(FunctionTimeout) as timed_out:
        call(runtime, "Short", action="sleep", seconds=600)
    # Then it is ended at the timeout, with Lambda's message, and its environment is gone
    assert timed_out.value.error_type == "Sandbox.Timedout"
    assert str(timed_out.value).endswith("Task timed out after 1.00 seconds")
    assert first["pid"] not in environment_processes()
    # and the next invocation gets a new, cold environment
    after = call(runtime, "Short")
    assert (after["pid"] != first["pid"], after["cold_start"]) == (True, True)


def test_functions_run_at_once(runtime: FunctionRuntime, tmp_path: Path) -> None:
    # Alpha waits for a file that only Beta creates: serialized, Alpha would time out
    signal_file = tmp_path / "from-beta"
    results: list[dict[str, Any]] = []
    waiting = threading.Thread(
        target=lambda: results.append(call(runtime, "Alpha", action="wait_for", path=str(signal_file)))
    )
    waiting.start()
    call(runtime, "Beta", action="create", path=str(signal_file))
    waiting.join()
    assert [result["function"] for result in results] == ["Alpha"]


def test_a_function_under_concurrent_load_gets_another_environment(tmp_path: Path) -> None:
    runtime = runtime_for(probe("Alpha"), max_environments=2)
    try:
        signal_file = tmp_path / "from-the-second"
        results: list[dict[str, Any]] = []
        waiting = threading.Thread(
            target=lambda: results.append(call(runtime, "Alpha", action="wait_for", path=str(signal_file)))
        )
        waiting.start()
        second = call(runtime, "Alpha", action="create", path=str(signal_file))
        waiting.join()
        (first,) = results
        assert first["pid"] != second["pid"]
        assert sorted(runtime.pids()["Alpha"]) == sorted([first["pid"], second["pid"]])
    finally:
        runtime.stop()


def test_stop_leaves_no_process_and_starts_none_again(tmp_path: Path) -> None:
    runtime = runtime_for(probe("Alpha"), probe("Beta"), probe("Gamma"))
    started = {call(runtime, name)["pid"] for name in ("Alpha", "Beta")}
    # Gamma busy when the stack stops
    running, failed = tmp_path / "running", list[FunctionError]()

    def wait_forever() -> None:
        try:
            call(runtime, "Gamma", action="wait_for", started=str(running), path=str(tmp_path / "never"))
        except FunctionError as exc:
            failed.append(exc)

    busy = threading.Thread(target=wait_forever)
    busy.start()
    while not running.exists() and busy.is_alive():
        busy.join(0.01)
    assert started < environment_processes()
    runtime.stop()
    busy.join()
    assert environment_processes() == set()
    assert [type(exc) for exc in failed] == [EnvironmentExited]
    with pytest.raises(FunctionError, match="stopping"):
        call(runtime, "Alpha")
    assert environment_processes() == set()


def test_the_environments_runtime_imports_only_the_standard_library() -> None:
    # It runs in the function's process before the function's code: whatever it
    # imported would be in the function's sys.modules, which Lambda's runtime keeps clean.
    tree = ast.parse(Path(lambda_runtime.__file__).read_text(encoding="utf-8"))
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    }
    assert imported - {"__future__"} <= sys.stdlib_module_names


KEEPER = """
import json, sys, threading
from pathlib import Path
from local_stack.lambda_.environments import FunctionEnvironments
from stack_model.functions import FunctionSpec

given = json.loads(sys.argv[1])
spec = FunctionSpec(**{**given["spec"], "code_uri": Path(given["spec"]["code_uri"]), "layers": (Path(given["layer"]),)})
environments = FunctionEnvironments({spec.logical_id: spec}, {spec.logical_id: given["variables"]})
environments.invoke(spec, given["event"])
"""


def test_a_busy_environment_ends_when_the_stack_is_killed(tmp_path: Path) -> None:
    # Given: a stack process (here, the runtime alone) whose function is busy for good
    spec = probe("Alpha", timeout_s=600)
    variables = lambda_environment(spec, ENDPOINT, {"AWS_ACCESS_KEY_ID": key_of("Alpha")}, "test-Alpha")
    running = tmp_path / "running"
    given = {
        "spec": {**{key: value for key, value in vars(spec).items() if key != "layers"}, "code_uri": str(PROBE_DIR)},
        "layer": str(LAYER_DIR),
        "variables": variables,
        "event": {"action": "wait_for", "started": str(running), "path": str(tmp_path / "never")},
    }
    keeper = subprocess.Popen(  # noqa: S603 - our interpreter, the code above
        [sys.executable, "-c", KEEPER, json.dumps(given)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(LAYER_DIR), str(PROJECT_ROOT)])},
    )
    try:
        while not running.exists():
            assert keeper.poll() is None, "the keeper ended before its function ran"
            time.sleep(0.05)
        (environment,) = environments_of(keeper.pid)
    finally:
        # When the stack is killed, without a chance to stop anything
        keeper.kill()
        keeper.wait()
    # Then its function's process ends too (its runtime watches its parent)
    for _ in range(600):
        if not running_environment(environment):
            break
        time.sleep(0.1)
    assert not running_environment(environment)
