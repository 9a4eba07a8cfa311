"""Read `template.yaml` the way CloudFormation does, for the local stack and tests.

A YAML loader that understands the short intrinsic tags (``!Ref``, ``!Sub``,
``!GetAtt``...) by turning them into their long ``Fn::`` form, and a small
resolver for the intrinsics the local stack needs (``Ref`` to parameters and
resources, ``Fn::GetAtt``, ``Fn::Sub``, ``Fn::Join``, ``Fn::If`` with
``Fn::Equals`` conditions). Anything else is an error, never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PATH = PROJECT_ROOT / "template.yaml"


class CfnLoader(yaml.SafeLoader):
    """SafeLoader plus CloudFormation's short-form intrinsic tags."""


def _intrinsic(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if tag_suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


CfnLoader.add_multi_constructor("!", _intrinsic)  # type: ignore[no-untyped-call]


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        loaded = yaml.load(handle, Loader=CfnLoader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} is not a template")
    return loaded


class UnsupportedIntrinsic(ValueError):
    pass


@dataclass
class Resolver:
    """Resolves intrinsics against parameter values and known resource attributes."""

    template: Mapping[str, Any]
    parameters: dict[str, Any] = field(default_factory=dict)
    # Ref of a resource -> value; GetAtt "Logical.Attr" -> value.
    refs: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    pseudo: dict[str, Any] = field(
        default_factory=lambda: {
            "AWS::Region": "us-east-1",
            "AWS::AccountId": "123456789012",
            "AWS::Partition": "aws",
            "AWS::StackName": "support-tickets-local",
            "AWS::URLSuffix": "amazonaws.com",
        }
    )

    def __post_init__(self) -> None:
        for name, spec in self.template.get("Parameters", {}).items():
            self.parameters.setdefault(name, spec.get("Default"))

    def ref(self, name: str) -> Any:
        for table in (self.parameters, self.pseudo, self.refs):
            if name in table:
                return table[name]
        raise UnsupportedIntrinsic(f"Ref {name} is not known locally")

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][name]))

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            handler = self._handlers().get(key)
            if handler is not None:
                return handler(arg)
            if key.startswith("Fn::") or key == "Ref":
                raise UnsupportedIntrinsic(key)
        return {key: self.resolve(item) for key, item in value.items()}

    def _handlers(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "Ref": self.ref,
            "Fn::GetAtt": self._get_att,
            "Fn::Sub": self._sub,
            "Fn::Join": lambda arg: str(arg[0]).join(str(self.resolve(item)) for item in arg[1]),
            "Fn::Equals": lambda arg: self.resolve(arg[0]) == self.resolve(arg[1]),
            "Fn::If": lambda arg: self.resolve(arg[1] if self.condition(arg[0]) else arg[2]),
            "Condition": self.condition,
        }

    def _get_att(self, arg: list[str] | str) -> Any:
        name = ".".join(arg) if isinstance(arg, list) else arg
        if name not in self.attributes:
            raise UnsupportedIntrinsic(f"Fn::GetAtt {name} is not known locally")
        return self.attributes[name]

    def _sub(self, arg: str | list[Any]) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        out, index = [], 0
        while index < len(text):
            start = text.find("${", index)
            if start < 0:
                out.append(text[index:])
                break
            end = text.index("}", start)
            out.append(text[index:start])
            name = text[start + 2 : end]
            if name.startswith("!"):  # ${!Literal} stays literal
                out.append("${" + name[1:] + "}")
            elif name in variables:
                out.append(str(self.resolve(variables[name])))
            elif "." in name:
                out.append(str(self._get_att(name)))
            else:
                out.append(str(self.ref(name)))
            index = end + 1
        return "".join(out)


@cache
def template() -> dict[str, Any]:
    return load_template()


LOCAL_API_ID = "local"


# The id the local stack gives the template's DynamoDB gateway endpoint (its
# Ref, hence TenantAccessRole's aws:SourceVpce condition): what requests to the
# emulator's endpoint listener carry.
LOCAL_VPC_ENDPOINT_ID = "vpce-0dd0000000000000a"


class UnknownParameter(ValueError):
    pass


def local_resolver(parameters: Mapping[str, str] | None = None, **attributes: Any) -> Resolver:
    """A resolver that knows what a local run knows without AWS: the template's
    parameters (their defaults, or ``parameters`` as ``sam deploy
    --parameter-overrides`` would give them), the table's name (its ``Ref``),
    the API's id and stage, and whatever resource attributes the caller passes,
    as ``"Logical.Attr"`` keys (e.g. the tenant role's ARN once it exists)."""
    declared = template().get("Parameters", {})
    unknown = sorted(set(parameters or {}) - set(declared))
    if unknown:
        raise UnknownParameter(f"template.yaml has no parameter {', '.join(unknown)}")
    resolver = Resolver(template(), parameters={name: str(value) for name, value in (parameters or {}).items()})
    table = template()["Resources"]["SupportTicketTable"]["Properties"]
    resolver.refs["SupportTicketTable"] = resolver.resolve(table["TableName"])
    # SAM's Api: its Ref is the RestApi's id, <Api>.Stage the stage's name.
    resolver.refs["TicketsApi"] = LOCAL_API_ID
    resolver.refs["TicketsApi.Stage"] = resolver.ref("StageName")
    resolver.refs["DynamoDbEndpoint"] = LOCAL_VPC_ENDPOINT_ID
    resolver.attributes.update({name.replace("__", "."): value for name, value in attributes.items()})
    return resolver


# The placeholders of :func:`offline_resolver` (an emulator gives real ones).
OFFLINE_ACCOUNT = "123456789012"
OFFLINE_STREAM_LABEL = "2026-11-21T10:00:00.000"


def offline_resolver(
    *, user_pool_id: str, client_id: str, identity_pool_id: str, region: str = "us-east-1"
) -> Resolver:
    """A resolver that knows every resource the roles and the identity pool
    name, with the values they would have in the emulator's account: for
    reading the template's policies and pools without an emulator (tests, the
    in-process identity pool)."""
    resolver = local_resolver()
    table = f"arn:aws:dynamodb:{region}:{OFFLINE_ACCOUNT}:table/{resolver.refs['SupportTicketTable']}"
    resolver.attributes.update(
        {
            "SupportTicketTable.Arn": table,
            "SupportTicketTable.StreamArn": f"{table}/stream/{OFFLINE_STREAM_LABEL}",
            "UserPool.ProviderName": f"cognito-idp.{region}.amazonaws.com/{user_pool_id}",
        }
    )
    resolver.refs.update(
        UserPool=user_pool_id,
        UserPoolClient=client_id,
        IdentityPool=identity_pool_id,
    )
    # Every queue of the template (the stream functions' on-failure queues),
    # named by its logical id, as the emulator creates them.
    for logical_id, resource in template()["Resources"].items():
        if resource["Type"] == "AWS::SQS::Queue":
            resolver.attributes[f"{logical_id}.Arn"] = f"arn:aws:sqs:{region}:{OFFLINE_ACCOUNT}:{logical_id}"
            resolver.refs[logical_id] = f"https://sqs.{region}.amazonaws.com/{OFFLINE_ACCOUNT}/{logical_id}"
    return resolver


def table_definition(resolver: Resolver | None = None) -> dict[str, Any]:
    """The table's CreateTable arguments, straight from `template.yaml`."""
    resolver = resolver or local_resolver()
    props = resolver.resolve(template()["Resources"]["SupportTicketTable"]["Properties"])
    definition = {
        name: props[name]
        for name in ("TableName", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode")
        if name in props
    }
    if "StreamSpecification" in props:
        definition["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
    return definition


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)
