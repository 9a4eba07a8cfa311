"""Function configuration from environment variables, validated once per container."""

from __future__ import annotations

import os
import re
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# How stale a container's copy of a tenant record may be (support_tickets.data.tenant_registry);
# resharding (ops.tenants) waits this long between its phases.
DEFAULT_TENANT_CONFIG_TTL_SECONDS = 30
DEFAULT_CREDENTIALS_RENEW_BEFORE_SECONDS = 600
# Cognito's ClientId: 1-128 word characters or "+".
_CLIENT_ID = re.compile(r"[\w+]{1,128}", re.ASCII)
# Cognito's IdentityPoolId: <region>:<GUID> (API reference: [\w-]+:[0-9a-f-]+, at most 55).
_IDENTITY_POOL_ID = re.compile(r"[\w-]+:[0-9a-f-]+", re.ASCII)
# A user pool's ProviderName (its GetAtt): cognito-idp.<region>.amazonaws.com/<user pool id>.
_USER_POOL_PROVIDER = re.compile(r"cognito-idp\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[\w-]+_[0-9a-zA-Z]+", re.ASCII)


class Settings(BaseModel):
    """What `template.yaml` puts in every function's environment."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    table_name: str = Field(alias="TABLE_NAME", min_length=3)
    # The app clients whose ID tokens the API accepts (comma-separated): API
    # Gateway's Cognito authorizer checks neither the audience nor the token use.
    allowed_client_ids: frozenset[str] = Field(alias="ALLOWED_CLIENT_IDS", min_length=1)
    # Where the authorizer turns a caller's ID token into tenant credentials
    # (support_tickets.data.session): the identity pool (the authorizer's
    # environment only: the API functions never call Cognito), and the Logins
    # key of the user pool that issued the token.
    identity_pool_id: str | None = Field(
        default=None, alias="IDENTITY_POOL_ID", max_length=55, pattern=_IDENTITY_POOL_ID.pattern
    )
    user_pool_provider_name: str = Field(alias="USER_POOL_PROVIDER_NAME", pattern=_USER_POOL_PROVIDER.pattern)
    region: str = Field(default="us-east-1", alias="AWS_REGION")
    # Local development only (docs/local-stack.md, sam local): empty when deployed.
    endpoint_url: str | None = Field(default=None, alias="AWS_ENDPOINT_OVERRIDE")
    # The authorizer gives cached credentials up this long before they (or the
    # token they came from) expire: longer than API Gateway's authorizer cache
    # (ReauthorizeEvery, 300 s) plus the longest function timeout (29 s), so
    # credentials API Gateway serves from its cache never expire during a
    # request (tests/unit/test_template.py holds the template to it).
    credentials_renew_before_seconds: int = Field(
        default=DEFAULT_CREDENTIALS_RENEW_BEFORE_SECONDS, alias="CREDENTIALS_RENEW_BEFORE_SECONDS", ge=30, le=1800
    )
    tenant_config_ttl_seconds: float = Field(
        default=DEFAULT_TENANT_CONFIG_TTL_SECONDS, alias="TENANT_CONFIG_TTL_SECONDS", ge=0, le=300
    )

    @field_validator("allowed_client_ids", mode="before")
    @classmethod
    def _client_ids(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        ids = [part.strip() for part in value.split(",")] if value.strip() else []
        invalid = [client_id for client_id in ids if not _CLIENT_ID.fullmatch(client_id)]
        if invalid:
            raise ValueError(f"not app client ids: {invalid}")
        return frozenset(ids)

    @field_validator("endpoint_url", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return value or None


class ConfigurationError(RuntimeError):
    """A function was deployed without the environment it needs."""


@cache
def get_settings() -> Settings:
    """Read and validate the environment on first use (cold start), then reuse it."""
    try:
        return Settings.model_validate(dict(os.environ))
    except ValidationError as exc:
        missing = ", ".join(str(err["loc"][0]) for err in exc.errors())
        raise ConfigurationError(f"invalid or missing environment variables: {missing}") from exc
