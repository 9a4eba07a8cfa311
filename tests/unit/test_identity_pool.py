"""The local identity pool (local_stack.cognito.identity_pool) through the guard's WSGI
middleware, as the emulator serves it: a token is verified as Cognito verifies
it, each refusal with Cognito's error, and the credentials it issues carry
the template's role and the token's tenant as session tag, so the guard's
``${aws:PrincipalTag/TenantId}`` evaluation confines them to that tenant."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from joserfc.jwk import RSAKey
from moto import mock_aws

from local_stack.cognito import identity_pool
from local_stack.cognito.identity_pool import IdentityPoolError, LocalIdentityPool, Provider
from local_stack.cognito.user_pool import public_jwks
from local_stack.iam.dynamodb_authorization import TableKeys
from local_stack.iam.guard import SOURCE_VPCE_ENVIRON, Guard
from local_stack.iam.sessions import Sessions
from local_stack.iam.sigv4 import Credentials
from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID
from stack_model.events import SAMPLE_CLIENT_ID
from tests.conftest import IDENTITY_POOL_ID, REGION, SIGNING_KEY, USER_POOL_ID, USER_POOL_PROVIDER, sign_token
from tests.signed import OPERATOR, signed_environ
from tests.unit.test_guard_policy import ROLES, TENANT_ROLE

TABLES = {"SupportTicket": TableKeys("SupportTicket", "pk", {"GSI1": "tenant_status"})}
OTHER_KEY = RSAKey.generate_key(2048, parameters={"kid": "tests", "alg": "RS256", "use": "sig"})


def claims(tenant: str = "acme", user: str = "alice", **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    found = {
        "sub": f"sub-{tenant}-{user}",
        "iss": f"https://{USER_POOL_PROVIDER}",
        "aud": SAMPLE_CLIENT_ID,
        "token_use": "id",
        "cognito:username": user,
        "custom:tenant_id": tenant,
        "iat": now,
        "auth_time": now,
        "exp": now + 3600,
        "jti": f"jti-{tenant}-{user}-{now}",
    }
    found.update(changes)
    return {name: value for name, value in found.items() if value is not None}


def token(tenant: str = "acme", user: str = "alice", **changes: Any) -> str:
    return sign_token(claims(tenant, user, **changes))


class Moto:
    """moto's place behind the guard: answers 200 to what is forwarded."""

    def __init__(self) -> None:
        self.forwarded: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        self.forwarded.append(environ.get("HTTP_X_AMZ_TARGET", ""))
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]


@pytest.fixture
def moto() -> Moto:
    return Moto()


@pytest.fixture
def pool() -> Iterator[LocalIdentityPool]:
    with mock_aws():  # the credentials are minted by moto's STS
        yield identity_pool.in_process(IDENTITY_POOL_ID, USER_POOL_ID, SAMPLE_CLIENT_ID, public_jwks(SIGNING_KEY))


@pytest.fixture
def guard(moto: Moto, pool: LocalIdentityPool) -> Guard:
    return Guard(moto, roles=ROLES, tables=TABLES, sessions=Sessions(operator=OPERATOR), identity_pool=pool)


def send(
    guard: Guard,
    target: str,
    body: dict[str, Any],
    *,
    signed_by: Credentials | None = None,
    source_vpce: str | None = None,
) -> tuple[int, Any]:
    service = "dynamodb" if target.startswith("DynamoDB") else "cognito-identity"
    environ = signed_environ(
        signed_by, service, target=target, body=json.dumps(body).encode(), content_type="application/x-amz-json-1.1"
    )
    if source_vpce is not None:  # as the emulator's gateway-endpoint listener marks it
        environ[SOURCE_VPCE_ENVIRON] = source_vpce
    status: list[str] = []
    answer = b"".join(guard(environ, lambda s, headers, exc_info=None: status.append(s)))
    return int(status[0].split()[0]), json.loads(answer or b"null")


def get_id(guard: Guard, logins: Any, **extra: Any) -> tuple[int, Any]:
    body = {"IdentityPoolId": IDENTITY_POOL_ID, **({"Logins": logins} if logins is not None else {}), **extra}
    return send(guard, "AWSCognitoIdentityService.GetId", body)


