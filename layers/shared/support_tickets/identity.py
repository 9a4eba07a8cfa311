"""Who is calling, from the claims API Gateway's Cognito authorizer verified.

The authorizer checks the token's signature, issuer and expiry, but neither
its audience nor its use: an ID token that any app client of the pool got, or
an access token, would pass. :func:`check_id_token` makes up for both, with
the app clients the template allows (``ALLOWED_CLIENT_IDS``).

The tenant comes only from ``custom:tenant_id`` (immutable, no app client may
write it) and admin rights only from ``cognito:groups`` (see
:func:`parse_groups` for the one form API Gateway gives it); never from a path,
query, header or body. A missing claim or a token that is not one of our ID
tokens is a 401 and a malformed tenant id a 403: there is no default tenant.

The caller also carries its :class:`IdToken`, the ``Authorization`` header's
token these claims came from: :mod:`support_tickets.session` exchanges it with
the identity pool for the only credentials that reach the table, tagged by
Cognito with the token's tenant. A request whose header holds no token, or
another token than the claims' (another ``jti``, ``sub`` or tenant), is a 401:
it could only get credentials of another caller.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from support_tickets.errors import Forbidden, Unauthorized
from support_tickets.keys import InvalidTenantId, validate_tenant_id

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
class Caller:
    tenant_id: str
    username: str
    is_admin: bool
    token: IdToken

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("This operation needs the tenant admin role.")


def parse_groups(value: object) -> frozenset[str] | None:
    """The groups in ``cognito:groups`` as a REST API's Cognito authorizer
    passes the token's array: one string, the names joined with "," ("admin",
    "support,admin"; absent or "" for none). That form and nothing else: no
    brackets, no spaces, no list. Cognito allows "," in group names, so a
    value with a comma is ambiguous ("x,admin" is one group or two): ``None``,
    for :func:`groups_from_token` to settle."""
    if value is None or value == "":
        return frozenset()
    if not isinstance(value, str):
        return frozenset()
    if "," in value:
        return None
    return frozenset({value})


def groups_from_token(authorization: object, claims: Mapping[str, Any]) -> frozenset[str]:
    """The groups of the ID token in the request's ``Authorization`` header,
    which is the token the authorizer verified (its identity source), provided
    it is the token these claims came from: the same ``jti`` and the same
    groups once joined as API Gateway joins them. Otherwise none. The payload
    is only decoded: its signature was checked by the authorizer."""
    payload = token_payload(authorization)
    jti = claims.get(JTI_CLAIM)
    if payload is None or not isinstance(jti, str) or not jti or payload.get(JTI_CLAIM) != jti:
        return frozenset()
    groups = payload.get(GROUPS_CLAIM)
    if not isinstance(groups, list) or not all(isinstance(group, str) and group for group in groups):
        return frozenset()
    if ",".join(groups) != claims.get(GROUPS_CLAIM):
        return frozenset()
    return frozenset(groups)


def _bearer(authorization: object) -> str | None:
    """The token of an ``Authorization`` header (``Bearer <token>`` or the bare
    token, as API Gateway's Cognito authorizer accepts both)."""
    if not isinstance(authorization, str):
        return None
    scheme, _, rest = authorization.strip().partition(" ")
    token = rest.strip() if scheme.lower() == "bearer" else authorization.strip()
    return token or None


def token_payload(authorization: object) -> dict[str, Any] | None:
    """The decoded (not verified) payload of a JWT, bare or in a header value."""
    token = _bearer(authorization)
    parts = token.split(".") if token is not None else []
    if len(parts) != 3:  # header.payload.signature
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


def bound_token(authorization: object, claims: Mapping[str, Any]) -> IdToken:
    """The ``Authorization`` header's ID token, provided it is the token these
    verified claims came from: the same ``jti``, ``sub`` and tenant, an ID
    token with an expiry. Otherwise :class:`Unauthorized`. Its payload is only
    decoded here: the authorizer verified it, and the identity pool verifies it
    again before it issues anything for it."""
    payload = token_payload(authorization)
    token = _bearer(authorization)
    if payload is None or token is None:
        raise Unauthorized()
    for name in (JTI_CLAIM, SUBJECT_CLAIM, TENANT_CLAIM):
        value = claims.get(name)
        if not isinstance(value, str) or not value or payload.get(name) != value:
            raise Unauthorized()
    expires_at = payload.get(EXPIRY_CLAIM)
    if payload.get(TOKEN_USE_CLAIM) != ID_TOKEN_USE or not isinstance(expires_at, int) or isinstance(expires_at, bool):
        raise Unauthorized()
    return IdToken(value=token, subject=str(payload[SUBJECT_CLAIM]), expires_at=expires_at)


def check_id_token(claims: Mapping[str, Any], allowed_client_ids: Collection[str]) -> None:
    """:class:`Unauthorized` unless the verified claims are those of an ID
    token issued to one of ``allowed_client_ids``. (Cognito puts the client id
    in ``aud`` of an ID token, in ``client_id`` of an access token.)"""
    if claims.get(TOKEN_USE_CLAIM) != ID_TOKEN_USE:
        raise Unauthorized()
    audience = claims.get(AUDIENCE_CLAIM)
    if not isinstance(audience, str) or audience not in allowed_client_ids:
        raise Unauthorized()


def caller_from_claims(
    claims: Mapping[str, Any] | None, allowed_client_ids: Collection[str], authorization: object
) -> Caller:
    """The caller the verified ``claims`` describe, with the token of the
    request's ``authorization`` header they came from (:func:`bound_token`)."""
    if not claims:
        raise Unauthorized()
    check_id_token(claims, allowed_client_ids)
    username = claims.get(USERNAME_CLAIM)
    if not isinstance(username, str) or not username:
        raise Unauthorized()
    try:
        tenant_id = validate_tenant_id(claims.get(TENANT_CLAIM))
    except InvalidTenantId as exc:
        raise Forbidden("The token does not carry a valid tenant.") from exc
    token = bound_token(authorization, claims)
    groups = parse_groups(claims.get(GROUPS_CLAIM))
    if groups is None:
        groups = groups_from_token(authorization, claims)
    return Caller(tenant_id=tenant_id, username=username, is_admin=ADMIN_GROUP in groups, token=token)


def caller_from_event(event: Mapping[str, Any], allowed_client_ids: Collection[str]) -> Caller:
    """The caller of a REST API (v1 proxy) event."""
    request_context = event.get("requestContext") or {}
    authorizer = request_context.get("authorizer") or {}
    headers = event.get("headers") or {}
    authorization = next((value for name, value in headers.items() if name.lower() == "authorization"), None)
    return caller_from_claims(authorizer.get("claims"), allowed_client_ids, authorization)
