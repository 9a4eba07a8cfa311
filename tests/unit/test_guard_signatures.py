"""The guard verifies each request's SigV4 signature against the secret the
emulator issued for its key (local_stack.iam.sigv4): requests signed by botocore,
in the Authorization header or presigned, then changed the ways a forger
would; each refusal parsed by botocore as a boto3 client would see it."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import botocore.session
import pytest
from botocore.parsers import create_parser

from local_stack.iam import sigv4
from local_stack.iam.dynamodb_authorization import TableKeys
from local_stack.iam.guard import SOURCE_VPCE_ENVIRON, Guard
from local_stack.iam.sessions import Session, Sessions
from local_stack.iam.sigv4 import Credentials
from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID
from tests.signed import OPERATOR, signed_environ
from tests.unit.test_guard_policy import AGGREGATOR_ROLE, ROLES, TENANT_ROLE

TABLES = {"SupportTicket": TableKeys("SupportTicket", "pk", {"GSI1": "tenant_status"})}
TENANT = Credentials("ASIATENANTSESSION001", "tenant-secret", "tenant-session-token")
AGGREGATOR = Credentials("ASIAAGGREGATOR000001", "aggregator-secret", "aggregator-session-token")
GET_ITEM = "DynamoDB_20120810.GetItem"
OWN_ITEM = json.dumps(
    {"TableName": "SupportTicket", "Key": {"pk": {"S": "TENANT#acme|TICKET#1"}, "sk": {"S": "SUMMARY"}}}
).encode()
QUEUE_URL = "http://127.0.0.1:4566/123456789012/AggregateCountsFailureQueue"
ROLE_SECRET = "role-secret"
ASSUME_ROLE_ANSWER = f"""<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleResult><Credentials><AccessKeyId>ASIAEXECUTIONROLE001</AccessKeyId>
<SecretAccessKey>{ROLE_SECRET}</SecretAccessKey><SessionToken>role-token</SessionToken>
<Expiration>2030-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleResult></AssumeRoleResponse>""".encode()


class Moto:
    """moto's place: records what the guard forwards; answers AssumeRole as moto's STS does."""

    def __init__(self) -> None:
        self.forwarded: list[dict[str, Any]] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        self.forwarded.append(environ)
        body = environ["wsgi.input"].read()
        if b"Action=AssumeRole" in body:
            start_response("200 OK", [("Content-Type", "text/xml")])
            return [ASSUME_ROLE_ANSWER]
        start_response("200 OK", [("Content-Type", "application/x-amz-json-1.0")])
        return [b"{}"]


@pytest.fixture
def moto() -> Moto:
    return Moto()


@pytest.fixture
def guard(moto: Moto) -> Guard:
    sessions = Sessions(operator=OPERATOR)
    sessions.add(Session(TENANT.access_key_id, TENANT_ROLE, "tenant-acme", {"TenantId": "acme"}), TENANT)
    sessions.add(Session(AGGREGATOR.access_key_id, AGGREGATOR_ROLE, "aggregator"), AGGREGATOR)
    return Guard(moto, roles=ROLES, tables=TABLES, sessions=sessions)


def answer(guard: Guard, environ: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    started: list[tuple[str, list[tuple[str, str]]]] = []
    body = b"".join(guard(environ, lambda status, headers, exc_info=None: started.append((status, headers))))
    status, headers = started[0]
    return int(status.split()[0]), dict(headers), body


def as_boto3_sees_it(service: str, operation: str, environ: dict[str, Any], guard: Guard) -> dict[str, Any]:
    """The guard's answer parsed by botocore's parser for the service's protocol."""
    status, headers, body = answer(guard, environ)
    model = botocore.session.get_session().get_service_model(service)
    response = {
        "status_code": status,
        "headers": {name.lower(): value for name, value in headers.items()},
        "body": body,
    }
    shape = model.operation_model(operation).output_shape
    assert shape is not None
    parsed: dict[str, Any] = create_parser(model.protocol).parse(response, shape)
    return {"status": status, **parsed.get("Error", {})}


