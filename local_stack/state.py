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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from stack_model.template import PROJECT_ROOT

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ops.tenants import TenantAdmin

DEFAULT_STATE_DIR = PROJECT_ROOT / ".local"
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


def operator_client(endpoint_url: str, service: str, region: str = REGION) -> Any:
    """A client of the emulator, signed as the operator; never real AWS."""
    session = boto3.Session(
        aws_access_key_id=OPERATOR_CREDENTIALS["aws_access_key_id"],
        aws_secret_access_key=OPERATOR_CREDENTIALS["aws_secret_access_key"],
        region_name=region,
    )
    return session.client(service, endpoint_url=endpoint_url, config=CLIENT_CONFIG)  # type: ignore[call-overload]


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