def credentials_for(guard: Guard, identity_id: str, logins: Any) -> tuple[int, Any]:
    body = {"IdentityId": identity_id, **({"Logins": logins} if logins is not None else {})}
    return send(guard, "AWSCognitoIdentityService.GetCredentialsForIdentity", body)


def exchange(guard: Guard, jwt: str) -> dict[str, Any]:
    status, found = get_id(guard, {USER_POOL_PROVIDER: jwt})
    assert status == 200, found
    status, answer = credentials_for(guard, found["IdentityId"], {USER_POOL_PROVIDER: jwt})
    assert status == 200, answer
    credentials: dict[str, Any] = answer["Credentials"]
    return credentials


def refused(answer: tuple[int, Any], code: str, message: str) -> None:
    status, body = answer
    assert status == 400, body
    assert body["__type"] == code
    assert message in body["message"]


def issued(credentials: dict[str, Any]) -> Credentials:
    """The identity pool's answer as the credentials a client signs with."""
    return Credentials(credentials["AccessKeyId"], credentials["SecretKey"], credentials["SessionToken"])


def get_item(guard: Guard, signer: Credentials, pk: str, *, in_vpc: bool = True) -> tuple[int, Any]:
    """A GetItem with tenant credentials: by default the way the functions
    call (through the stack's gateway endpoint), else from anywhere else."""
    body = {"TableName": "SupportTicket", "Key": {"pk": {"S": pk}, "sk": {"S": "SUMMARY"}}}
    source_vpce = LOCAL_VPC_ENDPOINT_ID if in_vpc else None
    return send(guard, "DynamoDB_20120810.GetItem", body, signed_by=signer, source_vpce=source_vpce)


# ---------------------------------------------------------------- what it issues
def test_a_token_of_the_pool_gets_credentials_of_its_tenant_only(guard: Guard, moto: Moto) -> None:
    credentials = exchange(guard, token("1"))
    key = credentials["AccessKeyId"]
    assert credentials["SecretKey"]
    assert credentials["SessionToken"]
    assert 3500 < credentials["Expiration"] - time.time() <= 3600  # Cognito's one hour
    session = guard.sessions.get(key)
    assert session is not None
    assert session.role.arn == TENANT_ROLE.arn
    assert dict(session.tags) == {"TenantId": "1"}  # the principal tag map: custom:tenant_id
    assert session.arn.endswith(":assumed-role/TenantAccessRole/CognitoIdentityCredentials")
    # Its own tenant's items are forwarded to DynamoDB (moto); tenant "10"'s never.
    assert get_item(guard, issued(credentials), "TENANT#1|TICKET#a")[0] == 200
    status, denial = get_item(guard, issued(credentials), "TENANT#10|TICKET#a")
    assert status == 400
    assert denial["__type"].endswith("AccessDeniedException")
    # The same credentials, held by the user itself outside the stack's VPC: its own item neither.
    status, denial = get_item(guard, issued(credentials), "TENANT#1|TICKET#a", in_vpc=False)
    assert status == 400
    assert denial["__type"].endswith("AccessDeniedException")
    assert moto.forwarded == ["DynamoDB_20120810.GetItem"]


def test_one_identity_per_user_whatever_the_token(guard: Guard) -> None:
    first = get_id(guard, {USER_POOL_PROVIDER: token("acme", "alice")})[1]["IdentityId"]
    again = get_id(guard, {USER_POOL_PROVIDER: token("acme", "alice", jti="another-token")})[1]["IdentityId"]
    other = get_id(guard, {USER_POOL_PROVIDER: token("acme", "bob")})[1]["IdentityId"]
    assert first == again != other
    assert first.startswith(f"{REGION}:")


def test_signed_or_not_the_call_is_the_pools(guard: Guard, moto: Moto) -> None:
    # AWS's SDKs send GetId unsigned; a signed one is the pool's to answer too, never moto's.
    body = {"IdentityPoolId": IDENTITY_POOL_ID, "Logins": {USER_POOL_PROVIDER: token()}}
    status, found = send(guard, "AWSCognitoIdentityService.GetId", body, signed_by=OPERATOR)
    assert status == 200
    assert found["IdentityId"]
    assert moto.forwarded == []


