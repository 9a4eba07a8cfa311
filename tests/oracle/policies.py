"""The roles of `template.yaml` as SAM deploys them: the oracle's side.

The template goes through samtranslator (what ``sam deploy`` submits), and the
roles' policies are taken from its output, with their intrinsics resolved by a
walker of this module, not by :mod:`stack_model.template`'s resolver: only the
physical ids (the table's ARN, the identity pool's id...) come from the local
stack's offline values (``offline_resolver``), so that both sides name the same
resources. AWS managed policies are the copies moto ships (the only offline
source there is).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from moto.iam.aws_managed_policies import aws_managed_policies_data
from samcli.yamlhelper import yaml_parse
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

from stack_model.template import TEMPLATE_PATH, Resolver, offline_resolver

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"
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


def local_values() -> Resolver:
    """The offline values the guard's side reads the template with."""
    return offline_resolver(user_pool_id=USER_POOL_ID, client_id=CLIENT_ID, identity_pool_id=IDENTITY_POOL_ID)


@cache
def translated() -> dict[str, Any]:
    """The template as `sam deploy` would submit it (code already uploaded)."""
    template = yaml_parse(TEMPLATE_PATH.read_text(encoding="utf-8"))
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        for uri in ("CodeUri", "ContentUri"):
            if uri in props:
                props[uri] = "s3://bucket/key.zip"
    translator = Translator({}, Parser(), boto_session=boto3.session.Session(region_name=REGION))
    result: dict[str, Any] = translator.translate(copy.deepcopy(template), {}, get_managed_policy_map=dict)
    return result


class _Walker:
    """Resolves Ref, Fn::GetAtt, Fn::Sub and Fn::Join in the translated roles."""

    def __init__(self, template: Mapping[str, Any], values: Resolver) -> None:
        self.values = values
        resources = template["Resources"]
        # A role's Ref is its name and its name is its logical id, as the local stack creates it.
        self.role_names = {name for name, res in resources.items() if res["Type"] == "AWS::IAM::Role"}

    def ref(self, name: str) -> str:
        if name in self.role_names:
            return name
        for table in (self.values.parameters, self.values.pseudo, self.values.refs):
            if name in table:
                return str(table[name])
        raise KeyError(f"Ref {name}: no local value")

    def get_att(self, name: str) -> str:
        logical, _, attribute = name.partition(".")
        if logical in self.role_names and attribute == "Arn":
            return f"arn:aws:iam::{ACCOUNT_ID}:role/{logical}"
        if name not in self.values.attributes:
            raise KeyError(f"Fn::GetAtt {name}: no local value")
        return str(self.values.attributes[name])

    def sub(self, text: str, variables: Mapping[str, Any]) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(self.walk(variables[name]))
            return self.get_att(name) if "." in name else self.ref(name)

        return re.sub(r"\$\{([^}]+)\}", replace, text)

    def walk(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.walk(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref" or key.startswith("Fn::"):
                return self.intrinsic(key, arg)
        return {key: self.walk(item) for key, item in value.items()}

    def intrinsic(self, name: str, arg: Any) -> str:
        if name == "Ref":
            return self.ref(arg)
        if name == "Fn::GetAtt":
            return self.get_att(".".join(arg) if isinstance(arg, list) else arg)
        if name == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
            return self.sub(text, variables)
        if name == "Fn::Join":
            return str(arg[0]).join(str(self.walk(item)) for item in arg[1])
        raise KeyError(f"{name} in a role of the translated template")


def _managed_policy(arn: str) -> dict[str, Any]:
    match = re.fullmatch(r"arn:aws:iam::aws:policy(/(?:[\w+=,.@-]+/)*)([\w+=,.@-]+)", arn)
    documents = json.loads(aws_managed_policies_data)
    if match is None or match.group(2) not in documents or documents[match.group(2)]["Path"] != match.group(1):
        raise KeyError(f"no copy of the managed policy {arn}")
    document: dict[str, Any] = documents[match.group(2)]["Document"]
    return document


@cache
def template_roles() -> dict[str, OracleRole]:
    """Every IAM role of the translated template, by name, with its identity policies."""
    template = translated()
    walker = _Walker(template, local_values())
    roles: dict[str, OracleRole] = {}
    for name, resource in template["Resources"].items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        props = walker.walk(resource["Properties"])
        inline = [policy["PolicyDocument"] for policy in props.get("Policies", [])]
        managed = [_managed_policy(arn) for arn in props.get("ManagedPolicyArns", [])]
        roles[name] = OracleRole(name, (*inline, *managed))
    for name, resource in template["Resources"].items():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            raise NotImplementedError(f"{name}: attach {resource['Type']} to its roles here")
    return roles


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
