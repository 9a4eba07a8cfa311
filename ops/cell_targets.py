"""The cells a move between cells reaches (``make tenant TENANT=<t> CELL=<cell>``),
each as its operator reaches it (:class:`ops.cell_move.Cell`).

- ``--local``: the running local stack's cells, from its state file's ``cells``
  map (``make dev CELLS=<n>``): cell id -> that cell's state directory (or its
  ``stack.json``, or the state itself).
  :func:`cell_states` is the one place that reads it.
- ``--stack``: each deployed cell named by ``--cell-stack <cell>=<stack>``
  (its CloudFormation stack, in ``--region``), else each cell of the control
  plane's directory (the stack and Region its item names): its table, usage
  plans, webhook key (``alias/<stack>-webhook-secrets``) and dedicated tables' stacks.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ops.cell_move import Cell
from ops.dedicated import deploy_to_aws, deploy_to_local
from ops.stack_target import TargetError, _set_state, local_api_keys, local_client, stack_outputs
from support_tickets.data.tenant_registry import TIERS

if TYPE_CHECKING:
    from ops.cells import Directory


def cell_states(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Cell id -> the local state of that cell's stack."""
    cells = _set_state(args).get("cells")
    if not isinstance(cells, dict) or not cells:
        raise TargetError("the local stack runs no cells: start it with `make dev CELLS=2`")
    states: dict[str, dict[str, Any]] = {}
    for cell, named in cells.items():
        state = named
        if isinstance(named, str):
            # A cell's state directory (make dev CELLS=<n> names those), or its stack.json.
            path = Path(named) / "stack.json" if Path(named).is_dir() else Path(named)
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise TargetError(f"cell {cell}'s state {named} can't be read: is the local stack running?") from exc
        if not isinstance(state, dict):
            raise TargetError(f"the local stack's state names no state for cell {cell}")
        states[str(cell)] = state
    return states


def cells_of(args: argparse.Namespace, admin: Any, directory: Directory | None = None) -> dict[str, Cell]:
    """Every cell the command reaches, its records through ``admin(client, table)``
    (a :class:`ops.tenants.TenantAdmin` factory); deployed, those ``--cell-stack``
    names, else those of ``directory`` (the deployed control plane's)."""
    if args.local:
        return {cell: _local_cell(cell, state, admin) for cell, state in cell_states(args).items()}
    named = {cell: (stack, args.region) for cell, stack in map(_cell_stack, args.cell_stack or ())}
    if not named and directory is not None:
        named = {cell.cell_id: (cell.stack, cell.region) for cell in directory.cells()}
    if not named:
        raise TargetError("name each cell's stack: --cell-stack <cell>=<stack> (one per cell)")
    return {cell: _deployed_cell(cell, stack, region, admin) for cell, (stack, region) in named.items()}


def _local_cell(cell: str, state: dict[str, Any], admin: Any) -> Cell:
    def deploy(tenant_id: str) -> str:
        return deploy_to_local(state, tenant_id)["TableName"]

    cached = state.get("authorizer_cache_seconds")  # the local gateway's, which a test run may shorten

    return Cell(
        cell,
        admin(local_client(state, "dynamodb"), str(state["table_name"])),
        keys=local_api_keys(state),
        kms=local_client(state, "kms"),
        webhook_key_arn=str(state["webhook_key_arn"]) if state.get("webhook_key_arn") else None,
        deploy=deploy,
        authorizer_cache_seconds=float(cached) if isinstance(cached, int | float) else None,
    )


def _deployed_cell(cell: str, stack: str, region: str | None, admin: Any) -> Cell:
    import boto3

    from ops.api_keys import ApiKeys

    session = boto3.Session(region_name=region) if region else boto3.Session()
    outputs = stack_outputs(session, stack)
    plans = {tier: outputs.get(f"UsagePlanId{tier.capitalize()}", "") for tier in TIERS}
    if "TableName" not in outputs or not all(plans.values()):
        raise TargetError(f"cell {cell}'s stack {stack} has no TableName or UsagePlanId<Tier> outputs")
    cloudformation = session.client("cloudformation")

    def deploy(tenant_id: str) -> str:
        return deploy_to_aws(cloudformation, stack, tenant_id)["TableName"]

    return Cell(
        cell,
        admin(session.client("dynamodb"), outputs["TableName"]),
        keys=ApiKeys(session.client("apigateway"), plans, stack),
        kms=session.client("kms"),
        webhook_key_arn=f"alias/{stack}-webhook-secrets",  # template.yaml's WebhookSecretsKeyAlias
        deploy=deploy,
    )


def _cell_stack(value: str) -> tuple[str, str]:
    cell, separator, stack = value.partition("=")
    if not separator or not cell or not stack:
        raise TargetError(f"--cell-stack takes <cell>=<stack>, not {value!r}")
    return cell, stack