def test_a_token_without_a_tenant_gets_credentials_that_reach_nothing(guard: Guard) -> None:
    credentials = exchange(guard, sign_token(claims("acme", "alice", **{"custom:tenant_id": None})))
    session = guard.sessions.get(credentials["AccessKeyId"])
    assert session is not None
    assert dict(session.tags) == {}
    assert get_item(guard, issued(credentials), "TENANT#acme|TICKET#a")[0] == 400


# ---------------------------------------------------------------- what it refuses
@pytest.mark.parametrize("logins", [None, {}], ids=["no-logins", "empty-logins"])
def test_unauthenticated_identities_are_refused(guard: Guard, logins: Any) -> None:
    refused(
        get_id(guard, logins),
        "NotAuthorizedException",
        "Unauthenticated access is not supported for this identity pool",
    )


@pytest.mark.parametrize(
    ("jwt", "message"),
    [
        pytest.param(
            lambda: token(aud="anotherclientofthepool"),
            "Token is not from a supported provider of this identity pool",
            id="another-app-client",
        ),
        pytest.param(lambda: token(exp=int(time.time()) - 1), "Invalid login token. Token expired", id="expired"),
        pytest.param(
            lambda: token(token_use="access", aud=None, client_id=SAMPLE_CLIENT_ID),
            "Invalid login token. Missing a required claim: aud",
            id="access-token",
        ),
        pytest.param(
            lambda: token(token_use="access"), "Invalid login token. Not an ID token", id="access-token-with-aud"
        ),
        pytest.param(
            lambda: sign_token(claims(), OTHER_KEY),
            "Invalid login token. Couldn't verify signed token",
            id="another-key-same-kid",
        ),
        pytest.param(
            lambda: token(iss="https://cognito-idp.us-east-1.amazonaws.com/us-east-1_OTHER"),
            "Invalid login token. Issuer doesn't match providerName",
            id="another-user-pool",
        ),
        pytest.param(
            lambda: token()[:-4] + "AAAA", "Invalid login token. Couldn't verify signed token", id="tampered-signature"
        ),
        pytest.param(lambda: "not-a-jwt", "Invalid login token. Not a valid OpenId Connect", id="not-a-jwt"),
    ],
)
def test_tokens_cognito_would_refuse_are_refused_by_get_id_and_get_credentials(
    guard: Guard, jwt: Callable[[], str], message: str
) -> None:
    refused(get_id(guard, {USER_POOL_PROVIDER: jwt()}), "NotAuthorizedException", message)
    # GetCredentialsForIdentity checks the token again: a known identity is no shortcut.
    identity = get_id(guard, {USER_POOL_PROVIDER: token()})[1]["IdentityId"]
    refused(credentials_for(guard, identity, {USER_POOL_PROVIDER: jwt()}), "NotAuthorizedException", message)
    assert guard.sessions.get("anything") is None


def test_a_token_under_another_providers_name_is_refused(guard: Guard) -> None:
    other = "cognito-idp.us-east-1.amazonaws.com/us-east-1_OTHER"
    jwt = token(iss=f"https://{other}")
    refused(get_id(guard, {other: jwt}), "NotAuthorizedException", "not from a supported provider")


def test_credentials_only_for_the_tokens_own_identity(guard: Guard) -> None:
    alice = get_id(guard, {USER_POOL_PROVIDER: token("acme", "alice")})[1]["IdentityId"]
    refused(
        credentials_for(guard, alice, {USER_POOL_PROVIDER: token("globex", "bob")}),
        "NotAuthorizedException",
        "Logins don't match",
    )
    refused(credentials_for(guard, alice, None), "NotAuthorizedException", "Unauthenticated access is not supported")
    refused(
        credentials_for(guard, f"{REGION}:00000000-0000-4000-8000-000000000000", {USER_POOL_PROVIDER: token()}),
        "ResourceNotFoundException",
        "not found",
    )


def test_another_identity_pool_is_not_found(guard: Guard) -> None:
    body = {"IdentityPoolId": f"{REGION}:0c1b5f3a-7d2e-4a8b-9c6d-000000000099", "Logins": {USER_POOL_PROVIDER: token()}}
    refused(send(guard, "AWSCognitoIdentityService.GetId", body), "ResourceNotFoundException", "not found")


