"""Every child of ``make dev CELLS=<n>``'s supervisor (a cell's ``serve``, the Node
router) starts through :func:`local_stack.cells.start_child`, and ends the moment the
supervisor dies, however it dies: real processes here (a supervisor running
``start_child`` for a Python child and a Node child, then SIGKILLed); a child started
without it outlives its supervisor, which is what the set's children did.
A whole set killed so (its cells, their Lambda environments, the router, every port) is
``make test-deep``'s: tests/e2e/test_cells.py, at the cost of a set's start."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from local_stack import cells
from local_stack.emulator.server import ControlPlane
from stack_model.template import PROJECT_ROOT

# How long the kernel may take to signal the children and they to end.
ENDS_WITHIN_S = 5.0
NODE = shutil.which("node")

SUPERVISOR = """
import json, subprocess, sys
from local_stack.cells import start_child
commands = json.loads(sys.argv[1])
started = [start_child(command) if sys.argv[2] == "start_child" else subprocess.Popen(command) for command in commands]
print(json.dumps([child.pid for child in started]), flush=True)
sys.stdin.read()  # until it is killed
"""


def children_of_a_killed_supervisor(how: str) -> list[int]:
    """A supervisor starting a Python and a Node child ``how``, SIGKILLed: the children's pids."""
    assert NODE is not None
    commands = [[sys.executable, "-c", "import time; time.sleep(60)"], [NODE, "-e", "setTimeout(() => {}, 60000)"]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT / "layers" / "shared"), str(PROJECT_ROOT)])}
    supervisor = subprocess.Popen(  # noqa: S603 - our interpreter, our script
        [sys.executable, "-c", SUPERVISOR, json.dumps(commands), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=PROJECT_ROOT,
    )
    assert supervisor.stdout is not None
    pids: list[int] = json.loads(supervisor.stdout.readline())
    assert all(running(pid) for pid in pids)
    supervisor.send_signal(signal.SIGKILL)
    supervisor.wait()
    return pids


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no longer does: it is reaped by init, not us)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def still_running_after(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while (alive := [pid for pid in pids if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"),
    pytest.mark.skipif(NODE is None, reason="node is what make dev CELLS=<n> runs its router with"),
]


def test_the_children_started_through_start_child_end_when_their_supervisor_is_killed() -> None:
    assert still_running_after(children_of_a_killed_supervisor("start_child"), ENDS_WITHIN_S) == []


def test_children_started_without_it_outlive_their_killed_supervisor() -> None:
    pids = children_of_a_killed_supervisor("popen")
    try:
        assert still_running_after(pids, 0.5) == pids
    finally:
        for pid in pids:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def test_every_process_of_the_set_starts_through_start_child(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started: list[list[str]] = []

    class Refused(Exception):
        pass

    def recorded(command: list[str], **options: Any) -> Any:
        started.append(command)
        raise Refused

    monkeypatch.setattr(cells, "start_child", recorded)
    monkeypatch.setattr(subprocess, "Popen", lambda *args, **kwargs: pytest.fail("a child not started by start_child"))
    with socket.socket() as bound, pytest.raises(Refused):
        cells.start_router(bound, Path("store.json"), {}, default="http://127.0.0.1:1")
    assert started[-1][-1] == str(cells.ROUTER_SCRIPT)
    cell_set = cells.CellSet(cells.CellSetOptions(cells=2, state_dir=tmp_path))
    plane = ControlPlane("us-east-1_pool", "client", "cognito-idp.example", "admins", "Directory")
    with pytest.raises(Refused):
        cell_set._launch("cell-a", "http://127.0.0.1:1", plane)
    assert started[-1][:3] == [sys.executable, "-m", "local_stack"]
