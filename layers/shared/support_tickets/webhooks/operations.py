"""Webhook operations (tenant admins only): register, list, delete, rotate, deliveries, redeliver.

That is: register, list, delete, rotate the secret, list a webhook's deliveries, redeliver one.

docs/webhooks.md is the design. Each operation starts at
:func:`~support_tickets.domain.tenancy.table_for` (a suspended tenant is
refused) and then requires an admin. A secret is generated here from the OS
CSPRNG, encrypted with the caller's own credentials before anything is stored,
returned once, and never logged.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Final

from support_tickets.core import keys
from support_tickets.core.errors import ApiError, DeliveryNotFound, TenantMoving, WebhookNotFound
from support_tickets.core.identity import Caller
from support_tickets.core.ids import new_id
from support_tickets.core.models import CreatedWebhook, CreateWebhookRequest, DeliveryPage, RotatedSecret, WebhookPage
from support_tickets.core.settings import get_settings
from support_tickets.data.session import tenant_clients
from support_tickets.data.table import TenantTable
from support_tickets.domain.tenancy import table_for
from support_tickets.webhooks import urls
from support_tickets.webhooks.admin_repository import DeliveryRepository, SecretSealer, WebhookItem, WebhookRepository
from support_tickets.webhooks.events import ACTIVE
from support_tickets.webhooks.urls import Resolver, check_webhook_url

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - the format's prefix, not a secret
SECRET_BYTES: Final = 32
# How long the previous secret still signs after a rotation.
PREVIOUS_SECRET_VALID: Final = timedelta(hours=24)


def new_secret() -> str:
    """A Standard Webhooks signing secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _admin_table(caller: Caller) -> TenantTable:
    table = table_for(caller)
    caller.require_admin()
    return table


def _writable(table: TenantTable) -> TenantTable:
    """``table``, unless the tenant's writes are paused (its data switching tables):
    503 ``TENANT_MOVING`` before a secret is made or a URL looked up, not after."""
    if table.writes_paused:
        raise TenantMoving()
    return table


def _sealer(caller: Caller) -> SecretSealer:
    key_arn = get_settings().webhook_key_arn
    if key_arn is None:  # a function deployed without WEBHOOK_KEY_ARN: never store a secret unencrypted
        raise ApiError()
    return SecretSealer(tenant_clients().kms_for_caller(caller), key_arn, caller.tenant_id)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def create_webhook(caller: Caller, request: CreateWebhookRequest, resolve: Resolver | None = None) -> CreatedWebhook:
    table = _writable(_admin_table(caller))
    settings = get_settings()
    # A host that does not resolve within the bound is 503 UNAVAILABLE (retry later), not a 400.
    check_webhook_url(
        request.url,
        resolve=resolve or urls.system_resolver,
        allow_local_http=settings.webhook_allow_local_http,
        local_stack_ports=settings.webhook_local_stack_ports,
        timeout=urls.REGISTRATION_RESOLVE_SECONDS,
    )
    webhook_id = new_id()
    secret = new_secret()
    key = keys.webhook_key(table.tenant_id, webhook_id)
    item = WebhookItem(
        pk=key["pk"]["S"],
        sk=key["sk"]["S"],
        webhook_id=webhook_id,
        url=request.url,
        events=list(request.events),
        description=request.description,
        status=ACTIVE,
        created_at=_iso(datetime.now(UTC)),
        secret=_sealer(caller).seal(webhook_id, secret),
    )
    WebhookRepository(table).create_webhook(item)
    return CreatedWebhook(**asdict(item.webhook()), secret=secret)


def list_webhooks(caller: Caller) -> WebhookPage:
    return WebhookPage(items=WebhookRepository(_admin_table(caller)).list_webhooks())


def delete_webhook(caller: Caller, webhook_id: str) -> None:
    WebhookRepository(_admin_table(caller)).delete_webhook(webhook_id)


def rotate_secret(caller: Caller, webhook_id: str) -> RotatedSecret:
    table = _writable(_admin_table(caller))
    repository = WebhookRepository(table)
    if not keys.is_valid_webhook_id(webhook_id):
        raise WebhookNotFound()  # like any other missing webhook, before any KMS call
    secret = new_secret()
    expires_at = _iso(datetime.now(UTC) + PREVIOUS_SECRET_VALID)
    repository.rotate_secret(webhook_id, _sealer(caller).seal(webhook_id, secret), expires_at)
    return RotatedSecret(webhook_id=webhook_id, secret=secret, previous_secret_expires_at=expires_at)


def list_deliveries(caller: Caller, webhook_id: str, limit: int, cursor: str | None) -> DeliveryPage:
    """A page of the webhook's deliveries, newest first (404 for another tenant's or a missing webhook)."""
    return DeliveryRepository(_admin_table(caller)).list_deliveries(webhook_id, limit, cursor)


def redeliver(caller: Caller, webhook_id: str, delivery_id: str) -> None:
    """Send a delivery's event again, soon: the delivery is marked with
    ``redeliver_requested_at`` (listed ``PENDING`` from then on until the
    delivery function records the attempt), and the audit-trail function, which sees that
    change on the table's stream, queues the stored event again (same event id,
    same body; docs/webhooks.md, "Redeliver"). No endpoint beyond DynamoDB's."""
    table = _admin_table(caller)
    if not keys.is_valid_webhook_id(webhook_id):
        raise WebhookNotFound()
    if not keys.is_valid_delivery_id(delivery_id):
        DeliveryRepository(table).require_webhook(webhook_id)
        raise DeliveryNotFound()
    DeliveryRepository(table).request_redelivery(webhook_id, delivery_id, _iso(datetime.now(UTC)))