def tenant_get_item(**changes: Any) -> dict[str, Any]:
    """A tenant's GetItem of its own item, through the gateway endpoint (as the functions call)."""
    environ = signed_environ(TENANT, target=GET_ITEM, body=OWN_ITEM, **changes)
    environ[SOURCE_VPCE_ENVIRON] = LOCAL_VPC_ENDPOINT_ID
    return environ


# ---------------------------------------------------------------- what verifies
def test_requests_signed_with_the_issued_secrets_pass(guard: Guard, moto: Moto) -> None:
    # A tenant session and the operator, one after the other (one client may
    # sign each request with other credentials), then a presigned STS call.
    assert answer(guard, tenant_get_item())[0] == 200
    operator_scan = signed_environ(OPERATOR, target="DynamoDB_20120810.Scan", body=b'{"TableName":"SupportTicket"}')
    assert answer(guard, operator_scan)[0] == 200
    assert answer(guard, tenant_get_item())[0] == 200
    presigned = signed_environ(
        AGGREGATOR, "sts", method="GET", query="Action=GetCallerIdentity&Version=2011-06-15", presign_seconds=60
    )
    assert "X-Amz-Signature=" in presigned["QUERY_STRING"]
    assert "HTTP_AUTHORIZATION" not in presigned
    assert answer(guard, presigned)[0] == 200
    assert len(moto.forwarded) == 4
    # moto dispatches and attributes a presigned request by the Authorization header the guard writes.
    assert moto.forwarded[-1]["HTTP_AUTHORIZATION"].startswith(
        f"AWS4-HMAC-SHA256 Credential={AGGREGATOR.access_key_id}/"
    )


def test_the_path_as_sent_an_unsigned_header_and_a_chunked_body(guard: Guard, moto: Moto) -> None:
    # API Gateway's REST paths percent-encode ids: the signature covers them as sent.
    encoded = signed_environ(OPERATOR, "apigateway", method="GET", path="/usageplans/a%3Ab%20c/keys")
    assert encoded["PATH_INFO"] == "/usageplans/a:b c/keys"
    assert answer(guard, encoded)[0] == 200
    # A header the client did not sign may change on the way (a proxy's User-Agent).
    unsigned_header = tenant_get_item()
    unsigned_header["HTTP_USER_AGENT"] = "something else"
    assert answer(guard, unsigned_header)[0] == 200
    # A chunked body (no Content-Length; werkzeug marks the input terminated) is read to its end.
    chunked = tenant_get_item()
    del chunked["CONTENT_LENGTH"]
    chunked["wsgi.input_terminated"] = True
    assert answer(guard, chunked)[0] == 200
    assert len(moto.forwarded) == 3


def test_an_execution_roles_assumed_credentials_are_verified(guard: Guard) -> None:
    # The operator assumes a role (as the stack does for each function); the
    # secret moto's STS issued is the one its requests must be signed with.
    assume = urlencode(
        {"Action": "AssumeRole", "Version": "2011-06-15", "RoleArn": AGGREGATOR_ROLE.arn, "RoleSessionName": "fn"}
    ).encode()
    form = "application/x-www-form-urlencoded"
    assert answer(guard, signed_environ(OPERATOR, "sts", body=assume, content_type=form))[0] == 200
    role = Credentials("ASIAEXECUTIONROLE001", ROLE_SECRET, "role-token")
    count = json.dumps({"TableName": "SupportTicket", "Key": {"pk": {"S": "TENANT#acme|AGGREGATE"}}}).encode()
    assert answer(guard, signed_environ(role, target=GET_ITEM, body=count))[0] == 200
    junk = Credentials(role.access_key_id, "junk", role.session_token)
    refused = as_boto3_sees_it("dynamodb", "GetItem", signed_environ(junk, target=GET_ITEM, body=count), guard)
    assert (refused["status"], refused["Code"]) == (400, "InvalidSignatureException")


