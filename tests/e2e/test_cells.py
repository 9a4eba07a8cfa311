"""``make dev CELLS=2`` end to end: ``python -m local_stack serve --cells 2`` as a
developer runs it (a real process, on a free port), once for the module: the
control plane, two cells on its user pool, and the router on the one port.

New tenants are placed where there is most room, so tenants ``1`` and ``10`` (one id
a prefix of the other) land in different cells, both ways; through the router each
creates and reads its tickets, served by its own cell. A route that is stale or
forged (the store sending a tenant to the other cell) is answered 503
``TENANT_MOVING`` with ``Retry-After`` by that cell, which serves nothing of it.
``make cells`` lists both cells with their tenants, and a command that names a tenant
(``make tenant``, ``make export``) acts on its cell. A tenant moved to the other cell
with ``make tenant CELL=`` while its clients write through the router keeps every
write the API acknowledged, each as its client last made it, its clients refused only
503 ``TENANT_MOVING`` (with ``Retry-After``) for at most the move's write pause
(≤ 5 s), and its reads never see an older state; the router then sends it to the
new cell. (What a functional test holds and this one cannot: the real processes, the
router and the record caches between them; the counts, trail and everything else a
move carries are held in tests/functional/test_cell_move.py.) Ctrl-C leaves no
process, port or state file behind (the last test: the module's tests run in file
order)."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ops.cells import Directory, Placement, local_directory, local_routes
from ops.local_control import control_call
from support_tickets.auth.authorizer import MOVING_MESSAGE
from tests.depth import DEEP
from tests.e2e.conftest import (
    BACKGROUND_PK_MARKS,
    STATE_FILE,
    Response,
    RunningStack,
    http,
    new_tenant_id,
    run_main,
    server_log,
    start_stack,
    stop_stack,
)
from tests.e2e.test_cli import port_open, wait_for_port
from tests.e2e.test_dedicated_move import Writer, moving_while_written

CELLS = ("cell-a", "cell-b")
# A killed supervisor's children end by the kernel's parent-death signal at once, a cell's
# Lambda environments within their watch's second: a few seconds on a loaded machine.
KILLED_SET_ENDS_S = 5.0


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # The cells' authorizer caches 2 s, not 300 (a move waits out the new cell's cache).
    running = start_stack(tmp_path_factory.mktemp("cells"), "--cells", "2", "--authorizer-cache-seconds", "2")
    wait_for_port(int(running.api_url.rsplit(":", 1)[1]), running.process)
    try:
        yield running
    finally:
        stop_stack(running)


def cell_state(cells: RunningStack, cell_id: str) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((Path(cells.state["cells"][cell_id]) / STATE_FILE).read_text())
    return state


def token(cells: RunningStack, tenant: str, user: str) -> str:
    """``make token``: placed first if the tenant is new."""
    result = run_main("local_stack", "--state-dir", str(cells.state_dir), "token", "--tenant", tenant, "--user", user)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def directory(cells: RunningStack) -> Directory:
    return local_directory(cells.state)


def other(cell_id: str) -> str:
    (found,) = [cell for cell in CELLS if cell != cell_id]
    return found


def assert_moving(response: Response) -> None:
    assert response.status == 503, response.body
    assert response.body == {"error": {"code": "TENANT_MOVING", "message": MOVING_MESSAGE}}
    assert response.headers["retry-after"] == "2"


@dataclass(frozen=True)
class Tenant:
    tenant_id: str
    cell: str
    token: str


@pytest.fixture(scope="module")
def placed(cells: RunningStack) -> list[Tenant]:
    """Two pairs of new tenants, each pair's ids one a prefix of the other, placed by
    ``make token`` with the cells' room equal: the first of a pair takes cell-a (a tie:
    the lowest id), the second cell-b; the second pair the other way round."""
    shorter = new_tenant_id()
    longer = new_tenant_id() + "0"
    found: list[Tenant] = []
    for tenant in (shorter, shorter + "0", longer, longer.removesuffix("0")):
        rooms = {cell.cell_id: cell.room for cell in directory(cells).cells()}
        assert len(set(rooms.values())) == 1 or len(found) % 2 == 1, rooms  # each pair starts on a tie
        minted = token(cells, tenant, f"u-{tenant}")
        where = directory(cells).placement(tenant)
        assert where is not None
        found.append(Tenant(tenant, where.cell, minted))
    return found


def test_the_demo_tenants_are_one_per_cell_and_the_state_file_is_a_stacks(cells: RunningStack) -> None:
    state = cells.state
    assert sorted(state["cells"]) == list(CELLS)
    assert [(p.cell, p.epoch) for p in map(directory(cells).placement, ("acme", "globex")) if p] == [
        ("cell-a", 1),
        ("cell-b", 1),
    ]
    default = cell_state(cells, "cell-a")
    # What only makes sense for one cell is the default cell's; the pool is the control plane's
    for key in ("emulator_url", "table_name", "usage_plan_ids", "control_url", "identity_pool_id"):
        assert state[key] == default[key], key
    assert state["user_pool_url"] == state["control_plane_url"] == default["user_pool_url"]
    assert state["user_pool_id"] == default["user_pool_id"] == cell_state(cells, "cell-b")["user_pool_id"]
    assert state["api_url"] not in (default["api_url"], cell_state(cells, "cell-b")["api_url"])
    log = server_log(cells)
    assert f"Support tickets API on {state['api_url']}  (2 cells behind the router" in log
    assert "demo tenants: acme in cell-a (user alice, admin ada), globex in cell-b (user bob, admin bea)" in log
    assert f"curl -s {state['api_url']}/tickets" in log


def test_tenants_1_and_10_are_placed_in_different_cells_both_ways_and_each_is_served_by_its_own(
    cells: RunningStack, placed: list[Tenant]
) -> None:
    first, first_longer, second_longer, second = placed
    assert (first.cell, first_longer.cell) == ("cell-a", "cell-b")
    assert (second_longer.cell, second.cell) == ("cell-a", "cell-b")
    routes = local_routes(cells.state)
    for tenant in placed:
        # the store routes it where the directory places it
        assert json.loads(routes.client.get_key(KvsARN=routes.kvs_arn, Key=f"tenant/{tenant.tenant_id}")["Value"]) == {
            "cell": tenant.cell,
            "epoch": 1,
        }
        # Through the router it creates and reads its tickets
        created = http(
            "POST", f"{cells.api_url}/tickets", token=tenant.token, body={"title": f"from {tenant.tenant_id}"}
        )
        assert created.status == 201, created.body
        listed = http("GET", f"{cells.api_url}/tickets", token=tenant.token)
        assert [item["ticket_id"] for item in listed.body["items"]] == [created.body["ticket_id"]]
        # served by its own cell, which holds it; the other cell refuses it
        own = http("GET", f"{cell_state(cells, tenant.cell)['api_url']}/tickets", token=tenant.token)
        assert [item["ticket_id"] for item in own.body["items"]] == [created.body["ticket_id"]]
        assert_moving(http("GET", f"{cell_state(cells, other(tenant.cell))['api_url']}/tickets", token=tenant.token))
        # and a command that names the tenant acts on its cell (make tenant, make export)
        state = str(cells.state_dir / STATE_FILE)
        shown = run_main("ops.tenants", "--tenant", tenant.tenant_id, "--local", "--local-state", state)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["tenant_id"] == tenant.tenant_id
        exported = run_main("ops.export", "--tenant", tenant.tenant_id, "--local", "--local-state", state)
        assert exported.returncode == 0, exported.stderr
        assert created.body["ticket_id"] in exported.stdout


def test_a_stale_route_is_answered_by_that_cell_with_503_and_never_served(
    cells: RunningStack, placed: list[Tenant]
) -> None:
    tenant = placed[0]
    wrong = other(tenant.cell)
    wrong_state = cell_state(cells, wrong)
    routes = local_routes(cells.state)

    def fingerprint() -> dict[str, Any]:
        # What the earlier tests' requests still set moving in that cell lands first (its stream,
        # queues and usage lines, each feeding the next): only this test's requests may change it.
        for _ in range(2):
            for source in ("stream", "queues", "logs"):
                assert control_call(wrong_state, f"{source}/drain?timeout=30", timeout=40)["drained"]
        query = "&".join(f"skip_pk_containing={mark}" for mark in BACKGROUND_PK_MARKS)
        return control_call(wrong_state, f"table/fingerprint?{query}", timeout=60, method="GET")

    served = http("GET", f"{cells.api_url}/tickets", token=tenant.token)
    assert served.status == 200, served.body
    # Given the store sends the tenant to the other cell (a forged entry, or one not yet
    # rewritten after a move), the directory unchanged
    routes.publish(Placement(tenant.tenant_id, wrong, 2))
    before = fingerprint()
    # When it writes and reads through the router
    written = http("POST", f"{cells.api_url}/tickets", token=tenant.token, body={"title": "to the wrong cell?"})
    read = http("GET", f"{cells.api_url}/tickets", token=tenant.token)
    # Then that cell answers 503 TENANT_MOVING with Retry-After, and writes nothing
    assert_moving(written)
    assert_moving(read)
    assert fingerprint() == before
    assert re.search(rf"\[{wrong}\] .*local_stack\.gateway: POST /tickets 503", server_log(cells))
    # And once the route is right again (a later epoch), its own cell serves it, as before
    routes.publish(Placement(tenant.tenant_id, tenant.cell, 3))
    listed = http("GET", f"{cells.api_url}/tickets", token=tenant.token)
    assert listed.status == 200, listed.body
    assert listed.body["items"] == served.body["items"]


def test_make_cells_lists_each_cell_with_its_tenants_and_room(cells: RunningStack, placed: list[Tenant]) -> None:
    result = run_main("ops.cell_report", "--local", "--local-state", str(cells.state_dir / STATE_FILE))
    assert result.returncode == 0, result.stderr
    sections = re.split(r"^(?=cell-[ab]: )", result.stdout, flags=re.MULTILINE)
    listed = {section.split(":", 1)[0]: section for section in sections if section}
    assert sorted(listed) == list(CELLS)
    expected = {"cell-a": ["acme"], "cell-b": ["globex"]}
    for tenant in placed:
        expected[tenant.cell].append(tenant.tenant_id)
    for cell_id, tenants in expected.items():
        section = listed[cell_id]
        assert section.startswith(f"{cell_id}: {len(tenants)} tenant(s), room {1000 - len(tenants)} of 1000"), section
        rows = [line.split() for line in section.splitlines()[2 : 2 + len(tenants)]]
        assert sorted(row[0] for row in rows) == sorted(tenants), section
        assert all(row[1:4] == ["basic", "pool", "epoch"] for row in rows), section
        assert "usage of " in section


def test_a_tenant_moves_to_the_other_cell_while_its_clients_write_and_loses_no_acknowledged_write(
    cells: RunningStack,
) -> None:
    tenant = new_tenant_id()
    writers = [Writer(cells, token(cells, tenant, f"w{n}-{tenant}"), f"w{n}") for n in range(2)]
    for writer in writers:
        writer.write("POST", "/tickets", {"title": "before"})
    placed = directory(cells).placement(tenant)
    assert placed is not None
    assert all(writer.tickets for writer in writers)
    dest = other(placed.cell)

    # When the operator moves it to the other cell while its clients write through the router
    # Between cells a read the edge sends to the cell the tenant left gets 503 TENANT_MOVING
    # (docs/cells.md): the reads are asserted below, not by the helper.
    result, reads = moving_while_written(
        cells,
        writers,
        lambda: run_main(
            "ops.tenants",
            "--tenant",
            tenant,
            "--cell",
            dest,
            "--local",
            "--local-state",
            str(cells.state_dir / STATE_FILE),
            "--phase-seconds",
            "2",
            "--drain-seconds",
            "3",
        ),
    )

    # Then it is there, as of the next epoch, and the router sends it there
    assert result.returncode == 0, result.stderr
    assert directory(cells).placement(tenant) == Placement(tenant, dest, placed.epoch + 1)
    store = json.loads(Path(cells.state["route_store"]).read_text())
    assert json.loads(store[f"tenant/{tenant}"]) == {"cell": dest, "epoch": placed.epoch + 1}
    # It reports its write pause; the pause's goal (5 s) is the benchmark's to measure
    # (bench/results.md), on a quiet machine: under a loaded suite it is the machine's.
    assert re.findall(r"write pause: ([0-9.]+) s", result.stderr), result.stderr
    # Its reader was refused only as a cell refuses a tenant it no longer (or not yet) serves
    assert reads
    for read in reads:
        if read.status != 200:
            assert_moving(read)
    # Its clients were refused only while it moved, only as TENANT_MOVING
    refused = [refusal for writer in writers for refusal in writer.refused]
    assert {(status, code, retry_after) for _, _, status, code, retry_after in refused} <= {(503, "TENANT_MOVING", "2")}
    assert sum(writer.writes for writer in writers) > len(refused)
    # Every acknowledged write is there, as its client last made it
    for writer in writers:
        for ticket, last in writer.tickets.items():
            got = cells.request("GET", f"/tickets/{ticket}?limit=100", token=writer.token)
            assert got.status == 200, (ticket, got.body)
            assert (got.body["ticket"]["title"], got.body["ticket"]["status"]) == (last["title"], last["status"])
            assert len(got.body["comments"]) == writer.comments[ticket]
    # And the cell it left serves nothing of it
    left = cell_state(cells, placed.cell)
    assert_moving(http("GET", f"{left['api_url']}/tickets", token=writers[0].token))


def test_an_offboarded_tenant_leaves_the_directory_and_its_cell_has_its_room_back(
    cells: RunningStack, placed: list[Tenant]
) -> None:
    """``make offboard`` of tenant ``1`` (its record erased at once: no grace) in its cell:
    the router's store drops its entry, the directory forgets it and its cell's count goes
    down; ``10``, in the other cell, keeps its placement, its route and its tickets; ``make
    token`` refuses the offboarded id (placed nowhere now, its tombstone in its old cell)."""
    gone, neighbour = placed[0], placed[1]
    assert neighbour.tenant_id == gone.tenant_id + "0"
    before = {cell.cell_id: cell for cell in directory(cells).cells()}
    routes = local_routes(cells.state)
    neighbours_route = routes.client.get_key(KvsARN=routes.kvs_arn, Key=f"tenant/{neighbour.tenant_id}")["Value"]
    listed = http("GET", f"{cells.api_url}/tickets", token=neighbour.token)
    assert listed.status == 200, listed.body

    result = run_main(
        "ops.offboard", "--tenant", gone.tenant_id, "--confirm", gone.tenant_id,
        "--local", "--local-state", str(cells.state_dir / STATE_FILE),
        "--phase-seconds", "1", "--settle", "0", "--grace-seconds", "0",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["record"] == "erased"
    assert directory(cells).placement(gone.tenant_id) is None
    after = {cell.cell_id: cell for cell in directory(cells).cells()}
    assert after[gone.cell].room == before[gone.cell].room + 1
    assert after[neighbour.cell] == before[neighbour.cell]
    store = json.loads(Path(cells.state["route_store"]).read_text())
    assert f"tenant/{gone.tenant_id}" not in store
    assert store[f"tenant/{neighbour.tenant_id}"] == neighbours_route
    assert directory(cells).placement(neighbour.tenant_id) == Placement(neighbour.tenant_id, neighbour.cell, 1)
    assert http("GET", f"{cells.api_url}/tickets", token=neighbour.token).body == listed.body
    # And its id is never used again, in any cell
    again = run_main(
        "local_stack", "--state-dir", str(cells.state_dir), "token", "--tenant", gone.tenant_id, "--user", "again"
    )
    assert again.returncode == 1, again.stdout
    assert "offboarded" in again.stderr
    assert directory(cells).placement(gone.tenant_id) is None


def test_ctrl_c_leaves_nothing_behind(cells: RunningStack) -> None:
    """(A second set on the same state directory is refused: tests/functional/test_local_stack_commands.py.)"""
    state = cells.state
    urls = [state["api_url"], state["control_plane_url"]]
    for cell_id in CELLS:
        urls += [cell_state(cells, cell_id)["api_url"], cell_state(cells, cell_id)["emulator_url"]]
    processes = descendants(cells.process.pid)
    commands = [command.split(b"\0") for command in processes.values()]
    assert sum(b"router/local_router.cjs" in part for command in commands for part in command) == 1
    assert sorted(command[command.index(b"--state-dir") + 1] for command in commands if b"--state-dir" in command) == [
        state["cells"][cell_id].encode() for cell_id in CELLS
    ]
    # When the developer presses Ctrl-C
    code = stop_stack(cells)
    # Then everything stopped: exit 0, no process of the set left, no port open, no state file
    assert code == 0, server_log(cells)
    assert [pid for pid, command in processes.items() if still_running(pid, command)] == []
    assert [url for url in urls if port_open(url)] == []
    assert sorted(path.name for path in cells.state_dir.iterdir()) == ["serve.log"]


def descendants(parent: int) -> dict[int, bytes]:
    """Every process under ``parent`` (its children, theirs...), with its command line, from /proc."""
    children: dict[int, list[int]] = {}
    commands: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    found: dict[int, bytes] = {}
    pending = list(children.get(parent, []))
    while pending:
        pid = pending.pop()
        found[pid] = commands.get(pid, b"")
        pending += children.get(pid, [])
    return found


def still_running(pid: int, command: bytes) -> bool:
    """Whether ``pid`` still runs ``command`` (not a number reused by another program)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes() == command
    except OSError:
        return False


