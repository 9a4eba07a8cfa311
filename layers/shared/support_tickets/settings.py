"""Function configuration from environment variables, validated once per container."""

from __future__ import annotations

import os
import re
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# How stale a container's copy of a tenant record may be (support_tickets.tenant_registry);
# resharding (ops.tenants) waits this long between its phases.
DEFAULT_TENANT_CONFIG_TTL_SECONDS = 30
# Cognito's ClientId: 1-128 word characters or "+".
_CLIENT_ID = re.compile(r"[\w+]{1,128}", re.ASCII)


class Settings(BaseModel):
    """What `template.yaml` puts in every function's environment."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    table_name: str = Field(alias="TABLE_NAME", min_length=3)
    # The app clients whose ID tokens the API accepts (comma-separated): API
    # Gateway's Cognito authorizer checks neither the audience nor the token use.
    allowed_client_ids: frozenset[str] = Field(alias="ALLOWED_CLIENT_IDS", min_length=1)
    tenant_role_arn: str = Field(default="", alias="TENANT_ROLE_ARN")
    region: str = Field(default="us-east-1", alias="AWS_REGION")
    # Local development only (see README "sam local"): empty when deployed.
    endpoint_url: str | None = Field(default=None, alias="AWS_ENDPOINT_OVERRIDE")
    # Role chaining caps sessions at one hour; renew this long before expiry.
    tenant_session_seconds: int = Field(default=3600, alias="TENANT_SESSION_SECONDS", ge=900, le=3600)
    tenant_session_renew_before_seconds: int = Field(default=300, alias="TENANT_SESSION_RENEW_BEFORE_SECONDS", ge=0)
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
