"""The webhook management routes through their handlers, over moto (KMS
included): register, list, delete, rotate; admins only; tenant 1 against 10;
secrets shown once, stored only as KMS ciphertext bound to their tenant, and
never in a list or a log line."""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from support_tickets.core import keys
from support_tickets.webhooks import urls
from tests.conftest import FRESH_AWS, REGION, all_items, webhook_key_arn
from tests.functional.api_harness import Api, ApiResponse, User, assert_error
from tests.functional.conftest import TENANT_PAIRS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SECRET = re.compile(r"^whsec_[A-Za-z0-9+/]{43}=$")
PUBLIC = "93.184.215.14"
BODY = {"url": "https://hooks.example.com/in", "events": ["ticket.created", "comment.added"], "description": "CRM"}


@pytest.fixture(autouse=True)
def webhook_key(aws: None, monkeypatch: pytest.MonkeyPatch) -> str:
    """The stack's webhook key in moto (named in WEBHOOK_KEY_ARN by the ``aws`` fixture); DNS stubbed."""
    monkeypatch.setattr(urls, "system_resolver", lambda host, port: [PUBLIC])
    return webhook_key_arn()


def create(api: Api, admin: User, **changes: Any) -> ApiResponse:
    return api.call("webhook_create", admin, body={**BODY, **changes})


def webhook_items(dynamodb: DynamoDBClient, table_name: str, tenant_id: str) -> list[dict[str, Any]]:
    return [item for item in all_items(dynamodb, table_name) if item["pk"]["S"] == keys.webhooks_pk(tenant_id)]


def test_register_shows_the_secret_once_and_lists_without_it(api: Api, admin: User) -> None:
    created = create(api, admin)
    assert created.status == 201, created.body
    assert SECRET.fullmatch(created.body["secret"])
    assert created.body["status"] == "ACTIVE"
    assert {k: created.body[k] for k in ("url", "events", "description")} == BODY
    listed = api.call("webhook_list", admin)
    assert listed.status == 200
    assert listed.body == {"items": [{k: v for k, v in created.body.items() if k != "secret"}]}
    assert created.body["secret"] not in json.dumps(listed.body)


def test_the_secret_is_stored_only_as_ciphertext_bound_to_its_tenant_and_webhook(
    api: Api, admin: User, dynamodb: DynamoDBClient, table_name: str, webhook_key: str
) -> None:
    created = create(api, admin).body
    (stored,) = [i for i in webhook_items(dynamodb, table_name, admin.tenant_id) if i["sk"]["S"] != "COUNT"]
    assert created["secret"] not in json.dumps(stored)
    kms = boto3.client("kms", region_name=REGION)
    blob = base64.b64decode(stored["secret"]["S"])
    context = {"tenant_id": admin.tenant_id, "webhook_id": created["webhook_id"]}
    assert kms.decrypt(CiphertextBlob=blob, EncryptionContext=context)["Plaintext"].decode() == created["secret"]
    with pytest.raises(kms.exceptions.InvalidCiphertextException):
        kms.decrypt(CiphertextBlob=blob, EncryptionContext={**context, "tenant_id": admin.tenant_id + "0"})


def test_secrets_never_reach_the_logs(
    api: Api, admin: User, log_lines: Callable[[], list[dict[str, Any]]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    created = create(api, admin).body
    rotated = api.call("webhook_secret", admin, ticket_id=created["webhook_id"]).body
    api.call("webhook_list", admin)
    lines = log_lines()
    assert sum(line.get("message") == "request handled" for line in lines) == 3  # the functions did log
    logged = json.dumps(lines) + caplog.text + json.dumps([vars(record) for record in caplog.records], default=str)
    for secret in (created["secret"], rotated["secret"], created["secret"].removeprefix("whsec_")):
        assert secret not in logged


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/",
        "https://127.0.0.1/",
        "https://169.254.169.254/",
        "https://[::1]/",
        "https://localhost/",
    ],
)
def test_refused_urls_are_400_and_store_nothing(
    api: Api, admin: User, url: str, dynamodb: DynamoDBClient, table_name: str
) -> None:
    assert_error(create(api, admin, url=url), 400, "INVALID_WEBHOOK_URL")
    assert webhook_items(dynamodb, table_name, admin.tenant_id) == []


