"""The API's Lambda authorizer (functions/authorizer, support_tickets.auth.authorizer):
every kind of bad token is API Gateway's 401, a good one is an Allow for the
whole stage with the caller's context and its tenant's API key."""

from __future__ import annotations

import base64
import io
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.client
import pytest

from local_stack.cognito import user_pool as cognito
from local_stack.cognito.identity_pool import SigningUserPool
from local_stack.lambda_.runtime import LambdaContext
from stack_model.events import SAMPLE_CLIENT_ID
from stack_model.functions import load_handler
from stack_model.template import PROJECT_ROOT, table_definition
from support_tickets.auth import jwks
from support_tickets.data.table import to_item
from support_tickets.data.tenant_registry import TenantConfig, TenantStatus
from tests.conftest import REGION, USER_POOL, USER_POOL_PROVIDER, mocked_aws

METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/v1/GET/tickets"
JWKS_URL = f"https://{USER_POOL_PROVIDER}/.well-known/jwks.json"
Invoke = Callable[..., dict[str, Any]]


@pytest.fixture
def fetches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The user pool's JWKS, as Cognito serves it (no network in tests)."""
    urls: list[str] = []

    def fetch(url: str) -> dict[str, Any]:
        urls.append(url)
        assert url == JWKS_URL
        return cognito.public_jwks(USER_POOL.key)

    monkeypatch.setattr(jwks, "fetch_json", fetch)
    return urls


@pytest.fixture
def records() -> Iterator[Any]:
    with mocked_aws():
        yield boto3.client("dynamodb", region_name=REGION)


def store(client: Any, tenant: str, api_key: str | None = None, tier: str = "basic") -> None:
    record = TenantConfig(tenant_id=tenant, tier=tier, api_key_id="id-" + tenant, api_key=api_key, version=1)
    client.put_item(TableName=table_definition()["TableName"], Item=to_item(record.item()))


@pytest.fixture
def handler(fetches: list[str], records: Any) -> Callable[..., Any]:
    return load_handler(PROJECT_ROOT / "functions" / "authorizer", "app.lambda_handler")


@pytest.fixture
def invoke(handler: Callable[..., Any]) -> Invoke:
    def call(authorization: str, method_arn: str = METHOD_ARN) -> dict[str, Any]:
        event = {"type": "TOKEN", "authorizationToken": authorization, "methodArn": method_arn}
        result: dict[str, Any] = handler(event, LambdaContext("AuthorizerFunction"))
        return result

    return call


def payload(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": str(uuid.uuid4()),
        "iss": f"https://{USER_POOL_PROVIDER}",
        "aud": SAMPLE_CLIENT_ID,
        "token_use": "id",
        "cognito:username": "alice",
        "custom:tenant_id": "acme",
        "iat": now,
        "auth_time": now,
        "exp": now + 3600,
        "jti": str(uuid.uuid4()),
    }
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def test_a_good_token_gets_an_allow_for_the_stage_with_its_tenants_key(invoke: Invoke, records: Any) -> None:
    store(records, "acme", "acme-key-0123456789012345", tier="premium")
    token = USER_POOL.sign(payload(**{"cognito:groups": ["support", "admin"]}))
    answer = invoke(f"Bearer {token}")
    assert answer["usageIdentifierKey"] == "acme-key-0123456789012345"
    (statement,) = answer["policyDocument"]["Statement"]
    assert statement == {
        "Action": "execute-api:Invoke",
        "Effect": "Allow",
        # Every method of the stage: API Gateway reuses the cached answer for every route.
        "Resource": ["arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/v1/*/*"],
    }
    context = answer["context"]
    assert all(isinstance(value, str) for value in context.values())
    assert (context["tenant_id"], context["username"], context["tier"]) == ("acme", "alice", "premium")
    assert json.loads(context["groups"]) == ["support", "admin"]
    assert answer["principalId"] == context["sub"]


