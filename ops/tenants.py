"""The tenant record, for operators: show it, change a tenant's tier or status, reshard it.

    python -m ops.tenants --tenant acme [--shards 8] [--tier premium] [--status SUSPENDED]
                          [--placement pool|dedicated] (--local | --stack <s> [--region <r>])
                          [--cell <cell> [--control-plane <stack>] [--cell-stack <cell>=<stack>]...]

Prints the tenant's record as JSON (its API key's id, not its value), after
making the changes asked for. A bad value (a tenant id, a shard count outside
1..64, an unknown tier or status) or a tenant that has no record is a one-line
error and exit status 1, before anything is written: this command changes
tenants, ``make onboard`` creates them (a typo must not make a new tenant).

**Tiers**: any change (and onboarding) also makes sure the tenant has its API
key, in its tier's usage plan and no other (``ops.api_keys``). A tier change
writes the record, then moves the key: API Gateway applies the new plan's
limits to the tenant's next requests (the key, hence the authorizer's cached
answers, stays the same).

**Suspending** (``--status SUSPENDED``) makes every request of the tenant
answer ``403 TENANT_SUSPENDED``, its data untouched; ``--status ACTIVE``
restores access. Functions keep a tenant record for up to
``TENANT_CONFIG_TTL_SECONDS`` (30 s): that is how long a change takes to reach
every container (the command says so on stderr).

**Placement** (``--placement pool|dedicated``) moves the tenant's data
online between the pool table and a table of its own (made first if it has
none: ``ops.dedicated``), with progress on stderr; run again, it resumes an
interrupted move, and the tenant's current placement while a move has not yet
switched rolls it back (``ops.move`` says how). A tenant whose data is moving
can't be resharded or offboarded (one line, exit 1, nothing written), nor can
a tenant being resharded or offboarded move.

A tenant being offboarded (its record has ``offboarding_since``) can't be
changed at all, its tier and status included: the change would give it a new
API key that the offboarding, which retired the old one, never retires. The
command refuses (one line, exit 1, nothing written); showing the record works.

**A tenant id is never used again.** Once offboarded, a tenant's usage ledger
stays in the pool table (the operator's record of what it used) and its API
key stays as a tombstone (``ops.api_keys``); onboarding the id again
(:meth:`TenantAdmin.ensure`, ``make onboard``, ``make token``) is refused with
one line (:class:`TenantOffboarded`, exit 1, nothing written): a new tenant
under the id would read the old ledger through ``GET /usage``.

**Resharding** changes where a tenant's tickets sit in GSI1 without ever
hiding one from a list, and without a Scan. Every function keeps a tenant
record for up to ``TENANT_CONFIG_TTL_SECONDS``; so the change goes in three
phases, each waiting that long (plus a margin) for every container to see it:

1. *widen*: readers cover the old and the new shard count; writers still use the old;
2. *switch*: writers use the new count;
3. *migrate*: every ticket still under a key that only the old count uses is
   moved to its key under the new count (one conditional UpdateItem each:
   only if it is still where the query found it), found by querying those
   keys on GSI1, until they are empty; then readers drop the old count.
   Its tickets are read and moved in the table the tenant lives in: the pool
   table, or its own (a dedicated tenant's; its record, in the pool table,
   names it).

At every moment every container reads every key any container writes. The
record says which phase a reshard is in (``target_shards``, ``read_shards``),
so a reshard that was interrupted continues where it stopped when the command
runs again (with or without ``--shards``); asking for another count while one
runs finishes the running one first. A move is a write to the ticket summary
that changes only its GSI1 key: the stream aggregator sees the same status
before and after and counts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from ops.api_keys import ApiKeyError, ApiKeys, KeyRetired, offboarded_at
from ops.cell_move import CellMover
from ops.control_plane import LOCAL_HAS_ITS_OWN, NO_CONTROL_PLANE, add_control_plane_argument
from ops.dedicated import DeployError, deploy_to_aws, deploy_to_local
from ops.move import DEFAULT_DRAIN_SECONDS, DEFAULT_RATE, DEFAULT_WORKERS, MAX_MOVE_WORKERS, MoveError, Mover
from ops.stack_target import (
    TargetError,
    _local_state,
    add_target_arguments,
    api_keys_target,
    dynamodb_target,
)
from ops.tenant_data import offboarded_key
from support_tickets.core import keys
from support_tickets.core.digits import is_digits
from support_tickets.core.errors import ApiError
from support_tickets.core.keys import TicketStatus
from support_tickets.core.settings import DEFAULT_TENANT_CONFIG_TTL_SECONDS
from support_tickets.data.placement import WRITER_TIMEOUT_SECONDS, Placement, data_table
from support_tickets.data.table import OwnClient, TenantTable, to_item
from support_tickets.data.tenant_registry import TIERS, TenantConfig, TenantStatus, read_tenant_config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from ops.cells import MoveDirectory

PHASE_MARGIN_SECONDS = 5.0
MIGRATION_ROUNDS = 30  # GSI1 is eventually consistent: query the old keys again until they are empty


class TenantRecordError(ValueError):
    """An operator asked for something the tenant record can't hold."""


