"""Where a new tenant goes with cells (ops.cells.most_room): the cell with the most room,
room being its capacity minus the tenants the directory places there; among equals
the lowest cell id, whatever order the cells are listed in; never a full cell."""

from __future__ import annotations

import itertools

import pytest

from ops.cells import Cell, NoRoom, most_room


def cell(cell_id: str, tenants: int, capacity: int = 1000) -> Cell:
    domain = f"{cell_id.replace('-', '')}0000.execute-api.us-east-1.amazonaws.com"
    return Cell(cell_id, capacity, tenants, domain, "v1", f".local/cells/{cell_id}", "us-east-1")


@pytest.mark.parametrize(
    ("cells", "chosen"),
    [
        ([cell("cell-a", 3), cell("cell-b", 1)], "cell-b"),
        ([cell("cell-a", 1), cell("cell-b", 3)], "cell-a"),
        # room, not the tenant count: a bigger cell with more tenants can have more room
        ([cell("cell-a", 10, capacity=20), cell("cell-b", 5, capacity=12)], "cell-a"),
        # ties: the lowest id
        ([cell("cell-a", 2), cell("cell-b", 2)], "cell-a"),
        ([cell("cell-b", 0), cell("cell-c", 0), cell("cell-a", 1)], "cell-b"),
        ([cell("cell-a", 999), cell("cell-b", 1000)], "cell-a"),
    ],
)
def test_the_most_room_wins_and_ties_go_to_the_lowest_id(cells: list[Cell], chosen: str) -> None:
    for order in itertools.permutations(cells):
        assert most_room(list(order)).cell_id == chosen, order


def test_room_is_capacity_minus_the_tenants_placed() -> None:
    assert cell("cell-a", 3, capacity=10).room == 7
    assert cell("cell-a", 12, capacity=10).room == -2  # overfilled by a move: no room, not a crash


@pytest.mark.parametrize(
    "cells", [[], [cell("cell-a", 1000), cell("cell-b", 1000)], [cell("cell-a", 5, capacity=5), cell("cell-b", 7, 6)]]
)
def test_no_cell_with_room_is_an_error_not_a_full_cell(cells: list[Cell]) -> None:
    with pytest.raises(NoRoom):
        most_room(cells)
