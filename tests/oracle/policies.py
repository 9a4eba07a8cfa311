"""The roles of `template.yaml` as SAM deploys them: the oracle's side.

The roles are :func:`stack_model.roles.roles_from_template`'s reading of the
template's samtranslator output (what ``sam deploy`` submits), with the local
stack's offline values for the physical ids (the table's ARN, the identity
pool's id...), so that both engines name the same resources. What the oracle
checks is the guard's judgement of requests, not the reading of the template.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from local_stack.local_values import offline_values
from stack_model.roles import roles_from_template
from stack_model.template import ACCOUNT_ID, REGION, Values

__all__ = ["ACCOUNT_ID", "REGION", "OracleRole", "condition_values", "local_values", "template_roles"]

USER_POOL_ID = "us-east-1_EXAMPLE"
CLIENT_ID = "1example23456789exampleclient"
IDENTITY_POOL_ID = "us-east-1:0c1b5f3a-7d2e-4a8b-9c6d-000000000013"


@dataclass(frozen=True)
class OracleRole:
    name: str
    policies: tuple[dict[str, Any], ...]

    @property
    def arn(self) -> str:
        return f"arn:aws:iam::{ACCOUNT_ID}:role/{self.name}"


def local_values() -> Values:
    """The offline values both engines read the template with."""
    return offline_values(user_pool_id=USER_POOL_ID, client_id=CLIENT_ID, identity_pool_id=IDENTITY_POOL_ID)


@cache
def template_roles() -> dict[str, OracleRole]:
    """Every IAM role of the translated template, by name, with its identity policies."""
    return {
        name: OracleRole(name, tuple(role.policies())) for name, role in roles_from_template(local_values()).items()
    }


def condition_values(roles: Mapping[str, OracleRole]) -> dict[str, set[str]]:
    """Every condition key the roles' policies test, with the literal values they
    compare it with (lower-cased key names, as IAM compares them)."""
    found: dict[str, set[str]] = {}
    for role in roles.values():
        for policy in role.policies:
            statements = policy["Statement"]
            for statement in [statements] if isinstance(statements, dict) else statements:
                for block in statement.get("Condition", {}).values():
                    for key, values in block.items():
                        listed = values if isinstance(values, list) else [values]
                        found.setdefault(key.lower(), set()).update(str(value) for value in listed)
    return found