class NoSuchTenant(TenantRecordError):
    """The tenant has no record: never onboarded, or offboarded."""

    def __init__(self, tenant_id: str) -> None:
        super().__init__(f"no tenant {tenant_id!r}: it has no tenant record (make onboard creates tenants)")


def existing_record(client: DynamoDBClient, table_name: str, tenant_id: str) -> TenantConfig:
    """The stored record of ``tenant_id``; :class:`NoSuchTenant` if it has none.
    What every operator command but onboarding starts with: a typo writes nothing."""
    record = read_tenant_config(TenantTable(tenant_id, table_name, OwnClient(client)))
    if not record.version:
        raise NoSuchTenant(tenant_id)
    return record


class TenantOffboarded(TenantRecordError):
    """The tenant id was offboarded (its API key is a tombstone, its usage
    ledger has the offboarding's note): it is never onboarded again."""

    def __init__(self, tenant_id: str, at: int) -> None:
        when = f" at {datetime.fromtimestamp(at, UTC).isoformat(timespec='seconds')}" if at else ""
        super().__init__(
            f"tenant {tenant_id} was offboarded{when}: a tenant id is never used again (its usage ledger and "
            "API key are kept); nothing changed, onboard the tenant under a new id"
        )


class RecordChanged(RuntimeError):
    """Somebody else changed the tenant record meanwhile: nothing was written."""


class MoveRunning(RecordChanged):
    """The tenant's data is moving between tables: a reshard or an offboarding
    must wait for the move (or its rollback) to end. Nothing was written."""

    def __init__(self, record: TenantConfig) -> None:
        super().__init__(
            f"tenant {record.tenant_id} is moving to {record.move_to} ({record.move_phase}): nothing changed; "
            f"finish the move (make tenant TENANT={record.tenant_id} PLACEMENT={record.move_to}) or roll it back "
            f"(PLACEMENT={record.placement}) first"
        )


Progress = Callable[[str], None]


