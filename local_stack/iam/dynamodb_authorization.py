"""A DynamoDB (or DynamoDB Streams) request turned into the authorization
questions DynamoDB asks IAM, and their answer for a role session.

:func:`dynamodb_requests` reads the request's body alone: the action and the
table or index ARN, with ``dynamodb:LeadingKeys`` = the partition-key values
of every item it touches (an item operation asks once; a transaction asks
about each item as that item's own action; a batch asks once per table with
every partition key of its items; a Query about the partition of its key
condition, read by a small KeyConditionExpression parser, on the index's ARN
for an index query), and ``dynamodb:Attributes`` = every top-level attribute
the request (or the transaction item) names: its item or key, its update,
condition, projection, key-condition and filter expressions, and the legacy
parameters (:func:`request_attributes`; not what ``ReturnValues`` returns, as
in DynamoDB). What it cannot model (PartiQL, a key condition or expression it
can't read) is :class:`iam.NotUnderstood`, and refused.

:func:`authorize_dynamodb` asks each question of the session's policies, with
``aws:SourceVpce`` when the request came through the stack's gateway endpoint
and ``aws:ResourceTag/<key>`` for the tags of the resource it names (whose
tags: :func:`tag_owner`; the context from :mod:`local_stack.iam.condition_keys`);
the first refusal is DynamoDB's AccessDeniedException message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.condition_keys import dynamodb_context, request_context, resource_context
from local_stack.iam.sessions import Session, denial_message
from stack_model.template import ACCOUNT_ID


@dataclass(frozen=True)
class TableKeys:
    """A table's partition-key attribute, and each index's."""

    name: str
    partition_key: str
    index_partition_keys: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    """One authorization question a DynamoDB request asks.

    ``attributes`` is ``dynamodb:Attributes`` (:func:`request_attributes`),
    ``None`` for an action that names no attribute (DescribeTable...)."""

    action: str
    resource: str
    leading_keys: tuple[str, ...] | None = None
    attributes: tuple[str, ...] | None = field(default=None, compare=False)


# The tags of a resource ARN (a table's, a stream's) as they are when asked: what
# aws:ResourceTag/<key> reads. The emulator reads moto's table; tests give a mapping.
ResourceTags = Callable[[str], Mapping[str, str] | None]


def tag_owner(resource: str) -> str | None:
    """The ARN whose tags are ``aws:ResourceTag`` for a question on ``resource``:
    a table's own; an index's, its table's ("the indexes associated with a
    table inherit the tags you add to the table"); a stream's, its own
    ("stream resources do not inherit tags from their parent table"); ``None``
    for ``*`` and anything that is not a table's. (DynamoDB Developer Guide,
    "Using attribute-based access control with DynamoDB" and "... with DynamoDB
    Streams".)"""
    if not resource.startswith("arn:") or ":table/" not in resource:
        return None
    prefix, _, path = resource.partition(":table/")
    name, _, rest = path.partition("/")
    if rest.startswith("index/"):
        return f"{prefix}:table/{name}"
    return resource


