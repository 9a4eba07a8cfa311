"""The policy evaluator (local_stack.iam.policy_evaluation) on its own, and against the real
policies of template.yaml (TenantAccessRole, its trust policy, the
aggregator's role)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.condition_keys import resource_context
from local_stack.iam.sessions import Session
from local_stack.iam.sts import AssumeRoleRequest, authorize_assume_role
from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID, offline_values
from stack_model.roles import RoleDefinition, function_role, roles_from_template

TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/SupportTicket"
INDEX_ARN = f"{TABLE_ARN}/index/GSI1"
STREAM_ARN = f"{TABLE_ARN}/stream/2026-11-21T10:00:00.000"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:AggregateCountsFailureQueue"
AUDIT_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:AuditTrailFailureQueue"
USER_POOL_ID = "us-east-1_EXAMPLE"
CLIENT_ID = "1example23456789exampleclient"
IDENTITY_POOL_ID = "us-east-1:0c1b5f3a-7d2e-4a8b-9c6d-000000000013"


def template_roles() -> dict[str, RoleDefinition]:
    values = offline_values(user_pool_id=USER_POOL_ID, client_id=CLIENT_ID, identity_pool_id=IDENTITY_POOL_ID)
    return roles_from_template(values)


ROLES = template_roles()
TENANT_ROLE = ROLES["TenantAccessRole"]
API_ROLE = ROLES["ApiFunctionRole"]
AGGREGATOR_ROLE = ROLES[function_role("AggregateCountsFunction")]
AUDIT_ROLE = ROLES[function_role("AuditTrailFunction")]


def tenant_request(
    action: str,
    keys: Sequence[str] | None,
    tenant: str | None = "1",
    resource: str = TABLE_ARN,
    source_vpce: str | None = LOCAL_VPC_ENDPOINT_ID,
) -> Any:
    """A request with tenant credentials; by default from inside the stack
    (through its gateway endpoint, as the API functions call)."""
    context: dict[str, Sequence[str]] = {}
    if source_vpce is not None:
        context["aws:SourceVpce"] = [source_vpce]
    if tenant is not None:
        context["aws:PrincipalTag/TenantId"] = [tenant]
    if keys is not None:
        context["dynamodb:LeadingKeys"] = list(keys)
    return iam.Request(f"dynamodb:{action}", resource, context)


def decide(role: RoleDefinition, request: iam.Request) -> iam.Decision:
    return iam.evaluate(role.policies(), request)


# ---------------------------------------------------------------- the template's tenant policy
@pytest.mark.parametrize(
    ("tenant", "key", "allowed"),
    [
        ("1", "TENANT#1|TICKET#a", True),
        ("1", "TENANT#1|AGGREGATE", True),
        ("1", "TENANT#10|TICKET#a", False),  # the "|" is load-bearing
        ("10", "TENANT#1|TICKET#a", False),
        ("a", "TENANT#a-b|TICKET#x", False),
        ("a-b", "TENANT#a|TICKET#x", False),
        ("a", "TENANT#a|", True),
        ("1", "TENANT#1", False),
        ("1", "tenant#1|TICKET#a", False),  # StringLike is case-sensitive
        ("1", "XTENANT#1|TICKET#a", False),
    ],
)
def test_tenant_policy_allows_exactly_the_tenant_prefix(tenant: str, key: str, allowed: bool) -> None:
    decision = decide(TENANT_ROLE, tenant_request("GetItem", [key], tenant))
    assert (decision is iam.Decision.ALLOW) == allowed


# ---------------------------------------------------------------- the data perimeter
@pytest.mark.parametrize(
    "action",
    ["GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "ConditionCheckItem"],
)
@pytest.mark.parametrize("resource", [TABLE_ARN, INDEX_ARN])
@pytest.mark.parametrize("source_vpce", [None, "vpce-0123456789abcdef0", LOCAL_VPC_ENDPOINT_ID.upper()])
def test_tenant_credentials_reach_nothing_but_through_the_stacks_endpoint(
    action: str, resource: str, source_vpce: str | None
) -> None:
    # The tenant's own key, every action the role allows: from outside (no endpoint),
    # through another VPC's endpoint, or an id that only looks like ours, nothing.
    own = tenant_request(action, ["TENANT#1|TICKET#a"], "1", resource)
    assert decide(TENANT_ROLE, own) is iam.Decision.ALLOW
    elsewhere = tenant_request(action, ["TENANT#1|TICKET#a"], "1", resource, source_vpce=source_vpce)
    assert decide(TENANT_ROLE, elsewhere) is iam.Decision.IMPLICIT_DENY


def test_every_key_of_a_request_must_be_the_tenants() -> None:
    assert decide(TENANT_ROLE, tenant_request("BatchGetItem", ["TENANT#1|A", "TENANT#1|B"])) is iam.Decision.ALLOW
    mixed = tenant_request("BatchGetItem", ["TENANT#1|A", "TENANT#10|B"])
    assert decide(TENANT_ROLE, mixed) is iam.Decision.IMPLICIT_DENY


def test_no_leading_keys_is_denied_by_the_null_condition() -> None:
    # ForAllValues alone would be true on the empty set.
    assert decide(TENANT_ROLE, tenant_request("Query", None)) is iam.Decision.IMPLICIT_DENY
    assert decide(TENANT_ROLE, tenant_request("Query", [])) is iam.Decision.IMPLICIT_DENY


def test_missing_principal_tag_matches_nothing() -> None:
    assert decide(TENANT_ROLE, tenant_request("GetItem", ["TENANT#1|A"], tenant=None)) is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize("action", ["Scan", "DescribeTable", "DeleteTable", "PartiQLSelect", "UpdateTable"])
def test_actions_outside_the_list_are_denied(action: str) -> None:
    assert decide(TENANT_ROLE, tenant_request(action, ["TENANT#1|A"])) is iam.Decision.IMPLICIT_DENY


def test_index_and_table_only() -> None:
    assert decide(TENANT_ROLE, tenant_request("Query", ["TENANT#1|OPEN"], resource=INDEX_ARN)) is iam.Decision.ALLOW
    other_index = tenant_request("Query", ["TENANT#1|OPEN"], resource=f"{TABLE_ARN}/index/GSI2")
    assert decide(TENANT_ROLE, other_index) is iam.Decision.IMPLICIT_DENY
    other_table = tenant_request("GetItem", ["TENANT#1|A"], resource=TABLE_ARN + "2")
    assert decide(TENANT_ROLE, other_table) is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1"), ("a", "a-b")])
@pytest.mark.parametrize("shard", [None, 0, 3, 63])
def test_sharded_index_keys_are_the_tenants_own_and_no_one_elses(tenant: str, other: str, shard: int | None) -> None:
    from support_tickets.core import keys

    own = keys.tenant_status(tenant, "OPEN", shard)
    foreign = keys.tenant_status(other, "OPEN", shard)
    assert decide(TENANT_ROLE, tenant_request("Query", [own], tenant, INDEX_ARN)) is iam.Decision.ALLOW
    assert decide(TENANT_ROLE, tenant_request("Query", [foreign], tenant, INDEX_ARN)) is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize("action", ["PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"])
@pytest.mark.parametrize("tenant", ["1", "10", "acme"])
def test_tenant_credentials_can_read_but_never_write_their_tenant_record(action: str, tenant: str) -> None:
    record = f"TENANT#{tenant}|CONFIG"
    assert decide(TENANT_ROLE, tenant_request("GetItem", [record], tenant)) is iam.Decision.ALLOW
    assert decide(TENANT_ROLE, tenant_request(action, [record], tenant)) is iam.Decision.EXPLICIT_DENY
    # the deny is about the record only: the tenant's other items stay writable
    assert decide(TENANT_ROLE, tenant_request(action, [f"TENANT#{tenant}|TICKET#a"], tenant)) is iam.Decision.ALLOW


def test_a_batch_that_slips_a_tenant_record_in_is_denied_whole() -> None:
    keys_written = ["TENANT#1|TICKET#a", "TENANT#1|CONFIG"]
    assert decide(TENANT_ROLE, tenant_request("BatchWriteItem", keys_written, "1")) is iam.Decision.EXPLICIT_DENY


def test_api_function_role_cannot_touch_items() -> None:
    assert decide(API_ROLE, tenant_request("GetItem", ["TENANT#1|A"])) is iam.Decision.IMPLICIT_DENY


def test_aggregator_role_reaches_only_aggregate_items_and_the_stream() -> None:
    def aggregator(action: str, keys: list[str] | None, resource: str = TABLE_ARN) -> iam.Decision:
        context = {"dynamodb:LeadingKeys": keys} if keys is not None else {}
        return decide(AGGREGATOR_ROLE, iam.Request(f"dynamodb:{action}", resource, context))

    assert aggregator("UpdateItem", ["TENANT#1|AGGREGATE"]) is iam.Decision.ALLOW
    assert aggregator("PutItem", ["TENANT#1|AGGREGATE#JOURNAL#7"]) is iam.Decision.ALLOW
    assert aggregator("GetItem", ["TENANT#1|AGGREGATE#JOURNAL#7"]) is iam.Decision.ALLOW
    assert aggregator("UpdateItem", ["TENANT#1|TICKET#a"]) is iam.Decision.IMPLICIT_DENY
    assert aggregator("PutItem", ["TENANT#1|TICKET#a"]) is iam.Decision.IMPLICIT_DENY
    assert aggregator("PutItem", ["TENANT#1|CONFIG"]) is iam.Decision.IMPLICIT_DENY
    assert aggregator("PutItem", ["TENANT#1|AGGREGATEX"]) is iam.Decision.IMPLICIT_DENY
    assert aggregator("Query", ["TENANT#1|AGGREGATE"]) is iam.Decision.IMPLICIT_DENY
    assert aggregator("GetRecords", None, STREAM_ARN) is iam.Decision.ALLOW
    assert aggregator("GetRecords", None, TABLE_ARN + "/stream/other") is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize("role", [AGGREGATOR_ROLE, AUDIT_ROLE], ids=["aggregator", "audit"])
@pytest.mark.parametrize("tenant", ["1", "10"])
def test_the_stream_roles_read_tenant_records_in_the_pool_table_only(role: RoleDefinition, tenant: str) -> None:
    """Whose table a stream record is comes from its tenant's record (support_tickets.streams.routing),
    which stays in the pool table: read there, never written, never read in a dedicated table."""
    record = f"TENANT#{tenant}|CONFIG"
    dedicated_table = f"{TABLE_ARN}-dedicated-{tenant}"

    def request(action: str, keys: list[str], resource: str = TABLE_ARN) -> iam.Decision:
        return decide(role, iam.Request(f"dynamodb:{action}", resource, {"dynamodb:LeadingKeys": keys}))

    assert request("GetItem", [record]) is iam.Decision.ALLOW
    assert request("GetItem", [record], dedicated_table) is iam.Decision.IMPLICIT_DENY
    for action in ("PutItem", "UpdateItem", "DeleteItem", "Query"):
        assert request(action, [record]) is iam.Decision.IMPLICIT_DENY, action
    # nor another item of the tenant's through that grant (its tickets, its usage ledger)
    for key in (f"TENANT#{tenant}|TICKET#a", f"TENANT#{tenant}|USAGE", f"TENANT#{tenant}|CONFIGX"):
        assert request("GetItem", [key]) is iam.Decision.IMPLICIT_DENY, key


def dedicated_table_request(tenant: str, tags: Mapping[str, str]) -> iam.Request:
    """Tenant credentials' GetItem of their own ticket in tenant 1's dedicated
    table, the table holding ``tags`` (aws:ResourceTag/<key>, as the guard's
    condition_keys.resource_context gives them)."""
    asked = tenant_request("GetItem", [f"TENANT#{tenant}|T1"], tenant, f"{TABLE_ARN}-dedicated-1")
    return iam.Request(asked.action, asked.resource, {**asked.context, **resource_context(tags)})


@pytest.mark.parametrize(
    ("tags", "owner"),
    [
        ({"TenantId": "1"}, "1"),
        ({"TenantId": "10"}, "10"),
        # IAM matches the key of aws:ResourceTag/TenantId without regard to case.
        ({"tenantid": "1"}, "1"),
        ({"TENANTID": "10"}, "10"),
        # Two tags whose keys differ in case: AWS does not say which one the
        # condition sees; neither tenant's, whichever order they were added in.
        ({"tenantid": "10", "TenantId": "1"}, None),
        ({"TenantId": "1", "tenantid": "10"}, None),
        ({"tenantid": "1", "TenantId": "10"}, None),
        # Whichever it sees, the same value.
        ({"TenantId": "1", "TenantID": "1"}, "1"),
        ({}, None),
    ],
)
def test_a_dedicated_table_is_the_tenant_its_tenant_tag_names_if_one_tag_names_one(
    tags: dict[str, str], owner: str | None
) -> None:
    for tenant in ("1", "10"):
        expected = iam.Decision.ALLOW if tenant == owner else iam.Decision.IMPLICIT_DENY
        assert decide(TENANT_ROLE, dedicated_table_request(tenant, tags)) is expected, tenant


@pytest.mark.parametrize("action", ["PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"])
@pytest.mark.parametrize("tenant", ["1", "10"])
def test_tenant_credentials_can_read_but_never_write_the_audit_trail(action: str, tenant: str) -> None:
    from support_tickets.core import keys

    for key in (keys.history_pk(tenant, "T1"), keys.audit_day_pk(tenant, "2026-11-21", 3), keys.audit_days_pk(tenant)):
        assert decide(TENANT_ROLE, tenant_request("Query", [key], tenant)) is iam.Decision.ALLOW
        assert decide(TENANT_ROLE, tenant_request(action, [key], tenant)) is iam.Decision.EXPLICIT_DENY


def test_audit_role_only_puts_audit_items_and_reads_the_stream() -> None:
    from support_tickets.core import keys

    def writer(action: str, keys_: list[str] | None, resource: str = TABLE_ARN) -> iam.Decision:
        context = {"dynamodb:LeadingKeys": keys_} if keys_ is not None else {}
        return decide(AUDIT_ROLE, iam.Request(f"dynamodb:{action}", resource, context))

    for tenant in ("1", "10", "a-b"):
        for key in (
            keys.history_pk(tenant, "T1"),
            keys.audit_day_pk(tenant, "2026-11-21", 7),
            keys.audit_days_pk(tenant),
        ):
            assert writer("PutItem", [key]) is iam.Decision.ALLOW
            for action in ("GetItem", "UpdateItem", "DeleteItem", "Query", "BatchWriteItem"):
                assert writer(action, [key]) is iam.Decision.IMPLICIT_DENY, action
        for key in (
            keys.ticket_pk(tenant, "T1"),
            keys.aggregate_pk(tenant),
            keys.tenant_config_key(tenant)["pk"]["S"],
            keys.idempotency_pk(tenant, "x"),
        ):
            assert writer("PutItem", [key]) is iam.Decision.IMPLICIT_DENY, key
    assert writer("PutItem", None) is iam.Decision.IMPLICIT_DENY
    assert writer("GetRecords", None, STREAM_ARN) is iam.Decision.ALLOW
    assert writer("GetRecords", None, TABLE_ARN + "/stream/other") is iam.Decision.IMPLICIT_DENY
    queue = iam.Request("sqs:SendMessage", AUDIT_QUEUE_ARN, {})
    assert decide(AUDIT_ROLE, queue) is iam.Decision.ALLOW
    assert decide(AUDIT_ROLE, iam.Request("sqs:SendMessage", QUEUE_ARN, {})) is iam.Decision.IMPLICIT_DENY


def test_audit_role_writes_a_refused_delivery_and_reads_the_webhook_count_only() -> None:
    from support_tickets.core import keys

    refusal = ["pk", "sk", "delivery_id", "status", "failure_reason", "event", "redeliver_requested_at"]

    def writer(action: str, key: str, attributes: list[str] | None = None) -> iam.Decision:
        context: dict[str, Any] = {"dynamodb:LeadingKeys": [key]}
        if attributes is not None:
            context["dynamodb:Attributes"] = attributes
        return decide(AUDIT_ROLE, iam.Request(f"dynamodb:{action}", TABLE_ARN, context))

    for tenant in ("1", "10"):
        deliveries = keys.webhook_deliveries_pk(tenant, "wh1")
        assert writer("UpdateItem", deliveries, refusal) is iam.Decision.ALLOW
        # Nothing else of a delivery record, and no other item
        assert writer("UpdateItem", deliveries, [*refusal, "holder"]) is iam.Decision.IMPLICIT_DENY
        for action in ("PutItem", "DeleteItem", "GetItem", "Query"):
            assert writer(action, deliveries, refusal) is iam.Decision.IMPLICIT_DENY, action
        for key in (keys.ticket_pk(tenant, "T1"), keys.webhooks_pk(tenant), keys.webhook_rate_pk(tenant)):
            assert writer("UpdateItem", key, ["pk", "sk", "status"]) is iam.Decision.IMPLICIT_DENY, key
        # The webhook count's version: a GetItem of the tenant's webhooks partition
        assert writer("GetItem", keys.webhooks_pk(tenant)) is iam.Decision.ALLOW
        assert writer("GetItem", keys.ticket_pk(tenant, "T1")) is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize(("tenant", "neighbour"), [("1", "10"), ("10", "1")])
def test_audit_role_deletes_what_a_tickets_delete_left_and_nothing_else(tenant: str, neighbour: str) -> None:
    """streams/ticket_deletions.py: a Query and DeleteItem of a ticket's items and the
    tombstone's pass counter under ticket partitions; no put, no BatchWriteItem, no
    other attribute updated, no other item."""
    from support_tickets.core import keys

    def finisher(action: str, key: str, attributes: list[str] | None = None) -> iam.Decision:
        context: dict[str, Any] = {"dynamodb:LeadingKeys": [key]}
        if attributes is not None:
            context["dynamodb:Attributes"] = attributes
        return decide(AUDIT_ROLE, iam.Request(f"dynamodb:{action}", TABLE_ARN, context))

    for owner in (tenant, neighbour):
        ticket = keys.ticket_pk(owner, "T1")
        assert finisher("Query", ticket, ["pk", "sk"]) is iam.Decision.ALLOW
        assert finisher("DeleteItem", ticket) is iam.Decision.ALLOW
        assert finisher("UpdateItem", ticket, ["pk", "sk", "passes"]) is iam.Decision.ALLOW
        # Never a write of anything else
        assert finisher("GetItem", ticket, ["pk", "sk"]) is iam.Decision.IMPLICIT_DENY
        assert finisher("UpdateItem", ticket, ["pk", "sk", "title"]) is iam.Decision.IMPLICIT_DENY
        assert finisher("UpdateItem", ticket) is iam.Decision.IMPLICIT_DENY
        for action in ("PutItem", "BatchWriteItem"):
            assert finisher(action, ticket, ["pk", "sk"]) is iam.Decision.IMPLICIT_DENY, action
        # Nor under another partition of the tenant
        for key in (keys.history_pk(owner, "T1"), keys.webhooks_pk(owner), keys.tenant_config_key(owner)["pk"]["S"]):
            assert finisher("DeleteItem", key) is iam.Decision.IMPLICIT_DENY, key
        assert finisher("Query", keys.history_pk(owner, "T1"), ["pk", "sk"]) is iam.Decision.IMPLICIT_DENY


# ---------------------------------------------------------------- the trust policy
def api_session() -> Session:
    return Session("ASIAAPI", API_ROLE, "fn")


COGNITO = "cognito-identity.amazonaws.com"
PROVIDER = f"cognito-idp.us-east-1.amazonaws.com/{USER_POOL_ID}"


def web_identity(
    action: str = "sts:AssumeRoleWithWebIdentity",
    *,
    principal: str = COGNITO,
    aud: str | None = IDENTITY_POOL_ID,
    amr: Sequence[str] | None = ("authenticated", PROVIDER, f"{PROVIDER}:CognitoSignIn:sub-1"),
    tags: Mapping[str, str] | None = None,
) -> iam.Decision:
    """The trust policy's answer to Cognito asking for a web identity session
    (the context keys Cognito's OpenID token gives STS)."""
    context: dict[str, Sequence[str]] = {}
    if aud is not None:
        context[f"{COGNITO}:aud"] = [aud]
    if amr is not None:
        context[f"{COGNITO}:amr"] = list(amr)
    if tags is not None:
        context.update({f"aws:RequestTag/{key}": [value] for key, value in tags.items()})
        context["aws:TagKeys"] = list(tags)
    request = iam.Request(action, TENANT_ROLE.arn, context, (principal,))
    return iam.evaluate([TENANT_ROLE.trust_policy], request, trust=True)


def test_trust_admits_this_identity_pools_authenticated_identities() -> None:
    assert web_identity() is iam.Decision.ALLOW
    assert web_identity("sts:TagSession", tags={"TenantId": "acme"}) is iam.Decision.ALLOW


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"aud": "us-east-1:0c1b5f3a-7d2e-4a8b-9c6d-000000000099"}, id="another-identity-pool"),
        pytest.param({"aud": None}, id="no-identity-pool"),
        pytest.param({"amr": ("unauthenticated",)}, id="a-guest"),
        pytest.param({"amr": None}, id="no-amr"),
        pytest.param({"principal": "accounts.google.com"}, id="another-web-identity-provider"),
        pytest.param({"principal": API_ROLE.arn}, id="the-api-function-role"),
    ],
)
def test_trust_refuses_everything_else(changes: dict[str, Any]) -> None:
    assert web_identity(**changes) is not iam.Decision.ALLOW
    assert web_identity("sts:TagSession", tags={"TenantId": "acme"}, **changes) is not iam.Decision.ALLOW


