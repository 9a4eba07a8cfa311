"""A dedicated tenant's own table, key and stack, removed when the tenant is
offboarded (``ops.offboard``): the other half of ``ops.dedicated``.

The names are the tenant's whatever its record says (``stack_model.dedicated``:
the stack ``<pool stack>-tenant-<t>``, the table ``<pool table>-dedicated-<t>``),
so a tenant that moved back to the pool, whose stack and (empty) table are
kept, loses them too: that table's point-in-time backups still hold its data.

The template keeps the table and the key when the stack is deleted
(``DeletionPolicy: Retain``, templates/dedicated-table.yaml), and the table has
deletion protection: a stack deleted by mistake loses its stream's mappings and
alarms, never the tenant's data or the key that reads it. (CloudFormation
schedules a key's deletion, after the key's ``PendingWindowInDays``, only when
it removes the key from a stack, which ``Retain`` prevents:
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-kms-key.html.)
So the teardown deletes them itself, in this order, each step skipped when
already done (run again after an interruption, it goes on):

1. **The table**: deletion protection off (``UpdateTable``: "when enabled, the
   table cannot be deleted by any user or process", CloudFormation included:
   https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/WorkingWithTables.Basics.html#WorkingWithTables.Basics.DeletionProtection.
   Directly, not through a template parameter and a stack update: the table
   is deleted next and its stack after it, so the template's ``true`` is
   contradicted for seconds, where a stack update would take minutes for the
   same result), then ``DeleteTable``, and wait until it is gone.
   DynamoDB keeps a system backup of a table deleted with PITR on
   (``<table>$DeletedTableBackup``, 35 days, no charge), encrypted under the
   table's key like its PITR history and any on-demand backup
   (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/pointintimerecovery_beforeyoubegin.html).
2. **The key**: ``ScheduleKeyDeletion`` with a waiting period of
   ``waiting_days`` (7 to 30; :data:`KEY_WAITING_DAYS` by default, KMS's own
   default). During it the key is ``PendingDeletion``: unusable, not billed,
   and ``CancelKeyDeletion`` (then ``EnableKey``) brings it back; after it KMS
   deletes the key and everything encrypted under it is unreadable for good:
   the system backup and every backup of the table
   (https://docs.aws.amazon.com/kms/latest/APIReference/API_ScheduleKeyDeletion.html).
   The key is the one the stack's ``KeyArn`` output names (or, without the
   stack, the table's ``SSEDescription``): the stack goes last so that a run
   interrupted after the table still finds it.
3. **The stack**: ``DeleteStack`` (its stream's mappings, alarms and key alias;
   the retained table and key are already dealt with), and wait.

Locally (``--local``) the running stack does the same to what it made for the
tenant (``DELETE /_local/dedicated?tenant=<t>&waiting_days=<n>``: its stream's
pollers stop, the table's protection goes off, the table is deleted and the
key's deletion scheduled in the emulator, ``local_stack.stack``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

from botocore.exceptions import ClientError, WaiterError

from ops.dedicated import WAITER
from ops.local_control import control_call
from stack_model.dedicated import stack_name, table_name
from support_tickets.data.table import error_code

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_dynamodb import DynamoDBClient

# KMS's default waiting period, and its longest: the most time to undo a mistaken offboarding.
KEY_WAITING_DAYS: Final = 30
KEY_WAITING_RANGE: Final = range(7, 31)
LOCAL_TIMEOUT_S: Final = 60.0


class TeardownError(RuntimeError):
    """The tenant's own resources could not be removed (AWS's reason)."""


@dataclass(frozen=True)
class Teardown:
    """What the tenant's own resources became (``None`` fields: there was none)."""

    table: str
    table_deleted: bool
    key_arn: str | None
    # When KMS deletes the key (ISO 8601, UTC): the end of its waiting period.
    key_deletion_date: str | None
    stack_deleted: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "table_deleted": self.table_deleted,
            "key_arn": self.key_arn,
            "key_deletion_date": self.key_deletion_date,
            "stack_deleted": self.stack_deleted,
        }

    def describe(self) -> str:
        key = (
            f"its key {self.key_arn} is pending deletion until {self.key_deletion_date} "
            "(CancelKeyDeletion within that time keeps it; after it, its backups are unreadable)"
            if self.key_arn
            else "no key of it found"
        )
        return f"its table {self.table} is deleted; {key}"


class OwnTables(Protocol):
    """Where a tenant's own table, key and stack are removed."""

    def tear_down(self, tenant_id: str, waiting_days: int) -> Teardown | None:
        """Remove them; ``None`` when the tenant has none (never had, or removed already)."""


