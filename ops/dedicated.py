"""A dedicated tenant's own table: deploy ``templates/dedicated-table.yaml`` for it.

    python -m ops.dedicated --tenant acme (--local | --stack <s> [--region <r>])

Prints the tenant's stack outputs as JSON (``TableName``, ``TableArn``,
``StreamArn``, ``KeyArn``). Running it again changes nothing and prints the
same outputs.

- **Against a deployed stack** (``--stack``): CloudFormation creates the
  stack ``<s>-tenant-<t>`` (``stack_model.dedicated.stack_name``) from the
  template, with the parameters ``TenantId`` and ``PoolStackName``, and waits
  for it; if it exists, it is updated to the template as it is now (nothing
  to update is not an error). The table imports the pool stack's exports, so
  the pool stack must be deployed at this version first. No IAM resource is
  created (no capability to acknowledge): the pool stack's roles already
  reach ``<table>-dedicated-*`` tables, and the table's key policy names them.
- **Against the local stack** (``--local``): the running stack makes the same
  template's resources in its emulator and polls the table's stream for the
  same functions (its control endpoint ``/_local/dedicated``; see
  ``local_stack.stack``).

Deploying the table moves no data: a tenant's placement (and the move of its
data between the pool and its table) is the tenant record's, ``make tenant
PLACEMENT=`` (docs/operations.md). A bad tenant id is a one-line error and
exit status 1, before anything is made.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError, WaiterError

from ops.local_control import control_call
from ops.stack_target import TargetError, _local_state, add_target_arguments
from stack_model.dedicated import DEDICATED_TEMPLATE_PATH, TENANT_TAG, stack_name
from support_tickets.core.keys import InvalidTenantId, validate_tenant_id

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_cloudformation.type_defs import WaiterConfigTypeDef

# A dedicated stack's key and table take a minute or two; CloudFormation's own
# waiter polls every 30 s, 120 times.
WAITER: WaiterConfigTypeDef = {"Delay": 10, "MaxAttempts": 180}
LOCAL_TIMEOUT_S = 60.0


class DeployError(RuntimeError):
    """The tenant's stack could not be made (CloudFormation's reason)."""


def deploy_to_aws(cloudformation: CloudFormationClient, pool_stack: str, tenant_id: str) -> dict[str, str]:
    """Create (or bring up to date) the tenant's dedicated stack beside
    ``pool_stack``, wait for it, and answer its outputs."""
    tenant_id = validate_tenant_id(tenant_id)
    name = stack_name(pool_stack, tenant_id)
    arguments: dict[str, Any] = {
        "StackName": name,
        "TemplateBody": DEDICATED_TEMPLATE_PATH.read_text(encoding="utf-8"),
        "Parameters": [
            {"ParameterKey": "TenantId", "ParameterValue": tenant_id},
            {"ParameterKey": "PoolStackName", "ParameterValue": pool_stack},
        ],
        "Tags": [{"Key": TENANT_TAG, "Value": tenant_id}],
    }
    try:
        if _exists(cloudformation, name):
            try:
                cloudformation.update_stack(**arguments)
            except ClientError as exc:
                if "No updates are to be performed" not in str(exc):
                    raise
            else:
                cloudformation.get_waiter("stack_update_complete").wait(StackName=name, WaiterConfig=WAITER)
        else:
            cloudformation.create_stack(**arguments, OnFailure="ROLLBACK")
            cloudformation.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig=WAITER)
    except WaiterError as exc:
        raise DeployError(f"stack {name}: {_reason(cloudformation, name) or exc}") from exc
    (stack,) = cloudformation.describe_stacks(StackName=name)["Stacks"]
    return {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}


def deploy_to_local(state: Mapping[str, Any], tenant_id: str) -> dict[str, str]:
    """The running local stack's dedicated table for the tenant (made if needed)."""
    tenant_id = validate_tenant_id(tenant_id)
    answer = control_call(state, f"dedicated?tenant={tenant_id}", timeout=LOCAL_TIMEOUT_S)
    return {str(key): str(value) for key, value in answer.items()}


def _exists(cloudformation: CloudFormationClient, name: str) -> bool:
    try:
        stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return False
        raise
    return any(stack["StackStatus"] != "DELETE_COMPLETE" for stack in stacks)


def _reason(cloudformation: CloudFormationClient, name: str) -> str:
    """The first failed resource's reason, as the stack's events give it."""
    try:
        events = cloudformation.describe_stack_events(StackName=name)["StackEvents"]
    except ClientError:
        return ""
    failed = [event for event in events if str(event.get("ResourceStatus", "")).endswith("_FAILED")]
    if not failed:
        return ""
    event = failed[-1]
    return f"{event.get('LogicalResourceId')}: {event.get('ResourceStatusReason', '')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.dedicated", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenant", required=True)
    add_target_arguments(parser)
    args = parser.parse_args(argv)
    try:
        tenant_id = validate_tenant_id(args.tenant)
        if args.local:
            outputs = deploy_to_local(_local_state(args), tenant_id)
        else:
            import boto3

            session = boto3.Session(region_name=args.region) if args.region else boto3.Session()
            outputs = deploy_to_aws(session.client("cloudformation"), args.stack, tenant_id)
    except InvalidTenantId as exc:
        print(f"error: --tenant {args.tenant!r}: {exc}", file=sys.stderr)
        return 1
    except (TargetError, DeployError, ClientError, BotoCoreError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(outputs, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