@pytest.mark.parametrize(
    ("tags", "allowed"),
    [
        ({"TenantId": "acme"}, True),
        ({"TenantId": ""}, False),
        ({"TenantId": "acme", "Other": "x"}, False),
        ({"tenantid": "acme"}, False),
        ({"Other": "acme"}, False),
    ],
)
def test_the_session_tag_is_exactly_a_non_empty_tenant(tags: dict[str, str], allowed: bool) -> None:
    assert (web_identity("sts:TagSession", tags=tags) is iam.Decision.ALLOW) == allowed


@pytest.mark.parametrize("tags", [{}, {"TenantId": "acme"}, {"TenantId": "acme", "Other": "x"}])
def test_nobody_assumes_the_tenant_role_with_assume_role(tags: dict[str, str]) -> None:
    # Not the API functions (which used to), not another session, not the
    # operator: the trust policy names the identity pool's web identities only.
    request = AssumeRoleRequest(TENANT_ROLE.arn, "tenant-acme", tags, None)
    callers = [
        api_session(),
        Session("ASIATENANT", TENANT_ROLE, "tenant-1", {"TenantId": "1"}),
        Session("ASIAAGG", AGGREGATOR_ROLE, "agg"),
        None,  # the operator
    ]
    for caller in callers:
        message = authorize_assume_role(caller, request, ROLES)
        assert message is not None
        assert "is not authorized to perform: sts:AssumeRole" in message


