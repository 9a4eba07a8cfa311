"""``make dev CELLS=<n>``: n cells, their control plane and the router behind one
port (docs/cells.md, "Locally"). One supervisor process, :class:`CellSet`, runs:

- **the control plane**: an emulator (operator credentials only) holding what
  ``templates/control-plane.yaml`` holds but the CloudFront resources: the shared
  user pool (template.yaml's settings), its app client and admin group, and the
  directory table (:meth:`local_stack.emulator.server.Emulator.provision_control_plane`);
- **n cells** (``cell-a``, ``cell-b``, …): each a whole stack in a process of its own,
  ``python -m local_stack serve --no-seed`` with ``CellId=<cell>`` and the shared
  pool's ids, its state in ``<state dir>/cells/<cell>/``; its log lines reach the
  supervisor's stderr prefixed with its id;
- **the router** on the port: ``router/local_router.cjs`` (Node), which runs the
  control plane's CloudFront function (``router/edge_router.js``, unchanged) for
  every request and proxies it to the cell it chose, or to the default cell
  (``cell-a``). Its store is a file (``<state dir>/router-store.json``,
  :mod:`ops.local_routes`), written through :mod:`ops.cell_routes`. Each cell is
  registered in the directory and the store under a fake API domain
  (:func:`api_domain`) and its stage, which the router maps to the cell's URL.

The demo tenants are placed one per cell, in order (acme in ``cell-a``, globex in
``cell-b``), each onboarded in its cell, the directory written before the store
(:func:`ops.cells.place_in`). New tenants go where ``make token`` and ``make
onboard`` place them (:func:`ops.cells.place_new`).

``<state dir>/stack.json`` holds every key a single stack's does, so that every
tool that reads it works: the router's URL as ``api_url``, the control plane's
pool, and what only makes sense for one cell (its emulator, table, keys) from the
default cell; plus ``cells`` (cell id → its state directory), ``directory_table``,
``control_plane_url`` and ``route_store``. Ctrl-C (or SIGTERM) stops the router,
every cell (SIGINT, then SIGKILL after :data:`STOP_TIMEOUT_S`) and the control
plane, and removes the state file, the store and ``<state dir>/cells/``.

Killed any other way (SIGKILL, the OOM killer), the supervisor stops nothing: each
child (every cell's ``serve`` and the router) is started with the kernel's
parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)`` on Linux, set in the child
between fork and exec: :func:`ends_with_the_supervisor`), so it is killed the moment
the supervisor dies, and a cell's Lambda environments follow their cell by their own
parent watch (``local_stack.lambda_.runtime``). The kernel does it, so it needs nothing
of the child: the same for the Python cells and the Node router, and for a child busy
or stuck, which a parent-pid watch inside it would need a thread (and Node a timer)
for. SIGKILL, not a polite signal: nobody is left to wait for a clean stop, and the
next start clears what the set leaves (its state files and store). The signal
follows the thread that forked, so every child is started from the main thread.
Elsewhere (no ``prctl``) the router still ends when its stdin closes.
"""

from __future__ import annotations

import collections
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from local_stack.emulator.server import ControlPlane, Emulator
from local_stack.running_stack import DEFAULT_STATE_DIR, REGION, STATE_FILE, local_admin, read_state, write_json
from local_stack.stack import DEMO_TENANTS
from ops.cells import Directory, Routes, place_in
from ops.local_routes import FileKeyValueStore
from ops.users import UserPool, ensure_user
from stack_model.template import PROJECT_ROOT, template_values

log = logging.getLogger("local_stack.cells")

MIN_CELLS: Final = 2
MAX_CELLS: Final = 8
CELLS_DIR: Final = "cells"
STORE_FILE: Final = "router-store.json"
ROUTER_SCRIPT: Final = PROJECT_ROOT / "router" / "local_router.cjs"
EDGE_FUNCTION: Final = PROJECT_ROOT / "router" / "edge_router.js"
# A cell's start (its emulator, template, functions' environments) on a loaded machine.
START_TIMEOUT_S: Final = 120.0
STOP_TIMEOUT_S: Final = 30.0
# The last lines of a cell's stderr shown when it fails to start.
TAIL_LINES: Final = 30