def test_the_classic_flow_is_off(guard: Guard) -> None:
    identity = get_id(guard, {USER_POOL_PROVIDER: token()})[1]["IdentityId"]
    body = {"IdentityId": identity, "Logins": {USER_POOL_PROVIDER: token()}}
    refused(
        send(guard, "AWSCognitoIdentityService.GetOpenIdToken", body),
        "InvalidParameterException",
        "Basic (classic) flow is not enabled",
    )


def test_an_empty_tenant_tag_fails_the_trust_policy(guard: Guard) -> None:
    identity = get_id(guard, {USER_POOL_PROVIDER: token(**{"custom:tenant_id": ""})})[1]["IdentityId"]
    refused(
        credentials_for(guard, identity, {USER_POOL_PROVIDER: token(**{"custom:tenant_id": ""})}),
        "InvalidIdentityPoolConfigurationException",
        "Check assigned IAM roles",
    )


@pytest.mark.parametrize("tenant", ["*", "a|b", "glo*"])
def test_a_tenant_sts_would_not_tag_gets_nothing(guard: Guard, tenant: str) -> None:
    jwt = token(tenant)
    identity = get_id(guard, {USER_POOL_PROVIDER: jwt})[1]["IdentityId"]
    refused(credentials_for(guard, identity, {USER_POOL_PROVIDER: jwt}), "InvalidParameterException", "tags.1")


def test_the_server_side_check_refuses_users_that_are_no_longer_current(pool: LocalIdentityPool) -> None:
    gone = Provider(USER_POOL_PROVIDER, SAMPLE_CLIENT_ID, pool.providers[USER_POOL_PROVIDER].keys, lambda _: False)
    checked = LocalIdentityPool(IDENTITY_POOL_ID, {USER_POOL_PROVIDER: gone}, pool.authenticated_role)
    with pytest.raises(IdentityPoolError, match="deleted, disabled or signed out"):
        checked.get_id({"IdentityPoolId": IDENTITY_POOL_ID, "Logins": {USER_POOL_PROVIDER: token()}})


def test_assume_role_into_the_tenant_role_is_refused_for_the_operator_too(guard: Guard, moto: Moto) -> None:
    raw = (
        f"Action=AssumeRole&Version=2011-06-15&RoleArn={TENANT_ROLE.arn}&RoleSessionName=x"
        "&Tags.member.1.Key=TenantId&Tags.member.1.Value=acme"
    ).encode()
    environ = signed_environ(OPERATOR, "sts", body=raw, content_type="application/x-www-form-urlencoded")
    status: list[str] = []
    answer = b"".join(guard(environ, lambda s, headers, exc_info=None: status.append(s)))
    assert status[0].startswith("403")
    assert b"AccessDenied" in answer
    assert moto.forwarded == []


# ---------------------------------------------------------------- in-process (mock_aws)
def test_in_process_boto3_gets_the_registered_pools_answers(aws: LocalIdentityPool) -> None:
    client = boto3.client("cognito-identity", region_name=REGION)
    jwt = token()
    identity = client.get_id(IdentityPoolId=IDENTITY_POOL_ID, Logins={USER_POOL_PROVIDER: jwt})["IdentityId"]
    issued = client.get_credentials_for_identity(IdentityId=identity, Logins={USER_POOL_PROVIDER: jwt})
    assert issued["Credentials"]["AccessKeyId"] != "TESTACCESSKEY12345"  # not moto's fixed keys
    with pytest.raises(ClientError) as caught:
        client.get_id(IdentityPoolId=IDENTITY_POOL_ID, Logins={USER_POOL_PROVIDER: token(aud="another")})
    assert caught.value.response["Error"]["Code"] == "NotAuthorizedException"


def test_in_process_without_a_registered_pool_moto_answers_nothing() -> None:
    with mock_aws():
        client = boto3.client("cognito-identity", region_name=REGION)
        created = client.create_identity_pool(IdentityPoolName="p", AllowUnauthenticatedIdentities=True)
        with pytest.raises(ClientError) as caught:
            client.get_id(IdentityPoolId=created["IdentityPoolId"])  # moto would hand out an identity
        assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"