def test_unknown_roles_cannot_be_assumed() -> None:
    request = AssumeRoleRequest("arn:aws:iam::123456789012:role/Admin", "x", {}, None)
    assert authorize_assume_role(None, request, ROLES) is not None


def test_the_operator_can_still_assume_the_function_roles() -> None:
    # The control for the refusals above: AssumeRole itself works, for the
    # roles Lambda assumes (the local stack stands in for Lambda).
    assert authorize_assume_role(None, AssumeRoleRequest(API_ROLE.arn, "x", {}, None), ROLES) is None


def test_a_session_policy_narrows_the_role() -> None:
    narrow = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "*"}],
    }
    session = Session("ASIAX", TENANT_ROLE, "t", {"TenantId": "1"}, narrow)
    assert session.decide(tenant_request("GetItem", ["TENANT#1|A"])) is iam.Decision.ALLOW
    assert session.decide(tenant_request("PutItem", ["TENANT#1|A"])) is iam.Decision.IMPLICIT_DENY


# ---------------------------------------------------------------- AWS evaluation rules
def policy(*statements: Mapping[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


ALLOW_ALL = {"Effect": "Allow", "Action": "*", "Resource": "*"}


def request(action: str = "s3:GetObject", resource: str = "arn:x") -> iam.Request:
    return iam.Request(action, resource, {})


def test_explicit_deny_beats_allow() -> None:
    deny = {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}
    assert iam.evaluate([policy(ALLOW_ALL, deny)], request()) is iam.Decision.EXPLICIT_DENY
    assert iam.evaluate([policy(ALLOW_ALL), policy(deny)], request()) is iam.Decision.EXPLICIT_DENY


def test_nothing_allows_means_implicit_deny() -> None:
    assert iam.evaluate([], request()) is iam.Decision.IMPLICIT_DENY
    other = {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}
    assert iam.evaluate([policy(other)], request()) is iam.Decision.IMPLICIT_DENY


def test_actions_are_case_insensitive_resources_are_not() -> None:
    statement = {"Effect": "Allow", "Action": "S3:getobj?ct", "Resource": "arn:aws:s3:::Bucket/*"}
    assert iam.evaluate([policy(statement)], request("s3:GetObject", "arn:aws:s3:::Bucket/k")) is iam.Decision.ALLOW
    lower = request("s3:GetObject", "arn:aws:s3:::bucket/k")
    assert iam.evaluate([policy(statement)], lower) is iam.Decision.IMPLICIT_DENY


def test_not_action_and_not_resource() -> None:
    statement = {"Effect": "Allow", "NotAction": "s3:Delete*", "NotResource": "arn:secret"}
    assert iam.evaluate([policy(statement)], request("s3:GetObject", "arn:x")) is iam.Decision.ALLOW
    assert iam.evaluate([policy(statement)], request("s3:DeleteObject", "arn:x")) is iam.Decision.IMPLICIT_DENY
    assert iam.evaluate([policy(statement)], request("s3:GetObject", "arn:secret")) is iam.Decision.IMPLICIT_DENY


def condition(block: Mapping[str, Any]) -> dict[str, Any]:
    return policy({"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": block})


def test_string_like_wildcards() -> None:
    like = condition({"StringLike": {"k": "a?c*"}})
    for value, expected in [("abc", True), ("abcdef", True), ("ac", False), ("aXc", True), ("xabc", False)]:
        assert (iam.evaluate([like], iam.Request("a:b", "r", {"k": [value]})) is iam.Decision.ALLOW) == expected


def test_a_key_two_tags_match_in_case_only_fails_closed() -> None:
    """IAM matches a condition key's name, tag key included, without regard to
    case; when two of the resource's tags both match, AWS does not say which
    of their different values the condition sees: an Allow on it never allows,
    a Deny always denies, a policy variable naming it matches nothing."""
    both = iam.Request("a:b", "r", {"aws:ResourceTag/Team": ["red"], "aws:ResourceTag/team": ["blue"]})
    one = iam.Request("a:b", "r", {"aws:ResourceTag/team": ["red"]})
    allow = condition({"StringEquals": {"aws:ResourceTag/TEAM": "red"}})
    assert iam.evaluate([allow], one) is iam.Decision.ALLOW
    assert iam.evaluate([allow], both) is iam.Decision.IMPLICIT_DENY
    deny = {
        "Effect": "Deny",
        "Action": "*",
        "Resource": "*",
        "Condition": {"StringEquals": {"aws:ResourceTag/Team": "x"}},
    }
    assert iam.evaluate([policy(ALLOW_ALL, deny)], one) is iam.Decision.ALLOW
    assert iam.evaluate([policy(ALLOW_ALL, deny)], both) is iam.Decision.EXPLICIT_DENY
    variable = policy({"Effect": "Allow", "Action": "*", "Resource": "arn:${aws:ResourceTag/team}"})
    assert iam.evaluate([variable], iam.Request("a:b", "arn:red", one.context)) is iam.Decision.ALLOW
    assert iam.evaluate([variable], iam.Request("a:b", "arn:red", both.context)) is iam.Decision.IMPLICIT_DENY


def test_missing_keys_positive_false_negated_true_if_exists_true() -> None:
    empty = iam.Request("a:b", "r", {})
    assert iam.evaluate([condition({"StringEquals": {"k": "v"}})], empty) is iam.Decision.IMPLICIT_DENY
    assert iam.evaluate([condition({"StringNotEquals": {"k": "v"}})], empty) is iam.Decision.ALLOW
    assert iam.evaluate([condition({"StringEqualsIfExists": {"k": "v"}})], empty) is iam.Decision.ALLOW


def test_for_all_values_is_true_on_an_empty_set_for_any_value_false() -> None:
    empty = iam.Request("a:b", "r", {"aws:TagKeys": []})
    assert iam.evaluate([condition({"ForAllValues:StringEquals": {"aws:TagKeys": "x"}})], empty) is iam.Decision.ALLOW
    any_value = condition({"ForAnyValue:StringEquals": {"aws:TagKeys": "x"}})
    assert iam.evaluate([any_value], empty) is iam.Decision.IMPLICIT_DENY


def test_null_condition() -> None:
    present = iam.Request("a:b", "r", {"k": ["v"]})
    absent = iam.Request("a:b", "r", {})
    assert iam.evaluate([condition({"Null": {"k": "false"}})], present) is iam.Decision.ALLOW
    assert iam.evaluate([condition({"Null": {"k": "false"}})], absent) is iam.Decision.IMPLICIT_DENY
    assert iam.evaluate([condition({"Null": {"k": "true"}})], absent) is iam.Decision.ALLOW


def test_policy_variables_defaults_and_escapes() -> None:
    tagged = iam.Request("a:b", "arn:t/acme", {"aws:PrincipalTag/T": ["acme"], "k": ["x*"]})
    resource = policy({"Effect": "Allow", "Action": "*", "Resource": "arn:t/${aws:PrincipalTag/T}"})
    assert iam.evaluate([resource], tagged) is iam.Decision.ALLOW
    untagged = iam.Request("a:b", "arn:t/", {})
    assert iam.evaluate([resource], untagged) is iam.Decision.IMPLICIT_DENY
    default = condition({"StringEquals": {"k": "${aws:PrincipalTag/None, 'x*'}"}})
    assert iam.evaluate([default], tagged) is iam.Decision.ALLOW
    literal_star = condition({"StringLike": {"k": "x${*}"}})
    assert iam.evaluate([literal_star], tagged) is iam.Decision.ALLOW
    assert iam.evaluate([literal_star], iam.Request("a:b", "r", {"k": ["xy"]})) is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize("tag", ["*", "glo*", "?lobex", "g?obex", "*|*"])
def test_a_wildcard_in_a_tag_is_a_literal_character(tag: str) -> None:
    # STS refuses such tags (test_guard_requests); should one reach a session
    # anyway, its value is data: it reads nothing of globex.
    session = Session("ASIAX", TENANT_ROLE, "t", {"TenantId": tag})
    for key in ("TENANT#globex|TICKET#a", "TENANT#globex|AGGREGATE", "TENANT#|TICKET#a", "TENANT#glo|x"):
        assert session.decide(tenant_request("GetItem", [key], tenant=tag)) is iam.Decision.IMPLICIT_DENY, key
    literal = session.decide(tenant_request("GetItem", [f"TENANT#{tag}|TICKET#a"], tenant=tag))
    assert literal is iam.Decision.ALLOW


def test_variables_are_literal_in_resources_and_defaults_too() -> None:
    resource = policy({"Effect": "Allow", "Action": "*", "Resource": "arn:t/${aws:PrincipalTag/T}/x"})
    assert iam.evaluate([resource], iam.Request("a:b", "arn:t/*/x", {"aws:PrincipalTag/T": ["*"]})).value == "allow"
    assert iam.evaluate([resource], iam.Request("a:b", "arn:t/a/x", {"aws:PrincipalTag/T": ["*"]})).value != "allow"
    default = condition({"StringLike": {"k": "${aws:PrincipalTag/None, 'a?'}"}})
    assert iam.evaluate([default], iam.Request("a:b", "r", {"k": ["a?"]})) is iam.Decision.ALLOW
    assert iam.evaluate([default], iam.Request("a:b", "r", {"k": ["ab"]})) is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize(
    "statement",
    [
        {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"NumericLessThan": {"k": "1"}}},
        {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"ForSomeValues:StringLike": {"k": "*"}}},
        {"Effect": "Allow", "Action": "*", "Resource": "*", "Principal": "*"},
        {"Effect": "Allow", "Action": "*"},
        {"Effect": "Allow", "Action": ["*", 1], "Resource": "*"},
        {"Effect": "Maybe", "Action": "*", "Resource": "*"},
    ],
)
def test_an_allow_it_does_not_understand_never_allows(statement: dict[str, Any]) -> None:
    assert iam.evaluate([policy(statement)], iam.Request("a:b", "r", {"k": ["v"]})) is not iam.Decision.ALLOW