# ---------------------------------------------------------------- DynamoDB's answers
def tampered_body() -> dict[str, Any]:
    environ = tenant_get_item()
    other = OWN_ITEM.replace(b"TICKET#1", b"TICKET#2")
    environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(other), str(len(other))
    return environ


def tampered_header() -> dict[str, Any]:
    environ = tenant_get_item()
    environ["HTTP_X_AMZ_TARGET"] = "DynamoDB_20120810.DeleteItem"  # signed: x-amz-target
    return environ


def other_host() -> dict[str, Any]:
    environ = tenant_get_item()
    environ["HTTP_HOST"] = "127.0.0.1:4567"  # signed with its port
    return environ


def other_path() -> dict[str, Any]:
    environ = tenant_get_item()
    environ["RAW_URI"] = environ["PATH_INFO"] = "/other"
    return environ


def other_query() -> dict[str, Any]:
    environ = tenant_get_item()
    environ["QUERY_STRING"] = "x=1"
    return environ


def without_token() -> dict[str, Any]:
    environ = tenant_get_item()
    del environ["HTTP_X_AMZ_SECURITY_TOKEN"]
    return environ


SIGNATURE_MISMATCH = "The request signature we calculated does not match the signature you provided."
INVALID_TOKEN = "The security token included in the request is invalid."


def now() -> datetime:
    """The guard's clock is the wall clock: read at each test (the module is
    imported minutes before some of its tests run under xdist)."""
    return datetime.now(UTC)


@pytest.mark.parametrize(
    ("environ", "code", "message"),
    [
        pytest.param(
            lambda: signed_environ(Credentials(TENANT.access_key_id, "junk", TENANT.session_token), target=GET_ITEM),
            "InvalidSignatureException",
            SIGNATURE_MISMATCH,
            id="wrong-secret",
        ),
        pytest.param(tampered_body, "InvalidSignatureException", SIGNATURE_MISMATCH, id="tampered-body"),
        pytest.param(tampered_header, "InvalidSignatureException", SIGNATURE_MISMATCH, id="tampered-signed-header"),
        pytest.param(other_host, "InvalidSignatureException", SIGNATURE_MISMATCH, id="other-host"),
        pytest.param(other_path, "InvalidSignatureException", SIGNATURE_MISMATCH, id="other-path"),
        pytest.param(other_query, "InvalidSignatureException", SIGNATURE_MISMATCH, id="other-query"),
        pytest.param(
            lambda: signed_environ(
                Credentials(TENANT.access_key_id, TENANT.secret_access_key, "stolen"), target=GET_ITEM
            ),
            "UnrecognizedClientException",
            INVALID_TOKEN,
            id="wrong-session-token",
        ),
        pytest.param(without_token, "UnrecognizedClientException", INVALID_TOKEN, id="no-session-token"),
        pytest.param(
            lambda: signed_environ(
                Credentials(AGGREGATOR.access_key_id, AGGREGATOR.secret_access_key, TENANT.session_token),
                target=GET_ITEM,
            ),
            "UnrecognizedClientException",
            INVALID_TOKEN,
            id="another-sessions-token",
        ),
        pytest.param(
            lambda: signed_environ(
                Credentials(OPERATOR.access_key_id, OPERATOR.secret_access_key, "x"), target=GET_ITEM
            ),
            "UnrecognizedClientException",
            INVALID_TOKEN,
            id="a-token-with-the-operators-key",
        ),
        pytest.param(
            lambda: signed_environ(Credentials("ASIAUNKNOWNKEY000001", "x", "y"), target=GET_ITEM),
            "UnrecognizedClientException",
            INVALID_TOKEN,
            id="unknown-key",
        ),
        pytest.param(
            lambda: tenant_get_item(when=now() - timedelta(minutes=16)),
            "InvalidSignatureException",
            "Signature expired: ",
            id="expired",
        ),
        pytest.param(
            lambda: tenant_get_item(when=now() + timedelta(minutes=16)),
            "InvalidSignatureException",
            "Signature not yet current: ",
            id="from-the-future",
        ),
        pytest.param(
            lambda: {**tenant_get_item(), "HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=x"},
            "IncompleteSignatureException",
            "",
            id="not-sigv4s-three-parts",
        ),
    ],
)
def test_dynamodb_refuses_as_dynamodb_does(
    guard: Guard, moto: Moto, environ: Callable[[], dict[str, Any]], code: str, message: str
) -> None:
    refused = as_boto3_sees_it("dynamodb", "GetItem", environ(), guard)
    assert (refused["status"], refused["Code"]) == (400, code)
    assert refused["Message"].startswith(message)
    assert moto.forwarded == []


