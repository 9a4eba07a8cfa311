"""Cells, for operators: the control plane's directory and where new tenants go
(``make cells``, which lists them: :mod:`ops.cell_report`).

**The directory** (templates/control-plane.yaml's ``DirectoryTable``, key ``pk``
only) is the truth of where each tenant lives; the router's store is its
projection at the edge (:mod:`ops.cell_routes`), always written after it::

    TENANT#<tenant>  cell, epoch (1 when placed, +1 at every move), placed_at
    CELL#<cell>      capacity, tenants (how many the directory places there),
                     api_domain and stage (its API, the router's origin), stack, region
    CELLS            cell_ids: every cell (what :meth:`Directory.cells` reads, never a Scan)

:meth:`Directory.placement`, :meth:`Directory.place` and :meth:`Directory.cells`
are what any command that places or moves a tenant uses: a placement is written
in one transaction with the two cells' tenant counts, conditional on the epoch it
replaces, so two commands racing cannot both win.

**A cell's room** is its capacity (the most tenants it takes: ``capacity`` in its
directory item, :data:`LOCAL_CAPACITY` for a local cell) minus the tenants the
directory places in it. A new tenant goes to the cell with the most room, the
lowest cell id among equals (:func:`most_room`).

**A move between cells** (:mod:`ops.cell_move`) writes the directory through
:class:`MoveDirectory`: ``moving_to`` while it runs, the new placement at the
next epoch after its flip.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from ops.cell_routes import KeyValueStoreClient, drop_tenant_route, publish_cell_origin, publish_tenant_route
from ops.stack_target import DIRECTORY_TENANT_PREFIX, TargetError, directory_tenant_key
from support_tickets.core.keys import validate_tenant_id

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

TENANT_PREFIX: Final = DIRECTORY_TENANT_PREFIX
CELL_PREFIX: Final = "CELL#"
CELLS_KEY: Final = "CELLS"
# A local cell's capacity: what room is counted from (make dev CELLS=<n>).
LOCAL_CAPACITY: Final = 1000
# BatchGetItem's most keys a call.
_BATCH: Final = 100


class CellsError(RuntimeError):
    """What a cells command can't do as asked (one line, exit 1)."""


class PlacementConflict(CellsError):
    """The directory's placement of the tenant is not the one the write replaces:
    another command placed or moved it meanwhile. Nothing was written."""


class NoRoom(CellsError):
    """No cell has room for another tenant."""


@dataclass(frozen=True)
class Cell:
    """A cell as the directory holds it."""

    cell_id: str
    capacity: int
    tenants: int
    api_domain: str
    stage: str
    stack: str
    region: str

    @property
    def room(self) -> int:
        """How many more tenants the cell takes: its capacity minus the tenants placed there."""
        return self.capacity - self.tenants


@dataclass(frozen=True)
class Placement:
    """Where the directory places a tenant, as of which epoch."""

    tenant_id: str
    cell: str
    epoch: int


def tenant_key(tenant_id: str) -> dict[str, Any]:
    return directory_tenant_key(tenant_id)


def cell_key(cell_id: str) -> dict[str, Any]:
    return {"pk": {"S": CELL_PREFIX + validate_tenant_id(cell_id)}}


def most_room(cells: Sequence[Cell]) -> Cell:
    """Where a new tenant goes: the cell with the most room (its capacity minus the
    tenants the directory places there), the lowest cell id among equals;
    :class:`NoRoom` when none has any."""
    if not cells:
        raise NoRoom("the directory names no cell")
    best = min(cells, key=lambda cell: (-cell.room, cell.cell_id))
    if best.room <= 0:
        raise NoRoom(f"every cell is full ({', '.join(f'{c.cell_id} {c.tenants}/{c.capacity}' for c in cells)})")
    return best


