"""IAM policy evaluation, the part the local stack needs, failing closed.

moto stores IAM policies but never evaluates their conditions, so the local
stack's guard (:mod:`local_stack.iam.guard`) asks this module, for every request
made with emulator-issued role credentials, whether AWS would allow it. It is
pure: documents and a request context in, a :class:`Decision` out.

The AWS rules it follows (IAM User Guide, "Policy evaluation logic" and
"IAM JSON policy elements: Condition operators"):

- **Explicit deny > allow > implicit deny.** A matching ``Deny`` statement
  wins over any ``Allow``; without a matching ``Allow`` the request is denied.
  When several policy *sets* must all allow (identity policies and a session
  policy, or a trust policy and the caller's identity policies), each set is
  evaluated on its own and every one must allow.
- A statement matches when its ``Action`` (or ``NotAction``), its
  ``Resource`` (or ``NotResource``) and every condition match. Actions are
  case-insensitive, resources case-sensitive; both support ``*`` and ``?``.
- **Conditions**: operators are ANDed, keys within an operator are ANDed,
  the values of one key are ORed. Supported operators: ``StringEquals``,
  ``StringNotEquals``, ``StringEqualsIgnoreCase``, ``StringNotEqualsIgnoreCase``,
  ``StringLike``, ``StringNotLike``, ``ArnEquals``/``ArnLike`` (and their
  ``Not`` forms, compared like ``StringEquals``/``StringLike``), ``Bool``
  and ``Null``; the ``IfExists`` suffix; the ``ForAllValues:`` and
  ``ForAnyValue:`` set qualifiers.
- A key **missing** from the request: a positive operator is false, a negated
  one (``StringNotEquals``, ``StringNotLike``...) is true, ``...IfExists`` is
  true. ``ForAllValues`` is **true on an empty or missing set** (which is why
  policies pair it with ``Null``); ``ForAnyValue`` is false on one.
  ``Null: true`` means the key is missing (or an empty set), ``false`` that it
  is present.
- ``StringLike``: ``*`` matches any run of characters (also none), ``?``
  exactly one, where the policy writes them. A policy variable's value is
  substituted as literal text: a session tagged ``TenantId=*`` matches only
  keys that contain a ``*`` there, never every tenant. (STS refuses ``*`` and
  ``?`` in tag values, see :mod:`local_stack.iam.sts`; tenant ids may contain
  neither anyway.)
- **Policy variables** ``${aws:PrincipalTag/TenantId}`` (any context key),
  ``${key, 'default'}``, and the escapes ``${*}``, ``${?}``, ``${$}``, in
  ``Resource`` and in string condition values. A variable whose key is not in
  the request (and has no default) makes that value match nothing.

Anything else (an unknown element, operator or qualifier, ``Principal`` in
an identity policy, a single-valued operator on a multivalued key, a value of
an unexpected type) is not understood. An ``Allow`` statement that is not
understood never allows; a ``Deny`` statement that is not understood always
denies. So a policy this module cannot read denies, never allows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Any

# Condition keys whose request value is a set (the others have one value).
MULTIVALUED_KEYS = frozenset(
    {
        "dynamodb:leadingkeys",
        "dynamodb:attributes",
        "aws:tagkeys",
        "cognito-identity.amazonaws.com:amr",
        "kms:encryptioncontextkeys",
    }
)

_STATEMENT_ELEMENTS = frozenset({"Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition"})
_TRUST_ELEMENTS = _STATEMENT_ELEMENTS | {"Principal", "NotPrincipal"}
_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_DEFAULT = re.compile(r"^\s*([^,\s]+)\s*,\s*'([^']*)'\s*$")
# ${*} and ${?} are literal characters, not wildcards: kept as private-use code points.
_LITERAL = {"*": "\ue000", "?": "\ue001"}


class Decision(StrEnum):
    ALLOW = "allow"
    IMPLICIT_DENY = "implicit-deny"
    EXPLICIT_DENY = "explicit-deny"


class NotUnderstood(ValueError):
    """A policy element or request this evaluator does not model."""


@dataclass(frozen=True)
class Request:
    """One authorization question: may ``principal`` do ``action`` on ``resource``?

    ``context`` holds the condition keys present in the request, each with its
    values (a single-valued key has one). Key names are case-insensitive.
    """

    action: str
    resource: str
    context: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # Who asks, for trust policies: e.g. the calling role's ARN and its account's
    # root ARN, or a federation service ("cognito-identity.amazonaws.com" for an
    # identity pool's web identity). "*" stands for any principal (the local
    # operator, see guard).
    principals: tuple[str, ...] = ()

    def values(self, key: str) -> tuple[str, ...] | None:
        """The request's values of ``key``, its name matched without regard to
        case, the tag key of ``aws:ResourceTag/<key>`` included (IAM User Guide,
        "IAM JSON policy elements: Condition": "Key names are not
        case-sensitive. This means that if you specify
        "aws:ResourceTag/TagKey1": "Value1" in the condition element of your
        policy, then the condition matches a resource tag key named either
        TagKey1 or tagkey1, but not both."). A resource may hold both, DynamoDB's
        tag keys being case-sensitive; AWS then says only that "the key name
        matches both tags, but only one value matches. This can result in
        unexpected condition failures", not which value a condition sees. So a
        key that names of the request with different values match is
        :class:`NotUnderstood`: an Allow conditioned on it never allows, a Deny
        always denies (with one value, whichever AWS picks is that value)."""
        wanted = key.lower()
        found = {tuple(values) for name, values in self.context.items() if name.lower() == wanted}
        if len(found) > 1:
            raise NotUnderstood(f"{key}: names of the request that differ in case only have different values")
        return found.pop() if found else None


def evaluate(policies: Iterable[Mapping[str, Any]], request: Request, *, trust: bool = False) -> Decision:
    """The decision of one set of policies (e.g. a role's identity policies).

    With ``trust=True`` the documents are resource-based (a role's trust
    policy): statements then need a ``Principal`` naming one of
    ``request.principals``.
    """
    allowed = False
    for policy in policies:
        for statement in _statements(policy):
            effect = statement.get("Effect") if isinstance(statement, Mapping) else None
            try:
                if not isinstance(statement, Mapping) or effect not in ("Allow", "Deny"):
                    raise NotUnderstood("statement")
                matched = _statement_matches(statement, request, trust=trust)
            except NotUnderstood:
                # Fail closed: an unreadable Deny denies, an unreadable Allow never allows.
                if effect != "Allow":
                    return Decision.EXPLICIT_DENY
                continue
            if matched and effect == "Deny":
                return Decision.EXPLICIT_DENY
            allowed = allowed or matched
    return Decision.ALLOW if allowed else Decision.IMPLICIT_DENY


def evaluate_all(policy_sets: Iterable[Iterable[Mapping[str, Any]]], request: Request) -> Decision:
    """Every set must allow (e.g. identity policies and a session policy); an
    explicit deny in any set wins."""
    decisions = [evaluate(policies, request) for policies in policy_sets]
    if not decisions or Decision.EXPLICIT_DENY in decisions:
        return Decision.EXPLICIT_DENY if decisions else Decision.IMPLICIT_DENY
    return Decision.ALLOW if all(d is Decision.ALLOW for d in decisions) else Decision.IMPLICIT_DENY


def _statements(policy: Mapping[str, Any]) -> list[Any]:
    statements = policy.get("Statement", [])
    return [statements] if isinstance(statements, Mapping) else list(statements)


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    raise NotUnderstood(f"expected a string or a list of strings, got {value!r}")


def _statement_matches(statement: Mapping[str, Any], request: Request, *, trust: bool) -> bool:
    elements = _TRUST_ELEMENTS if trust else _STATEMENT_ELEMENTS
    if set(statement) - elements:
        raise NotUnderstood(f"statement elements {sorted(set(statement) - elements)}")
    if trust and not _principal_matches(statement, request.principals):
        return False
    if not _one_of(statement, "Action", "NotAction", request.action, request, case_sensitive=False):
        return False
    has_resource = "Resource" in statement or "NotResource" in statement
    if (not trust or has_resource) and not _one_of(
        statement, "Resource", "NotResource", request.resource, request, case_sensitive=True
    ):
        return False
    return _conditions_hold(statement.get("Condition", {}), request)


def _one_of(
    statement: Mapping[str, Any], positive: str, negative: str, value: str, request: Request, *, case_sensitive: bool
) -> bool:
    if (positive in statement) == (negative in statement):
        raise NotUnderstood(f"exactly one of {positive}/{negative}")
    name = positive if positive in statement else negative
    patterns = _as_list(statement[name])
    if positive == "Resource":
        patterns = [p for p in (_substitute(pattern, request) for pattern in patterns) if p is not None]
    matched = any(_like(pattern, value, case_sensitive=case_sensitive) for pattern in patterns)
    return matched if name == positive else not matched


def _principal_matches(statement: Mapping[str, Any], principals: tuple[str, ...]) -> bool:
    if "NotPrincipal" in statement or "Principal" not in statement:
        raise NotUnderstood("trust statements need a Principal")
    value = statement["Principal"]
    if not isinstance(value, Mapping) or set(value) - {"AWS", "Service", "Federated"}:
        if value == "*":
            return True
        raise NotUnderstood("Principal")
    named = {candidate for kind in value for candidate in _as_list(value[kind])}
    # {"AWS": "*"} is "*": every principal (IAM User Guide, "AWS JSON policy
    # elements: Principal", anonymous users included).
    anyone = "AWS" in value and "*" in _as_list(value["AWS"])
    return anyone or "*" in principals or bool(named & set(principals))


# ---------------------------------------------------------------- conditions
def _conditions_hold(conditions: Any, request: Request) -> bool:
    if not isinstance(conditions, Mapping):
        raise NotUnderstood("Condition")
    return all(_condition_holds(operator, block, request) for operator, block in conditions.items())


def _condition_holds(operator: str, block: Any, request: Request) -> bool:
    if not isinstance(block, Mapping):
        raise NotUnderstood(f"Condition {operator}")
    qualifier, _, base = operator.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise NotUnderstood(f"qualifier {qualifier}")
    if_exists = base.endswith("IfExists") and base != "IfExists"
    base = base.removesuffix("IfExists") if if_exists else base
    return all(
        _key_holds(_Operator(qualifier, base, if_exists), key, _as_list(values), request)
        for key, values in block.items()
    )


@dataclass(frozen=True)
class _Operator:
    qualifier: str  # "", "ForAllValues" or "ForAnyValue"
    base: str  # e.g. "StringLike"
    if_exists: bool


def _key_holds(operator: _Operator, key: str, policy_values: list[str], request: Request) -> bool:
    qualifier, base, if_exists = operator.qualifier, operator.base, operator.if_exists
    present = request.values(key)
    if present is not None and len(present) == 0:
        present = None  # an empty set counts as missing (Null) and as "no values" (qualifiers)
    if base == "Null":
        if qualifier or if_exists or any(v not in ("true", "false") for v in policy_values):
            raise NotUnderstood("Null")
        return any((present is None) == (v == "true") for v in policy_values)
    compare, negated = _comparison(base)
    if qualifier == "ForAllValues":
        return all(compare_value(compare, negated, value, policy_values, request) for value in present or ())
    if qualifier == "ForAnyValue":
        return any(compare_value(compare, negated, value, policy_values, request) for value in present or ())
    if present is None:
        return if_exists or negated
    if key.lower() in MULTIVALUED_KEYS or len(present) != 1:
        raise NotUnderstood(f"single-valued operator {base} on multivalued key {key}")
    return compare_value(compare, negated, present[0], policy_values, request)


def _comparison(base: str) -> tuple[str, bool]:
    table = {
        "StringEquals": ("equals", False),
        "StringNotEquals": ("equals", True),
        "StringEqualsIgnoreCase": ("iequals", False),
        "StringNotEqualsIgnoreCase": ("iequals", True),
        "StringLike": ("like", False),
        "StringNotLike": ("like", True),
        "ArnEquals": ("like", False),
        "ArnLike": ("like", False),
        "ArnNotEquals": ("like", True),
        "ArnNotLike": ("like", True),
        "Bool": ("iequals", False),
    }
    if base not in table:
        raise NotUnderstood(f"operator {base}")
    return table[base]


def compare_value(compare: str, negated: bool, value: str, policy_values: list[str], request: Request) -> bool:
    """Whether one request value satisfies the operator against the policy's values."""
    matched = False
    for raw in policy_values:
        pattern = _substitute(raw, request, literal=compare != "like")
        if pattern is None:
            continue
        if (
            (compare == "equals" and value == pattern)
            or (compare == "iequals" and value.lower() == pattern.lower())
            or (compare == "like" and _like(pattern, value, case_sensitive=True))
        ):
            matched = True
            break
    return not matched if negated else matched


# ---------------------------------------------------------------- strings
def _substitute(text: str, request: Request, *, literal: bool = False) -> str | None:
    """Replace policy variables; ``None`` when one has no value in the request.
    With ``literal=False`` the result is a StringLike pattern in which the
    escapes ``${*}``/``${?}`` and every ``*``/``?`` of a substituted value are
    literal characters (private-use code points that :func:`_compile` turns
    back into ``*``/``?``): a value is data, never a pattern."""
    missing = False

    def replace(match: re.Match[str]) -> str:
        nonlocal missing
        inner = match.group(1)
        if inner in ("*", "?", "$"):
            return inner if literal else _LITERAL.get(inner, inner)
        default = _DEFAULT.match(inner)
        key, fallback = (default.group(1), default.group(2)) if default else (inner.strip(), None)
        values = request.values(key)
        if values is None or len(values) != 1:
            if fallback is None:
                missing = True
                return ""
            return fallback if literal else _as_literal(fallback)
        return values[0] if literal else _as_literal(values[0])

    result = _VARIABLE.sub(replace, text)
    return None if missing else result


def _as_literal(value: str) -> str:
    return "".join(_LITERAL.get(char, char) for char in value)


def _like(pattern: str, value: str, *, case_sensitive: bool) -> bool:
    return _compile(pattern, case_sensitive).fullmatch(value) is not None


@cache
def _compile(pattern: str, case_sensitive: bool) -> re.Pattern[str]:
    wildcards = {"*": ".*", "?": "."}
    unescape = {code: char for char, code in _LITERAL.items()}
    regex = "".join(wildcards.get(char) or re.escape(unescape.get(char, char)) for char in pattern)
    return re.compile(regex, re.DOTALL if case_sensitive else re.DOTALL | re.IGNORECASE)