@pytest.mark.parametrize(("partition", "region"), [("aws-cn", "cn-north-1"), ("aws-us-gov", "us-gov-west-1")])
def test_the_policy_names_the_partition_of_the_method_arn(
    invoke: Invoke, records: Any, partition: str, region: str
) -> None:
    store(records, "acme", "acme-key-0123456789012345")
    method_arn = f"arn:{partition}:execute-api:{region}:123456789012:a1b2c3d4e5/v1/GET/tickets"
    answer = invoke(f"Bearer {USER_POOL.id_token('acme', 'alice')}", method_arn)
    (statement,) = answer["policyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == [f"arn:{partition}:execute-api:{region}:123456789012:a1b2c3d4e5/v1/*/*"]


OTHER_POOL = SigningUserPool("us-east-1_OTHER", SAMPLE_CLIENT_ID, REGION)


def bad_tokens() -> list[Any]:
    admin = {"cognito:groups": ["admin"]}
    return [
        pytest.param(
            lambda: SigningUserPool("us-east-1_EXAMPLE", SAMPLE_CLIENT_ID, REGION).sign(payload()), id="bad-signature"
        ),
        pytest.param(lambda: OTHER_POOL.sign(payload(iss=f"https://{OTHER_POOL.provider_name}")), id="other-pool"),
        pytest.param(
            lambda: USER_POOL.sign(payload(iss="https://cognito-idp.us-east-1.amazonaws.com/us-east-1_X")),
            id="other-issuer",
        ),
        pytest.param(lambda: USER_POOL.sign(payload(aud="anotherappclient", **admin)), id="other-client-admin"),
        pytest.param(lambda: USER_POOL.sign(payload(aud=[SAMPLE_CLIENT_ID])), id="aud-a-list"),
        pytest.param(
            lambda: USER_POOL.sign(payload(token_use="access", aud=None, client_id=SAMPLE_CLIENT_ID, **admin)),
            id="access-token",
        ),
        pytest.param(lambda: USER_POOL.sign(payload(token_use=None)), id="no-token-use"),
        pytest.param(lambda: USER_POOL.sign(payload(exp=int(time.time()) - 1)), id="expired"),
        pytest.param(lambda: USER_POOL.sign(payload(exp=None)), id="no-expiry"),
        pytest.param(lambda: USER_POOL.sign(payload(exp=str(int(time.time()) + 600))), id="expiry-a-string"),
        pytest.param(lambda: USER_POOL.sign(payload(**{"custom:tenant_id": None})), id="missing-tenant"),
        pytest.param(lambda: USER_POOL.sign(payload(**{"custom:tenant_id": ""})), id="empty-tenant"),
        pytest.param(lambda: USER_POOL.sign(payload(**{"custom:tenant_id": "acme|*"})), id="wildcard-tenant"),
        pytest.param(lambda: USER_POOL.sign(payload(**{"custom:tenant_id": "ACME"})), id="tenant-upper-case"),
        pytest.param(lambda: USER_POOL.sign(payload(**{"cognito:username": None})), id="no-username"),
        pytest.param(lambda: USER_POOL.sign(payload(**{"cognito:groups": "admin"})), id="groups-not-an-array"),
        pytest.param(lambda: "not-a-token", id="malformed"),
        pytest.param(lambda: "a.b.c", id="three-garbage-parts"),
        pytest.param(lambda: "", id="empty"),
        pytest.param(lambda: USER_POOL.sign(payload()) + "x", id="trailing-garbage"),
        pytest.param(lambda: USER_POOL.sign(payload()) + " extra", id="extra-word"),
    ]


@pytest.mark.parametrize("make_token", bad_tokens())
def test_every_kind_of_bad_token_is_unauthorized(invoke: Invoke, records: Any, make_token: Callable[[], str]) -> None:
    store(records, "acme", "acme-key-0123456789012345")
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        invoke(f"Bearer {make_token()}")
    # The control: the same stack accepts a good token.
    assert invoke(f"Bearer {USER_POOL.sign(payload())}")["usageIdentifierKey"]


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", " "])
def test_headers_without_a_bearer_token_are_unauthorized(invoke: Invoke, header: str) -> None:
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        invoke(header)


def same_bytes_other_spelling(segment: str) -> str:
    """The segment with its unused trailing bits set: another base64url
    spelling that decodes to the very same bytes."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    unused = {2: 4, 3: 2}[len(segment) % 4]  # a 256-byte RS256 signature: 342 characters, 4 unused bits
    last = alphabet.index(segment[-1])
    spelled = segment[:-1] + alphabet[last | ((1 << unused) - 1)]
    assert spelled != segment
    assert base64.urlsafe_b64decode(spelled + "==") == base64.urlsafe_b64decode(segment + "==")
    return spelled


@pytest.mark.parametrize(
    "respell",
    [
        pytest.param(lambda token: token, id="bare"),
        pytest.param(lambda token: f"bearer {token}", id="lower-case-scheme"),
        pytest.param(lambda token: f"Bearer  {token}", id="two-spaces"),
        pytest.param(lambda token: f" Bearer {token} ", id="surrounding-spaces"),
        pytest.param(lambda token: f"Bearer {token}==", id="padded-signature"),
        pytest.param(
            lambda token: f"Bearer {token.rsplit('.', 1)[0]}.{same_bytes_other_spelling(token.rsplit('.', 1)[1])}",
            id="signature-trailing-bits",
        ),
    ],
)
def test_one_token_has_one_header_the_others_are_unauthorized(
    invoke: Invoke, records: Any, respell: Callable[[str], str]
) -> None:
    """API Gateway caches answers per header value: every other spelling of a
    token would be another authorizer run, so only ``Bearer <canonical JWT>`` passes."""
    store(records, "acme", "acme-key-0123456789012345")
    token = USER_POOL.sign(payload())
    assert invoke(f"Bearer {token}")["usageIdentifierKey"]
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        invoke(respell(token))


def test_a_tenant_without_an_api_key_is_denied(invoke: Invoke, records: Any) -> None:
    answer = invoke(f"Bearer {USER_POOL.id_token('nobody-onboarded', 'u')}")
    assert "usageIdentifierKey" not in answer
    assert [statement["Effect"] for statement in answer["policyDocument"]["Statement"]] == ["Deny"]
    assert answer["context"]["error_code"] == "FORBIDDEN"


def store_suspended(client: Any, tenant: str, api_key: str) -> None:
    record = TenantConfig(
        tenant_id=tenant, api_key_id="id-" + tenant, api_key=api_key, status=TenantStatus.SUSPENDED, version=2
    )
    client.put_item(TableName=table_definition()["TableName"], Item=to_item(record.item()))


@pytest.mark.parametrize(("suspended", "active"), [("1", "10"), ("10", "1")])
def test_a_suspended_tenant_is_denied_unmetered_and_its_neighbour_allowed(
    invoke: Invoke, records: Any, suspended: str, active: str
) -> None:
    store_suspended(records, suspended, f"key-of-tenant-{suspended}-0123456789")
    store(records, active, f"key-of-tenant-{active}-0123456789")
    answer = invoke(f"Bearer {USER_POOL.id_token(suspended, 'ada')}")
    # Denied for every route (the answer is cached per token), with the reason for the gateway response's body
    (statement,) = answer["policyDocument"]["Statement"]
    assert (statement["Effect"], statement["Resource"]) == ("Deny", [METHOD_ARN.rsplit("/", 2)[0] + "/*/*"])
    assert (answer["context"]["error_code"], answer["context"]["error_message"]) == (
        "TENANT_SUSPENDED",
        "This tenant is suspended; contact your provider.",
    )
    # and not metered: no usage plan key is named
    assert "usageIdentifierKey" not in answer
    allowed = invoke(f"Bearer {USER_POOL.id_token(active, 'bob')}")
    assert [statement["Effect"] for statement in allowed["policyDocument"]["Statement"]] == ["Allow"]
    assert allowed["usageIdentifierKey"] == f"key-of-tenant-{active}-0123456789"
    assert "error_code" not in allowed["context"]


def test_tenants_1_and_10_get_their_own_keys(invoke: Invoke, records: Any) -> None:
    store(records, "1", "key-of-tenant-1-0123456789")
    store(records, "10", "key-of-tenant-10-012345678")
    assert invoke(f"Bearer {USER_POOL.id_token('1', 'a')}")["usageIdentifierKey"] == "key-of-tenant-1-0123456789"
    assert invoke(f"Bearer {USER_POOL.id_token('10', 'b')}")["usageIdentifierKey"] == "key-of-tenant-10-012345678"


def test_the_jwks_and_the_record_are_read_once_per_container(
    invoke: Invoke, records: Any, fetches: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store(records, "acme", "acme-key-0123456789012345")
    reads: list[str] = []
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

    def counting(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "GetItem":
            reads.append(params["Key"]["pk"]["S"])
        return original(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counting)
    for username in ("a", "b", "c"):
        invoke(f"Bearer {USER_POOL.id_token('acme', username)}")
    assert fetches == [JWKS_URL]
    assert reads == ["TENANT#acme|CONFIG"]


def authorizer_log(handler: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """What the authorizer's logger writes (its JSON lines), until the test ends."""
    written = io.StringIO()
    monkeypatch.setattr(sys.modules[handler.__module__].logger.registered_handler, "stream", written)
    return written


def test_a_verified_token_logs_one_usage_line_for_its_tenant_and_a_refused_one_none(
    invoke: Invoke, handler: Callable[..., Any], records: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support_tickets.usage.metering import AUTHORIZER, usage_line

    store(records, "acme", "acme-key-0123456789012345")
    written = authorizer_log(handler, monkeypatch)
    invoke(f"Bearer {USER_POOL.id_token('acme', 'alice')}")
    with pytest.raises(Exception, match="Unauthorized"):
        invoke("Bearer not-a-token")
    lines = [json.loads(text) for text in written.getvalue().splitlines()]
    usage = [line for line in lines if line["message"] == "usage"]
    assert [line["tenant_id"] for line in usage] == ["acme"]
    assert usage[0]["usage"]["function"] == AUTHORIZER
    assert usage[0]["usage"]["memory_mb"] > 0
    # the metering function reads it as one authorizer invocation of acme
    event = {"id": "1", "timestamp": 1_795_600_000_000, "message": json.dumps(usage[0])}
    read = usage_line(event)
    assert read is not None
    assert (read.tenant_id, read.kind, read.route) == ("acme", AUTHORIZER, "")
    # and the refused token wrote nothing of its own (the runtime logs its error, one record)
    assert [line["message"] for line in lines] == ["usage"]


# ---------------------------------------------------------------- cells
CELL = "cell-a"
# The token exchange's calls (support_tickets.data.session): an allowed caller's only.
EXCHANGE_CALLS = {"GetId", "GetCredentialsForIdentity"}


def aws_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every AWS call made from now on: (operation, the record it reads, for a GetItem)."""
    calls: list[tuple[str, str]] = []
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

    def recording(self: Any, operation: str, params: dict[str, Any]) -> Any:
        calls.append((operation, params.get("Key", {}).get("pk", {}).get("S", "")))
        return original(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    return calls


def arrange_record(client: Any, tenant: str, state: str) -> None:
    if state == "present":
        store(client, tenant, f"key-of-tenant-{tenant}-0123456789")
    elif state == "suspended":
        store_suspended(client, tenant, f"key-of-tenant-{tenant}-0123456789")
    elif state == "no-key":
        store(client, tenant, None)
    elif state in ("arriving", "moved-out"):  # a move between cells: this cell's record of it
        cell: dict[str, Any] = {"cell_phase": "ARRIVING", "moving_from": "cell-b"}
        if state == "moved-out":
            cell = {"cell_phase": "MOVED_OUT", "moving_to": "cell-b", "moved_out_at": 1_795_000_000}
        record = TenantConfig(
            tenant_id=tenant, api_key_id="id-" + tenant, api_key=f"key-of-tenant-{tenant}-0123456789", version=1, **cell
        )
        client.put_item(TableName=table_definition()["TableName"], Item=to_item(record.item()))
    else:
        assert state == "absent"


@pytest.mark.parametrize(("tenant", "neighbour"), [("1", "10"), ("10", "1")])
@pytest.mark.parametrize(
    ("cell", "record", "effect", "error_code"),
    [
        pytest.param(None, "present", "Allow", None, id="alone-present"),
        pytest.param(None, "absent", "Deny", "FORBIDDEN", id="alone-absent"),
        pytest.param(None, "suspended", "Deny", "TENANT_SUSPENDED", id="alone-suspended"),
        pytest.param(None, "no-key", "Deny", "FORBIDDEN", id="alone-no-key"),
        pytest.param(CELL, "present", "Allow", None, id="cell-present"),
        # Placed elsewhere: allowed, with a key of no plan (INVALID_API_KEY: 503 TENANT_MOVING)
        pytest.param(CELL, "absent", "Allow", "TENANT_MOVING", id="cell-absent"),
        pytest.param(CELL, "suspended", "Deny", "TENANT_SUSPENDED", id="cell-suspended"),
        pytest.param(CELL, "no-key", "Deny", "FORBIDDEN", id="cell-no-key"),
        # Arriving from another cell: this cell's key (its functions refuse it until the flip)
        pytest.param(CELL, "arriving", "Allow", None, id="cell-arriving"),
        # Moved out to another cell: as placed elsewhere
        pytest.param(CELL, "moved-out", "Allow", "TENANT_MOVING", id="cell-moved-out"),
    ],
)
def test_what_a_verified_caller_gets_alone_and_in_a_cell(
    invoke: Invoke,
    handler: Callable[..., Any],
    records: Any,
    monkeypatch: pytest.MonkeyPatch,
    cell: str | None,
    record: str,
    effect: str,
    error_code: str | None,
    tenant: str,
    neighbour: str,
) -> None:
    from support_tickets.auth.authorizer import MOVING_MESSAGE, NOT_PLACED_HERE_KEY

    # Given: a stack alone or a cell, the caller's tenant in the given state and its neighbour
    # (a prefix of it, or it a prefix of the neighbour) placed here with a key
    if cell is not None:
        monkeypatch.setenv("CELL_ID", cell)
    arrange_record(records, tenant, record)
    store(records, neighbour, f"key-of-tenant-{neighbour}-0123456789")
    written = authorizer_log(handler, monkeypatch)
    calls = aws_calls(monkeypatch)
    # When the caller's verified token is authorized
    answer = invoke(f"Bearer {USER_POOL.id_token(tenant, 'ada')}")
    # Then: one decision for every route of the stage, from the caller's own record alone
    (statement,) = answer["policyDocument"]["Statement"]
    assert (statement["Effect"], statement["Resource"]) == (effect, [METHOD_ARN.rsplit("/", 2)[0] + "/*/*"])
    assert [pk for operation, pk in calls if operation == "GetItem"] == [f"TENANT#{tenant}|CONFIG"]
    context = answer["context"]
    assert (context["tenant_id"], context["username"]) == (tenant, "ada")
    assert context.get("error_code") == error_code
    served = effect == "Allow" and error_code is None
    placed_elsewhere = error_code == "TENANT_MOVING"
    # the tenant's own key when served; a key of no plan when placed elsewhere; none when denied
    expected_key = {True: f"key-of-tenant-{tenant}-0123456789", False: None}[served]
    assert answer.get("usageIdentifierKey") == (NOT_PLACED_HERE_KEY if placed_elsewhere else expected_key)
    if placed_elsewhere:
        assert context["error_message"] == MOVING_MESSAGE
        assert "tier" not in context  # a record this cell does not have says nothing
    # tenant credentials (a Cognito exchange) for a served caller only
    assert ("access_key_id" in context) is served
    assert bool({operation for operation, _ in calls} & EXCHANGE_CALLS) is served
    # and its invocation is its tenant's usage here, unless the tenant is another cell's
    usage = [line for line in map(json.loads, written.getvalue().splitlines()) if line["message"] == "usage"]
    assert [line["tenant_id"] for line in usage] == ([] if placed_elsewhere else [tenant])


@pytest.mark.parametrize("cell", [None, CELL], ids=["alone", "cell"])
@pytest.mark.parametrize("record", ["present", "absent"])
@pytest.mark.parametrize(
    "make_token",
    [
        pytest.param(lambda: OTHER_POOL.sign(payload(**{"custom:tenant_id": "1"})), id="forged"),
        pytest.param(
            lambda: USER_POOL.sign(payload(exp=int(time.time()) - 1, **{"custom:tenant_id": "1"})), id="expired"
        ),
    ],
)
def test_a_bad_token_is_unauthorized_before_any_record_is_read(
    invoke: Invoke,
    records: Any,
    monkeypatch: pytest.MonkeyPatch,
    cell: str | None,
    record: str,
    make_token: Callable[[], str],
) -> None:
    """Whether its tenant exists here, elsewhere or nowhere, a token that fails verification is
    a 401: a cell's 503 for a tenant it does not hold comes only after the token is verified,
    or it would tell a stranger which tenants exist."""
    if cell is not None:
        monkeypatch.setenv("CELL_ID", cell)
    arrange_record(records, "1", record)
    calls = aws_calls(monkeypatch)
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        invoke(f"Bearer {make_token()}")
    assert calls == []  # no record read, no Cognito call
    # The control: a good token of the same tenant reads its record.
    invoke(f"Bearer {USER_POOL.id_token('1', 'ada')}")
    assert ("GetItem", "TENANT#1|CONFIG") in calls
