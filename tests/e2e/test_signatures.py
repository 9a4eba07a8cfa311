"""The running local stack verifies every AWS request's SigV4 signature
against the secrets it issued: a real access key id signed with a junk
secret, a session token that is not the key's, or a key the emulator never
issued is refused as AWS refuses it, for tenant credentials (the identity
pool's), an execution role's (STS AssumeRole), and the operator's."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from local_stack.lambda_.runtime import LambdaContext, environment
from local_stack.running_stack import ENV_FILE
from stack_model.events import rest_event, with_token
from stack_model.functions import function_specs, load_handler
from stack_model.roles import function_role
from support_tickets.core.identity import TenantCredentials
from support_tickets.core.settings import get_settings
from support_tickets.data.session import tenant_clients
from tests.e2e.conftest import RunningStack, new_tenant_id
from tests.e2e.test_isolation import exchange, role_credentials

NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})


def client(stack: RunningStack, service: str, credentials: dict[str, str], *, in_vpc: bool = False) -> Any:
    endpoint = stack.state["vpc_endpoint_url"] if in_vpc else stack.state["emulator_url"]
    return boto3.client(  # type: ignore[call-overload]
        service, region_name=stack.state["region"], endpoint_url=endpoint, config=NO_RETRIES, **credentials
    )


def refused(call: Callable[[], Any]) -> tuple[int, str, str]:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    return error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"], error["Error"]["Message"]


def with_secret(credentials: dict[str, str], secret: str) -> dict[str, str]:
    return {**credentials, "aws_secret_access_key": secret}


def with_token_of(credentials: dict[str, str], token: str) -> dict[str, str]:
    return {**credentials, "aws_session_token": token}


SIGNATURE_MISMATCH = "The request signature we calculated does not match the signature you provided."
INVALID_TOKEN = "The security token included in the request is invalid."
UNKNOWN = {"aws_access_key_id": "ASIAQQQQQQQQQQQQQQQQ", "aws_secret_access_key": "x", "aws_session_token": "y"}


def test_tenant_credentials_with_a_junk_secret_read_nothing(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    token = stack.token(tenant, f"u-{tenant}")
    stack.request("POST", "/tickets", token=token, body={"title": "the user's own"})
    real = exchange(stack, token)
    table = stack.state["table_name"]
    query: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": f"TENANT#{tenant}|TICKET#x"}},
    }
    # Control: the real secret reads (through the gateway endpoint, as the functions call).
    assert client(stack, "dynamodb", real, in_vpc=True).query(**query)["Count"] == 0
    junk = client(stack, "dynamodb", with_secret(real, "junk-secret"), in_vpc=True)
    assert refused(lambda: junk.query(**query)) == (
        400,
        "InvalidSignatureException",
        SIGNATURE_MISMATCH
        + (" Check your AWS Secret Access Key and signing method. Consult the service documentation for details."),
    )
    other_token = client(stack, "dynamodb", with_token_of(real, "another-token"), in_vpc=True)
    assert refused(lambda: other_token.query(**query)) == (400, "UnrecognizedClientException", INVALID_TOKEN)
    stranger = client(stack, "dynamodb", UNKNOWN, in_vpc=True)
    assert refused(lambda: stranger.query(**query)) == (400, "UnrecognizedClientException", INVALID_TOKEN)


def test_an_execution_roles_key_with_a_junk_secret_is_refused_by_dynamodb_sts_and_sqs(stack: RunningStack) -> None:
    role = role_credentials(stack, function_role("AggregateCountsFunction"))
    junk = with_secret(role, "junk-secret")
    count = {"pk": {"S": f"TENANT#{new_tenant_id()}|AGGREGATE"}, "sk": {"S": "AGGREGATE"}}
    table = stack.state["table_name"]
    queue = stack.state["failure_queue_url"]
    # Control: the role's own secret works.
    assert "Item" not in client(stack, "dynamodb", role).get_item(TableName=table, Key=count)
    assert client(stack, "sts", role).get_caller_identity()["Arn"].endswith("/test-AggregateCountsRole")
    assert client(stack, "sqs", role).send_message(QueueUrl=queue, MessageBody="{}")["MessageId"]
    # A junk secret: each service's own answer.
    dynamodb = client(stack, "dynamodb", junk)
    assert refused(lambda: dynamodb.get_item(TableName=table, Key=count))[:2] == (400, "InvalidSignatureException")
    sts = client(stack, "sts", junk)
    assert refused(sts.get_caller_identity)[:2] == (403, "SignatureDoesNotMatch")
    sqs = client(stack, "sqs", junk)
    assert refused(lambda: sqs.send_message(QueueUrl=queue, MessageBody="{}"))[:2] == (403, "SignatureDoesNotMatch")
    # A key the emulator never issued.
    assert refused(client(stack, "sts", UNKNOWN).get_caller_identity)[:2] == (403, "InvalidClientTokenId")
    unknown_sqs = client(stack, "sqs", UNKNOWN)
    assert refused(lambda: unknown_sqs.send_message(QueueUrl=queue, MessageBody="{}"))[:2] == (
        403,
        "InvalidClientTokenId",
    )


def test_the_operator_is_one_key_and_its_secret(stack: RunningStack) -> None:
    operator = {
        "aws_access_key_id": stack.state["operator_access_key_id"],
        "aws_secret_access_key": stack.state["operator_secret_access_key"],
    }
    assert client(stack, "sts", operator).get_caller_identity()["Account"]
    pool = stack.state["user_pool_id"]
    cognito = client(stack, "cognito-idp", with_secret(operator, "junk-secret"))
    assert refused(lambda: cognito.list_users(UserPoolId=pool))[:2] == (400, "InvalidSignatureException")
    # Host credentials (what `aws` would sign with) are nobody's here.
    host = {"aws_access_key_id": "AKIAHOSTCREDENTIALS1", "aws_secret_access_key": "x"}
    assert refused(client(stack, "dynamodb", host).list_tables)[:2] == (400, "UnrecognizedClientException")


def test_a_presigned_url_is_verified(stack: RunningStack) -> None:
    role = role_credentials(stack, function_role("AggregateCountsFunction"))
    url = client(stack, "sts", role).generate_presigned_url("get_caller_identity", ExpiresIn=60, HttpMethod="GET")
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - the local emulator
        assert b"assumed-role/AggregateCountsRole/test-AggregateCountsRole" in response.read()
    forged = client(stack, "sts", with_secret(role, "junk")).generate_presigned_url(
        "get_caller_identity", ExpiresIn=60, HttpMethod="GET"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(forged, timeout=30)  # noqa: S310 - the local emulator
    assert caught.value.code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in caught.value.read()


def forged_admin_token(token: str) -> str:
    """The user's token with ``admin`` added to its groups and a junk signature:
    the functions read the token's claims (the authorizer verified it), so only
    the credentials stand between such a context and the tenant's data."""
    header, payload, _ = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["cognito:groups"] = ["admin"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{'A' * 342}"


def test_a_forged_context_with_a_real_key_id_borrows_nothing_from_a_warm_container(stack: RunningStack) -> None:
    # One warm DeleteTicketFunction: the victim's own request (refused: not an
    # admin) runs first with its real credentials; then a direct invocation names
    # the victim's access key id with a junk secret and token, as an admin.
    tenant = new_tenant_id()
    token = stack.token(tenant, f"u-{tenant}")
    ticket = stack.request("POST", "/tickets", token=token, body={"title": "the user's secret"}).body
    real = exchange(stack, token)
    genuine = TenantCredentials(
        real["aws_access_key_id"], real["aws_secret_access_key"], real["aws_session_token"], int(time.time()) + 3600
    )
    forged = TenantCredentials(real["aws_access_key_id"], "junk-secret", "junk-token", int(time.time()) + 3600)
    spec = function_specs()["DeleteTicketFunction"]
    variables = json.loads((stack.state_dir / ENV_FILE).read_text())["DeleteTicketFunction"]
    role = role_credentials(stack, function_role("DeleteTicketFunction"))
    own = {
        "AWS_ACCESS_KEY_ID": role["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": role["aws_secret_access_key"],
        "AWS_SESSION_TOKEN": role["aws_session_token"],
    }
    path = {"ticket_id": ticket["ticket_id"]}
    with environment({**variables, **own, "AWS_REGION": "us-east-1", "POWERTOOLS_METRICS_DISABLED": "true"}):
        get_settings.cache_clear()
        tenant_clients.cache_clear()
        try:
            handler = load_handler(spec.code_uri, spec.handler, module_name="_warm_delete_ticket")
            context = LambdaContext(function_name=spec.logical_id)
            as_victim = with_token(rest_event("DELETE", "/tickets/{ticket_id}", path_parameters=path), token, genuine)
            assert handler(as_victim, context)["statusCode"] == 403  # a member may not delete
            forged_token = forged_admin_token(token)
            as_forger = with_token(
                rest_event("DELETE", "/tickets/{ticket_id}", path_parameters=path), forged_token, forged
            )
            response = handler(as_forger, context)
        finally:
            get_settings.cache_clear()
            tenant_clients.cache_clear()
    assert response["statusCode"] == 401, response
    # Nothing deleted: the ticket is still the user's, unchanged
    kept = stack.request("GET", f"/tickets/{ticket['ticket_id']}/summary", token=token)
    assert (kept.status, kept.body) == (200, ticket)


def test_a_function_given_a_forged_context_with_a_real_key_and_a_junk_secret_gets_no_data(
    stack: RunningStack,
) -> None:
    # A caller who can invoke a function directly writes the authorizer's
    # context: the user's real token and access key id, a secret of his own.
    tenant = new_tenant_id()
    token = stack.token(tenant, f"u-{tenant}")
    assert stack.request("POST", "/tickets", token=token, body={"title": "the user's secret"}).status == 201
    real = exchange(stack, token)
    forged = TenantCredentials(
        real["aws_access_key_id"], "junk-secret", real["aws_session_token"], int(time.time()) + 3600
    )
    spec = function_specs()["ListTicketsFunction"]
    variables = json.loads((stack.state_dir / ENV_FILE).read_text())["ListTicketsFunction"]
    operator = {
        "AWS_ACCESS_KEY_ID": stack.state["operator_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": stack.state["operator_secret_access_key"],
    }
    event = with_token(rest_event("GET", "/tickets"), token, forged)
    with environment({**variables, **operator, "AWS_REGION": "us-east-1", "POWERTOOLS_METRICS_DISABLED": "true"}):
        get_settings.cache_clear()
        try:
            response = load_handler(spec.code_uri, spec.handler)(event, LambdaContext(function_name=spec.logical_id))
        finally:
            get_settings.cache_clear()
    assert response["statusCode"] == 401, response
    assert "the user's secret" not in response["body"]
    # The real credentials in the same context read the ticket (the refusal was the secret's).
    listed = stack.request("GET", "/tickets", token=token)
    assert [item["title"] for item in listed.body["items"]] == ["the user's secret"]
