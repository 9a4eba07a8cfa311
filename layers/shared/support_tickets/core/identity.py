"""Who is calling, from the authorizer's context.

The authorizer (:mod:`support_tickets.auth.authorizer`) verified the request's ID
token (signature, issuer, app client, token use, expiry) before any function
ran, and passed the caller on as flat strings under
``requestContext.authorizer``: ``tenant_id`` (the token's
``custom:tenant_id``), ``username``, ``groups`` (the token's
``cognito:groups`` as one JSON array), ``sub`` and ``jti``. The tenant comes
only from there (immutable, no app client may write it) and admin rights only
from ``groups``; never from a path, query, header or body. A context without
a tenant or a user is a 401, a malformed tenant id a 403: there is no default
tenant.

The caller also carries its :class:`IdToken`, the ``Authorization`` header's
token the context came from, and the :class:`TenantCredentials` the
authorizer obtained for exactly that token from the stack's Cognito identity
pool (:mod:`support_tickets.data.session`): the only credentials that reach
the table, tagged by Cognito with the token's tenant, and usable only through
the stack's VPC endpoint (the data perimeter). A request whose header holds no
token, or another token than the context's (another ``jti``, ``sub`` or
tenant), or not an ID token of an allowed app client, or whose context carries
no credentials, is a 401. (The header's payload is only decoded here: the
authorizer verified it, and the identity pool verified it again before it
issued the credentials.)
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from support_tickets.core.digits import whole_number
from support_tickets.core.errors import Forbidden, Unauthorized
from support_tickets.core.keys import InvalidTenantId, validate_tenant_id

TENANT_CLAIM = "custom:tenant_id"
USERNAME_CLAIM = "cognito:username"
GROUPS_CLAIM = "cognito:groups"
ADMIN_GROUP = "admin"
TOKEN_USE_CLAIM = "token_use"  # noqa: S105 - a claim name, not a secret
AUDIENCE_CLAIM = "aud"
JTI_CLAIM = "jti"
SUBJECT_CLAIM = "sub"
EXPIRY_CLAIM = "exp"
ID_TOKEN_USE = "id"  # noqa: S105 - a claim value, not a secret
# Names of the authorizer's context (support_tickets.auth.authorizer.caller_context).
CONTEXT_TENANT = "tenant_id"
CONTEXT_USERNAME = "username"
CONTEXT_GROUPS = "groups"
CONTEXT_SUBJECT = "sub"
CONTEXT_JTI = "jti"
# The tenant credentials the authorizer obtained for the token (flat strings, as contexts must be).
CONTEXT_ACCESS_KEY_ID = "access_key_id"
CONTEXT_SECRET_ACCESS_KEY = "secret_access_key"  # noqa: S105 - a context key, not a secret
CONTEXT_SESSION_TOKEN = "session_token"  # noqa: S105 - a context key, not a secret
CONTEXT_CREDENTIALS_EXPIRE_AT = "credentials_expire_at"
# The one form of the Authorization header the API accepts: API Gateway caches
# the authorizer's answer per header value, so every other spelling of the same
# token (a bare token, "bearer", more spaces) would be another cache miss, another
# authorizer run. template.yaml's ValidationExpression is this, anchored; the
# authorizer also refuses a non-canonical base64url segment (support_tickets.auth.jwks).
BEARER_PREFIX = "Bearer "
BEARER_HEADER = r"Bearer [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"
_BEARER_HEADER = re.compile(BEARER_HEADER)


@dataclass(frozen=True, slots=True)
class IdToken:
    """The caller's ID token as API Gateway passed it (its identity source, the
    token the authorizer verified). ``value`` is a bearer secret: it is never
    in a repr, a log line or a cache key (:attr:`digest` is the key)."""

    value: str = field(repr=False)
    subject: str
    expires_at: int  # the token's exp, epoch seconds

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.value.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class TenantCredentials:
    """Credentials of ``TenantAccessRole`` for one caller's token, as the
    identity pool issued them (session tag ``TenantId`` = the token's tenant).
    The secret parts are never in a repr or a log line."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(repr=False)
    expires_at: int  # epoch seconds

    def as_context(self) -> dict[str, str]:
        """Under ``requestContext.authorizer``: API Gateway passes the
        authorizer's context to the integration only, never to the client."""
        return {
            CONTEXT_ACCESS_KEY_ID: self.access_key_id,
            CONTEXT_SECRET_ACCESS_KEY: self.secret_access_key,
            CONTEXT_SESSION_TOKEN: self.session_token,
            CONTEXT_CREDENTIALS_EXPIRE_AT: str(self.expires_at),
        }

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> TenantCredentials:
        """The credentials of an authorizer context, or :class:`Unauthorized`."""
        values = [
            context.get(name) for name in (CONTEXT_ACCESS_KEY_ID, CONTEXT_SECRET_ACCESS_KEY, CONTEXT_SESSION_TOKEN)
        ]
        expires_at = context.get(CONTEXT_CREDENTIALS_EXPIRE_AT)
        if not all(isinstance(value, str) and value for value in values):
            raise Unauthorized()
        expiry = whole_number(str(expires_at))
        if expiry is None:
            raise Unauthorized()
        access_key_id, secret_access_key, session_token = (str(value) for value in values)
        return cls(access_key_id, secret_access_key, session_token, expiry)


@dataclass(frozen=True, slots=True)
class Caller:
    tenant_id: str
    username: str
    is_admin: bool
    token: IdToken
    credentials: TenantCredentials

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("This operation needs the tenant admin role.")


def bearer_token(authorization: object) -> str | None:
    """The token of an ``Authorization`` header in its one accepted form,
    :data:`BEARER_HEADER`; ``None`` for anything else (a bare token, another
    casing of ``Bearer``, more spaces)."""
    if not isinstance(authorization, str) or not _BEARER_HEADER.fullmatch(authorization):
        return None
    return authorization[len(BEARER_PREFIX) :]


def token_payload(token_or_header: object) -> dict[str, Any] | None:
    """The decoded (not verified) payload of a JWT, bare or in a header value."""
    token = bearer_token(token_or_header) or token_or_header
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:  # header.payload.signature
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


def bound_token(authorization: object, context: Mapping[str, Any], allowed_client_ids: Collection[str]) -> IdToken:
    """The ``Authorization`` header's ID token, provided it is the token the
    authorizer's ``context`` came from (the same ``jti``, ``sub`` and tenant)
    and an ID token of one of ``allowed_client_ids`` with an expiry.
    Otherwise :class:`Unauthorized`."""
    payload = token_payload(authorization)
    token = bearer_token(authorization)
    if payload is None or token is None:
        raise Unauthorized()
    for claim, name in ((JTI_CLAIM, CONTEXT_JTI), (SUBJECT_CLAIM, CONTEXT_SUBJECT), (TENANT_CLAIM, CONTEXT_TENANT)):
        value = context.get(name)
        if not isinstance(value, str) or not value or payload.get(claim) != value:
            raise Unauthorized()
    check_id_token(payload, allowed_client_ids)
    expires_at = payload.get(EXPIRY_CLAIM)
    if not isinstance(expires_at, int) or isinstance(expires_at, bool):
        raise Unauthorized()
    return IdToken(value=token, subject=str(payload[SUBJECT_CLAIM]), expires_at=expires_at)


def check_id_token(claims: Mapping[str, Any], allowed_client_ids: Collection[str]) -> None:
    """:class:`Unauthorized` unless ``claims`` are those of an ID token issued
    to one of ``allowed_client_ids``. (Cognito puts the client id in ``aud`` of
    an ID token, in ``client_id`` of an access token.)"""
    if claims.get(TOKEN_USE_CLAIM) != ID_TOKEN_USE:
        raise Unauthorized()
    audience = claims.get(AUDIENCE_CLAIM)
    if not isinstance(audience, str) or audience not in allowed_client_ids:
        raise Unauthorized()


def parse_groups(value: object) -> frozenset[str]:
    """The groups of the context's ``groups``: a JSON array of non-empty
    strings. Anything else grants nothing."""
    if not isinstance(value, str) or not value:
        return frozenset()
    try:
        groups = json.loads(value)
    except (ValueError, RecursionError):
        return frozenset()
    if not isinstance(groups, list) or not all(isinstance(group, str) and group for group in groups):
        return frozenset()
    return frozenset(groups)


def caller_from_context(
    context: Mapping[str, Any] | None, allowed_client_ids: Collection[str], authorization: object
) -> Caller:
    """The caller the authorizer's ``context`` describes, with the token of
    the request's ``authorization`` header it came from (:func:`bound_token`)."""
    if not context:
        raise Unauthorized()
    username = context.get(CONTEXT_USERNAME)
    tenant = context.get(CONTEXT_TENANT)
    if not isinstance(username, str) or not username or tenant is None:
        raise Unauthorized()
    try:
        tenant_id = validate_tenant_id(tenant)
    except InvalidTenantId as exc:
        raise Forbidden("The token does not carry a valid tenant.") from exc
    token = bound_token(authorization, context, allowed_client_ids)
    credentials = TenantCredentials.from_context(context)
    groups = parse_groups(context.get(CONTEXT_GROUPS))
    return Caller(
        tenant_id=tenant_id,
        username=username,
        is_admin=ADMIN_GROUP in groups,
        token=token,
        credentials=credentials,
    )


def caller_from_event(event: Mapping[str, Any], allowed_client_ids: Collection[str]) -> Caller:
    """The caller of a REST API (v1 proxy) event."""
    request_context = event.get("requestContext") or {}
    authorizer = request_context.get("authorizer") or {}
    headers = event.get("headers") or {}
    authorization = next((value for name, value in headers.items() if name.lower() == "authorization"), None)
    return caller_from_context(authorizer, allowed_client_ids, authorization)
