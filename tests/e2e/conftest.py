"""End-to-end fixtures: the local stack, started once per session exactly as
``make dev`` starts it (``python -m local_stack serve``, in a subprocess, on
free ports, with its own state directory), and an HTTP client for its API.

Tokens come from the stack's user pool (real RS256 JWTs). Nothing here talks
to AWS: every client is pointed at the stack's emulator.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from local_stack.running_stack import ENV_FILE, STATE_FILE, control_call, local_admin, operator_client
from ops.tenants import TenantAdmin
from ops.users import UserPool, ensure_user, id_token
from stack_model.template import PROJECT_ROOT

START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 30
# The functions keep a tenant record this long (30 s when deployed): resharding
# waits it out between phases, so the e2e stack keeps it short.
TENANT_CONFIG_TTL_SECONDS = 1
# The session's one stack serves every suite (tests/conftest.py's ``stack``).
# Basic, every new tenant's tier, lets any test's bursts through; the two other
# tiers are small, for tests/e2e/test_throttling.py, which moves its own
# tenants there with the operator command: standard throttles at 2 requests/s
# (burst 4), premium allows 6 requests a day.
THROTTLED_TIER, THROTTLED_RATE, THROTTLED_BURST = "standard", 2, 4
QUOTA_TIER, DAILY_QUOTA = "premium", 6
ROOMY_TIER = "basic"
SESSION_TIERS = tuple(
    f"--parameter={tier}{name}={value}"
    for tier, limits in (
        ("Basic", (("RateLimit", 10_000), ("BurstLimit", 20_000), ("DailyQuota", 10_000_000))),
        ("Standard", (("RateLimit", THROTTLED_RATE), ("BurstLimit", THROTTLED_BURST), ("DailyQuota", 10_000_000))),
        ("Premium", (("RateLimit", 10_000), ("BurstLimit", 20_000), ("DailyQuota", DAILY_QUOTA))),
    )
    for name, value in limits
)


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON, or None when empty
    raw: bytes = b""

    @property
    def error_code(self) -> str | None:
        return self.body.get("error", {}).get("code") if isinstance(self.body, dict) else None


@dataclass
class RunningStack:
    """A ``python -m local_stack serve`` process and what its state file says."""

    process: subprocess.Popen[bytes]
    state_dir: Path
    state: dict[str, Any] = field(default_factory=dict)
    _clients: dict[str, Any] = field(default_factory=dict)
    _admin: TenantAdmin | None = None

    @property
    def api_url(self) -> str:
        return str(self.state["api_url"])

    def operator(self, service: str) -> Any:
        """A client of the emulator as the local operator (admin set-up, assertions)."""
        if service not in self._clients:
            self._clients[service] = operator_client(self.state["emulator_url"], service, self.state["region"])
        return self._clients[service]

    def pool(self) -> UserPool:
        return UserPool(
            cognito=self.operator("cognito-idp"),
            pool_id=self.state["user_pool_id"],
            client_id=self.state["user_pool_client_id"],
            admin_group=self.state["admin_group"],
        )

    def token(self, tenant_id: str, username: str, *, admin: bool = False) -> str:
        """An ID token of a user of ``tenant_id``, the user and the tenant
        (its record and API key) created if needed, as ``make token`` does."""
        pool = self.pool()
        ensure_user(pool, username, tenant_id, admin=admin)
        self.onboard(tenant_id)
        return id_token(pool, username)

    def onboard(self, tenant_id: str) -> None:
        # One admin (and its two clients) per stack: building boto3 clients was most of a token's cost.
        if self._admin is None:
            self._admin = local_admin(self.state)
        self._admin.ensure(tenant_id)

    def drain(self, timeout: float = 60.0) -> dict[str, Any]:
        return self._control(f"stream/drain?timeout={timeout}", timeout)

    def drain_queues(self, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until every message receivable now was handed to its function
        and no SQS-triggered invocation is under way (local_stack.event_sources.sqs_poller)."""
        return self._control(f"queues/drain?timeout={timeout}", timeout)

    def advance_queue_clock(self, seconds: float) -> float:
        """Move the emulator's SQS clock forward: visibility timeouts end sooner."""
        offset: float = self._control(f"queues/clock?advance={seconds}", 10)["offset_s"]
        return offset

    def table_fingerprint(self, *, skip_pk_containing: Sequence[str] = ()) -> dict[str, Any]:
        """The table's item count and SHA-256 of every item (``/_local/table/fingerprint``),
        but those whose partition key contains one of ``skip_pk_containing``."""
        marks = [("skip_pk_containing", mark) for mark in skip_pk_containing]
        query = "?" + urllib.parse.urlencode(marks) if marks else ""
        return control_call(self.state, f"table/fingerprint{query}", timeout=60, method="GET")

    def drain_logs(self, timeout: float = 30.0) -> dict[str, Any]:
        """Every subscribed log line written so far delivered (the usage counters up to date)."""
        return self._control(f"logs/drain?timeout={timeout}", timeout)

    def _control(self, path: str, timeout: float) -> dict[str, Any]:
        return control_call(self.state, path, timeout=timeout + 10)

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        body: Any = None,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        return http(method, self.api_url + path, token=token, body=body, raw=raw, headers=headers)


