"""Erase a tenant: ``make offboard TENANT=<t> CONFIRM=<t> [STACK=<s>]``.

    python -m ops.offboard --tenant acme --confirm acme [--key-waiting-days <7-30>]
                           (--local | --stack <s> [--control-plane <s>] [--region <r>])

Refuses unless ``--confirm`` is the tenant id. Erases every item of the
tenant, found without a Scan (:mod:`ops.tenant_data`): tickets and their
comments, histories and the tenant's trail, counts, the aggregator's
journals, idempotency records, and at last its tenant record; and deletes
its users from the user pool (signed out first). It keeps the tenant's
**usage ledger** (``TENANT#<t>|USAGE`` and ``TENANT#<t>|USAGE#JOURNAL`` in the
pool table): the operator's record of what the tenant used, billable after
it leaves, not the tenant's data (its counters hold numbers per day and route,
no content); the journal's items expire by their TTL (24 h), the counters
stay. It adds a note to it (``OFFBOARDED``: when, and the placement fields
that price a table of its own), so ``make usage`` still reports the tenant,
marked offboarded, once its record is gone. Nothing of another tenant is
touched: every key erased comes from a query of this tenant's own partitions
(a foreign row met on GSI1 is skipped), or from the check below (keys under
its own prefix only), and the layer refuses to batch-delete a key of another
tenant.

Then it **proves** it: a keys-only, parallel Scan of the whole table
(``ProjectionExpression`` ``pk, sk``, ``FilterExpression``
``begins_with(pk, :prefix)``, :data:`VERIFY_SEGMENTS` segments, consistent
reads) looks for any item left under ``TENANT#<t>|`` but its usage ledger, wherever it sits:
items the walk can't find (a ticket whose GSI1 key names another tenant,
``TENANT#<t>|SOMETHING_ELSE``...) are erased too (a ticket as the walk erases
one, anything else deleted), and the Scan repeats until it finds nothing. The
final message says what that check found. This is the one Scan of the
project, the documented exception to "no Scan in production code": an
operator's command, run rarely, reading keys only, once per pass, to make a
destructive command's claim true.

In this order, each step idempotent, so the command is resumable: run it
again after an interruption and it continues. A tenant with no record, no
users, no API key and no item (never onboarded, a typo, or erased already) is
a one-line error and exit status 1, with nothing written:

1. **Suspend**: the tenant record says SUSPENDED and ``offboarding_since``;
   wait until every function has seen it (``TENANT_CONFIG_TTL_SECONDS`` and a
   margin), so that no request of the tenant writes any more.
2. **Users**: sign out (refresh tokens revoked) and delete every user whose
   ``custom:tenant_id`` is the tenant. Cognito can't filter users on a custom
   attribute, so this lists the pool's users (the user pool's, not the table).
3. **Data**: each ticket is marked ``erasing`` (the stream functions'
   FilterCriteria drop records that carry it, so erasing a tenant writes no
   count and no audit event that would outlive it), its comments deleted,
   then its summary (last, so an interrupted run still finds the ticket), then
   its history; then the trail day by day (each day's events name the deleted
   tickets whose leftovers must go too; the days around the suspension
   always), the day index, the fixed partitions.
   Then, after ``--settle`` seconds, another pass, until a pass finds nothing
   (records the stream was still processing when the tenant was suspended
   may have written a count or an audit event meanwhile).
   Then the check above (the tenant record excepted while it stays).
4. **The record** stays, SUSPENDED, until ``erasable_at``: the users were
   deleted, but an ID token issued before stays valid until it expires
   (``IdTokenValidity``), the stream may retry a record until
   ``MaximumRecordAgeInSeconds``, and a usage delivery may arrive until the
   metering function's replay horizon (24 h: Lambda's asynchronous retries,
   a redrive from its failure queue); a tenant without a record would be
   ACTIVE by default, such a token could write again, and such a delivery
   would be counted after the tenant left (the marked record makes the
   metering function skip it: ``support_tickets.usage.metering``). Run the command again
   after that time (it says when): it makes a last pass and deletes the
   record, and the check runs again with only the usage ledger excepted. The
   tenant is then gone; its ledger stays.

**With cells** (``make dev CELLS=<n>``: the command acts on the tenant's cell; deployed:
``--stack`` the tenant's cell, ``--control-plane`` its control plane, whose directory
must name that stack, checked before anything is written), the
run that erases the record then drops the tenant's entry from the router's store,
and last the directory forgets it, its cell's tenant count one less (its room back)
in the same transaction; a run interrupted between them, run again, finds the cell
through the directory still and finishes (:func:`ops.cells.forget_offboarded`).

Its **API key** (``ops.api_keys``: the key the authorizer names for its
usage plan) becomes its tombstone with its users' deletion: tagged
``offboarded=<offboarding_since>``, out of every usage plan, disabled (a
request still carrying it is refused, 403). It is kept: it lists the tenant
in ``make usage``'s all-tenants report, and a tenant id is never used again
(``make onboard`` refuses one whose key is a tombstone: ``ops.tenants``).
Not done here: the failure queues, which hold stream positions and tenant ids
of poison records, not content; CloudWatch logs (their retention applies).

**A table of its own.** A tenant whose data is moving between the pool and
its own table (``record.moving``) is refused before anything is written: one
line, exit 1 (finish the move or roll it back first). Otherwise, after the
erase passes above (the pool keeps its record, its usage ledger and whatever
it left there before a move), its own table, key and stack are removed
(:mod:`ops.dedicated_teardown`: the table deleted with its deletion
protection turned off first, its key's deletion scheduled with a waiting
period of ``--key-waiting-days``, 7 to 30, 30 by default, then its stack),
whatever its placement: a tenant moved back to the pool loses the table it
left too, whose point-in-time backups still hold its data. Nothing of it is
erased item by item there: the table goes whole, and with the key its
backups become unreadable at the end of the waiting period. Its record then
places it in the pool (its own table as ``previous_table``, until now: the
usage object stops pricing the key, which KMS stops billing once its
deletion is scheduled) until the record itself goes. The final message says
which table was deleted and when the key will be.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from ops.api_keys import ApiKeyError, ApiKeys, offboarded_at
from ops.cells import Directory, Routes, forget_offboarded
from ops.control_plane import add_control_plane_argument, control_plane
from ops.dedicated_teardown import (
    KEY_WAITING_DAYS,
    LocalTables,
    OwnTables,
    StackTables,
    Teardown,
    TeardownError,
    check_waiting_days,
)
from ops.stack_target import (
    Target,
    TargetError,
    _local_state,
    _set_state,
    add_target_arguments,
    api_keys_target,
    stack_target,
    tenants_cell,
)
from ops.tenant_data import (
    SCAN_SEGMENTS,
    Progress,
    audit_days,
    deserialized,
    fixed_partitions,
    keys_under_prefix,
    ledger_partitions,
    mark_erasing,
    offboarded_key,
    partition_pages,
    ticket_ids,
    webhook_partitions,
)
from ops.tenants import NoSuchTenant, RecordChanged, TenantAdmin
from stack_model.template import template
from support_tickets.core import keys
from support_tickets.core.digits import is_digits
from support_tickets.core.errors import ApiError
from support_tickets.core.identity import TENANT_CLAIM
from support_tickets.data.audit_items import iso_time
from support_tickets.data.placement import Placement
from support_tickets.data.table import OwnClient, TenantTable, error_code
from support_tickets.data.tenant_registry import TenantConfig, TenantStatus
from support_tickets.streams.audit_writer import RecentKeys

if TYPE_CHECKING:
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient

SETTLE_SECONDS: Final = 10.0
# Parallel segments of the final check's Scan.
VERIFY_SEGMENTS: Final = SCAN_SEGMENTS
MAX_SETTLE_ROUNDS: Final = 6
GRACE_MARGIN_SECONDS: Final = 300
# Ticket ids already erased in a pass, so a busy ticket's many events don't
# erase it again and again (bounded: beyond it, an id is merely erased twice).
REMEMBERED_TICKETS: Final = 100_000
LEDGER: Final = "its usage ledger (kept: docs/usage.md)"


class OffboardError(RuntimeError):
    """The command can't (or must not) go on."""


