"""The local user pool keeps the template's pool and client settings, as
Cognito does: over HTTP, through the guard, with unsigned requests as a
browser sends them, a user's own access token, role credentials and the
operator's."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from ops.users import new_password
from stack_model.roles import function_role
from tests.e2e.conftest import RunningStack, new_tenant_id
from tests.e2e.test_gateway import claims_of
from tests.e2e.test_isolation import client_with, role_credentials


def unsigned(stack: RunningStack) -> Any:
    """Cognito as a browser or an attacker calls it: no AWS credentials."""
    return boto3.client(
        "cognito-idp",
        region_name=stack.state["region"],
        endpoint_url=stack.state["emulator_url"],
        config=Config(signature_version=UNSIGNED, retries={"max_attempts": 1}),
    )


def error_code(call: Callable[[], Any]) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return str(caught.value.response["Error"]["Code"])


def signed_in(stack: RunningStack, tenant: str) -> tuple[str, dict[str, Any]]:
    """A user of ``tenant`` and their tokens (the admin flow the client enables)."""
    username = f"u-{tenant}"
    stack.token(tenant, username)
    pool = stack.pool()
    password = new_password()
    pool.cognito.admin_set_user_password(UserPoolId=pool.pool_id, Username=username, Password=password, Permanent=True)
    result = pool.cognito.admin_initiate_auth(
        UserPoolId=pool.pool_id,
        ClientId=pool.client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": username, "PASSWORD": password},
    )
    return username, dict(result["AuthenticationResult"])


# ---------------------------------------------------------------- attributes
def test_a_user_cannot_move_herself_to_another_tenant(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    username, tokens = signed_in(stack, tenant)
    cognito = unsigned(stack)
    moved = [{"Name": "custom:tenant_id", "Value": "globex"}]
    assert error_code(
        lambda: cognito.update_user_attributes(AccessToken=tokens["AccessToken"], UserAttributes=moved)
    ) == ("NotAuthorizedException")
    # The control: an attribute the client may write is written.
    cognito.update_user_attributes(
        AccessToken=tokens["AccessToken"], UserAttributes=[{"Name": "email", "Value": f"{username}@example.com"}]
    )
    assert claims_of(stack.token(tenant, username))["custom:tenant_id"] == tenant


def test_not_even_the_operator_changes_an_immutable_attribute(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    username, _ = signed_in(stack, tenant)
    pool = stack.pool()
    moved: list[Any] = [{"Name": "custom:tenant_id", "Value": "globex"}]
    for attempt in (
        lambda: pool.cognito.admin_update_user_attributes(
            UserPoolId=pool.pool_id, Username=username, UserAttributes=moved
        ),
        lambda: pool.cognito.admin_delete_user_attributes(
            UserPoolId=pool.pool_id, Username=username, UserAttributeNames=["custom:tenant_id"]
        ),
    ):
        assert error_code(attempt) == "InvalidParameterException"
    assert claims_of(stack.token(tenant, username))["custom:tenant_id"] == tenant


# ---------------------------------------------------------------- who may create users
def test_nobody_signs_up(stack: RunningStack) -> None:
    # AllowAdminCreateUserOnly: a self-registered user would pick any tenant.
    tenant = new_tenant_id()
    code = error_code(
        lambda: unsigned(stack).sign_up(
            ClientId=stack.state["user_pool_client_id"],
            Username=f"u-{tenant}",
            Password=new_password(),
            UserAttributes=[{"Name": "custom:tenant_id", "Value": "globex"}],
        )
    )
    assert code == "NotAuthorizedException"
    assert (
        stack.pool().cognito.list_users(UserPoolId=stack.state["user_pool_id"], Filter=f'username = "u-{tenant}"')[
            "Users"
        ]
        == []
    )


ADMIN_CALLS: list[Any] = [
    pytest.param(
        lambda pool, name: pool.admin_create_user(
            UserPoolId=pool.pool_id,
            Username=name,
            UserAttributes=[{"Name": "custom:tenant_id", "Value": "globex"}],
            MessageAction="SUPPRESS",
        ),
        id="AdminCreateUser",
    ),
    pytest.param(
        lambda pool, name: pool.admin_add_user_to_group(UserPoolId=pool.pool_id, Username=name, GroupName="admin"),
        id="AdminAddUserToGroup",
    ),
    pytest.param(
        lambda pool, name: pool.admin_set_user_password(
            UserPoolId=pool.pool_id, Username=name, Password=new_password(), Permanent=True
        ),
        id="AdminSetUserPassword",
    ),
    pytest.param(lambda pool, name: pool.admin_get_user(UserPoolId=pool.pool_id, Username=name), id="AdminGetUser"),
    pytest.param(lambda pool, name: pool.list_users(UserPoolId=pool.pool_id), id="ListUsers"),
    pytest.param(
        lambda pool, name: pool.create_user_pool_client(UserPoolId=pool.pool_id, ClientName="mine"),
        id="CreateUserPoolClient",
    ),
]


class Pool:
    """A Cognito client with the pool id at hand, for the calls above."""

    def __init__(self, client: Any, pool_id: str) -> None:
        self._client = client
        self.pool_id = pool_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize("admin_call", ADMIN_CALLS)
def test_admin_apis_need_the_operators_credentials(stack: RunningStack, admin_call: Any) -> None:
    tenant = new_tenant_id()
    username, _ = signed_in(stack, tenant)
    pool_id = stack.state["user_pool_id"]
    # Unsigned: Cognito's admin APIs take IAM credentials only.
    assert error_code(lambda: admin_call(Pool(unsigned(stack), pool_id), username)) == (
        "MissingAuthenticationTokenException"
    )
    # A function's role has no Cognito permission.
    for role in ("ApiFunctionRole", function_role("AggregateCountsFunction")):
        with_role = Pool(client_with(stack, "cognito-idp", role_credentials(stack, role)), pool_id)
        assert error_code(functools.partial(admin_call, with_role, username)) == "AccessDeniedException"
    # The user is still alone in her tenant, in no group.
    groups = stack.pool().cognito.admin_list_groups_for_user(UserPoolId=pool_id, Username=username)["Groups"]
    assert groups == []


def test_the_operator_still_runs_the_admin_apis(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    username, _ = signed_in(stack, tenant)
    pool = stack.pool()
    pool.cognito.admin_add_user_to_group(UserPoolId=pool.pool_id, Username=username, GroupName="admin")
    assert claims_of(stack.token(tenant, username))["cognito:groups"] == ["admin"]


# ---------------------------------------------------------------- auth flows
@pytest.mark.parametrize("flow", ["USER_PASSWORD_AUTH", "CUSTOM_AUTH", "USER_AUTH"])
def test_auth_flows_the_client_does_not_enable_are_refused(stack: RunningStack, flow: str) -> None:
    tenant = new_tenant_id()
    username, _ = signed_in(stack, tenant)
    password = new_password()
    pool = stack.pool()
    pool.cognito.admin_set_user_password(UserPoolId=pool.pool_id, Username=username, Password=password, Permanent=True)
    code = error_code(
        lambda: unsigned(stack).initiate_auth(
            ClientId=pool.client_id, AuthFlow=flow, AuthParameters={"USERNAME": username, "PASSWORD": password}
        )
    )
    assert code == "InvalidParameterException"


def test_flows_the_client_enables_work(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    _, tokens = signed_in(stack, tenant)  # ADMIN_USER_PASSWORD_AUTH
    refreshed = unsigned(stack).initiate_auth(
        ClientId=stack.state["user_pool_client_id"],
        AuthFlow="REFRESH_TOKEN_AUTH",
        AuthParameters={"REFRESH_TOKEN": tokens["RefreshToken"]},
    )
    assert claims_of(refreshed["AuthenticationResult"]["IdToken"])["custom:tenant_id"] == tenant


def test_the_admin_flow_only_for_clients_that_enable_it(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    username, _ = signed_in(stack, tenant)
    pool = stack.pool()
    srp_only = pool.cognito.create_user_pool_client(
        UserPoolId=pool.pool_id,
        ClientName=f"srp-{tenant}",
        ExplicitAuthFlows=["ALLOW_USER_SRP_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
    )["UserPoolClient"]["ClientId"]
    password = new_password()
    pool.cognito.admin_set_user_password(UserPoolId=pool.pool_id, Username=username, Password=password, Permanent=True)
    code = error_code(
        lambda: pool.cognito.admin_initiate_auth(
            UserPoolId=pool.pool_id,
            ClientId=srp_only,
            AuthFlow="ADMIN_USER_PASSWORD_AUTH",
            AuthParameters={"USERNAME": username, "PASSWORD": password},
        )
    )
    assert code == "InvalidParameterException"
