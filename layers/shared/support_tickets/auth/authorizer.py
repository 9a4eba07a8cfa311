"""The API's Lambda authorizer (TOKEN): who is calling, and which tenant's usage plan.

API Gateway calls it with the request's ``Authorization`` header before any
function runs, and caches its answer per header value for the template's
``ReauthorizeEvery`` (300 s). It accepts only an ID token of this stack's user
pool and app client, checked as Cognito's own authorizer checks it and more:

- the RS256 signature, by a key of the pool's JWKS (:mod:`support_tickets.auth.jwks`,
  fetched once per container);
- ``iss`` = the pool, ``aud`` = one of ``ALLOWED_CLIENT_IDS`` (the template's
  app client: an ID token another app client of the pool obtained, even one
  whose user is an admin, is refused), ``token_use`` = ``id`` (no access
  tokens), ``exp`` in the future;
- ``cognito:username`` and ``custom:tenant_id`` present; the tenant id valid.

Anything else raises :class:`Unauthorized`, which the handler turns into
API Gateway's ``Unauthorized`` (the ``UNAUTHORIZED`` gateway response, 401).
A token of a SUSPENDED tenant, or of a tenant with no API key (nobody onboarded
it), gets a Deny policy: API Gateway answers its ``ACCESS_DENIED`` gateway
response (403), whose body names the reason the Deny's context gives
(``TENANT_SUSPENDED``, or ``FORBIDDEN``), and neither meters the request nor
runs a function. The functions check the suspension again: an answer this
authorizer gave before the suspension stays cached for ``ReauthorizeEvery``.

The answer allows every method of the stage (a cached policy is reused for
every route the same token calls), names the tenant's API key as
``usageIdentifierKey`` (the API's ``ApiKeySourceType`` is ``AUTHORIZER``: API
Gateway meters and throttles that key by its usage plan, i.e. the tenant's
tier) and passes the caller to the functions as its context: flat strings, as
authorizer contexts must be (:func:`caller_context`; read back by
:func:`support_tickets.core.identity.caller_from_event`).

The key comes from the tenant record (``TENANT#<t>|CONFIG``), read with the
authorizer's own role, which may GetItem those items and nothing else, and
kept per container for ``TENANT_CONFIG_TTL_SECONDS`` like every function's copy.

It routes nothing: where a tenant's data lives (the pool table or its own,
:mod:`support_tickets.data.placement`) is none of its answer's business. API
Gateway keeps an answer per token for up to ``ReauthorizeEvery`` (300 s), far
longer than a move's switch (seconds) or the second a moving tenant's record
may be cached, so a table named in its context could be a table the tenant
left minutes ago. Each function reads the record itself
(:func:`support_tickets.domain.tenancy.table_for`).

An allowed caller's context also carries its tenant credentials: the
authorizer (outside the VPC, where Cognito is reachable) exchanges the
verified token at the stack's identity pool
(:class:`support_tickets.data.session.TokenExchange`), and the functions
(inside the VPC, which reaches DynamoDB only) use them through the stack's
gateway endpoint, the only place ``TenantAccessRole``'s policy admits them.
API Gateway caches them with the answer, so a cached token costs no Cognito
call at all; a denied caller gets none.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerResponse,
    APIGatewayAuthorizerTokenEvent,
)

from support_tickets.auth.jwks import InvalidToken, Jwks
from support_tickets.core.errors import Forbidden, TenantSuspended, Unauthorized
from support_tickets.core.identity import (
    AUDIENCE_CLAIM,
    CONTEXT_GROUPS,
    CONTEXT_JTI,
    CONTEXT_SUBJECT,
    CONTEXT_TENANT,
    CONTEXT_USERNAME,
    EXPIRY_CLAIM,
    GROUPS_CLAIM,
    ID_TOKEN_USE,
    JTI_CLAIM,
    SUBJECT_CLAIM,
    TENANT_CLAIM,
    TOKEN_USE_CLAIM,
    USERNAME_CLAIM,
    IdToken,
    TenantCredentials,
    bearer_token,
)
from support_tickets.core.keys import InvalidTenantId, validate_tenant_id
from support_tickets.data.tenant_registry import TenantConfig, TenantConfigCache, TenantStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ISSUER_CLAIM: Final = "iss"
# The tenant's tier, for the functions' logs (the names of the others: support_tickets.core.identity).
CONTEXT_TIER: Final = "tier"
# What a Deny says, for the ACCESS_DENIED gateway response's body (template.yaml:
# `$context.authorizer.error_code`); fixed texts of the error classes, JSON-safe.
CONTEXT_ERROR_CODE: Final = "error_code"
CONTEXT_ERROR_MESSAGE: Final = "error_message"
NO_USAGE_PLAN_MESSAGE: Final = "This tenant has no usage plan; ask an operator to onboard it."
# Cognito user pool ids: <region>_<id>.
_POOL_ID = re.compile(r"[\w-]+_[0-9a-zA-Z]+")


def issuer(user_pool_provider_name: str) -> str:
    """The ``iss`` of the pool's tokens: ``https://`` + its provider name."""
    return f"https://{user_pool_provider_name}"


