"""The local stack in its own process, as ``make dev`` runs it.

The emulator (moto + IAM guard) answers on loopback from another process, so
the handlers measured here pay what a Lambda function pays to reach AWS: a
real HTTP request, signed, to a service that does not share its interpreter.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from local_stack.local_values import local_environment
from local_stack.running_stack import STATE_FILE, control_call, operator_client
from local_stack.stack import lambda_environment
from ops.users import UserPool, ensure_user, id_token, tenant_credentials
from stack_model.functions import FunctionSpec, function_specs
from stack_model.roles import function_role
from stack_model.template import PROJECT_ROOT, role_arn
from support_tickets.core.identity import TenantCredentials

START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30
# One stream drain call waits this long at most (the local stack caps it at 300 s).
DRAIN_CALL_S = 240.0


@dataclass
class StackProcess:
    process: subprocess.Popen[bytes]
    state_dir: Path
    state: dict[str, Any]
    _tokens: dict[tuple[str, str, bool], str] = field(default_factory=dict)
    _credentials: dict[str, TenantCredentials] = field(default_factory=dict)
    _operators: dict[str, Any] = field(default_factory=dict)

    @property
    def emulator_url(self) -> str:
        return str(self.state["emulator_url"])

    def operator(self, service: str) -> Any:
        """A client of the emulator as its administrator (set-up, sizing), one
        per service for the whole run: each new session would parse the
        service's model again, a tenth of a second of CPU every time."""
        if service not in self._operators:
            self._operators[service] = operator_client(self.emulator_url, service, str(self.state["region"]))
        return self._operators[service]

    def role_credentials(self, role_name: str, session_name: str, tags: dict[str, str] | None = None) -> dict[str, str]:
        """``AWS_*`` variables for ``role_name``, as Lambda hands them to a function."""
        kwargs: dict[str, Any] = {"RoleArn": role_arn(role_name), "RoleSessionName": session_name}
        if tags:
            kwargs["Tags"] = [{"Key": key, "Value": value} for key, value in tags.items()]
        credentials = self.operator("sts").assume_role(**kwargs)["Credentials"]
        return {
            "AWS_ACCESS_KEY_ID": credentials["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": credentials["SecretAccessKey"],
            "AWS_SESSION_TOKEN": credentials["SessionToken"],
        }

    def token(self, tenant_id: str, username: str, admin: bool = False) -> str:
        """An ID token of the stack's user pool (the user created if needed), the
        same one for the whole run, as a client keeps its token for an hour."""
        key = (tenant_id, username, admin)
        if key not in self._tokens:
            pool = UserPool(self.operator("cognito-idp"), self.state["user_pool_id"], self.state["user_pool_client_id"])
            ensure_user(pool, username, tenant_id, admin=admin)
            self._tokens[key] = id_token(pool, username)
        return self._tokens[key]

    def identity_pool(self) -> Any:
        """The identity pool's unsigned API, as the functions call it."""
        return boto3.client("cognito-identity", region_name=str(self.state["region"]), endpoint_url=self.emulator_url)

    def authorizer_credentials(self, token: str) -> TenantCredentials:
        """What the API's authorizer passes for ``token`` (once per token, as
        API Gateway's authorizer cache does)."""
        if token not in self._credentials:
            self._credentials[token] = tenant_credentials(
                self.identity_pool(),
                str(self.state["identity_pool_id"]),
                str(self.state["user_pool_provider_name"]),
                token,
            )
        return self._credentials[token]

    def tenant_credentials(self, token: str) -> dict[str, str]:
        """``AWS_*`` variables of the credentials the identity pool gives ``token``."""
        credentials = self.authorizer_credentials(token)
        return {
            "AWS_ACCESS_KEY_ID": credentials.access_key_id,
            "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key,
            "AWS_SESSION_TOKEN": credentials.session_token,
        }

    def drain(self, timeout: float = 60.0) -> None:
        """Wait until the stack's stream poller has fed every record to the stream
        functions, up to ``timeout``; raise if it has not (a figure measured while they
        still work measures them too). The stack answers each drain within
        ``DRAIN_CALL_S`` (its own cap is 300 s), drained or not: asked again until then."""
        deadline = time.monotonic() + timeout
        while True:
            wait = max(1.0, min(DRAIN_CALL_S, deadline - time.monotonic()))
            if control_call(self.state, f"stream/drain?timeout={wait:g}", timeout=wait + 10).get("drained"):
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"the local stack's stream functions had not caught up after {timeout:g} s")

    def function_environment(self, spec: FunctionSpec) -> dict[str, str]:
        """The environment the local stack gives ``spec`` (template variables,
        Lambda's own, the execution role's credentials), pointed at the emulator."""
        credentials = self.role_credentials(function_role(spec.logical_id), f"bench-{spec.logical_id}")
        endpoint = str(self.state["vpc_endpoint_url"]) if spec.in_vpc else self.emulator_url
        environment = lambda_environment(spec, endpoint, credentials, f"bench-{spec.logical_id}")
        # As make dev runs it (WEBHOOK_ALLOW_LOCAL_HTTP): only what the local stack changes.
        local = local_environment(spec.environment)
        environment.update({name: value for name, value in local.items() if value != spec.environment[name]})
        if "WEBHOOK_KEY_ARN" in spec.environment:
            environment["WEBHOOK_KEY_ARN"] = str(self.state["webhook_key_arn"])
        # The template's references, as the running stack resolved them.
        environment["TABLE_NAME"] = str(self.state["table_name"])
        if "IDENTITY_POOL_ID" in spec.environment:
            environment["IDENTITY_POOL_ID"] = str(self.state["identity_pool_id"])
        environment["USER_POOL_PROVIDER_NAME"] = str(self.state["user_pool_provider_name"])
        environment["ALLOWED_CLIENT_IDS"] = str(self.state["user_pool_client_id"])
        return environment


def specs() -> dict[str, FunctionSpec]:
    return function_specs()


@contextmanager
def stack_process(*serve_arguments: str) -> Iterator[StackProcess]:
    """``python -m local_stack serve`` on free ports with a private state dir (and ``serve_arguments``)."""
    with tempfile.TemporaryDirectory(prefix="bench-stack-") as directory:
        state_dir = Path(directory)
        env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
        env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT / "layers" / "shared"), str(PROJECT_ROOT)])
        log_path = state_dir / "serve.log"
        command = [sys.executable, "-m", "local_stack", "--state-dir", str(state_dir), "serve", "--port", "0"]
        with log_path.open("wb") as log:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [*command, "--no-seed", *serve_arguments],
                cwd=PROJECT_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            state = _wait_for_state(process, state_dir / STATE_FILE, log_path)
            yield StackProcess(process, state_dir, state)
        finally:
            _stop(process)


def _wait_for_state(process: subprocess.Popen[bytes], state_file: Path, log_path: Path) -> dict[str, Any]:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the local stack exited ({process.returncode}):\n{log_path.read_text()}")
        if state_file.exists():
            try:
                state: dict[str, Any] = json.loads(state_file.read_text())
            except ValueError:
                state = {}
            if state.get("pid") == process.pid:
                return state
        time.sleep(0.1)
    raise RuntimeError(f"the local stack did not start in {START_TIMEOUT_S}s:\n{log_path.read_text()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def operator_put(stack: StackProcess) -> Callable[[dict[str, Any]], None]:
    """Put an item into the stack's table as the operator (fixtures no handler makes)."""
    client = stack.operator("dynamodb")
    table_name = str(stack.state["table_name"])
    return lambda item: client.put_item(TableName=table_name, Item=item)