class DataMoving(OffboardError):
    """The tenant's data is moving between tables: nothing was written."""


def refuse_moving(record: TenantConfig) -> TenantConfig:
    """``record``, unless its tenant's data is moving between tables (then
    :class:`DataMoving`: nothing may be written before the move ends)."""
    if record.moving:
        raise DataMoving(
            f"{record.tenant_id}'s data is moving to {record.move_to} ({record.move_phase}): nothing changed; "
            f"finish the move (make tenant TENANT={record.tenant_id} PLACEMENT={record.move_to}) or roll it back "
            f"(PLACEMENT={record.placement}), then offboard"
        )
    return record


def default_grace_seconds() -> int:
    """How long after its users are deleted a tenant's record must stay: the
    longest an ID token issued before lives, a stream record is retried, or a
    usage delivery can still arrive (the metering function's replay horizon:
    the marked record is what keeps a late delivery from being counted after
    the tenant left), all from template.yaml, and a margin."""
    resources = template()["Resources"]
    client = resources["UserPoolClient"]["Properties"]
    unit = client.get("TokenValidityUnits", {}).get("IdToken", "hours")
    token_seconds = int(client.get("IdTokenValidity", 1)) * {"minutes": 60, "hours": 3600, "days": 86_400}[unit]
    record_ages = [
        int(event["Properties"].get("MaximumRecordAgeInSeconds", 86_400))
        for resource in resources.values()
        if resource["Type"] == "AWS::Serverless::Function"
        for event in resource.get("Properties", {}).get("Events", {}).values()
        if event["Type"] == "DynamoDB"
    ]
    usage_horizons = [
        int(resource["Properties"]["Environment"]["Variables"]["REPLAY_HORIZON_SECONDS"])
        for resource in resources.values()
        if resource["Type"] == "AWS::Serverless::Function"
        and any(event["Type"] == "CloudWatchLogs" for event in resource["Properties"].get("Events", {}).values())
    ]
    return max([token_seconds, *record_ages, *usage_horizons]) + GRACE_MARGIN_SECONDS


