"""A table's customer managed key, as DynamoDB uses it for each data request.

moto's DynamoDB never touches the KMS key a table is encrypted with. DynamoDB
does, for the caller: "When you access an encrypted DynamoDB table, DynamoDB
needs to decrypt the table key ... DynamoDB sends a Decrypt request to AWS KMS
that specifies the KMS key for the table"; in CloudTrail, "the user is the
principal in your AWS account who is accessing the table", ``invokedBy``
``dynamodb.amazonaws.com``, with the encryption context
``aws:dynamodb:tableName`` and ``aws:dynamodb:subscriberId``; the key policy
admits it through ``kms:ViaService`` (DynamoDB Developer Guide, "DynamoDB
encryption at rest usage notes": "Using KMS keys and data keys", "DynamoDB
encryption context", "Monitoring DynamoDB interaction with AWS KMS"). So, for
each table a data request (:data:`DATA_OPERATIONS`) reads or writes whose key
the guard knows (:data:`TableKeyOf`, read from moto when asked):

- a role session's ``kms:Decrypt`` on the key is judged as KMS judges it
  (:func:`key_use_decision`), with the condition keys of DynamoDB's call for it
  (:func:`local_stack.iam.condition_keys.kms_via_dynamodb_context`); a refusal is
  DynamoDB's ``AccessDeniedException``, "KMS key access denied error: ...".
  The operator's requests are not judged (the guard's rule for the operator);
- whoever calls, a key that is disabled or pending deletion fails the request:
  ``ValidationException`` "KMS key disabled error: ...DisabledException: <key
  ARN> is disabled." or "KMS validation error: ...KMSInvalidStateException:
  <key ARN> is pending deletion." (DynamoDB's API reference says only "Table
  operations may fail due to failure to use the KMS key", TableDescription's
  ``INACCESSIBLE_ENCRYPTION_CREDENTIALS``; the codes and wording are DynamoDB's
  as measured against AWS: the ack-api-quirks lab's DynamoDB findings
  DDB-TABLE-331, -333 and -139, third-party, and aws/aws-cdk#18616 for the
  access denied one).

What this does not model (docs/local-stack.md): DynamoDB caches the table key
per connection and asks KMS again after five minutes ("Table key caching";
measured: GetItem kept working 5.5 minutes after DisableKey), here every
request asks; DescribeTable never shows ``INACCESSIBLE_ENCRYPTION_CREDENTIALS``
(AWS shows it 13 to 75 minutes later); reading the table's stream is not
refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.condition_keys import kms_via_dynamodb_context, request_context
from local_stack.iam.dynamodb_authorization import TableKeys, dynamodb_requests, tag_owner
from local_stack.iam.sessions import Session
from stack_model.template import ACCOUNT_ID

# The requests that read or write a table's items (the control plane, tags and
# descriptions keep working with an unusable key, as measured in AWS).
DATA_OPERATIONS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)
_NAMESPACE = "com.amazonaws.dynamodb.v20120810#"


@dataclass(frozen=True)
class TableKey:
    """A table's KMS key and its KMS ``KeyState`` when asked."""

    arn: str
    state: str


# The key a table ARN is encrypted with now (None: DynamoDB's own key). The
# emulator reads moto's table and key; tests give a mapping.
TableKeyOf = Callable[[str], TableKey | None]


@dataclass(frozen=True)
class KeyRefusal:
    """DynamoDB's error for a request whose table key it could not use."""

    code: str
    message: str


def tables_of(operation: str, body: Mapping[str, Any], *, region: str, tables: Mapping[str, TableKeys]) -> list[str]:
    """The ARNs of the tables a data request reads or writes (an index's is
    its table's); none for any other request, or one the guard can't read."""
    if operation not in DATA_OPERATIONS:
        return []
    try:
        questions = dynamodb_requests(operation, body, region=region, tables=tables)
    except iam.NotUnderstood:
        return []
    return list(dict.fromkeys(owner for q in questions if (owner := tag_owner(q.resource)) is not None))


def key_use_decision(policy: Mapping[str, Any], session: Session, request: iam.Request) -> iam.Decision:
    """KMS's answer to ``session`` using a key: allowed when the key policy
    allows its principal, or allows the account and the session's IAM
    policies allow it; denied by any Deny ("No AWS principal ... has any
    permissions to a KMS key unless they are explicitly allowed, and never
    denied, in a key policy, IAM policy, or grant. Unless the key policy
    explicitly allows it, you cannot use IAM policies to allow access to a KMS
    key": KMS Developer Guide, "Key policies in AWS KMS"). Grants are not
    modelled: DynamoDB's are its own, not the caller's."""
    principal = iam.Request(request.action, request.resource, request.context, (session.role.arn, session.arn))
    direct = iam.evaluate([policy], principal, trust=True)
    identity = session.decide(request)
    if iam.Decision.EXPLICIT_DENY in (direct, identity):
        return iam.Decision.EXPLICIT_DENY
    account = iam.Request(request.action, request.resource, request.context, (f"arn:aws:iam::{ACCOUNT_ID}:root",))
    delegated = identity is iam.Decision.ALLOW and iam.evaluate([policy], account, trust=True) is iam.Decision.ALLOW
    return iam.Decision.ALLOW if direct is iam.Decision.ALLOW or delegated else iam.Decision.IMPLICIT_DENY


def table_key_refusal(
    session: Session | None,
    table_arns: Iterable[str],
    *,
    region: str,
    table_key: TableKeyOf,
    key_policies: Mapping[str, Mapping[str, Any]],
) -> KeyRefusal | None:
    """``None`` when DynamoDB could use the key of each table (``session``:
    the caller, ``None`` for the operator), else its error."""
    for table in table_arns:
        key = table_key(table)
        if key is None:
            continue
        policy = key_policies.get(key.arn)
        if session is not None and policy is not None:
            context = kms_via_dynamodb_context(region, table.rsplit("/", 1)[-1])
            request = iam.Request("kms:Decrypt", key.arn, request_context(session, None, context))
            decision = key_use_decision(policy, session, request)
            if decision is not iam.Decision.ALLOW:
                reason = (
                    "with an explicit deny in a resource-based policy"
                    if decision is iam.Decision.EXPLICIT_DENY
                    else "because no resource-based policy allows the kms:Decrypt action"
                )
                denied = (
                    f"User: {session.arn} is not authorized to perform: kms:Decrypt on resource: {key.arn} {reason}"
                )
                return KeyRefusal(
                    f"{_NAMESPACE}AccessDeniedException",
                    _kms_error("key access denied", "AWSKMSException", "AccessDeniedException", denied),
                )
        if key.state == "Disabled":
            text = _kms_error("key disabled", "DisabledException", "DisabledException", f"{key.arn} is disabled.")
            return KeyRefusal(f"{_NAMESPACE}ValidationException", text)
        if key.state != "Enabled":
            state = "pending deletion" if key.state == "PendingDeletion" else f"in state {key.state}"
            text = _kms_error(
                "validation", "KMSInvalidStateException", "KMSInvalidStateException", f"{key.arn} is {state}."
            )
            return KeyRefusal(f"{_NAMESPACE}ValidationException", text)
    return None


def _kms_error(kind: str, exception: str, code: str, message: str) -> str:
    """DynamoDB's wording of the KMS error it met (the Java SDK's)."""
    return (
        f"KMS {kind} error: com.amazonaws.services.kms.model.{exception}: {message} (Service: AWSKMS; "
        f"Status Code: 400; Error Code: {code}; Request ID: {uuid.uuid4()}; Proxy: null)"
    )