@dataclass
class TenantAdmin:
    client: DynamoDBClient
    table_name: str
    phase_seconds: float = DEFAULT_TENANT_CONFIG_TTL_SECONDS + WRITER_TIMEOUT_SECONDS + PHASE_MARGIN_SECONDS
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    progress: Progress = field(default=lambda message: None)
    # The stack's API keys and usage plans; without them, records only.
    keys: ApiKeys | None = None

    def record(self, tenant_id: str) -> TenantConfig:
        return read_tenant_config(TenantTable(tenant_id, self.table_name, OwnClient(self.client)))

    def ensure(self, tenant_id: str) -> TenantConfig:
        """The tenant's record, created with the defaults if it has none, and
        its API key in its tier's usage plan; refused, nothing written, for a
        tenant being or already offboarded (:meth:`onboardable`)."""
        current = self.onboardable(tenant_id)
        if not current.version:
            current = self._write(current, {})
        return self.ensure_key(current)

    def onboardable(self, tenant_id: str) -> TenantConfig:
        """The tenant's record (the defaults if it has none), if the tenant may
        be onboarded: :class:`TenantRecordError` if it is being offboarded,
        :class:`TenantOffboarded` if it was (its API key a tombstone, or its
        usage ledger noted ``OFFBOARDED``: what a stack without API keys
        has). Reads only: what ``make onboard`` asks before it creates users."""
        keys.validate_tenant_id(tenant_id)
        current = self.record(tenant_id)
        _refuse_if_offboarding(current)
        if not current.version:
            at = self._offboarded_at(tenant_id)
            if at is not None:
                raise TenantOffboarded(tenant_id, at)
        return current

    def _offboarded_at(self, tenant_id: str) -> int | None:
        """When a tenant without a record was offboarded, or ``None``."""
        if self.keys is not None:
            key = self.keys.describe(tenant_id)
            at = offboarded_at(key) if key is not None else None
            if at is not None:
                return at
        found = self.client.get_item(TableName=self.table_name, Key=offboarded_key(tenant_id), ConsistentRead=True)
        note = found.get("Item")
        if note is None:
            return None
        value = note.get("offboarded_at", {}).get("N", "0")
        return int(value) if is_digits(value) else 0

    def set_tier(self, tenant_id: str, tier: str) -> TenantConfig:
        if tier not in TIERS:
            raise TenantRecordError(f"unknown tier {tier!r} (one of {', '.join(TIERS)})")
        current = self.record(tenant_id)
        _refuse_if_offboarding(current)
        if current.tier != tier or not current.version:
            current = self._write(current, {"tier": tier})
        return self.ensure_key(current)

    def ensure_key(self, current: TenantConfig) -> TenantConfig:
        """The tenant's API key exists, is in its tier's plan only, and the
        record names it."""
        if self.keys is None:
            return current
        _refuse_if_offboarding(current)
        try:
            key_id, value = self.keys.ensure(current.tenant_id, current.api_key_id)
        except KeyRetired as exc:
            raise TenantOffboarded(current.tenant_id, exc.at) from exc
        if self.keys.place(key_id, current.tier):
            self.progress(f"{current.tenant_id}: API key {key_id} now in the {current.tier} usage plan")
        if (current.api_key_id, current.api_key) != (key_id, value):
            current = self._write(current, {"api_key_id": key_id, "api_key": value})
        return current

    def set_status(self, tenant_id: str, status: TenantStatus) -> TenantConfig:
        """Suspend or reactivate; reaches every function within the cache TTL."""
        current = self.record(tenant_id)
        if current.offboarding_since is not None and status is not TenantStatus.SUSPENDED:
            raise TenantRecordError(f"tenant {tenant_id} is being offboarded: it stays suspended")
        if current.status is status and current.version:
            return current
        updated = self._write(current, {"status": status, "changed_at": self._now()})
        self.progress(
            f"{tenant_id} is {status.value}: every function sees it within TENANT_CONFIG_TTL_SECONDS "
            f"({DEFAULT_TENANT_CONFIG_TTL_SECONDS} s unless your functions set it)"
        )
        return updated

    def write(self, current: TenantConfig, changes: dict[str, Any]) -> TenantConfig:
        """Store ``current`` with ``changes``, only if nobody wrote the record meanwhile."""
        return self._write(current, changes)

    def wait_out(self, since: int) -> None:
        """Wait until every function has seen a record written at ``since``."""
        remaining = since + self.phase_seconds - self.clock()
        if remaining > 0:
            self.progress(f"waiting {remaining:.0f} s for every function to see the change")
            self.sleep(remaining)

    def reshard(self, tenant_id: str, shards: int | None) -> TenantConfig:
        """Finish a reshard in progress, then (if ``shards`` differs) run one to ``shards``."""
        if shards is not None:
            keys.validate_shard_count(shards)
        current = self.record(tenant_id)
        if current.resharding:
            current = self._finish(current)
        if shards is None or shards == current.shards:
            return current
        self.progress(f"resharding {tenant_id}: {current.shards} -> {shards} shards")
        widened = self._write(
            current,
            {"read_shards": (current.shards, shards), "target_shards": shards, "changed_at": self._now()},
        )
        return self._finish(widened)

    def _now(self) -> int:
        return math.ceil(self.clock())

    # ------------------------------------------------------------ phases
    def _finish(self, current: TenantConfig) -> TenantConfig:
        target = current.target_shards if current.target_shards is not None else current.shards
        if current.shards != target:  # widened: wait until every reader covers the target, then switch
            self._wait_out(current)
            self.progress(f"writers now use {target} shards")
            current = self._write(current, {"shards": target, "changed_at": self._now()})
        self._wait_out(current)  # until no container writes with the old count any more
        moved = self._migrate(current)
        self.progress(f"moved {moved} tickets; readers now cover {target} shards only")
        return self._write(current, {"read_shards": (target,), "target_shards": None, "changed_at": self._now()})

    def _wait_out(self, current: TenantConfig) -> None:
        self.wait_out(current.changed_at)

    def _migrate(self, current: TenantConfig) -> int:
        tenant = current.tenant_id
        # Its tickets are where it lives: the pool, or its own table (a move never runs meanwhile).
        table = data_table(current, self.table_name)
        moved = 0
        for status in TicketStatus:
            keep = set(keys.status_partitions(tenant, status, [current.shards]))
            stale = [p for p in keys.status_partitions(tenant, status, current.read_shards) if p not in keep]
            for partition in stale:
                for _ in range(MIGRATION_ROUNDS):
                    rows = self._rows(table, partition)
                    if not rows:
                        break
                    for pk in rows:
                        moved += self._move(table, tenant, pk, status, partition, shards=current.shards)
                    self.progress(f"{partition}: {moved} tickets moved so far")
                else:
                    raise RuntimeError(f"{partition} did not empty; run the command again to continue")
        return moved

    def _rows(self, table: str, partition: str) -> list[str]:
        query: dict[str, Any] = {
            "TableName": table,
            "IndexName": keys.GSI1_NAME,
            "KeyConditionExpression": "tenant_status = :ts",
            "ExpressionAttributeValues": {":ts": {"S": partition}},
            "ProjectionExpression": "pk",
        }
        found: list[str] = []
        while True:
            page = self.client.query(**query)
            found.extend(item["pk"]["S"] for item in page["Items"])
            if "LastEvaluatedKey" not in page:
                return found
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _move(self, table: str, tenant: str, pk: str, status: TicketStatus, partition: str, *, shards: int) -> int:
        prefix = keys.tenant_prefix(tenant) + "TICKET#"
        if not pk.startswith(prefix):
            return 0  # not this tenant's item (a forged index key): leave it to an investigation
        ticket_id = pk[len(prefix) :]
        try:
            self.client.update_item(
                TableName=table,
                Key={"pk": {"S": pk}, "sk": {"S": keys.SUMMARY_SK}},
                UpdateExpression="SET tenant_status = :new",
                ConditionExpression="tenant_status = :old",
                ExpressionAttributeValues={
                    ":new": {"S": keys.ticket_tenant_status(tenant, status, ticket_id, shards)},
                    ":old": {"S": partition},
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return 0  # changed or deleted meanwhile: its writer placed it already
            raise
        return 1

    # ------------------------------------------------------------ storage
    def _write(self, current: TenantConfig, changes: dict[str, Any]) -> TenantConfig:
        """Store ``current`` with ``changes``, only if nobody wrote the record
        meanwhile; never a reshard or an offboarding of a tenant that is moving."""
        if current.moving and any(changes.get(name) is not None for name in ("target_shards", "offboarding_since")):
            raise MoveRunning(current)
        updated = TenantConfig.from_values(
            {**current.values(), **changes, "version": current.version + 1, "tenant_id": current.tenant_id}
        )
        condition = "attribute_not_exists(pk)" if current.version == 0 else "#version = :expected"
        kwargs: dict[str, Any] = {}
        if current.version:
            kwargs = {
                "ExpressionAttributeNames": {"#version": "version"},
                "ExpressionAttributeValues": {":expected": {"N": str(current.version)}},
            }
        try:
            self.client.put_item(
                TableName=self.table_name, Item=to_item(updated.item()), ConditionExpression=condition, **kwargs
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise RecordChanged("the tenant record changed meanwhile; run the command again") from exc
            raise
        return updated


def _refuse_if_offboarding(current: TenantConfig) -> None:
    """An offboarding retired (or is retiring) the tenant's API key and deleted
    its users: a change now would make it a new key, which the offboarding never retires."""
    if current.offboarding_since is not None:
        raise TenantRecordError(
            f"tenant {current.tenant_id} is being offboarded: nothing changed (make offboard finishes it)"
        )


def _to_stderr(message: str) -> None:
    sys.stderr.write(message + "\n")


def _status(value: str) -> TenantStatus:
    try:
        return TenantStatus(value)
    except ValueError:
        raise TenantRecordError(f"unknown status {value!r} (ACTIVE or SUSPENDED)") from None


def _shards(value: str) -> int:
    number = int(value) if is_digits(value) else None
    return keys.validate_shard_count(number)


def _placement(value: str) -> Placement:
    try:
        return Placement(value)
    except ValueError:
        raise TenantRecordError(f"unknown placement {value!r} (pool or dedicated)") from None


def _cell_id(value: str) -> str:
    if not re.fullmatch(keys.TENANT_ID_PATTERN, value):
        raise TenantRecordError(f"not a cell id ([a-z0-9-], 1 to 63 characters): {value!r}")
    return value


def _workers(value: str) -> int:
    number = int(value) if is_digits(value) else 0
    if not 1 <= number <= MAX_MOVE_WORKERS:
        raise TenantRecordError(f"--move-workers must be 1..{MAX_MOVE_WORKERS} (got {value!r})")
    return number


def _number(option: str, value: str, *, zero: bool = False) -> float:
    """A finite number for ``option`` (seconds, items a second), > 0 (or >= 0 with ``zero``)."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0 or (number == 0 and not zero):
        raise TenantRecordError(f"{option} must be a number {'>= 0' if zero else '> 0'} (got {value!r})")
    return number


def _mover(args: argparse.Namespace, admin: TenantAdmin) -> Mover:
    """The mover of this stack's tenants: a dedicated table is made through
    CloudFormation (``--stack``) or by the running local stack (``--local``)."""
    if args.local:
        state = _local_state(args)

        def deploy(tenant_id: str) -> str:
            return deploy_to_local(state, tenant_id)["TableName"]
    else:
        import boto3

        session = boto3.Session(region_name=args.region) if args.region else boto3.Session()
        cloudformation = session.client("cloudformation")

        def deploy(tenant_id: str) -> str:
            return deploy_to_aws(cloudformation, args.stack, tenant_id)["TableName"]

    return Mover(admin, deploy=deploy, local=args.local, **_move_options(args))


def _cell_mover(args: argparse.Namespace) -> CellMover:
    """The mover of a tenant between the cells the command reaches (:mod:`ops.cell_targets`;
    deployed, the directory's cells unless ``--cell-stack`` names them), writing the
    control plane's directory and the router's store after its flip."""
    from ops.cell_targets import cells_of

    def admin(client: DynamoDBClient, table_name: str) -> TenantAdmin:
        made = TenantAdmin(client, table_name, progress=_to_stderr)
        if args.phase_seconds is not None:
            made.phase_seconds = args.phase_seconds
        return made

    directory, publish = _control_plane(args)
    cells = cells_of(args, admin, directory.directory if directory is not None and not args.local else None)
    if args.cell not in cells:
        raise TenantRecordError(f"unknown cell {args.cell!r} (one of {', '.join(sorted(cells))})")
    placement = _placement(args.placement) if args.placement else None
    return CellMover(
        cells[args.cell].admin,
        cells=cells,
        placement=placement,
        local=args.local,
        directory=directory,
        publish=publish,
        **_move_options(args),
    )


def _control_plane(args: argparse.Namespace) -> tuple[MoveDirectory | None, Callable[[str, str, int], object] | None]:
    """The directory and the router's store a move writes after its flip
    (:func:`ops.control_plane.control_plane`): the local set's, or the deployed control
    plane's. A local stack of one cell has neither; a deployed move without them is
    refused (the router would keep sending the tenant to the cell it left)."""
    from ops.cells import MoveDirectory
    from ops.cells import Placement as CellPlacement
    from ops.control_plane import control_plane

    plane = control_plane(args)
    if plane is None:
        if not args.local:
            raise TenantRecordError(NO_CONTROL_PLANE)
        return None, None
    directory, routes = plane
    return MoveDirectory(directory), lambda tenant, cell, epoch: routes.publish(CellPlacement(tenant, cell, epoch))


def _move_options(args: argparse.Namespace) -> dict[str, Any]:
    """The mover's settings the command line gives (``--move-workers``, ``--drain-seconds``,
    ``--move-rate``), validated: a bad one is a one-line error before anything is written."""
    options: dict[str, Any] = {}
    if args.move_workers is not None:
        options["workers"] = _workers(args.move_workers)
    if args.drain_seconds is not None:
        options["drain_seconds"] = _number("--drain-seconds", args.drain_seconds, zero=True)
    if args.move_rate is not None:
        options["rate"] = _number("--move-rate", args.move_rate)
    return options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.tenants", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--shards", help=f"GSI1 shards, 1..{keys.MAX_SHARDS}")
    parser.add_argument("--tier", help=f"one of {', '.join(TIERS)}")
    parser.add_argument("--status", help="ACTIVE or SUSPENDED")
    parser.add_argument("--placement", help="pool or dedicated: move the tenant's data there, online")
    parser.add_argument("--cell", help="move the tenant to this cell, online (its placement there: --placement)")
    parser.add_argument(
        "--cell-stack",
        action="append",
        help="with --stack: <cell>=<stack> for each cell (its deployed stack; default: the directory's cells)",
    )
    add_control_plane_argument(parser)
    parser.add_argument("--phase-seconds", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--drain-seconds",
        default=None,
        help=f"a move's trailing copy looks this long after the switch at least (default {DEFAULT_DRAIN_SECONDS:.0f})",
    )
    parser.add_argument(
        "--move-rate",
        default=None,
        help=f"items a move writes a second at most (default {DEFAULT_RATE:.0f})",
    )
    parser.add_argument(
        "--move-workers",
        default=None,
        help=f"partitions a move reads and writes at once, 1..{MAX_MOVE_WORKERS} (default {DEFAULT_WORKERS}): more "
        "shortens a large tenant's write pause on DynamoDB",
    )
    add_target_arguments(parser)
    args = parser.parse_args(argv)
    try:
        keys.validate_tenant_id(args.tenant)
        _move_options(args)
        shards = None if args.shards in (None, "") else _shards(args.shards)
        tier = args.tier or None
        if tier is not None and tier not in TIERS:
            raise TenantRecordError(f"unknown tier {tier!r} (one of {', '.join(TIERS)})")
        status = _status(args.status) if args.status else None
        placement = _placement(args.placement) if args.placement else None
        if args.local and args.control_plane:
            raise TenantRecordError(LOCAL_HAS_ITS_OWN)
        if args.cell is not None:
            _cell_id(args.cell)
            if not args.local and not args.control_plane:
                raise TenantRecordError(NO_CONTROL_PLANE)
            if shards is not None or tier is not None or status is not None:
                raise TenantRecordError("--cell moves the tenant only: change its record in its cell afterwards")
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    try:
        if args.cell is not None:
            record = _cell_mover(args).move(args.tenant, args.cell).record
        else:
            record = _change(args, shards=shards, tier=tier, status=status, placement=placement)
    except (
        TargetError,
        RecordChanged,
        TenantRecordError,
        MoveError,
        DeployError,
        ApiKeyError,
        ApiError,
        ClientError,
        BotoCoreError,
        OSError,
        RuntimeError,
    ) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    shown = record.values()
    del shown["api_key"]
    json.dump({**shown, "read_shards": list(record.read_shards)}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _change(
    args: argparse.Namespace,
    *,
    shards: int | None,
    tier: str | None,
    status: TenantStatus | None,
    placement: Placement | None,
) -> TenantConfig:
    """The tenant's record, after the changes asked for (in the stack the command targets)."""
    client, table_name = dynamodb_target(args)
    admin = TenantAdmin(client, table_name, progress=_to_stderr, keys=api_keys_target(args))
    if args.phase_seconds is not None:
        admin.phase_seconds = args.phase_seconds
    changing = shards is not None or tier is not None or status is not None
    record = existing_record(client, table_name, args.tenant)
    if changing:
        record = admin.ensure(args.tenant)
    if status is not None:
        record = admin.set_status(args.tenant, status)
    if tier is not None:
        record = admin.set_tier(args.tenant, tier)
    if shards is not None or record.resharding:
        record = admin.reshard(args.tenant, shards)
    if placement is not None:
        record = _mover(args, admin).move(args.tenant, placement).record
    elif record.moving:
        _to_stderr(
            f"{args.tenant} is moving to {record.move_to} ({record.move_phase}): "
            f"make tenant TENANT={args.tenant} PLACEMENT={record.move_to} continues it"
        )
    return record


if __name__ == "__main__":
    raise SystemExit(main())
