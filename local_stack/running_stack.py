"""How other processes find and reach a running local stack (light imports
only: ``make token`` must not pay for the emulator).

While ``make dev`` runs, ``<state dir>/stack.json`` holds the API and emulator
URLs and the ids a deployed stack's outputs would give (user pool, client,
identity pool, table, tenant role); ``<state dir>/env.json`` is the ``sam
local --env-vars`` file and ``<state dir>/events/`` the sample events with
fresh tokens. The stack removes them when it stops.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

# The control endpoints' token header and call (``/_local/...`` on the emulator's port): ops's,
# so that operator commands reach a local stack the same way (ops never imports local_stack).
from ops.local_control import CONTROL_TOKEN_HEADER as CONTROL_TOKEN_HEADER  # noqa: PLC0414 - re-exported
from ops.local_control import control_call as control_call  # noqa: PLC0414 - re-exported
from stack_model.template import PROJECT_ROOT

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ops.tenants import TenantAdmin

# Where a running stack's files are: `.local/` in the project, unless this variable names
# another directory (a stack started with `--state-dir` elsewhere, such as the tests' session
# stack, which tests/e2e/test_doc_commands.py points the pages' `make` lines at).
STATE_DIR_VARIABLE = "LOCAL_STACK_STATE_DIR"
DEFAULT_STATE_DIR = Path(os.environ.get(STATE_DIR_VARIABLE) or PROJECT_ROOT / ".local")
STATE_FILE = "stack.json"
ENV_FILE = "env.json"
# The sample events with fresh tokens of the demo users (ops.sample_events.write_local).
EVENTS_DIR = "events"
REGION = "us-east-1"
# The emulated account's administrator: the stack's own set-up and tools (see guard).
OPERATOR_CREDENTIALS = {"aws_access_key_id": "LOCALOPERATOR", "aws_secret_access_key": "local-operator-secret"}
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=2, read_timeout=30)


def read_state(state_dir: Path = DEFAULT_STATE_DIR) -> dict[str, Any] | None:
    """The running stack's state, or ``None`` (no file, or its process is gone)."""
    path = state_dir / STATE_FILE
    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not _alive(int(state.get("pid", 0))):
        return None
    return state


def write_json(path: Path, value: Any) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    temporary.replace(path)


# Every client of the emulator comes from one boto3 session: a session per client loads
# botocore's service models and endpoint data again each time (most of a stack's start).
# boto3 sessions are not thread-safe, hence the lock around making a client.
_CLIENTS_SESSION: list[boto3.Session] = []
_CLIENTS_LOCK = threading.Lock()


def emulator_client(
    endpoint_url: str, service: str, credentials: Mapping[str, str] = OPERATOR_CREDENTIALS, region: str = REGION
) -> Any:
    """A client of the emulator signed with ``credentials`` (the operator's by
    default); never real AWS."""
    with _CLIENTS_LOCK:
        if not _CLIENTS_SESSION:
            _CLIENTS_SESSION.append(boto3.Session())
        return _CLIENTS_SESSION[0].client(  # type: ignore[call-overload]
            service,
            region_name=region,
            endpoint_url=endpoint_url,
            aws_access_key_id=credentials["aws_access_key_id"],
            aws_secret_access_key=credentials["aws_secret_access_key"],
            aws_session_token=credentials.get("aws_session_token"),
            config=CLIENT_CONFIG,
        )


def operator_client(endpoint_url: str, service: str, region: str = REGION) -> Any:
    """A client of the emulator, signed as the operator; never real AWS."""
    return emulator_client(endpoint_url, service, region=region)


def local_admin(state: Mapping[str, Any]) -> TenantAdmin:
    """The running local stack's tenant records and API keys (from its state
    file), as its operator: what ``make token`` and the tests onboard with."""
    from ops.api_keys import ApiKeys
    from ops.tenants import TenantAdmin

    url, region = str(state["emulator_url"]), str(state["region"])
    keys = ApiKeys(operator_client(url, "apigateway", region), dict(state["usage_plan_ids"]), str(state["stack_name"]))
    return TenantAdmin(operator_client(url, "dynamodb", region), str(state["table_name"]), keys=keys)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
