"""Token-bound tenant credentials against a deployed stack (skipped without
AWS_SAM_STACK_NAME; see conftest): the stack's Cognito identity pool gives a
user's ID token credentials of TenantAccessRole that reach only that token's
tenant, refuses what is not an ID token of the stack's app client, and
nobody, not even the account's administrator, can assume the tenant role."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.integration.conftest import Caller, DeployedStack

pytestmark = pytest.mark.deployed


def provider(deployed: DeployedStack) -> str:
    region = deployed.session.region_name
    return f"cognito-idp.{region}.amazonaws.com/{deployed.outputs['UserPoolId']}"


def exchange(deployed: DeployedStack, token: str) -> dict[str, Any]:
    """Exactly what the functions do (support_tickets.data.session): GetId, then
    GetCredentialsForIdentity with the token."""
    pool = deployed.session.client("cognito-identity")
    logins = {provider(deployed): token}
    identity = pool.get_id(IdentityPoolId=deployed.outputs["IdentityPoolId"], Logins=logins)["IdentityId"]
    return dict(pool.get_credentials_for_identity(IdentityId=identity, Logins=logins)["Credentials"])


def dynamodb_with(deployed: DeployedStack, credentials: dict[str, Any]) -> Any:
    import boto3

    return boto3.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretKey"],
        aws_session_token=credentials["SessionToken"],
        region_name=deployed.session.region_name,
    ).client("dynamodb")


def refused(call: Any, code: str) -> None:
    with pytest.raises(ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == code


@pytest.mark.parametrize(("owner", "other"), [("1", "10"), ("10", "1")])
def test_a_token_gets_credentials_for_its_own_tenant_only(deployed: DeployedStack, owner: str, other: str) -> None:
    caller: Caller = deployed.caller(owner, f"creds-{owner}")
    client = dynamodb_with(deployed, exchange(deployed, caller.token))
    table = deployed.outputs["TableName"]
    key = {"sk": {"S": "SUMMARY"}}
    client.get_item(TableName=table, Key={"pk": {"S": f"TENANT#{owner}|TICKET#none"}, **key})  # allowed
    refused(
        lambda: client.get_item(TableName=table, Key={"pk": {"S": f"TENANT#{other}|TICKET#none"}, **key}),
        "AccessDeniedException",
    )
    refused(lambda: client.scan(TableName=table), "AccessDeniedException")
    refused(
        lambda: client.put_item(TableName=table, Item={"pk": {"S": f"TENANT#{owner}|CONFIG"}, "sk": {"S": "CONFIG"}}),
        "AccessDeniedException",
    )


def test_the_identity_pool_refuses_guests_and_access_tokens(deployed: DeployedStack) -> None:
    pool = deployed.session.client("cognito-identity")
    refused(lambda: pool.get_id(IdentityPoolId=deployed.outputs["IdentityPoolId"]), "NotAuthorizedException")
    caller = deployed.caller(f"it-{deployed.run_id}", "access")
    password = f"{deployed.run_id}-Access-Token-1"
    deployed.pool.cognito.admin_set_user_password(
        UserPoolId=deployed.pool.pool_id, Username=caller.username, Password=password, Permanent=True
    )
    access = deployed.pool.cognito.admin_initiate_auth(
        UserPoolId=deployed.pool.pool_id,
        ClientId=deployed.pool.client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": caller.username, "PASSWORD": password},
    )["AuthenticationResult"]["AccessToken"]
    refused(
        lambda: pool.get_id(IdentityPoolId=deployed.outputs["IdentityPoolId"], Logins={provider(deployed): access}),
        "NotAuthorizedException",
    )


def test_a_signed_out_users_token_gets_no_credentials(deployed: DeployedStack) -> None:
    # ServerSideTokenCheck: Cognito asks the user pool, whatever the token's expiry.
    caller = deployed.caller(f"it-{deployed.run_id}", "signed-out")
    exchange(deployed, caller.token)
    deployed.pool.cognito.admin_user_global_sign_out(UserPoolId=deployed.pool.pool_id, Username=caller.username)
    refused(lambda: exchange(deployed, caller.token), "NotAuthorizedException")


def test_nobody_assumes_the_tenant_role(deployed: DeployedStack) -> None:
    # Not even these credentials (the deployer's): the trust policy names the identity pool only.
    sts = deployed.session.client("sts")
    refused(
        lambda: sts.assume_role(
            RoleArn=deployed.outputs["TenantAccessRoleArn"],
            RoleSessionName="integration",
            Tags=[{"Key": "TenantId", "Value": "1"}],
        ),
        "AccessDenied",
    )
