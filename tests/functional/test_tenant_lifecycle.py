"""A tenant's lifecycle over moto: suspended (403 TENANT_SUSPENDED on every
route, data untouched) and reactivated; exported (JSON lines); offboarded
(every item and user of tenant ``1`` erased, ``10`` and ``1-a`` untouched item
for item, without a Scan, resumable, idempotent, refused without CONFIRM)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError

from ops import export, offboard, tenants
from ops.api_keys import ApiKeys, offboarded_at
from ops.offboard import LEDGER, VERIFY_SEGMENTS, OffboardError, Offboarding
from ops.sample_events import delivery_item
from ops.stack_target import Target
from ops.tenant_data import Progress, ledger_partitions
from ops.tenants import TenantAdmin
from support_tickets.core import keys
from support_tickets.core.identity import TENANT_CLAIM
from support_tickets.data.audit_items import epoch_of, iso_time
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.data.tenant_registry import TIERS, TenantConfigCache, TenantStatus, read_tenant_config
from support_tickets.streams.audit_events import audit_record
from support_tickets.streams.audit_writer import audit_writer
from tests.conftest import INT_ODDITIES, NOT_ASCII_NUMBERS, REGION, all_items, instant_tenant_admin, random_tenant_id
from tests.functional.api_harness import ROUTES, Api, User, assert_error, aws_calls, new_subject, sample_request
from tests.functional.conftest import OPERATOR_STATE, STACK_NAME, Snapshot, local_state_file, stack_usage_plans
from tests.functional.stream_harness import StreamHarness

if TYPE_CHECKING:
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient
    from mypy_boto3_dynamodb import DynamoDBClient


class FakeClock:
    def __init__(self, now: float = 1_795_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def admin_tool(aws: None, dynamodb: DynamoDBClient, table_name: str) -> TenantAdmin:
    return instant_tenant_admin(dynamodb, table_name)


# ---------------------------------------------------------------- suspension
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_suspended_tenant_is_403_on_every_route_with_its_data_untouched(
    api: Api, user: User, admin_tool: TenantAdmin, snapshot: Snapshot, route: str
) -> None:
    ticket_id = new_subject(api, route, user)
    admin_tool.set_status(user.tenant_id, TenantStatus.SUSPENDED)
    other = User("1" if user.tenant_id != "1" else "10")
    theirs = new_subject(api, route, other)
    api_fresh = Api()
    from support_tickets.data.tenant_registry import tenant_configs

    tenant_configs.cache_clear()  # a container that reads the record now (or after the TTL)
    before = snapshot()
    response = sample_request(api_fresh, route, user, ticket_id)
    assert_error(response, 403, "TENANT_SUSPENDED")
    assert snapshot() == before
    # another tenant is not affected
    assert sample_request(api_fresh, route, other, theirs).status == ROUTES[route].needs.success
    # reactivated: access is back
    admin_tool.set_status(user.tenant_id, TenantStatus.ACTIVE)
    tenant_configs.cache_clear()
    assert sample_request(api_fresh, route, user, ticket_id).status == ROUTES[route].needs.success


def test_a_suspension_reaches_a_warm_container_within_the_ttl_at_no_cost_per_request(
    api: Api, user: User, admin_tool: TenantAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    cache = TenantConfigCache(30, clock=clock)
    import support_tickets.domain.tenancy as domain

    monkeypatch.setattr(domain, "tenant_configs", lambda: cache)
    ticket_id = api.new_ticket(user)["ticket_id"]
    assert api.summary(user, ticket_id).status == 200  # the container has read the record
    # warm: one DynamoDB call (the ticket), the record comes from the cache
    with aws_calls() as calls:
        assert api.summary(user, ticket_id).status == 200
    assert [operation for service, operation, _ in calls if service == "dynamodb"] == ["GetItem"]
    assert calls[-1][2]["Key"]["sk"]["S"] == "SUMMARY"
    admin_tool.set_status(user.tenant_id, TenantStatus.SUSPENDED)
    clock.sleep(29)
    assert api.summary(user, ticket_id).status == 200  # within the TTL: still served
    clock.sleep(1)
    assert_error(api.summary(user, ticket_id), 403, "TENANT_SUSPENDED")  # at most 30 s later


def test_the_status_command_changes_it_says_how_long_it_takes_and_refuses_bad_values(
    aws: None, dynamodb: DynamoDBClient, table_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = local_state_file(tmp_path, table_name)
    local = ["--local", "--local-state", str(state)]
    TenantAdmin(dynamodb, table_name).ensure("acme")  # onboarded
    assert tenants.main(["--tenant", "acme", "--status", "SUSPENDED", *local]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["status"] == "SUSPENDED"
    assert "TENANT_CONFIG_TTL_SECONDS" in err
    assert "30 s" in err
    assert tenants.main(["--tenant", "acme", "--status", "ACTIVE", *local]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "ACTIVE"
    before = all_items(dynamodb, table_name)
    assert tenants.main(["--tenant", "acme", "--status", "FROZEN", *local]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "unknown status" in error
    assert all_items(dynamodb, table_name) == before


@pytest.mark.parametrize("shards", [*NOT_ASCII_NUMBERS, *INT_ODDITIES, "0", "65"])
def test_a_shard_count_is_ascii_digits_from_1_to_64(
    aws: None,
    dynamodb: DynamoDBClient,
    table_name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    shards: str,
) -> None:
    local = ["--local", "--local-state", str(local_state_file(tmp_path, table_name))]
    TenantAdmin(dynamodb, table_name).ensure("acme")  # onboarded
    assert tenants.main(["--tenant", "acme", *local]) == 0
    capsys.readouterr()
    before = all_items(dynamodb, table_name)
    assert tenants.main(["--tenant", "acme", "--shards", shards, *local]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    assert all_items(dynamodb, table_name) == before


# ---------------------------------------------------------------- the world of three tenants
@pytest.fixture
def streams(aws: None) -> Any:
    return boto3.client("dynamodbstreams", region_name=REGION)


@pytest.fixture
def pool(aws: None) -> tuple[CognitoIdentityProviderClient, str]:
    cognito = boto3.client("cognito-idp", region_name=REGION)
    pool_id = cognito.create_user_pool(
        PoolName="p", Schema=[{"Name": "tenant_id", "AttributeDataType": "String", "Mutable": False}]
    )["UserPool"]["Id"]
    return cognito, pool_id


def users_of(pool: tuple[CognitoIdentityProviderClient, str]) -> dict[str, str]:
    cognito, pool_id = pool
    found = {}
    for user in cognito.list_users(UserPoolId=pool_id)["Users"]:
        attributes = {item["Name"]: item["Value"] for item in user["Attributes"]}
        found[user["Username"]] = attributes.get(TENANT_CLAIM, "")
    return found


@pytest.fixture
def populate(
    api: Api,
    dynamodb: DynamoDBClient,
    table_name: str,
    streams: Any,
    pool: tuple[CognitoIdentityProviderClient, str],
    admin_tool: TenantAdmin,
) -> Callable[[str, int], None]:
    """Give a tenant every kind of item: tickets with comments (over 4 shards),
    a deleted ticket, an idempotency record, counts and journals, its trail,
    its record, and users."""
    counts = StreamHarness(dynamodb, streams, table_name)
    audit = StreamHarness.of("AuditTrailFunction", dynamodb, streams, table_name)
    cognito, pool_id = pool

    def populate(tenant: str, tickets: int = 4) -> None:
        admin_tool.reshard(tenant, 4)
        member, root = User(tenant, f"alice-{tenant}"), User(tenant, f"root-{tenant}", admin=True)
        ids = [api.new_ticket(member, title=f"{tenant} {n}")["ticket_id"] for n in range(tickets)]
        for ticket_id in ids:
            assert api.comment(member, ticket_id, {"body": "c"}).status == 201
        assert api.update(member, ids[0], {"status": "CLOSED"}).ok
        assert api.create(member, {"title": "once"}, headers={"Idempotency-Key": "k"}).status == 201
        assert api.delete(root, ids[-1]).status == 204
        # A webhook, and a delivery of it (the delivery function's, seeded)
        hook = api.call("webhook_create", root, body=ROUTES["webhook_create"].body(""))
        assert hook.status == 201, hook.body
        dynamodb.put_item(TableName=table_name, Item=delivery_item(tenant, hook.body["webhook_id"]))
        counts.deliver(counts.new_records())
        audit.deliver(audit.new_records())
        for name in (member.username, root.username):
            cognito.admin_create_user(
                UserPoolId=pool_id, Username=name, UserAttributes=[{"Name": TENANT_CLAIM, "Value": tenant}]
            )

    return populate


def items_of(dynamodb: DynamoDBClient, table_name: str, tenant: str) -> list[dict[str, Any]]:
    return [item for item in all_items(dynamodb, table_name) if item["pk"]["S"].startswith(keys.tenant_prefix(tenant))]


def left_of(dynamodb: DynamoDBClient, table_name: str, tenant: str) -> list[dict[str, Any]]:
    """The tenant's items but its usage ledger (which an offboarding keeps)."""
    return [item for item in items_of(dynamodb, table_name, tenant) if item["pk"]["S"] not in ledger_partitions(tenant)]


