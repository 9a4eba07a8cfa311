r"""The IAM guard in front of the emulator: what AWS would refuse, refused.

moto answers every request as if IAM allowed it. The guard is a WSGI
middleware in front of moto's server that knows who signed each request (read
from the ``Authorization`` header exactly as moto reads it, :func:`signer_of`,
so both always agree on the caller and the service) and evaluates the
template's policies for it with :mod:`local_stack.iam`. A role's policies are
its inline ones, those attached with ``AWS::IAM::Policy`` and its AWS managed
policies (see :mod:`local_stack.roles`):

- **STS AssumeRole** (any caller): the target role must be a role of the
  template; its trust policy must allow ``sts:AssumeRole`` (and
  ``sts:TagSession`` when tags are passed) with the request's tags as
  ``aws:RequestTag/*`` and ``aws:TagKeys``; a role-session caller also needs
  its own role's policies to allow both actions. Tags STS refuses (a key or
  value with a character outside ``[\p{L}\p{Z}\p{N}_.:/=+\-@]``, such as
  ``*`` or ``?``, too long, more than 50 tags) are STS's 400
  ``ValidationError`` before any of that. When moto then issues the
  credentials, the guard records their access key id with the role, the
  session name and the session tags: that is how ``${aws:PrincipalTag/...}``
  gets its value later. Other credential-minting STS actions are refused
  (the guard could not attribute their keys). ``TenantAccessRole`` trusts
  only the identity pool (``sts:AssumeRoleWithWebIdentity``), so nobody
  assumes it with ``AssumeRole``, the operator included, as in AWS.
- **The identity pool** (``GetId``, ``GetCredentialsForIdentity``,
  ``GetOpenIdToken``, signed or not, as Cognito takes them): answered by
  :class:`local_stack.identity_pool.LocalIdentityPool` (the token verified
  as Cognito verifies it, the role's trust policy, the template's principal
  tags); the credentials it issues are recorded like AssumeRole's, with the
  role and the tags Cognito would set. Its other actions follow the rules
  below (the operator's pass, a session's are refused, unsigned ones too).
- **DynamoDB and DynamoDB Streams** signed with a recorded session: every
  request is turned into the authorization questions DynamoDB asks
  (:func:`dynamodb_requests`): the action and the table or index ARN,
  ``dynamodb:LeadingKeys`` = the partition-key values of every item the request
  touches (a transaction or batch is one question per item or table), and
  ``dynamodb:Attributes`` = every top-level attribute the request (or the
  transaction item) names: its item or key, its update, condition,
  projection, key-condition and filter expressions, and the legacy
  parameters (:func:`request_attributes`; not what ``ReturnValues`` returns,
  as in DynamoDB). All must
  be allowed by the role's policies (and by the session policy, if any); the
  first refusal answers exactly as DynamoDB does: HTTP 400,
  ``AccessDeniedException``, "User: ... is not authorized to perform: ...".
- **Any other service** signed with a recorded session: evaluated on the
  resource the call names (:func:`resource_of`: an SQS queue's ARN from its
  URL or name, a Cognito user pool's ARN). A call whose resource the guard
  can't name is refused: judged on ``*``, a Deny naming the resource would
  not apply.
- Requests signed with any **other** key are the local operator: the stack's
  own set-up, your ``aws --endpoint-url`` commands and ``sam local``
  containers (which sign with your host credentials). The operator is the
  emulated account's administrator and stands in for the Lambda service: its
  requests pass unchecked, except that it too can assume only the template's
  roles and only under their trust conditions (the ``TenantId`` tag rules of
  TenantAccessRole apply to it); its principal counts as named by any trust
  policy.
- **Unsigned** requests reach only the user pool's JWKS/OpenID configuration
  and Cognito's unauthenticated and token-authorized operations
  (:data:`local_stack.cognito.PUBLIC_ACTIONS`: ``InitiateAuth``,
  ``UpdateUserAttributes`` with the user's access token...); Cognito's admin
  and management APIs need IAM credentials (the operator's, or a session's
  whose policies grant them on the pool), and everything else
  (``/moto-api/``, unsigned STS federation) is refused. What the pool's own
  settings refuse (sign-up, immutable attributes, auth flows) moto's backend
  refuses (:mod:`local_stack.cognito`).

Knowingly not modelled: signatures are not verified (a key id identifies the
caller, as moto does); credential expiry is not enforced; SCPs, permission
boundaries and resource policies other than trust policies do not exist here;
condition keys other than ``dynamodb:LeadingKeys``, ``dynamodb:Attributes``, ``aws:PrincipalTag/*``,
``aws:PrincipalArn``, ``aws:PrincipalAccount``, ``aws:RequestTag/*``,
``aws:TagKeys`` and ``sts:RoleSessionName`` are absent from requests (a
policy that tests one fails closed); PartiQL is refused for role sessions.

moto is not thread-safe; the guard also serializes the requests it forwards.
"""

