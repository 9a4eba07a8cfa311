"""Isolation below the handlers: with real tenant credentials from the local
stack's identity pool (the caller's own token exchanged, tagged with its
tenant), the IAM guard refuses every key outside the token's tenant, exactly
as DynamoDB would, even when a handler is broken, and nobody (the functions'
role, the operator) can obtain tenant credentials any other way."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from local_stack.lambda_.runtime import LambdaContext
from ops.routes import SUBJECT_SEPARATOR, by_name, route_names
from ops.sample_events import delivery_item, sample_delivery_id
from ops.users import UserPool, id_token
from stack_model.events import rest_event, with_token
from stack_model.functions import load_handler
from stack_model.roles import function_role
from stack_model.template import role_arn
from support_tickets.core.identity import TenantCredentials
from support_tickets.core.settings import get_settings
from support_tickets.data.session import tenant_clients
from tests.e2e.conftest import BACKGROUND_PK_MARKS, RunningStack, delete_webhooks, new_tenant_id
from tests.e2e.test_gateway import MOTOS_BUNDLED_KEY, claims_of, sign

BROKEN_HANDLER = Path(__file__).parent / "broken_handler"
DATA_ROUTES = route_names()  # every route of the template (ops/routes.py)

# (caller, victim) tenant ids, built from a random base: "1" vs "10" and "a" vs "a-b" in both directions.
PAIRS = [
    pytest.param(lambda base: (base, base + "0"), id="1-vs-10"),
    pytest.param(lambda base: (base + "0", base), id="10-vs-1"),
    pytest.param(lambda base: (base, base + "-b"), id="a-vs-a-b"),
    pytest.param(lambda base: (base + "-b", base), id="a-b-vs-a"),
]


# A token and its exchanged credentials are good for an hour: the tests of this module
# reuse them for half that (making them is most of a case's set-up).
REUSE_SECONDS = 1800
_tokens: dict[tuple[str, str, str, bool], tuple[float, str]] = {}
_exchanged: dict[str, tuple[float, dict[str, str]]] = {}


def token_of(stack: RunningStack, tenant: str, user: str, *, admin: bool = False) -> str:
    """``stack.token``, made once per half hour for each user of this module's tenants."""
    key = (str(stack.state_dir), tenant, user, admin)
    made = _tokens.get(key)
    if made is None or time.monotonic() - made[0] > REUSE_SECONDS:
        made = _tokens[key] = (time.monotonic(), stack.token(tenant, user, admin=admin))
    return made[1]


def exchanged(stack: RunningStack, token: str) -> dict[str, str]:
    """``exchange``, made once per half hour for each token."""
    made = _exchanged.get(token)
    if made is None or time.monotonic() - made[0] > REUSE_SECONDS:
        made = _exchanged[token] = (time.monotonic(), exchange(stack, token))
    return made[1]


def table_state(stack: RunningStack) -> dict[str, Any]:
    """The whole table's fingerprint but the metering's items (every other item's
    every attribute, hashed in the emulator), once the usage lines were delivered
    and the stream functions have caught up (their items move). The usage counters
    move with every request, refused ones included (the metering's own isolation:
    tests/e2e/test_metering_role.py, tests/unit/test_guard_policy.py), and the
    webhook deliveries with the delivery function's retries (BACKGROUND_PK_MARKS;
    the deliveries routes' tests compare their seeded delivery item themselves)."""
    assert stack.drain_logs()["drained"]
    assert stack.drain()["drained"]
    return stack.table_fingerprint(skip_pk_containing=BACKGROUND_PK_MARKS)


def role_credentials(stack: RunningStack, role: str, **tags: str) -> dict[str, str]:
    """Credentials of a template role, as Lambda (here: the operator) gets them."""
    kwargs: dict[str, Any] = {"RoleArn": role_arn(role), "RoleSessionName": f"test-{role}"}
    if tags:
        kwargs["Tags"] = [{"Key": key, "Value": value} for key, value in tags.items()]
    credentials = stack.operator("sts").assume_role(**kwargs)["Credentials"]
    return {
        "aws_access_key_id": credentials["AccessKeyId"],
        "aws_secret_access_key": credentials["SecretAccessKey"],
        "aws_session_token": credentials["SessionToken"],
    }