def test_a_deny_it_does_not_understand_always_denies() -> None:
    weird_deny = {"Effect": "Deny", "Action": "*", "Resource": "*", "Condition": {"NumericLessThan": {"k": "1"}}}
    decision = iam.evaluate([policy(ALLOW_ALL, weird_deny)], iam.Request("a:b", "r", {}))
    assert decision is iam.Decision.EXPLICIT_DENY


def test_single_valued_operator_on_a_multivalued_key_is_not_understood() -> None:
    plain = condition({"StringLike": {"dynamodb:LeadingKeys": "TENANT#1|*"}})
    assert iam.evaluate([plain], tenant_request("GetItem", ["TENANT#1|A"])) is iam.Decision.IMPLICIT_DENY


# ---------------------------------------------------------------- the metering function
METERING_ROLE = ROLES[function_role("MeteringFunction")]


def metering(action: str, keys_: list[str] | None, resource: str = TABLE_ARN) -> iam.Decision:
    context = {"dynamodb:LeadingKeys": keys_} if keys_ is not None else {}
    return decide(METERING_ROLE, iam.Request(f"dynamodb:{action}", resource, context))


@pytest.mark.parametrize("tenant", ["1", "10", "a-b"])
def test_metering_role_puts_and_updates_usage_items_only(tenant: str) -> None:
    from support_tickets.core import keys

    for action in ("PutItem", "UpdateItem"):
        assert metering(action, [keys.usage_pk(tenant)]) is iam.Decision.ALLOW
        assert metering(action, [keys.usage_journal_pk(tenant)]) is iam.Decision.ALLOW
    for action in ("GetItem", "Query", "DeleteItem", "BatchWriteItem", "Scan"):
        assert metering(action, [keys.usage_pk(tenant)]) is iam.Decision.IMPLICIT_DENY
    for key in (
        keys.ticket_pk(tenant, "USAGE"),
        keys.history_pk(tenant, "USAGE"),
        keys.aggregate_pk(tenant),
        keys.tenant_config_key(tenant)["pk"]["S"],
        keys.webhooks_pk(tenant),
        f"{keys.usage_pk(tenant)}X",
        f"{keys.usage_journal_pk(tenant)}#1",
    ):
        assert metering("PutItem", [key]) is iam.Decision.IMPLICIT_DENY, key
        assert metering("UpdateItem", [key]) is iam.Decision.IMPLICIT_DENY, key
    # A transaction that slips another item in is refused whole; no key at all is refused too.
    assert metering("UpdateItem", [keys.usage_pk(tenant), keys.ticket_pk(tenant, "a")]) is iam.Decision.IMPLICIT_DENY
    assert metering("UpdateItem", None) is iam.Decision.IMPLICIT_DENY
    assert metering("UpdateItem", [keys.usage_pk(tenant)], resource=INDEX_ARN) is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize("tenant", ["1", "10", "a-b"])
