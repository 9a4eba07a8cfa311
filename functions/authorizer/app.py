"""The API's Lambda TOKEN authorizer: the caller's ID token verified, its tenant's API key and credentials named.

The logic is support_tickets.auth.authorizer; the key's usage plan is the tenant's tier.

API Gateway answers 401 (its ``UNAUTHORIZED`` gateway response) when this
function raises ``Exception("Unauthorized")``, 403 (``ACCESS_DENIED``) for a
Deny policy, and 500 (``AUTHORIZER_FAILURE``) for any other error: a JWKS or
DynamoDB outage is never a 401.
"""

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerTokenEvent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.auth.authorizer import TenantAuthorizer, TokenVerifier, issuer, jwks_url, metered
from support_tickets.auth.jwks import Jwks
from support_tickets.core.errors import Unauthorized
from support_tickets.core.identity import CONTEXT_TENANT
from support_tickets.core.settings import get_settings
from support_tickets.core.tracing import make_tracer
from support_tickets.data.session import BOTO_CONFIG, token_exchange
from support_tickets.data.tenant_registry import tenant_configs
from support_tickets.usage import meter

logger = Logger()
tracer = make_tracer()


@cache
def authorizer() -> TenantAuthorizer:
    """Built on first use (the JWKS is fetched on the first token), kept for the container."""
    settings = get_settings()
    verifier = TokenVerifier(
        Jwks(jwks_url(settings.user_pool_provider_name, settings.endpoint_url)),
        issuer(settings.user_pool_provider_name),
        settings.allowed_client_ids,
    )

    exchange = token_exchange()

    def client() -> Any:
        # Not boto3's default session (it keeps the first credentials it resolves): the
        # token exchange's, whose Cognito client has loaded botocore's endpoint data already.
        return exchange.boto3_session.client(
            "dynamodb", region_name=settings.region, endpoint_url=settings.endpoint_url, config=BOTO_CONFIG
        )

    # The pool table: the tenant records stay there whatever a tenant's placement (the authorizer routes nothing).
    return TenantAuthorizer(
        verifier, settings.table_name, client, tenant_configs(), exchange.credentials, cell_id=settings.cell_id
    )


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    meter.start()
    try:
        answer = authorizer().authorize(APIGatewayAuthorizerTokenEvent(event))
    except Unauthorized:
        # The one message API Gateway turns into a 401. An expected event: the
        # runtime's one error record (JSON log format) is all it logs.
        raise Exception("Unauthorized") from None  # API Gateway's contract
    # A verified token's invocation is its tenant's (API Gateway caches the
    # answer per token): one usage line, which the metering function counts;
    # none for a tenant another cell holds (its usage is no item of this table).
    if metered(answer):
        logger.info(
            meter.USAGE_MESSAGE,
            extra={
                CONTEXT_TENANT: answer["context"][CONTEXT_TENANT],
                "usage": meter.invocation_fields("authorizer", context, meter.finish()),
            },
        )
    return answer
