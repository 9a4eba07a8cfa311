"""A call to a service other than DynamoDB, turned into the one question
the guard asks IAM for it: the IAM action (:func:`iam_action`: SQS's batch
actions are authorized as their single-message actions), the resource the call
names (:func:`resource_of`) and the request's condition keys (a KMS call's
encryption context among them, :mod:`local_stack.iam.condition_keys`).

A call whose resource the guard can't name is :class:`iam.NotUnderstood`,
and refused: judged on ``*``, a Deny naming the resource would not apply.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.condition_keys import kms_context, request_context
from local_stack.iam.sessions import Session
from stack_model.template import ACCOUNT_ID

# SQS's batch actions have no IAM action of their own: each is authorized as its
# single-message action (SQS Developer Guide, "Amazon SQS batch actions").
SQS_BATCH_PERMISSIONS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
_KEY_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def iam_action(service: str, action: str) -> str:
    """The action IAM authorizes an API action as (without the service prefix)."""
    return SQS_BATCH_PERMISSIONS.get(action, action) if service == "sqs" else action


def resource_of(service: str, action: str, params: Mapping[str, Any], *, region: str) -> str:
    """The resource IAM authorizes a (non-DynamoDB) call on, for the services
    the stack's roles use: an SQS queue by its URL or name, a Cognito user pool
    by its id, a KMS key by its id or key ARN. Anything else is
    :class:`iam.NotUnderstood` (the guard denies it): evaluated against ``*``,
    a Deny naming a resource would not apply."""
    if service == "sqs":
        url, name = params.get("QueueUrl"), params.get("QueueName")
        if isinstance(url, str) and url:
            parts = urllib.parse.urlsplit(url).path.strip("/").split("/")
            if len(parts) == 2 and all(parts):  # /<account>/<queue>
                return f"arn:aws:sqs:{region}:{parts[0]}:{parts[1]}"
        elif isinstance(name, str) and name:
            return f"arn:aws:sqs:{region}:{ACCOUNT_ID}:{name}"
        elif action == "ListQueues":
            return "*"
        raise iam.NotUnderstood(f"sqs:{action} without a queue")
    if service == "cognito-idp":
        pool = params.get("UserPoolId")
        if isinstance(pool, str) and pool:
            return f"arn:aws:cognito-idp:{region}:{ACCOUNT_ID}:userpool/{pool}"
        raise iam.NotUnderstood(f"cognito-idp:{action} without a user pool")
    if service == "kms":
        key = params.get("KeyId")
        if isinstance(key, str) and key.startswith(f"arn:aws:kms:{region}:") and ":key/" in key:
            return key
        if isinstance(key, str) and _KEY_ID.fullmatch(key):
            return f"arn:aws:kms:{region}:{ACCOUNT_ID}:key/{key}"
        # An alias (KMS authorizes the key it names, which the guard does not
        # look up) or a call without a key.
        raise iam.NotUnderstood(f"kms:{action} without a key id or key ARN")
    raise iam.NotUnderstood(f"resources of {service}")


def service_question(
    session: Session, service: str, action: str, params: Mapping[str, Any], *, region: str, source_vpce: str | None
) -> iam.Request:
    """The question ``session``'s call asks (``action`` as :func:`iam_action`
    names it); ``source_vpce``: the VPC endpoint it came through, if any."""
    resource = resource_of(service, action, params, region=region)
    service_context = kms_context(params) if service == "kms" else {}
    return iam.Request(f"{service}:{action}", resource, request_context(session, source_vpce, service_context))