from __future__ import annotations

import io
import json
import logging
import re
import threading
import unicodedata
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from moto.core.responses import BaseResponse
from moto.moto_server.werkzeug_app import SIGNING_ALIASES

from local_stack import cognito, iam
from local_stack.roles import ACCOUNT_ID, RoleDefinition

if TYPE_CHECKING:
    from local_stack.identity_pool import LocalIdentityPool

log = logging.getLogger("local_stack.guard")

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_UNSIGNED_PATH = re.compile(r"^/[\w-]+_[0-9a-zA-Z]+/\.well-known/(jwks\.json|openid-configuration)$")
# Minting actions whose keys the guard could not attribute to a role.
_REFUSED_STS_ACTIONS = frozenset(
    {"AssumeRoleWithWebIdentity", "AssumeRoleWithSAML", "GetSessionToken", "GetFederationToken", "AssumeRoot"}
)
_STS_NS = "{https://sts.amazonaws.com/doc/2011-06-15/}"
_IDENTITY_POOL_TARGET = "AWSCognitoIdentityService."
# Set by the emulator's gateway-endpoint listener only (a WSGI key no client header can become).
SOURCE_VPCE_ENVIRON = "local_stack.source_vpce"
# What Cognito serves to anyone holding a login token (unsigned in AWS's SDKs).
IDENTITY_POOL_ACTIONS = frozenset({"GetId", "GetCredentialsForIdentity", "GetOpenIdToken"})


# ---------------------------------------------------------------- who is calling
@dataclass(frozen=True)
class Signer:
    """Who signed a request, and for which region and service, read from its
    ``Authorization`` header exactly as moto reads it: the access key with
    moto's own expression (``BaseResponse.access_key_regex``, the key moto
    attributes the request to), the region and service from the first
    comma-separated part's credential scope, as moto's dispatcher picks the
    backend (``DomainDispatcherApplication.infer_service_region_host``).
    ``access_key`` is ``None`` when moto finds none (it then acts as its
    default account, i.e. the operator here)."""

    access_key: str | None
    region: str
    service: str


def signer_of(authorization: str) -> Signer | None:
    """``None`` when the header names no service moto could dispatch by."""
    match = BaseResponse.access_key_regex.search(authorization)
    try:
        scope = authorization.split(",", maxsplit=1)[0].split()[1]
        _, _, region, service, _ = scope.split("/")
    except (IndexError, ValueError):
        return None
    service = SIGNING_ALIASES.get(service.lower(), service).lower()
    return Signer(match.group("access_key") if match else None, region, service)


@dataclass(frozen=True)
class Session:
    """Credentials the emulator's STS issued for a role of the template."""

    access_key_id: str
    role: RoleDefinition
    session_name: str
    tags: Mapping[str, str] = field(default_factory=dict)
    session_policy: Mapping[str, Any] | None = None

    @property
    def arn(self) -> str:
        return f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/{self.role.name}/{self.session_name}"

    def context(self) -> dict[str, list[str]]:
        context = {f"aws:PrincipalTag/{key}": [value] for key, value in self.tags.items()}
        context["aws:PrincipalArn"] = [self.role.arn]
        context["aws:PrincipalAccount"] = [ACCOUNT_ID]
        return context

    def decide(self, request: iam.Request) -> iam.Decision:
        policy_sets: list[list[Mapping[str, Any]]] = [list(self.role.policies())]
        if self.session_policy is not None:
            policy_sets.append([self.session_policy])
        return iam.evaluate_all(policy_sets, request)


