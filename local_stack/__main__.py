"""``python -m local_stack <command>``: the local stack's command line.

- ``serve``: the whole system (``make dev``); Ctrl-C stops it. ``--cells <n>``:
  n cells, their control plane and the router on the one port
  (``make dev CELLS=<n>``, :mod:`local_stack.cells`).
- ``token``: an ID token for a tenant user of the running stack (``make token``).
- ``onboard``: create a tenant's users and admins, in the running local stack
  or in a deployed stack's user pool (``make onboard``).
- ``events``: rewrite ``<state dir>/events/``, the sample events with fresh
  tokens of the demo users, for ``sam local invoke`` (``make events``); with
  cells, acme's credentials and stream are its cell's.
- ``drain``: wait until nothing of the running stack moves on its own: its stream,
  queues and log subscriptions have delivered everything (round after round, as
  each feeds the next); with cells, every cell's.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from local_stack.running_stack import (
    DEFAULT_STATE_DIR,
    ENV_FILE,
    EVENTS_DIR,
    STATE_FILE,
    control_call,
    local_admin,
    operator_client,
    read_state,
)
from ops.cells import CellsError
from ops.stack_target import TargetError, api_keys_target, dynamodb_target
from ops.tenants import TenantRecordError
from ops.users import (
    UserPool,
    UserPoolError,
    ensure_user,
    id_token,
    onboard,
    refuse_taken,
    validate_username,
)

if TYPE_CHECKING:
    from local_stack.cells import CellSet
    from local_stack.stack import LocalStack
    from ops.tenants import TenantAdmin
    from ops.users import Outcome
    from stack_model.functions import FunctionSpec
    from support_tickets.core.identity import TenantCredentials
    from support_tickets.data.tenant_registry import TenantConfig
from support_tickets.core.keys import InvalidTenantId, validate_tenant_id

EXIT_USAGE = 2
# The state file's key of a set of cells (make dev CELLS=<n>): cell id -> its state directory.
CELLS_KEY = "cells"


def command_line() -> argparse.ArgumentParser:
    """The commands and their options (``main``'s)."""
    parser = argparse.ArgumentParser(prog="python -m local_stack", description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help="where stack.json/env.json live")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the API, the emulator and the stream poller")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=3000)
    serve.add_argument("--emulator-host", default="127.0.0.1", help="bind address of the AWS emulator")
    serve.add_argument("--emulator-port", type=int, default=0, help="0: a free port")
    serve.add_argument(
        "--vpc-endpoint-port",
        type=int,
        default=0,
        help="port of the listener that stands for the stack's DynamoDB gateway endpoint (0: a free port)",
    )
    serve.add_argument("--env-endpoint", help="AWS_ENDPOINT_OVERRIDE written to env.json (default: the emulator's URL)")
    serve.add_argument("--no-seed", action="store_true", help="don't create the demo tenants")
    serve.add_argument(
        "--cells",
        metavar="N",
        help="run N cells (2 to 8), their control plane and the router on the port (docs/cells.md)",
    )
    serve.add_argument(
        "--parameter",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a template parameter, as sam deploy --parameter-overrides (e.g. BasicRateLimit=2); repeatable",
    )
    serve.add_argument(
        "--user-pool-url",
        help="the emulator holding the shared user pool that --parameter UserPoolId= and UserPoolClientId= name "
        "(a cell's: docs/cells.md); default: the stack's own pool",
    )
    serve.add_argument(
        "--tenant-isolation",
        action="store_true",
        help="run the template's tenant isolation variant (make build TENANT_ISOLATION=1): every API function "
        "in Lambda's tenant isolation mode, one tenant per execution environment (docs/isolation.md)",
    )
    serve.add_argument(
        "--authorizer-cache-seconds",
        type=float,
        help="the authorizer's result cache (default: the template's ReauthorizeEvery)",
    )
    serve.add_argument(
        "--usage-plan-refresh-seconds", type=float, default=1.0, help="how long a key's usage plan is kept"
    )
    serve.add_argument(
        "--no-capacity-model",
        action="store_true",
        help="answer ReturnConsumedCapacity with moto's constant, not the capacity model (the benchmark's control)",
    )
    serve.add_argument(
        "--environments-per-function",
        type=int,
        default=1,
        help="execution environments (processes) a function may have at once under concurrent load (default 1)",
    )

    serve.add_argument(
        "--queue-concurrency",
        type=int,
        help="concurrent invocations of each SQS event source, at most (its MaximumConcurrency if lower; each is a "
        "process; default 4; the benchmark runs the template's)",
    )

    token = commands.add_parser("token", help="print an ID token (creates the user if needed)")
    token.add_argument("--tenant", required=True)
    token.add_argument("--user", required=True)
    token.add_argument("--admin", action="store_true")

    board = commands.add_parser("onboard", help="create a tenant's users and admins")
    board.add_argument("--tenant", required=True)
    # Each value may hold several names, split at blanks (`make onboard USERS="a b"` passes one).
    board.add_argument("--users", nargs="*", default=[], help="user names (a value may hold several, blank-separated)")
    board.add_argument("--admins", nargs="*", default=[], help="admin names (likewise)")
    board.add_argument("--stack", help="a deployed stack's name (default: the running local stack)")
    board.add_argument("--region", help="the deployed stack's region (default: your AWS configuration)")
    board.add_argument(
        "--control-plane", help="deployed cells: the control plane's stack (places the tenant; instead of --stack)"
    )

    commands.add_parser("events", help="rewrite the sample events with fresh tokens (for sam local invoke)")

    drain = commands.add_parser("drain", help="wait until the stream, queues and log subscriptions have caught up")
    drain.add_argument("--timeout", type=float, default=60.0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = command_line().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "token":
            return _token(args)
        if args.command == "onboard":
            return _onboard(args)
        if args.command == "events":
            return _events(args)
        return _drain(args)
    except (
        UserPoolError,
        InvalidTenantId,
        TenantRecordError,
        NotRunning,
        TargetError,
        CellsError,
        ClientError,
        BotoCoreError,
    ) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1


class NotRunning(RuntimeError):
    pass


def _running_state(state_dir: Path) -> dict[str, Any]:
    state = read_state(state_dir)
    if state is None:
        raise NotRunning("the local stack is not running: start it with `make dev`")
    return state


def _local_pool(state: dict[str, Any]) -> UserPool:
    return UserPool(
        cognito=operator_client(state.get("user_pool_url", state["emulator_url"]), "cognito-idp", state["region"]),
        pool_id=state["user_pool_id"],
        client_id=state["user_pool_client_id"],
        admin_group=state["admin_group"],
    )


def _logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    for noisy in ("werkzeug", "botocore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _stop_on_signals() -> threading.Event:
    """Set by Ctrl-C (SIGINT) or SIGTERM."""
    stopping = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    return stopping


def _wait_for(stopping: threading.Event) -> None:
    # Wake up regularly: the kernel may deliver SIGINT to a server thread, and
    # Python runs signal handlers only when the main thread runs bytecode.
    while not stopping.wait(0.2):
        pass


def _serve(args: argparse.Namespace) -> int:
    from local_stack.stack import LocalStack, StackOptions

    if args.cells is not None:
        return _serve_cells(args)
    _logging()
    options = StackOptions(
        host=args.host,
        port=args.port,
        emulator_host=args.emulator_host,
        emulator_port=args.emulator_port,
        vpc_endpoint_port=args.vpc_endpoint_port,
        state_dir=args.state_dir,
        env_endpoint=args.env_endpoint,
        seed=not args.no_seed,
        parameters=_parameters(args.parameter),
        user_pool_url=args.user_pool_url,
        tenant_isolation=args.tenant_isolation,
        authorizer_cache_seconds=args.authorizer_cache_seconds,
        usage_plan_refresh_seconds=args.usage_plan_refresh_seconds,
        environments_per_function=args.environments_per_function,
        capacity_model=not args.no_capacity_model,
    )
    if args.queue_concurrency is not None:
        options.queue_concurrency = args.queue_concurrency
    stopping = _stop_on_signals()
    stack = LocalStack(options)
    try:
        stack.start()
    except OSError as exc:
        sys.stderr.write(f"error: cannot listen on {args.host}:{args.port} ({exc}); try PORT=<another> make dev\n")
        return 1
    except (RuntimeError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    try:
        sys.stdout.write(quickstart(stack, args.state_dir))
        sys.stdout.flush()
        _wait_for(stopping)
    finally:
        logging.getLogger("local_stack").info("stopping")
        stack.stop()
    return 0


# What a set of cells decides for each of its cells (the rest of serve's options reach every cell).
CELL_PARAMETERS = ("CellId", "UserPoolId", "UserPoolClientId")
# serve's options that name one stack's own ports or pool: not for a set of cells.
SINGLE_STACK_OPTIONS = ("user_pool_url", "env_endpoint", "emulator_port", "vpc_endpoint_port")
# serve's options passed on to every cell as given: (attribute, option, takes a value).
CELL_OPTIONS = (
    ("tenant_isolation", "--tenant-isolation", False),
    ("no_capacity_model", "--no-capacity-model", False),
    ("authorizer_cache_seconds", "--authorizer-cache-seconds", True),
    ("usage_plan_refresh_seconds", "--usage-plan-refresh-seconds", True),
    ("environments_per_function", "--environments-per-function", True),
    ("queue_concurrency", "--queue-concurrency", True),
)


def cells_count(value: str) -> int:
    """``--cells``' value: how many cells, 2 to 8 (:class:`ValueError` otherwise)."""
    from local_stack.cells import MAX_CELLS, MIN_CELLS

    count = int(value) if value.isascii() and value.isdigit() else 0
    if not MIN_CELLS <= count <= MAX_CELLS:
        raise ValueError(f"--cells takes {MIN_CELLS} to {MAX_CELLS} (cells), not {value!r}")
    return count


def cell_options(args: argparse.Namespace) -> list[str]:
    """The serve options of ``args`` that every cell gets as given."""
    defaults = command_line().parse_args(["serve"])
    found: list[str] = []
    for attribute, option, takes_value in CELL_OPTIONS:
        value = getattr(args, attribute)
        if value != getattr(defaults, attribute):
            found += [option, str(value)] if takes_value else [option]
    return found


def _serve_cells(args: argparse.Namespace) -> int:
    from local_stack.cells import CellFailed, CellSet, CellSetOptions

    try:
        count = cells_count(args.cells)
        parameters = _parameters(args.parameter)
        defaults = command_line().parse_args(["serve"])
        refused = [
            f"--{name.replace('_', '-')}"
            for name in SINGLE_STACK_OPTIONS
            if getattr(args, name) != getattr(defaults, name)
        ]
        refused += [f"--parameter {name}=" for name in CELL_PARAMETERS if name in parameters]
        if refused:
            raise ValueError(f"{', '.join(refused)}: the set of cells decides it for each cell, not with --cells")
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    _logging()
    stopping = _stop_on_signals()
    options = CellSetOptions(
        cells=count,
        host=args.host,
        port=args.port,
        state_dir=args.state_dir,
        seed=not args.no_seed,
        parameters=parameters,
        cell_options=cell_options(args),
    )
    cells = CellSet(options)
    try:
        cells.start()
    except OSError as exc:
        sys.stderr.write(f"error: cannot listen on {args.host}:{args.port} ({exc}); try PORT=<another> make dev\n")
        return 1
    except (RuntimeError, ValueError, CellFailed) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    try:
        sys.stdout.write(cells_quickstart(cells))
        sys.stdout.flush()
        _wait_for(stopping)
    finally:
        logging.getLogger("local_stack").info("stopping")
        cells.stop()
    return 0


def _parameters(pairs: list[str]) -> dict[str, str]:
    parameters: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"error: --parameter takes NAME=VALUE, got {pair!r}")
        parameters[name] = value
    return parameters


# How `make dev` turns Lambda's tenant isolation mode on (docs/isolation.md).
ISOLATION_OPTION = "make dev ARGS=--tenant-isolation"


def tenant_isolation_line(specs: Iterable[FunctionSpec]) -> str:
    """The banner's line on Lambda's tenant isolation mode: on for which functions
    (their ``TenancyConfig``, as the template's parameters decided), or off and how to turn it on."""
    isolated = [spec.logical_id for spec in specs if spec.tenant_isolation]
    if not isolated:
        return (
            "Lambda tenant isolation mode: off "
            f"(an environment may serve several tenants; {ISOLATION_OPTION} turns it on)"
        )
    return (
        f"Lambda tenant isolation mode: ON for {len(isolated)} functions "
        "(one tenant per execution environment, a cold start per tenant and function)"
    )


def try_it(api: str, tenant: str, user: str, admin: str) -> str:
    """The banner's walkthrough: a token, a ticket created and listed, the aggregates."""
    return f"""Try it (in another terminal):
  TOKEN=$(make -s token TENANT={tenant} USER={user})
  curl -s -X POST {api}/tickets -H "Authorization: Bearer $TOKEN" \\
       -H 'Content-Type: application/json' -d '{{"title": "Printer on fire"}}'
  curl -s {api}/tickets -H "Authorization: Bearer $TOKEN"
  ADMIN_TOKEN=$(make -s token TENANT={tenant} USER={admin} ADMIN=1)
  curl -s {api}/aggregates -H "Authorization: Bearer $ADMIN_TOKEN"   # follows the stream (~2 s)

Ctrl-C stops everything.
"""


def _shown(path: Path) -> Path:
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def quickstart(stack: LocalStack, state_dir: Path) -> str:
    api = stack.api_url
    specs = stack.runtime.specs.values() if stack.runtime is not None else ()
    tenants = stack.options.demo_tenants if stack.options.seed else {}
    demo = ", ".join(f"{tenant} (user {user}, admin {admin})" for tenant, (user, admin) in tenants.items())
    tenant, (user, admin) = next(iter(tenants.items()), ("acme", ("alice", "ada")))
    env_file = _shown(state_dir / ENV_FILE)
    return f"""
Support tickets API on {api}  (template.yaml; no AWS account, no Docker)
  AWS emulator {stack.emulator.url} (moto + IAM guard, identity pool)
  {tenant_isolation_line(specs)}
  sam local invoke <Function> -e {env_file.parent / EVENTS_DIR}/<file>.json --env-vars {env_file}
    (docs/local-stack.md: "sam local invoke against the local stack"; make events: new tokens)
  demo tenants: {demo or "none (--no-seed)"}

{try_it(api, tenant, user, admin)}"""


def cells_quickstart(cells: CellSet) -> str:
    """The banner of ``make dev CELLS=<n>``: the router's URL, the cells, where each demo tenant is."""
    api = cells.api_url
    tenants = cells.options.demo_tenants if cells.options.seed else {}
    lines = [
        f"  {cell.cell_id}  {cell.api_url}  ({_shown(cell.state_dir)}; "
        f"tenants: {', '.join(t for t, c in cells.placed.items() if c == cell.cell_id) or 'none yet'})"
        for cell in cells.cells
    ]
    demo = ", ".join(
        f"{tenant} in {cells.placed[tenant]} (user {user}, admin {admin})"
        for tenant, (user, admin) in tenants.items()
        if tenant in cells.placed
    )
    tenant, (user, admin) = next(
        ((t, users) for t, users in tenants.items() if t in cells.placed), ("acme", ("alice", "ada"))
    )
    assert cells.control is not None
    cell_lines = "\n".join(lines)
    return f"""
Support tickets API on {api}  ({len(cells.cells)} cells behind the router; no AWS account, no Docker)
  router: router/edge_router.js (the control plane's CloudFront function) run by router/local_router.cjs
  control plane {cells.control.url} (the shared user pool, the directory)
{cell_lines}
  demo tenants: {demo or "none (--no-seed)"}
  make cells: each cell's tenants, usage and room; make token and make onboard place a new tenant
    in the cell with the most room (docs/cells.md)

{try_it(api, tenant, user, admin)}"""


def _token(args: argparse.Namespace) -> int:
    validate_tenant_id(args.tenant)  # before looking for the stack: a bad value is its own error
    validate_username(args.user)
    state = _running_state(args.state_dir)
    pool = _local_pool(state)

    # A tenant that has no record or API key yet gets them, as `make onboard` does
    # (and an offboarded one is refused before any user is made).
    def onboard_in(cell_state: dict[str, Any]) -> None:
        admin = local_admin(cell_state)
        admin.onboardable(args.tenant)
        ensure_user(pool, args.user, args.tenant, admin=args.admin)
        admin.ensure(args.tenant)

    if CELLS_KEY in state:
        refuse_taken(pool, args.tenant, [args.user])
        _in_its_cell(state, args.tenant, onboard_in)
    else:
        onboard_in(state)
    sys.stdout.write(id_token(pool, args.user) + "\n")
    return 0


def _in_its_cell[Onboarded](
    state: dict[str, Any], tenant_id: str, onboard: Callable[[dict[str, Any]], Onboarded]
) -> tuple[str, Onboarded]:
    """With cells (``make dev CELLS=<n>``): the tenant onboarded in the cell the
    directory places it in, or placed first in the cell with the most room
    (:func:`ops.cells.place_new`: the directory, then the cell, then the router's store).
    ``onboard`` gets that cell's state. A tenant the directory places nowhere is first
    refused if any cell offboarded it (the directory forgets an offboarded tenant; its
    id is never used again)."""
    from ops.cells import place_new
    from ops.control_plane import local_control_plane

    def cell_state(cell_id: str) -> dict[str, Any]:
        return _cell_state(state, cell_id)

    plane = local_control_plane(state)
    if plane is None:
        raise TargetError("the local stack runs no cells: start it with `make dev CELLS=2`")
    directory, routes = plane
    if directory.placement(tenant_id) is None:
        for cell_id in sorted(state[CELLS_KEY]):
            local_admin(cell_state(cell_id)).onboardable(tenant_id)
    placed, result = place_new(directory, routes, tenant_id, lambda cell_id: onboard(cell_state(cell_id)))
    return placed.cell, result


def _in_a_deployed_cell[Onboarded](
    args: argparse.Namespace, onboard: Callable[[argparse.Namespace], Onboarded]
) -> tuple[str, Onboarded]:
    """With deployed cells (``--control-plane``): as :func:`_in_its_cell`, the directory
    and the store the deployed control plane's; ``onboard`` gets the cell's stack as
    the operator commands' target (the stack and Region its directory item names)."""
    from ops.cells import place_new
    from ops.control_plane import cell_stack_target, control_plane

    target = argparse.Namespace(local=False, control_plane=args.control_plane, region=args.region)
    plane = control_plane(target)
    assert plane is not None  # a control plane is named
    directory, routes = plane
    if directory.placement(args.tenant) is None:
        for known in directory.cells():
            _target_admin(cell_stack_target(known)).onboardable(args.tenant)

    def in_cell(cell_id: str) -> Onboarded:
        cell = directory.cell(cell_id)
        if cell is None:
            raise CellsError(f"no cell {cell_id!r} in the directory")
        return onboard(cell_stack_target(cell))

    placed, result = place_new(directory, routes, args.tenant, in_cell)
    return placed.cell, result


def _events(args: argparse.Namespace) -> int:
    """The sample events with fresh tokens of the sample tenant's users (the shared pool's,
    with cells) and credentials from its cell's identity pool, naming its cell's stream:
    with ``make dev CELLS=<n>``, the cell the directory places it in, not the default one."""
    from ops.sample_events import TENANT, write_local
    from ops.stack_target import tenants_cell
    from ops.users import tenant_credentials

    state = _running_state(args.state_dir)
    cell = _cell_state(state, tenants_cell(state, TENANT)) if CELLS_KEY in state else state
    identity_pool = operator_client(cell["emulator_url"], "cognito-identity", cell["region"])

    def credentials_for(token: str) -> TenantCredentials:
        return tenant_credentials(identity_pool, cell["identity_pool_id"], state["user_pool_provider_name"], token)

    for path in write_local(args.state_dir / EVENTS_DIR, _local_pool(state), credentials_for, cell["stream_arn"]):
        shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
        sys.stdout.write(f"{shown}\n")
    return 0


def _cell_state(state: dict[str, Any], cell_id: str) -> dict[str, Any]:
    """The running state of ``cell_id`` of the local set ``state``."""
    found = read_state(Path(state[CELLS_KEY][cell_id]))
    if found is None:
        raise NotRunning(f"cell {cell_id} of the local set is not running: restart `make dev CELLS=<n>`")
    return found


def names(values: list[str]) -> list[str]:
    """The user names of ``--users``/``--admins`` values, each split at blanks (user names
    have none): ``make onboard USERS="a b"`` passes its list as one argument, never
    through a shell's word splitting (``ops.users`` validates every name)."""
    return [name for value in values for name in value.split()]


def _onboard(args: argparse.Namespace) -> int:
    users, admins = names(args.users), names(args.admins)
    validate_tenant_id(args.tenant)  # before looking for the stack: a bad value is its own error
    for username in [*users, *admins]:
        validate_username(username)
    if args.stack and args.control_plane:
        raise TargetError("--control-plane places the tenant in one of its cells: leave out --stack")
    deployed = args.stack or args.control_plane
    state = None if deployed else _running_state(args.state_dir)
    if state is None:
        pool = _deployed_pool(deployed, args.region)
        where = f"stack {args.stack}"
    else:
        pool = _local_pool(state)
        where = "the local stack"

    def onboard_with(admin: TenantAdmin) -> tuple[list[Outcome], TenantConfig]:
        admin.onboardable(args.tenant)  # a tenant being or once offboarded: refused before any user is made
        outcomes = onboard(pool, args.tenant, users, admins)
        return outcomes, admin.ensure(args.tenant)

    if args.control_plane:
        refuse_taken(pool, args.tenant, [*users, *admins])
        cell, (outcomes, record) = _in_a_deployed_cell(args, lambda target: onboard_with(_target_admin(target)))
        where = f"cell {cell} of control plane {args.control_plane}"
    elif state is not None and CELLS_KEY in state:
        refuse_taken(pool, args.tenant, [*users, *admins])
        cell, (outcomes, record) = _in_its_cell(
            state, args.tenant, lambda cell_state: onboard_with(local_admin(cell_state))
        )
        where = f"cell {cell} of the local set"
    else:
        outcomes, record = onboard_with(_tenant_admin(args))
    sys.stdout.write(f"tenant {args.tenant} in {where} (user pool {pool.pool_id}):\n")
    sys.stdout.write(
        f"  record: {record.shards} shard(s), tier {record.tier}, {record.status.value}, API key {record.api_key_id}\n"
    )
    for outcome in outcomes:
        role = "admin" if outcome.admin else "user"
        if outcome.created:
            detail = f"created, temporary password {outcome.temporary_password} (to change at first sign-in)"
        else:
            detail = "already there"
        sys.stdout.write(f"  {outcome.username:<20} {role:<6} {detail}\n")
    return 0


def _tenant_admin(args: argparse.Namespace) -> TenantAdmin:
    """The tenant records of the same stack (``make tenant`` shows and changes them)."""
    target = argparse.Namespace(
        local=not args.stack, stack=args.stack, region=args.region, local_state=str(args.state_dir / STATE_FILE)
    )
    return _target_admin(target)


def _target_admin(target: argparse.Namespace) -> TenantAdmin:
    """The tenant records and API keys of the stack ``target`` names (:mod:`ops.stack_target`)."""
    from ops.tenants import TenantAdmin

    client, table_name = dynamodb_target(target)
    return TenantAdmin(client, table_name, keys=api_keys_target(target))


def _deployed_pool(stack_name: str, region: str | None) -> UserPool:
    """The user pool of a deployed stack (a cell's is the control plane's), from its
    CloudFormation outputs. A cell's stack alone is refused: the tenant would be in no
    directory, so the router would never send it there."""
    session = boto3.Session(region_name=region)
    stacks = session.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {item["OutputKey"]: item["OutputValue"] for item in stacks[0].get("Outputs", [])}
    if outputs.get("CellId"):
        raise UserPoolError(
            f"stack {stack_name} is cell {outputs['CellId']}: onboard through the control plane "
            "(--control-plane <stack>, CONTROL_PLANE=), which places the tenant in a cell; nothing written"
        )
    if "UserPoolId" not in outputs:
        raise UserPoolError(f"stack {stack_name} has no UserPoolId output")
    return UserPool(
        cognito=session.client("cognito-idp"),
        pool_id=outputs["UserPoolId"],
        client_id=outputs.get("UserPoolClientId", ""),
    )


# What moves on its own after a request, each feeding the next: the stream (counts,
# the audit trail, the webhook fan-out), the queues (webhook deliveries) and the log
# subscriptions (usage lines to the metering function).
DRAINED_IN_ORDER = ("stream", "queues", "logs")
# Rounds until one finds everything quiet: a delivery's usage lines, a usage counter's write...
MAX_DRAIN_ROUNDS = 5


def _drain(args: argparse.Namespace) -> int:
    """The running stack drained; with cells (``make dev CELLS=<n>``), every cell, one after
    another, each cell's outcome under its id in ``cells`` (the set's own state is its
    default cell's: draining it alone would leave the others moving)."""
    state = _running_state(args.state_dir)
    deadline = time.monotonic() + args.timeout
    if CELLS_KEY in state:
        drained = {cell: _drained(_cell_state(state, cell), deadline) for cell in sorted(state[CELLS_KEY])}
        result: dict[str, Any] = {"drained": all(each["drained"] for each in drained.values()), "cells": drained}
    else:
        result = _drained(state, deadline)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["drained"] else 1


def _drained(state: dict[str, Any], deadline: float) -> dict[str, Any]:
    """One stack drained by ``deadline`` (:func:`time.monotonic`): what each source delivered."""
    result: dict[str, Any] = {"drained": False}
    for rounds in range(1, MAX_DRAIN_ROUNDS + 1):
        before = result
        result = {"drained": True, "rounds": rounds}
        for name in DRAINED_IN_ORDER:
            timeout = max(0.0, deadline - time.monotonic())
            result[name] = control_call(state, f"{name}/drain?timeout={timeout:.1f}", timeout=timeout + 10)
            result["drained"] = result["drained"] and bool(result[name].pop("drained", False))
        if not result["drained"] or all(result[name] == before.get(name) for name in DRAINED_IN_ORDER):
            break  # out of time, or a whole round in which nothing moved
    return result


if __name__ == "__main__":
    code = main()
    # Everything the stack started is stopped and its state files are gone: the
    # interpreter's teardown of moto's backends would only add a second to every stop.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