# What every metering item's partition key contains (a usage counter or a delivery journal).
USAGE_PK_MARK = "|USAGE"
# The items that move on their own clock, whatever a test does: the usage counters (every
# request, refused ones included, as the log deliveries arrive), webhook delivery records and
# the per-second delivery rate counters (the delivery function's retries of any webhook of the
# session back off for a day), and a webhook's parking partition (its retry slots, taken and
# given back by those retries, and its circuit, which a drain's token rewrites on each return).
# "Nothing changed" comparisons of tenants' data leave them out.
BACKGROUND_PK_MARKS = (USAGE_PK_MARK, "#DELIVERIES", "|WEBHOOKS#RATE", "#PARKED")


def is_usage_item(item: Mapping[str, Any]) -> bool:
    """A metering item (a usage counter or a delivery journal, docs/usage.md):
    every request that reaches a function is counted there, a refused one
    included, so "nothing changed" comparisons of a tenant's data leave them out."""
    return USAGE_PK_MARK in str(item.get("pk", {}).get("S", ""))


def http(
    method: str,
    url: str,
    *,
    token: str | None = None,
    body: Any = None,
    raw: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    all_headers = dict(headers or {})
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        all_headers.setdefault("Content-Type", "application/json")
    request = urllib.request.Request(url, data=data, method=method, headers=all_headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback
            status, response_headers, payload = response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        status, response_headers, payload = exc.code, exc.headers, exc.read()
    parsed = json.loads(payload) if payload else None
    return Response(status, {k.lower(): v for k, v in response_headers.items()}, parsed, payload)


def delete_webhooks(stack: RunningStack, tenant: str, admin: str) -> None:
    """Every webhook of ``tenant`` deleted, with the token of its admin ``admin``. A
    webhook whose receiver does not answer (stopped, or never there) has its
    deliveries retried with backoff for the rest of the session: each attempt an
    invocation of the delivery function, a delivery record and a usage line (a
    session stack left with a dozen of them spent a seventh of a core on them).
    A deleted webhook's pending deliveries are dropped at their next receive."""
    token = stack.token(tenant, admin, admin=True)
    listed = stack.request("GET", "/webhooks", token=token)
    for webhook in (listed.body or {}).get("items", []):
        stack.request("DELETE", f"/webhooks/{webhook['webhook_id']}", token=token)


def python_module(module: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>`` as a developer runs it from the project
    (the layer and the project importable, no AWS credentials of yours)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT / "layers" / "shared"), str(PROJECT_ROOT)])
    return subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", module, *args],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_main(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>``, in this process: the module's
    ``main(argv)`` with stdout, stderr and its exit code captured, and no AWS
    variable of the environment (as :func:`python_module` gives the child).
    What only a real process shows (the interpreter, the import path, signals)
    is left to the few tests that use :func:`python_module`."""
    entry = importlib.import_module(module)
    if not hasattr(entry, "main"):
        entry = importlib.import_module(f"{module}.__main__")
    stdout, stderr = io.StringIO(), io.StringIO()
    saved = {name: value for name, value in os.environ.items() if name.startswith("AWS_")}
    for name in saved:
        del os.environ[name]
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = entry.main(list(args))
            except SystemExit as exit_:
                if isinstance(exit_.code, str):
                    stderr.write(exit_.code + "\n")
                    code = 1
                else:
                    code = exit_.code or 0
    finally:
        os.environ.update(saved)
    return subprocess.CompletedProcess([module, *args], int(code or 0), stdout.getvalue(), stderr.getvalue())


def start_stack(state_dir: Path, *args: str, wait: bool = True) -> RunningStack:
    """Start ``python -m local_stack serve`` (on free ports unless ``args`` name
    one); wait for its state file unless told not to."""
    state_dir.mkdir(parents=True, exist_ok=True)
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT / "layers" / "shared"), str(PROJECT_ROOT)])
    env["TENANT_CONFIG_TTL_SECONDS"] = str(TENANT_CONFIG_TTL_SECONDS)
    log = (state_dir / "serve.log").open("wb")
    port = [] if "--port" in args else ["--port", "0"]
    command = [sys.executable, "-m", "local_stack", "--state-dir", str(state_dir), "serve", *port, *args]
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
    stack = RunningStack(process, state_dir)
    if not wait:
        return stack
    deadline = time.monotonic() + START_TIMEOUT_S
    state_file = state_dir / STATE_FILE
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the local stack exited ({process.returncode}):\n{server_log(stack)}")
        if state_file.exists():
            try:
                state = json.loads(state_file.read_text())
            except ValueError:
                state = {}
            if state.get("pid") == process.pid:
                stack.state = state
                return stack
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the local stack did not start in {START_TIMEOUT_S}s:\n{server_log(stack)}")


def stop_stack(stack: RunningStack) -> int:
    """Ctrl-C, as a developer would; returns the exit code."""
    if stack.process.poll() is None:
        stack.process.send_signal(signal.SIGINT)
        try:
            stack.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            stack.process.kill()
            stack.process.wait()
            raise
    return int(stack.process.returncode)


def server_log(stack: RunningStack) -> str:
    path = stack.state_dir / "serve.log"
    return path.read_text(errors="replace") if path.exists() else ""


def session_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """The session's local stack (the ``stack`` fixture of tests/conftest.py)."""
    running = start_stack(tmp_path_factory.mktemp("local-stack"), "--no-seed", *SESSION_TIERS)
    try:
        yield running
    finally:
        stop_stack(running)