class Sessions:
    """Access key id -> session, for every AssumeRole the guard let through."""

    def __init__(self) -> None:
        self._by_key: dict[str, Session] = {}
        self._lock = threading.Lock()

    def add(self, session: Session) -> None:
        with self._lock:
            self._by_key[session.access_key_id] = session

    def get(self, access_key_id: str | None) -> Session | None:
        if access_key_id is None:
            return None
        with self._lock:
            return self._by_key.get(access_key_id)


# ---------------------------------------------------------------- DynamoDB requests
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


def _table_name(table: str) -> str:
    return table.split(":table/", 1)[1].split("/", 1)[0] if table.startswith("arn:") else table


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
        name = _table_name(table) if isinstance(table, str) else None
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
    tokens: list[str] = []
    position = 0
    while position < len(expression.rstrip()):
        match = _TOKEN.match(expression, position)
        if match is None:
            raise iam.NotUnderstood("KeyConditionExpression syntax")
        tokens.append(match.group(1))
        position = match.end()

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


def _top_level_names(expression: str, names: Mapping[str, Any]) -> list[str]:
    """The first element of every document path in ``expression``."""
    tokens: list[str] = []
    position = 0
    while position < len(expression.rstrip()):
        match = _EXPRESSION_TOKEN.match(expression, position)
        if match is None:
            raise iam.NotUnderstood("expression syntax")
        tokens.append(match.group(1))
        position = match.end()
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
) -> str | None:
    """``None`` when AWS would allow the call for ``session``, else the
    AccessDeniedException message. ``source_vpce``: the VPC endpoint the
    request came through (``aws:SourceVpce``), ``None`` from anywhere else."""
    try:
        questions = dynamodb_requests(operation, body, region=region, tables=tables)
    except iam.NotUnderstood:
        return denial_message(session.arn, f"dynamodb:{operation}", _resource_of(operation, body, region), None)
    for question in questions:
        context: dict[str, Sequence[str]] = dict(session.context())
        if source_vpce is not None:
            context["aws:SourceVpce"] = [source_vpce]
        if question.leading_keys is not None:
            context["dynamodb:LeadingKeys"] = question.leading_keys
        if question.attributes is not None:
            context["dynamodb:Attributes"] = question.attributes
        decision = session.decide(iam.Request(question.action, question.resource, context))
        if decision is not iam.Decision.ALLOW:
            return denial_message(session.arn, question.action, question.resource, decision)
    return None


def denial_message(
    principal: str, action: str, resource: str, decision: iam.Decision | None, *, trust: bool = False
) -> str:
    """AWS's wording: the reason names the identity-based policy; a refused trust
    policy gets no reason, as STS answers it."""
    message = f"User: {principal} is not authorized to perform: {action} on resource: {resource}"
    if trust:
        return message
    if decision is iam.Decision.EXPLICIT_DENY:
        return f"{message} with an explicit deny in an identity-based policy"
    return f"{message} because no identity-based policy allows the {action} action"


