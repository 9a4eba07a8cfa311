"""The Lambda authorizer: who is calling, and which tenant's usage plan.

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

**A cell serves only the tenants placed in it.** With ``CELL_ID`` set
(template.yaml's ``CellId``) the stack is one cell of several behind the edge
router (router/edge_router.js), which picks a cell by the token's tenant claim
without verifying it. A verified caller whose tenant has no record in this
cell's table (never placed here, or moved away and erased) is refused with
``503 TENANT_MOVING`` and ``Retry-After``. Only *after* the token is verified:
a forged token is a 401 whether or not its tenant exists, or the 503 would tell
a stranger which tenants do. Outside a cell, such a tenant is denied as before
(``FORBIDDEN``: it has no key).

A tenant moving between cells (:mod:`support_tickets.data.placement`) has a
record in both: the destination's (``ARRIVING``) is answered as any other, with
that cell's key (so no answer naming no plan is cached there for the tenant
once its move began), and the functions refuse its requests until the flip;
the one it left (``MOVED_OUT``, until the move deletes it) is refused as a
tenant placed elsewhere.

A TOKEN authorizer has three answers of its own, and none of them is that: a
Deny (``ACCESS_DENIED``, one status for every Deny: the 403 above), Unauthorized
(401), or a failure (``AUTHORIZER_FAILURE``, 503 ``UNAVAILABLE``).
So the refusal is an Allow that carries no tenant credentials (no Cognito
exchange) and names :data:`NOT_PLACED_HERE_KEY`, the value of no API key, as its
``usageIdentifierKey``. API Gateway compares the key with the keys of the
stage's usage plans, finds none (``InvalidKeyParameter``) and answers its
``INVALID_API_KEY`` gateway response before any integration runs; template.yaml
makes that response ``503 TENANT_MOVING`` with ``Retry-After``. Every method
requires an API key (tests/unit/test_template.py holds it), so no function runs
for such a request; were one ever reached, a context without credentials is a
401 there (:class:`support_tickets.core.identity.TenantCredentials`) and reads
nothing. Nor is the invocation metered (:func:`metered`): it is no usage of a
tenant this cell holds, and counting it would write that tenant's usage items
into a table that does not own it.

``INVALID_API_KEY`` means ``TENANT_MOVING`` in every stack, cell or not,
because this authorizer names no other key than the one of a record of its own
table (or :data:`NOT_PLACED_HERE_KEY`): API Gateway finding no plan for a key it
named means the key went away after the answer was cached (up to
``ReauthorizeEvery``). That is a tier change between its two calls (ops.api_keys
takes the key out of the old plan, then puts it into the new one, well under a
second apart), a tenant moved to another cell and erased here, or a tenant
offboarded (its key disabled and out of every plan) while an answer from before
still lives. Each time the right thing for the client is to retry: the next
answer is the truth (the new plan's, the new cell's, or the 403 of a suspended
tenant or of one without a key). What a cell cannot tell apart is a tenant
placed in another cell from one placed nowhere (never onboarded, or offboarded
and erased): it reads its own table only, so both get the 503, the latter until
its tokens expire.
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
from support_tickets.core.errors import Forbidden, TenantMoving, TenantSuspended, Unauthorized
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
from support_tickets.data.placement import CellPhase
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
# A cell's refusal of a tenant placed elsewhere, as usageIdentifierKey: API Gateway makes
# every key of this stack (ops.api_keys) and no key's value is shorter than 20 characters
# (CreateApiKey), so this is no key of any usage plan: API Gateway answers INVALID_API_KEY.
NOT_PLACED_HERE_KEY: Final = "not-placed-here"
# What template.yaml's INVALID_API_KEY gateway response says (and the refusal's context).
MOVING_MESSAGE: Final = TenantMoving.cell_message
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
        *,
        cell_id: str | None = None,
    ) -> None:
        self._verifier = verifier
        self._exchange = exchange
        self._table_name = table_name
        self._clients = _RoleClients(client_factory)
        self._records = records
        self._cell_id = cell_id

    def record(self, tenant_id: str) -> TenantConfig:
        from support_tickets.data.table import TenantTable

        return self._records.get(TenantTable(tenant_id, self._table_name, self._clients))

    def authorize(self, event: APIGatewayAuthorizerTokenEvent) -> dict[str, Any]:
        verified = self._verifier.verify(event.authorization_token)
        record = self.record(verified.tenant_id)
        if (self._cell_id is not None and not record.stored) or record.cell_phase == CellPhase.MOVED_OUT:
            # Placed in another cell, or in none: API Gateway refuses the key (INVALID_API_KEY).
            context = caller_context(verified.claims)
            context[CONTEXT_ERROR_CODE], context[CONTEXT_ERROR_MESSAGE] = TenantMoving.code, MOVING_MESSAGE
            return _answer(event, verified, context, usage_identifier_key=NOT_PLACED_HERE_KEY, allow=True)
        refusal = _refusal(record)
        context = caller_context(verified.claims, record.tier)
        if refusal is not None:
            context[CONTEXT_ERROR_CODE], context[CONTEXT_ERROR_MESSAGE] = refusal
        else:
            # Only an allowed caller gets credentials: a refused one costs no Cognito call.
            context.update(self._exchange(verified.token).as_context())
        # A refused request is neither metered nor counted against the tenant's quota.
        key = None if refusal is not None else record.api_key
        return _answer(event, verified, context, usage_identifier_key=key, allow=refusal is None)


def _answer(
    event: APIGatewayAuthorizerTokenEvent,
    verified: VerifiedToken,
    context: dict[str, str],
    *,
    usage_identifier_key: str | None,
    allow: bool,
) -> dict[str, Any]:
    arn = event.parsed_arn
    response = APIGatewayAuthorizerResponse(
        principal_id=str(verified.claims[SUBJECT_CLAIM]),
        # aws-cn and aws-us-gov too: a policy of another partition matches no method.
        partition=arn.partition,
        region=arn.region,
        aws_account_id=arn.aws_account_id,
        api_id=arn.api_id,
        stage=arn.stage,
        context=context,
        usage_identifier_key=usage_identifier_key,
    )
    # Every method either way: API Gateway reuses a cached answer for every route the token calls.
    if allow:
        response.allow_all_routes()
    else:
        response.deny_all_routes()
    return response.asdict()


def metered(answer: Mapping[str, Any]) -> bool:
    """Whether an answer's invocation is usage of a tenant this stack holds: every
    answer but a cell's refusal of a tenant placed elsewhere."""
    return answer.get("usageIdentifierKey") != NOT_PLACED_HERE_KEY


def _refusal(record: TenantConfig) -> tuple[str, str] | None:
    """Why the tenant's requests are denied before any function runs (code, message), if they are."""
    if record.status is TenantStatus.SUSPENDED:
        return TenantSuspended.code, TenantSuspended.default_message
    if not record.api_key:
        return Forbidden.code, NO_USAGE_PLAN_MESSAGE
    return None