def test_metering_role_may_only_condition_check_tenant_records(tenant: str) -> None:
    from support_tickets.core import keys

    config = keys.tenant_config_key(tenant)["pk"]["S"]
    # The check of a usage group's transaction: whether the tenant is being offboarded.
    assert metering("ConditionCheckItem", [config]) is iam.Decision.ALLOW
    # nothing else of the record (reading, writing it) and no other key's check
    for action in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query"):
        assert metering(action, [config]) is iam.Decision.IMPLICIT_DENY, action
    for key in (
        keys.ticket_pk(tenant, "CONFIG"),
        keys.usage_pk(tenant),
        keys.aggregate_pk(tenant),
        f"{config}X",
        config.replace("|CONFIG", "|CONFIGX"),
    ):
        assert metering("ConditionCheckItem", [key]) is iam.Decision.IMPLICIT_DENY, key
    assert metering("ConditionCheckItem", None) is iam.Decision.IMPLICIT_DENY
    assert metering("ConditionCheckItem", [config], resource=INDEX_ARN) is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize("action", ["PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"])
@pytest.mark.parametrize("tenant", ["1", "10"])
def test_tenant_credentials_can_read_but_never_write_their_usage(action: str, tenant: str) -> None:
    from support_tickets.core import keys

    for key in keys.usage_partitions(tenant):
        assert decide(TENANT_ROLE, tenant_request("Query", [key], tenant)) is iam.Decision.ALLOW
        assert decide(TENANT_ROLE, tenant_request(action, [key], tenant)) is iam.Decision.EXPLICIT_DENY