# linux/prctl.h
PR_SET_PDEATHSIG: Final = 1


def ends_with_the_supervisor() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when this process dies
    (the module's docstring); ``None`` where there is no ``prctl`` (not Linux). libc's
    ``prctl`` is looked up here, in the parent: the child, between fork and exec, only
    calls it. A supervisor that died before the call is checked for after it."""
    prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
    if prctl is None:
        return None
    supervisor = os.getpid()

    def end_with_the_supervisor() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != supervisor:
            os.kill(os.getpid(), signal.SIGKILL)

    return end_with_the_supervisor


def start_child(command: list[str], **options: Any) -> subprocess.Popen[Any]:
    """A process of the set (a cell's ``serve``, the router): ``subprocess.Popen`` with
    the kernel's parent-death signal (:func:`ends_with_the_supervisor`). Every child of
    the set starts here."""
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module, or node with our script
        command,
        preexec_fn=ends_with_the_supervisor(),  # noqa: PLW1509 - no lock taken: only the prctl call
        **options,
    )


def cell_ids(count: int) -> list[str]:
    """The cells' ids: ``cell-a``, ``cell-b``, …"""
    if not MIN_CELLS <= count <= MAX_CELLS:
        raise ValueError(f"{MIN_CELLS} to {MAX_CELLS} cells, not {count}")
    return [f"cell-{chr(ord('a') + number)}" for number in range(count)]


def api_domain(cell_id: str) -> str:
    """A local cell's API domain as the router's store names it (an API Gateway
    regional domain: the only kind the edge function sends tokens to)."""
    return f"{cell_id.replace('-', '')}0000.execute-api.{REGION}.amazonaws.com"


@dataclass
class CellSetOptions:
    cells: int
    host: str = "127.0.0.1"
    port: int = 3000
    state_dir: Path = DEFAULT_STATE_DIR
    seed: bool = True
    demo_tenants: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(DEMO_TENANTS))
    # Every cell's template parameters (as `sam deploy --parameter-overrides`), besides
    # CellId and the shared pool's, which the set gives each.
    parameters: dict[str, str] = field(default_factory=dict)
    # Every cell's other `serve` options (e.g. --authorizer-cache-seconds 0).
    cell_options: list[str] = field(default_factory=list)


class CellFailed(RuntimeError):
    """A cell did not start: its exit status and the tail of its stderr."""


@dataclass
class RunningCell:
    """A cell's process, its state directory and what its state file says."""

    cell_id: str
    state_dir: Path
    process: subprocess.Popen[bytes]
    tail: collections.deque[str]
    reader: threading.Thread
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def api_url(self) -> str:
        return str(self.state["api_url"])


class CellSet:
    def __init__(self, options: CellSetOptions) -> None:
        self.options = options
        self.cell_ids = cell_ids(options.cells)
        self.state_dir = options.state_dir.resolve()
        self.control: Emulator | None = None
        self.plane: ControlPlane | None = None
        self.cells: list[RunningCell] = []
        self.router: subprocess.Popen[str] | None = None
        self._socket: socket.socket | None = None
        self._owns_files = False
        self._wrote_state = False
        # tenant -> its cell, for the demo tenants placed at start
        self.placed: dict[str, str] = {}

    @property
    def store(self) -> FileKeyValueStore:
        return FileKeyValueStore(self.state_dir / STORE_FILE)

    @property
    def api_url(self) -> str:
        assert self._socket is not None, "start() first"
        host = "127.0.0.1" if self.options.host in ("0.0.0.0", "") else self.options.host  # noqa: S104 - a URL
        return f"http://{host}:{self._socket.getsockname()[1]}"

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        started = time.monotonic()
        existing = read_state(self.state_dir)
        if existing is not None:
            raise RuntimeError(
                f"a local stack is already running (pid {existing['pid']}, {existing['api_url']}); stop it first"
            )
        self._owns_files = True
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # Bound now, so that the state file names it; it listens last (as a single stack's API does).
        bound = self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        bound.bind((self.options.host, self.options.port))
        control = self.control = Emulator()
        control.start()
        plane = self.plane = control.provision_control_plane()
        self.store.remove()  # a store left by a set that was killed
        self.cells = [self._launch(cell_id, control.url, plane) for cell_id in self.cell_ids]
        for cell in self.cells:
            self._wait(cell)
        directory = Directory(control.client("dynamodb"), plane.directory_table)
        routes = Routes(self.store, self.store.arn)
        stage = str(template_values(self.options.parameters).ref("StageName"))
        for cell in self.cells:
            registered = directory.register(
                cell.cell_id, api_domain=api_domain(cell.cell_id), stage=stage, stack=str(cell.state_dir), region=REGION
            )
            routes.publish_cell(registered)
        origins = {f"{api_domain(cell.cell_id)}/{stage}": cell.api_url for cell in self.cells}
        self.router = start_router(bound, self.store.path, origins, default=self.cells[0].api_url)
        if self.options.seed:
            pool = self.user_pool()
            for (tenant, (user, admin)), cell in zip(self.options.demo_tenants.items(), self.cells, strict=False):
                place_in(directory, routes, tenant, cell.cell_id, self._onboarder(pool, cell, tenant, user, admin))
                self.placed[tenant] = cell.cell_id
        write_json(self.state_dir / STATE_FILE, self.state())
        self._wrote_state = True
        # Last: the port answers once everything it leads to (tokens included) works.
        router_listen(self.router)
        log.info("%d cells up in %.1fs: router %s", len(self.cells), time.monotonic() - started, self.api_url)

    def _onboarder(
        self, pool: UserPool, cell: RunningCell, tenant: str, user: str, admin: str
    ) -> Callable[[str], None]:
        """A demo tenant's onboarding in its cell: its user and admin, its record and API key."""

        def onboard(cell_id: str) -> None:
            ensure_user(pool, user, tenant)
            ensure_user(pool, admin, tenant, admin=True)
            local_admin(cell.state).ensure(tenant)

        return onboard

    def _launch(self, cell_id: str, control_url: str, plane: ControlPlane) -> RunningCell:
        state_dir = self.state_dir / CELLS_DIR / cell_id
        state_dir.mkdir(parents=True, exist_ok=True)
        parameters = {
            **self.options.parameters,
            "CellId": cell_id,
            "UserPoolId": plane.user_pool_id,
            "UserPoolClientId": plane.user_pool_client_id,
        }
        command = [
            sys.executable, "-m", "local_stack", "--state-dir", str(state_dir),
            "serve", "--no-seed", "--port", "0", "--user-pool-url", control_url,
            *(f"--parameter={name}={value}" for name, value in parameters.items()),
            *self.options.cell_options,
        ]  # fmt: skip
        # Its banner (stdout) is the set's to print; its log lines (stderr) are passed on.
        process: subprocess.Popen[bytes] = start_child(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        assert process.stderr is not None
        reader = threading.Thread(
            target=_pass_on, args=(process.stderr, cell_id, tail), name=f"{cell_id}-log", daemon=True
        )
        reader.start()
        return RunningCell(cell_id, state_dir, process, tail, reader)

    def _wait(self, cell: RunningCell) -> None:
        """Until the cell's state file names its process; :class:`CellFailed` if it exits first."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            code = cell.process.poll()
            if code is not None:
                cell.reader.join(timeout=5)
                raise CellFailed(f"{cell.cell_id} did not start (exit status {code}):\n" + "\n".join(cell.tail))
            state = read_state(cell.state_dir)
            if state is not None and state.get("pid") == cell.process.pid:
                cell.state = state
                return
            time.sleep(0.1)
        raise CellFailed(f"{cell.cell_id} did not start in {START_TIMEOUT_S:.0f} s:\n" + "\n".join(cell.tail))

    def stop(self) -> None:
        if self.router is not None:
            _end(self.router, signal.SIGTERM)
            self.router = None
        for cell in self.cells:
            if cell.process.poll() is None:
                cell.process.send_signal(signal.SIGINT)
        for cell in self.cells:
            _end(cell.process, None)
            cell.reader.join(timeout=5)
        self.cells = []
        if self.control is not None:
            self.control.stop()
            self.control = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._owns_files:
            if self._wrote_state:
                (self.state_dir / STATE_FILE).unlink(missing_ok=True)
            self.store.remove()
            shutil.rmtree(self.state_dir / CELLS_DIR, ignore_errors=True)
            self._owns_files = self._wrote_state = False

    # ------------------------------------------------------------ what it offers
    def user_pool(self) -> UserPool:
        assert self.control is not None
        assert self.plane is not None
        return UserPool(
            self.control.client("cognito-idp"),
            self.plane.user_pool_id,
            self.plane.user_pool_client_id,
            self.plane.admin_group,
        )

    def state(self) -> dict[str, Any]:
        """The set's ``stack.json``: the default cell's, with the set's own keys over it."""
        assert self.control is not None
        assert self.plane is not None
        return {
            **self.cells[0].state,
            "pid": os.getpid(),
            "api_url": self.api_url,
            "user_pool_url": self.control.url,
            "user_pool_id": self.plane.user_pool_id,
            "user_pool_client_id": self.plane.user_pool_client_id,
            "user_pool_provider_name": self.plane.user_pool_provider_name,
            "admin_group": self.plane.admin_group,
            "cells": {cell.cell_id: str(cell.state_dir) for cell in self.cells},
            "default_cell": self.cells[0].cell_id,
            "directory_table": self.plane.directory_table,
            "control_plane_url": self.control.url,
            "route_store": str(self.state_dir / STORE_FILE),
        }


def start_router(bound: socket.socket, store: Path, origins: dict[str, str], *, default: str) -> subprocess.Popen[str]:
    """``router/local_router.cjs`` on the socket ``bound`` (bound, not listening: it
    listens at :func:`router_listen`), reading the store's file ``store``; ``origins``
    maps each cell's ``<API domain>/<stage>`` (its origin in the store) to its URL,
    ``default`` is the default cell's URL."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("make dev CELLS=<n> runs its router under Node.js: install node (18 or later)")
    router: subprocess.Popen[str] = start_child(
        [node, str(ROUTER_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=[bound.fileno()]
    )
    config = {
        "source": str(EDGE_FUNCTION),
        "store": str(store),
        "origins": origins,
        "default": default,
        "fd": bound.fileno(),
    }
    assert router.stdin is not None
    router.stdin.write(json.dumps(config) + "\n")
    router.stdin.flush()
    return router


def router_listen(router: subprocess.Popen[str]) -> None:
    """The router listens on its socket (it answers from now on)."""
    assert router.stdin is not None
    assert router.stdout is not None
    router.stdin.write("listen\n")
    router.stdin.flush()
    answer = router.stdout.readline().strip()
    if answer != "listening":
        raise RuntimeError(f"the router did not start (it said {answer!r}; exit status {router.poll()})")


def _pass_on(stream: IO[bytes], cell_id: str, tail: collections.deque[str]) -> None:
    """A cell's stderr, line by line, to the supervisor's stderr prefixed with its id;
    the last lines kept for an error."""
    for raw in stream:
        line = raw.decode(errors="replace").rstrip("\n")
        tail.append(line)
        sys.stderr.write(f"[{cell_id}] {line}\n")
        sys.stderr.flush()


def _end(process: subprocess.Popen[Any], signum: signal.Signals | None) -> None:
    """The process ended: sent ``signum`` (if any and it runs), waited for, killed after the timeout."""
    if signum is not None and process.poll() is None:
        process.send_signal(signum)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdin is not None:
        process.stdin.close()
    if process.stdout is not None:
        process.stdout.close()
