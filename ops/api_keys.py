"""Tenants' API keys and the tiers' usage plans, for operators.

One API Gateway API key per tenant, named ``<stack>.<tenant>`` and tagged
``stack`` and ``tenant``, in exactly one usage plan of the stack: its tier's (``UsagePlanBasic``, ``UsagePlanStandard``,
``UsagePlanPremium``; their ids are the stack's ``UsagePlanId<Tier>`` outputs,
or ``usage_plan_ids`` in the local stack's state file). The tenant record holds
the key's id and value (``TenantConfig.api_key_id``/``api_key``): the API's
authorizer reads the value there and names it as the request's
``usageIdentifierKey``, so API Gateway throttles and meters the request under
the tenant's own key, by its tier's plan.

The same calls run against a deployed stack and against the local stack's
emulator (moto), whose API Gateway the local gateway reads the plans from.

API keys belong to the account and Region, not to a stack: several stacks
share one namespace of key names. The ``.`` can be in neither a stack name
(``[A-Za-z][A-Za-z0-9-]*``) nor a tenant id (``[a-z0-9-]``), so no two
(stack, tenant) pairs share a name (with ``-``, stack ``tickets`` + tenant
``staging-acme`` and stack ``tickets-staging`` + tenant ``acme`` did). And a
key is this stack's tenant's only if its tags say so: a key found by name or
named by the tenant record whose tags name another stack or tenant is never
adopted, moved or retired. A key made before the keys were tagged with their
stack (tagged ``tenant`` only) is still the tenant's when its own record
names it: a key adopted by name across stacks always carries another tenant id.

Moving a key between plans (a tier change) removes it from its old plan before
adding it to the new one: API Gateway refuses a key in two plans of the same
stage. Between the two calls (well under a second) the tenant's requests are
refused with API Gateway's ``INVALID_API_KEY`` gateway response, which the
template makes 503 ``TENANT_MOVING`` with ``Retry-After`` (a retry lands in the
new plan); run again, the command finishes a move that was interrupted.

**Offboarded tenants keep their key, as a tombstone** (:meth:`ApiKeys.retire`,
``make offboard``): tagged ``offboarded=<epoch seconds>`` (when the offboarding
began), taken out of every usage plan and disabled (``enabled=false``: the
API reference's ``ApiKey``, "whether the API Key can be used by callers"). A
request whose key is disabled or in no usage plan of the stage gets API
Gateway's ``INVALID_API_KEY`` gateway response (the template's 503
``TENANT_MOVING``: retried once the authorizer's cached answer has gone, it meets
the authorizer's own refusal), so no answer of the authorizer, even one still
cached from before, can have a request metered or served under it (the local
gateway refuses the same: ``local_stack.apigateway.usage_plans``); the
authorizer itself denies a tenant whose record is SUSPENDED or gone (it then has
no key to name) before any key matters.
The tombstone keeps the tenant in the stack's directory (:meth:`ApiKeys.directory`:
``make usage`` bills what it used before it left) and its id taken: a
tombstone is never adopted, placed or enabled again (:class:`KeyRetired`),
so a new tenant can never be onboarded under the id and read the old usage
ledger. A tag is API Gateway's own metadata of the key (``TagResource`` on
``arn:<partition>:apigateway:<region>::/apikeys/<id>``; a key is at most 128
characters of ``[a-zA-Z+-=._:/]``, not starting with ``aws:``, a value at most
256, 50 tags a resource: the API reference's ``TagResource`` and "Tagging your
API Gateway resources",
https://docs.aws.amazon.com/apigateway/latest/developerguide/apigateway-tagging-supported-resources.html).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from support_tickets.core.digits import is_digits
from support_tickets.core.keys import validate_tenant_id
from support_tickets.data.tenant_registry import TIERS

NAME_SEPARATOR: Final = "."
STACK_TAG: Final = "stack"
TENANT_TAG: Final = "tenant"
# On a tombstone: when its tenant's offboarding began (epoch seconds).
OFFBOARDED_TAG: Final = "offboarded"
# CloudFormation's rule for stack names.
_STACK_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,127}")


class ApiKeyError(RuntimeError):
    """A key or plan the stack should have is missing."""


class KeyRetired(ApiKeyError):
    """The tenant's key is a tombstone: the tenant was offboarded, its id is never used again."""

    def __init__(self, tenant_id: str, at: int) -> None:
        super().__init__(f"the API key of tenant {tenant_id} is the tombstone of its offboarding")
        self.tenant_id, self.at = tenant_id, at


