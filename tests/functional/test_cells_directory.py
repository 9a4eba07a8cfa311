"""The control plane's directory as the operator's commands write it (ops.cells), over
moto, the table made from templates/control-plane.yaml's definition: cells registered
and listed without a Scan; a placement written in one transaction with the cells'
tenant counts, conditional on the epoch it replaces (the same again a no-op, any other
refused with nothing written); a new tenant placed in the cell with the most room,
tenants 1 and 10 in different cells; the directory written before the cell onboards
the tenant and the router's store last, so an interrupted command is finished by
running it again; two commands placing one new tenant at once agree on one cell."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ops.cell_routes import tenant_route
from ops.cells import (
    Cell,
    CellsError,
    Directory,
    Placement,
    PlacementConflict,
    Routes,
    forget_offboarded,
    place_in,
    place_new,
)
from ops.local_routes import FileKeyValueStore
from stack_model.control_plane import directory_table_arguments

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@pytest.fixture
def directory(dynamodb: DynamoDBClient) -> Directory:
    arguments = directory_table_arguments()
    dynamodb.create_table(**arguments)
    found = Directory(dynamodb, arguments["TableName"], clock=lambda: 1_795_000_000.0)
    for cell_id in ("cell-b", "cell-a"):  # registered in any order, listed by id
        register(found, cell_id)
    return found


def register(directory: Directory, cell_id: str, capacity: int = 1000) -> Cell:
    return directory.register(
        cell_id,
        api_domain=f"{cell_id.replace('-', '')}0000.execute-api.us-east-1.amazonaws.com",
        stage="v1",
        stack=f".local/cells/{cell_id}",
        region="us-east-1",
        capacity=capacity,
    )


class RecordingStore(FileKeyValueStore):
    """The local store, recording each write into ``events``."""

    def __init__(self, path: Path, events: list[str]) -> None:
        super().__init__(path)
        self.events = events

    def put_key(self, **kwargs: str) -> Any:
        self.events.append(f"store {kwargs['Key']}")
        return super().put_key(**kwargs)


@pytest.fixture
def events() -> list[str]:
    return []


@pytest.fixture
def routes(tmp_path: Path, events: list[str]) -> Routes:
    store = RecordingStore(tmp_path / "router-store.json", events)
    return Routes(store, store.arn)


def tenants(directory: Directory) -> dict[str, int]:
    return {cell.cell_id: cell.tenants for cell in directory.cells()}


def everything(dynamodb: DynamoDBClient, directory: Directory) -> list[dict[str, Any]]:
    return sorted(dynamodb.scan(TableName=directory.table_name)["Items"], key=lambda item: item["pk"]["S"])


def test_cells_are_listed_by_id_with_their_room_and_registering_again_keeps_the_count(directory: Directory) -> None:
    assert [(cell.cell_id, cell.room, cell.stage) for cell in directory.cells()] == [
        ("cell-a", 1000, "v1"),
        ("cell-b", 1000, "v1"),
    ]
    directory.place("1", "cell-a", 1)
    again = register(directory, "cell-a", capacity=10)
    assert (again.tenants, again.room) == (1, 9)


def test_a_placement_and_a_move_keep_the_counts_and_refuse_any_other_epoch(
    directory: Directory, dynamodb: DynamoDBClient
) -> None:
    assert directory.place("1", "cell-a", 1) == Placement("1", "cell-a", 1)
    assert directory.place("1", "cell-a", 1) == Placement("1", "cell-a", 1)  # again: a no-op
    assert tenants(directory) == {"cell-a": 1, "cell-b": 0}
    before = everything(dynamodb, directory)
    for cell_id, epoch in (("cell-b", 1), ("cell-b", 3), ("cell-a", 0)):
        with pytest.raises(PlacementConflict):
            directory.place("1", cell_id, epoch)
    assert everything(dynamodb, directory) == before
    # a move: the next epoch, each cell's count with it
    assert directory.place("1", "cell-b", 2) == Placement("1", "cell-b", 2)
    assert tenants(directory) == {"cell-a": 0, "cell-b": 1}
    with pytest.raises(PlacementConflict):  # a mover resumed after another moved it on
        directory.place("1", "cell-a", 2)
    assert directory.placement("1") == Placement("1", "cell-b", 2)
    assert directory.placement("10") is None


def test_a_placement_in_a_cell_the_directory_does_not_name_writes_nothing(
    directory: Directory, dynamodb: DynamoDBClient
) -> None:
    before = everything(dynamodb, directory)
    with pytest.raises(CellsError, match="no cell 'cell-z'"):
        directory.place("1", "cell-z", 1)
    assert everything(dynamodb, directory) == before


def test_a_lost_race_writes_nothing(directory: Directory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another command places the tenant between this one's read and its write: the
    transaction's condition fails, and neither cell's count moves."""
    read = Directory.placement
    monkeypatch.setattr(Directory, "placement", lambda self, tenant: None)
    directory.place("1", "cell-b", 1)
    with pytest.raises(PlacementConflict):
        directory.place("1", "cell-a", 1)
    monkeypatch.setattr(Directory, "placement", read)
    assert directory.placement("1") == Placement("1", "cell-b", 1)
    assert tenants(directory) == {"cell-a": 0, "cell-b": 1}


