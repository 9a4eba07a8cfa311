"""The control plane a cells command reads and writes: the directory and the router's
store, of the local set (``--local``, ``make dev CELLS=<n>``) or of the deployed
control plane that ``--control-plane <stack>`` names (``CONTROL_PLANE=``): its stack's
``DirectoryTableName`` and ``KeyValueStoreArn`` outputs, read with the ``dynamodb`` and
``cloudfront-keyvaluestore`` clients in its Region (``--region``; the cells' too).

:func:`control_plane` is the one place that builds the pair: the move between cells
(:mod:`ops.tenants`), ``make cells`` (:mod:`ops.cell_report`) and onboarding
(``python -m local_stack onboard``) go through it. Deployed, each cell is reached
through the stack and Region its directory item names (:func:`cell_stack_target`):
naming the control plane is enough. :func:`register_cell` writes that item from a
cell stack's outputs (``CellId``, ``ApiUrl``), then the cell's origin in the store.
"""

from __future__ import annotations

import argparse
from typing import Any, Final
from urllib.parse import urlsplit

from ops.cell_routes import cell_origin
from ops.cells import (
    DIRECTORY_OUTPUT,
    LOCAL_CAPACITY,
    STORE_OUTPUT,
    Cell,
    Directory,
    Routes,
    deployed_directory,
    deployed_routes,
    local_directory,
    local_routes,
)
from ops.stack_target import TargetError, _set_state, stack_outputs

# Why a deployed move needs the control plane: the tenant would stay routed to the cell it left.
NO_CONTROL_PLANE: Final = (
    "a move between deployed cells writes the control plane's directory, then the router's store: "
    "name the control plane's stack (--control-plane <stack>, CONTROL_PLANE=); nothing written"
)
LOCAL_HAS_ITS_OWN: Final = "--control-plane names a deployed control plane (with --stack): the local set has its own"


def add_control_plane_argument(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--control-plane", help="with deployed cells: the control plane's stack (its directory and router store)"
    )


def control_plane(args: argparse.Namespace) -> tuple[Directory, Routes] | None:
    """The directory and the router's store of the cells ``args`` target: the local set's
    (``None`` when the local stack runs no cells), or the deployed control plane's
    (``None`` when ``--control-plane`` names none)."""
    named = getattr(args, "control_plane", None)
    if args.local:
        if named:
            raise TargetError(LOCAL_HAS_ITS_OWN)
        return local_control_plane(_set_state(args))
    if not named:
        return None
    return deployed_control_plane(named, args.region)


def local_control_plane(state: dict[str, Any]) -> tuple[Directory, Routes] | None:
    """The local set's directory and store (``state``: its state file's), ``None`` for one stack."""
    if "directory_table" not in state:
        return None
    return local_directory(state), local_routes(state)


def _session(region: str | None) -> Any:
    import boto3

    return boto3.Session(region_name=region) if region else boto3.Session()


def deployed_control_plane(stack: str, region: str | None) -> tuple[Directory, Routes]:
    """The directory and store of the control plane deployed as ``stack``, by its outputs."""
    session = _session(region)
    outputs = stack_outputs(session, stack)
    missing = [name for name in (DIRECTORY_OUTPUT, STORE_OUTPUT) if name not in outputs]
    if missing:
        raise TargetError(
            f"stack {stack} has no {' or '.join(missing)} output: not the control plane (templates/control-plane.yaml)"
        )
    return deployed_directory(session, outputs), deployed_routes(session, outputs)


def cell_stack_target(cell: Cell) -> argparse.Namespace:
    """A deployed cell as the operator commands' target (:mod:`ops.stack_target`): the
    stack and Region its directory item names."""
    return argparse.Namespace(local=False, stack=cell.stack, region=cell.region, local_state=None)


def register_cell(directory: Directory, routes: Routes, stack: str, region: str | None) -> Cell:
    """The cell deployed as ``stack`` in the directory (its ``CellId`` and ``ApiUrl``
    outputs; the capacity it has there already, else :data:`LOCAL_CAPACITY`), then its
    origin in the router's store. Run again, it rewrites both as they are."""
    session = _session(region)
    outputs = stack_outputs(session, stack)
    cell_id = outputs.get("CellId", "")
    if not cell_id:
        raise TargetError(f"stack {stack} is not a cell: its CellId output is empty (deploy it with CellId=<cell>)")
    api = urlsplit(outputs.get("ApiUrl", ""))
    api_domain, stage = api.hostname or "", api.path.strip("/")
    try:
        cell_origin(api_domain, stage)  # what the store takes: checked before the directory is written
    except ValueError as exc:
        raise TargetError(f"stack {stack}'s ApiUrl output is not a regional API's stage URL: {exc}") from exc
    known = directory.cell(cell_id)
    cell = directory.register(
        cell_id,
        api_domain=api_domain,
        stage=stage,
        stack=stack,
        region=str(session.region_name),
        capacity=known.capacity if known is not None else LOCAL_CAPACITY,
    )
    routes.publish_cell(cell)
    return cell
