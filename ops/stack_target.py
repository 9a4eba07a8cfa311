"""Where an operator command runs: the local stack (``make dev``) or a deployed stack.

Both give a DynamoDB client with operator (not tenant) credentials and the
table's name, and the tenants' API keys with the tiers' usage plans: locally
from ``.local/stack.json`` (signed as the emulated account's administrator),
deployed from the stack's CloudFormation outputs with your AWS credentials.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from ops.api_keys import ApiKeys


class TargetError(RuntimeError):
    """The stack to work on can't be found."""


class OperatorClients:
    """The operator's client as a tenant table's client provider: operator
    commands read and write tenant records with their own credentials, not a
    tenant's (there is no tenant token to exchange)."""

    def __init__(self, client: DynamoDBClient) -> None:
        self._client = client

    def dynamodb(self) -> DynamoDBClient:
        return self._client

    def invalidate(self) -> None:
        return


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--stack", help="deployed stack name (reads its TableName output)")
    target.add_argument("--local", action="store_true", help="the running `make dev` stack")
    parser.add_argument("--local-state", default=".local/stack.json", help=argparse.SUPPRESS)
    parser.add_argument("--region")


def _local_state(args: argparse.Namespace) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads(Path(args.local_state).read_text())
    except (OSError, ValueError) as exc:
        raise TargetError("the local stack is not running: start it with `make dev`") from exc
    return state


def _outputs(session: Any, stack: str) -> dict[str, str]:
    stacks = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    return {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}


def api_keys_target(args: argparse.Namespace) -> ApiKeys:
    """The tenants' API keys and the tiers' usage plans of the same stack."""
    import boto3

    from ops.api_keys import ApiKeys
    from support_tickets.tenant_registry import TIERS

    if args.local:
        state = _local_state(args)
        client = boto3.client(
            "apigateway",
            region_name=state.get("region", "us-east-1"),
            endpoint_url=state["emulator_url"],
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - the local emulator takes any key
        )
        return ApiKeys(client, dict(state.get("usage_plan_ids", {})), str(state.get("stack_name", "local")))
    session = boto3.Session(region_name=args.region) if args.region else boto3.Session()
    outputs = _outputs(session, args.stack)
    names = {tier: f"UsagePlanId{tier.capitalize()}" for tier in TIERS}
    plans = {tier: outputs[name] for tier, name in names.items() if name in outputs}
    if set(plans) != set(TIERS):
        raise TargetError(f"stack {args.stack} has no UsagePlanId<Tier> outputs (deploy this version first)")
    return ApiKeys(session.client("apigateway"), plans, args.stack)


def dynamodb_target(args: argparse.Namespace) -> tuple[DynamoDBClient, str]:
    import boto3

    if args.local:
        state = _local_state(args)
        client = boto3.client(
            "dynamodb",
            region_name=state.get("region", "us-east-1"),
            endpoint_url=state["emulator_url"],
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - the local emulator takes any key
        )
        return client, str(state["table_name"])
    session = boto3.Session(region_name=args.region) if args.region else boto3.Session()
    outputs = _outputs(session, args.stack)
    if "TableName" not in outputs:
        raise TargetError(f"stack {args.stack} has no TableName output")
    return session.client("dynamodb"), outputs["TableName"]