@dataclass
class Directory:
    """The control plane's directory table, with the operator's client."""

    client: DynamoDBClient
    table_name: str
    clock: Callable[[], float] = time.time

    def cells(self) -> list[Cell]:
        """Every registered cell, by id."""
        index = self.client.get_item(TableName=self.table_name, Key={"pk": {"S": CELLS_KEY}}, ConsistentRead=True)
        ids = sorted(index.get("Item", {}).get("cell_ids", {}).get("SS", []))
        found: list[Cell] = []
        for start in range(0, len(ids), _BATCH):
            keys = [cell_key(cell_id) for cell_id in ids[start : start + _BATCH]]
            request: Any = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
            while request:
                page = self.client.batch_get_item(RequestItems=request)
                found += [_cell(item) for item in page.get("Responses", {}).get(self.table_name, [])]
                request = page.get("UnprocessedKeys") or None
        return sorted(found, key=lambda cell: cell.cell_id)

    def cell(self, cell_id: str) -> Cell | None:
        item = self.client.get_item(TableName=self.table_name, Key=cell_key(cell_id), ConsistentRead=True).get("Item")
        return _cell(item) if item else None

    def register(
        self, cell_id: str, *, api_domain: str, stage: str, stack: str, region: str, capacity: int = LOCAL_CAPACITY
    ) -> Cell:
        """The cell's item (its tenant count kept if it has one), and its id in the index."""
        updated = self.client.update_item(
            TableName=self.table_name,
            Key=cell_key(cell_id),
            # Every name aliased: DynamoDB reserves some of them (capacity, region...).
            UpdateExpression=(
                "SET #domain = :domain, #stage = :stage, #stack = :stack, #region = :region, "
                "#capacity = :capacity, #tenants = if_not_exists(#tenants, :zero)"
            ),
            ExpressionAttributeNames={
                f"#{name}": name if name != "domain" else "api_domain"
                for name in ("domain", "stage", "stack", "region", "capacity", "tenants")
            },
            ExpressionAttributeValues={
                ":domain": {"S": api_domain},
                ":stage": {"S": stage},
                ":stack": {"S": stack},
                ":region": {"S": region},
                ":capacity": {"N": str(capacity)},
                ":zero": {"N": "0"},
            },
            ReturnValues="ALL_NEW",
        )
        self.client.update_item(
            TableName=self.table_name,
            Key={"pk": {"S": CELLS_KEY}},
            UpdateExpression="ADD cell_ids :id",
            ExpressionAttributeValues={":id": {"SS": [cell_id]}},
        )
        return _cell(updated["Attributes"])

    def placement(self, tenant_id: str) -> Placement | None:
        """Where the directory places the tenant, or ``None`` (never placed)."""
        item = self.client.get_item(TableName=self.table_name, Key=tenant_key(tenant_id), ConsistentRead=True).get(
            "Item"
        )
        if item is None:
            return None
        return Placement(tenant_id, item["cell"]["S"], int(item["epoch"]["N"]))

    def place(self, tenant_id: str, cell_id: str, epoch: int) -> Placement:
        """Places the tenant in ``cell_id`` as of ``epoch``: 1 for a tenant never
        placed, the current epoch + 1 for a move. Written in one transaction with
        the cells' tenant counts, conditional on the placement it replaces; the
        same placement again is a no-op (a command run again finishes). Another
        epoch, or a race lost to another command: :class:`PlacementConflict`,
        nothing written. An unregistered cell: :class:`CellsError`."""
        current = self.placement(tenant_id)
        if current is not None and (current.cell, current.epoch) == (cell_id, epoch):
            return current
        expected = 1 if current is None else current.epoch + 1
        if epoch != expected:
            where = "never placed" if current is None else f"in {current.cell} as of epoch {current.epoch}"
            raise PlacementConflict(f"tenant {tenant_id} is {where}: epoch {epoch} is not the next one")
        if self.cell(cell_id) is None:
            raise CellsError(f"no cell {cell_id!r} in the directory")
        item = {
            **tenant_key(tenant_id),
            "tenant_id": {"S": tenant_id},
            "cell": {"S": cell_id},
            "epoch": {"N": str(epoch)},
            "placed_at": {"N": str(int(self.clock()))},
        }
        put: dict[str, Any] = {"TableName": self.table_name, "Item": item}
        if current is None:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put["ConditionExpression"] = "#epoch = :previous"
            put["ExpressionAttributeNames"] = {"#epoch": "epoch"}
            put["ExpressionAttributeValues"] = {":previous": {"N": str(current.epoch)}}
        writes: list[Any] = [{"Put": put}]
        if current is None or current.cell != cell_id:
            writes.append({"Update": self._count(cell_id, +1) | {"ConditionExpression": "attribute_exists(pk)"}})
        if current is not None and current.cell != cell_id:
            writes.append({"Update": self._count(current.cell, -1)})
        try:
            self.client.transact_write_items(TransactItems=writes)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
                raise PlacementConflict(
                    f"tenant {tenant_id}: its placement changed meanwhile (another command); nothing written"
                ) from exc
            raise
        return Placement(tenant_id, cell_id, epoch)

    def forget(self, placement: Placement) -> bool:
        """The tenant's item deleted in one transaction with its cell's tenant count
        (one less), conditional on ``placement`` being the directory's: never twice, never
        a placement another command changed. Whether it forgot (``False``: it was gone)."""
        delete = {
            "TableName": self.table_name,
            "Key": tenant_key(placement.tenant_id),
            "ConditionExpression": "#cell = :cell AND #epoch = :epoch",
            "ExpressionAttributeNames": {"#cell": "cell", "#epoch": "epoch"},
            "ExpressionAttributeValues": {":cell": {"S": placement.cell}, ":epoch": {"N": str(placement.epoch)}},
        }
        writes: list[Any] = [{"Delete": delete}, {"Update": self._count(placement.cell, -1)}]
        try:
            self.client.transact_write_items(TransactItems=writes)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            if self.placement(placement.tenant_id) is None:
                return False
            raise PlacementConflict(
                f"tenant {placement.tenant_id}: its placement changed meanwhile (another command); nothing written"
            ) from exc
        return True

    def _count(self, cell_id: str, change: int) -> dict[str, Any]:
        return {
            "TableName": self.table_name,
            "Key": cell_key(cell_id),
            "UpdateExpression": "ADD #tenants :change",
            "ExpressionAttributeNames": {"#tenants": "tenants"},
            "ExpressionAttributeValues": {":change": {"N": str(change)}},
        }