def offboarding(
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
    clock: FakeClock,
    grace: float = 0,
) -> Offboarding:
    target = Target(dynamodb, table_name, pool[0], pool[1], audit_retention_days=400)
    admin = TenantAdmin(dynamodb, table_name, phase_seconds=35, sleep=clock.sleep, clock=clock)
    return Offboarding(
        target,
        admin,
        grace_seconds=grace,
        sleep=clock.sleep,
        clock=clock,
        progress=Progress("erased", io.StringIO()),
        api_keys=stack_api_keys(),
    )


def stack_api_keys() -> ApiKeys:
    """The API keys of the mocked stack, in its three plans."""
    return ApiKeys(boto3.client("apigateway", region_name="us-east-1"), stack_usage_plans(), STACK_NAME)


def api_key_plans(keys_of_stack: ApiKeys, tenant: str) -> set[str] | None:
    """The plans holding the tenant's key; None when it has no key."""
    found = keys_of_stack.find(tenant)
    return None if found is None else keys_of_stack.plans_of(found[0])


# ---------------------------------------------------------------- API keys
def keys_of_another_stack(stack_name: str) -> ApiKeys:
    """A second stack's API keys, with its own plans, in the same account and Region."""
    apigateway = boto3.client("apigateway", region_name="us-east-1")
    plans = {tier: apigateway.create_usage_plan(name=f"{stack_name}-{tier}")["id"] for tier in TIERS}
    return ApiKeys(apigateway, plans, stack_name)