def client_with(stack: RunningStack, service: str, credentials: dict[str, str], *, in_vpc: bool = False) -> Any:
    """A client signing with ``credentials``; ``in_vpc``: through the stack's
    DynamoDB gateway endpoint, as the API functions call, else from outside."""
    endpoint = stack.state["vpc_endpoint_url"] if in_vpc else stack.state["emulator_url"]
    return boto3.client(service, region_name=stack.state["region"], endpoint_url=endpoint, **credentials)  # type: ignore[call-overload]


def identity_pool(stack: RunningStack) -> Any:
    """A client of the local identity pool, as the layer (and any app) calls it:
    GetId and GetCredentialsForIdentity are unsigned."""
    return boto3.client(
        "cognito-identity",
        region_name=stack.state["region"],
        endpoint_url=stack.state["emulator_url"],
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )


def exchange(stack: RunningStack, token: str) -> dict[str, str]:
    """The credentials the identity pool gives this token, as boto3 arguments."""
    pool = identity_pool(stack)
    logins = {stack.state["user_pool_provider_name"]: token}
    identity = pool.get_id(IdentityPoolId=stack.state["identity_pool_id"], Logins=logins)["IdentityId"]
    credentials = pool.get_credentials_for_identity(IdentityId=identity, Logins=logins)["Credentials"]
    return {
        "aws_access_key_id": credentials["AccessKeyId"],
        "aws_secret_access_key": credentials["SecretKey"],
        "aws_session_token": credentials["SessionToken"],
    }


def tenant_client(stack: RunningStack, tenant_id: str) -> Any:
    """A DynamoDB client on TenantAccessRole credentials, obtained the way the
    authorizer gets them (a token of a user of the tenant, exchanged) and used
    the way the functions use them (through the stack's gateway endpoint)."""
    credentials = exchange(stack, stack.token(tenant_id, f"u-{tenant_id}"))
    return client_with(stack, "dynamodb", credentials, in_vpc=True)


def assert_denied(call: Callable[[], Any]) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    assert error["Error"]["Code"] == "AccessDeniedException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "is not authorized to perform: dynamodb:" in error["Error"]["Message"]
    return caught.value


