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
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
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
ID_TOKEN_USE = "id"  # noqa: S105 - a claim value, not a secret


@dataclass(frozen=True, slots=True)
class Caller:
    tenant_id: str
    username: str
    is_admin: bool

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
    payload = _token_payload(authorization)
    jti = claims.get(JTI_CLAIM)
    if payload is None or not isinstance(jti, str) or not jti or payload.get(JTI_CLAIM) != jti:
        return frozenset()
    groups = payload.get(GROUPS_CLAIM)
    if not isinstance(groups, list) or not all(isinstance(group, str) and group for group in groups):
        return frozenset()
    if ",".join(groups) != claims.get(GROUPS_CLAIM):
        return frozenset()
    return frozenset(groups)


def _token_payload(authorization: object) -> dict[str, Any] | None:
    if not isinstance(authorization, str):
        return None
    scheme, _, rest = authorization.strip().partition(" ")
    token = rest.strip() if scheme.lower() == "bearer" else authorization.strip()
    parts = token.split(".")
    if len(parts) != 3:  # header.payload.signature
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


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
    claims: Mapping[str, Any] | None, allowed_client_ids: Collection[str], authorization: object = None
) -> Caller:
    """The caller the verified ``claims`` describe; ``authorization`` is the
    request's Authorization header (only read when the groups are ambiguous)."""
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
    groups = parse_groups(claims.get(GROUPS_CLAIM))
    if groups is None:
        groups = groups_from_token(authorization, claims)
    return Caller(tenant_id=tenant_id, username=username, is_admin=ADMIN_GROUP in groups)


def caller_from_event(event: Mapping[str, Any], allowed_client_ids: Collection[str]) -> Caller:
    """The caller of a REST API (v1 proxy) event."""
    request_context = event.get("requestContext") or {}
    authorizer = request_context.get("authorizer") or {}
    headers = event.get("headers") or {}
    authorization = next((value for name, value in headers.items() if name.lower() == "authorization"), None)
    return caller_from_claims(authorizer.get("claims"), allowed_client_ids, authorization)