def tombstone(keys_of_stack: ApiKeys, tenant: str, key_id: str | None = None) -> dict[str, Any]:
    """The tenant's key, checked to be its offboarding's tombstone: tagged
    ``offboarded``, disabled, in no usage plan at all."""
    key = keys_of_stack.describe(tenant, key_id)
    assert key is not None
    assert offboarded_at(key) is not None, key
    assert key["enabled"] is False
    assert keys_of_stack.client.get_usage_plans(keyId=key["id"])["items"] == []
    return key


def key_exists(key_id: str) -> bool:
    try:
        boto3.client("apigateway", region_name="us-east-1").get_api_key(apiKey=key_id)
    except ClientError:
        return False
    return True


def test_api_keys_of_two_stacks_never_share_a_name_nor_adopt_each_other(aws: None) -> None:
    # Given stack "tickets" with tenant "staging-acme", and stack "tickets-staging" with tenant "acme"
    tickets, staging = keys_of_another_stack("tickets"), keys_of_another_stack("tickets-staging")
    assert tickets.key_name("staging-acme") != staging.key_name("acme")
    theirs, _ = tickets.ensure("staging-acme")
    tickets.place(theirs, "basic")
    described_theirs = tickets.describe("staging-acme", theirs)
    # When the second stack onboards its tenant: its own key, tagged with its stack and tenant
    mine, _ = staging.ensure("acme")
    assert mine != theirs
    described = boto3.client("apigateway", region_name="us-east-1").get_api_key(apiKey=mine)
    assert described["tags"] == {"stack": "tickets-staging", "tenant": "acme"}
    # And when it offboards the tenant, even with a record naming the other stack's key (as the
    # name alone once made it adopt), it retires its own key only
    assert staging.retire("acme", theirs, 1_795_000_000) is True
    assert tombstone(staging, "acme")["id"] == mine
    assert tickets.describe("staging-acme", theirs) == described_theirs
    assert tickets.plans_of(theirs) == {tickets.plan_id("basic")}
    # (again: the same tombstone, tagged with the first time)
    assert staging.retire("acme", theirs, 1_795_000_999) is True
    assert offboarded_at(tombstone(staging, "acme")) == 1_795_000_000


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_a_key_whose_tags_are_not_the_stacks_tenants_is_never_adopted(aws: None, tenant: str, other: str) -> None:
    apigateway = boto3.client("apigateway", region_name="us-east-1")
    stack_keys = keys_of_another_stack("tickets")
    neighbour, _ = stack_keys.ensure(other)  # "tickets.10" starts with "tickets.1": a name query's prefix match
    name = stack_keys.key_name(tenant)
    impostors = [
        apigateway.create_api_key(name=name, enabled=True, tags=tags)["id"]
        for tags in ({"stack": "tickets-2", "tenant": tenant}, {"stack": "tickets", "tenant": other}, {})
    ]
    # Neither by its name nor named by the tenant record is any of them the tenant's key
    assert stack_keys.find(tenant) is None
    assert all(stack_keys.find(tenant, impostor) is None for impostor in impostors)
    assert stack_keys.find(tenant, neighbour) is None
    assert stack_keys.retire(tenant, impostors[0], 1_795_000_000) is False
    assert all(key_exists(key) for key in [*impostors, neighbour])
    described = [apigateway.get_api_key(apiKey=key) for key in [*impostors, neighbour]]
    assert all(key["enabled"] and offboarded_at(key) is None for key in described)
    # so the tenant gets a key of its own
    made, _ = stack_keys.ensure(tenant, impostors[1])
    assert made not in [*impostors, neighbour]