def test_a_name_resolving_to_a_private_address_is_refused(
    api: Api, admin: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(urls, "system_resolver", lambda host, port: ["10.0.0.7"])
    assert_error(create(api, admin), 400, "INVALID_WEBHOOK_URL")


def test_a_lookup_that_hangs_answers_503_within_the_registrations_bound_and_stores_nothing(
    api: Api, admin: User, monkeypatch: pytest.MonkeyPatch, dynamodb: DynamoDBClient, table_name: str
) -> None:
    # getaddrinfo has no timeout of its own: a nameserver that never answers must not hold the route.
    release = threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        release.wait(10)
        return [PUBLIC]

    monkeypatch.setattr(urls, "system_resolver", hanging)
    monkeypatch.setattr(urls, "REGISTRATION_RESOLVE_SECONDS", 0.05)
    try:
        response = create(api, admin)
    finally:
        release.set()
    assert_error(response, 503, "UNAVAILABLE")
    assert response.header("Retry-After")
    assert webhook_items(dynamodb, table_name, admin.tenant_id) == []


@pytest.mark.parametrize(
    "body",
    [
        {"url": "https://hooks.example.com/"},
        {"url": "https://hooks.example.com/", "events": []},
        {"url": "https://hooks.example.com/", "events": ["ticket.exploded"]},
        {"url": "https://hooks.example.com/", "events": ["ticket.created", "ticket.created"]},
        {**BODY, "secret": "mine"},
    ],
)
def test_bad_bodies_are_400(api: Api, admin: User, body: dict[str, Any]) -> None:
    assert_error(api.call("webhook_create", admin, body=body), 400, "VALIDATION_ERROR")


def test_members_get_403_on_every_route(api: Api, admin: User, user: User) -> None:
    webhook_id = create(api, admin).body["webhook_id"]
    assert_error(create(api, user), 403, "FORBIDDEN")
    assert_error(api.call("webhook_list", user), 403, "FORBIDDEN")
    assert_error(api.call("webhook_delete", user, ticket_id=webhook_id), 403, "FORBIDDEN")
    assert_error(api.call("webhook_secret", user, ticket_id=webhook_id), 403, "FORBIDDEN")


def test_at_most_ten_and_a_delete_frees_a_place(api: Api, admin: User) -> None:
    ids = [create(api, admin).body["webhook_id"] for _ in range(10)]
    assert_error(create(api, admin), 409, "TOO_MANY_WEBHOOKS")
    assert api.call("webhook_delete", admin, ticket_id=ids[0]).status == 204
    assert create(api, admin).status == 201
    assert_error(create(api, admin), 409, "TOO_MANY_WEBHOOKS")
    assert len(api.call("webhook_list", admin).body["items"]) == 10


def test_delete_then_404(api: Api, admin: User) -> None:
    webhook_id = create(api, admin).body["webhook_id"]
    assert api.call("webhook_delete", admin, ticket_id=webhook_id).status == 204
    assert api.call("webhook_list", admin).body == {"items": []}
    assert_error(api.call("webhook_delete", admin, ticket_id=webhook_id), 404, "WEBHOOK_NOT_FOUND")
    assert_error(api.call("webhook_secret", admin, ticket_id=webhook_id), 404, "WEBHOOK_NOT_FOUND")
    for bad in ("nope", "a#b", "x" * 65):
        assert_error(api.call("webhook_delete", admin, ticket_id=bad), 404, "WEBHOOK_NOT_FOUND")


def test_rotation_keeps_the_previous_secret_for_24_hours(
    api: Api, admin: User, dynamodb: DynamoDBClient, table_name: str
) -> None:
    created = create(api, admin).body
    rotated = api.call("webhook_secret", admin, ticket_id=created["webhook_id"])
    assert rotated.status == 200
    assert set(rotated.body) == {"webhook_id", "secret", "previous_secret_expires_at"}
    assert SECRET.fullmatch(rotated.body["secret"])
    assert rotated.body["secret"] != created["secret"]
    (stored,) = [i for i in webhook_items(dynamodb, table_name, admin.tenant_id) if i["sk"]["S"] != "COUNT"]
    kms = boto3.client("kms", region_name=REGION)
    context = {"tenant_id": admin.tenant_id, "webhook_id": created["webhook_id"]}

    def plain(name: str) -> str:
        blob = base64.b64decode(stored[name]["S"])
        return str(kms.decrypt(CiphertextBlob=blob, EncryptionContext=context)["Plaintext"].decode())

    assert (plain("secret"), plain("previous_secret")) == (rotated.body["secret"], created["secret"])
    assert stored["previous_secret_expires_at"]["S"] == rotated.body["previous_secret_expires_at"]
    assert "secret" not in json.dumps(api.call("webhook_list", admin).body)


@FRESH_AWS
@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_another_tenants_webhooks_are_invisible_and_untouchable(
    api: Api, owner: str, other: str, dynamodb: DynamoDBClient, table_name: str
) -> None:
    owner_admin, other_admin = User(owner, "root", admin=True), User(other, "root", admin=True)
    webhook_id = create(api, owner_admin).body["webhook_id"]
    before = webhook_items(dynamodb, table_name, owner)
    assert api.call("webhook_list", other_admin).body == {"items": []}
    assert_error(api.call("webhook_delete", other_admin, ticket_id=webhook_id), 404, "WEBHOOK_NOT_FOUND")
    assert_error(api.call("webhook_secret", other_admin, ticket_id=webhook_id), 404, "WEBHOOK_NOT_FOUND")
    assert webhook_items(dynamodb, table_name, owner) == before
    assert [w["webhook_id"] for w in api.call("webhook_list", owner_admin).body["items"]] == [webhook_id]


def test_a_suspended_tenant_is_refused(api: Api, admin: User, dynamodb: DynamoDBClient, table_name: str) -> None:
    dynamodb.put_item(
        TableName=table_name,
        Item={**keys.tenant_config_key(admin.tenant_id), "status": {"S": "SUSPENDED"}, "shards": {"N": "1"}},
    )
    assert_error(create(api, admin), 403, "TENANT_SUSPENDED")
    assert_error(api.call("webhook_list", admin), 403, "TENANT_SUSPENDED")