def check_waiting_days(days: int) -> int:
    if days not in KEY_WAITING_RANGE:
        raise ValueError(f"a key's waiting period is 7 to 30 days, not {days}")
    return days


@dataclass
class StackTables:
    """A deployed stack's dedicated tenants (CloudFormation, DynamoDB and KMS with your credentials)."""

    cloudformation: CloudFormationClient
    dynamodb: DynamoDBClient
    kms: Any  # a KMS client (no KMS stubs among the development requirements)
    pool_stack: str
    pool_table: str
    progress: Callable[[str], None] = lambda _: None

    def tear_down(self, tenant_id: str, waiting_days: int) -> Teardown | None:
        check_waiting_days(waiting_days)
        stack, table = stack_name(self.pool_stack, tenant_id), table_name(self.pool_table, tenant_id)
        outputs = self._stack_outputs(stack)
        described = self._table(table)
        key_arn = (outputs or {}).get("KeyArn") or (described or {}).get("SSEDescription", {}).get("KMSMasterKeyArn")
        if outputs is None and described is None:
            return None
        try:
            if described is not None:
                self._delete_table(table, described)
            deletion = self._schedule_key_deletion(key_arn, waiting_days) if key_arn else None
            if outputs is not None:
                self.progress(f"{tenant_id}: deleting its stack {stack}")
                self.cloudformation.delete_stack(StackName=stack)
                self.cloudformation.get_waiter("stack_delete_complete").wait(StackName=stack, WaiterConfig=WAITER)
        except WaiterError as exc:
            raise TeardownError(f"{tenant_id}'s own resources: {exc}") from exc
        return Teardown(table, described is not None, key_arn, deletion, outputs is not None)

    def _stack_outputs(self, stack: str) -> dict[str, str] | None:
        try:
            (found,) = self.cloudformation.describe_stacks(StackName=stack)["Stacks"]
        except ClientError as exc:
            if "does not exist" in str(exc):
                return None
            raise
        if found["StackStatus"] == "DELETE_COMPLETE":
            return None
        return {output["OutputKey"]: output["OutputValue"] for output in found.get("Outputs", [])}

    def _table(self, table: str) -> Mapping[str, Any] | None:
        try:
            described: Mapping[str, Any] = self.dynamodb.describe_table(TableName=table)["Table"]
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        return described

    def _delete_table(self, table: str, described: Mapping[str, Any]) -> None:
        if described.get("TableStatus") != "DELETING":
            if described.get("DeletionProtectionEnabled"):
                self.progress(f"turning off {table}'s deletion protection")
                self.dynamodb.update_table(TableName=table, DeletionProtectionEnabled=False)
            self.progress(f"deleting {table}")
            try:
                self.dynamodb.delete_table(TableName=table)
            except ClientError as exc:
                if error_code(exc) != "ResourceNotFoundException":
                    raise
        gone = self.dynamodb.get_waiter("table_not_exists")
        gone.wait(TableName=table, WaiterConfig={"Delay": 5, "MaxAttempts": 120})

    def _schedule_key_deletion(self, key_arn: str, waiting_days: int) -> str:
        """The key's deletion date, scheduling it unless it already is (KMS
        refuses to schedule a key pending deletion: KMSInvalidStateException)."""
        self.progress(f"scheduling the deletion of {key_arn} in {waiting_days} days")
        # By its id (KMS takes the id or the ARN; moto's ScheduleKeyDeletion only the id).
        key_id = key_arn.rsplit("/", 1)[-1]
        try:
            scheduled = self.kms.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=waiting_days)
        except ClientError as exc:
            if error_code(exc) != "KMSInvalidStateException":
                raise
            metadata = self.kms.describe_key(KeyId=key_id)["KeyMetadata"]
            if metadata.get("KeyState") != "PendingDeletion":
                raise
            return _iso(metadata["DeletionDate"])
        return _iso(scheduled["DeletionDate"])


@dataclass(frozen=True)
class LocalTables:
    """The running local stack's dedicated tenants (its control endpoint)."""

    state: Mapping[str, Any]

    def tear_down(self, tenant_id: str, waiting_days: int) -> Teardown | None:
        check_waiting_days(waiting_days)
        path = f"dedicated?tenant={tenant_id}&waiting_days={waiting_days}"
        answer = control_call(self.state, path, timeout=LOCAL_TIMEOUT_S, method="DELETE")
        if not answer.get("deleted"):
            return None
        return Teardown(
            table=str(answer["TableName"]),
            table_deleted=True,
            key_arn=str(answer["KeyArn"]),
            key_deletion_date=str(answer["KeyDeletionDate"]),
            stack_deleted=True,
        )


def _iso(moment: datetime | str) -> str:
    return moment.isoformat(timespec="seconds") if isinstance(moment, datetime) else str(moment)