def test_a_key_made_before_keys_named_their_stack_is_kept_when_its_record_names_it(aws: None) -> None:
    apigateway = boto3.client("apigateway", region_name="us-east-1")
    stack_keys = keys_of_another_stack("tickets")
    legacy = apigateway.create_api_key(name="tickets-acme", enabled=True, tags={"tenant": "acme"})
    assert stack_keys.ensure("acme", legacy["id"]) == (legacy["id"], legacy["value"])
    # never found by a name, though (a name proves nothing)
    assert stack_keys.find("acme") is None
    assert stack_keys.retire("acme", legacy["id"], 1_795_000_000) is True
    tombstone(stack_keys, "acme", legacy["id"])


# ---------------------------------------------------------------- offboarding
def test_offboarding_1_erases_all_of_it_and_nothing_of_10_or_1_a(
    populate: Callable[[str, int], None],
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
) -> None:
    stack_keys = stack_api_keys()
    for tenant in ("1", "10", "1-a"):
        populate(tenant, 4)
        stack_keys.place(stack_keys.ensure(tenant)[0], "basic")
    keys_before = {tenant: api_key_plans(stack_keys, tenant) for tenant in ("1", "10", "1-a")}
    assert all(keys_before.values())
    mine = items_of(dynamodb, table_name, "1")
    kinds = {item["pk"]["S"].split("|", 1)[1].split("#", 1)[0] for item in mine}
    assert kinds == {"TICKET", "HISTORY", "AUDIT", "AGGREGATE", "IDEMPOTENCY", "CONFIG", "WEBHOOKS", "WEBHOOK"}, kinds
    neighbours = {tenant: items_of(dynamodb, table_name, tenant) for tenant in ("10", "1-a")}
    users_before = users_of(pool)
    clock = FakeClock()
    # When tenant 1 is offboarded (its walk without a Scan; the final check's
    # Scan keys-only, filtered on its prefix, in parallel segments)
    with aws_calls() as calls:
        outcome = offboarding(dynamodb, table_name, pool, clock).run("1", "1")
    scans = [params for _, operation, params in calls if operation == "Scan"]
    assert {params["Segment"] for params in scans} == set(range(VERIFY_SEGMENTS))
    for params in scans:
        assert params["ProjectionExpression"] == "pk, sk"
        assert params["FilterExpression"] == "begins_with(pk, :prefix)"
        assert params["ExpressionAttributeValues"] == {":prefix": {"S": "TENANT#1|"}}
        assert params["TotalSegments"] == VERIFY_SEGMENTS
    first_scan = next(index for index, call in enumerate(calls) if call[1] == "Scan")
    assert not [
        call for call in calls[first_scan:] if call[1] in {"Query", "GetItem"}
    ]  # nothing but the check after it
    assert outcome.stray_items_erased == 0
    assert outcome.verified == f"a Scan of the whole table found nothing under TENANT#1| but {LEDGER}"
    # Then nothing of 1 is left, its users are gone; 10 and 1-a are untouched, item for item
    assert left_of(dynamodb, table_name, "1") == []
    assert outcome.record == "erased"
    assert outcome.items_erased == len(mine)
    for tenant, before in neighbours.items():
        assert items_of(dynamodb, table_name, tenant) == before, tenant
    assert users_of(pool) == {name: tenant for name, tenant in users_before.items() if tenant != "1"}
    assert outcome.users_deleted == 2
    # Its API key is its tombstone; its neighbours' keys are still in their plans
    assert outcome.api_key_retired
    tombstone(stack_keys, "1")
    assert {tenant: api_key_plans(stack_keys, tenant) for tenant in ("10", "1-a")} == {
        tenant: keys_before[tenant] for tenant in ("10", "1-a")
    }
    # And it waited for every function to see the suspension before erasing
    assert clock.now >= 1_795_000_000 + 35


