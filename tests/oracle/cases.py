"""The requests the guard and the oracle both judge, generated from the template.

A :class:`Case` is one DynamoDB (or DynamoDB Streams) API call as a role
session makes it: the role, its session tags, the context its route adds
(``aws:SourceVpce``...), the operation and its JSON body. It also carries the
authorization questions AWS asks for it (:class:`Question`), written here from
the body this module built, not read back from it: the guard gets only the
body and must find the same questions on its own (its key extraction is under
test too).

What this module assumes AWS asks (the DynamoDB Developer Guide, "Using IAM
policy conditions for fine-grained access control", and the Service
Authorization Reference): one question per item operation, with
``dynamodb:LeadingKeys`` = the item's partition key; a Query asks about the
partition of its key condition (on the index's ARN for an index query); a
batch asks once per table with every partition key of its items; a
transaction asks about each of its items as that item's own action
(``ConditionCheck`` is ``dynamodb:ConditionCheckItem``); actions without
resource types (``ListStreams``, ``ListTables``...) are asked on ``*``.
``dynamodb:Attributes`` is the top-level attribute names a request writes
(a put's item, key included; an update's ``SET``/``REMOVE`` targets) or
projects (``ProjectionExpression``); absent otherwise. ``aws:ResourceTag/<key>``
is each tag of the table a question names, an index's being its table's
(DynamoDB's ABAC: "the indexes associated with a table inherit the tags you
add to the table"; a stream inherits none): the dedicated tenants' tables of
:data:`DEDICATED_TAGS` are tagged, the pool table is not.

Which values vary: every role of the template; session tags (none, each
tenant, another tenant's, ``*``, ``1*``, ``?``, a differently cased
key); every condition key the policies test that a request's route supplies
(``aws:SourceVpce`` always): absent, each value a policy names, and a wrong
one; keys of tenants ``1``, ``10``, ``a`` and ``a-b`` of every kind
:mod:`support_tickets.core.keys` builds, plus malformed ones; and the table:
the pool's, or a dedicated tenant's (tenant ``1``'s, ``10``'s, one whose tag
names another tenant than its name, one untagged), alone or with the pool's
in one batch or transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID
from stack_model.dedicated import TENANT_TAG, table_name
from support_tickets.core import keys
from tests.oracle.policies import ACCOUNT_ID, REGION, OracleRole

TABLE = "SupportTicket"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{TABLE}"
INDEX = keys.GSI1_NAME
INDEX_ARN = f"{TABLE_ARN}/index/{INDEX}"
OTHER_TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/Other"
TENANTS = ("1", "10", "a", "a-b")
SOURCE_VPCE = "aws:SourceVpce"
WRONG = "vpce-0wrong0wrong0wrong"
# A stand-in for the stack's gateway endpoint while no policy names one.
PLACEHOLDER_VPCE = "vpce-0123456789abcdef0"
# Keys whose request values come from the session, the request or its resource, not from its route.
_DERIVED_KEYS = ("dynamodb:leadingkeys", "dynamodb:attributes", "aws:principalarn", "aws:principalaccount")
_RESOURCE_KEYS = "aws:resourcetag/"
# The dedicated tenants' tables (templates/dedicated-table.yaml: named after the pool's,
# tagged TenantId): tenant 1's and 10's, one whose tag names another tenant than its name
# says, and one with no tag at all.
DEDICATED_TAGS: dict[str, dict[str, str]] = {
    table_name(TABLE, "1"): {TENANT_TAG: "1"},
    table_name(TABLE, "10"): {TENANT_TAG: "10"},
    table_name(TABLE, "a"): {TENANT_TAG: "a-b"},
    table_name(TABLE, "u"): {},
}
ATTRIBUTE_SETS: tuple[tuple[str, ...], ...] = ((), ("erasing",), ("title", "erasing"))

# A documented difference of the guard (docs/local-stack.md): it also asks
# about the partition keys of a Query's ExclusiveStartKey.
START_KEY = "start-key"


@dataclass(frozen=True)
class Question:
    """One authorization question, as AWS asks it."""

    action: str
    resource: str
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Call:
    """An API call and the questions AWS asks for it."""

    operation: str
    body: Mapping[str, Any]
    questions: tuple[Question, ...]
    # The guard's questions where they knowingly differ (START_KEY), else None.
    limit: str | None = None
    guard_questions: tuple[Question, ...] | None = None
    # The guard refuses what it does not model (PartiQL): compare the verdict only.
    unmodelled: bool = False


@dataclass(frozen=True)
class Case:
    role: OracleRole
    session_name: str
    tags: Mapping[str, str]
    route: Mapping[str, str]  # context keys the request's route adds (aws:SourceVpce)
    call: Call

    @property
    def principal(self) -> str:
        return f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/{self.role.name}/{self.session_name}"

    def context(self, question: Question) -> dict[str, list[str]]:
        """The request context AWS evaluates ``question`` with."""
        context: dict[str, list[str]] = {f"aws:PrincipalTag/{key}": [value] for key, value in self.tags.items()}
        context["aws:PrincipalArn"] = [self.role.arn]
        context["aws:PrincipalAccount"] = [ACCOUNT_ID]
        context.update({key: [value] for key, value in self.route.items()})
        context.update({key: list(values) for key, values in question.context.items() if values})
        return context


# ---------------------------------------------------------------- keys
@dataclass(frozen=True)
class Key:
    pk: str
    sk: str

    def item(self, *names: str) -> dict[str, Any]:
        item: dict[str, Any] = {"pk": {"S": self.pk}, "sk": {"S": self.sk}}
        item.update({name: {"S": "x"} if name != "erasing" else {"BOOL": True} for name in names})
        return item

    def key(self) -> dict[str, Any]:
        return {"pk": {"S": self.pk}, "sk": {"S": self.sk}}


def table_keys() -> list[Key]:
    """A key of every kind for each tenant, and malformed ones."""
    found: list[Key] = []
    for tenant in TENANTS:
        config = keys.tenant_config_key(tenant)
        journal = keys.aggregate_journal_key(tenant, "event-1")
        found += [
            Key(keys.ticket_pk(tenant, "T1"), keys.SUMMARY_SK),
            Key(keys.ticket_pk(tenant, "T1"), keys.comment_sk("2026-01-01T00:00:00.000Z", "C1")),
            Key(config["pk"]["S"], config["sk"]["S"]),
            Key(keys.aggregate_pk(tenant), keys.aggregate_sk(keys.TicketStatus.OPEN, 3)),
            Key(journal["pk"]["S"], journal["sk"]["S"]),
            Key(keys.idempotency_pk(tenant, "user|key"), "RECORD"),
            Key(keys.history_pk(tenant, "T1"), keys.audit_sk("2026-01-01T00:00:00.000Z", "1", "e1")),
            Key(keys.audit_day_pk(tenant, "2026-01-01", 3), keys.audit_sk("2026-01-01T00:00:00.000Z", "1", "e1")),
            Key(keys.audit_days_pk(tenant), "2026-01-01"),
        ]
    # Not built by keys.py: what a bug or an attacker could send.
    found += [
        Key("TENANT#1", "SUMMARY"),
        Key("TENANT#1*|TICKET#x", "SUMMARY"),
        Key("TENANT#?|CONFIG", "CONFIG"),
        Key("tenant#1|TICKET#x", "SUMMARY"),
        Key("TENANT#|CONFIG", "CONFIG"),
        Key("XTENANT#1|TICKET#x", "SUMMARY"),
    ]
    return found


def index_keys() -> list[tuple[str, str | None]]:
    """GSI1 partition keys, each with the tenant whose tickets it lists (None: malformed)."""
    found: list[tuple[str, str | None]] = []
    for tenant in TENANTS:
        found += [
            (keys.tenant_status(tenant, keys.TicketStatus.OPEN), tenant),
            (keys.tenant_status(tenant, keys.TicketStatus.CLOSED, 3), tenant),
        ]
    return [*found, ("TENANT#1", None), ("TENANT#*|OPEN", None)]


# ---------------------------------------------------------------- calls
def table_arn(table: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{table}"


def resource_tags(resource: str) -> dict[str, str]:
    """The tags AWS evaluates a question on ``resource`` with: its table's, for
    the table and its indexes; none for a stream or ``*``."""
    prefix = table_arn("")
    if not resource.startswith(prefix):
        return {}
    table, _, rest = resource.removeprefix(prefix).partition("/")
    if rest and not rest.startswith("index/"):
        return {}
    return DEDICATED_TAGS.get(table, {})


def _q(action: str, resource: str, leading: Sequence[str] | None = None, attributes: Sequence[str] = ()) -> Question:
    context: dict[str, tuple[str, ...]] = {
        f"aws:ResourceTag/{key}": (value,) for key, value in resource_tags(resource).items()
    }
    if leading is not None:
        context["dynamodb:LeadingKeys"] = tuple(dict.fromkeys(leading))
    if attributes:
        context["dynamodb:Attributes"] = tuple(dict.fromkeys(attributes))
    return Question(f"dynamodb:{action}", resource, context)


def _update(extra: Sequence[str]) -> tuple[str, dict[str, Any], list[str]]:
    """An UpdateExpression setting ``version`` and ``extra`` (``erasing`` removed
    every other time, as a REMOVE also writes it), its values, and its targets."""
    names = ["version", *extra]
    sets = [name for name in names if name != "erasing" or len(extra) == 1]
    removes = [name for name in names if name not in sets]
    expression = "SET " + ", ".join(f"{name} = :{name}" for name in sets)
    if removes:
        expression += " REMOVE " + ", ".join(removes)
    return expression, {f":{name}": {"S": "x"} for name in sets}, names


def item_calls(key: Key) -> Iterator[Call]:
    for extra in ATTRIBUTE_SETS:
        item = key.item(*extra)
        yield Call("PutItem", {"TableName": TABLE, "Item": item}, (_q("PutItem", TABLE_ARN, [key.pk], list(item)),))
        expression, values, targets = _update(extra)
        body = {"TableName": TABLE, "Key": key.key(), "UpdateExpression": expression}
        yield Call(
            "UpdateItem",
            {**body, "ExpressionAttributeValues": values},
            (_q("UpdateItem", TABLE_ARN, [key.pk], targets),),
        )
        get: dict[str, Any] = {"TableName": TABLE, "Key": key.key()}
        if extra:
            get["ProjectionExpression"] = ", ".join(extra)
        yield Call("GetItem", get, (_q("GetItem", TABLE_ARN, [key.pk], extra),))
    yield Call("DeleteItem", {"TableName": TABLE, "Key": key.key()}, (_q("DeleteItem", TABLE_ARN, [key.pk]),))


def dedicated_table_calls() -> Iterator[Call]:
    """Every dedicated table of :data:`DEDICATED_TAGS`: a put (with and without
    the erasing mark), an update, a get, a delete and a Query with each tenant's
    ticket keys, tenant 1's count item and a malformed key; a Query of GSI1 for
    each tenant's tickets; its stream read; and a batch and a transaction naming
    a dedicated table's item and the pool table's."""
    chosen = [
        *(Key(keys.ticket_pk(tenant, "T1"), keys.SUMMARY_SK) for tenant in TENANTS),
        Key(keys.aggregate_pk("1"), keys.aggregate_sk(keys.TicketStatus.OPEN, 3)),
        Key("TENANT#1", "SUMMARY"),
    ]
    for table in DEDICATED_TAGS:
        arn = table_arn(table)
        for key in chosen:
            for item in (key.item("title"), key.item("erasing")):
                yield Call("PutItem", {"TableName": table, "Item": item}, (_q("PutItem", arn, [key.pk], list(item)),))
            expression, values, targets = _update(())
            update = {"TableName": table, "Key": key.key(), "UpdateExpression": expression}
            yield Call(
                "UpdateItem",
                {**update, "ExpressionAttributeValues": values},
                (_q("UpdateItem", arn, [key.pk], targets),),
            )
            yield Call("GetItem", {"TableName": table, "Key": key.key()}, (_q("GetItem", arn, [key.pk]),))
            yield Call("DeleteItem", {"TableName": table, "Key": key.key()}, (_q("DeleteItem", arn, [key.pk]),))
            query = {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": {"S": key.pk}}}
            yield Call("Query", {"TableName": table, **query}, (_q("Query", arn, [key.pk]),))
        for status_key, _ in index_keys():
            body = {
                "TableName": table,
                "IndexName": INDEX,
                "KeyConditionExpression": "tenant_status = :s",
                "ExpressionAttributeValues": {":s": {"S": status_key}},
            }
            yield Call("Query", body, (_q("Query", f"{arn}/index/{INDEX}", [status_key]),))
        stream = f"{arn}/stream/2026-01-01T00:00:00.000"
        yield Call("DescribeStream", {"StreamArn": stream}, (_q("DescribeStream", stream),))
        yield Call("GetRecords", {"ShardIterator": f"{stream}|1|abc"}, (_q("GetRecords", stream),))
        for tenant in TENANTS:
            own, pooled = (
                Key(keys.ticket_pk(tenant, "T1"), keys.SUMMARY_SK),
                Key(keys.ticket_pk(tenant, "T2"), "SUMMARY"),
            )
            yield Call(
                "BatchWriteItem",
                {
                    "RequestItems": {
                        table: [{"DeleteRequest": {"Key": own.key()}}],
                        TABLE: [{"DeleteRequest": {"Key": pooled.key()}}],
                    }
                },
                (
                    _q("BatchWriteItem", arn, [own.pk], ["pk", "sk"]),
                    _q("BatchWriteItem", TABLE_ARN, [pooled.pk], ["pk", "sk"]),
                ),
            )
            yield Call(
                "TransactWriteItems",
                {
                    "TransactItems": [
                        {"Delete": {"TableName": table, "Key": own.key()}},
                        {"Put": {"TableName": TABLE, "Item": pooled.item("title")}},
                    ]
                },
                (_q("DeleteItem", arn, [own.pk]), _q("PutItem", TABLE_ARN, [pooled.pk], list(pooled.item("title")))),
            )


def query_calls(key: Key) -> Iterator[Call]:
    value = {"S": key.pk}
    forms: list[dict[str, Any]] = [
        {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": value}},
        {
            "KeyConditionExpression": "#p = :v AND begins_with(sk, :c)",
            "ExpressionAttributeNames": {"#p": "pk"},
            "ExpressionAttributeValues": {":v": value, ":c": {"S": "C"}},
        },
        {"KeyConditions": {"pk": {"ComparisonOperator": "EQ", "AttributeValueList": [value]}}},
    ]
    for form in forms:
        yield Call("Query", {"TableName": TABLE, **form}, (_q("Query", TABLE_ARN, [key.pk]),))
    own_page = {"pk": value, "sk": {"S": key.sk}}
    yield Call(
        "Query",
        {**forms[0], "TableName": TABLE, "ExclusiveStartKey": own_page, "ProjectionExpression": "title, erasing"},
        (_q("Query", TABLE_ARN, [key.pk], ["title", "erasing"]),),
    )


def index_query_calls(status_key: str, tenant: str | None, foreign: Key) -> Iterator[Call]:
    body = {
        "TableName": TABLE,
        "IndexName": INDEX,
        "KeyConditionExpression": "tenant_status = :s",
        "ExpressionAttributeValues": {":s": {"S": status_key}},
    }
    asked = (_q("Query", INDEX_ARN, [status_key]),)
    yield Call("Query", body, asked)
    # The next page: the start key holds the item's table key and its index key.
    for ticket in ([keys.ticket_pk(tenant, "T1")] if tenant else []) + [foreign.pk]:
        start = {"pk": {"S": ticket}, "sk": {"S": "SUMMARY"}, "tenant_status": {"S": status_key}}
        start["resolver"] = {"S": keys.UNASSIGNED_RESOLVER}
        yield Call(
            "Query",
            {**body, "ExclusiveStartKey": start},
            asked,
            limit=START_KEY,
            guard_questions=(_q("Query", INDEX_ARN, [status_key, ticket]),),
        )


def multi_item_calls(all_keys: Sequence[Key]) -> Iterator[Call]:
    """Batches and transactions over 1-3 items, the tenants' and others' mixed."""
    groups = [list(group) for size in (1, 2, 3) for group in itertools.combinations(all_keys[::3], size)][::7]
    for index, group in enumerate(groups):
        extra = ATTRIBUTE_SETS[index % len(ATTRIBUTE_SETS)]
        pks = [key.pk for key in group]
        yield Call(
            "BatchGetItem",
            {"RequestItems": {TABLE: {"Keys": [key.key() for key in group]}}},
            (_q("BatchGetItem", TABLE_ARN, pks),),
        )
        writes = [
            {"PutRequest": {"Item": key.item(*extra)}} if position % 2 == 0 else {"DeleteRequest": {"Key": key.key()}}
            for position, key in enumerate(group)
        ]
        written = [name for position, key in enumerate(group) if position % 2 == 0 for name in key.item(*extra)]
        yield Call(
            "BatchWriteItem",
            {"RequestItems": {TABLE: writes}},
            (_q("BatchWriteItem", TABLE_ARN, pks, written),),
        )
        yield _transaction(group, extra, index)
        yield Call(
            "TransactGetItems",
            {"TransactItems": [{"Get": {"TableName": TABLE, "Key": key.key()}} for key in group]},
            tuple(_q("GetItem", TABLE_ARN, [key.pk]) for key in group),
        )


def _transaction(group: Sequence[Key], extra: Sequence[str], index: int) -> Call:
    entries: list[dict[str, Any]] = []
    asked: list[Question] = []
    for position, key in enumerate(group):
        kind = ("Put", "Update", "Delete", "ConditionCheck")[(index + position) % 4]
        if kind == "Put":
            item = key.item(*extra)
            entries.append({"Put": {"TableName": TABLE, "Item": item}})
            asked.append(_q("PutItem", TABLE_ARN, [key.pk], list(item)))
        elif kind == "Update":
            expression, values, targets = _update(extra)
            spec = {"TableName": TABLE, "Key": key.key(), "UpdateExpression": expression}
            entries.append({"Update": {**spec, "ExpressionAttributeValues": values}})
            asked.append(_q("UpdateItem", TABLE_ARN, [key.pk], targets))
        elif kind == "Delete":
            entries.append({"Delete": {"TableName": TABLE, "Key": key.key()}})
            asked.append(_q("DeleteItem", TABLE_ARN, [key.pk]))
        else:
            check = {"TableName": TABLE, "Key": key.key(), "ConditionExpression": "attribute_exists(pk)"}
            entries.append({"ConditionCheck": check})
            asked.append(_q("ConditionCheckItem", TABLE_ARN, [key.pk]))
    return Call("TransactWriteItems", {"TransactItems": entries}, tuple(asked))


def keyless_calls(stream_arn: str) -> Iterator[Call]:
    """Calls that name no item: what no role's code makes (Scan, table and
    account management) and the stream readers' calls."""
    other_stream = f"{OTHER_TABLE_ARN}/stream/2026-01-01T00:00:00.000"
    on_table = ["Scan", "DescribeTable", "UpdateTable", "DeleteTable", "DescribeTimeToLive", "UpdateTimeToLive"]
    on_table += ["DescribeContinuousBackups", "CreateBackup", "DescribeKinesisStreamingDestination"]
    for operation in on_table:
        for table, arn in ((TABLE, TABLE_ARN), ("Other", OTHER_TABLE_ARN)):
            yield Call(operation, {"TableName": table}, (_q(operation, arn),))
    yield Call("Scan", {"TableName": TABLE, "IndexName": INDEX}, (_q("Scan", INDEX_ARN),))
    yield Call("CreateTable", {"TableName": "Other"}, (_q("CreateTable", OTHER_TABLE_ARN),))
    for operation in ("TagResource", "UntagResource", "ListTagsOfResource", "GetResourcePolicy", "PutResourcePolicy"):
        yield Call(operation, {"ResourceArn": TABLE_ARN}, (_q(operation, TABLE_ARN),))
    yield Call("ExportTableToPointInTime", {"TableArn": TABLE_ARN}, (_q("ExportTableToPointInTime", TABLE_ARN),))
    for operation in ("ListTables", "DescribeLimits", "ListBackups", "ListStreams"):
        yield Call(operation, {}, (_q(operation, "*"),))
    for stream in (stream_arn, other_stream):
        yield Call("DescribeStream", {"StreamArn": stream}, (_q("DescribeStream", stream),))
        shard = {"StreamArn": stream, "ShardId": "shardId-1", "ShardIteratorType": "TRIM_HORIZON"}
        yield Call("GetShardIterator", shard, (_q("GetShardIterator", stream),))
        # moto's iterators start with their stream's ARN, which is how the guard names the stream.
        yield Call("GetRecords", {"ShardIterator": f"{stream}|1|abc"}, (_q("GetRecords", stream),))
    for table in (TABLE, "Other"):
        # No resource type: asked on "*" whatever table they name.
        for operation in ("ListStreams", "ListBackups", "ListContributorInsights"):
            yield Call(operation, {"TableName": table}, (_q(operation, "*"),))
    select = "SELECT * FROM \"SupportTicket\" WHERE pk = 'TENANT#1|TICKET#T1'"
    yield Call(
        "ExecuteStatement",
        {"Statement": select},
        (_q("PartiQLSelect", TABLE_ARN, ["TENANT#1|TICKET#T1"]),),
        unmodelled=True,
    )


