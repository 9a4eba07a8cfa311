"""Tenant users in a Cognito user pool: the local stack's or a deployed stack's.

The tenant is written once, at creation, into the immutable
``custom:tenant_id`` attribute; admins join the ``admin`` group. A user that
already exists for another tenant is an error, never moved: an immutable
attribute is what keeps a user inside one tenant.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from support_tickets.core.identity import ADMIN_GROUP, TENANT_CLAIM, TenantCredentials
from support_tickets.core.keys import RESOLVER_PATTERN, validate_tenant_id

if TYPE_CHECKING:
    from mypy_boto3_cognito_identity import CognitoIdentityClient
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient

_USERNAME = re.compile(RESOLVER_PATTERN)


class UserPoolError(RuntimeError):
    """A user can't be created or signed in as asked."""


@dataclass(frozen=True)
class UserPool:
    cognito: CognitoIdentityProviderClient
    pool_id: str
    client_id: str = ""
    admin_group: str = ADMIN_GROUP


@dataclass(frozen=True)
class Outcome:
    username: str
    tenant_id: str
    admin: bool
    created: bool
    temporary_password: str | None = None


def new_password() -> str:
    """Random, and within the template's password policy (12+, upper, lower, digit)."""
    return f"{secrets.token_urlsafe(18)}Aa1!"


def validate_username(username: str) -> str:
    if not _USERNAME.fullmatch(username):
        raise UserPoolError(f"user name {username!r} must match {RESOLVER_PATTERN}")
    return username


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def tenant_of(pool: UserPool, username: str) -> str | None:
    """The user's tenant, or ``None`` when there is no such user."""
    try:
        user = pool.cognito.admin_get_user(UserPoolId=pool.pool_id, Username=username)
    except ClientError as exc:
        if _error_code(exc) == "UserNotFoundException":
            return None
        raise
    attributes = {item["Name"]: item.get("Value", "") for item in user.get("UserAttributes", [])}
    return attributes.get(TENANT_CLAIM, "")


def ensure_user(pool: UserPool, username: str, tenant_id: str, *, admin: bool = False) -> Outcome:
    """Create the user for ``tenant_id`` (with a temporary password) unless it
    exists; add it to the admin group when ``admin``."""
    validate_tenant_id(tenant_id)
    validate_username(username)
    current = tenant_of(pool, username)
    temporary: str | None = None
    if current is None:
        temporary = new_password()
        pool.cognito.admin_create_user(
            UserPoolId=pool.pool_id,
            Username=username,
            UserAttributes=[{"Name": TENANT_CLAIM, "Value": tenant_id}],
            TemporaryPassword=temporary,
            MessageAction="SUPPRESS",
        )
    elif current != tenant_id:
        raise UserPoolError(f"user {username!r} already exists in another tenant")
    if admin:
        pool.cognito.admin_add_user_to_group(UserPoolId=pool.pool_id, Username=username, GroupName=pool.admin_group)
    return Outcome(username, tenant_id, admin, created=current is None, temporary_password=temporary)


def refuse_taken(pool: UserPool, tenant_id: str, usernames: list[str]) -> None:
    """:class:`UserPoolError` if there is no name, a name is not a valid user name,
    or is a user of another tenant. Reads only: what a command checks before it
    writes anything."""
    if not usernames:
        raise UserPoolError("name at least one user or admin")
    for username in usernames:
        validate_username(username)
        current = tenant_of(pool, username)
        if current is not None and current != tenant_id:
            raise UserPoolError(f"user {username!r} already exists in another tenant")


def onboard(pool: UserPool, tenant_id: str, users: list[str], admins: list[str]) -> list[Outcome]:
    """Create a tenant's users and admins. Everything is checked before anything
    is created, so a name taken by another tenant changes nothing."""
    validate_tenant_id(tenant_id)
    wanted = dict.fromkeys(users, False) | dict.fromkeys(admins, True)
    refuse_taken(pool, tenant_id, list(wanted))
    return [ensure_user(pool, username, tenant_id, admin=admin) for username, admin in wanted.items()]


def id_token(pool: UserPool, username: str) -> str:
    """Sign the user in (admin flow, a fresh random password) and return its ID
    token. For the local stack only: it replaces the user's password."""
    password = new_password()
    pool.cognito.admin_set_user_password(UserPoolId=pool.pool_id, Username=username, Password=password, Permanent=True)
    result: Any = pool.cognito.admin_initiate_auth(
        UserPoolId=pool.pool_id,
        ClientId=pool.client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": username, "PASSWORD": password},
    )
    token = result.get("AuthenticationResult", {}).get("IdToken")
    if not token:
        raise UserPoolError(f"no ID token for {username!r}")
    return str(token)


def tenant_credentials(
    cognito_identity: CognitoIdentityClient, identity_pool_id: str, provider_name: str, token: str
) -> TenantCredentials:
    """What the API's authorizer gets for ``token`` from the identity pool
    (``GetId``, then ``GetCredentialsForIdentity``): the credentials it passes
    to the functions in its context. For events that stand for the authorizer's
    answer (``sam local invoke``, in-process runs)."""
    logins = {provider_name: token}
    identity = cognito_identity.get_id(IdentityPoolId=identity_pool_id, Logins=logins)["IdentityId"]
    issued = cognito_identity.get_credentials_for_identity(IdentityId=identity, Logins=logins)["Credentials"]
    return TenantCredentials(
        access_key_id=issued["AccessKeyId"],
        secret_access_key=issued["SecretKey"],
        session_token=issued["SessionToken"],
        expires_at=int(issued["Expiration"].timestamp()),
    )