# ---------------------------------------------------------------- other services
def resource_of(service: str, action: str, params: Mapping[str, Any], *, region: str) -> str:
    """The resource IAM authorizes a (non-DynamoDB) call on, for the services
    the stack's roles use: an SQS queue by its URL or name, a Cognito user pool
    by its id. Anything else is :class:`iam.NotUnderstood` (the guard denies
    it): evaluated against ``*``, a Deny naming a resource would not apply."""
    if service == "sqs":
        url, name = params.get("QueueUrl"), params.get("QueueName")
        if isinstance(url, str) and url:
            parts = urllib.parse.urlsplit(url).path.strip("/").split("/")
            if len(parts) == 2 and all(parts):  # /<account>/<queue>
                return f"arn:aws:sqs:{region}:{parts[0]}:{parts[1]}"
        elif isinstance(name, str) and name:
            return f"arn:aws:sqs:{region}:{ACCOUNT_ID}:{name}"
        elif action == "ListQueues":
            return "*"
        raise iam.NotUnderstood(f"sqs:{action} without a queue")
    if service == "cognito-idp":
        pool = params.get("UserPoolId")
        if isinstance(pool, str) and pool:
            return f"arn:aws:cognito-idp:{region}:{ACCOUNT_ID}:userpool/{pool}"
        raise iam.NotUnderstood(f"cognito-idp:{action} without a user pool")
    raise iam.NotUnderstood(f"resources of {service}")


# ---------------------------------------------------------------- STS AssumeRole
# STS's Tag shape (API reference, "Tag"): key 1-128 and value 0-256 characters
# of [\p{L}\p{Z}\p{N}_.:/=+\-@]; at most 50 tags. So no "*", "?", "|", "#" or
# "$" ever reaches a principal tag.
MAX_SESSION_TAGS = 50
_TAG_KEY_PATTERN = r"[\p{L}\p{Z}\p{N}_.:/=+\-@]+"
_TAG_VALUE_PATTERN = r"[\p{L}\p{Z}\p{N}_.:/=+\-@]*"
_TAG_PUNCTUATION = frozenset("_.:/=+-@")


class InvalidRequest(ValueError):
    """A request STS refuses before any authorization: 400 ValidationError."""


def _tag_characters_valid(text: str) -> bool:
    return all(unicodedata.category(char)[0] in "LZN" or char in _TAG_PUNCTUATION for char in text)


def tag_errors(tags: Sequence[tuple[str, str]]) -> list[str]:
    """STS's validation errors for these session tags, worded as STS words them."""
    errors: list[str] = []
    if len(tags) > MAX_SESSION_TAGS:
        errors.append(
            f"Value '{len(tags)} tags' at 'tags' failed to satisfy constraint: "
            f"Member must have length less than or equal to {MAX_SESSION_TAGS}"
        )
    for index, (key, value) in enumerate(tags, start=1):
        for part, text, shortest, longest, pattern in (
            ("key", key, 1, 128, _TAG_KEY_PATTERN),
            ("value", value, 0, 256, _TAG_VALUE_PATTERN),
        ):
            where = f"Value '{text}' at 'tags.{index}.member.{part}' failed to satisfy constraint: Member must"
            if len(text) < shortest:
                errors.append(f"{where} have length greater than or equal to {shortest}")
            elif len(text) > longest:
                errors.append(f"{where} have length less than or equal to {longest}")
            if not _tag_characters_valid(text):
                errors.append(f"{where} satisfy regular expression pattern: {pattern}")
    return errors


@dataclass(frozen=True)
class AssumeRoleRequest:
    role_arn: str
    session_name: str
    tags: dict[str, str]
    session_policy: dict[str, Any] | None


def parse_assume_role(params: Mapping[str, str]) -> AssumeRoleRequest:
    """The parameters of a query-protocol AssumeRole call; :class:`InvalidRequest`
    for tags STS refuses, NotUnderstood for anything the guard does not model
    (transitive tags, managed session policies)."""
    given: list[tuple[str, str]] = []
    index = 1
    while f"Tags.member.{index}.Key" in params:
        given.append((params[f"Tags.member.{index}.Key"], params.get(f"Tags.member.{index}.Value", "")))
        index += 1
    errors = tag_errors(given)
    if errors:
        count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} detected"
        raise InvalidRequest(f"{count}: {'; '.join(errors)}")
    tags: dict[str, str] = {}
    for key, value in given:
        if key.lower() in {existing.lower() for existing in tags}:
            raise iam.NotUnderstood("duplicate tag key")
        tags[key] = value
    if any(name.startswith(("TransitiveTagKeys", "PolicyArns", "ProvidedContexts")) for name in params):
        raise iam.NotUnderstood("transitive tags, managed session policies and provided contexts")
    policy = params.get("Policy")
    return AssumeRoleRequest(
        role_arn=params.get("RoleArn", ""),
        session_name=params.get("RoleSessionName", ""),
        tags=tags,
        session_policy=json.loads(policy) if policy else None,
    )


