r"""STS as the guard models it: ``AssumeRole``'s validation and authorization,
and STS's XML answers.

Tags STS refuses (a key or value with a character outside
``[\p{L}\p{Z}\p{N}_.:/=+\-@]``, such as ``*`` or ``?``, too long, more
than 50 tags) are its 400 ``ValidationError`` before anything else
(:func:`tag_errors`; the identity pool applies the same rules to the
principal tags it sets). Then the target role's trust policy must allow
``sts:AssumeRole`` (and ``sts:TagSession`` when tags are passed) with the
request's tags as ``aws:RequestTag/*`` and ``aws:TagKeys``; a role-session
caller also needs its own role's policies to allow both actions
(:func:`authorize_assume_role`). When moto has issued the credentials, the
guard reads them from its answer (:func:`issued_credentials`). The other
credential-minting actions are refused (:data:`REFUSED_ACTIONS`): the guard
could not attribute their keys to a role.
"""

from __future__ import annotations

import json
import logging
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.condition_keys import assume_role_context, principal_context
from local_stack.iam.protocol_answers import QUERY_NAMESPACES, Answer, xml_error
from local_stack.iam.sessions import Session, denial_message
from local_stack.iam.sigv4 import Credentials
from stack_model.roles import RoleDefinition
from stack_model.template import ACCOUNT_ID

log = logging.getLogger("local_stack.guard")

# STS's Tag shape (API reference, "Tag"): key 1-128 and value 0-256 characters
# of [\p{L}\p{Z}\p{N}_.:/=+\-@]; at most 50 tags. So no "*", "?", "|", "#" or
# "$" ever reaches a principal tag.
MAX_SESSION_TAGS = 50
_TAG_KEY_PATTERN = r"[\p{L}\p{Z}\p{N}_.:/=+\-@]+"
_TAG_VALUE_PATTERN = r"[\p{L}\p{Z}\p{N}_.:/=+\-@]*"
_TAG_PUNCTUATION = frozenset("_.:/=+-@")
# Minting actions whose keys the guard could not attribute to a role: refused.
REFUSED_ACTIONS = frozenset(
    {"AssumeRoleWithWebIdentity", "AssumeRoleWithSAML", "GetSessionToken", "GetFederationToken", "AssumeRoot"}
)
_NAMESPACE = QUERY_NAMESPACES["sts"]
_ISSUED = ("AccessKeyId", "SecretAccessKey", "SessionToken")  # an answer's Credentials


class InvalidRequest(ValueError):
    """A request STS refuses before any authorization: 400 ValidationError."""


def _tag_characters_valid(text: str) -> bool:
    return all(unicodedata.category(char)[0] in "LZN" or char in _TAG_PUNCTUATION for char in text)


def tag_errors(tags: Sequence[tuple[str, str]]) -> list[str]:
    """STS's validation errors for these session tags, worded as STS words them."""
    errors: list[str] = []
    if len(tags) > MAX_SESSION_TAGS:
        errors.append(
            f"Value '{len(tags)} tags' at 'tags' failed to satisfy constraint: "
            f"Member must have length less than or equal to {MAX_SESSION_TAGS}"
        )
    for index, (key, value) in enumerate(tags, start=1):
        for part, text, shortest, longest, pattern in (
            ("key", key, 1, 128, _TAG_KEY_PATTERN),
            ("value", value, 0, 256, _TAG_VALUE_PATTERN),
        ):
            where = f"Value '{text}' at 'tags.{index}.member.{part}' failed to satisfy constraint: Member must"
            if len(text) < shortest:
                errors.append(f"{where} have length greater than or equal to {shortest}")
            elif len(text) > longest:
                errors.append(f"{where} have length less than or equal to {longest}")
            if not _tag_characters_valid(text):
                errors.append(f"{where} satisfy regular expression pattern: {pattern}")
    return errors


@dataclass(frozen=True)
class AssumeRoleRequest:
    role_arn: str
    session_name: str
    tags: dict[str, str]
    session_policy: dict[str, Any] | None


