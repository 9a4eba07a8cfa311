"""AWS managed policies, by ARN, with their documents: what a role of the
template is granted through ``ManagedPolicyArns``.

The documents are the copies moto ships (``moto.iam.aws_managed_policies``),
the only offline source there is. The local guard honours a managed policy it
finds here like an inline one, and refuses to start with one it does not (a
role whose permissions it cannot know); the template tests read the same
documents to prove that no role gets DynamoDB actions through one.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from moto.iam.aws_managed_policies import aws_managed_policies_data

_AWS_MANAGED_ARN = re.compile(r"^arn:aws[\w-]*:iam::aws:policy(?P<path>/(?:[\w+=,.@-]+/)*)(?P<name>[\w+=,.@-]+)$")


class UnknownManagedPolicy(ValueError):
    """A managed policy whose document the local stack does not have."""


@cache
def _documents() -> dict[str, dict[str, Any]]:
    parsed: dict[str, dict[str, Any]] = json.loads(aws_managed_policies_data)
    return parsed


def document(arn: str) -> dict[str, Any]:
    """The policy document of the AWS managed policy ``arn`` (any partition),
    or :class:`UnknownManagedPolicy` (customer managed policies included: the
    template defines none, and the guard would not know their content)."""
    match = _AWS_MANAGED_ARN.match(arn)
    if match is None:
        raise UnknownManagedPolicy(f"{arn} is not an AWS managed policy ARN")
    entry = _documents().get(match.group("name"))
    if entry is None or entry.get("Path") != match.group("path"):
        raise UnknownManagedPolicy(f"{arn}: no copy of this managed policy")
    policy: dict[str, Any] = entry["Document"]
    return policy