def authorize_assume_role(
    caller: Session | None, request: AssumeRoleRequest, roles: Mapping[str, RoleDefinition]
) -> str | None:
    """``None`` when AWS would let ``caller`` (``None``: the operator) assume
    the role with these tags, else the AccessDenied message."""
    caller_arn = caller.arn if caller is not None else f"arn:aws:iam::{ACCOUNT_ID}:root"
    role = next((role for role in roles.values() if role.arn == request.role_arn), None)
    if role is None:
        return denial_message(caller_arn, "sts:AssumeRole", request.role_arn, None)
    context: dict[str, Sequence[str]] = {f"aws:RequestTag/{key}": [value] for key, value in request.tags.items()}
    context["sts:RoleSessionName"] = [request.session_name]
    if request.tags:
        context["aws:TagKeys"] = list(request.tags)
    if caller is not None:
        context.update(caller.context())
        principals: tuple[str, ...] = (caller.role.arn, f"arn:aws:iam::{ACCOUNT_ID}:root", ACCOUNT_ID)
    else:
        principals = ("*",)
    actions = ["sts:AssumeRole"] + (["sts:TagSession"] if request.tags else [])
    for action in actions:
        question = iam.Request(action, role.arn, context, principals)
        trusted = iam.evaluate([role.trust_policy], question, trust=True)
        if trusted is not iam.Decision.ALLOW:
            return denial_message(caller_arn, action, role.arn, trusted, trust=True)
        if caller is not None:
            permitted = caller.decide(question)
            if permitted is not iam.Decision.ALLOW:
                return denial_message(caller_arn, action, role.arn, permitted)
    return None


# ---------------------------------------------------------------- the middleware
@dataclass
class _Response:
    status: str
    headers: list[tuple[str, str]]
    body: bytes