def parse_assume_role(params: Mapping[str, str]) -> AssumeRoleRequest:
    """The parameters of a query-protocol AssumeRole call; :class:`InvalidRequest`
    for tags STS refuses, NotUnderstood for anything the guard does not model
    (transitive tags, managed session policies)."""
    given: list[tuple[str, str]] = []
    index = 1
    while f"Tags.member.{index}.Key" in params:
        given.append((params[f"Tags.member.{index}.Key"], params.get(f"Tags.member.{index}.Value", "")))
        index += 1
    errors = tag_errors(given)
    if errors:
        count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} detected"
        raise InvalidRequest(f"{count}: {'; '.join(errors)}")
    tags: dict[str, str] = {}
    for key, value in given:
        if key.lower() in {existing.lower() for existing in tags}:
            raise iam.NotUnderstood("duplicate tag key")
        tags[key] = value
    if any(name.startswith(("TransitiveTagKeys", "PolicyArns", "ProvidedContexts")) for name in params):
        raise iam.NotUnderstood("transitive tags, managed session policies and provided contexts")
    policy = params.get("Policy")
    return AssumeRoleRequest(
        role_arn=params.get("RoleArn", ""),
        session_name=params.get("RoleSessionName", ""),
        tags=tags,
        session_policy=json.loads(policy) if policy else None,
    )


def authorize_assume_role(
    caller: Session | None, request: AssumeRoleRequest, roles: Mapping[str, RoleDefinition]
) -> str | None:
    """``None`` when AWS would let ``caller`` (``None``: the operator) assume
    the role with these tags, else the AccessDenied message."""
    principal = caller_arn(caller)
    role = next((role for role in roles.values() if role.arn == request.role_arn), None)
    if role is None:
        return denial_message(principal, "sts:AssumeRole", request.role_arn, None)
    context = assume_role_context(request.session_name, request.tags)
    if caller is not None:
        context.update(principal_context(caller))
        principals: tuple[str, ...] = (caller.role.arn, f"arn:aws:iam::{ACCOUNT_ID}:root", ACCOUNT_ID)
    else:
        principals = ("*",)
    actions = ["sts:AssumeRole"] + (["sts:TagSession"] if request.tags else [])
    for action in actions:
        question = iam.Request(action, role.arn, context, principals)
        trusted = iam.evaluate([role.trust_policy], question, trust=True)
        if trusted is not iam.Decision.ALLOW:
            return denial_message(principal, action, role.arn, trusted, trust=True)
        if caller is not None:
            permitted = caller.decide(question)
            if permitted is not iam.Decision.ALLOW:
                return denial_message(principal, action, role.arn, permitted)
    return None


def caller_arn(caller: Session | None) -> str:
    """Who STS names as the caller: the role session, or the account (the operator)."""
    return caller.arn if caller is not None else f"arn:aws:iam::{ACCOUNT_ID}:root"


def issued_credentials(body: bytes) -> Credentials | None:
    """The credentials in STS's answer to AssumeRole (``None``: it has none)."""
    issued = ET.fromstring(body).find(f".//{{{_NAMESPACE}}}Credentials")  # noqa: S314 - moto's own XML
    if issued is None:
        return None
    access_key, secret, token = (issued.findtext(f"{{{_NAMESPACE}}}{name}") for name in _ISSUED)
    if not access_key or not secret or not token:
        return None
    return Credentials(access_key, secret, token)


# ---------------------------------------------------------------- STS's answers
def assume_role_request(params: Mapping[str, str], caller: Session | None) -> AssumeRoleRequest | Answer:
    """The request, or STS's answer to one it refuses before authorization."""
    try:
        return parse_assume_role(params)
    except InvalidRequest as exc:
        log.warning("refused: %s", exc)
        return xml_error("ValidationError", str(exc), status="400 Bad Request", namespace=_NAMESPACE)
    except (iam.NotUnderstood, ValueError):
        return xml_denial(denial_message(caller_arn(caller), "sts:AssumeRole", params.get("RoleArn", "*"), None))


def xml_denial(message: str) -> Answer:
    return xml_error("AccessDenied", message, status="403 Forbidden", namespace=_NAMESPACE)