# ---------------------------------------------------------------- broken handlers
@pytest.fixture
def broken_handler(stack: RunningStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., dict[str, Any]]]:
    """The broken test functions, run in-process like the stack runs functions:
    ApiFunctionRole's credentials, the template's environment, the emulator,
    and a request bearing the caller's real token of the local pool."""
    credentials = role_credentials(stack, function_role("CreateTicketFunction"))
    for name, value in {
        "AWS_ACCESS_KEY_ID": credentials["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": credentials["aws_secret_access_key"],
        "AWS_SESSION_TOKEN": credentials["aws_session_token"],
        # In the stack's VPC, like every API function: DynamoDB through the gateway endpoint.
        "AWS_ENDPOINT_OVERRIDE": stack.state["vpc_endpoint_url"],
        "TABLE_NAME": stack.state["table_name"],
        "USER_POOL_PROVIDER_NAME": stack.state["user_pool_provider_name"],
        "ALLOWED_CLIENT_IDS": stack.state["user_pool_client_id"],
        "POWERTOOLS_METRICS_DISABLED": "true",
        # The webhook routes encrypt with the stack's key, through the same listener (its KMS endpoint).
        "WEBHOOK_KEY_ARN": webhook_key_arn(stack),
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    tenant_clients.cache_clear()
    handler = load_handler(BROKEN_HANDLER, "app.lambda_handler")

    def invoke(caller_tenant: str, body: dict[str, Any], path: str = "/leak") -> dict[str, Any]:
        token = token_of(stack, caller_tenant, f"u-{caller_tenant}")
        credentials = exchanged(stack, token)  # what the authorizer passes for the token
        tenant_credentials = TenantCredentials(
            credentials["aws_access_key_id"],
            credentials["aws_secret_access_key"],
            credentials["aws_session_token"],
            int(time.time()) + 3600,
        )
        event = with_token(rest_event("POST", path, body=json.dumps(body)), token, tenant_credentials)
        response: dict[str, Any] = handler(event, LambdaContext(function_name="BrokenFunction"))
        return response

    yield invoke
    get_settings.cache_clear()
    tenant_clients.cache_clear()


def webhook_key_arn(stack: RunningStack) -> str:
    """The ARN of the stack's WebhookSecretsKey in the emulator (found by its description)."""
    kms = stack.operator("kms")
    for key in kms.list_keys()["Keys"]:
        metadata = kms.describe_key(KeyId=key["KeyId"])["KeyMetadata"]
        if "webhook signing secrets" in metadata.get("Description", ""):
            return str(metadata["Arn"])
    raise AssertionError("the emulator has no webhook secrets key")


def subject(stack: RunningStack, route: str, tenant: str, title: str) -> tuple[str, str]:
    """What ``route`` is about, created in ``tenant`` through the API: a webhook
    for a route whose path names one, else a ticket; its id and its secret text
    (a title, or the webhook's signing secret)."""
    if by_name()[route].takes_webhook:
        token = token_of(stack, tenant, f"root-{tenant}", admin=True)
        created = stack.request("POST", "/webhooks", token=token, body=by_name()["webhook_create"].body(""))
        assert created.status == 201, created.body
        webhook_id = str(created.body["webhook_id"])
        if by_name()[route].takes_delivery:
            # A delivery of it (the delivery function makes them; seeded here by the operator)
            stack.operator("dynamodb").put_item(
                TableName=stack.state["table_name"], Item=delivery_item(tenant, webhook_id)
            )
            return f"{webhook_id}{SUBJECT_SEPARATOR}{sample_delivery_id(webhook_id)}", str(created.body["secret"])
        return webhook_id, str(created.body["secret"])
    ticket = stack.request("POST", "/tickets", token=token_of(stack, tenant, f"u-{tenant}"), body={"title": title}).body
    return str(ticket["ticket_id"]), title


def seeded_delivery(stack: RunningStack, route: str, tenant: str, subject_id: str) -> dict[str, Any] | None:
    """The delivery a deliveries route's subject names, as stored (``None`` for other
    routes): seeded by the operator with no message on the queue, nothing but a route
    changes it, so it is compared whole where the fingerprint leaves deliveries out."""
    if not by_name()[route].takes_delivery:
        return None
    webhook_id, delivery_id = subject_id.split(SUBJECT_SEPARATOR)
    key = {"pk": delivery_item(tenant, webhook_id)["pk"], "sk": delivery_item(tenant, webhook_id)["sk"]}
    assert delivery_id == sample_delivery_id(webhook_id)
    item: dict[str, Any] = stack.operator("dynamodb").get_item(TableName=stack.state["table_name"], Key=key)["Item"]
    return item


def refused_with_nothing_leaked(response: dict[str, Any], *secrets: str) -> None:
    assert response["statusCode"] == 403, response
    assert json.loads(response["body"])["error"]["code"] == "FORBIDDEN"
    for secret in secrets:
        assert secret not in response["body"]


@pytest.mark.parametrize("pair", PAIRS)
def test_a_handler_building_another_tenants_keys_is_stopped_by_the_guard(
    stack: RunningStack, broken_handler: Callable[..., dict[str, Any]], pair: Callable[[str], tuple[str, str]]
) -> None:
    caller, victim = pair(new_tenant_id())
    victim_token = stack.token(victim, f"u-{victim}")
    secret = stack.request("POST", "/tickets", token=victim_token, body={"title": "victim's secret"}).body
    # Control: with the caller's own tenant in the body the broken handler works,
    # so the refusals below come from the guard, not from a handler that can't run.
    own = broken_handler(caller, {"tenant_id": caller})
    assert own["statusCode"] == 200, own
    own_id = stack.request("GET", "/tickets", token=stack.token(caller, f"u-{caller}")).body["items"][0]["ticket_id"]
    assert broken_handler(caller, {"tenant_id": caller, "ticket_id": own_id})["statusCode"] == 200
    before = table_state(stack)

    # When: it reads and writes the victim's tickets with the caller's credentials
    read = broken_handler(caller, {"tenant_id": victim, "ticket_id": secret["ticket_id"]})
    write = broken_handler(caller, {"tenant_id": victim})

    # Then: DynamoDB's AccessDenied surfaces as an error; nothing leaked, nothing written
    refused_with_nothing_leaked(read, "victim's secret")
    refused_with_nothing_leaked(write)
    assert table_state(stack) == before


@dataclass(frozen=True)
class Tenants:
    """A caller and its victim, the victim's token and a ticket of the victim's."""

    caller: str
    victim: str
    victim_token: str
    secret: dict[str, Any]


@pytest.fixture(scope="module")
def tenants_of_pairs(stack: RunningStack) -> Callable[[Callable[[str], tuple[str, str]]], Tenants]:
    """The tenants of each pair, made on first use and shared by the module's route cases
    (each case makes subjects of its own and finds the table as it left it: the route's
    refusal changes nothing)."""
    made: dict[Callable[[str], tuple[str, str]], Tenants] = {}

    def of(pair: Callable[[str], tuple[str, str]]) -> Tenants:
        if pair not in made:
            caller, victim = pair(new_tenant_id())
            victim_token = token_of(stack, victim, f"u-{victim}")
            secret = stack.request("POST", "/tickets", token=victim_token, body={"title": "victim's secret"}).body
            made[pair] = Tenants(caller, victim, victim_token, secret)
        return made[pair]

    return of


@pytest.mark.parametrize("route", DATA_ROUTES)
@pytest.mark.parametrize("pair", PAIRS[:2])
def test_a_handler_acting_for_another_tenant_id_is_stopped_by_the_guard(
    stack: RunningStack,
    broken_handler: Callable[..., dict[str, Any]],
    tenants_of_pairs: Callable[[Callable[[str], tuple[str, str]]], Tenants],
    pair: Callable[[str], tuple[str, str]],
    route: str,
) -> None:
    # The bug the old design let through: the wrong tenant id for everything,
    # credentials included. Now the credentials are the caller's token's.
    tenants = tenants_of_pairs(pair)
    caller, victim, victim_token, secret = tenants.caller, tenants.victim, tenants.victim_token, tenants.secret
    # The victim's webhook too, for the routes whose path names a webhook.
    theirs, their_secret = subject(stack, route, victim, "victim's secret")
    mine, _ = subject(stack, route, caller, "mine")
    # Control: with its own tenant the same handler runs the route
    control = broken_handler(caller, {"tenant_id": caller, "route": route, "ticket_id": mine}, "/impersonate")
    assert control["statusCode"] == by_name()[route].needs.success, control
    before, their_delivery = table_state(stack), seeded_delivery(stack, route, victim, theirs)

    response = broken_handler(caller, {"tenant_id": victim, "route": route, "ticket_id": theirs}, "/impersonate")

    refused_with_nothing_leaked(response, "victim's secret", secret["ticket_id"], theirs, their_secret)
    assert table_state(stack) == before
    assert seeded_delivery(stack, route, victim, theirs) == their_delivery
    assert stack.request("GET", f"/tickets/{secret['ticket_id']}/summary", token=victim_token).body == secret
    if by_name()[route].takes_webhook:  # their receiver never answers: nothing left to retry
        for tenant in (caller, victim):
            delete_webhooks(stack, tenant, f"root-{tenant}")


def test_the_table_fingerprint_sees_any_change_anywhere(stack: RunningStack) -> None:
    # What "nothing changed" rests on in these suites: one attribute's value, an item
    # added, an item removed each change the fingerprint; undoing the change restores it.
    table, dynamodb = stack.state["table_name"], stack.operator("dynamodb")
    # (not a ticket summary: the stream functions would add items of their own)
    key = {"pk": {"S": f"TENANT#{new_tenant_id()}|PROBE"}, "sk": {"S": "PROBE"}}
    empty = table_state(stack)
    dynamodb.put_item(TableName=table, Item={**key, "title": {"S": "a"}})
    added = table_state(stack)
    assert added["items"] == empty["items"] + 1
    dynamodb.put_item(TableName=table, Item={**key, "title": {"S": "b"}})
    changed = table_state(stack)
    assert changed["items"] == added["items"]
    assert len({empty["sha256"], added["sha256"], changed["sha256"]}) == 3
    dynamodb.put_item(TableName=table, Item={**key, "title": {"S": "a"}})
    assert table_state(stack) == added
    dynamodb.delete_item(TableName=table, Key=key)
    assert table_state(stack) == empty


# ---------------------------------------------------------------- tenant credentials, raw
@pytest.mark.parametrize("pair", PAIRS)
def test_tenant_credentials_reach_only_their_own_prefix(
    stack: RunningStack, pair: Callable[[str], tuple[str, str]]
) -> None:
    caller, victim = pair(new_tenant_id())
    table = stack.state["table_name"]
    client = tenant_client(stack, caller)
    mine = {"pk": {"S": f"TENANT#{caller}|TICKET#A"}, "sk": {"S": "SUMMARY"}}
    theirs = {"pk": {"S": f"TENANT#{victim}|TICKET#A"}, "sk": {"S": "SUMMARY"}}
    client.put_item(TableName=table, Item={**mine, "tenant_status": {"S": f"TENANT#{caller}|OPEN"}})
    stack.operator("dynamodb").put_item(
        TableName=table, Item={**theirs, "tenant_status": {"S": f"TENANT#{victim}|OPEN"}}
    )
    assert client.get_item(TableName=table, Key=mine)["Item"]["pk"] == mine["pk"]
    before = table_state(stack)

    assert_denied(lambda: client.get_item(TableName=table, Key=theirs))
    assert_denied(lambda: client.put_item(TableName=table, Item=theirs))
    assert_denied(lambda: client.delete_item(TableName=table, Key=theirs))
    assert_denied(
        lambda: client.update_item(
            TableName=table, Key=theirs, UpdateExpression="SET title = :t", ExpressionAttributeValues={":t": {"S": "x"}}
        )
    )
    assert_denied(
        lambda: client.query(
            TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": theirs["pk"]}
        )
    )
    assert_denied(
        lambda: client.query(
            TableName=table,
            IndexName="GSI1",
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "tenant_status"},
            ExpressionAttributeValues={":s": {"S": f"TENANT#{victim}|OPEN"}},
        )
    )
    assert_denied(
        lambda: client.query(
            TableName=table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": mine["pk"]},
            ExclusiveStartKey=theirs,
        )
    )
    assert_denied(lambda: client.batch_get_item(RequestItems={table: {"Keys": [mine, theirs]}}))
    assert_denied(
        lambda: client.batch_write_item(
            RequestItems={table: [{"PutRequest": {"Item": mine}}, {"DeleteRequest": {"Key": theirs}}]}
        )
    )
    assert_denied(
        lambda: client.transact_write_items(
            TransactItems=[{"Put": {"TableName": table, "Item": mine}}, {"Delete": {"TableName": table, "Key": theirs}}]
        )
    )
    assert_denied(lambda: client.transact_get_items(TransactItems=[{"Get": {"TableName": table, "Key": theirs}}]))
    assert_denied(lambda: client.scan(TableName=table))
    assert_denied(lambda: client.execute_statement(Statement=f'SELECT * FROM "{table}"'))  # noqa: S608
    assert_denied(lambda: client.describe_table(TableName=table))
    assert table_state(stack) == before


def test_the_denial_reads_like_dynamodbs(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    error = assert_denied(lambda: tenant_client(stack, tenant).scan(TableName=stack.state["table_name"]))
    assert error.response["Error"]["Message"] == (
        "User: arn:aws:sts::123456789012:assumed-role/TenantAccessRole/CognitoIdentityCredentials is not authorized to "
        "perform: dynamodb:Scan on resource: arn:aws:dynamodb:us-east-1:123456789012:table/SupportTicket "
        "because no identity-based policy allows the dynamodb:Scan action"
    )


# ---------------------------------------------------------------- roles and trust
def test_the_function_role_itself_cannot_read_the_table(stack: RunningStack) -> None:
    client = client_with(stack, "dynamodb", role_credentials(stack, "ApiFunctionRole"))
    key = {"pk": {"S": "TENANT#x|TICKET#A"}, "sk": {"S": "SUMMARY"}}
    assert_denied(lambda: client.get_item(TableName=stack.state["table_name"], Key=key))


@pytest.mark.parametrize(
    "tags",
    [
        pytest.param([], id="no-tag"),
        pytest.param([{"Key": "TenantId", "Value": "acme"}], id="a-tenant-tag"),
        pytest.param([{"Key": "TenantId", "Value": "a"}, {"Key": "Admin", "Value": "1"}], id="extra-tag"),
    ],
)
def test_nobody_assumes_the_tenant_role_the_functions_role_nor_the_operator(
    stack: RunningStack, tags: list[dict[str, str]]
) -> None:
    for sts in (client_with(stack, "sts", role_credentials(stack, "ApiFunctionRole")), stack.operator("sts")):
        with pytest.raises(ClientError) as caught:
            sts.assume_role(RoleArn=stack.state["tenant_role_arn"], RoleSessionName="s-1", Tags=tags)
        assert caught.value.response["Error"]["Code"] == "AccessDenied"
        assert "sts:AssumeRole" in caught.value.response["Error"]["Message"]


@pytest.mark.parametrize("value", ["*", "glo*", "?", "a|b"])
def test_sts_refuses_tag_values_with_wildcards_and_delimiters(stack: RunningStack, value: str) -> None:
    # As STS does: its Tag value pattern is [\p{L}\p{Z}\p{N}_.:/=+\-@]*. So a
    # session tagged "*" (which would read every tenant if the tag were a
    # pattern) never exists, whoever asks, the operator included.
    for sts in (client_with(stack, "sts", role_credentials(stack, "ApiFunctionRole")), stack.operator("sts")):
        with pytest.raises(ClientError) as caught:
            sts.assume_role(
                RoleArn=stack.state["tenant_role_arn"],
                RoleSessionName="s-1",
                Tags=[{"Key": "TenantId", "Value": value}],
            )
        assert caught.value.response["Error"]["Code"] == "ValidationError"
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_tenant_credentials_cannot_become_another_tenants(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    credentials = exchange(stack, stack.token(tenant, f"u-{tenant}"))
    tenant_sts = client_with(stack, "sts", credentials)
    with pytest.raises(ClientError) as caught:
        tenant_sts.assume_role(
            RoleArn=stack.state["tenant_role_arn"], RoleSessionName="s-2", Tags=[{"Key": "TenantId", "Value": "other"}]
        )
    assert caught.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(ClientError):
        tenant_sts.get_session_token()
    with pytest.raises(ClientError):
        tenant_sts.assume_role_with_web_identity(
            RoleArn=stack.state["tenant_role_arn"], RoleSessionName="s-3", WebIdentityToken="x" * 8
        )


# ---------------------------------------------------------------- the identity pool, as Cognito answers
def refused_by_the_pool(call: Callable[[], Any], code: str = "NotAuthorizedException") -> str:
    with pytest.raises(ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == code
    return str(caught.value.response["Error"]["Message"])


def get_id(stack: RunningStack, token: str | None) -> Callable[[], Any]:
    logins = {} if token is None else {"Logins": {stack.state["user_pool_provider_name"]: token}}
    return lambda: identity_pool(stack).get_id(IdentityPoolId=stack.state["identity_pool_id"], **logins)


def test_the_pool_refuses_guests(stack: RunningStack) -> None:
    assert "Unauthenticated access is not supported" in refused_by_the_pool(get_id(stack, None))


def test_the_pool_refuses_another_app_clients_token(stack: RunningStack) -> None:
    pool = stack.pool()
    other = pool.cognito.create_user_pool_client(
        UserPoolId=pool.pool_id,
        ClientName=f"other-{new_tenant_id()}",
        ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH"],
    )["UserPoolClient"]["ClientId"]
    tenant = new_tenant_id()
    stack.token(tenant, f"u-{tenant}")  # the user exists; now a token of the other client
    token = id_token(UserPool(pool.cognito, pool.pool_id, other), f"u-{tenant}")
    assert claims_of(token)["aud"] == other
    assert "not from a supported provider" in refused_by_the_pool(get_id(stack, token))


def test_the_pool_refuses_an_access_token(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    pool = stack.pool()
    stack.token(tenant, f"u-{tenant}")
    password = "Access-Token-Test-1"
    pool.cognito.admin_set_user_password(
        UserPoolId=pool.pool_id, Username=f"u-{tenant}", Password=password, Permanent=True
    )
    access = pool.cognito.admin_initiate_auth(
        UserPoolId=pool.pool_id,
        ClientId=pool.client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": f"u-{tenant}", "PASSWORD": password},
    )["AuthenticationResult"]["AccessToken"]
    assert "Missing a required claim: aud" in refused_by_the_pool(get_id(stack, access))


def test_the_pool_refuses_a_token_signed_with_motos_public_key(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    genuine = claims_of(stack.token(tenant, f"u-{tenant}"))
    for forged in (
        sign(genuine, MOTOS_BUNDLED_KEY),
        sign({**genuine, "custom:tenant_id": "victim"}, MOTOS_BUNDLED_KEY),
    ):
        assert "Couldn't verify signed token" in refused_by_the_pool(get_id(stack, forged))


@pytest.mark.parametrize("how", ["deleted", "disabled", "signed-out"])
def test_the_server_side_check_refuses_users_that_are_gone(stack: RunningStack, how: str) -> None:
    tenant = new_tenant_id()
    token = stack.token(tenant, f"u-{tenant}")
    exchange(stack, token)  # the token works...
    pool = stack.pool()
    change = {
        "deleted": pool.cognito.admin_delete_user,
        "disabled": pool.cognito.admin_disable_user,
        "signed-out": pool.cognito.admin_user_global_sign_out,
    }[how]
    change(UserPoolId=pool.pool_id, Username=f"u-{tenant}")
    # ...until its user is no longer current: then even its known identity gets nothing
    assert "deleted, disabled or signed out" in refused_by_the_pool(get_id(stack, token))


def test_the_aggregator_role_reaches_aggregate_items_only(stack: RunningStack) -> None:
    client = client_with(stack, "dynamodb", role_credentials(stack, function_role("AggregateCountsFunction")))
    table = stack.state["table_name"]
    tenant = new_tenant_id()
    aggregate = {"pk": {"S": f"TENANT#{tenant}|AGGREGATE"}, "sk": {"S": "OPEN"}}
    client.get_item(TableName=table, Key=aggregate)  # allowed (nothing there yet)
    ticket = {"pk": {"S": f"TENANT#{tenant}|TICKET#A"}, "sk": {"S": "SUMMARY"}}
    assert_denied(lambda: client.get_item(TableName=table, Key=ticket))
    client.put_item(TableName=table, Item=aggregate)  # its own items: counts and journals (put in transactions)
    assert_denied(lambda: client.put_item(TableName=table, Item=ticket))
    assert_denied(lambda: client.put_item(TableName=table, Item={**ticket, "pk": {"S": f"TENANT#{tenant}|CONFIG"}}))
    assert_denied(lambda: client.delete_item(TableName=table, Key=aggregate))


def test_the_aggregator_role_sends_to_its_on_failure_queue_only(stack: RunningStack) -> None:
    # Lambda sends a stream's on-failure records with the function's role; the
    # guard judges sqs:SendMessage on the queue itself, as SQS does.
    sqs = client_with(stack, "sqs", role_credentials(stack, function_role("AggregateCountsFunction")))
    queue = stack.state["failure_queue_url"]
    sqs.send_message(QueueUrl=queue, MessageBody='{"test": "on-failure"}')
    other = stack.operator("sqs").create_queue(QueueName=f"other-{new_tenant_id()}")["QueueUrl"]
    attempts: list[Callable[[], Any]] = [
        lambda: sqs.send_message(QueueUrl=other, MessageBody="x"),
        lambda: sqs.receive_message(QueueUrl=queue),
        lambda: sqs.purge_queue(QueueUrl=queue),
    ]
    for attempt in attempts:
        with pytest.raises(ClientError) as caught:
            attempt()
        assert "is not authorized to perform: sqs:" in caught.value.response["Error"]["Message"]
    received = stack.operator("sqs").receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert '{"test": "on-failure"}' in [message["Body"] for message in received]