@pytest.mark.parametrize(("tenant", "neighbour"), [("1", "10"), ("10", "1")])
def test_the_final_check_finds_and_erases_what_the_walk_could_not_find(
    populate: Callable[[str, int], None],
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
    tenant: str,
    neighbour: str,
) -> None:
    populate(tenant, 2)
    populate(neighbour, 2)
    # Given items of the tenant that no query of its own partitions reaches: a
    # ticket (and its comment) whose GSI1 key names its neighbour, and an item
    # under a partition the keys module never builds
    hidden = keys.ticket_pk(tenant, "hidden")
    stray = [
        {
            "pk": {"S": hidden},
            "sk": {"S": keys.SUMMARY_SK},
            "tenant_status": {"S": keys.tenant_status(neighbour, "OPEN")},
            "resolver": {"S": keys.UNASSIGNED_RESOLVER},
            "ticket_id": {"S": "hidden"},
        },
        {"pk": {"S": hidden}, "sk": {"S": "COMMENT#x"}, "body": {"S": "b"}},
        {"pk": {"S": keys.tenant_key(tenant, "SOMETHING_ELSE")}, "sk": {"S": "x"}},
    ]
    for item in stray:
        dynamodb.put_item(TableName=table_name, Item=item)
    neighbours = items_of(dynamodb, table_name, neighbour)
    progress = io.StringIO()
    run = offboarding(dynamodb, table_name, pool, FakeClock())
    run.progress = Progress("erased", progress)
    # When the tenant is offboarded
    outcome = run.run(tenant, tenant)
    # Then the check found them, erased them, and says what it verified
    assert left_of(dynamodb, table_name, tenant) == []
    assert outcome.stray_items_erased == 3
    assert outcome.verified == f"a Scan of the whole table found nothing under TENANT#{tenant}| but {LEDGER}"
    assert f"verified: {outcome.verified} (after erasing 3 item(s)" in progress.getvalue()
    assert outcome.as_dict()["stray_items_erased"] == 3
    # and nothing of the neighbour, its GSI1 key named by the hidden ticket, was touched
    assert items_of(dynamodb, table_name, neighbour) == neighbours


def test_while_the_record_stays_the_check_excepts_only_the_record(
    populate: Callable[[str, int], None],
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
) -> None:
    populate("1", 2)
    dynamodb.put_item(TableName=table_name, Item={"pk": {"S": keys.tenant_key("1", "ELSEWHERE")}, "sk": {"S": "x"}})
    outcome = offboarding(dynamodb, table_name, pool, FakeClock(), grace=3900).run("1", "1")
    assert outcome.record.startswith("kept until ")
    assert outcome.stray_items_erased == 1
    assert (
        outcome.verified
        == f"a Scan of the whole table found nothing under TENANT#1| but the tenant record and {LEDGER}"
    )
    (record,) = left_of(dynamodb, table_name, "1")
    assert record["sk"]["S"] == "CONFIG"


