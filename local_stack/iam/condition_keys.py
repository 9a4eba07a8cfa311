"""The condition keys a request carries into the guard's evaluation, each
computed here from where AWS takes its value; :mod:`local_stack.iam.policy_evaluation`
evaluates them. A key no function here sets is absent from every request, so
a policy that tests it fails closed (the guard's limits, docs/local-stack.md).

- The principal's (:func:`principal_context`): ``aws:PrincipalTag/<key>`` for
  each tag of the role session, ``aws:PrincipalArn`` (the role's ARN) and
  ``aws:PrincipalAccount``.
- The network's (:func:`network_context`): ``aws:SourceVpce``, the id of the VPC
  endpoint the request came through (the emulator's endpoint listener tells
  the guard); absent from anywhere else.
- The resource's (:func:`resource_context`): ``aws:ResourceTag/<key>`` for each
  tag of the resource a question names, as DynamoDB's ABAC gives it: a table's
  own tags, an index's table's (indexes inherit them), a stream's own (streams
  do not inherit the table's); none for ``*``
  (:func:`local_stack.iam.dynamodb_authorization.tag_owner` says whose, the emulator
  reads them from moto's table at each request).
- DynamoDB's (:func:`dynamodb_context`): ``dynamodb:LeadingKeys`` and
  ``dynamodb:Attributes`` of one of a request's questions, which
  :mod:`local_stack.iam.dynamodb_authorization` reads from its body.
- KMS's (:func:`kms_context`): ``kms:EncryptionContext:<key>`` for each pair of a
  cryptographic call's encryption context, and ``kms:EncryptionContextKeys``.
- DynamoDB's call to KMS for a table's key (:func:`kms_via_dynamodb_context`):
  ``kms:ViaService``, ``kms:CallerAccount`` and DynamoDB's encryption context.
- STS ``AssumeRole``'s (:func:`assume_role_context`): ``aws:RequestTag/<key>``,
  ``aws:TagKeys`` and ``sts:RoleSessionName``.

:func:`request_context` puts a role session's request together: its
principal's and its network's keys, then its service's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.sessions import Session
from stack_model.template import ACCOUNT_ID

Context = dict[str, Sequence[str]]


def principal_context(session: Session) -> Context:
    """The role session's keys (its tags are what ``${aws:PrincipalTag/...}`` reads)."""
    context: Context = {f"aws:PrincipalTag/{key}": [value] for key, value in session.tags.items()}
    context["aws:PrincipalArn"] = [session.role.arn]
    context["aws:PrincipalAccount"] = [ACCOUNT_ID]
    return context


def network_context(source_vpce: str | None) -> Context:
    """``aws:SourceVpce`` when the request came through a VPC endpoint."""
    return {} if source_vpce is None else {"aws:SourceVpce": [source_vpce]}


def resource_context(tags: Mapping[str, str] | None) -> Context:
    """``aws:ResourceTag/<key>`` for each of the resource's tags (``None`` or
    none: no such key, so a condition on one fails closed). Keys are kept as
    the resource spells them; how a policy's key matches them (case aside, and
    two tags differing in case only) is :meth:`local_stack.iam.policy_evaluation.Request.values`."""
    return {f"aws:ResourceTag/{key}": [value] for key, value in (tags or {}).items()}


def dynamodb_context(leading_keys: Sequence[str] | None, attributes: Sequence[str] | None) -> Context:
    """A question's keys; ``None``: the action has no such key (a Scan has no
    leading keys, a DescribeTable names no attribute)."""
    context: Context = {}
    if leading_keys is not None:
        context["dynamodb:LeadingKeys"] = leading_keys
    if attributes is not None:
        context["dynamodb:Attributes"] = attributes
    return context


def kms_context(params: Mapping[str, Any]) -> Context:
    """The KMS keys of a cryptographic call: ``kms:EncryptionContext:<key>``
    for each pair of its encryption context, and ``kms:EncryptionContextKeys``
    (multivalued; absent when the call has no context, as in KMS)."""
    context = params.get("EncryptionContext")
    if context is None:
        return {}
    if not isinstance(context, dict) or not all(isinstance(v, str) for v in context.values()):
        raise iam.NotUnderstood("an encryption context that is not a map of strings")
    found: Context = {f"kms:EncryptionContext:{key}": [value] for key, value in context.items()}
    if context:
        found["kms:EncryptionContextKeys"] = list(context)
    return found


def kms_via_dynamodb_context(region: str, table_name: str) -> Context:
    """The KMS keys of the ``Decrypt`` DynamoDB asks for a caller using a
    table's key: ``kms:ViaService`` (DynamoDB in the region), ``kms:CallerAccount``
    and the encryption context DynamoDB uses in all its KMS calls,
    ``aws:dynamodb:tableName`` and ``aws:dynamodb:subscriberId`` (DynamoDB
    Developer Guide, "DynamoDB encryption context"; the caller's own keys are
    :func:`request_context`'s, without ``aws:SourceVpce``: DynamoDB calls KMS)."""
    encryption = {"aws:dynamodb:tableName": table_name, "aws:dynamodb:subscriberId": ACCOUNT_ID}
    via: Context = {"kms:ViaService": [f"dynamodb.{region}.amazonaws.com"], "kms:CallerAccount": [ACCOUNT_ID]}
    return {**via, **kms_context({"EncryptionContext": encryption})}


def assume_role_context(session_name: str, tags: Mapping[str, str]) -> Context:
    """The keys of an ``AssumeRole`` call: the tags it passes, and the session's name."""
    context: Context = {f"aws:RequestTag/{key}": [value] for key, value in tags.items()}
    context["sts:RoleSessionName"] = [session_name]
    if tags:
        context["aws:TagKeys"] = list(tags)
    return context


def request_context(session: Session, source_vpce: str | None, *service_keys: Context) -> Context:
    """A role session's request: its principal's keys, its network's, then
    those of its service (``service_keys``, e.g. :func:`dynamodb_context`)."""
    context = {**principal_context(session), **network_context(source_vpce)}
    for keys in service_keys:
        context.update(keys)
    return context