def offboarded_at(key: Mapping[str, Any]) -> int | None:
    """When the tenant of a tombstone key (as API Gateway describes it) was
    offboarded, from its ``offboarded`` tag; ``None`` for a live key."""
    tags = key.get("tags") or {}
    if OFFBOARDED_TAG not in tags:
        return None
    value = tags[OFFBOARDED_TAG]
    return int(value) if isinstance(value, str) and is_digits(value) else 0


@dataclass(frozen=True)
class ApiKeys:
    client: Any  # an API Gateway client (operator credentials)
    plan_ids: Mapping[str, str]  # tier -> usage plan id
    stack_name: str

    def __post_init__(self) -> None:
        if not _STACK_NAME.fullmatch(self.stack_name):
            raise ApiKeyError(f"not a stack name: {self.stack_name!r}")

    def key_name(self, tenant_id: str) -> str:
        return f"{self.stack_name}{NAME_SEPARATOR}{validate_tenant_id(tenant_id)}"

    def tags(self, tenant_id: str) -> dict[str, str]:
        return {STACK_TAG: self.stack_name, TENANT_TAG: validate_tenant_id(tenant_id)}

    def is_ours(self, key: Mapping[str, Any], tenant_id: str, *, named_by_record: bool = False) -> bool:
        """Whether ``key`` (as API Gateway describes it) is this stack's key of the tenant, by its tags."""
        tags = key.get("tags") or {}
        if tags.get(TENANT_TAG) != tenant_id:
            return False
        return tags.get(STACK_TAG) == self.stack_name or (named_by_record and STACK_TAG not in tags)

    def plan_id(self, tier: str) -> str:
        if tier not in TIERS:
            raise ApiKeyError(f"unknown tier {tier!r}")
        try:
            return self.plan_ids[tier]
        except KeyError as exc:
            raise ApiKeyError(f"the stack has no usage plan for tier {tier!r}") from exc

    def ensure(self, tenant_id: str, key_id: str | None = None) -> tuple[str, str]:
        """The tenant's key ``(id, value)``: ``key_id`` if it still exists, else
        the key named for the tenant, else a new one (API Gateway makes the value).
        :class:`KeyRetired` if that key is a tombstone (nothing is made)."""
        found = self.describe(tenant_id, key_id)
        if found is not None:
            at = offboarded_at(found)
            if at is not None:
                raise KeyRetired(tenant_id, at)
            return str(found["id"]), str(found["value"])
        created = self.client.create_api_key(
            name=self.key_name(tenant_id),
            description=f"tenant {tenant_id}: identifies its usage plan (never sent by clients)",
            enabled=True,
            tags=self.tags(tenant_id),
        )
        return str(created["id"]), str(created["value"])

    def find(self, tenant_id: str, key_id: str | None = None) -> tuple[str, str] | None:
        """The tenant's existing key ``(id, value)`` (a tombstone too): :meth:`describe`."""
        found = self.describe(tenant_id, key_id)
        return None if found is None else (str(found["id"]), str(found["value"]))

    def describe(self, tenant_id: str, key_id: str | None = None) -> dict[str, Any] | None:
        """The tenant's existing key as API Gateway describes it (with its value
        and tags): ``key_id`` (the record's) if it exists, else the key named for
        the tenant; either only if its tags make it this stack's key of this
        tenant (:meth:`is_ours`); ``None`` when there is none."""
        if key_id:
            try:
                found = self.client.get_api_key(apiKey=key_id, includeValue=True)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "NotFoundException":
                    raise
            else:
                if self.is_ours(found, tenant_id, named_by_record=True):
                    return {name: value for name, value in found.items() if name != "ResponseMetadata"}
        name = self.key_name(tenant_id)
        position: str | None = None
        while True:
            kwargs: dict[str, Any] = {"nameQuery": name, "includeValues": True, "limit": 500}
            if position:
                kwargs["position"] = position
            page = self.client.get_api_keys(**kwargs)
            for item in page.get("items", []):
                # nameQuery is a prefix match; a name is no proof of ownership, the tags are.
                if item.get("name") == name and self.is_ours(item, tenant_id):
                    return dict(item)
            position = page.get("position")
            if not position:
                return None

    def tenants(self) -> list[str]:
        """Every tenant with an API key of this stack (its tags say so), sorted,
        offboarded ones (tombstones) included: :meth:`directory`."""
        return sorted(self.directory())

    def directory(self) -> dict[str, int | None]:
        """The stack's tenant directory, without a Scan of the table: every tenant
        with an API key of this stack (its tags say so), and when it was
        offboarded (its key a tombstone, :func:`offboarded_at`) or ``None``."""
        found: dict[str, int | None] = {}
        position: str | None = None
        while True:
            kwargs: dict[str, Any] = {"nameQuery": f"{self.stack_name}{NAME_SEPARATOR}", "limit": 500}
            if position:
                kwargs["position"] = position
            page = self.client.get_api_keys(**kwargs)
            for item in page.get("items", []):
                tenant_id = item.get("tags", {}).get(TENANT_TAG)
                # Named for the tenant its tags name, and tagged as this stack's.
                if (
                    isinstance(tenant_id, str)
                    and item.get("name") == f"{self.stack_name}{NAME_SEPARATOR}{tenant_id}"
                    and self.is_ours(item, tenant_id)
                ):
                    at = offboarded_at(item)
                    # A live key of the tenant, if it has one, says it is current.
                    live = at is None or (tenant_id in found and found[tenant_id] is None)
                    found[tenant_id] = None if live else at
            position = page.get("position")
            if not position:
                return dict(sorted(found.items()))

    def retire(self, tenant_id: str, key_id: str | None, at: int) -> bool:
        """Make the tenant's key (of this stack and tenant, by its tags:
        :meth:`describe`) its tombstone (the offboarding): tagged
        ``offboarded=<at>`` first (from then on nothing adopts, places or
        enables it), then out of every usage plan, then disabled. Whether there
        was a key. Run again, it finishes an interrupted run and keeps the
        first time."""
        found = self.describe(tenant_id, key_id)
        if found is None:
            return False
        key = str(found["id"])
        if offboarded_at(found) is None:
            self.client.tag_resource(resourceArn=self.key_arn(key), tags={OFFBOARDED_TAG: str(int(at))})
        for plan in self.client.get_usage_plans(keyId=key, limit=500).get("items", []):
            self.client.delete_usage_plan_key(usagePlanId=plan["id"], keyId=key)
        if found.get("enabled", False):
            self.client.update_api_key(
                apiKey=key, patchOperations=[{"op": "replace", "path": "/enabled", "value": "false"}]
            )
        return True

    def delete(self, tenant_id: str, key_id: str | None = None) -> bool:
        """Delete the tenant's live key (of this stack and tenant, by its tags:
        :meth:`describe`; a tombstone stays), out of every usage plan first: its
        tenant moved to another cell, whose key it has now. Whether there was one."""
        found = self.describe(tenant_id, key_id)
        if found is None or offboarded_at(found) is not None:
            return False
        key = str(found["id"])
        for plan in self.client.get_usage_plans(keyId=key, limit=500).get("items", []):
            self.client.delete_usage_plan_key(usagePlanId=plan["id"], keyId=key)
        self.client.delete_api_key(apiKey=key)
        return True

    def key_arn(self, key_id: str) -> str:
        """The key's ARN, as ``TagResource`` names it."""
        meta = self.client.meta
        return f"arn:{meta.partition}:apigateway:{meta.region_name}::/apikeys/{key_id}"

    def plans_of(self, key_id: str) -> set[str]:
        """The ids of this stack's plans that hold the key."""
        ours = set(self.plan_ids.values())
        plans = self.client.get_usage_plans(keyId=key_id, limit=500).get("items", [])
        return {plan["id"] for plan in plans if plan["id"] in ours}

    def place(self, key_id: str, tier: str) -> bool:
        """Put the key in its tier's plan and in no other plan of the stack;
        whether anything changed."""
        target = self.plan_id(tier)
        current = self.plans_of(key_id)
        for plan_id in current - {target}:
            self.client.delete_usage_plan_key(usagePlanId=plan_id, keyId=key_id)
        if target in current:
            return bool(current - {target})
        self.client.create_usage_plan_key(usagePlanId=target, keyId=key_id, keyType="API_KEY")
        return True