class Guard:
    """WSGI middleware: authorize, then forward to moto (one request at a time)."""

    def __init__(
        self,
        app: WsgiApp,
        roles: Mapping[str, RoleDefinition],
        tables: Mapping[str, TableKeys],
        sessions: Sessions | None = None,
        identity_pool: LocalIdentityPool | None = None,
    ) -> None:
        self._app = app
        self.roles = roles
        self.tables = tables
        self.sessions = sessions or Sessions()
        self.identity_pool = identity_pool
        self._lock = threading.Lock()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        body = _read_body(environ)
        authorization = environ.get("HTTP_AUTHORIZATION", "")
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        response: _Response | None
        signer = signer_of(authorization) if authorization else None
        identity_pool_action = (
            target.removeprefix(_IDENTITY_POOL_TARGET) if target.startswith(_IDENTITY_POOL_TARGET) else ""
        )
        if identity_pool_action in IDENTITY_POOL_ACTIONS:
            response = self._identity_pool(identity_pool_action, body)
        elif not authorization:
            response = self._unsigned(environ, body, target)
        elif signer is None:
            # moto would hand it to a default backend: nothing the guard could judge.
            response = _json_denial("AccessDeniedException", "The request's credential scope can't be read.")
        else:
            session = self.sessions.get(signer.access_key)
            response = self._authorize(
                environ, body, session, region=signer.region, service=signer.service, target=target
            )
        if response is None:
            response = self._forward(environ, body)
        start_response(response.status, response.headers)
        return [response.body]

    def _identity_pool(self, action: str, body: bytes) -> _Response:
        """Cognito's answer (JSON 1.1); issued credentials are recorded with
        the pool's role and the tags Cognito would set."""
        from local_stack.identity_pool import IdentityPoolError

        try:
            params = json.loads(body or b"{}")
            if not isinstance(params, dict):
                raise IdentityPoolError("InvalidParameterException", "The request body is not a JSON object.")
            if self.identity_pool is None:
                raise IdentityPoolError("ResourceNotFoundException", "No identity pool is provisioned.")
            answer, issued = self.identity_pool.call(action, params)
        except ValueError:
            answer, issued = None, None
            error = ("SerializationException", "The request body is not JSON.")
        except IdentityPoolError as exc:
            answer, issued = None, None
            error = (exc.code, exc.message)
        if answer is None:
            log.warning("identity pool refused %s: %s", action, error[1])
            return _json_denial(error[0], error[1], content_type="application/x-amz-json-1.1")
        if issued is not None:
            self.sessions.add(Session(issued.access_key_id, issued.role, issued.session_name, dict(issued.tags)))
        payload = json.dumps(answer).encode()
        headers = [
            ("Content-Type", "application/x-amz-json-1.1"),
            ("x-amzn-RequestId", str(uuid.uuid4())),
            ("Content-Length", str(len(payload))),
        ]
        return _Response("200 OK", headers, payload)

    def _forward(self, environ: Environ, body: bytes) -> _Response:
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            captured["status"], captured["headers"] = status, headers
            return lambda _data: None

        with self._lock:
            chunks = self._app(environ, capture)
            try:
                data = b"".join(chunks)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
        return _Response(captured["status"], list(captured["headers"]), data)

    def _unsigned(self, environ: Environ, body: bytes, target: str) -> _Response | None:
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD") == "GET" and _UNSIGNED_PATH.match(path):
            return None
        service, _, action = target.partition(".")
        if service == "AWSCognitoIdentityProviderService":
            if action in cognito.PUBLIC_ACTIONS:
                return None
            # Admin and management APIs need IAM credentials (the operator's here).
            return _json_denial("MissingAuthenticationTokenException", "Missing Authentication Token")
        sts_action = "" if target else _query_params(environ, body).get("Action", "")
        if sts_action:
            # STS's unsigned federation (AssumeRoleWithWebIdentity, -WithSAML), in STS's own XML.
            return _xml_denial(denial_message("anonymous", f"sts:{sts_action}", "*", None))
        return _json_denial("AccessDeniedException", "Unsigned requests are not accepted here.", status="403 Forbidden")

    def _authorize(
        self, environ: Environ, body: bytes, session: Session | None, *, region: str, service: str, target: str
    ) -> _Response | None:
        if service == "sts":
            return self._sts(environ, body, session)
        if session is None:
            return None  # the operator
        if service == "dynamodb":
            operation = target.split(".", 1)[1] if target.startswith(("DynamoDB_", "DynamoDBStreams_")) else target
            try:
                payload = json.loads(body or b"{}")
            except ValueError:
                payload = None
            message = (
                authorize_dynamodb(
                    session,
                    operation,
                    payload,
                    region=region,
                    tables=self.tables,
                    source_vpce=environ.get(SOURCE_VPCE_ENVIRON),
                )
                if isinstance(payload, dict)
                else denial_message(session.arn, f"dynamodb:{operation}", "*", None)
            )
            if message is not None:
                log.warning("denied: %s", message)
                return _json_denial("com.amazonaws.dynamodb.v20120810#AccessDeniedException", message)
            return None
        params = _request_params(environ, body, target)
        action = target.split(".", 1)[1] if "." in target else str(params.get("Action", ""))
        try:
            resource = resource_of(service, action, params, region=region)
        except iam.NotUnderstood as exc:
            log.warning("refused %s:%s for %s: %s", service, action, session.arn, exc)
            resource, decision = "*", None
        else:
            decision = session.decide(iam.Request(f"{service}:{action}", resource, session.context()))
            if decision is iam.Decision.ALLOW:
                return None
        message = denial_message(session.arn, f"{service}:{action}", resource, decision)
        log.warning("denied: %s", message)
        return _json_denial("AccessDeniedException", message) if target else _xml_denial(message)

    def _sts(self, environ: Environ, body: bytes, caller: Session | None) -> _Response | None:
        params = _query_params(environ, body)
        action = params.get("Action", "")
        caller_arn = caller.arn if caller is not None else f"arn:aws:iam::{ACCOUNT_ID}:root"
        if action in _REFUSED_STS_ACTIONS:
            return _xml_denial(denial_message(caller_arn, f"sts:{action}", "*", None))
        if action != "AssumeRole":
            return None
        request = _assume_role_request(params, caller_arn)
        if isinstance(request, _Response):
            return request
        message = authorize_assume_role(caller, request, self.roles)
        if message is not None:
            log.warning("denied: %s", message)
            return _xml_denial(message)
        response = self._forward(environ, body)
        if response.status.startswith("200"):
            access_key = ET.fromstring(response.body).find(f".//{_STS_NS}AccessKeyId")  # noqa: S314 - moto's own XML
            role = next(role for role in self.roles.values() if role.arn == request.role_arn)
            if access_key is None or not access_key.text:
                return _xml_denial("The emulator returned no credentials.")
            self.sessions.add(
                Session(access_key.text, role, request.session_name, dict(request.tags), request.session_policy)
            )
        return response


