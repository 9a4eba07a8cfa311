"""Where an operator command runs: the local stack (``make dev``) or a deployed stack.

Both give a DynamoDB client with operator (not tenant) credentials and the
table's name: locally from ``.local/stack.json`` (signed as the emulated
account's administrator), deployed from the stack's CloudFormation outputs
with your AWS credentials. :func:`stack_target` adds the user pool and the
audit retention (``make offboard``), :func:`api_keys_target` the tenants' API
keys and the tiers' usage plans.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient
    from mypy_boto3_dynamodb import DynamoDBClient

    from ops.api_keys import ApiKeys


class TargetError(RuntimeError):
    """The stack to work on can't be found."""


def add_target_arguments(parser: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """``--stack`` or ``--local`` (the group, for a command that takes a third target), ``--region``."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--stack", help="deployed stack name (reads its TableName output)")
    target.add_argument("--local", action="store_true", help="the running `make dev` stack")
    # local_stack.running_stack's default: `.local/`, or the directory LOCAL_STACK_STATE_DIR names.
    state_dir = os.environ.get("LOCAL_STACK_STATE_DIR") or ".local"
    parser.add_argument("--local-state", default=str(Path(state_dir) / "stack.json"), help=argparse.SUPPRESS)
    parser.add_argument("--region")
    return target


# The control plane's directory item of a tenant (templates/control-plane.yaml's DirectoryTable;
# ops.cells writes it): here because a tenant's command finds its cell through it.
DIRECTORY_TENANT_PREFIX = "TENANT#"


def directory_tenant_key(tenant_id: str) -> dict[str, Any]:
    from support_tickets.core.keys import validate_tenant_id

    return {"pk": {"S": DIRECTORY_TENANT_PREFIX + validate_tenant_id(tenant_id)}}


def _set_state(args: argparse.Namespace) -> dict[str, Any]:
    """The running local stack's state file as it is: with ``make dev CELLS=<n>``, the set's."""
    try:
        state: dict[str, Any] = json.loads(Path(args.local_state).read_text())
    except (OSError, ValueError) as exc:
        raise TargetError("the local stack is not running: start it with `make dev`") from exc
    return state


def _local_state(args: argparse.Namespace) -> dict[str, Any]:
    """The state of the local stack a command acts on. With ``make dev CELLS=<n>``, a command
    that names a tenant (``args.tenant``) acts on the cell the directory places it in (the
    default cell's, when it places it nowhere), as it would on that cell's stack deployed."""
    state = _set_state(args)
    tenant = getattr(args, "tenant", None)
    if not isinstance(tenant, str) or "cells" not in state or "directory_table" not in state:
        return state
    return cell_state(state, tenants_cell(state, tenant))


def tenants_cell(state: dict[str, Any], tenant_id: str) -> str:
    """The cell of the local set ``state`` the directory places ``tenant_id`` in (else the default)."""
    import boto3

    key, secret = _operator(state)
    directory = boto3.client(
        "dynamodb",
        region_name=str(state.get("region", "us-east-1")),
        endpoint_url=str(state["control_plane_url"]),
        aws_access_key_id=key,
        aws_secret_access_key=secret,
    )
    item = directory.get_item(
        TableName=str(state["directory_table"]), Key=directory_tenant_key(tenant_id), ConsistentRead=True
    ).get("Item")
    return str(item["cell"]["S"]) if item else str(state["default_cell"])


def cell_state(state: dict[str, Any], cell_id: str) -> dict[str, Any]:
    """The state file of ``cell_id`` of the local set ``state``."""
    cells = state.get("cells", {})
    if cell_id not in cells:
        raise TargetError(f"no cell {cell_id!r} in the local set (its cells: {', '.join(sorted(cells)) or 'none'})")
    try:
        found: dict[str, Any] = json.loads((Path(cells[cell_id]) / "stack.json").read_text())
    except (OSError, ValueError) as exc:
        raise TargetError(f"cell {cell_id}'s state can't be read: is the local stack running?") from exc
    return found


def _operator(state: dict[str, Any]) -> tuple[str, str]:
    """The local emulator's operator key and secret, from its state file: the
    emulator verifies every request's signature, and this is the one long-term
    key it holds."""
    try:
        return str(state["operator_access_key_id"]), str(state["operator_secret_access_key"])
    except KeyError as exc:
        raise TargetError("the local stack's state names no operator key: restart `make dev`") from exc


def stack_outputs(session: Any, stack: str) -> dict[str, str]:
    """A deployed stack's CloudFormation outputs."""
    stacks = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    return {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}


def api_keys_target(args: argparse.Namespace) -> ApiKeys:
    """The tenants' API keys and the tiers' usage plans of the same stack."""
    import boto3

    from ops.api_keys import ApiKeys
    from support_tickets.data.tenant_registry import TIERS

    if args.local:
        return local_api_keys(_local_state(args))
    session = boto3.Session(region_name=args.region) if args.region else boto3.Session()
    outputs = stack_outputs(session, args.stack)
    names = {tier: f"UsagePlanId{tier.capitalize()}" for tier in TIERS}
    plans = {tier: outputs[name] for tier, name in names.items() if name in outputs}
    if set(plans) != set(TIERS):
        raise TargetError(f"stack {args.stack} has no UsagePlanId<Tier> outputs (deploy this version first)")
    return ApiKeys(session.client("apigateway"), plans, args.stack)


def local_client(state: dict[str, Any], service: str) -> Any:
    """A client of the local stack whose state is ``state``, signed with its operator key:
    its user pool's where it has one of its own elsewhere (a cell's: the control plane's,
    ``user_pool_url``), else its emulator's."""
    import boto3

    key, secret = _operator(state)
    session = boto3.Session(
        region_name=state.get("region", "us-east-1"), aws_access_key_id=key, aws_secret_access_key=secret
    )
    url = state.get("user_pool_url", state["emulator_url"]) if service == "cognito-idp" else state["emulator_url"]
    return session.client(service, endpoint_url=url)  # type: ignore[call-overload]


def local_api_keys(state: dict[str, Any]) -> ApiKeys:
    """The local stack's API keys and usage plans (``state``: its state file's)."""
    from ops.api_keys import ApiKeys

    client = local_client(state, "apigateway")
    return ApiKeys(client, dict(state.get("usage_plan_ids", {})), str(state.get("stack_name", "local")))


@dataclass(frozen=True)
class Target:
    """A stack an operator command works on."""

    dynamodb: DynamoDBClient
    table_name: str
    cognito: CognitoIdentityProviderClient
    user_pool_id: str
    audit_retention_days: int


def dynamodb_target(args: argparse.Namespace) -> tuple[DynamoDBClient, str]:
    target = stack_target(args)
    return target.dynamodb, target.table_name


def stack_target(args: argparse.Namespace) -> Target:
    import boto3

    from stack_model.template import template

    default_retention = int(template()["Parameters"]["AuditRetentionDays"]["Default"])
    if args.local:
        state = _local_state(args)
        return Target(
            dynamodb=local_client(state, "dynamodb"),
            table_name=str(state["table_name"]),
            cognito=local_client(state, "cognito-idp"),
            user_pool_id=str(state.get("user_pool_id", "")),
            audit_retention_days=default_retention,
        )
    session = boto3.Session(region_name=args.region) if args.region else boto3.Session()
    stacks = session.client("cloudformation").describe_stacks(StackName=args.stack)["Stacks"]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}
    parameters = {item["ParameterKey"]: item.get("ParameterValue", "") for item in stacks[0].get("Parameters", [])}
    if "TableName" not in outputs:
        raise TargetError(f"stack {args.stack} has no TableName output")
    return Target(
        dynamodb=session.client("dynamodb"),
        table_name=outputs["TableName"],
        cognito=session.client("cognito-idp"),
        user_pool_id=outputs.get("UserPoolId", ""),
        audit_retention_days=int(parameters.get("AuditRetentionDays") or default_retention),
    )