def test_a_principal_aws_star_is_every_principal() -> None:
    """``{"AWS": "*"}`` in a resource policy (a key's Deny) names everyone, as ``"*"`` does."""
    for principal in ({"AWS": "*"}, "*", {"AWS": ["arn:aws:iam::123456789012:root", "*"]}):
        deny = {"Statement": [{"Effect": "Deny", "Principal": principal, "Action": "kms:Decrypt", "Resource": "*"}]}
        asking = iam.Request("kms:Decrypt", "*", {}, principals=("arn:aws:iam::123456789012:role/AnyRole",))
        assert iam.evaluate([deny], asking, trust=True) is iam.Decision.EXPLICIT_DENY, principal
    named = {"Statement": [{"Effect": "Deny", "Principal": {"AWS": "arn:aws:iam::123456789012:role/Other"}}]}
    named["Statement"][0].update(Action="kms:Decrypt", Resource="*")
    asking = iam.Request("kms:Decrypt", "*", {}, principals=("arn:aws:iam::123456789012:role/AnyRole",))
    assert iam.evaluate([named], asking, trust=True) is iam.Decision.IMPLICIT_DENY


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_a_tenant_writes_its_own_move_marks_and_no_one_elses(tenant: str, other: str) -> None:
    """The marks a write makes during a move's copy (keys.move_mark_key) are under the tenant's prefix."""
    from support_tickets.core import keys

    ticket = "01J0000000000000000000000A"
    own = keys.move_mark_key(tenant, ticket)["pk"]["S"]
    theirs = keys.move_mark_key(other, ticket)["pk"]["S"]
    for action in ("PutItem", "BatchWriteItem"):
        assert decide(TENANT_ROLE, tenant_request(action, [own], tenant)) is iam.Decision.ALLOW
        assert decide(TENANT_ROLE, tenant_request(action, [theirs], tenant)) is not iam.Decision.ALLOW


