"""The guard judges KMS calls as AWS would for TenantAccessRole's
``WebhookSecretsEncryptOnly``: the key from ``KeyId``, the encryption context
as ``kms:EncryptionContext:<key>`` and ``kms:EncryptionContextKeys``, and
``aws:SourceVpce`` only through the KMS endpoint's listener. Tenants 1 and 10:
the context must name the caller's own tenant exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.condition_keys import kms_context
from local_stack.iam.guard import SOURCE_VPCE_ENVIRON, Guard
from local_stack.iam.service_authorization import resource_of
from local_stack.iam.sessions import Session, Sessions
from local_stack.iam.sigv4 import Credentials
from local_stack.local_values import LOCAL_KMS_ENDPOINT_ID, LOCAL_VPC_ENDPOINT_ID, offline_values
from stack_model.roles import roles_from_template
from tests.signed import OPERATOR, signed_environ
from tests.unit.test_guard_policy import CLIENT_ID, IDENTITY_POOL_ID, USER_POOL_ID
from tests.unit.test_guard_wsgi import TABLES, Recorder

VALUES = offline_values(user_pool_id=USER_POOL_ID, client_id=CLIENT_ID, identity_pool_id=IDENTITY_POOL_ID)
ROLES = roles_from_template(VALUES)
KEY_ARN = str(VALUES.get_att("WebhookSecretsKey.Arn"))
OTHER_KEY_ARN = str(VALUES.get_att("OperationsKey.Arn"))
KEY_ID = KEY_ARN.rsplit("/", 1)[1]
TENANT_KEY = "ASIATENANTSESSION010"
TENANT = Credentials(TENANT_KEY, "tenant-secret", "tenant-session-token")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def guard(recorder: Recorder) -> Guard:
    sessions = Sessions(operator=OPERATOR)
    sessions.add(Session(TENANT_KEY, ROLES["TenantAccessRole"], "tenant-1", {"TenantId": "1"}), TENANT)
    return Guard(recorder, roles=ROLES, tables=TABLES, sessions=sessions)


def encrypt(
    guard: Guard,
    *,
    key: str = KEY_ARN,
    context: dict[str, Any] | None = None,
    source_vpce: str | None = LOCAL_KMS_ENDPOINT_ID,
    action: str = "Encrypt",
) -> tuple[str, dict[str, Any]]:
    """The guard's status and JSON answer for a KMS call signed by tenant 1's credentials."""
    body: dict[str, Any] = {"KeyId": key, "Plaintext": "c2VjcmV0"}
    if context is not None:
        body["EncryptionContext"] = context
    environ = signed_environ(TENANT, "kms", target=f"TrentService.{action}", body=json.dumps(body).encode())
    if source_vpce is not None:
        environ[SOURCE_VPCE_ENVIRON] = source_vpce
    status: list[str] = []
    answer = b"".join(guard(environ, lambda s, headers, exc_info=None: status.append(s)))
    return status[0], json.loads(answer)


OWN = {"tenant_id": "1", "webhook_id": "wh_1"}


def test_tenant_credentials_encrypt_under_their_own_tenants_context_through_the_kms_endpoint(
    guard: Guard, recorder: Recorder
) -> None:
    assert encrypt(guard, context=OWN)[0] == "200 OK"
    assert encrypt(guard, key=KEY_ID, context=OWN)[0] == "200 OK"  # a key id names the same key
    assert len(recorder.forwarded) == 2


@pytest.mark.parametrize(
    "context",
    [
        {"tenant_id": "10", "webhook_id": "wh_1"},  # another tenant: 10 is not 1
        {"tenant_id": "1 ", "webhook_id": "wh_1"},
        {"tenant_id": "TENANT#1", "webhook_id": "wh_1"},
        {"tenant_id": "1"},  # webhook_id missing (the Null condition)
        {"webhook_id": "wh_1"},
        {"tenant_id": "1", "webhook_id": "wh_1", "extra": "x"},  # only the two keys
        {"Tenant_Id": "1", "webhook_id": "wh_1"},  # context keys are case-sensitive values of EncryptionContextKeys
        {},
        None,
    ],
)
def test_any_other_context_is_denied(guard: Guard, recorder: Recorder, context: dict[str, Any] | None) -> None:
    status, answer = encrypt(guard, context=context)
    assert status.startswith("400"), answer
    assert answer["__type"] == "AccessDeniedException"
    assert "kms:Encrypt" in answer["message"]
    assert recorder.forwarded == []


@pytest.mark.parametrize(
    "source_vpce", [None, LOCAL_VPC_ENDPOINT_ID, "vpce-0123456789abcdef0", LOCAL_KMS_ENDPOINT_ID.upper()]
)
def test_only_through_the_kms_endpoint(guard: Guard, recorder: Recorder, source_vpce: str | None) -> None:
    # From outside the VPC, or through the DynamoDB endpoint's id, or anyone else's: denied.
    assert encrypt(guard, context=OWN, source_vpce=source_vpce)[0].startswith("400")
    assert recorder.forwarded == []


@pytest.mark.parametrize(
    ("action", "key"),
    [
        ("Decrypt", KEY_ARN),  # tenant credentials never decrypt
        ("GenerateDataKey", KEY_ARN),
        ("ReEncrypt", KEY_ARN),
        ("Encrypt", OTHER_KEY_ARN),  # another key of the account
        ("Encrypt", "alias/support-tickets-webhook-secrets"),  # an alias: the guard can't place it
        ("Encrypt", ""),
    ],
)
def test_nothing_else_on_kms(guard: Guard, recorder: Recorder, action: str, key: str) -> None:
    assert encrypt(guard, key=key, context=OWN, action=action)[0].startswith("400")
    assert recorder.forwarded == []


def test_kms_condition_keys_and_resources() -> None:
    assert kms_context({"EncryptionContext": OWN}) == {
        "kms:EncryptionContext:tenant_id": ["1"],
        "kms:EncryptionContext:webhook_id": ["wh_1"],
        "kms:EncryptionContextKeys": ["tenant_id", "webhook_id"],
    }
    assert kms_context({}) == {}
    assert kms_context({"EncryptionContext": {}}) == {}
    with pytest.raises(iam.NotUnderstood):
        kms_context({"EncryptionContext": {"tenant_id": 1}})
    assert resource_of("kms", "Encrypt", {"KeyId": KEY_ID}, region="us-east-1") == KEY_ARN
    assert resource_of("kms", "Encrypt", {"KeyId": KEY_ARN}, region="us-east-1") == KEY_ARN
    with pytest.raises(iam.NotUnderstood):
        resource_of("kms", "Encrypt", {"KeyId": KEY_ARN.replace("us-east-1", "eu-west-1")}, region="us-east-1")


# ---------------------------------------------------------------- the delivery function's role
DELIVERY_KEY = "ASIADELIVERYSESSION1"
DELIVERY = Credentials(DELIVERY_KEY, "delivery-secret", "delivery-session-token")


@pytest.fixture
def delivery_guard(recorder: Recorder) -> Guard:
    sessions = Sessions(operator=OPERATOR)
    sessions.add(Session(DELIVERY_KEY, ROLES["DeliverWebhookRole"], "DeliverWebhookFunction", {}), DELIVERY)
    return Guard(recorder, roles=ROLES, tables=TABLES, sessions=sessions)


def as_delivery_role(
    guard: Guard, action: str, *, key: str = KEY_ARN, context: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"KeyId": key, "CiphertextBlob": "Y2lwaGVydGV4dA=="}
    if context is not None:
        body["EncryptionContext"] = context
    environ = signed_environ(DELIVERY, "kms", target=f"TrentService.{action}", body=json.dumps(body).encode())
    status: list[str] = []
    answer = b"".join(guard(environ, lambda s, headers, exc_info=None: status.append(s)))
    return status[0], json.loads(answer) if answer else {}


@pytest.mark.parametrize("tenant", ["1", "10"])
def test_the_delivery_role_decrypts_under_a_tenant_and_webhook_context_from_outside_the_vpc(
    delivery_guard: Guard, recorder: Recorder, tenant: str
) -> None:
    context = {"tenant_id": tenant, "webhook_id": "wh_1"}
    assert as_delivery_role(delivery_guard, "Decrypt", context=context)[0] == "200 OK"
    assert len(recorder.forwarded) == 1


@pytest.mark.parametrize(
    ("action", "key", "context"),
    [
        ("Decrypt", KEY_ARN, None),  # no context: KMS binds one to every secret
        ("Decrypt", KEY_ARN, {"tenant_id": "1"}),
        ("Decrypt", KEY_ARN, {"tenant_id": "1", "webhook_id": "wh_1", "extra": "x"}),
        ("Decrypt", OTHER_KEY_ARN, OWN),  # the operations key
        ("Encrypt", KEY_ARN, OWN),  # it never makes a ciphertext
        ("GenerateDataKey", KEY_ARN, OWN),
    ],
)
def test_the_delivery_role_may_do_nothing_else_on_kms(
    delivery_guard: Guard, recorder: Recorder, action: str, key: str, context: dict[str, Any] | None
) -> None:
    status, answer = as_delivery_role(delivery_guard, action, key=key, context=context)
    assert status.startswith("400"), answer
    assert answer["__type"] == "AccessDeniedException"
    assert recorder.forwarded == []


# ---------------------------------------------------------------- the key policy's Deny
def test_the_key_policy_refuses_decrypt_to_any_other_role_whatever_its_policies_allow(recorder: Recorder) -> None:
    from dataclasses import replace

    from local_stack.local_values import key_policies

    # A role of the stack whose own policies would let it decrypt (an administrator's, a bug's)
    granting = {"Statement": [{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"}]}
    intruder = replace(ROLES["AuditTrailRole"], inline_policies={"AnyDecrypt": granting})
    sessions = Sessions(operator=OPERATOR)
    sessions.add(Session(DELIVERY_KEY, intruder, "AuditTrailFunction", {}), DELIVERY)
    context = {"tenant_id": "1", "webhook_id": "wh_1"}
    without_key_policy = Guard(recorder, roles=ROLES, tables=TABLES, sessions=sessions)
    assert as_delivery_role(without_key_policy, "Decrypt", context=context)[0] == "200 OK"  # IAM alone allows
    guarded = Guard(recorder, roles=ROLES, tables=TABLES, sessions=sessions, key_policies=key_policies(VALUES))
    status, answer = as_delivery_role(guarded, "Decrypt", context=context)
    assert status.startswith("400"), answer
    assert answer["__type"] == "AccessDeniedException"
    # The delivery role itself still decrypts under the key policy
    own = Sessions(operator=OPERATOR)
    own.add(Session(DELIVERY_KEY, ROLES["DeliverWebhookRole"], "DeliverWebhookFunction", {}), DELIVERY)
    delivering = Guard(recorder, roles=ROLES, tables=TABLES, sessions=own, key_policies=key_policies(VALUES))
    assert as_delivery_role(delivering, "Decrypt", context=context)[0] == "200 OK"
    # And tenant credentials still encrypt (the Deny names Decrypt only)
    tenants = Sessions(operator=OPERATOR)
    tenants.add(Session(TENANT_KEY, ROLES["TenantAccessRole"], "tenant-1", {"TenantId": "1"}), TENANT)
    encrypting = Guard(recorder, roles=ROLES, tables=TABLES, sessions=tenants, key_policies=key_policies(VALUES))
    assert encrypt(encrypting, context=OWN)[0] == "200 OK"