@pytest.mark.skipif(not DEEP, reason="make test-deep: a set's start; make test kills start_child's children")
def test_a_killed_supervisor_leaves_no_cell_or_router_running(tmp_path: Path) -> None:
    """SIGKILL of ``make dev CELLS=2``'s supervisor (no Ctrl-C, nothing of its own stop
    runs): every cell, its Lambda environments and the router end within seconds and
    every port closes. Its own small set (no demo tenants), started after the module's
    was stopped: what it costs is that set's start, so ``make test`` holds the mechanism
    (tests/functional/test_cell_set_children.py) and ``make test-deep`` the whole set."""
    killed = start_stack(tmp_path / "killed", "--cells", "2", "--no-seed")
    processes: dict[int, bytes] = {}
    try:
        wait_for_port(int(killed.api_url.rsplit(":", 1)[1]), killed.process)
        state = killed.state
        urls = [state["api_url"], state["control_plane_url"]]
        for cell_id in CELLS:
            urls += [cell_state(killed, cell_id)["api_url"], cell_state(killed, cell_id)["emulator_url"]]
        # a request through each cell, so that its Lambda environments run too
        for cell_id in CELLS:
            assert http("GET", f"{cell_state(killed, cell_id)['api_url']}/tickets").status == 401
        processes = descendants(killed.process.pid)
        assert sum(b"router/local_router.cjs" in command for command in processes.values()) == 1
        assert sum(b"--state-dir" in command for command in processes.values()) == len(CELLS)

        # When the supervisor is killed
        killed.process.send_signal(signal.SIGKILL)
        killed.process.wait()

        # Then within seconds no process of the set runs and no port is open
        deadline = time.monotonic() + KILLED_SET_ENDS_S
        while time.monotonic() < deadline:
            running = [pid for pid, command in processes.items() if still_running(pid, command)]
            opened = [url for url in urls if port_open(url)]
            if not running and not opened:
                break
            time.sleep(0.2)
        assert (running, opened) == ([], [])
    finally:  # whatever a failure left running
        processes |= descendants(killed.process.pid)
        if killed.process.poll() is None:
            killed.process.kill()
            killed.process.wait()
        for pid, command in processes.items():
            if still_running(pid, command):
                os.kill(pid, signal.SIGKILL)