@dataclass(frozen=True)
class Outcome:
    tenant_id: str
    users_deleted: int
    items_erased: int
    record: str  # "erased", or "kept until <time>"
    api_key_retired: bool = False  # its key is (now) a tombstone
    # Items the final Scan found under the tenant's prefix that the walk had
    # not erased (then erased too), and what that Scan verified.
    stray_items_erased: int = 0
    verified: str = ""
    # Its own table, key and stack, if it had them (ops.dedicated_teardown).
    own_table: Teardown | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "users_deleted": self.users_deleted,
            "api_key_retired": self.api_key_retired,
            "items_erased": self.items_erased,
            "stray_items_erased": self.stray_items_erased,
            "record": self.record,
            "verified": self.verified,
            "own_table": self.own_table.as_dict() if self.own_table is not None else None,
        }


@dataclass
class Offboarding:
    target: Target
    admin: TenantAdmin
    grace_seconds: float = field(default_factory=default_grace_seconds)
    settle_seconds: float = SETTLE_SECONDS
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    progress: Progress = field(default_factory=lambda: Progress("erased"))
    # The stack's API keys and usage plans; None for a stack that has none
    # (deployed before per-tenant throttling).
    api_keys: ApiKeys | None = None
    # Where its own table, key and stack are removed; None: nowhere (a tenant
    # placed in a table of its own is then refused).
    own_tables: OwnTables | None = None
    key_waiting_days: int = KEY_WAITING_DAYS

    def run(self, tenant_id: str, confirm: str | None) -> Outcome:
        keys.validate_tenant_id(tenant_id)
        if confirm != tenant_id:
            raise OffboardError(f"refusing to offboard {tenant_id}: CONFIRM must be the tenant id ({tenant_id})")
        current = refuse_moving(self.admin.record(tenant_id))
        stored = current.version > 0
        if not stored and not self._anything_left(tenant_id):
            raise NoSuchTenant(tenant_id)
        record = self._suspend(tenant_id)
        users = self._delete_users(tenant_id)
        key_retired = self._retire_api_key(tenant_id, record)
        table = TenantTable(tenant_id, self.target.table_name, OwnClient(self.target.dynamodb))
        suspended_at = record.offboarding_since or int(self.clock())
        erased = self._erase_until_quiet(table, suspended_at)
        record, own_table = self._remove_own_table(record)
        self._note_in_ledger(table, record, suspended_at)
        if record.erasable_at is None:
            erasable_at = int(self.clock() + self.grace_seconds)
            record = self.admin.write(record, {"erasable_at": erasable_at})
        prefix = keys.tenant_prefix(tenant_id)
        if record.erasable_at is not None and self.clock() < record.erasable_at:
            strays = self._verify(table, keep=keys.tenant_config_key(tenant_id))
            until = datetime.fromtimestamp(record.erasable_at, UTC).isoformat(timespec="seconds")
            verified = f"a Scan of the whole table found nothing under {prefix} but the tenant record and {LEDGER}"
            self.progress.note(
                f"{tenant_id}: data and users erased{_own(own_table)}; verified: {verified}{_strays(strays)}. Its "
                f"record stays SUSPENDED until {until} (ID tokens issued before its users were deleted stay valid "
                "until then): run the command again after that to erase it"
            )
            return Outcome(tenant_id, users, erased, f"kept until {until}", key_retired, strays, verified, own_table)
        erased += self._erase_pass(table, suspended_at)
        record_deleted = self._delete_record(table, record)
        if stored:  # a record this very run wrote to suspend the tenant is not the tenant's item
            erased += record_deleted
        strays = self._verify(table, keep=None)
        verified = f"a Scan of the whole table found nothing under {prefix} but {LEDGER}"
        self.progress.note(f"{tenant_id}: offboarded{_own(own_table)}; verified: {verified}{_strays(strays)}")
        return Outcome(tenant_id, users, erased, "erased", key_retired, strays, verified, own_table)

    def _anything_left(self, tenant_id: str) -> bool:
        """Whether a tenant without a record still has users, an API key or items
        (an offboarding interrupted after it deleted the record): then the run
        goes on; otherwise there is no such tenant and nothing is written."""
        if self.target.user_pool_id and self._users_of(tenant_id):
            return True
        if self.api_keys is not None:
            key = self.api_keys.describe(tenant_id)
            if key is not None and offboarded_at(key) is None:  # a tombstone is what an offboarding leaves
                return True
        table = TenantTable(tenant_id, self.target.table_name, OwnClient(self.target.dynamodb))
        return bool(self._leftovers(table))

    # ------------------------------------------------------------ 1. suspend
    def _suspend(self, tenant_id: str) -> TenantConfig:
        record = self.admin.record(tenant_id)
        if record.offboarding_since is not None:
            self.progress.note(f"{tenant_id}: continuing the offboarding begun at {record.offboarding_since}")
            self.admin.wait_out(record.offboarding_since)
            return record
        now = int(self.clock())
        since = record.changed_at if record.status is TenantStatus.SUSPENDED and record.version else now
        record = self.admin.write(
            record, {"status": TenantStatus.SUSPENDED, "offboarding_since": since, "changed_at": now}
        )
        self.progress.note(f"{tenant_id}: suspended for offboarding")
        self.admin.wait_out(since)
        return record

    # ------------------------------------------------------------ 2. users
    def _delete_users(self, tenant_id: str) -> int:
        if not self.target.user_pool_id:
            self.progress.note("warning: no user pool known for this stack: users not deleted")
            return 0
        cognito: CognitoIdentityProviderClient = self.target.cognito
        pool = self.target.user_pool_id
        doomed = self._users_of(tenant_id)
        for username in doomed:
            try:
                cognito.admin_user_global_sign_out(UserPoolId=pool, Username=username)
                cognito.admin_delete_user(UserPoolId=pool, Username=username)
            except ClientError as exc:
                if error_code(exc) != "UserNotFoundException":
                    raise
        if doomed:
            self.progress.note(f"{tenant_id}: {len(doomed)} user(s) signed out and deleted")
        return len(doomed)

    def _users_of(self, tenant_id: str) -> list[str]:
        """The user pool's users whose ``custom:tenant_id`` is the tenant."""
        cognito: CognitoIdentityProviderClient = self.target.cognito
        found: list[str] = []
        kwargs: dict[str, Any] = {"UserPoolId": self.target.user_pool_id}
        while True:
            page = cognito.list_users(**kwargs)
            for user in page.get("Users", []):
                attributes = {item["Name"]: item.get("Value") for item in user.get("Attributes", [])}
                if attributes.get(TENANT_CLAIM) == tenant_id and "Username" in user:
                    found.append(user["Username"])
            token = page.get("PaginationToken")
            if not token:
                return found
            kwargs["PaginationToken"] = token

    def _retire_api_key(self, tenant_id: str, record: TenantConfig) -> bool:
        """Its API key made its tombstone (:meth:`ops.api_keys.ApiKeys.retire`),
        tagged with when the offboarding began."""
        if self.api_keys is None:
            self.progress.note("warning: no usage plans known for this stack: API key not retired")
            return False
        since = record.offboarding_since if record.offboarding_since is not None else int(self.clock())
        retired = self.api_keys.retire(tenant_id, record.api_key_id, since)
        if retired:
            self.progress.note(f"{tenant_id}: API key disabled and out of its usage plan (kept, tagged offboarded)")
        return retired

    # ------------------------------------------------------------ 3b. its own table
    def _remove_own_table(self, record: TenantConfig) -> tuple[TenantConfig, Teardown | None]:
        """Its own table, key and stack removed (any it has, whatever its
        placement), then its record placing it in the pool, its own table the
        one before until now."""
        if self.own_tables is None:
            if record.placement == Placement.DEDICATED:
                raise OffboardError(
                    f"{record.tenant_id} is placed in a table of its own ({record.table}) and no stack is known to "
                    "delete it with: offboard it with --stack or --local"
                )
            return record, None
        torn_down = self.own_tables.tear_down(record.tenant_id, self.key_waiting_days)
        if torn_down is not None:
            self.progress.note(f"{record.tenant_id}: {torn_down.describe()}")
        if record.placement == Placement.DEDICATED:
            record = self.admin.write(
                record,
                {
                    "placement": Placement.POOL,
                    "table": None,
                    "placed_at": int(self.clock()),
                    "previous_table": record.table,
                    "previous_placed_at": record.placed_at,
                },
            )
        return record, torn_down

    # ------------------------------------------------------------ 3. data
    def _erase_until_quiet(self, table: TenantTable, suspended_at: int) -> int:
        erased = self._erase_pass(table, suspended_at)
        for _ in range(MAX_SETTLE_ROUNDS):
            self.sleep(self.settle_seconds)
            found = self._erase_pass(table, suspended_at)
            erased += found
            if found == 0:
                return erased
        raise OffboardError("items kept appearing (is the stream still being retried?): run the command again later")

    def _erase_pass(self, table: TenantTable, suspended_at: int) -> int:
        """One pass over everything the tenant has; how many items it erased.

        The trail's days come from its day index, and always include the days
        around the suspension: a record the stream still retried after it (for
        at most ``MaximumRecordAgeInSeconds``) is of a change made shortly
        before, and a warm audit writer that listed that day once does not list
        it again, so its event may sit under a day the index no longer names."""
        erased = 0
        done = RecentKeys(REMEMBERED_TICKETS)
        for ticket_id in ticket_ids(table):
            if not done.seen(ticket_id):
                erased += self._erase_ticket(table, ticket_id)
        around = {iso_time(suspended_at + offset)[:10] for offset in (-86_400, 0, 86_400)}
        for day in sorted(around):
            erased += self._erase_day(table, day, done)
        for day_page in audit_days(table):
            for day in (str(item["sk"]) for item in deserialized(day_page)):
                if keys.is_day(day) and day not in around:
                    erased += self._erase_day(table, day, done)
            erased += table.batch_delete(day_page)
        for pk in [*fixed_partitions(table.tenant_id), *webhook_partitions(table)]:
            found = self._erase_partition(table, pk)
            self.progress.step("items", found)
            erased += found
        return erased

    def _erase_day(self, table: TenantTable, day: str, done: RecentKeys) -> int:
        """A day of the trail, and the tickets its events name (their leftovers, their histories)."""
        erased = 0
        for pk in keys.audit_day_partitions(table.tenant_id, day):
            for page in partition_pages(table, pk, "pk, sk, ticket_id"):
                for ticket_id in {str(item.get("ticket_id", "")) for item in deserialized(page)}:
                    if keys.is_valid_ticket_id(ticket_id) and not done.seen(ticket_id):
                        erased += self._erase_ticket(table, ticket_id)
                erased += table.batch_delete(page)
                self.progress.step("items", len(page))
        return erased

    def _erase_ticket(self, table: TenantTable, ticket_id: str) -> int:
        """Mark, then comments, then the summary, then its history."""
        pk = keys.ticket_pk(table.tenant_id, ticket_id)
        summary = {"pk": {"S": pk}, "sk": {"S": keys.SUMMARY_SK}}
        mark_erasing(table, summary)
        erased = 0
        for page in partition_pages(table, pk):
            comments = [item for item in page if item["sk"]["S"] != keys.SUMMARY_SK]
            erased += table.batch_delete(comments)
        deleted = table.call("delete_item", TableName=table.table_name, Key=summary, ReturnValues="ALL_OLD")
        erased += 1 if "Attributes" in deleted else 0
        erased += self._erase_partition(table, keys.history_pk(table.tenant_id, ticket_id))
        self.progress.step("items", erased)
        return erased

    def _erase_partition(self, table: TenantTable, pk: str) -> int:
        return sum(table.batch_delete(page) for page in partition_pages(table, pk))

    # ------------------------------------------------------------ the check
    def _verify(self, table: TenantTable, keep: dict[str, Any] | None) -> int:
        """Scan for anything left under the tenant's prefix (but ``keep``), erase
        it, and scan again until nothing is found; how many items it erased."""
        strays = 0
        for _ in range(MAX_SETTLE_ROUNDS + 1):
            found = [item for item in self._leftovers(table) if item != keep]
            if not found:
                return strays
            self.progress.note(f"{table.tenant_id}: the check found {len(found)} item(s) the walk did not: erasing")
            tickets: set[str] = set()
            others: list[dict[str, Any]] = []
            for item in found:
                ticket_id = keys.ticket_id_of_suffix(keys.own_suffix(table.tenant_id, item["pk"]["S"]) or "")
                if ticket_id is None:
                    others.append(item)
                else:
                    tickets.add(ticket_id)
            for ticket_id in sorted(tickets):
                strays += self._erase_ticket(table, ticket_id)
            strays += table.batch_delete(others)
            # What the stream writes of these erasures lands before the next look.
            self.sleep(self.settle_seconds)
        raise OffboardError("items kept appearing under the tenant's prefix: run the command again later")

    def _leftovers(self, table: TenantTable) -> list[dict[str, Any]]:
        """Keys of every item under the tenant's prefix (:func:`ops.tenant_data.keys_under_prefix`)
        but its usage ledger, which stays."""
        ledger = ledger_partitions(table.tenant_id)
        return [item for item in keys_under_prefix(table) if item["pk"]["S"] not in ledger]

    # ------------------------------------------------------------ the ledger's note
    def _note_in_ledger(self, table: TenantTable, record: TenantConfig, suspended_at: int) -> None:
        """Write (again: the same values) the ledger's ``OFFBOARDED`` note: when
        the tenant left, and its placement fields, which price a table of its own
        in ``make usage`` once the record is gone."""
        note: dict[str, Any] = {
            **offboarded_key(table.tenant_id),
            "offboarded_at": {"N": str(suspended_at)},
            "placement": {"S": str(record.placement)},
            "placed_at": {"N": str(record.placed_at)},
            "previous_placed_at": {"N": str(record.previous_placed_at)},
        }
        for name, value in (("table", record.table), ("previous_table", record.previous_table)):
            if value:
                note[name] = {"S": value}
        table.call("put_item", TableName=table.table_name, Item=note)

    # ------------------------------------------------------------ 4. the record
    def _delete_record(self, table: TenantTable, record: TenantConfig) -> int:
        try:
            deleted = table.call(
                "delete_item",
                TableName=table.table_name,
                Key=keys.tenant_config_key(table.tenant_id),
                ConditionExpression="#version = :version",
                ExpressionAttributeNames={"#version": "version"},
                ExpressionAttributeValues={":version": {"N": str(record.version)}},
                ReturnValues="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise RecordChanged("the tenant record changed meanwhile; run the command again") from exc
            raise
        return 1 if "Attributes" in deleted else 0


def _strays(count: int) -> str:
    return f" (after erasing {count} item(s) under it that the walk had not found)" if count else ""


def _own(torn_down: Teardown | None) -> str:
    return f"; {torn_down.describe()}" if torn_down is not None else ""


def own_tables_target(args: argparse.Namespace, pool_table: str, progress: Progress) -> OwnTables:
    """Where the stack's dedicated tenants' tables are removed: the running local
    stack, or the deployed stack's CloudFormation, DynamoDB and KMS."""
    if args.local:
        return LocalTables(_local_state(args))
    import boto3

    session = boto3.Session(region_name=args.region) if args.region else boto3.Session()
    return StackTables(
        session.client("cloudformation"),
        session.client("dynamodb"),
        session.client("kms"),
        pool_stack=args.stack,
        pool_table=pool_table,
        progress=progress.note,
    )


@dataclass(frozen=True)
class CellsPlane:
    """The directory and router's store of the cells the command's stack is one of,
    and that stack's cell (deployed: the cell the directory names by its stack)."""

    directory: Directory
    routes: Routes
    cell_id: str | None = None


def cells_plane(args: argparse.Namespace) -> CellsPlane | None:
    """The local set's control plane (``None`` for one stack), or the deployed one
    ``--control-plane`` names (``None`` when it names none); :class:`TargetError` when
    its directory names no cell deployed as ``--stack``."""
    plane = control_plane(args)
    if plane is None:
        return None
    directory, routes = plane
    if args.local:
        return CellsPlane(directory, routes)
    named = [cell.cell_id for cell in directory.cells() if cell.stack == args.stack]
    if not named:
        raise TargetError(
            f"control plane {args.control_plane}'s directory names no cell deployed as stack {args.stack}; "
            "nothing written"
        )
    return CellsPlane(directory, routes, named[0])


def forget_in_cells(args: argparse.Namespace, target: Target, tenant_id: str, plane: CellsPlane | None) -> bool:
    """With cells (``plane``: the local set's, or the deployed control plane's), once the
    tenant's record is erased in its cell (its ledger noted ``OFFBOARDED``): the router's
    store and the directory forget it (:func:`ops.cells.forget_offboarded`: the store, then
    the directory with its cell's count). Whether the directory forgot it."""
    if plane is None:
        return False
    record = target.dynamodb.get_item(
        TableName=target.table_name, Key=keys.tenant_config_key(tenant_id), ConsistentRead=True
    ).get("Item")
    note = target.dynamodb.get_item(
        TableName=target.table_name, Key=offboarded_key(tenant_id), ConsistentRead=True
    ).get("Item")
    if record is not None or note is None:
        return False
    cell = plane.cell_id or tenants_cell(_set_state(args), tenant_id)
    return forget_offboarded(plane.directory, plane.routes, tenant_id, cell)


def _days(value: str) -> int:
    """``--key-waiting-days`` as a number (a one-line error, like a number out of range, otherwise)."""
    if not is_digits(value):
        raise OffboardError(f"a key's waiting period is 7 to 30 days, not {value!r}")
    return int(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.offboard", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--confirm", help="the tenant id again: nothing happens without it")
    parser.add_argument("--settle", type=float, default=SETTLE_SECONDS, help="seconds between erase passes")
    parser.add_argument(
        "--key-waiting-days",
        default=str(KEY_WAITING_DAYS),
        help="a table of its own: days before KMS deletes its key (7-30; it can be cancelled meanwhile)",
    )
    parser.add_argument("--phase-seconds", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--grace-seconds", type=float, default=None, help=argparse.SUPPRESS)
    add_target_arguments(parser)
    add_control_plane_argument(parser)
    args = parser.parse_args(argv)
    try:
        keys.validate_tenant_id(args.tenant)
        if args.confirm != args.tenant:
            raise OffboardError(f"refusing to offboard {args.tenant}: CONFIRM must be the tenant id ({args.tenant})")
        waiting_days = check_waiting_days(_days(args.key_waiting_days))
    except (ValueError, OffboardError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    progress = Progress(f"offboard {args.tenant}, erased")
    try:
        target = stack_target(args)
        plane = cells_plane(args)
        admin = TenantAdmin(target.dynamodb, target.table_name, progress=progress.note)
        if args.phase_seconds is not None:
            admin.phase_seconds = args.phase_seconds
        refuse_moving(admin.record(args.tenant))  # before anything else is said or done
        try:
            api_keys: ApiKeys | None = api_keys_target(args)
        except TargetError as exc:
            progress.note(f"warning: {exc}")
            api_keys = None
        offboarding = Offboarding(
            target,
            admin,
            settle_seconds=args.settle,
            progress=progress,
            api_keys=api_keys,
            own_tables=own_tables_target(args, target.table_name, progress),
            key_waiting_days=waiting_days,
        )
        if args.grace_seconds is not None:
            offboarding.grace_seconds = args.grace_seconds
        try:
            outcome = offboarding.run(args.tenant, args.confirm)
        except NoSuchTenant:
            if not forget_in_cells(
                args, target, args.tenant, plane
            ):  # a last run stopped before the directory forgot it
                raise
            outcome = Outcome(args.tenant, 0, 0, "erased", verified="erased before; the directory forgot it now")
        else:
            if outcome.record == "erased":
                forget_in_cells(args, target, args.tenant, plane)
    except (NoSuchTenant, DataMoving) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except (
        TargetError,
        OffboardError,
        TeardownError,
        RecordChanged,
        ApiError,
        ApiKeyError,
        ClientError,
        BotoCoreError,
        OSError,
    ) as exc:
        sys.stderr.write(f"\nerror: {exc}\n")
        return 1
    json.dump(outcome.as_dict(), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