@pytest.mark.parametrize(("first", "second"), [("1", "10"), ("10", "1")])
def test_new_tenants_go_where_there_is_most_room_and_a_placed_one_stays(
    directory: Directory, routes: Routes, events: list[str], first: str, second: str
) -> None:
    onboarded: list[tuple[str, str]] = []
    # Given two empty cells, When two new tenants (one id a prefix of the other) are onboarded
    for tenant in (first, second):

        def onboard(cell_id: str, tenant: str = tenant) -> None:
            onboarded.append((tenant, cell_id))

        placed, _ = place_new(directory, routes, tenant, onboard)
        assert placed == Placement(tenant, onboarded[-1][1], 1)
    # Then the first takes the tie's lowest id, the second the cell left with more room
    assert onboarded == [(first, "cell-a"), (second, "cell-b")]
    assert routes.client.items() == {  # type: ignore[attr-defined]
        f"tenant/{first}": tenant_route("cell-a", 1),
        f"tenant/{second}": tenant_route("cell-b", 1),
    }
    # And a placed tenant is onboarded where it is, placed nowhere else
    placed, _ = place_new(directory, routes, first, lambda cell_id: onboarded.append((first, cell_id)))
    assert (placed, onboarded[-1]) == (Placement(first, "cell-a", 1), (first, "cell-a"))
    assert tenants(directory) == {"cell-a": 1, "cell-b": 1}


