"""`template.yaml` as SAM deploys it, read without AWS.

:func:`translated` is the template through samtranslator, the transform
``sam deploy`` submits: SAM's resources become CloudFormation's (a function's
``Globals`` merged in, the roles SAM would generate, its references such as
``<Api>.Stage`` or a layer's versioned id resolved). Code locations survive
the translation as keys of a placeholder bucket (:func:`code_path`), as
``sam package`` would have uploaded them. :func:`template` is the template
as written, for what the translation hides (a function's ``Events``, the
API's ``Auth`` and ``GatewayResponses``).

What a translated template still references (``Ref``, ``Fn::GetAtt``,
``Fn::Sub``, ``Fn::Join``, ``Fn::ImportValue``) only a deployment knows; :class:`Values` holds
what each stands for in one reading (a local run's, or offline values), and
:meth:`Values.resolve` substitutes them, ``Fn::If`` by its condition (a
``Ref`` to ``AWS::NoValue`` leaves the property out, as CloudFormation does).
Anything else is an error, never a guess.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PATH = PROJECT_ROOT / "template.yaml"
# The account and region a reading without AWS names (moto's defaults).
ACCOUNT_ID = "123456789012"
REGION = "us-east-1"
STACK_NAME = "support-tickets-local"
# The bucket of the translation's code locations: its keys are project directories.
CODE_BUCKET = "local-code"


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    """A template as written, short intrinsic tags in their long form."""
    from samcli.yamlhelper import yaml_parse

    loaded = yaml_parse(path.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} is not a template")
    return loaded


@cache
def template(tenant_isolation: bool = False) -> dict[str, Any]:
    """`template.yaml`, or with ``tenant_isolation`` its tenant isolation variant
    (:func:`stack_model.isolation.with_tenant_isolation`)."""
    if not tenant_isolation:
        return load_template()
    from stack_model.isolation import with_tenant_isolation

    return with_tenant_isolation(template())


@cache
def translated(tenant_isolation: bool = False) -> dict[str, Any]:
    """The template as ``sam deploy`` submits it (samtranslator's output)."""
    import boto3
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    source = copy.deepcopy(template(tenant_isolation))
    for resource in source["Resources"].values():
        props = resource.get("Properties", {})
        for uri in ("CodeUri", "ContentUri"):
            if isinstance(props.get(uri), str):
                props[uri] = f"s3://{CODE_BUCKET}/{props[uri]}"
    translator = Translator({}, Parser(), boto_session=boto3.session.Session(region_name=REGION))
    result: dict[str, Any] = translator.translate(source, {}, get_managed_policy_map=dict)
    return result


def with_conditions(translation: Mapping[str, Any], conditions: Mapping[str, bool]) -> dict[str, Any]:
    """A translated template as deployed where each of ``conditions`` has its
    value: a resource or output under a false one left out, ``Condition`` keys
    of true ones dropped, each ``Fn::If`` on one replaced by its branch (the
    others stay as written). With ``{"OwnUserPool": True}``, a stack alone."""

    def evaluated(value: Any) -> Any:
        if isinstance(value, list):
            return [evaluated(item) for item in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Fn::If"} and value["Fn::If"][0] in conditions:
            name, if_true, if_false = value["Fn::If"]
            return evaluated(if_true if conditions[name] else if_false)
        return {key: evaluated(item) for key, item in value.items()}

    result: dict[str, Any] = evaluated(dict(translation))
    for section in ("Resources", "Outputs"):
        for name, entry in list(result.get(section, {}).items()):
            if entry.get("Condition") in conditions:
                if conditions[entry.pop("Condition")]:
                    continue
                del result[section][name]
    return result


def code_path(location: Mapping[str, Any]) -> Path:
    """The project directory of a translated ``Code`` or ``Content``."""
    if location.get("S3Bucket") != CODE_BUCKET:
        raise ValueError(f"not a code location of this template: {location!r}")
    return PROJECT_ROOT / str(location["S3Key"])


def resources(kind: str, tenant_isolation: bool = False) -> dict[str, dict[str, Any]]:
    """The translated template's resources of one type, by logical id."""
    return {name: res for name, res in translated(tenant_isolation)["Resources"].items() if res["Type"] == kind}


class UnresolvedIntrinsic(ValueError):
    pass


class UnknownParameter(ValueError):
    pass


class _NoValue:
    """What ``{"Ref": "AWS::NoValue"}`` resolves to: the property it stands for is left out."""

    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE = _NoValue()


@dataclass
class Values:
    """What each ``Ref`` (``refs``, parameters and pseudo-parameters included),
    ``Fn::GetAtt`` (``attributes``, as ``"Logical.Attr"``) and
    ``Fn::ImportValue`` (``imports``: another stack's exports, by name) of a
    template stands for in one reading."""

    refs: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)

    def add(self, logical_id: str, ref: str, **attributes: str) -> None:
        self.refs[logical_id] = ref
        self.attributes.update({f"{logical_id}.{name}": value for name, value in attributes.items()})

    def ref(self, name: str) -> str:
        if name not in self.refs:
            raise UnresolvedIntrinsic(f"Ref {name} has no value here")
        return self.refs[name]

    def get_att(self, name: str) -> str:
        if name not in self.attributes:
            raise UnresolvedIntrinsic(f"Fn::GetAtt {name} has no value here")
        return self.attributes[name]

    def resolve(self, value: Any) -> Any:
        """``value`` with its intrinsics substituted; :data:`NO_VALUE` if it is
        ``AWS::NoValue`` (inside a list or a mapping, such an item is left out)."""
        if isinstance(value, list):
            return [item for item in (self.resolve(item) for item in value) if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref" and arg == "AWS::NoValue":
                return NO_VALUE
            if key == "Fn::If":
                condition, if_true, if_false = arg
                return self.resolve(if_true if self.condition(condition) else if_false)
            if key == "Ref" or key.startswith("Fn::"):
                return self._intrinsic(key, arg)
        resolved = ((key, self.resolve(item)) for key, item in value.items())
        return {key: item for key, item in resolved if item is not NO_VALUE}

    def _intrinsic(self, key: str, arg: Any) -> str:
        if key == "Ref":
            return self.ref(arg)
        if key == "Fn::GetAtt":
            return self.get_att(".".join(arg) if isinstance(arg, list) else arg)
        if key == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
            return re.sub(r"\$\{([^}]+)\}", lambda match: self._sub(match.group(1), variables), text)
        if key == "Fn::Join":
            return str(arg[0]).join(str(self.resolve(item)) for item in arg[1])
        if key == "Fn::ImportValue":
            name = str(self.resolve(arg))
            if name not in self.imports:
                raise UnresolvedIntrinsic(f"Fn::ImportValue {name}: no stack exports it here")
            return self.imports[name]
        raise UnresolvedIntrinsic(key)

    def _sub(self, name: str, variables: Mapping[str, Any]) -> str:
        if name.startswith("!"):  # ${!Literal} stays literal
            return "${" + name[1:] + "}"
        if name in variables:
            return str(self.resolve(variables[name]))
        return self.get_att(name) if "." in name else self.ref(name)

    def holds(self, resource: Mapping[str, Any]) -> bool:
        """Whether a resource exists with these values (its ``Condition``)."""
        return "Condition" not in resource or self.condition(resource["Condition"])

    def condition(self, name: str) -> bool:
        """A condition of the template with these values (``Fn::Equals``,
        ``Fn::Not`` and ``Fn::Or``: the condition functions the template uses)."""
        return self._holds(translated()["Conditions"][name])

    def _holds(self, condition: Mapping[str, Any]) -> bool:
        if set(condition) == {"Fn::Equals"}:
            left, right = self.resolve(condition["Fn::Equals"])
            return bool(left == right)
        if set(condition) == {"Fn::Not"}:
            (negated,) = condition["Fn::Not"]
            return not self._holds(negated)
        if set(condition) == {"Fn::Or"}:
            return any(self._holds(alternative) for alternative in condition["Fn::Or"])
        if set(condition) == {"Condition"}:
            return self.condition(condition["Condition"])
        raise UnresolvedIntrinsic(f"condition {condition!r}")


def template_values(parameters: Mapping[str, str] | None = None) -> Values:
    """What the template itself says: its parameters (their defaults, or
    ``parameters`` as ``sam deploy --parameter-overrides`` gives them), the
    pseudo-parameters of :data:`ACCOUNT_ID` and :data:`REGION`, the names the
    template gives (a table's ``TableName``, a log group's ``LogGroupName``), each role's name (its logical
    id, as the local stack creates it) and ARN, and each function's (its
    logical id, as the local stack names it)."""
    declared = translated().get("Parameters", {})
    unknown = sorted(set(parameters or {}) - set(declared))
    if unknown:
        raise UnknownParameter(f"template.yaml has no parameter {', '.join(unknown)}")
    values = Values()
    values.refs.update({name: str(spec.get("Default", "")) for name, spec in declared.items()})
    values.refs.update({name: str(value) for name, value in (parameters or {}).items()})
    values.refs.update(
        {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::Partition": "aws",
            "AWS::StackName": STACK_NAME,
            "AWS::URLSuffix": "amazonaws.com",
        }
    )
    for name, table in resources("AWS::DynamoDB::Table").items():
        if "TableName" in table["Properties"]:
            values.refs[name] = str(values.resolve(table["Properties"]["TableName"]))
    # A log group's Ref is its name (LogGroupName), as the functions' LoggingConfig names it.
    for name, group in resources("AWS::Logs::LogGroup").items():
        if "LogGroupName" in group["Properties"]:
            values.refs[name] = str(values.resolve(group["Properties"]["LogGroupName"]))
    for name in resources("AWS::IAM::Role"):
        values.add(name, name, Arn=role_arn(name))
    for name in resources("AWS::Lambda::Function"):
        values.add(name, name, Arn=function_arn(name))
    return values


def role_arn(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT_ID}:role/{name}"


def function_arn(name: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{name}"


def exports(values: Values, outputs: Mapping[str, Any] | None = None) -> dict[str, str]:
    """What a stack of ``template.yaml`` exports with these values (export name
    -> value): its outputs that have an ``Export``, as another stack's
    ``Fn::ImportValue`` reads them."""
    declared = translated().get("Outputs", {}) if outputs is None else outputs
    return {
        str(values.resolve(output["Export"]["Name"])): str(values.resolve(output["Value"]))
        for output in declared.values()
        if "Export" in output
    }


def table_definition(values: Values | None = None) -> dict[str, Any]:
    """The table's CreateTable arguments, straight from `template.yaml`."""
    ((_, table),) = resources("AWS::DynamoDB::Table").items()
    return table_arguments((values or template_values()).resolve(table["Properties"]))


def table_arguments(props: Mapping[str, Any]) -> dict[str, Any]:
    """CreateTable's arguments from a table's resolved properties."""
    names = ("TableName", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode")
    arguments = {name: props[name] for name in names if name in props}
    if "StreamSpecification" in props:
        arguments["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
    return arguments


def table_protections(props: Mapping[str, Any]) -> dict[str, Any]:
    """The CreateTable arguments of a table's resolved properties that protect
    it rather than shape it: its ``Tags``, its deletion protection, and its
    encryption under a customer managed key (``SSESpecification`` with a
    ``KMSMasterKeyId``, in CreateTable's spelling; without a key, DynamoDB's AWS
    owned key is what every table has, and nothing is passed)."""
    arguments: dict[str, Any] = {}
    if props.get("Tags"):
        arguments["Tags"] = list(props["Tags"])
    if "DeletionProtectionEnabled" in props:
        arguments["DeletionProtectionEnabled"] = bool(props["DeletionProtectionEnabled"])
    sse = props.get("SSESpecification") or {}
    if sse.get("KMSMasterKeyId"):
        arguments["SSESpecification"] = {
            "Enabled": bool(sse.get("SSEEnabled", True)),
            "SSEType": str(sse.get("SSEType", "KMS")),
            "KMSMasterKeyId": str(sse["KMSMasterKeyId"]),
        }
    return arguments
