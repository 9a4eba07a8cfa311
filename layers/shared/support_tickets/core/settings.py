"""Function configuration from environment variables, validated once per container.

Plain checks, not a pydantic model: every function reads its settings on its
cold start, and pydantic's import alone costs a function a quarter of the cold
start of a bare boto3 one (bench/results.md, "Cold start as shipped").
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

# How stale a container's copy of a tenant record may be (support_tickets.data.tenant_registry);
# resharding (ops.tenants) waits this long between its phases.
DEFAULT_TENANT_CONFIG_TTL_SECONDS = 30
# Cognito's ClientId: 1-128 word characters or "+".
_CLIENT_ID = re.compile(r"[\w+]{1,128}", re.ASCII)
# Cognito's IdentityPoolId: <region>:<GUID> (API reference: [\w-]+:[0-9a-f-]+, at most 55).
_IDENTITY_POOL_ID = re.compile(r"[\w-]+:[0-9a-f-]+", re.ASCII)
# A user pool's ProviderName (its GetAtt): cognito-idp.<region>.amazonaws.com/<user pool id>.
_USER_POOL_PROVIDER = re.compile(r"cognito-idp\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[\w-]+_[0-9a-zA-Z]+", re.ASCII)

# A KMS key's ARN: arn:<partition>:kms:<region>:<account>:key/<key id>.
_KMS_KEY_ARN = re.compile(r"arn:aws[\w-]*:kms:[a-z0-9-]+:\d{12}:key/[\w-]+", re.ASCII)
# A cell's id, written as a tenant id is: what the router's store (ops.cell_routes,
# router/edge_router.js) and template.yaml's CellId accept.
_CELL_ID = re.compile(r"[a-z0-9-]{1,63}", re.ASCII)


@dataclass(frozen=True)
class Settings:
    """What `template.yaml` puts in every function's environment (each field's
    variable: :func:`variables`)."""

    table_name: str
    # The app clients whose ID tokens the authorizer accepts (comma-separated): a
    # token the pool issued to any other client is refused (support_tickets.auth.authorizer).
    allowed_client_ids: frozenset[str]
    # The Logins key of the user pool that issued the token (its ProviderName).
    user_pool_provider_name: str
    # Where the authorizer turns a caller's ID token into tenant credentials
    # (support_tickets.data.session): the identity pool (the authorizer's
    # environment only: the API functions never call Cognito).
    identity_pool_id: str | None = None
    region: str = "us-east-1"
    # Local development only (docs/local-stack.md, sam local): empty when deployed.
    endpoint_url: str | None = None
    tenant_config_ttl_seconds: float = DEFAULT_TENANT_CONFIG_TTL_SECONDS
    # The KMS key webhook secrets are encrypted with (the webhook functions' environment only).
    webhook_key_arn: str | None = None
    # The local stack only: also accept http://127.0.0.1:<port> webhook URLs...
    webhook_allow_local_http: bool = False
    # ...but never on these ports: the local stack's own listeners (its emulator, whose
    # /_local/ control endpoints move the whole stack, its endpoint listener, its API).
    webhook_local_stack_ports: frozenset[int] = frozenset()
    # The cell this stack is (the authorizer's environment only): it serves only the
    # tenants placed in it (support_tickets.auth.authorizer). None: a stack deployed alone.
    cell_id: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        """The settings in ``environ``; every variable that is missing or
        invalid is named in one :class:`ConfigurationError`."""
        values: dict[str, Any] = {}
        invalid: list[str] = []
        for name, (variable, parse) in _VARIABLES.items():
            raw = environ.get(variable)
            try:
                parsed = parse(raw)
            except (TypeError, ValueError):
                invalid.append(variable)
                continue
            if parsed is not _DEFAULT:
                values[name] = parsed
        if invalid:
            raise ConfigurationError(f"invalid or missing environment variables: {', '.join(invalid)}")
        return cls(**values)


_DEFAULT: Any = object()  # the variable is unset: the field's default


def _required(check: Callable[[str], Any]) -> Callable[[str | None], Any]:
    def parse(raw: str | None) -> Any:
        if raw is None:
            raise ValueError("missing")
        return check(raw)

    return parse


def _optional(check: Callable[[str], Any], *, empty_is_none: bool = False) -> Callable[[str | None], Any]:
    def parse(raw: str | None) -> Any:
        if raw is None:
            return _DEFAULT
        if empty_is_none and not raw:
            return None
        return check(raw)

    return parse


def _matching(pattern: re.Pattern[str], max_length: int | None = None) -> Callable[[str], str]:
    def check(raw: str) -> str:
        if not pattern.fullmatch(raw) or (max_length is not None and len(raw) > max_length):
            raise ValueError(raw)
        return raw

    return check


def _table_name(raw: str) -> str:
    if len(raw) < 3:
        raise ValueError(raw)
    return raw


def _client_ids(raw: str) -> frozenset[str]:
    ids = [part.strip() for part in raw.split(",")] if raw.strip() else []
    if not ids or any(not _CLIENT_ID.fullmatch(client_id) for client_id in ids):
        raise ValueError(raw)
    return frozenset(ids)


def _number(kind: Callable[[str], float], low: float, high: float) -> Callable[[str], Any]:
    def check(raw: str) -> Any:
        value = kind(raw.strip())
        if not low <= value <= high:
            raise ValueError(raw)
        return value

    return check


def _ports(raw: str) -> frozenset[int]:
    ports = frozenset(int(part) for part in raw.split(",") if part.strip())
    if any(not 1 <= port <= 65535 for port in ports):
        raise ValueError(raw)
    return ports


def _any(raw: str) -> str:
    return raw


def _boolean(raw: str) -> bool:
    if raw not in {"true", "false"}:
        raise ValueError(raw)
    return raw == "true"


# Field -> (its environment variable, how its value is read).
_VARIABLES: dict[str, tuple[str, Callable[[str | None], Any]]] = {
    "table_name": ("TABLE_NAME", _required(_table_name)),
    "allowed_client_ids": ("ALLOWED_CLIENT_IDS", _required(_client_ids)),
    "user_pool_provider_name": ("USER_POOL_PROVIDER_NAME", _required(_matching(_USER_POOL_PROVIDER))),
    "identity_pool_id": ("IDENTITY_POOL_ID", _optional(_matching(_IDENTITY_POOL_ID, max_length=55))),
    "region": ("AWS_REGION", _optional(_any)),
    "endpoint_url": ("AWS_ENDPOINT_OVERRIDE", _optional(_any, empty_is_none=True)),
    "tenant_config_ttl_seconds": ("TENANT_CONFIG_TTL_SECONDS", _optional(_number(float, 0, 300))),
    "webhook_key_arn": ("WEBHOOK_KEY_ARN", _optional(_matching(_KMS_KEY_ARN))),
    "webhook_allow_local_http": ("WEBHOOK_ALLOW_LOCAL_HTTP", _optional(_boolean)),
    "webhook_local_stack_ports": ("WEBHOOK_LOCAL_STACK_PORTS", _optional(_ports)),
    "cell_id": ("CELL_ID", _optional(_matching(_CELL_ID), empty_is_none=True)),
}


def variables() -> dict[str, str]:
    """Each setting's environment variable (every field of :class:`Settings`, a test holds it)."""
    return {name: variable for name, (variable, _) in _VARIABLES.items()}


class ConfigurationError(RuntimeError):
    """A function was deployed without the environment it needs."""


@cache
def get_settings() -> Settings:
    """Read and validate the environment on first use (cold start), then reuse it."""
    return Settings.from_environment(os.environ)