def test_dynamodb_allows_fifteen_minutes_of_clock_skew(guard: Guard) -> None:
    # "... (20240805T063417Z - 15 min.)": DynamoDB's own answer (and STS's); other services allow five.
    assert answer(guard, tenant_get_item(when=now() - timedelta(minutes=14)))[0] == 200
    refused = as_boto3_sees_it("dynamodb", "GetItem", tenant_get_item(when=now() - timedelta(minutes=16)), guard)
    assert refused["Message"].endswith(" - 15 min.)")
    sqs = json.dumps({"QueueUrl": QUEUE_URL, "MessageBody": "{}"}).encode()
    late = signed_environ(
        AGGREGATOR, "sqs", target="AmazonSQS.SendMessage", body=sqs, when=now() - timedelta(minutes=6)
    )
    refused = as_boto3_sees_it("sqs", "SendMessage", late, guard)
    assert refused["Code"] == "SignatureDoesNotMatch"
    assert refused["Message"].endswith(" - 5 min.)")


# ---------------------------------------------------------------- STS and SQS answers
def sts_call(credentials: Credentials, **changes: Any) -> dict[str, Any]:
    body = b"Action=GetCallerIdentity&Version=2011-06-15"
    return signed_environ(credentials, "sts", body=body, content_type="application/x-www-form-urlencoded", **changes)


def sqs_call(credentials: Credentials, **changes: Any) -> dict[str, Any]:
    body = json.dumps({"QueueUrl": QUEUE_URL, "MessageBody": "{}"}).encode()
    return signed_environ(credentials, "sqs", target="AmazonSQS.SendMessage", body=body, **changes)


@pytest.mark.parametrize(
    ("service", "operation", "call"),
    [("sts", "GetCallerIdentity", sts_call), ("sqs", "SendMessage", sqs_call)],
)
def test_query_protocol_services_refuse_with_their_codes(
    guard: Guard, moto: Moto, service: str, operation: str, call: Callable[..., dict[str, Any]]
) -> None:
    assert answer(guard, call(AGGREGATOR))[0] == 200
    cases = {
        "SignatureDoesNotMatch": call(Credentials(AGGREGATOR.access_key_id, "junk", AGGREGATOR.session_token)),
        "InvalidClientTokenId": call(Credentials("ASIAUNKNOWNKEY000001", "x", "y")),
    }
    for code, environ in cases.items():
        refused = as_boto3_sees_it(service, operation, environ, guard)
        assert (refused["status"], refused["Code"]) == (403, code)
    wrong_token = call(Credentials(AGGREGATOR.access_key_id, AGGREGATOR.secret_access_key, "other"))
    assert as_boto3_sees_it(service, operation, wrong_token, guard)["Code"] == "InvalidClientTokenId"
    expired = as_boto3_sees_it(service, operation, call(AGGREGATOR, when=now() - timedelta(minutes=20)), guard)
    assert (expired["Code"], expired["Message"][:18]) == ("SignatureDoesNotMatch", "Signature expired:")
    assert len(moto.forwarded) == 1