def _cell(item: dict[str, Any]) -> Cell:
    return Cell(
        cell_id=item["pk"]["S"].removeprefix(CELL_PREFIX),
        capacity=int(item["capacity"]["N"]),
        tenants=int(item.get("tenants", {}).get("N", "0")),
        api_domain=item["api_domain"]["S"],
        stage=item["stage"]["S"],
        stack=item["stack"]["S"],
        region=item["region"]["S"],
    )


@dataclass(frozen=True)
class Routes:
    """The router's store (the control plane's KeyValueStore, or the local file:
    ``ops.local_routes``), written from the directory."""

    client: KeyValueStoreClient
    kvs_arn: str

    def publish(self, placement: Placement) -> bool:
        return publish_tenant_route(self.client, self.kvs_arn, placement.tenant_id, placement.cell, placement.epoch)

    def drop(self, placement: Placement) -> bool:
        return drop_tenant_route(self.client, self.kvs_arn, placement.tenant_id)

    def publish_cell(self, cell: Cell) -> bool:
        return publish_cell_origin(self.client, self.kvs_arn, cell.cell_id, cell.api_domain, cell.stage)


def place_in[Result](
    directory: Directory, routes: Routes, tenant_id: str, cell_id: str, onboard: Callable[[str], Result]
) -> tuple[Placement, Result]:
    """The tenant placed in ``cell_id`` and onboarded there (``onboard(cell)``: its
    record, API key and users), the directory written first, the router's store
    last. A tenant the directory already places is onboarded where it is (a move is
    ``make tenant CELL=``'s): :class:`PlacementConflict` if that is not ``cell_id``.

    The directory comes first, before the cell has anything of the tenant: of two
    commands placing a new tenant at once, the directory's condition lets one win
    before either writes a record, so no cell ever holds a tenant the directory
    places elsewhere. Until the store is written the router sends the tenant to the
    default cell, which refuses it (503 ``TENANT_MOVING``) unless it is the tenant's.
    Run again, the command finishes what an interrupted one began."""
    placed = directory.placement(tenant_id)
    if placed is None:
        placed = _claim(directory, tenant_id, cell_id)
    if placed.cell != cell_id:
        raise PlacementConflict(f"tenant {tenant_id} is placed in {placed.cell}, not {cell_id}")
    return placed, _onboarded(routes, placed, onboard)


def place_new[Result](
    directory: Directory, routes: Routes, tenant_id: str, onboard: Callable[[str], Result]
) -> tuple[Placement, Result]:
    """What ``make token`` and ``make onboard`` do with cells: a tenant the directory
    places is onboarded in its cell; a new one is placed first in the cell with the
    most room (:func:`most_room`), as :func:`place_in` places it."""
    placed = directory.placement(tenant_id)
    if placed is None:
        placed = _claim(directory, tenant_id, most_room(directory.cells()).cell_id)
    return placed, _onboarded(routes, placed, onboard)


def _claim(directory: Directory, tenant_id: str, cell_id: str) -> Placement:
    """The tenant placed in ``cell_id`` at epoch 1, or wherever a racing command placed it."""
    try:
        return directory.place(tenant_id, cell_id, 1)
    except PlacementConflict:
        placed = directory.placement(tenant_id)
        if placed is None:
            raise
        return placed


def _onboarded[Result](routes: Routes, placed: Placement, onboard: Callable[[str], Result]) -> Result:
    result = onboard(placed.cell)
    routes.publish(placed)
    return result


