"""`templates/control-plane.yaml`, the cells' control plane, read as a model of what
its stack holds: what ``make dev CELLS=<n>`` creates in the local control plane's
emulator (the shared user pool, its app client and admin group, the directory
table), each from its definition there. Plain CloudFormation, read as written.

The CloudFront resources (the router's function, its store, the distribution) have
no emulator: locally the router is ``router/local_router.cjs`` running the same
function, its store a file (``ops.local_routes``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from stack_model.template import ACCOUNT_ID, PROJECT_ROOT, REGION, Values, load_template, table_arguments

CONTROL_PLANE_PATH = PROJECT_ROOT / "templates" / "control-plane.yaml"
# The local control plane's stack name (its resources' names derive from it).
LOCAL_STACK_NAME = "support-tickets-control"
# What the local control plane creates, in an order where each names only those made before it.
LOCAL_KINDS = (
    "AWS::Cognito::UserPool",
    "AWS::Cognito::UserPoolClient",
    "AWS::Cognito::UserPoolGroup",
    "AWS::DynamoDB::Table",
)


@cache
def control_plane_template() -> dict[str, Any]:
    """The control plane's template as written (no transform to apply)."""
    return load_template(CONTROL_PLANE_PATH)


def control_plane_resources(kind: str) -> dict[str, dict[str, Any]]:
    """The control plane's resources of one type, by logical id."""
    return {name: res for name, res in control_plane_template()["Resources"].items() if res["Type"] == kind}


def control_plane_values(stack_name: str = LOCAL_STACK_NAME) -> Values:
    """What the template's references stand for before anything is made: its
    parameters' defaults and the pseudo-parameters (the account and Region of
    every local reading)."""
    values = Values()
    declared = control_plane_template().get("Parameters", {})
    values.refs.update({name: str(spec.get("Default", "")) for name, spec in declared.items()})
    values.refs.update(
        {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::Partition": "aws",
            "AWS::StackName": stack_name,
            "AWS::URLSuffix": "amazonaws.com",
        }
    )
    return values


def directory_table_arguments(values: Values | None = None) -> dict[str, Any]:
    """The directory table's CreateTable arguments, from its definition."""
    ((_, table),) = control_plane_resources("AWS::DynamoDB::Table").items()
    return table_arguments((values or control_plane_values()).resolve(table["Properties"]))