# ---------------------------------------------------------------- the webhook delivery function
DELIVERY_ROLE = ROLES[function_role("DeliverWebhookFunction")]


@pytest.mark.parametrize("tenant", ["1", "10"])
def test_delivery_role_may_check_a_tenant_record_for_the_move_fence_and_never_write_it(tenant: str) -> None:
    from support_tickets.core import keys

    config = keys.tenant_config_key(tenant)["pk"]["S"]

    def delivery(action: str, keys_: list[str], resource: str = TABLE_ARN) -> iam.Decision:
        return decide(DELIVERY_ROLE, iam.Request(f"dynamodb:{action}", resource, {"dynamodb:LeadingKeys": keys_}))

    assert delivery("ConditionCheckItem", [config]) is iam.Decision.ALLOW
    for action in ("PutItem", "UpdateItem", "DeleteItem"):
        assert delivery(action, [config]) is iam.Decision.IMPLICIT_DENY, action
    # Only the record's check: not a ticket's, nor the record of a dedicated table (there is none).
    assert delivery("ConditionCheckItem", [keys.ticket_pk(tenant, "a")]) is iam.Decision.IMPLICIT_DENY
    assert delivery("ConditionCheckItem", [config], resource=f"{TABLE_ARN}-dedicated-{tenant}") is (
        iam.Decision.IMPLICIT_DENY
    )
