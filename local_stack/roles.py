"""The IAM roles of `template.yaml`, with their trust and permission policies,
as the local stack creates them in the emulator and as the guard evaluates them.

Read from the template, never restated: each ``AWS::IAM::Role`` (its
``AssumeRolePolicyDocument``, inline ``Policies`` and ``ManagedPolicyArns``),
each ``AWS::IAM::Policy`` attached to a role through ``Roles``, and the role
SAM generates for a function that has ``Policies`` instead of a ``Role``
(``<Function>Role``, trusted by ``lambda.amazonaws.com``, one inline policy
per statement block, as SAM names them).

Managed policies count, as in AWS: an AWS managed policy's document comes
from :mod:`stack_model.managed_policies`, and a role with one the local stack
has no document for (or a SAM policy template, which SAM expands at deploy
time) is refused when the roles are read, so the stack does not start with
permissions it can't evaluate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stack_model import managed_policies
from stack_model.template import Resolver, template

ACCOUNT_ID = "123456789012"


@dataclass(frozen=True)
class RoleDefinition:
    logical_id: str
    name: str
    trust_policy: dict[str, Any]
    inline_policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    managed_policy_arns: tuple[str, ...] = ()
    managed_documents: tuple[dict[str, Any], ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        # Raises UnknownManagedPolicy: a role's permissions are known in full or not used.
        documents = tuple(managed_policies.document(arn) for arn in self.managed_policy_arns)
        object.__setattr__(self, "managed_documents", documents)

    @property
    def arn(self) -> str:
        return role_arn(self.name)

    def policies(self) -> list[dict[str, Any]]:
        """Every identity-based policy of the role: inline ones, those attached
        with ``AWS::IAM::Policy`` (added to ``inline_policies``) and managed ones."""
        return [*self.inline_policies.values(), *self.managed_documents]


def role_arn(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT_ID}:role/{name}"


def role_logical_ids() -> list[str]:
    """Every role the template declares or makes SAM generate, by logical id."""
    resources = template()["Resources"]
    ids = [name for name, res in resources.items() if res["Type"] == "AWS::IAM::Role"]
    ids += [f"{name}Role" for name, res in resources.items() if _generates_role(res)]
    return ids


def function_role(function_logical_id: str) -> str:
    """The logical id of the role a function runs with."""
    props = template()["Resources"][function_logical_id].get("Properties", {})
    role = props.get("Role")
    if role is None:
        return f"{function_logical_id}Role"
    if isinstance(role, dict) and "Fn::GetAtt" in role:
        target = role["Fn::GetAtt"]
        return str(target[0] if isinstance(target, list) else target.split(".")[0])
    raise ValueError(f"{function_logical_id}: Role must be !GetAtt <Role>.Arn locally, got {role!r}")


def _generates_role(resource: Mapping[str, Any]) -> bool:
    return resource["Type"] == "AWS::Serverless::Function" and "Role" not in resource.get("Properties", {})


def roles_from_template(resolver: Resolver) -> dict[str, RoleDefinition]:
    """Every role, by logical id, with intrinsics resolved by ``resolver`` (which
    must know the ARNs the policies reference). Role names are the logical ids
    and each role's ``Ref`` resolves to its name, as CloudFormation does."""
    resources = template()["Resources"]
    for logical_id in role_logical_ids():
        resolver.refs.setdefault(logical_id, logical_id)
        resolver.attributes.setdefault(f"{logical_id}.Arn", role_arn(logical_id))
    roles: dict[str, RoleDefinition] = {}
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        if "Condition" in resource and not resolver.condition(resource["Condition"]):
            continue
        props = resolver.resolve(resource["Properties"])
        roles[logical_id] = RoleDefinition(
            logical_id=logical_id,
            name=logical_id,
            trust_policy=props["AssumeRolePolicyDocument"],
            inline_policies={policy["PolicyName"]: policy["PolicyDocument"] for policy in props.get("Policies", [])},
            managed_policy_arns=tuple(props.get("ManagedPolicyArns", [])),
        )
    for logical_id, resource in resources.items():
        if _generates_role(resource):
            roles[f"{logical_id}Role"] = _sam_function_role(logical_id, resource, resolver)
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        props = resource["Properties"]
        for role_ref in props.get("Roles", []):
            target = role_ref.get("Ref") if isinstance(role_ref, dict) else None
            if target not in roles:
                raise ValueError(f"{logical_id}: Roles must be !Ref <Role> of this template, got {role_ref!r}")
            roles[target].inline_policies[str(resolver.resolve(props["PolicyName"]))] = resolver.resolve(
                props["PolicyDocument"]
            )
    return roles


def _sam_function_role(logical_id: str, resource: Mapping[str, Any], resolver: Resolver) -> RoleDefinition:
    globals_ = template().get("Globals", {}).get("Function", {})
    props = {**globals_, **resource.get("Properties", {})}
    policies = props.get("Policies", [])
    policies = [policies] if isinstance(policies, str | dict) else list(policies)
    inline: dict[str, dict[str, Any]] = {}
    managed = ["arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"]
    if props.get("Tracing") == "Active":
        managed.append("arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess")
    if any(event.get("Type") == "DynamoDB" for event in props.get("Events", {}).values()):
        # What SAM adds for a DynamoDB event (stream actions on "*"): why the template writes its roles out.
        managed.append("arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole")
    for index, policy in enumerate(policies):
        if isinstance(policy, str):
            managed.append(policy if policy.startswith("arn:") else f"arn:aws:iam::aws:policy/{policy}")
        elif isinstance(policy, dict) and "Statement" in policy:
            document = resolver.resolve(policy)
            inline[f"{logical_id}RolePolicy{index}"] = {"Version": "2012-10-17", **document}
        else:
            raise managed_policies.UnknownManagedPolicy(
                f"{logical_id}: SAM policy template {policy!r} is not expanded locally; write the statements out"
            )
    return RoleDefinition(
        logical_id=f"{logical_id}Role",
        name=f"{logical_id}Role",
        trust_policy={
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": ["lambda.amazonaws.com"]}, "Action": ["sts:AssumeRole"]}
            ],
        },
        inline_policies=inline,
        managed_policy_arns=tuple(managed),
    )
