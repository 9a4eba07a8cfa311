"""Where an operator command runs: the local stack (``make dev``) or a deployed stack.

Both give a DynamoDB client with operator (not tenant) credentials and the
table's name: locally from ``.local/stack.json`` (signed as the emulated
account's administrator), deployed from the stack's CloudFormation outputs
with your AWS credentials. :func:`stack_target` adds the user pool and the
audit retention (``make offboard``).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient
    from mypy_boto3_dynamodb import DynamoDBClient


class TargetError(RuntimeError):
    """The stack to work on can't be found."""


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--stack", help="deployed stack name (reads its TableName output)")
    target.add_argument("--local", action="store_true", help="the running `make dev` stack")
    parser.add_argument("--local-state", default=".local/stack.json", help=argparse.SUPPRESS)
    parser.add_argument("--region")


@dataclass(frozen=True)
class Target:
    """A stack an operator command works on."""

    dynamodb: DynamoDBClient
    table_name: str
    cognito: CognitoIdentityProviderClient
    user_pool_id: str
    audit_retention_days: int


def dynamodb_target(args: argparse.Namespace) -> tuple[DynamoDBClient, str]:
    target = stack_target(args)
    return target.dynamodb, target.table_name


def stack_target(args: argparse.Namespace) -> Target:
    import boto3

    from local_stack.template import template

    default_retention = int(template()["Parameters"]["AuditRetentionDays"]["Default"])
    if args.local:
        try:
            state = json.loads(Path(args.local_state).read_text())
        except (OSError, ValueError) as exc:
            raise TargetError("the local stack is not running: start it with `make dev`") from exc
        session = boto3.Session(
            region_name=state.get("region", "us-east-1"),
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - the local emulator takes any key
        )

        def local(service: str) -> Any:
            return session.client(service, endpoint_url=state["emulator_url"])  # type: ignore[call-overload]

        return Target(
            dynamodb=local("dynamodb"),
            table_name=str(state["table_name"]),
            cognito=local("cognito-idp"),
            user_pool_id=str(state.get("user_pool_id", "")),
            audit_retention_days=default_retention,
        )
    session = boto3.Session(region_name=args.region) if args.region else boto3.Session()
    stacks = session.client("cloudformation").describe_stacks(StackName=args.stack)["Stacks"]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}
    parameters = {item["ParameterKey"]: item.get("ParameterValue", "") for item in stacks[0].get("Parameters", [])}
    if "TableName" not in outputs:
        raise TargetError(f"stack {args.stack} has no TableName output")
    return Target(
        dynamodb=session.client("dynamodb"),
        table_name=outputs["TableName"],
        cognito=session.client("cognito-idp"),
        user_pool_id=outputs.get("UserPoolId", ""),
        audit_retention_days=int(parameters.get("AuditRetentionDays") or default_retention),
    )