def environment_processes(parent: int) -> set[int]:
    """The local stack's execution environments (functions' processes) that
    ``parent`` started, from /proc."""
    from local_stack.lambda_ import runtime as lambda_runtime

    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        # The parent's pid is the second field after the command name (in parentheses).
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and lambda_runtime.__file__.encode() in command:
            found.add(int(entry.name))
    return found


def environment_function(pid: int) -> str:
    """The function an execution environment runs (its ``AWS_LAMBDA_FUNCTION_NAME``), from /proc."""
    for variable in (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0"):
        name, _, value = variable.partition(b"=")
        if name == b"AWS_LAMBDA_FUNCTION_NAME":
            return value.decode()
    raise AssertionError(f"process {pid} runs no function")


def running_environment(pid: int) -> bool:
    """Whether ``pid`` is still an environment's runtime (not reused by another program)."""
    from local_stack.lambda_ import runtime as lambda_runtime

    try:
        return lambda_runtime.__file__.encode() in (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False


def new_tenant_id(suffix: str = "") -> str:
    return f"e2e-{secrets.token_hex(4)}{suffix}"


@dataclass(frozen=True)
class Caller:
    tenant_id: str
    username: str
    token: str


@pytest.fixture
def tenant_pair(stack: RunningStack) -> tuple[Caller, Caller]:
    """Two tenants whose ids are prefixes of each other ("1" and "10"),
    each with a user."""
    first = new_tenant_id()
    second = first + "0"
    return (
        Caller(first, f"u-{first}", stack.token(first, f"u-{first}")),
        Caller(second, f"u-{second}", stack.token(second, f"u-{second}")),
    )


__all__ = [
    "BACKGROUND_PK_MARKS",
    "ENV_FILE",
    "STATE_FILE",
    "USAGE_PK_MARK",
    "Caller",
    "Response",
    "RunningStack",
    "http",
    "is_usage_item",
    "python_module",
    "run_main",
    "start_stack",
    "stop_stack",
]