def test_an_sqs_batch_action_is_authorized_as_its_single_message_action(guard: Guard, moto: Moto) -> None:
    # The aggregator's role may sqs:SendMessage to its queue, and nothing else of SQS.
    send = json.dumps({"QueueUrl": QUEUE_URL, "Entries": [{"Id": "1", "MessageBody": "{}"}]}).encode()
    assert answer(guard, signed_environ(AGGREGATOR, "sqs", target="AmazonSQS.SendMessageBatch", body=send))[0] == 200
    delete = json.dumps({"QueueUrl": QUEUE_URL, "Entries": [{"Id": "1", "ReceiptHandle": "r"}]}).encode()
    environ = signed_environ(AGGREGATOR, "sqs", target="AmazonSQS.DeleteMessageBatch", body=delete)
    refused = as_boto3_sees_it("sqs", "DeleteMessageBatch", environ, guard)
    assert refused["status"] == 400
    assert "sqs:DeleteMessage on" in refused["Message"]
    assert len(moto.forwarded) == 1


# ---------------------------------------------------------------- presigned
def presigned_caller_identity(credentials: Credentials, **changes: Any) -> dict[str, Any]:
    query = "Action=GetCallerIdentity&Version=2011-06-15"
    return signed_environ(credentials, "sts", method="GET", query=query, presign_seconds=60, **changes)


def test_presigned_requests_are_verified(guard: Guard, moto: Moto) -> None:
    junk = presigned_caller_identity(Credentials(AGGREGATOR.access_key_id, "junk", AGGREGATOR.session_token))
    assert as_boto3_sees_it("sts", "GetCallerIdentity", junk, guard)["Code"] == "SignatureDoesNotMatch"
    unknown = presigned_caller_identity(Credentials("ASIAUNKNOWNKEY000001", "x", "y"))
    assert as_boto3_sees_it("sts", "GetCallerIdentity", unknown, guard)["Code"] == "InvalidClientTokenId"
    other_action = presigned_caller_identity(AGGREGATOR)
    other_action["QUERY_STRING"] = other_action["QUERY_STRING"].replace("GetCallerIdentity", "GetSessionToken")
    assert as_boto3_sees_it("sts", "GetCallerIdentity", other_action, guard)["Code"] == "SignatureDoesNotMatch"
    past = presigned_caller_identity(AGGREGATOR, when=now() - timedelta(minutes=2))  # X-Amz-Expires=60
    expired = as_boto3_sees_it("sts", "GetCallerIdentity", past, guard)
    assert (expired["Code"], expired["Message"][:18]) == ("SignatureDoesNotMatch", "Signature expired:")
    both = presigned_caller_identity(AGGREGATOR)
    both["HTTP_AUTHORIZATION"] = sts_call(AGGREGATOR)["HTTP_AUTHORIZATION"]
    assert as_boto3_sees_it("sts", "GetCallerIdentity", both, guard)["Code"] == "IncompleteSignature"
    assert moto.forwarded == []


# ---------------------------------------------------------------- unsigned, and the cost
def test_public_cognito_calls_stay_unsigned_but_a_signature_on_them_is_checked(guard: Guard, moto: Moto) -> None:
    target = "AWSCognitoIdentityProviderService.InitiateAuth"
    body = json.dumps({"AuthFlow": "USER_PASSWORD_AUTH", "ClientId": "c"}).encode()
    json11 = "application/x-amz-json-1.1"
    assert answer(guard, signed_environ(None, target=target, body=body, content_type=json11))[0] == 200
    junk = signed_environ(Credentials(OPERATOR.access_key_id, "junk"), "cognito-idp", target=target, body=body)
    refused = as_boto3_sees_it("cognito-idp", "InitiateAuth", junk, guard)
    assert (refused["status"], refused["Code"]) == (400, "InvalidSignatureException")
    assert len(moto.forwarded) == 1


def test_signing_keys_are_derived_once_per_secret_day_region_and_service(guard: Guard) -> None:
    sigv4._signing_key.cache_clear()
    for _ in range(5):
        assert answer(guard, tenant_get_item())[0] == 200
    cached = sigv4._signing_key.cache_info()
    assert (cached.misses, cached.hits) == (1, 4)
