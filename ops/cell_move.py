"""Move a tenant to another cell online: ``make tenant TENANT=<t> CELL=<cell>``
(``python -m ops.tenants --cell``; ``PLACEMENT`` with it picks the placement
in the new cell, the tenant's own by default).

A cell is a stack that shares nothing with another (docs/cells.md): its own
tables, tenant records, API keys and usage plans, webhook key, queues,
functions and operator credentials. The move is :mod:`ops.move`'s, its
destination table in the other cell (:class:`CellMover` is a
:class:`~ops.move.Mover`: the same copy, fence, catch-up, digest, sync,
recount, trailing copy, erase, keys-only check, clocks, lease, resume and
rollback), across two tenant records instead of one
(:mod:`support_tickets.data.placement`, "Between cells"), plus what lives
outside the table. Its steps, from cell A to cell B:

1. **Arriving**: the tenant's API key in B's usage plan of its tier (made, or
   found by its name), then its record in B, ``ARRIVING`` from A (its tier,
   status, shards, B's key, its placement there): B's authorizer answers the
   tenant with B's key from then on, B's functions refuse it (503
   ``TENANT_MOVING``) and B's stream functions own none of its records. The
   directory notes ``moving_to`` (:class:`Directory`).
2. **Copying**: A's record ``COPYING`` with ``moving_to``: the mover's copy and
   catch-up, A's record fencing A's writes, into B's table (B's pool, or a
   dedicated table made in B first). Before the switch the mover also waits
   for API Gateway's authorizer cache (``ReauthorizeEvery``) to have gone
   since B's record was written, so that no answer B gave the tenant before
   (a token a stale route sent there: "not placed here") is still cached when
   B starts serving it; the wait runs with writes open.
3. **Switching**: A's record ``SWITCHING`` (writes refused), the sync (the
   digest: what was written during the copy) and the recount in B. The usage
   ledger is copied too (below).
4. **The flip**: B's record ``FLIPPED`` (served from B: reads; writes still
   refused; ``placed_at``), then A's ``MOVED_OUT`` (A refuses everything of
   the tenant), A's API key deleted (an answer A's authorizer cached with it
   now meets ``INVALID_API_KEY``: 503), the directory's epoch + 1 with
   ``cell=B``, then the router's store (:mod:`ops.cell_routes`: an entry is
   never replaced by an older epoch). The two record writes run with Ctrl-C
   ignored: an interrupted run never reopens writes in A once B serves reads.
   From then on B's record holds the move (its lease, its phase).
5. **Erasing**: B's record ``ERASING`` (writes open in B) after
   ``SWITCH_WAIT_SECONDS`` (every container of both cells has seen its
   cell's record) and the hand-over of the deliveries in flight (below; with
   one more ``SWITCH_WAIT_SECONDS`` when it marked any), the trailing copy, then A's copy erased and checked (a
   keys-only Scan); then A's usage ledger and last A's record (until then A
   answers 503 rather than "unknown": either way 503 in a cell), and a
   keys-only Scan of A's pool finds nothing of the tenant; then B's move
   fields are cleared.

**Outside the table.** Webhook secrets are KMS ciphertext under the cell's
own key: each item written into B carries A's ciphertext re-encrypted under
B's key with the same encryption context (``tenant_id``, ``webhook_id``),
by KMS's ``ReEncrypt`` (:meth:`CellMover.carried`): the secret is in clear
inside KMS only, never in the mover's memory, an item or a log (the key
policy denies ``kms:Decrypt`` to all but the delivery role, operators
included; the operator needs ``kms:ReEncryptFrom`` on A's key and
``kms:ReEncryptTo`` on B's, which B's key policy grants when the cells are
in different accounts).
The usage ledger (A's pool, ``TENANT#<t>|USAGE``) is copied into B's pool at
the switch and at each trailing pass, each of A's own counter items under
its sort key plus ``#<A>#<the move's start>`` (B's own items for the same day
and slot, B's authorizer invocations during the move, stay apart, and so do
A's counters of an earlier stay that came back with the tenant; readers sum a
day's items whatever follows its ``<day>#``), an item already carrying a cell
keeping its key; then A's ledger is erased with A's record. Idempotency records,
deliveries and parked messages are table items: copied like the rest.

**Deliveries in flight** (:meth:`CellMover._hand_over`): A's queue may hold
messages of the tenant at the flip (just sent, or waiting behind a retrying
message of their group for hours), which A's delivery function lets go once
the tenant moved out. The fan-out records each delivery before it queues it,
so each of them has a ``PENDING`` record, copied into B: before writes open
in B each is marked for redelivery, and B sends them in order ahead of any
new event; after the erase, what the trailing copy brought (events a lagging
audit writer of A queued after the switch) is marked the same way, sent last.
A delivery A attempted with a record cached from before the switch may be
sent by both cells: at least once, the same ``webhook-id``.

**Between the flip and the edge** a request the router still sends to A (its
store's entry not yet propagated: seconds, with no published bound) gets
503 ``TENANT_MOVING`` with ``Retry-After``, reads included: A's data stops
at the switch, so serving a read there would go back in time behind a write
acknowledged in B. That refusal replaces "reads never fail" for the
propagation window; within one cell a move's reads never fail.

**Interrupted**: run the command again. Before the flip the move resumes
(again from the copy, as :mod:`ops.move` resumes) or, with ``CELL=`` the
tenant's cell, rolls back: A's writes open again, B's copy erased and
checked, then B's ledger copy, record and key deleted, the directory's
``moving_to`` cleared, A's move fields last. After the flip it only goes
forward (B's record says so; the directory's epoch with it). A second mover
is refused while one runs (the record that holds the move: A's, then B's).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from botocore.exceptions import ClientError

from ops.move import (
    MoveError,
    Mover,
    OnServerTime,
    Outcome,
    RecordStore,
    ServerClock,
    observed,
    partition_items,
    signals_ignored,
)
from ops.tenant_data import keys_under_prefix
from stack_model.template import template
from support_tickets.core import keys
from support_tickets.data.audit_items import iso_time
from support_tickets.data.placement import CellPhase, MovePhase, Placement, data_table
from support_tickets.data.table import OwnClient, TenantTable, error_code
from support_tickets.data.tenant_registry import TenantConfig
from support_tickets.webhooks.delivery_records import AS_QUEUED, PENDING, REDELIVER_MARK
from support_tickets.webhooks.events import RETRY_WINDOW_SECONDS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from ops.api_keys import ApiKeys

# Secret attributes of a webhook item (support_tickets.webhooks.admin_repository.WebhookItem): KMS ciphertext, base64.
SECRET_ATTRIBUTES: Final = ("secret", "previous_secret")
# Rounds of the final check of the old cell's pool (late usage items copied over in between).
LEFT_CHECK_ROUNDS: Final = 6


def authorizer_cache_seconds() -> float:
    """How long API Gateway keeps an authorizer's answer: the template's longest
    ``ReauthorizeEvery`` (SAM's default, 300 s, when it names none)."""
    found = [
        float(authorizer.get("Identity", {}).get("ReauthorizeEvery", 300))
        for resource in template()["Resources"].values()
        if resource.get("Type") == "AWS::Serverless::Api"
        for authorizer in resource.get("Properties", {}).get("Auth", {}).get("Authorizers", {}).values()
    ]
    return max(found, default=300.0)


class Directory(Protocol):
    """The control plane's directory (tenant -> cell, with an epoch that goes up at every move)."""

    def cell_of(self, tenant_id: str) -> str | None:
        """The cell the directory places the tenant in (``None``: it names none)."""
        ...

    def moving(self, tenant_id: str, to_cell: str | None) -> None:
        """Notes the cell the tenant is moving to (``None``: no move any more)."""
        ...

    def place(self, tenant_id: str, cell_id: str) -> int:
        """Places the tenant in ``cell_id``, its epoch one higher (unchanged when it
        is placed there already, so that a command run again writes the same); the epoch."""
        ...


@dataclass(frozen=True)
class Cell:
    """One cell as its operator reaches it: its tenant records (in its pool
    table), its API keys and usage plans, its webhook secrets' key, and how a
    dedicated table is made there."""

    cell_id: str
    admin: RecordStore  # ops.tenants.TenantAdmin of the cell's pool table
    keys: ApiKeys | None = None
    kms: Any = None  # a KMS client of the cell's account and operator
    webhook_key_arn: str | None = None
    deploy: Callable[[str], str] | None = None
    # How long its API Gateway keeps an authorizer's answer, when it is not the template's.
    authorizer_cache_seconds: float | None = None

    @property
    def client(self) -> DynamoDBClient:
        return self.admin.client

    @property
    def pool(self) -> str:
        return self.admin.table_name

    def table(self, tenant_id: str, name: str | None = None) -> TenantTable:
        """The tenant's view of ``name`` (its pool by default) with this cell's operator client."""
        return TenantTable(tenant_id, name or self.pool, OwnClient(self.client))


@dataclass
class CellMover(Mover):
    """Moves one tenant to another cell (the module's docstring). ``store`` is
    the record store of the cell that holds the move's record at the moment
    (set by each run); ``to`` of :meth:`move` is a cell id."""

    cells: Mapping[str, Cell] = field(default_factory=dict)
    directory: Directory | None = None
    # The router's store: (tenant, cell, the directory's epoch), e.g. ops.cell_routes.publish_tenant_route.
    publish: Callable[[str, str, int], object] | None = None
    # The tenant's placement in the new cell (None: the one it has).
    placement: str | None = None
    authorizer_cache_seconds: float = field(default_factory=authorizer_cache_seconds)
    # Set for the duration of a run: the cells, their stores on DynamoDB's time, and the old cell's record.
    _source: str = field(default="", init=False, repr=False)
    _dest: str = field(default="", init=False, repr=False)
    _stores: dict[str, RecordStore] = field(default_factory=dict, init=False, repr=False)
    _left: TenantConfig | None = field(default=None, init=False, repr=False)

    # ------------------------------------------------------------ the command
    @contextmanager
    def _on_server_time(self, server: ServerClock) -> Iterator[None]:
        """Every cell's record store on DynamoDB's time, learnt from every cell's responses."""
        operator = self.store
        with ExitStack() as stack:
            for cell in self.cells.values():
                stack.enter_context(observed(cell.client, server))
            self._stores = {cell_id: OnServerTime(cell.admin, server) for cell_id, cell in self.cells.items()}
            try:
                yield
            finally:
                self.store, self._stores = operator, {}

    def _move(self, tenant_id: str, to: str) -> Outcome:
        keys.validate_tenant_id(tenant_id)
        if to not in self.cells:
            raise MoveError(f"unknown cell {to!r} (one of {', '.join(sorted(self.cells))})")
        if self.placement is not None and self.placement not in tuple(Placement):
            raise MoveError(f"unknown placement {self.placement!r} (pool or dedicated)")
        self._begin_run()
        self._left = None
        here = self._store(to).record(tenant_id)
        if here.moving_from is not None:  # a move into `to` is under way: it goes on
            if here.moving_from not in self.cells:
                raise MoveError(f"{tenant_id} moves in from cell {here.moving_from}, which this command does not reach")
            return self._arrive(tenant_id, here.moving_from, to)
        if here.stored:
            return self._stay(here, to)
        source = self._placed_in(tenant_id, to)
        return self._arrive(tenant_id, source, to)

    def _placed_in(self, tenant_id: str, to: str) -> str:
        """The cell that holds the tenant, which is not ``to``: the directory's, else the one cell with its record."""
        named = self.directory.cell_of(tenant_id) if self.directory is not None else None
        if named is not None and named != to:
            if named not in self.cells:
                raise MoveError(f"the directory places {tenant_id} in cell {named}, which this command does not reach")
            return named
        holding = [cell for cell in sorted(self.cells) if cell != to and self._store(cell).record(tenant_id).stored]
        if not holding:
            raise MoveError(f"no tenant {tenant_id!r} in any cell (make onboard creates tenants)")
        if len(holding) > 1:
            raise MoveError(f"tenant {tenant_id} has a record in cells {', '.join(holding)}: the directory must say")
        return holding[0]

    def _stay(self, record: TenantConfig, cell: str) -> Outcome:
        """``CELL=`` the tenant's own cell: a move out of it not yet flipped is
        rolled back (B's part included); otherwise there is nothing to move."""
        tenant = record.tenant_id
        if record.cell_phase == CellPhase.MOVED_OUT:
            raise MoveError(
                f"{tenant} moved to cell {record.moving_to}: finish that move (CELL={record.moving_to}), then move back"
            )
        if record.moving_to is not None:
            self._source, self._dest = cell, record.moving_to
            self.store = self._store(cell)
            arrived = self._store(record.moving_to).record(tenant)
            if arrived.moving_from == cell and arrived.cell_phase is None:  # its flip began: only forward now
                raise MoveError(
                    f"the move of {tenant} to cell {record.moving_to} is past its switch: finish it "
                    f"(CELL={record.moving_to}), then move back (CELL={cell})"
                )
            return self._roll_back(self._take_over(record))
        for other in sorted(set(self.cells) - {cell}):  # a move stopped before A's record named it
            arriving = self._store(other).record(tenant)
            if arriving.cell_phase == CellPhase.ARRIVING and arriving.moving_from == cell:
                self._source, self._dest = cell, other
                self._undo_arrival(tenant)
        self._note(f"{tenant} is in cell {cell} already: nothing to move")
        return Outcome(record)

    def _arrive(self, tenant_id: str, source: str, dest: str) -> Outcome:
        self._source, self._dest = source, dest
        arriving = self._store(dest).record(tenant_id)
        if arriving.moving_from == source and arriving.cell_phase is None:  # flipped: B's record holds the move
            self.store = self._store(dest)
            record = self._take_over(arriving)
            if record.move_phase == MovePhase.FLIPPED:  # the flip's other writes, if a stopped run left them
                self._leave(tenant_id, record.placed_at)
                self.checkpoint("flipped")
            return self._continue(record)
        self.store = self._store(source)
        record = self.store.record(tenant_id)
        if not record.stored:
            raise MoveError(f"no tenant {tenant_id!r} in cell {source} (make onboard creates tenants)")
        if record.offboarding_since is not None:
            raise MoveError(f"tenant {tenant_id} is being offboarded: it can't move")
        if record.resharding:
            raise MoveError(f"tenant {tenant_id} is being resharded: finish it first (make tenant TENANT={tenant_id})")
        if record.cell_phase is not None or (record.moving and record.moving_to != dest):
            where = f"cell {record.moving_to}" if record.moving_to else f"the {record.move_to} placement"
            raise MoveError(
                f"{tenant_id} is moving to {where} ({record.cell_phase or record.move_phase}): finish it first"
            )
        self._note(f"{tenant_id}: cell {source}, placement {record.placement}")
        if record.moving:
            record = self._take_over(record)
            self._arriving(record, Placement(str(record.move_to)), record.move_table)
        else:  # a new move, or one stopped before A's record named it (two runs: A's version picks one)
            record = self._announce_move(record)
        return self._continue(record)

    def _announce_move(self, record: TenantConfig) -> TenantConfig:
        target = Placement(self.placement or record.placement)
        move_table: str | None = None
        if target == Placement.DEDICATED:
            deploy = self._cell(self._dest).deploy
            if deploy is None:
                raise MoveError(f"no way to make the tenant's dedicated table in cell {self._dest}")
            move_table = deploy(record.tenant_id)
            self._note(f"{record.tenant_id}'s table in cell {self._dest}: {move_table}")
        self._record = record
        self._announced = True
        self._arriving(record, target, move_table)
        announced = self._write(
            {
                "move_to": target,
                "move_table": move_table,
                "move_phase": MovePhase.COPYING,
                "move_started_at": math.ceil(self.store.clock()),
                "moving_to": self._dest,
            }
        )
        self._note(f"COPYING: {record.tenant_id} moves to cell {self._dest} ({target})")
        self.checkpoint("announced")
        return announced

    def _arriving(self, record: TenantConfig, target: Placement, table: str | None) -> None:
        """The tenant's key in B's plan of its tier and its record there, ``ARRIVING``
        (each made only if not there yet, the record brought up to date: a run again
        writes nothing new); the directory's ``moving_to``."""
        tenant, dest = record.tenant_id, self._cell(self._dest)
        key_id, key = record.api_key_id, record.api_key
        if dest.keys is not None:
            key_id, key = dest.keys.ensure(tenant)
            dest.keys.place(key_id, record.tier)
        store = self._store(self._dest)
        arriving = store.record(tenant)
        # What it is in A (which no one changes while the move runs: a change stops the mover), where it goes in B.
        wanted: dict[str, Any] = {
            **{name: getattr(record, name) for name in ("shards", "read_shards", "tier", "status")},
            "api_key_id": key_id,
            "api_key": key,
            "placement": target,
            "table": table,
        }
        if not arriving.stored:
            arrival = {
                "cell_phase": CellPhase.ARRIVING,
                "moving_from": self._source,
                "changed_at": math.ceil(store.clock()),
            }
            store.write(arriving, {**wanted, **arrival})
            self._note(f"ARRIVING: {tenant}'s record in cell {self._dest}, its API key {key_id} there")
            self.checkpoint("arriving")
        elif any(getattr(arriving, name) != value for name, value in wanted.items()):
            store.write(arriving, wanted)
        if self.directory is not None:
            self.directory.moving(tenant, self._dest)

    def _command(self, tenant_id: str, to: str) -> str:
        return f"make tenant TENANT={tenant_id} CELL={to}"

    def _left_in(self, record: TenantConfig, to: str, command: str) -> str:
        tenant, source, dest = record.tenant_id, self._source, self._dest
        if record.moving_from is None and record.moving_to is None:
            return self._left_outside_a_move(tenant, to, command)
        if record.moving_to is not None and to != dest:
            return (
                f"interrupted while rolling back the move of {tenant} to cell {dest} (COPYING): its writes go to "
                f"cell {source}; {command} finishes the rollback"
            )
        if record.moving_to is not None:
            return (
                f"interrupted: the move of {tenant} to cell {dest} is in COPYING, its reads and writes go to cell "
                f"{source}; {command} finishes it (CELL={source} rolls it back)"
            )
        if record.move_phase == MovePhase.FLIPPED:
            return (
                f"interrupted: the move of {tenant} to cell {dest} is FLIPPED, its reads go to cell {dest}, its "
                f"writes answer 503 TENANT_MOVING until {command} goes on: run it now"
            )
        return (
            f"interrupted: the move of {tenant} to cell {dest} is ERASING, its reads and writes go to cell {dest}; "
            f"{command} erases it from cell {source} and finishes"
        )

    def _left_outside_a_move(self, tenant: str, to: str, command: str) -> str:
        source, dest = self._source, self._dest
        if self.store is self._stores.get(dest):
            return f"interrupted after the move ended: {tenant} is in cell {dest}"
        if to == source:
            return f"interrupted after the rollback: {tenant} is in cell {source}"
        return (
            f"interrupted before its move began: {tenant} is in cell {source}, served there; {command} "
            f"moves it (CELL={source} deletes what the move made in cell {dest})"
        )

    # ------------------------------------------------------------ the switch
    def _before_catch_up(self, record: TenantConfig) -> None:
        arrived = self._store(self._dest).record(record.tenant_id).changed_at
        cached = self._cell(self._dest).authorizer_cache_seconds
        wait = self.authorizer_cache_seconds if cached is None else cached
        self._wait_until(arrived + wait, "for answers the new cell's authorizer cached")

    def _flip(self, record: TenantConfig, placed_at: int) -> TenantConfig:
        """B's record serves the tenant (reads), then A's refuses it: both with
        Ctrl-C ignored, so that no interruption reopens A's writes after B served a read."""
        dest = self._store(self._dest)
        with signals_ignored():
            arriving = dest.record(record.tenant_id)
            if arriving.cell_phase != CellPhase.ARRIVING or arriving.moving_from != self._source:
                raise MoveError(f"{record.tenant_id}'s record in cell {self._dest} changed meanwhile: run it again")
            flipped = dest.write(
                arriving,
                {
                    "cell_phase": None,
                    "placed_at": placed_at,
                    "previous_table": None,
                    "previous_placed_at": placed_at,
                    "move_to": record.move_to,
                    "move_table": record.move_table,
                    "move_phase": MovePhase.FLIPPED,
                    "move_started_at": record.move_started_at,
                    "changed_at": math.ceil(dest.clock()),
                },
            )
            self.store, self._record = dest, flipped
            self.checkpoint("arrived")
            self._leave(record.tenant_id, placed_at, record)
        self._note(f"FLIPPED: reads go to cell {self._dest} (placed at {placed_at}); cell {self._source} refuses them")
        return flipped

    def _leave(self, tenant: str, placed_at: int, left: TenantConfig | None = None) -> None:
        """A's record ``MOVED_OUT`` (``left``, as this run holds it; else read), A's
        key deleted, the directory and the router naming B: each only if not done
        yet (a run after the flip finishes it; A's record may be gone already)."""
        source = self._store(self._source)
        left = left or source.record(tenant)
        if left.stored and left.cell_phase is None:
            if left.moving_to != self._dest:
                raise MoveError(f"{tenant}'s record in cell {self._source} changed meanwhile: run it again")
            left = source.write(
                left,
                {
                    **super()._move_cleared(),
                    "cell_phase": CellPhase.MOVED_OUT,
                    "moved_out_at": placed_at,
                    "changed_at": math.ceil(source.clock()),
                },
            )
        self._left = left
        old_keys = self._cell(self._source).keys
        if old_keys is not None and old_keys.delete(tenant, left.api_key_id):
            self._note(f"{tenant}'s API key in cell {self._source} deleted")
        if self.directory is not None:
            epoch = self.directory.place(tenant, self._dest)
            if self.publish is not None:
                self.publish(tenant, self._dest, epoch)

    # ------------------------------------------------------------ where the data goes
    def _store(self, cell: str) -> RecordStore:
        return self._stores.get(cell) or self._cell(cell).admin

    def _cell(self, cell: str) -> Cell:
        return self.cells[cell]

    def _old(self, record: TenantConfig) -> TenantTable:
        """A's table: its record names it (after the flip, its ``MOVED_OUT`` record)."""
        source = self._cell(self._source)
        named = record if record.moving_to is not None else self._left
        if named is None:
            named = self._left = self._store(self._source).record(record.tenant_id)
        return source.table(record.tenant_id, data_table(named, source.pool))

    def _new(self, record: TenantConfig) -> TenantTable:
        return self._cell(self._dest).table(record.tenant_id, record.move_table)

    def _named(self, table: TenantTable) -> str:
        """Its cell's name too: every cell's pool is ``SupportTicket``."""
        for cell_id, cell in self.cells.items():
            if table.clients == cell.table(table.tenant_id).clients:
                return f"cell {cell_id}'s {table.table_name}"
        return table.table_name

    def _is_pool(self, table: TenantTable) -> bool:
        return any(table == cell.table(table.tenant_id) for cell in self.cells.values())

    def carried(self, table: TenantTable, item: dict[str, Any]) -> dict[str, Any]:
        """A webhook's secrets written into B: A's key's ciphertext re-encrypted under
        B's key, the same context (``tenant_id``, ``webhook_id``), by KMS itself
        (``ReEncrypt``: the secret is in clear inside KMS only; the keys' policy
        lets no operator ``Decrypt``)."""
        pk, sk = str(item["pk"]["S"]), str(item["sk"]["S"])
        if pk != keys.webhooks_pk(table.tenant_id) or not sk.startswith(keys.WEBHOOK_SK_PREFIX):
            return item
        source, dest = self._cell(self._source), self._cell(self._dest)
        if table.clients != OwnClient(dest.client) or not any(name in item for name in SECRET_ATTRIBUTES):
            return item
        if source.kms is None or source.webhook_key_arn is None or dest.webhook_key_arn is None:
            raise MoveError(
                f"a webhook of {table.tenant_id} has a secret, and cell {source.cell_id} or "
                f"{dest.cell_id} names no webhook key: its secret can't be carried"
            )
        context = {"tenant_id": table.tenant_id, "webhook_id": sk.removeprefix(keys.WEBHOOK_SK_PREFIX)}
        carried = dict(item)
        for name in SECRET_ATTRIBUTES:
            sealed = item.get(name, {}).get("S")
            if sealed is None:
                continue
            resealed = source.kms.re_encrypt(
                CiphertextBlob=base64.b64decode(sealed),
                SourceKeyId=source.webhook_key_arn,
                SourceEncryptionContext=context,
                DestinationKeyId=dest.webhook_key_arn,
                DestinationEncryptionContext=context,
            )
            carried[name] = {"S": base64.b64encode(resealed["CiphertextBlob"]).decode()}
        return carried

    def _move_cleared(self) -> dict[str, Any]:
        return {**super()._move_cleared(), "moving_from": None, "moving_to": None}

    # ------------------------------------------------------------ deliveries in flight
    def _before_writes_open(self, record: TenantConfig, outcome: Outcome) -> bool:
        handed_over = self._hand_over(record)
        outcome.handed_over += handed_over
        return handed_over > 0

    def _hand_over(self, record: TenantConfig, *, late: bool = False) -> int:
        """What A's queue held of the tenant's deliveries, sent from B (A's delivery
        function lets the tenant's messages go once it moved out; the fan-out records
        every delivery before it queues it, so each has a record, copied into B).
        Before writes open in B (FLIPPED), each delivery still ``PENDING`` within the
        retry window is marked for redelivery (B's audit-trail function queues its
        stored event again: the same bytes, the same ``webhook-id``, in the order of
        the marks, which is each webhook's delivery order; B's delivery function holds
        them until writes open, so they go before any new event of the tenant), but
        those in a webhook's lot; a lot's drain, whose token was A's, is restarted by
        marking its oldest message still pending (B's delivery function parks it
        again, finds the drain not running and sends B's token). ``late`` (after the
        erase): only what a lagging stream function of A queued after the switch, which
        the trailing copy brought: deliveries of events before the flip whose record is
        still as the fan-out wrote it (:data:`AS_QUEUED`: no delivery function has
        touched it, no mark). Every mark is the flip's time, written only where it is
        not yet: a run again marks nothing twice. How many deliveries were marked."""
        tenant = record.tenant_id
        table = self._new(record)
        at = iso_time(record.placed_at)
        first = keys.DELIVERY_SK_PREFIX + f"{max(record.placed_at - RETRY_WINDOW_SECONDS, 0) * 1000:013d}"
        flipped = keys.DELIVERY_SK_PREFIX + f"{record.placed_at * 1000:013d}"
        hooks = {
            str(item["sk"]["S"]).removeprefix(keys.WEBHOOK_SK_PREFIX)
            for item in partition_items(table, keys.webhooks_pk(tenant), "", "pk, sk")
            if str(item["sk"]["S"]).startswith(keys.WEBHOOK_SK_PREFIX)
        }
        marked = 0
        for hook in sorted(hook for hook in hooks if keys.is_valid_webhook_id(hook)):
            items = partition_items(table, keys.webhook_parked_pk(tenant, hook), keys.PARKED_SK_PREFIX, "sk")
            parked = [
                delivery
                for item in items
                if str(item["sk"]["S"]).startswith(keys.PARKED_SK_PREFIX)
                and keys.is_valid_delivery_id(delivery := str(item["sk"]["S"]).removeprefix(keys.PARKED_SK_PREFIX))
            ]
            pending = [
                str(item["sk"]["S"]).removeprefix(keys.DELIVERY_SK_PREFIX)
                for item in partition_items(table, keys.webhook_deliveries_pk(tenant, hook), first)
                if item.get("status", {}).get("S") == PENDING and not (late and str(item["sk"]["S"]) >= flipped)
            ]
            lot = set(parked)
            if late:
                marked += sum(
                    self._mark_redelivery(table, hook, delivery, at, as_queued=True)
                    for delivery in pending
                    if delivery not in lot
                )
                continue
            if parked:
                table.call_if(
                    "update_item",
                    TableName=table.table_name,
                    Key=keys.webhook_circuit_key(tenant, hook),
                    UpdateExpression="SET token_active = :false",
                    ConditionExpression="token_active = :true",
                    ExpressionAttributeValues={":false": {"BOOL": False}, ":true": {"BOOL": True}},
                )
            # The lot's oldest message that is still a pending delivery restarts its drain.
            marked += next((1 for delivery in parked if self._mark_redelivery(table, hook, delivery, at)), 0)
            marked += sum(
                self._mark_redelivery(table, hook, delivery, at) for delivery in pending if delivery not in lot
            )
        if marked:
            self._note(f"{marked} pending deliveries of {tenant} sent again from cell {self._dest}")
        return marked

    def _mark_redelivery(
        self, table: TenantTable, hook: str, delivery: str, at: str, *, as_queued: bool = False
    ) -> int:
        if not keys.is_valid_delivery_id(delivery):
            return 0
        self.heartbeat()
        values = {":at": {"S": at}, ":pending": {"S": PENDING}}
        condition = "#status = :pending AND (attribute_not_exists(#mark) OR #mark <> :at)"
        if as_queued:
            condition = AS_QUEUED
            values |= {":zero": {"N": "0"}, ":null": {"S": "NULL"}}
        return int(
            table.call_if(
                "update_item",
                TableName=table.table_name,
                Key=keys.delivery_key(table.tenant_id, hook, delivery),
                UpdateExpression="SET #mark = :at",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#status": "status", "#mark": REDELIVER_MARK},
                ExpressionAttributeValues=values,
            )
        )

    # ------------------------------------------------------------ the usage ledger
    def _synced_outside(self, record: TenantConfig) -> None:
        copied = self._copy_ledger(record)
        self._note(f"usage ledger: {copied} counter items copied into cell {self._dest}'s")

    def _trailing_outside(self) -> int:
        assert self._record is not None
        return self._copy_ledger(self._record)

    def _copy_ledger(self, record: TenantConfig) -> int:
        """A's counter items into B's pool where B's differ (each under
        :func:`~support_tickets.core.keys.moved_usage_sk`, this move's start in
        the key of A's own); how many."""
        tenant_id = record.tenant_id
        if record.move_started_at is None:
            raise MoveError(f"{tenant_id}'s record names no move: its usage ledger is carried only by a move")
        source, dest = self._cell(self._source), self._cell(self._dest)
        old, new = source.table(tenant_id), dest.table(tenant_id)
        pk = keys.usage_pk(tenant_id)
        there = {item["sk"]["S"]: item for item in partition_items(new, pk)}
        copied = 0
        for item in partition_items(old, pk):
            sk = keys.moved_usage_sk(str(item["sk"]["S"]), self._source, record.move_started_at)
            if sk is None:
                continue
            carried = {**item, "sk": {"S": sk}}
            if there.get(sk) != carried:
                self._put(new, carried, conditional=False)
                copied += 1
        return copied

    # ------------------------------------------------------------ after the erase: nothing of A's left
    def _erased(self, record: TenantConfig, outcome: Outcome) -> None:
        """The deliveries the trailing copy brought handed over, A's usage ledger
        (copied once more) and A's record deleted, then a
        keys-only Scan of A's pool until it finds nothing of the tenant (a
        late counter item copied over first; anything else left and reported)."""
        tenant = record.tenant_id
        outcome.handed_over += self._hand_over(record, late=True)  # what the trailing copy brought
        source = self._cell(self._source)
        pool = source.table(tenant)
        self._copy_ledger(record)
        _erase_ledger(pool)
        self._delete_record(self._source, tenant, lambda left: left.cell_phase == CellPhase.MOVED_OUT)
        self.checkpoint("left")
        usage = set(keys.usage_partitions(tenant))
        for _ in range(LEFT_CHECK_ROUNDS):
            found = keys_under_prefix(pool)
            if not found:
                outcome.verified += f"; a Scan of cell {self._source}'s pool found nothing under its prefix"
                return
            if any(item["pk"]["S"] not in usage for item in found):
                outcome.verified += (
                    f"; LEFT THERE: {len(found)} item(s) in cell {self._source}'s pool: a keys-only Scan for "
                    f"{keys.tenant_prefix(tenant)} finds them"
                )
                return
            self._copy_ledger(record)
            pool.batch_delete(found)
        raise MoveError(f"usage items kept appearing in cell {self._source}'s pool: run the command again")

    def _delete_record(self, cell: str, tenant_id: str, ours: Callable[[TenantConfig], bool]) -> None:
        """The tenant's record in ``cell`` deleted, if it is still the one ``ours`` recognises."""
        store = self._store(cell)
        current = store.record(tenant_id)
        if not current.stored or not ours(current):
            return
        try:
            self._cell(cell).client.delete_item(
                TableName=self._cell(cell).pool,
                Key=keys.tenant_config_key(tenant_id),
                ConditionExpression="#version = :version",
                ExpressionAttributeNames={"#version": "version"},
                ExpressionAttributeValues={":version": {"N": str(current.version)}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            raise MoveError(f"{tenant_id}'s record in cell {cell} changed meanwhile: run the command again") from exc

    # ------------------------------------------------------------ rolling back
    def _rolled_back_copy(self, record: TenantConfig) -> None:
        self._undo_arrival(record.tenant_id)

    def _undo_arrival(self, tenant_id: str) -> None:
        """What the move made in B besides the copy: its copy of A's usage ledger,
        its record (while still ``ARRIVING`` from A) and its key; the directory's
        ``moving_to``. B's own counters (what B's authorizer answered the tenant
        during the move) stay: B's cost, not A's."""
        dest = self._cell(self._dest)
        _erase_ledger_copies(dest.table(tenant_id))
        arriving = self._store(self._dest).record(tenant_id)
        self._delete_record(
            self._dest,
            tenant_id,
            lambda current: current.cell_phase == CellPhase.ARRIVING and current.moving_from == self._source,
        )
        if dest.keys is not None and dest.keys.delete(tenant_id, arriving.api_key_id):
            self._note(f"{tenant_id}'s API key in cell {self._dest} deleted")
        if self.directory is not None:
            self.directory.moving(tenant_id, None)
        self._note(f"{tenant_id}'s record in cell {self._dest} deleted")


def _erase_ledger(pool: TenantTable) -> None:
    """The tenant's usage partitions in a cell's pool table deleted."""
    tenant = pool.tenant_id
    pool.batch_delete(
        [item for pk in keys.usage_partitions(tenant) for item in partition_items(pool, pk, "", "pk, sk")]
    )


def _erase_ledger_copies(pool: TenantTable) -> None:
    """The counter items another cell's ledger put into this cell's (each names a
    cell after its ``<day>#<slot>``: :func:`~support_tickets.core.keys.moved_usage_sk`)
    deleted; the cell's own (``<day>#<slot>``, and its journal) kept."""
    tenant = pool.tenant_id
    pool.batch_delete(
        [
            item
            for item in partition_items(pool, keys.usage_pk(tenant), "", "pk, sk")
            if keys.moved_usage_sk(str(item["sk"]["S"]), "any", 0) == str(item["sk"]["S"])
        ]
    )