_TRANSACT_ACTIONS = {
    "Get": "GetItem",
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
_ITEM_OPERATIONS = {"GetItem": "Key", "PutItem": "Item", "UpdateItem": "Key", "DeleteItem": "Key"}
_UNMODELLED = frozenset({"ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction"})
_TOKEN = re.compile(r"\s*(#[A-Za-z0-9_]+|:[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*|<=|>=|<>|[=<>(),])")


def table_arn(region: str, table: str) -> str:
    return table if table.startswith("arn:") else f"arn:aws:dynamodb:{region}:{ACCOUNT_ID}:table/{table}"


def table_name(table: str) -> str:
    """A table's name from its name or ARN (``arn:aws:dynamodb:<r>:<a>:table/<name>``,
    an index's or its stream's too): what DynamoDB accepts as ``TableName``."""
    if table.startswith("arn:") and ":table/" in table:
        return table.split(":table/", 1)[1].split("/", 1)[0]
    return table


def dynamodb_requests(
    operation: str, body: Mapping[str, Any], *, region: str, tables: Mapping[str, TableKeys]
) -> list[Question]:
    """The questions IAM answers for one DynamoDB (or Streams) API call.

    Raises :class:`iam.NotUnderstood` for a request it cannot model (the
    guard then denies it).
    """
    if operation in _UNMODELLED:
        raise iam.NotUnderstood(operation)
    reader = _KeyReader(region, tables)
    if operation in _ITEM_OPERATIONS:
        return [reader.item(operation, body.get("TableName"), body.get(_ITEM_OPERATIONS[operation]), body)]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        return reader.transaction(body.get("TransactItems"))
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return reader.batch(operation, body.get("RequestItems"))
    if operation == "Query":
        return [reader.query(body)]
    # Everything else asks about the action on a resource, without keys (Scan,
    # DescribeTable, the Streams API...): no dynamodb:LeadingKeys in the context;
    # a Scan's projection and filter are its dynamodb:Attributes.
    attributes = request_attributes(body) if operation == "Scan" else None
    return [Question(f"dynamodb:{operation}", _resource_of(operation, body, region), attributes=attributes)]


@dataclass(frozen=True)
class _KeyReader:
    region: str
    tables: Mapping[str, TableKeys]

    def keys_of(self, table: Any) -> TableKeys:
        name = table_name(table) if isinstance(table, str) else None
        if name is None or name not in self.tables:
            raise iam.NotUnderstood(f"table {table!r}")
        return self.tables[name]

    def leading(self, table: str, item: Any) -> str:
        attribute = self.keys_of(table).partition_key
        if not isinstance(item, Mapping) or attribute not in item:
            raise iam.NotUnderstood("item without its partition key")
        return _scalar(item[attribute])

    def item(self, action: str, table: Any, item: Any, spec: Mapping[str, Any] | None = None) -> Question:
        self.keys_of(table)
        attributes = request_attributes(spec if spec is not None else {}, item)
        return Question(f"dynamodb:{action}", table_arn(self.region, table), (self.leading(table, item),), attributes)

    def transaction(self, entries: Any) -> list[Question]:
        if not isinstance(entries, list) or not entries:
            raise iam.NotUnderstood("TransactItems")
        questions = []
        for entry in entries:
            if not isinstance(entry, Mapping) or len(entry) != 1:
                raise iam.NotUnderstood("TransactItems")
            ((kind, spec),) = entry.items()
            if kind not in _TRANSACT_ACTIONS or not isinstance(spec, Mapping):
                raise iam.NotUnderstood(f"transaction item {kind}")
            item = spec.get("Item") if kind == "Put" else spec.get("Key")
            questions.append(self.item(_TRANSACT_ACTIONS[kind], spec.get("TableName"), item, spec))
        return questions

    def batch(self, operation: str, request_items: Any) -> list[Question]:
        if not isinstance(request_items, Mapping) or not request_items:
            raise iam.NotUnderstood("RequestItems")
        questions = []
        for table, spec in request_items.items():
            if operation == "BatchGetItem":
                items = list(spec.get("Keys", [])) if isinstance(spec, Mapping) else []
                names = request_attributes(spec if isinstance(spec, Mapping) else {}, *items)
            else:
                if not isinstance(spec, list):
                    raise iam.NotUnderstood("BatchWriteItem requests")
                items = [_write_request_item(request) for request in spec]
                # The docs name PutItem's Item; a batch's puts are read the same
                # way, each request's item (a delete's key) adding its names.
                names = request_attributes({}, *items)
            values = tuple(self.leading(table, item) for item in items)
            if not values:
                raise iam.NotUnderstood("empty batch")
            questions.append(Question(f"dynamodb:{operation}", table_arn(self.region, table), values, names))
        return questions

    def query(self, body: Mapping[str, Any]) -> Question:
        table = body.get("TableName")
        keys = self.keys_of(table)
        index = body.get("IndexName")
        attribute = keys.partition_key if index is None else keys.index_partition_keys.get(str(index))
        if attribute is None:
            raise iam.NotUnderstood(f"index {index}")
        values = [_query_partition_value(body, attribute)]
        start = body.get("ExclusiveStartKey")
        if start is not None:
            # Stricter than DynamoDB (which rejects a foreign start key as invalid):
            # every partition key in the start key must be allowed too.
            if not isinstance(start, Mapping):
                raise iam.NotUnderstood("ExclusiveStartKey")
            values += [_scalar(start[name]) for name in (keys.partition_key, attribute) if name in start]
        resource = table_arn(self.region, str(table)) + (f"/index/{index}" if index is not None else "")
        return Question("dynamodb:Query", resource, tuple(dict.fromkeys(values)), request_attributes(body))


# Actions IAM authorizes on "*" only (no resource type in the Service Authorization
# Reference), although their requests may name a table to filter by.
_ON_ANY_RESOURCE = frozenset({"ListStreams", "ListBackups", "ListContributorInsights"})


def _resource_of(operation: str, body: Mapping[str, Any], region: str) -> str:
    if operation in _ON_ANY_RESOURCE:
        return "*"
    if isinstance(body.get("TableName"), str):
        resource = table_arn(region, body["TableName"])
        index = body.get("IndexName")
        return resource + (f"/index/{index}" if isinstance(index, str) else "")
    for name in ("StreamArn", "ResourceArn", "TableArn"):
        if isinstance(body.get(name), str):
            return str(body[name])
    if operation == "GetRecords" and isinstance(body.get("ShardIterator"), str):
        # moto's shard iterators start with the stream ARN: "<stream arn>|1|<id>".
        stream = body["ShardIterator"].split("|", 1)[0]
        return stream if stream.startswith("arn:") else ""
    return "*"


def _write_request_item(request: Any) -> Any:
    if isinstance(request, Mapping) and len(request) == 1:
        ((kind, spec),) = request.items()
        if kind == "PutRequest" and isinstance(spec, Mapping):
            return spec.get("Item")
        if kind == "DeleteRequest" and isinstance(spec, Mapping):
            return spec.get("Key")
    raise iam.NotUnderstood("BatchWriteItem request")


def _scalar(value: Any) -> str:
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, raw),) = value.items()
        if kind in ("S", "N") and isinstance(raw, str):
            return raw
    raise iam.NotUnderstood(f"key value {value!r}")