def test_the_directory_comes_first_the_cell_then_the_store(
    directory: Directory, routes: Routes, events: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    place = Directory.place

    def recorded_place(self: Directory, tenant: str, cell_id: str, epoch: int) -> Placement:
        events.append(f"directory {tenant} {cell_id} {epoch}")
        return place(self, tenant, cell_id, epoch)

    monkeypatch.setattr(Directory, "place", recorded_place)

    def cell_down(cell_id: str) -> None:
        events.append(f"onboard in {cell_id}")
        raise CellsError("the cell did not answer")

    # Given a command interrupted while the cell onboards the tenant
    with pytest.raises(CellsError):
        place_new(directory, routes, "1", cell_down)
    # Then the directory holds the placement, the store nothing yet (the router sends the
    # tenant to the default cell, which refuses it until it is the tenant's)
    assert events == ["directory 1 cell-a 1", "onboard in cell-a"]
    assert routes.client.items() == {}  # type: ignore[attr-defined]
    # When it runs again, Then it finishes in the same cell: the cell, then the store
    events.clear()
    place_new(directory, routes, "1", lambda cell_id: events.append(f"onboard in {cell_id}"))
    assert events == ["onboard in cell-a", "store tenant/1"]
    assert tenants(directory) == {"cell-a": 1, "cell-b": 0}


def test_two_commands_placing_one_new_tenant_agree_on_one_cell(
    directory: Directory, routes: Routes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This command chose cell-a; another placed the tenant in cell-b meanwhile: the
    directory's condition refuses the second placement, and the tenant is onboarded in
    cell-b, the winner's, never in both."""
    read = Directory.placement
    reads: list[str] = []

    def raced(self: Directory, tenant: str) -> Placement | None:
        if not reads:  # this command's first read, then the other command's placement
            reads.append(tenant)
            self.place(tenant, "cell-b", 1)
            return None
        return read(self, tenant)

    monkeypatch.setattr(Directory, "placement", raced)
    onboarded: list[str] = []
    placed, _ = place_new(directory, routes, "1", onboarded.append)
    assert (placed, onboarded) == (Placement("1", "cell-b", 1), ["cell-b"])
    assert tenants(directory) == {"cell-a": 0, "cell-b": 1}


def test_placing_in_a_named_cell_refuses_a_tenant_placed_elsewhere(directory: Directory, routes: Routes) -> None:
    place_in(directory, routes, "acme", "cell-a", lambda cell_id: None)
    onboarded: list[str] = []
    with pytest.raises(PlacementConflict, match="placed in cell-a, not cell-b"):
        place_in(directory, routes, "acme", "cell-b", onboarded.append)
    assert onboarded == []


def test_an_offboarded_tenant_is_dropped_from_the_store_then_forgotten_by_the_directory_its_room_back(
    directory: Directory, routes: Routes, events: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tenant 1 in cell-a, 10 in cell-b; 1 offboarded: interrupted after the store dropped
    its entry, the directory still places it (a run again finds its cell); run again, the
    directory forgets it and cell-a has its room back; again, nothing more; 10 untouched."""
    place_in(directory, routes, "1", "cell-a", lambda cell_id: None)
    place_in(directory, routes, "10", "cell-b", lambda cell_id: None)
    assert [cell.room for cell in directory.cells()] == [999, 999]
    forget = Directory.forget

    def interrupted(self: Directory, placement: Placement) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(Directory, "forget", interrupted)
    with pytest.raises(KeyboardInterrupt):
        forget_offboarded(directory, routes, "1", "cell-a")
    assert routes.client.items() == {"tenant/10": tenant_route("cell-b", 1)}  # type: ignore[attr-defined]
    assert directory.placement("1") == Placement("1", "cell-a", 1)
    assert tenants(directory) == {"cell-a": 1, "cell-b": 1}
    monkeypatch.setattr(Directory, "forget", forget)

    assert forget_offboarded(directory, routes, "1", "cell-a")

    assert directory.placement("1") is None
    assert {cell.cell_id: cell.room for cell in directory.cells()} == {"cell-a": 1000, "cell-b": 999}
    assert not forget_offboarded(directory, routes, "1", "cell-a")  # once only
    assert not forget_offboarded(directory, routes, "10", "cell-a")  # placed elsewhere: left alone
    assert tenants(directory) == {"cell-a": 0, "cell-b": 1}
    assert directory.placement("10") == Placement("10", "cell-b", 1)
    assert routes.client.items() == {"tenant/10": tenant_route("cell-b", 1)}  # type: ignore[attr-defined]
    # placed again (the directory's epoch starts over), the router sends it there again
    placed, _ = place_new(directory, routes, "1", lambda cell_id: None)
    assert placed == Placement("1", "cell-a", 1)
    assert routes.client.items()["tenant/1"] == tenant_route("cell-a", 1)  # type: ignore[attr-defined]


def test_forgetting_a_placement_another_command_changed_writes_nothing(
    directory: Directory, dynamodb: DynamoDBClient
) -> None:
    directory.place("1", "cell-a", 1)
    directory.place("1", "cell-b", 2)
    before = everything(dynamodb, directory)
    with pytest.raises(PlacementConflict):
        directory.forget(Placement("1", "cell-a", 1))
    assert everything(dynamodb, directory) == before