def _assume_role_request(params: Mapping[str, str], caller_arn: str) -> AssumeRoleRequest | _Response:
    """The request, or STS's answer to one it refuses before authorization."""
    try:
        return parse_assume_role(params)
    except InvalidRequest as exc:
        log.warning("refused: %s", exc)
        return _xml_error("ValidationError", str(exc), status="400 Bad Request")
    except (iam.NotUnderstood, ValueError):
        return _xml_denial(denial_message(caller_arn, "sts:AssumeRole", params.get("RoleArn", "*"), None))


def _read_body(environ: Environ) -> bytes:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    return environ["wsgi.input"].read(length) if length > 0 else b""


def _request_params(environ: Environ, body: bytes, target: str) -> dict[str, Any]:
    """A JSON-protocol body (calls with an X-Amz-Target), else the query parameters."""
    if target:
        try:
            payload = json.loads(body or b"{}")
        except ValueError:
            return {}
        return payload if isinstance(payload, dict) else {}
    return dict(_query_params(environ, body))


def _query_params(environ: Environ, body: bytes) -> dict[str, str]:
    params = {key: values[-1] for key, values in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if "x-www-form-urlencoded" in environ.get("CONTENT_TYPE", ""):
        params.update({key: values[-1] for key, values in parse_qs(body.decode("utf-8", "replace")).items()})
    return params


def _json_denial(
    error_type: str,
    message: str,
    *,
    status: str = "400 Bad Request",
    content_type: str = "application/x-amz-json-1.0",
) -> _Response:
    body = json.dumps({"__type": error_type, "message": message}).encode()
    headers = [
        ("Content-Type", content_type),
        ("x-amzn-RequestId", str(uuid.uuid4())),
        ("Content-Length", str(len(body))),
    ]
    return _Response(status, headers, body)


def json_error(error_type: str, message: str) -> tuple[str, list[tuple[str, str]], bytes]:
    """A JSON error answer as ``(status, headers, body)`` for a WSGI app."""
    response = _json_denial(error_type, message)
    return response.status, response.headers, response.body


def _xml_denial(message: str) -> _Response:
    return _xml_error("AccessDenied", message, status="403 Forbidden")


def _xml_error(code: str, message: str, *, status: str) -> _Response:
    root = ET.Element("ErrorResponse", xmlns="https://sts.amazonaws.com/doc/2011-06-15/")
    error = ET.SubElement(root, "Error")
    ET.SubElement(error, "Type").text = "Sender"
    ET.SubElement(error, "Code").text = code
    ET.SubElement(error, "Message").text = message
    ET.SubElement(root, "RequestId").text = str(uuid.uuid4())
    body = ET.tostring(root)
    return _Response(status, [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))], body)