def test_offboarding_is_resumable_and_idempotent(
    populate: Callable[[str, int], None],
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    populate("1", 6)
    populate("10", 2)
    stack_keys = stack_api_keys()
    for tenant in ("1", "10"):
        stack_keys.place(stack_keys.ensure(tenant)[0], "basic")
    neighbour = items_of(dynamodb, table_name, "10")
    total = len(items_of(dynamodb, table_name, "1"))
    # Given a run interrupted after a few deletions
    real = TenantTable.batch_delete
    budget = iter(range(3))

    def interrupted(self: TenantTable, item_keys: Any) -> int:
        if next(budget, None) is None:
            raise ClientError({"Error": {"Code": "RequestLimitExceeded"}}, "BatchWriteItem")
        return real(self, item_keys)

    monkeypatch.setattr(TenantTable, "batch_delete", interrupted)
    with pytest.raises(ClientError, match="RequestLimitExceeded"):
        offboarding(dynamodb, table_name, pool, FakeClock()).run("1", "1")
    left = items_of(dynamodb, table_name, "1")
    assert 0 < len(left) < total
    assert read_tenant_config(TenantTable("1", table_name, OwnClient(dynamodb))).status is TenantStatus.SUSPENDED
    # When it runs again, it finishes; and again, it finds nothing to do
    monkeypatch.setattr(TenantTable, "batch_delete", real)
    assert offboarding(dynamodb, table_name, pool, FakeClock()).run("1", "1").record == "erased"
    assert left_of(dynamodb, table_name, "1") == []
    # (nothing left of it: no such tenant any more, and that run writes nothing)
    with pytest.raises(tenants.NoSuchTenant, match="no tenant '1'"):
        offboarding(dynamodb, table_name, pool, FakeClock()).run("1", "1")
    assert left_of(dynamodb, table_name, "1") == []
    assert items_of(dynamodb, table_name, "10") == neighbour
    tombstone(stack_keys, "1")
    assert api_key_plans(stack_keys, "10") == {stack_keys.plan_id("basic")}


def test_the_record_stays_suspended_until_the_last_tokens_expire(
    populate: Callable[[str, int], None],
    api: Api,
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
) -> None:
    populate("1", 2)
    clock = FakeClock()
    first = offboarding(dynamodb, table_name, pool, clock, grace=3900).run("1", "1")
    assert first.record.startswith("kept until ")
    # everything but the record is gone, and the record refuses a token issued before
    (record,) = left_of(dynamodb, table_name, "1")
    assert record["sk"]["S"] == "CONFIG"
    assert record["status"]["S"] == "SUSPENDED"
    from support_tickets.data.tenant_registry import tenant_configs

    tenant_configs.cache_clear()
    assert_error(api.create(User("1", "alice-1"), {"title": "back from the dead?"}), 403, "TENANT_SUSPENDED")
    # a run before the time changes nothing; one after it erases the record
    assert offboarding(dynamodb, table_name, pool, clock).run("1", "1").record.startswith("kept until ")
    clock.now += 3900
    assert offboarding(dynamodb, table_name, pool, clock).run("1", "1").record == "erased"
    assert left_of(dynamodb, table_name, "1") == []


def test_a_late_audit_event_under_a_day_the_index_no_longer_lists_is_still_erased(
    populate: Callable[[str, int], None],
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
) -> None:
    populate("1", 2)  # the (warm) audit writer has listed today in 1's day index
    clock = FakeClock(time.time())
    offboarding(dynamodb, table_name, pool, clock, grace=3900).run("1", "1")
    # A record the stream retried after the erase, handled by that warm writer: a change of today's, which
    # that writer listed (ten minutes ago, or since midnight UTC when that was sooner)
    now = time.time()
    at = iso_time(max(now - 600, now - now % 86_400))
    late = audit_record(
        event_name="INSERT",
        event_id="f" * 32,
        sequence_number="99",
        recorded_at=epoch_of(at),
        keys_image={"pk": keys.ticket_pk("1", "LATE"), "sk": keys.SUMMARY_SK},
        old_image=None,
        new_image={"tenant_status": "TENANT#1|OPEN", "title": "t", "resolver": "#UNASSIGNED", "created_at": at},
    )
    assert audit_writer().write(late) == 2
    left = {item["pk"]["S"] for item in items_of(dynamodb, table_name, "1")}
    assert keys.audit_days_pk("1") not in left  # the index does not name its day
    assert keys.history_pk("1", "LATE") in left
    # Then the run that erases the record finds it anyway
    clock.now += 3900
    assert offboarding(dynamodb, table_name, pool, clock).run("1", "1").record == "erased"
    assert left_of(dynamodb, table_name, "1") == []


def test_a_suspended_tenant_stays_suspended_while_offboarded(
    aws: None, dynamodb: DynamoDBClient, table_name: str, pool: tuple[CognitoIdentityProviderClient, str]
) -> None:
    clock = FakeClock()
    TenantAdmin(dynamodb, table_name).ensure("1")  # onboarded
    offboarding(dynamodb, table_name, pool, clock, grace=3900).run("1", "1")
    with pytest.raises(tenants.TenantRecordError, match="offboarded"):
        TenantAdmin(dynamodb, table_name).set_status("1", TenantStatus.ACTIVE)


# One offboarded tenant for every change (an offboarding is hundreds of Queries): each
# change is refused and writes nothing, so each one meets the same tenant.
CHANGES = [
    ["--tier", "premium"],
    ["--tier", "basic"],
    ["--status", "SUSPENDED"],
    ["--status", "ACTIVE"],
    ["--shards", "2"],
]


def test_a_tenant_being_offboarded_cant_be_changed_nor_get_a_key_again(
    populate: Callable[[str, int], None],
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    stack_keys = stack_api_keys()
    for tenant in ("1", "10"):
        populate(tenant, 1)
        TenantAdmin(dynamodb, table_name, keys=stack_keys).ensure(tenant)
    # Given tenant 1 offboarded but for its record (kept until its tokens expire): its API key a tombstone
    assert offboarding(dynamodb, table_name, pool, FakeClock(), grace=3900).run("1", "1").api_key_retired
    retired = tombstone(stack_keys, "1")
    local = ["--local", "--local-state", str(local_state_file(tmp_path, table_name)), "--phase-seconds", "0"]
    for change in CHANGES:
        before = all_items(dynamodb, table_name)
        # When an operator changes it: one line, exit 1, nothing written, no key made again
        assert tenants.main(["--tenant", "1", *change, *local]) == 1, change
        error = capsys.readouterr().err
        assert "being offboarded" in error, change
        assert error.count("\n") == 1, change
        assert all_items(dynamodb, table_name) == before, change
        assert stack_keys.describe("1") == retired, change
        # Showing it still works; and its neighbour 10 changes as usual
        assert tenants.main(["--tenant", "1", *local]) == 0, change
        assert json.loads(capsys.readouterr().out)["status"] == "SUSPENDED", change
        assert tenants.main(["--tenant", "10", *change, *local]) == 0, change
        assert json.loads(capsys.readouterr().out)[change[0].removeprefix("--")] == (
            int(change[1]) if change[0] == "--shards" else change[1]
        ), change


@pytest.mark.parametrize("confirm", [None, "", "10", "1 ", "*"])
def test_offboarding_is_refused_without_confirm_equal_to_the_tenant(
    aws: None,
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    confirm: str | None,
) -> None:
    TenantAdmin(dynamodb, table_name).ensure("1")
    before = all_items(dynamodb, table_name)
    with pytest.raises(OffboardError, match="CONFIRM"):
        offboarding(dynamodb, table_name, pool, FakeClock()).run("1", confirm)
    state = tmp_path / "stack.json"
    state.write_text(json.dumps({"emulator_url": None, "table_name": table_name, **OPERATOR_STATE}))
    argv = ["--tenant", "1", "--local", "--local-state", str(state)]
    assert offboard.main(argv + (["--confirm", confirm] if confirm is not None else [])) == 1
    error = capsys.readouterr().err
    assert "CONFIRM" in error
    assert error.count("\n") == 1
    assert all_items(dynamodb, table_name) == before


def deployed_stack(pool_id: str, table_name: str) -> None:
    """The mocked stack as CloudFormation describes it: what ``make onboard STACK=st`` finds."""
    outputs = {
        "UserPoolId": {"Value": pool_id},
        "TableName": {"Value": table_name},
        **{f"UsagePlanId{tier.capitalize()}": {"Value": plan} for tier, plan in stack_usage_plans().items()},
    }
    stack = json.dumps({"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}, "Outputs": outputs})
    boto3.client("cloudformation", region_name=REGION).create_stack(StackName=STACK_NAME, TemplateBody=stack)


@pytest.mark.parametrize(("leaving", "staying"), [("1", "10"), ("10", "1")])
def test_an_offboarded_tenant_id_is_never_onboarded_again(
    aws: None,
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
    capsys: pytest.CaptureFixture[str],
    leaving: str,
    staying: str,
) -> None:
    from local_stack.__main__ import main as local_stack_main

    stack_keys = stack_api_keys()
    for tenant in (leaving, staying):
        TenantAdmin(dynamodb, table_name, keys=stack_keys).ensure(tenant)
    deployed_stack(pool[1], table_name)
    # Given one of them offboarded, its record erased: its usage ledger (noted) and its key's tombstone stay
    assert offboarding(dynamodb, table_name, pool, FakeClock()).run(leaving, leaving).record == "erased"
    retired = tombstone(stack_keys, leaving)
    before, users_before = all_items(dynamodb, table_name), users_of(pool)

    def onboard(tenant: str) -> int:
        """``make onboard TENANT=<tenant> USERS=new-<tenant> STACK=st``."""
        return local_stack_main(
            ["onboard", "--tenant", tenant, "--users", f"new-{tenant}", "--stack", STACK_NAME, "--region", REGION]
        )

    # When an operator onboards its id again: one line, exit 1; no user, record or key made, nothing changed
    capsys.readouterr()
    assert onboard(leaving) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert f"tenant {leaving} was offboarded at " in error
    assert "a tenant id is never used again" in error
    assert (all_items(dynamodb, table_name), users_of(pool)) == (before, users_before)
    assert stack_keys.describe(leaving) == retired
    # and so does the operators' library, with the stack's keys or without them (the ledger's note)
    for admin in (TenantAdmin(dynamodb, table_name, keys=stack_keys), TenantAdmin(dynamodb, table_name)):
        with pytest.raises(tenants.TenantOffboarded, match="never used again"):
            admin.ensure(leaving)
    assert all_items(dynamodb, table_name) == before
    assert stack_keys.describe(leaving) == retired
    # while the other tenant, beside it, is onboarded as usual (a new user; its key, in its plan)
    assert onboard(staying) == 0
    assert users_of(pool) == {**users_before, f"new-{staying}": staying}
    assert api_key_plans(stack_keys, staying) == {stack_keys.plan_id("basic")}


def test_the_offboard_command_against_a_deployed_stack_found_by_its_outputs(
    populate: Callable[[str, int], None],
    dynamodb: DynamoDBClient,
    table_name: str,
    pool: tuple[CognitoIdentityProviderClient, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    populate("1", 2)
    populate("10", 2)
    neighbour = items_of(dynamodb, table_name, "10")
    stack = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"UserPoolId": {"Value": pool[1]}, "TableName": {"Value": table_name}},
    }
    boto3.client("cloudformation", region_name=REGION).create_stack(StackName="st", TemplateBody=json.dumps(stack))
    argv = ["--tenant", "1", "--confirm", "1", "--stack", "st", "--region", REGION, "--phase-seconds", "0"]
    capsys.readouterr()  # the arrangement's handler logs
    assert offboard.main([*argv, "--grace-seconds", "0", "--settle", "0"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["record"] == "erased"
    assert "offboarded" in err
    assert left_of(dynamodb, table_name, "1") == []
    assert items_of(dynamodb, table_name, "10") == neighbour


# ---------------------------------------------------------------- export
def export_lines(dynamodb: DynamoDBClient, table_name: str, tenant: str) -> Iterator[dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    count = export.export_tenant(TenantTable(tenant, table_name, OwnClient(dynamodb)), out, Progress("export", err))
    lines = out.getvalue().splitlines()
    assert len(lines) == count
    assert f"export: {count} tickets exported" in err.getvalue()
    return (json.loads(line) for line in lines)


def test_export_writes_every_ticket_with_its_comments_and_history_one_line_each(
    populate: Callable[[str, int], None], api: Api, dynamodb: DynamoDBClient, table_name: str
) -> None:
    populate("1", 5)
    populate("10", 3)
    lines = list(export_lines(dynamodb, table_name, "1"))
    # 5 tickets, one deleted, plus the idempotent create: 5 live tickets
    assert len(lines) == 5
    assert {line["ticket"]["title"] for line in lines} == {"1 0", "1 1", "1 2", "1 3", "once"}
    for line in lines:
        assert set(line) == {"ticket", "comments", "history"}
        assert line["history"][0]["type"] == "created"
        expected = api.get(User("1"), line["ticket"]["ticket_id"], limit="100").body
        assert line["ticket"] == expected["ticket"]
        assert line["comments"] == expected["comments"]
    closed = next(line for line in lines if line["ticket"]["status"] == "CLOSED")
    assert [event["type"] for event in closed["history"]] == ["created", "comment_added", "updated"]


def test_export_streams_comments_and_history_past_a_page(
    api: Api, dynamodb: DynamoDBClient, table_name: str, monkeypatch: pytest.MonkeyPatch, streams: Any
) -> None:
    monkeypatch.setattr(export, "PAGE_SIZE", 2)
    tenant = random_tenant_id()
    user = User(tenant)
    ticket_id = api.new_ticket(user)["ticket_id"]
    for n in range(5):
        api.comment(user, ticket_id, {"body": f"c{n}"})
    audit = StreamHarness.of("AuditTrailFunction", dynamodb, streams, table_name)
    audit.deliver(audit.new_records())
    (line,) = export_lines(dynamodb, table_name, tenant)
    assert [comment["body"] for comment in line["comments"]] == [f"c{n}" for n in range(5)]
    assert len(line["history"]) == 6


def test_the_export_command_warns_when_the_tenant_is_active(
    api: Api, dynamodb: DynamoDBClient, table_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.new_ticket(User("1"))
    api.new_ticket(User("10"))
    TenantAdmin(dynamodb, table_name).ensure("1")  # onboarded
    state = tmp_path / "stack.json"
    state.write_text(json.dumps({"emulator_url": None, "table_name": table_name, **OPERATOR_STATE}))
    capsys.readouterr()  # the arrangement's handler logs
    assert export.main(["--tenant", "1", "--local", "--local-state", str(state)]) == 0
    out, err = capsys.readouterr()
    (line,) = out.splitlines()
    assert json.loads(line)["ticket"]["created_by"] == "alice"
    assert "warning: 1 is ACTIVE" in err
    assert export.main(["--tenant", "1|x", "--local", "--local-state", str(state)]) == 1
