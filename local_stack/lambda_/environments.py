"""Execution environments: each function of the local stack runs in processes
of its own, as each Lambda function runs in containers of its own.

An environment is a fresh interpreter (``python -P``, the venv's, which
stands for the runtime's site-packages) started with the function's
environment: its template variables with ``Globals`` merged, what Lambda
adds (region, function name, memory size, log group, its execution role's
credentials in the emulator) and ``PYTHONPATH`` as Lambda builds it, the
function's code directory, then its layers' content (``/opt/python``). The
stack's own variables come along (the e2e stack's short
``TENANT_CONFIG_TTL_SECONDS`` must reach the functions), except ``AWS_*``: a
developer's profile or keys must never stand in for a role. It runs
:func:`local_stack.lambda_.runtime.main`, which imports the handler (the cold
start) and then answers one invocation at a time.

**Protocol**: JSON lines over two pipes of their own (the function's stderr
is the stack's; its stdout is piped and teed, line by line, to the stack's
output and to a log sink, as a Lambda function's lines reach its log group,
where subscription filters see them: :mod:`local_stack.event_sources.log_subscriptions`).
Each environment writes a log stream of its own, named as Lambda names them
(``YYYY/MM/DD/[$LATEST]<32 hex digits>``). The environment writes ``{"init":
{}}`` once its handler is imported (or ``{"init": {"error": ...}}``, and
ends), then answers each ``{"request_id", "timeout_s", "event"}`` with
``{"result": ...}`` or ``{"error": {"errorType", "errorMessage",
"stackTrace"}}``, Lambda's error shape.

**Timeouts**: an invocation that outlives the function's ``Timeout`` has its
environment killed (as Lambda does: the next invocation gets a fresh one, cold)
and raises :class:`FunctionTimeout`, ``Task timed out after N.00 seconds``.
The import gets Lambda's 10 s init limit plus the function's timeout (Lambda
runs a slow init again within the first invocation's timeout).

**Crashes**: an environment that ends during an invocation (``os._exit``, a
signal, out of memory) raises :class:`FunctionError` ``Runtime.ExitError`` for
that invocation; one found dead between invocations is replaced without one.
Either way the next invocation starts a new environment, as Lambda does.

**Concurrency**: an environment serves one invocation at a time, like a Lambda
container; a function gets up to ``max_environments`` of them, each started
when an invocation finds every existing one busy (never at the stack's
start: an idle ``make dev`` runs no function), and invocations beyond that
wait for one to be free (like reserved concurrency); ``limits`` gives some
functions another number (the stack's SQS-triggered functions: their event
source's concurrency). Different functions never wait for each other.

**Tenant isolation** (a function whose ``TenancyConfig`` is ``PER_TENANT``,
:attr:`FunctionSpec.tenant_isolation`): as in Lambda, no environment ever
serves two tenants. Each invocation names its tenant (the ``X-Amz-Tenant-Id``
of Lambda's Invoke); the function's environments are then per tenant, each
tenant with up to the function's number of them, and the context's
``tenant_id`` is the invocation's. An invocation without a tenant, or one
naming a tenant for a function without the mode, fails as Lambda refuses it
(``InvalidParameterValueException``,
https://docs.aws.amazon.com/lambda/latest/dg/tenant-isolation-troubleshooting.html).
Lambda reclaims idle environments; here a function keeps at most
``tenant_environments`` of them across its tenants, and a new tenant's first
invocation past that ends the least recently used idle one (a process each:
a laptop's memory is the bound, not Lambda's 2,500 per 1,000 concurrency).

**Stop**: :meth:`FunctionEnvironments.stop` closes every environment's request
pipe (the runtime then ends on its own), kills what is still running after a
grace period, and reaps every process. Environments are started in a session
of their own, so the terminal's Ctrl-C reaches the stack, which stops them in
order, and not the functions mid-invocation. Were the stack itself killed, an
idle environment ends when its request pipe closes, a busy one within a second
(its runtime watches that the stack is still its parent).
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, BinaryIO

from local_stack.lambda_ import runtime as lambda_runtime
from stack_model.functions import FunctionSpec

log = logging.getLogger("local_stack.environments")

# Lambda's limit on a function's init phase (on-demand).
INIT_TIMEOUT_S = 10.0
# Environments a tenant-isolated function keeps across its tenants before the
# least recently used idle one ends (each is a process of this machine).
DEFAULT_TENANT_ENVIRONMENTS = 8
# How long a stopping environment gets to end on its own before it is killed.
STOP_GRACE_S = 2.0
_CHUNK = 1 << 16
# Where an environment's log lines go besides the stack's output:
# (function logical id, log group, log stream, line without its newline).
LogSink = Callable[[str, str, str, str], None]
_OUTPUT_LOCK = threading.Lock()


def log_stream_name(function_name: str = "") -> str:
    """A new execution environment's log stream, named as Lambda names them: in a
    log group other than the function's default one, after the function too
    (``YYYY/MM/DD/<function name>[<version>]<environment id>``, so that functions
    can share a log group; docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-loggroups.html)."""
    return f"{datetime.now(UTC):%Y/%m/%d}/{function_name}[$LATEST]{uuid.uuid4().hex}"


class FunctionError(Exception):
    """A failed invocation, as Lambda reports it: ``str()`` is the
    ``errorMessage`` (what API Gateway reads of an authorizer's error)."""

    def __init__(self, error_type: str, message: str, stack_trace: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.stack_trace = list(stack_trace)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> FunctionError:
        return cls(
            str(payload.get("errorType", "Unhandled")),
            str(payload.get("errorMessage", "")),
            payload.get("stackTrace") or (),
        )


class FunctionTimeout(FunctionError):
    """The invocation outlived the function's ``Timeout``."""


class EnvironmentExited(FunctionError):
    """The environment's process ended while it owed an answer."""


class InvalidTenant(FunctionError):
    """Lambda refused the invocation: no tenant for a function in tenant isolation
    mode, or a tenant for one without it."""


class _Deadline(Exception):
    pass


class _Ended(Exception):
    pass


def process_environment(spec: FunctionSpec, variables: Mapping[str, str]) -> dict[str, str]:
    """The environment of the function's process: the stack's own variables
    without ``AWS_*`` and Python's path settings, then the function's
    (``variables``: template, Lambda's, its role's credentials), then what
    Lambda's runtime sets for the handler and its import path."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "_X_AMZN", "LAMBDA_")) and name not in {"PYTHONPATH", "PYTHONHOME", "_HANDLER"}
    }
    return {
        **kept,
        **variables,
        "_HANDLER": spec.handler,
        "LAMBDA_TASK_ROOT": str(spec.code_uri),
        "PYTHONPATH": os.pathsep.join(str(path) for path in (spec.code_uri, *spec.layers)),
        # Lambda's runtime writes each log line as it comes; a killed environment loses none.
        "PYTHONUNBUFFERED": "1",
    }


class ExecutionEnvironment:
    """One process of one function: started cold, then warm until it ends."""

    def __init__(
        self,
        spec: FunctionSpec,
        variables: Mapping[str, str],
        log_sink: LogSink | None = None,
        output: BinaryIO | None = None,
        tenant_id: str | None = None,
    ) -> None:
        self.spec = spec
        # The one tenant it serves (tenant isolation mode), else None.
        self.tenant_id = tenant_id
        self.released_at = time.monotonic()
        default_group = f"/aws/lambda/{spec.logical_id}"
        self.log_group = variables.get("AWS_LAMBDA_LOG_GROUP_NAME", default_group)
        self.log_stream = log_stream_name(spec.logical_id if self.log_group != default_group else "")
        self._log_sink = log_sink
        self._output = output if output is not None else sys.stdout.buffer
        request_read, self._request_fd = os.pipe()
        self._response_fd, response_write = os.pipe()
        command = [sys.executable, "-P", lambda_runtime.__file__, str(request_read), str(response_write)]
        environment = process_environment(spec, {**variables, "AWS_LAMBDA_LOG_STREAM_NAME": self.log_stream})
        try:
            self.process = subprocess.Popen(  # noqa: S603 - our interpreter, our runtime
                [*command, str(os.getpid())],
                cwd=spec.code_uri,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                bufsize=0,  # read by its file descriptor (settle_logs: nothing buffered out of sight)
                pass_fds=(request_read, response_write),
                start_new_session=True,
            )
        except BaseException:
            os.close(self._request_fd)
            os.close(self._response_fd)
            raise
        finally:
            os.close(request_read)
            os.close(response_write)
        self._buffer = b""
        self._initialized = False
        self._logs_read = threading.Condition()
        self._reading_logs = False
        self._logs_ended = False
        self._log_reader = threading.Thread(
            target=self._read_logs, name=f"logs-{spec.logical_id}-{self.process.pid}", daemon=True
        )
        self._log_reader.start()

    def _read_logs(self) -> None:
        """Tee the function's stdout: each line to the stack's output, then to the sink."""
        stdout = self.process.stdout
        assert stdout is not None
        descriptor = stdout.fileno()
        rest = b""
        try:
            while True:
                select.select([descriptor], [], [])
                with self._logs_read:
                    self._reading_logs = True
                try:
                    chunk = os.read(descriptor, _CHUNK)
                except OSError:
                    chunk = b""
                if not chunk:
                    if rest:
                        self._hand_on(rest + b"\n")
                    return
                *lines, rest = (rest + chunk).split(b"\n")
                for line in lines:
                    self._hand_on(line + b"\n")
                with self._logs_read:
                    self._reading_logs = False
                    self._logs_read.notify_all()
        finally:
            stdout.close()
            with self._logs_read:
                self._reading_logs = False
                self._logs_ended = True
                self._logs_read.notify_all()

    def _hand_on(self, raw: bytes) -> None:
        with _OUTPUT_LOCK:
            try:
                self._output.write(raw)
                self._output.flush()
            except (OSError, ValueError):  # the stack's output went away: the sink still gets its lines
                pass
        if self._log_sink is not None:
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            try:
                self._log_sink(self.spec.logical_id, self.log_group, self.log_stream, text)
            except Exception:  # a sink's bug must not stop the tee
                log.exception("%s: the log sink failed", self.spec.logical_id)

    def settle_logs(self, timeout: float) -> bool:
        """True once every whole line the function wrote so far was handed on
        (its stdout pipe is empty and no read is being handed on), or its output ended."""
        deadline = time.monotonic() + timeout
        stdout = self.process.stdout
        while True:
            with self._logs_read:
                if self._logs_ended:
                    return True
                if not self._reading_logs:
                    try:
                        pending = stdout is not None and bool(select.select([stdout.fileno()], [], [], 0)[0])
                    except (ValueError, OSError):  # closed meanwhile: its reader has ended
                        pending = False
                    if not pending:
                        return True
                if time.monotonic() >= deadline:
                    return False
                self._logs_read.wait(0.01)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def invoke(self, event: Any) -> Any:
        """The handler's result; :class:`FunctionError` if it raised, or the
        environment timed out (then it is killed) or ended."""
        request_id = str(uuid.uuid4())
        timeout = float(self.spec.timeout_s)
        if not self._initialized:
            self._init(time.monotonic() + INIT_TIMEOUT_S + timeout)
        request = {"request_id": request_id, "timeout_s": timeout, "event": event}
        if self.tenant_id is not None:
            request["tenant_id"] = self.tenant_id
        line = json.dumps(request).encode() + b"\n"
        deadline = time.monotonic() + timeout
        try:
            self._write(line)
            answer = self._read(deadline)
        except _Deadline:
            self.kill()
            log.warning("%s: %s task timed out after %.2f seconds", self.spec.logical_id, request_id, timeout)
            raise FunctionTimeout(
                "Sandbox.Timedout", f"{request_id} Task timed out after {timeout:.2f} seconds"
            ) from None
        except _Ended:
            raise self._exited(request_id) from None
        if "error" in answer:
            raise FunctionError.from_payload(answer["error"])
        return answer.get("result")

    def _init(self, deadline: float) -> None:
        try:
            answer = self._read(deadline)
        except _Deadline:
            self.kill()
            raise FunctionTimeout(
                "Sandbox.Timedout", f"the init of {self.spec.logical_id} did not end in time"
            ) from None
        except _Ended:
            raise self._exited("init") from None
        init = answer.get("init")
        if not isinstance(init, dict) or "error" in init:
            self.kill()
            raise FunctionError.from_payload((init or {}).get("error") or {"errorType": "Runtime.Unknown"})
        self._initialized = True

    def _exited(self, request_id: str) -> EnvironmentExited:
        self.kill()
        code = self.process.returncode
        status = f"signal: {-code}" if code is not None and code < 0 else f"exit status {code}"
        log.warning("%s: environment %d exited (%s) during %s", self.spec.logical_id, self.pid, status, request_id)
        return EnvironmentExited(
            "Runtime.ExitError", f"RequestId: {request_id} Error: Runtime exited with error: {status}"
        )

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._request_fd, view)
                view = view[written:]
        except OSError:  # BrokenPipeError: it ended
            raise _Ended from None

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline
            ready, _, _ = select.select([self._response_fd], [], [], remaining)
            if not ready:
                continue
            try:
                chunk = os.read(self._response_fd, _CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                raise _Ended
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """Ask the runtime to end (its request pipe closes); :meth:`reap` waits."""
        if self._request_fd >= 0:
            os.close(self._request_fd)
            self._request_fd = -1

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.reap(timeout=None)

    def reap(self, timeout: float | None) -> None:
        """Wait for the process (killing it after ``timeout``), close the pipes."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.close()
        if self._response_fd >= 0:
            os.close(self._response_fd)
            self._response_fd = -1


class _Pool:
    """The environments of one function (of one of its tenants, in tenant isolation mode)."""

    def __init__(self, spec: FunctionSpec, variables: Mapping[str, str], limit: int, tenant_id: str | None) -> None:
        self.spec = spec
        self.variables = dict(variables)
        self.limit = limit
        self.tenant_id = tenant_id
        self.idle: list[ExecutionEnvironment] = []
        self.all: set[ExecutionEnvironment] = set()
        self.starting = 0
        self.changed = threading.Condition()


class FunctionEnvironments:
    """Every function's execution environments, started on first use."""

    def __init__(
        self,
        specs: Mapping[str, FunctionSpec],
        environments: Mapping[str, Mapping[str, str]],
        *,
        max_environments: int = 1,
        limits: Mapping[str, int] | None = None,
        log_sink: LogSink | None = None,
        tenant_environments: int = DEFAULT_TENANT_ENVIRONMENTS,
    ) -> None:
        limits = limits or {}
        if min([max_environments, tenant_environments, *limits.values()]) < 1:
            raise ValueError("a function needs at least one environment")
        self._log_sink = log_sink
        self._tenant_environments = tenant_environments
        self._specs = dict(specs)
        self._variables = {logical_id: dict(environments[logical_id]) for logical_id in specs}
        self._limits = {logical_id: limits.get(logical_id, max_environments) for logical_id in specs}
        # By function and tenant (None: a function without tenant isolation, one pool).
        self._pools: dict[tuple[str, str | None], _Pool] = {}
        self._pools_lock = threading.Lock()
        self._stopped = False

    def invoke(self, spec: FunctionSpec, event: Any, tenant_id: str | None = None) -> Any:
        """The handler's result; ``tenant_id`` is the invocation's tenant (Lambda's
        ``X-Amz-Tenant-Id``), which a function in tenant isolation mode needs and
        any other refuses, as Lambda does."""
        if spec.tenant_isolation and not tenant_id:
            raise InvalidTenant(
                "InvalidParameterValueException", f"{spec.logical_id} is in tenant isolation mode: name a tenant"
            )
        if tenant_id is not None and not spec.tenant_isolation:
            raise InvalidTenant(
                "InvalidParameterValueException", f"{spec.logical_id} is not in tenant isolation mode: name no tenant"
            )
        pool = self._pool(spec.logical_id, tenant_id)
        environment = self._acquire(pool)
        try:
            return environment.invoke(event)
        finally:
            self._release(pool, environment)

    def _pool(self, logical_id: str, tenant_id: str | None) -> _Pool:
        with self._pools_lock:
            pool = self._pools.get((logical_id, tenant_id))
            if pool is None:
                pool = self._pools[(logical_id, tenant_id)] = _Pool(
                    self._specs[logical_id], self._variables[logical_id], self._limits[logical_id], tenant_id
                )
            return pool

    def _all_pools(self) -> list[_Pool]:
        with self._pools_lock:
            return list(self._pools.values())

    def _make_room(self, pool: _Pool) -> None:
        """Before a tenant's new environment: end the function's least recently
        used idle environments (any tenant's) while it has ``tenant_environments``."""
        with self._pools_lock:
            pools = [other for (function, _), other in self._pools.items() if function == pool.spec.logical_id]
        while True:
            live = 0
            oldest: tuple[float, _Pool, ExecutionEnvironment] | None = None
            for other in pools:
                with other.changed:
                    live += len(other.all) + other.starting
                    for environment in other.idle:
                        if oldest is None or environment.released_at < oldest[0]:
                            oldest = (environment.released_at, other, environment)
            if live < self._tenant_environments or oldest is None:
                return
            _, owner, environment = oldest
            with owner.changed:
                if environment not in owner.idle:  # taken meanwhile: look again
                    continue
                owner.idle.remove(environment)
                owner.all.discard(environment)
            log.info(
                "%s: idle environment of tenant %s ended (pid %d) for another tenant's",
                owner.spec.logical_id,
                owner.tenant_id,
                environment.pid,
            )
            environment.close()
            environment.reap(timeout=STOP_GRACE_S)

    def _acquire(self, pool: _Pool) -> ExecutionEnvironment:
        with pool.changed:
            while True:
                if self._stopped:
                    raise FunctionError("Runtime.Stopped", "the local stack is stopping")
                while pool.idle:
                    environment = pool.idle.pop()
                    if environment.alive():
                        return environment
                    # Ended between invocations (killed from outside): Lambda just uses another.
                    pool.all.discard(environment)
                    environment.reap(timeout=0)
                if len(pool.all) + pool.starting < pool.limit:
                    pool.starting += 1
                    break
                pool.changed.wait()
        try:
            if pool.tenant_id is not None:
                self._make_room(pool)
            environment = ExecutionEnvironment(pool.spec, pool.variables, self._log_sink, tenant_id=pool.tenant_id)
        except BaseException:
            with pool.changed:
                pool.starting -= 1
                pool.changed.notify()
            raise
        with pool.changed:
            pool.starting -= 1
            pool.all.add(environment)
            if self._stopped:
                pool.all.discard(environment)
                environment.kill()
                raise FunctionError("Runtime.Stopped", "the local stack is stopping")
        if pool.tenant_id is None:
            log.info("%s: new execution environment (pid %d)", pool.spec.logical_id, environment.pid)
        else:
            log.info(
                "%s: new execution environment of tenant %s (pid %d)",
                pool.spec.logical_id,
                pool.tenant_id,
                environment.pid,
            )
        return environment

    def _release(self, pool: _Pool, environment: ExecutionEnvironment) -> None:
        with pool.changed:
            if environment.alive() and not self._stopped:
                environment.released_at = time.monotonic()
                pool.idle.append(environment)
            else:
                pool.all.discard(environment)
                environment.kill()
            pool.changed.notify()

    def pids(self) -> dict[str, list[int]]:
        """The live environments' process ids, by function."""
        out: dict[str, list[int]] = {}
        for pool in self._all_pools():
            with pool.changed:
                pids = [environment.pid for environment in pool.all if environment.alive()]
            if pids:
                out[pool.spec.logical_id] = sorted([*out.get(pool.spec.logical_id, []), *pids])
        return out

    def tenant_pids(self, logical_id: str) -> dict[str, list[int]]:
        """The live environments' process ids of a tenant-isolated function, by tenant."""
        out: dict[str, list[int]] = {}
        for pool in self._all_pools():
            if pool.spec.logical_id != logical_id or pool.tenant_id is None:
                continue
            with pool.changed:
                pids = sorted(environment.pid for environment in pool.all if environment.alive())
            if pids:
                out[pool.tenant_id] = pids
        return out

    def settle_logs(self, timeout: float) -> bool:
        """True once every live environment's log lines written so far were handed on."""
        deadline = time.monotonic() + timeout
        settled = True
        for pool in self._all_pools():
            with pool.changed:
                environments = list(pool.all)
            for environment in environments:
                settled = environment.settle_logs(max(0.0, deadline - time.monotonic())) and settled
        return settled

    def stop(self) -> None:
        """End every environment: idle ones are asked to end, busy ones killed
        (their invocations fail, and their invoking threads close their pipes),
        and every process is reaped."""
        self._stopped = True
        idle: list[ExecutionEnvironment] = []
        busy: list[ExecutionEnvironment] = []
        for pool in self._all_pools():
            with pool.changed:
                idle.extend(pool.idle)
                busy.extend(pool.all.difference(pool.idle))
                pool.all = set()
                pool.idle = []
                pool.changed.notify_all()
        for environment in busy:
            if environment.alive():
                environment.process.kill()
        for environment in idle:
            environment.close()
        deadline = time.monotonic() + STOP_GRACE_S
        for environment in idle:
            environment.reap(timeout=max(0.0, deadline - time.monotonic()))
        for environment in busy:
            environment.process.wait()