def _query_partition_value(body: Mapping[str, Any], attribute: str) -> str:
    """The partition-key value a Query asks for: the one ``<key> = :value``
    comparison of its KeyConditionExpression (or legacy KeyConditions EQ)."""
    expression = body.get("KeyConditionExpression")
    if expression is None:
        conditions = body.get("KeyConditions")
        if not isinstance(conditions, Mapping) or attribute not in conditions:
            raise iam.NotUnderstood("Query without a partition key condition")
        condition = conditions[attribute]
        values = condition.get("AttributeValueList", []) if isinstance(condition, Mapping) else []
        if condition.get("ComparisonOperator") != "EQ" or len(values) != 1:
            raise iam.NotUnderstood("KeyConditions on the partition key must be EQ")
        return _scalar(values[0])
    if not isinstance(expression, str):
        raise iam.NotUnderstood("KeyConditionExpression")
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    tokens = _tokens(_TOKEN, expression, "KeyConditionExpression syntax")

    def attribute_of(token: str) -> str | None:
        if token.startswith("#"):
            name = names.get(token)
            if not isinstance(name, str):
                raise iam.NotUnderstood(f"undefined name {token}")
            return name
        return None if token.startswith(":") or not token[0].isalpha() else token

    found: list[str] = []
    for index, token in enumerate(tokens):
        if attribute_of(token) != attribute:
            continue
        before = tokens[index - 2 : index] if index >= 2 else []
        after = tokens[index + 1 : index + 3]
        if len(after) == 2 and after[0] == "=" and after[1].startswith(":"):
            found.append(after[1])
        elif len(before) == 2 and before[1] == "=" and before[0].startswith(":"):
            found.append(before[0])
        else:
            raise iam.NotUnderstood("the partition key is used other than in '<key> = :value'")
    if len(found) != 1 or found[0] not in values:
        raise iam.NotUnderstood("Query needs exactly one '<partition key> = :value'")
    return _scalar(values[found[0]])


# ---------------------------------------------------------------- dynamodb:Attributes
# The parameters whose names DynamoDB's developer guide lists for the key
# ("Attributes values are named the same way and have the same meaning as the
# parameters for certain DynamoDB API actions": AttributesToGet, AttributeUpdates,
# Expected, Item, ScanFilter) and their expression successors: every top-level
# attribute a request reads, writes or tests. What a request returns
# (ReturnValues ALL_OLD/ALL_NEW, a Select of all attributes) is not in it: that
# is why allow-list policies restrict dynamodb:ReturnValues and dynamodb:Select.
_NAME_LISTS = ("AttributesToGet",)
_NAME_MAPS = ("AttributeUpdates", "Expected", "KeyConditions", "QueryFilter", "ScanFilter")
_EXPRESSIONS = (
    "ProjectionExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ConditionExpression",
    "UpdateExpression",
)
_EXPRESSION_TOKEN = re.compile(
    r"\s*(#[A-Za-z0-9_]+|:[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*|\d+|<=|>=|<>|[=<>(),.\[\]+-])"
)
_EXPRESSION_KEYWORDS = frozenset({"SET", "REMOVE", "ADD", "DELETE", "AND", "OR", "NOT", "BETWEEN", "IN"})


