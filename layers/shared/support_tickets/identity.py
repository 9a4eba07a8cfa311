"""Who is calling, from the claims API Gateway's Cognito authorizer verified.

The authorizer checks the token's signature, issuer and expiry, but neither
its audience nor its use: an ID token that any app client of the pool got, or
an access token, would pass. :func:`check_id_token` makes up for both, with
the app clients the template allows (``ALLOWED_CLIENT_IDS``).

The tenant comes only from ``custom:tenant_id`` (immutable, no app client may
write it) and admin rights only from ``cognito:groups``; never from a path,
query, header or body. A missing claim or a token that is not one of our ID
tokens is a 401 and a malformed tenant id a 403: there is no default tenant.
"""

from __future__ import annotations

import re
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
ID_TOKEN_USE = "id"  # noqa: S105 - a claim value, not a secret

_GROUP_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True, slots=True)
class Caller:
    tenant_id: str
    username: str
    is_admin: bool

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("This operation needs the tenant admin role.")


def parse_groups(value: object) -> frozenset[str]:
    """API Gateway passes array claims as strings: "a", "a,b" or "[a b]"."""
    if value is None:
        return frozenset()
    if isinstance(value, list | tuple):
        return frozenset(str(group) for group in value)
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return frozenset(group for group in _GROUP_SEPARATORS.split(text) if group)


def check_id_token(claims: Mapping[str, Any], allowed_client_ids: Collection[str]) -> None:
    """:class:`Unauthorized` unless the verified claims are those of an ID
    token issued to one of ``allowed_client_ids``. (Cognito puts the client id
    in ``aud`` of an ID token, in ``client_id`` of an access token.)"""
    if claims.get(TOKEN_USE_CLAIM) != ID_TOKEN_USE:
        raise Unauthorized()
    audience = claims.get(AUDIENCE_CLAIM)
    if not isinstance(audience, str) or audience not in allowed_client_ids:
        raise Unauthorized()


def caller_from_claims(claims: Mapping[str, Any] | None, allowed_client_ids: Collection[str]) -> Caller:
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
    return Caller(
        tenant_id=tenant_id,
        username=username,
        is_admin=ADMIN_GROUP in parse_groups(claims.get(GROUPS_CLAIM)),
    )


def caller_from_event(event: Mapping[str, Any], allowed_client_ids: Collection[str]) -> Caller:
    """The caller of a REST API (v1 proxy) event."""
    request_context = event.get("requestContext") or {}
    authorizer = request_context.get("authorizer") or {}
    return caller_from_claims(authorizer.get("claims"), allowed_client_ids)
