"""The IAM roles of `template.yaml` as SAM deploys them, with their trust and
permission policies: what the local stack creates in the emulator, what its
guard evaluates, and what the IAM oracle's tests judge.

Read from samtranslator's output (:func:`stack_model.template.translated`),
so a role SAM generates for a function counts like one the template writes
out. A role's policies are its inline ones and its managed ones: an AWS
managed policy's document comes from :mod:`stack_model.managed_policies`, and
a role with one there is no document for (or an ``AWS::IAM::ManagedPolicy``)
is refused when the roles are read, so nothing starts with permissions it
can't evaluate. An ``AWS::IAM::Policy`` attached to a role of the template is
one of its inline policies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stack_model import managed_policies
from stack_model.template import Values, resources, role_arn


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
        """Every identity-based policy of the role: inline ones and managed ones."""
        return [*self.inline_policies.values(), *self.managed_documents]


def function_role(function_logical_id: str) -> str:
    """The logical id of the role a function runs with (``Role: !GetAtt <Role>.Arn``)."""
    role = resources("AWS::Lambda::Function")[function_logical_id]["Properties"]["Role"]
    target = role.get("Fn::GetAtt") if isinstance(role, dict) else None
    if not isinstance(target, list) or target[1:] != ["Arn"]:
        raise ValueError(f"{function_logical_id}: Role must be a role of this template, got {role!r}")
    return str(target[0])


def roles_from_template(values: Values) -> dict[str, RoleDefinition]:
    """Every role that exists with these values, by logical id, its policies
    resolved with them (which must know the resources the policies name).
    Role names are the logical ids, as the local stack creates them."""
    managed = resources("AWS::IAM::ManagedPolicy")
    if managed:
        raise managed_policies.UnknownManagedPolicy(f"policies attached apart are not read locally: {sorted(managed)}")
    # An AWS::IAM::Policy is an inline policy of each role it names (a key
    # policy that names a role makes the role's grant of that key a policy of
    # its own: the role can't name the key without a cycle).
    attached: dict[str, dict[str, dict[str, Any]]] = {}
    for logical_id, resource in resources("AWS::IAM::Policy").items():
        props = resource["Properties"]
        targets = props.get("Roles", [])
        if (
            props.get("Users")
            or props.get("Groups")
            or not all(isinstance(target, dict) and set(target) == {"Ref"} for target in targets)
        ):
            raise managed_policies.UnknownManagedPolicy(f"{logical_id}: only policies of this template's roles")
        for target in targets:
            attached.setdefault(target["Ref"], {})[props["PolicyName"]] = props["PolicyDocument"]
    roles: dict[str, RoleDefinition] = {}
    for logical_id, resource in resources("AWS::IAM::Role").items():
        if not values.holds(resource):
            continue
        props = values.resolve(resource["Properties"])
        roles[logical_id] = RoleDefinition(
            logical_id=logical_id,
            name=logical_id,
            trust_policy=props["AssumeRolePolicyDocument"],
            inline_policies={
                **{policy["PolicyName"]: policy["PolicyDocument"] for policy in props.get("Policies", [])},
                **values.resolve(attached.get(logical_id, {})),
            },
            managed_policy_arns=tuple(props.get("ManagedPolicyArns", [])),
        )
    return roles
