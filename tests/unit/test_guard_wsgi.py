"""The guard as moto's server sees it: whole WSGI requests, signed by
botocore, a recording application behind it. Who signed a request is the key
whose secret verifies its signature, and moto must read the same key from it;
non-DynamoDB calls are judged on their real resource, managed policies count."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlencode

import pytest
from moto.core.responses import BaseResponse
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.dynamodb_authorization import TableKeys
from local_stack.iam.guard import Guard
from local_stack.iam.sessions import Session, Sessions, signer_of
from local_stack.iam.sigv4 import Credentials
from stack_model import managed_policies
from stack_model.roles import RoleDefinition
from tests.signed import OPERATOR, signed_environ
from tests.unit.test_guard_policy import AGGREGATOR_ROLE, QUEUE_ARN, ROLES, TENANT_ROLE

TABLES = {"SupportTicket": TableKeys("SupportTicket", "pk", {"GSI1": "tenant_status"})}
TENANT_KEY = "ASIATENANTSESSION001"
AGGREGATOR_KEY = "ASIAAGGREGATOR000001"
TENANT = Credentials(TENANT_KEY, "tenant-secret", "tenant-session-token")
AGGREGATOR = Credentials(AGGREGATOR_KEY, "aggregator-secret", "aggregator-session-token")
QUEUE_URL = "http://127.0.0.1:5000/123456789012/AggregateCountsFailureQueue"


def authorization(access_key: str, service: str = "dynamodb", *, tail: str = "") -> str:
    return (
        f"AWS4-HMAC-SHA256 Credential={access_key}/20261121/us-east-1/{service}/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature=0123abcd{tail}"
    )


class Recorder:
    """moto's place: records what the guard forwards, answers 200."""

    def __init__(self) -> None:
        self.forwarded: list[dict[str, Any]] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        self.forwarded.append(environ)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]


def call(
    guard: Guard,
    *,
    signed_by: Credentials | None,
    service: str = "dynamodb",
    target: str = "",
    body: bytes = b"",
    form: bool = False,
    header: str | None = None,
) -> str:
    """The guard's status for a request signed by ``signed_by`` (``header``:
    that ``Authorization`` header instead of the signer's)."""
    environ = signed_environ(
        signed_by,
        service,
        target=target,
        body=body,
        content_type="application/x-www-form-urlencoded" if form else None,
    )
    if header is not None:
        environ["HTTP_AUTHORIZATION"] = header
    status: list[str] = []
    b"".join(guard(environ, lambda s, headers, exc_info=None: status.append(s)))
    return status[0]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def guard(recorder: Recorder) -> Guard:
    sessions = Sessions(operator=OPERATOR)
    sessions.add(Session(TENANT_KEY, TENANT_ROLE, "tenant-acme", {"TenantId": "acme"}), TENANT)
    sessions.add(Session(AGGREGATOR_KEY, AGGREGATOR_ROLE, "aggregator"), AGGREGATOR)
    return Guard(recorder, roles=ROLES, tables=TABLES, sessions=sessions)


SCAN = json.dumps({"TableName": "SupportTicket"}).encode()


# ---------------------------------------------------------------- who signed
def test_the_guard_and_moto_attribute_a_signed_request_to_the_same_key(guard: Guard, recorder: Recorder) -> None:
    environ = signed_environ(TENANT, target="DynamoDB_20120810.Scan", body=SCAN)
    moto = BaseResponse()
    moto.headers = {"Authorization": environ["HTTP_AUTHORIZATION"]}
    moto.querystring = {}
    assert moto.get_access_key() == TENANT_KEY
    # So the tenant session's Scan is judged as the session's, and refused.
    assert call(guard, signed_by=TENANT, target="DynamoDB_20120810.Scan", body=SCAN).startswith("400")
    assert recorder.forwarded == []


@pytest.mark.parametrize(
    "header",
    [
        # The operator's key first, the session's later in the header: moto
        # attributes the request to the last 20-character key it finds.
        pytest.param(authorization("LOCALOPERATOR", tail=f", Credential={TENANT_KEY}/x"), id="two-credentials"),
        pytest.param(authorization("AKIAOPERATOR00000001", tail=f" {TENANT_KEY}:"), id="key-in-signature"),
    ],
)
def test_a_header_naming_two_keys_is_refused(guard: Guard, recorder: Recorder, header: str) -> None:
    # Not SigV4's three parts: AWS could not read it, and moto would act for another key.
    assert call(guard, signed_by=OPERATOR, header=header, target="DynamoDB_20120810.Scan", body=SCAN).startswith("400")
    assert recorder.forwarded == []


@pytest.mark.parametrize(
    ("header", "service"),
    [
        (authorization(TENANT_KEY), "dynamodb"),
        (authorization(TENANT_KEY, "sqs"), "sqs"),
        (authorization("LOCALOPERATOR", "STS"), "sts"),
        (
            authorization("LOCALOPERATOR", "cognito-idp", tail=", Credential=x/1/eu-west-1/sqs/aws4_request"),
            "cognito-idp",
        ),
    ],
)
def test_region_and_service_are_the_ones_moto_dispatches_by(header: str, service: str) -> None:
    signer = signer_of(header)
    assert signer is not None
    assert (signer.region, signer.service) == ("us-east-1", service)
    environ = {"HTTP_AUTHORIZATION": header, "HTTP_X_AMZ_TARGET": "DynamoDB_20120810.GetItem", "PATH_INFO": "/"}
    host = DomainDispatcherApplication(create_backend_app).infer_service_region_host(environ, "/")
    assert host is not None
    assert host.split(".")[0] == service