def jwks_url(user_pool_provider_name: str, endpoint_url: str | None = None) -> str:
    """Where the pool publishes its keys: ``<issuer>/.well-known/jwks.json``;
    with ``AWS_ENDPOINT_OVERRIDE`` (the local stack), the emulator's copy."""
    pool_id = user_pool_provider_name.rsplit("/", 1)[-1]
    if endpoint_url:
        if not _POOL_ID.fullmatch(pool_id):
            raise ValueError("not a user pool provider name")
        return f"{endpoint_url.rstrip('/')}/{pool_id}/.well-known/jwks.json"
    return f"{issuer(user_pool_provider_name)}/.well-known/jwks.json"


@dataclass(frozen=True, slots=True)
class VerifiedToken:
    token: IdToken
    claims: dict[str, Any]
    tenant_id: str
    username: str
    groups: tuple[str, ...]


class TokenVerifier:
    """Verifies ID tokens of one user pool for the allowed app clients."""

    def __init__(
        self,
        jwks: Jwks,
        expected_issuer: str,
        allowed_client_ids: Collection[str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._jwks = jwks
        self._issuer = expected_issuer
        self._clients = frozenset(allowed_client_ids)
        self._clock = clock

    def verify(self, authorization: str | None) -> VerifiedToken:
        """The caller of ``authorization`` (``Bearer <token>``, exactly), or
        :class:`Unauthorized`, whatever is wrong with it."""
        token = bearer_token(authorization)
        if token is None:
            raise Unauthorized()
        try:
            claims = self._jwks.verify(token, issuer=self._issuer, audience=self._clients)
        except InvalidToken as exc:
            raise Unauthorized() from exc
        expires = claims.get(EXPIRY_CLAIM)
        if (
            claims.get(ISSUER_CLAIM) != self._issuer
            or claims.get(TOKEN_USE_CLAIM) != ID_TOKEN_USE
            or not isinstance(claims.get(AUDIENCE_CLAIM), str)
            or claims[AUDIENCE_CLAIM] not in self._clients
            or not isinstance(expires, int | float)
            or isinstance(expires, bool)
            or expires <= self._clock()
        ):
            raise Unauthorized()
        username = claims.get(USERNAME_CLAIM)
        subject = claims.get(SUBJECT_CLAIM)
        if not isinstance(username, str) or not username or not isinstance(subject, str) or not subject:
            raise Unauthorized()
        try:
            tenant_id = validate_tenant_id(claims.get(TENANT_CLAIM))
        except InvalidTenantId as exc:
            raise Unauthorized() from exc
        groups = claims.get(GROUPS_CLAIM, [])
        if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
            raise Unauthorized()
        return VerifiedToken(
            token=IdToken(value=token, subject=subject, expires_at=int(expires)),
            claims=claims,
            tenant_id=tenant_id,
            username=username,
            groups=tuple(groups),
        )


def caller_context(claims: Mapping[str, Any], tier: str | None = None) -> dict[str, str]:
    """What the functions learn about the caller (``requestContext.authorizer``):
    flat strings only (API Gateway refuses objects and arrays in a context), so
    the groups travel as one JSON array, never as a comma-joined string that a
    group name with a comma would make ambiguous."""
    groups = claims.get(GROUPS_CLAIM, [])
    context = {
        CONTEXT_USERNAME: str(claims.get(USERNAME_CLAIM, "")),
        CONTEXT_GROUPS: json.dumps(list(groups) if isinstance(groups, list | tuple) else []),
        CONTEXT_SUBJECT: str(claims.get(SUBJECT_CLAIM, "")),
        CONTEXT_JTI: str(claims.get(JTI_CLAIM, "")),
    }
    if TENANT_CLAIM in claims:  # absent stays absent: a 401, never a default tenant
        context[CONTEXT_TENANT] = str(claims[TENANT_CLAIM])
    if tier is not None:
        context[CONTEXT_TIER] = tier
    return context


class _RoleClients:
    """The authorizer role's own client, as a tenant table's client provider."""

    def __init__(self, client_factory: Callable[[], DynamoDBClient]) -> None:
        self._factory = client_factory
        self._client: DynamoDBClient | None = None

    def dynamodb(self) -> DynamoDBClient:
        if self._client is None:
            self._client = self._factory()
        return self._client

    def invalidate(self) -> None:
        self._client = None


class TenantAuthorizer:
    """Token in, IAM policy with the tenant's API key out."""

    def __init__(
        self,
        verifier: TokenVerifier,
        table_name: str,
        client_factory: Callable[[], DynamoDBClient],
        records: TenantConfigCache,
        exchange: Callable[[IdToken], TenantCredentials],
    ) -> None:
        self._verifier = verifier
        self._exchange = exchange
        self._table_name = table_name
        self._clients = _RoleClients(client_factory)
        self._records = records

    def record(self, tenant_id: str) -> TenantConfig:
        from support_tickets.data.table import TenantTable

        return self._records.get(TenantTable(tenant_id, self._table_name, self._clients))

    def authorize(self, event: APIGatewayAuthorizerTokenEvent) -> dict[str, Any]:
        verified = self._verifier.verify(event.authorization_token)
        record = self.record(verified.tenant_id)
        arn = event.parsed_arn
        refusal = _refusal(record)
        context = caller_context(verified.claims, record.tier)
        if refusal is not None:
            context[CONTEXT_ERROR_CODE], context[CONTEXT_ERROR_MESSAGE] = refusal
        else:
            # Only an allowed caller gets credentials: a refused one costs no Cognito call.
            context.update(self._exchange(verified.token).as_context())
        response = APIGatewayAuthorizerResponse(
            principal_id=str(verified.claims[SUBJECT_CLAIM]),
            # aws-cn and aws-us-gov too: a policy of another partition matches no method.
            partition=arn.partition,
            region=arn.region,
            aws_account_id=arn.aws_account_id,
            api_id=arn.api_id,
            stage=arn.stage,
            context=context,
            # A refused request is neither metered nor counted against the tenant's quota.
            usage_identifier_key=None if refusal is not None else record.api_key,
        )
        # Every method either way: API Gateway reuses a cached answer for every route the token calls.
        if refusal is None:
            response.allow_all_routes()
        else:
            response.deny_all_routes()
        return response.asdict()


def _refusal(record: TenantConfig) -> tuple[str, str] | None:
    """Why the tenant's requests are denied before any function runs (code, message), if they are."""
    if record.status is TenantStatus.SUSPENDED:
        return TenantSuspended.code, TenantSuspended.default_message
    if not record.api_key:
        return Forbidden.code, NO_USAGE_PLAN_MESSAGE
    return None