def forget_offboarded(directory: Directory, routes: Routes, tenant_id: str, cell_id: str) -> bool:
    """What ``make offboard`` does with cells once the tenant's record is erased in
    ``cell_id`` (its last run): the router's store drops the tenant's entry, then the
    directory forgets it, its cell's count one less in the same transaction (its room
    back). In that order, so that a run interrupted between them, run again, still
    finds the cell through the directory and finishes; the store's entry gone first
    sends the tenant to the default cell, which refuses it. A tenant the directory
    places elsewhere (or nowhere) is left alone. Whether the directory forgot it."""
    placed = directory.placement(tenant_id)
    if placed is None or placed.cell != cell_id:
        return False
    routes.drop(placed)
    return directory.forget(placed)


@dataclass
class MoveDirectory:
    """The directory as a move between cells writes it (:class:`ops.cell_move.Directory`):
    the cell a tenant is in, the cell it is moving to (``moving_to`` on its item), and its
    placement in the new cell at the next epoch."""

    directory: Directory

    def cell_of(self, tenant_id: str) -> str | None:
        placed = self.directory.placement(tenant_id)
        return placed.cell if placed is not None else None

    def moving(self, tenant_id: str, to_cell: str | None) -> None:
        update: dict[str, Any] = {
            "TableName": self.directory.table_name,
            "Key": tenant_key(tenant_id),
            "ConditionExpression": "attribute_exists(pk)",
        }
        if to_cell is None:
            update["UpdateExpression"] = "REMOVE moving_to"
        else:
            update["UpdateExpression"] = "SET moving_to = :cell"
            update["ExpressionAttributeValues"] = {":cell": {"S": to_cell}}
        try:
            self.directory.client.update_item(**update)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            raise CellsError(f"the directory places no tenant {tenant_id}: place it first (make onboard)") from exc

    def place(self, tenant_id: str, cell_id: str) -> int:
        """The tenant placed in ``cell_id`` at the next epoch, ``moving_to`` gone; the epoch
        (the same one when it is placed there already: a command run again)."""
        current = self.directory.placement(tenant_id)
        if current is not None and current.cell == cell_id:
            return current.epoch
        placed = self.directory.place(tenant_id, cell_id, 1 if current is None else current.epoch + 1)
        return placed.epoch


# ---------------------------------------------------------------- the local set
def cell_target(state: dict[str, Any], cell_id: str) -> argparse.Namespace:
    """A cell of the local set as the operator commands' target (``--local`` with its
    own state file): what :mod:`ops.stack_target` reads its table and keys from."""
    cells = state.get("cells", {})
    if cell_id not in cells:
        raise TargetError(f"no cell {cell_id!r} in the local set (its cells: {', '.join(sorted(cells)) or 'none'})")
    return argparse.Namespace(local=True, stack=None, region=None, local_state=str(Path(cells[cell_id]) / "stack.json"))


def local_directory(state: dict[str, Any]) -> Directory:
    """The local set's directory, in its control plane's emulator, as the operator."""
    import boto3

    if "directory_table" not in state:
        raise TargetError("the local stack runs no cells: start it with `make dev CELLS=2`")
    client = boto3.client(
        "dynamodb",
        region_name=str(state.get("region", "us-east-1")),
        endpoint_url=str(state["control_plane_url"]),
        aws_access_key_id=str(state["operator_access_key_id"]),
        aws_secret_access_key=str(state["operator_secret_access_key"]),
    )
    return Directory(client, str(state["directory_table"]))


def local_routes(state: dict[str, Any]) -> Routes:
    """The local set's router store (the file the local router reads)."""
    from ops.local_routes import FileKeyValueStore

    store = FileKeyValueStore(Path(state["route_store"]))
    return Routes(store, store.arn)


# ---------------------------------------------------------------- deployed
# The control plane's stack outputs (templates/control-plane.yaml) that name the directory and the store.
DIRECTORY_OUTPUT: Final = "DirectoryTableName"
STORE_OUTPUT: Final = "KeyValueStoreArn"


def deployed_directory(session: Any, outputs: Mapping[str, str]) -> Directory:
    """The deployed control plane's directory (its ``DirectoryTableName`` output), with the
    operator's credentials in the control plane's Region (``session``'s)."""
    return Directory(session.client("dynamodb"), outputs[DIRECTORY_OUTPUT])


def deployed_routes(session: Any, outputs: Mapping[str, str]) -> Routes:
    """The deployed router's store (its ``KeyValueStoreArn`` output), through the
    ``cloudfront-keyvaluestore`` API (SigV4A: :mod:`ops.cell_routes`)."""
    return Routes(session.client("cloudfront-keyvaluestore"), outputs[STORE_OUTPUT])