# What a queued delivery's record sets besides its type, event and status.
QUEUED_RECORD = (
    "delivery_id",
    "webhook_id",
    "event_id",
    "ticket_id",
    "next_attempt_at",
    "last_status_code",
    "created_at",
    "expiration",
    "attempts",
)


def webhook_delivery_calls() -> Iterator[Call]:
    """The delivery side's items (a webhook's delivery records, a tenant's delivery
    rate counters): the delivery role's reads and writes, and what tenant
    credentials may do with them (read; of a delivery record, write only the
    redelivery mark). An update's ``dynamodb:Attributes`` here is its key and every
    name of its update and condition expressions."""
    mark = "redeliver_requested_at"
    for tenant in TENANTS:
        delivery = keys.delivery_key(tenant, "W1", "1795620804983-abc")
        rate = {"pk": {"S": keys.webhook_rate_pk(tenant)}, "sk": {"S": "1795620804"}}
        for key, sets in (
            (delivery, ((mark,), ("status",), (mark, "status"), ("attempts", "event"))),
            (rate, (("count",), (mark,))),
        ):
            pk = key["pk"]["S"]
            for names in sets:
                expression = "SET " + ", ".join(f"{name} = :{name}" for name in names)
                values = {f":{name}": {"S": "x"} for name in names}
                body = {
                    "TableName": TABLE,
                    "Key": key,
                    "UpdateExpression": expression,
                    "ExpressionAttributeValues": values,
                }
                yield Call("UpdateItem", body, (_q("UpdateItem", TABLE_ARN, [pk], ["pk", "sk", *names]),))
                yield Call(
                    "TransactWriteItems",
                    {"TransactItems": [{"Update": body}]},
                    (_q("UpdateItem", TABLE_ARN, [pk], ["pk", "sk", *names]),),
                )
            # The route's own shape: the mark, conditional on the record's key.
            conditional = {
                "TableName": TABLE,
                "Key": key,
                "UpdateExpression": "SET #m = :at",
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeNames": {"#m": mark},
                "ExpressionAttributeValues": {":at": {"S": "2026-11-25T12:00:00.000Z"}},
            }
            yield Call("UpdateItem", conditional, (_q("UpdateItem", TABLE_ARN, [pk], ["pk", "sk", mark]),))
            # The mark, conditional on the status: the condition's names count too.
            tested = {
                **conditional,
                "ConditionExpression": "#s = :at",
                "ExpressionAttributeNames": {"#m": mark, "#s": "status"},
            }
            yield Call("UpdateItem", tested, (_q("UpdateItem", TABLE_ARN, [pk], ["pk", "sk", mark, "status"]),))
            # The audit writer's record of a delivery it queues (DeliveryRecords.record_queued): the
            # delivery's attributes, conditional on the record's absence.
            queued = (*QUEUED_RECORD, "type", "event", "status")
            record = {
                "TableName": TABLE,
                "Key": key,
                "UpdateExpression": "SET " + ", ".join(f"#{name} = :v" for name in queued),
                "ConditionExpression": "attribute_not_exists(pk)",
                "ExpressionAttributeNames": {f"#{name}": name for name in queued},
                "ExpressionAttributeValues": {":v": {"S": "x"}},
            }
            yield Call("UpdateItem", record, (_q("UpdateItem", TABLE_ARN, [pk], ["pk", "sk", *queued]),))
            item = {**key, "status": {"S": "DELIVERED"}}
            yield Call("PutItem", {"TableName": TABLE, "Item": item}, (_q("PutItem", TABLE_ARN, [pk], list(item)),))
            yield Call("DeleteItem", {"TableName": TABLE, "Key": key}, (_q("DeleteItem", TABLE_ARN, [pk]),))
            yield Call("GetItem", {"TableName": TABLE, "Key": key}, (_q("GetItem", TABLE_ARN, [pk]),))
            query = {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": {"S": pk}}}
            yield Call("Query", {"TableName": TABLE, **query}, (_q("Query", TABLE_ARN, [pk]),))
            ticket = keys.ticket_key(tenant, "T1")
            batch = [{"DeleteRequest": {"Key": ticket}}, {"DeleteRequest": {"Key": key}}]
            yield Call(
                "BatchWriteItem",
                {"RequestItems": {TABLE: batch}},
                (_q("BatchWriteItem", TABLE_ARN, [ticket["pk"]["S"], pk]),),
            )


def calls(stream_arn: str) -> list[Call]:
    table = table_keys()
    found: list[Call] = []
    for key in table:
        found += item_calls(key)
        found += query_calls(key)
    foreign = Key(keys.ticket_pk("10", "T9"), keys.SUMMARY_SK)
    for status_key, tenant in index_keys():
        found += index_query_calls(status_key, tenant, foreign)
    found += multi_item_calls(table)
    found += webhook_delivery_calls()
    found += keyless_calls(stream_arn)
    found += dedicated_table_calls()
    return found


# ---------------------------------------------------------------- sessions and routes
SESSION_NAME = "oracle"  # no policy of the template reads it: one name lets identical questions be asked once
TENANT_TAG_SETS_PER_CALL = 3
TAG_SETS: tuple[dict[str, str], ...] = (
    {},
    {"TenantId": "1"},
    {"TenantId": "10"},
    {"TenantId": "a"},
    {"TenantId": "a-b"},
    {"TenantId": "*"},
    {"TenantId": "1*"},
    {"TenantId": "?"},
    # Not {"TenantId": ""}: iam-simulate 0.1.173 takes an empty value for a
    # missing one (and then matches nothing); the trust policy refuses an empty
    # TenantId tag ("?*"), so no session of the tenant role carries one.
    {"tenantid": "1"},
    {"TenantId": "1", "Other": "10"},
)


def routes(condition_values: Mapping[str, set[str]]) -> list[dict[str, str]]:
    """The route-supplied context keys the policies test, each absent, with
    every value a policy names, and with a wrong value; ``aws:SourceVpce`` always."""
    varied: dict[str, list[str]] = {}
    for key, values in condition_values.items():
        # (kms:EncryptionContext*: the webhook statement's, from a KMS call's body; the calls here are DynamoDB's.)
        if key in _DERIVED_KEYS or key.startswith(("aws:principaltag/", "kms:encryptioncontext", _RESOURCE_KEYS)):
            continue
        name = SOURCE_VPCE if key == SOURCE_VPCE.lower() else key
        varied[name] = [*sorted(value for value in values if "${" not in value), WRONG]
    varied.setdefault(SOURCE_VPCE, [PLACEHOLDER_VPCE, WRONG])
    found: list[dict[str, str]] = [{}]
    for name, options in sorted(varied.items()):
        found += [{name: value} for value in options]
    if len(varied) > 1:
        # Every varied key at once, with the policies' values: the routes a real request takes.
        found.append({name: options[0] for name, options in sorted(varied.items())})
    return found


def cases(roles: Mapping[str, OracleRole], route_set: Sequence[Mapping[str, str]], stream_arn: str) -> list[Case]:
    """Every call for every role, each with some of the tag sets: the tenant
    role, whose decisions depend on its tags, with :data:`TENANT_TAG_SETS_PER_CALL`
    of them, the others with one, rotating from call to call (a key has more
    calls than there are tag sets, so each key meets each tag set). Routes
    change after each run of len(TAG_SETS) calls, so each tag set meets each route."""
    found: list[Case] = []
    all_calls = calls(stream_arn)
    for role in roles.values():
        per_call = TENANT_TAG_SETS_PER_CALL if role.name == "TenantAccessRole" else 1
        for number, call in enumerate(all_calls):
            for turn in range(per_call):
                shift = (number + turn * len(TAG_SETS) // per_call) % len(TAG_SETS)
                # A run of len(TAG_SETS) calls meets every tag set on one route, the next
                # run the next route: every pair, whatever the parity of the route count
                # (number + shift + turn kept to one parity with an even count: two routes never met).
                route = route_set[(number // len(TAG_SETS) + turn) % len(route_set)]
                found.append(Case(role, SESSION_NAME, TAG_SETS[shift], route, call))
    # And the delivery side's items with their own tenant's credentials on the API
    # functions' route: the one combination whose verdict the rotation may miss.
    inside = {SOURCE_VPCE: LOCAL_VPC_ENDPOINT_ID}  # the DynamoDB gateway endpoint's id, as the guard's
    for role in roles.values():
        if role.name != "TenantAccessRole":
            continue
        for call in webhook_delivery_calls():
            tenant = keys.tenant_of_key(call.questions[0].context["dynamodb:LeadingKeys"][-1])
            found.append(Case(role, SESSION_NAME, {"TenantId": tenant}, inside, call))
        # And the dedicated tables' calls with tenant 1's and 10's credentials on that route:
        # each table's own tenant (allowed under its prefix, on the table and on GSI1) and the other.
        for call in dedicated_table_calls():
            for tenant in ("1", "10"):
                found.append(Case(role, SESSION_NAME, {"TenantId": tenant}, inside, call))
    return found