def request_attributes(spec: Mapping[str, Any], *items: Any) -> tuple[str, ...]:
    """``dynamodb:Attributes`` of one request (or one transaction item): the
    names of ``items`` (an Item, a Key: the key attributes are always there), of
    the legacy parameters, and the top-level names of its expressions
    (``#name`` resolved: ``SET #e = :v`` with ``#e`` = ``erasing`` names
    ``erasing``; ``a.b[0]`` names ``a``). NotUnderstood for an expression it
    can't read (the guard then denies)."""
    found: dict[str, None] = {}
    for item in items:
        if not isinstance(item, Mapping):
            raise iam.NotUnderstood("item")
        found.update(dict.fromkeys(str(name) for name in item))
    for name in _NAME_LISTS:
        value = spec.get(name)
        if value is not None:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise iam.NotUnderstood(name)
            found.update(dict.fromkeys(value))
    for name in _NAME_MAPS:
        value = spec.get(name)
        if value is not None:
            if not isinstance(value, Mapping):
                raise iam.NotUnderstood(name)
            found.update(dict.fromkeys(str(key) for key in value))
    names = spec.get("ExpressionAttributeNames") or {}
    if not isinstance(names, Mapping):
        raise iam.NotUnderstood("ExpressionAttributeNames")
    for name in _EXPRESSIONS:
        expression = spec.get(name)
        if expression is not None:
            if not isinstance(expression, str):
                raise iam.NotUnderstood(name)
            found.update(dict.fromkeys(_top_level_names(expression, names)))
    return tuple(found)


def _tokens(pattern: re.Pattern[str], expression: str, refused: str) -> list[str]:
    """``expression`` split by ``pattern`` (group 1 is a token); anything it
    does not match is :class:`iam.NotUnderstood` (``refused``)."""
    tokens: list[str] = []
    position = 0
    while position < len(expression.rstrip()):
        match = pattern.match(expression, position)
        if match is None:
            raise iam.NotUnderstood(refused)
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def _top_level_names(expression: str, names: Mapping[str, Any]) -> list[str]:
    """The first element of every document path in ``expression``."""
    tokens = _tokens(_EXPRESSION_TOKEN, expression, "expression syntax")
    found: list[str] = []
    for index, token in enumerate(tokens):
        previous = tokens[index - 1] if index else ""
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        if previous == "." or token.startswith(":") or token[0].isdigit():
            continue  # a nested element, a value, a list index
        if token.startswith("#"):
            name = names.get(token)
            if not isinstance(name, str):
                raise iam.NotUnderstood(f"undefined name {token}")
            found.append(name)
        elif token[0].isalpha() or token[0] == "_":
            if following == "(" or token.upper() in _EXPRESSION_KEYWORDS:
                continue  # a function (attribute_exists, if_not_exists...) or a keyword
            found.append(token)
    return found


def authorize_dynamodb(
    session: Session,
    operation: str,
    body: Mapping[str, Any],
    *,
    region: str,
    tables: Mapping[str, TableKeys],
    source_vpce: str | None = None,
    resource_tags: ResourceTags | None = None,
) -> str | None:
    """``None`` when AWS would allow the call for ``session``, else the
    AccessDeniedException message. ``source_vpce``: the VPC endpoint the
    request came through (``aws:SourceVpce``), ``None`` from anywhere else.
    ``resource_tags``: the tags of a resource ARN now (``None``: no resource
    has tags)."""
    try:
        questions = dynamodb_requests(operation, body, region=region, tables=tables)
    except iam.NotUnderstood:
        return denial_message(session.arn, f"dynamodb:{operation}", _resource_of(operation, body, region), None)
    for question in questions:
        owner = tag_owner(question.resource) if resource_tags is not None else None
        context = request_context(
            session,
            source_vpce,
            dynamodb_context(question.leading_keys, question.attributes),
            resource_context(resource_tags(owner) if resource_tags is not None and owner is not None else None),
        )
        decision = session.decide(iam.Request(question.action, question.resource, context))
        if decision is not iam.Decision.ALLOW:
            return denial_message(session.arn, question.action, question.resource, decision)
    return None