@pytest.mark.parametrize("header", ["AWS4-HMAC-SHA256", "Bearer x", "AWS4-HMAC-SHA256 Credential=a/b/c"])
def test_a_scope_moto_cannot_dispatch_by_is_refused(guard: Guard, recorder: Recorder, header: str) -> None:
    assert signer_of(header) is None
    status = call(guard, signed_by=OPERATOR, header=header, target="DynamoDB_20120810.Scan", body=SCAN)
    assert status.startswith("400")
    assert recorder.forwarded == []


def test_the_operators_key_is_one_moto_does_not_recognise(guard: Guard, recorder: Recorder) -> None:
    # 13 characters: moto acts as its default account; the guard, as the operator (its secret verified).
    signer = signer_of(authorization("LOCALOPERATOR"))
    assert signer is not None
    assert signer.access_key is None
    assert call(guard, signed_by=OPERATOR, target="DynamoDB_20120810.Scan", body=SCAN) == "200 OK"
    # Any other key is no one's, whatever its length.
    for stranger in ("AKIAHOSTCREDENTIALS1", "local"):
        status = call(guard, signed_by=Credentials(stranger, "x"), target="DynamoDB_20120810.Scan", body=SCAN)
        assert status.startswith("400")
    assert len(recorder.forwarded) == 1


# ---------------------------------------------------------------- real resources
def send_message(queue_url: str) -> bytes:
    return json.dumps({"QueueUrl": queue_url, "MessageBody": "{}"}).encode()


def test_the_aggregator_sends_to_its_on_failure_queue(guard: Guard, recorder: Recorder) -> None:
    # Allowed in AWS: the role's sqs:SendMessage names this queue's ARN.
    assert QUEUE_ARN.endswith(":AggregateCountsFailureQueue")
    status = call(
        guard, signed_by=AGGREGATOR, service="sqs", target="AmazonSQS.SendMessage", body=send_message(QUEUE_URL)
    )
    assert status == "200 OK"
    query = urlencode({"Action": "SendMessage", "QueueUrl": QUEUE_URL, "MessageBody": "{}"}).encode()
    assert call(guard, signed_by=AGGREGATOR, service="sqs", body=query, form=True) == "200 OK"
    assert len(recorder.forwarded) == 2


@pytest.mark.parametrize(
    ("target", "body"),
    [
        ("AmazonSQS.SendMessage", send_message("http://127.0.0.1:5000/123456789012/AnotherQueue")),
        ("AmazonSQS.SendMessage", send_message("http://127.0.0.1:5000/999999999999/AggregateCountsFailureQueue")),
        ("AmazonSQS.ReceiveMessage", json.dumps({"QueueUrl": QUEUE_URL}).encode()),
        ("AmazonSQS.DeleteQueue", json.dumps({"QueueUrl": QUEUE_URL}).encode()),
        ("AmazonSQS.SendMessage", json.dumps({"MessageBody": "{}"}).encode()),
        ("AmazonSQS.ListQueues", b"{}"),
    ],
)
def test_nothing_else_on_sqs(guard: Guard, recorder: Recorder, target: str, body: bytes) -> None:
    assert call(guard, signed_by=AGGREGATOR, service="sqs", target=target, body=body).startswith("400")
    assert recorder.forwarded == []


@pytest.mark.parametrize(
    ("service", "target", "body"),
    [
        ("cognito-idp", "AWSCognitoIdentityProviderService.AdminCreateUser", {"UserPoolId": "us-east-1_x"}),
        ("cognito-idp", "AWSCognitoIdentityProviderService.ListUserPools", {}),
        ("logs", "Logs_20140328.PutLogEvents", {"logGroupName": "g", "logStreamName": "s"}),
        ("kms", "TrentService.Decrypt", {}),
    ],
)
def test_services_the_guard_cannot_place_are_refused_to_sessions(
    guard: Guard, recorder: Recorder, service: str, target: str, body: dict[str, Any]
) -> None:
    # AWSLambdaBasicExecutionRole grants logs:* on "*"; the guard still can't
    # name the log group's ARN, so it does not pretend to know.
    status = call(guard, signed_by=AGGREGATOR, service=service, target=target, body=json.dumps(body).encode())
    assert status.startswith("400")
    assert recorder.forwarded == []


# ---------------------------------------------------------------- managed policies
def test_managed_policies_are_part_of_a_roles_permissions() -> None:
    # The aggregator role's AWSLambdaBasicExecutionRole lets it write logs, as in AWS.
    logs = iam.Request("logs:PutLogEvents", "arn:aws:logs:us-east-1:123456789012:log-group:g:log-stream:s")
    assert AGGREGATOR_ROLE.managed_policy_arns
    assert iam.evaluate(AGGREGATOR_ROLE.policies(), logs) is iam.Decision.ALLOW
    assert iam.evaluate(TENANT_ROLE.policies(), logs) is iam.Decision.IMPLICIT_DENY


def test_a_managed_policy_without_a_known_document_is_refused() -> None:
    trust: dict[str, Any] = {"Version": "2012-10-17", "Statement": []}
    with pytest.raises(managed_policies.UnknownManagedPolicy):
        RoleDefinition("R", "R", trust, managed_policy_arns=("arn:aws:iam::123456789012:policy/Mine",))
    with pytest.raises(managed_policies.UnknownManagedPolicy):
        RoleDefinition("R", "R", trust, managed_policy_arns=("arn:aws:iam::aws:policy/NoSuchPolicy",))
    with pytest.raises(managed_policies.UnknownManagedPolicy):
        # The right name under the wrong path is another policy.
        RoleDefinition("R", "R", trust, managed_policy_arns=("arn:aws:iam::aws:policy/AWSLambdaBasicExecutionRole",))
