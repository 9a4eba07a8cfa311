"""Who is calling, from the claims API Gateway's Cognito authorizer verified.

The tenant comes only from ``custom:tenant_id`` (immutable, no app client may
write it) and admin rights only from ``cognito:groups``; never from a path,
query, header or body. A missing claim is a 401 and a malformed tenant id a
403: there is no default tenant.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from support_tickets.errors import Forbidden, Unauthorized
from support_tickets.keys import InvalidTenantId, validate_tenant_id

TENANT_CLAIM = "custom:tenant_id"
USERNAME_CLAIM = "cognito:username"
GROUPS_CLAIM = "cognito:groups"
ADMIN_GROUP = "admin"

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


def caller_from_claims(claims: Mapping[str, Any] | None) -> Caller:
    if not claims:
        raise Unauthorized()
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


def caller_from_event(event: Mapping[str, Any]) -> Caller:
    """The caller of a REST API (v1 proxy) event."""
    request_context = event.get("requestContext") or {}
    authorizer = request_context.get("authorizer") or {}
    return caller_from_claims(authorizer.get("claims"))
