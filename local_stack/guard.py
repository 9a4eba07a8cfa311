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
  (:func:`dynamodb_requests`): the action and the table or index ARN, and
  ``dynamodb:LeadingKeys`` = the partition-key values of every item the request
  touches (a transaction or batch is one question per item or table). All must
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
condition keys other than ``dynamodb:LeadingKeys``, ``aws:PrincipalTag/*``,
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
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from local_stack import cognito, iam
from local_stack.identity_pool import IdentityPoolError, LocalIdentityPool
from local_stack.roles import ACCOUNT_ID, RoleDefinition
from local_stack.sessions import Session, Sessions, denial_message, signer_of
from local_stack.sts import AssumeRoleRequest, assume_role_request, authorize_assume_role, xml_denial

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


# ---------------------------------------------------------------- DynamoDB requests
@dataclass(frozen=True)
class TableKeys:
    """A table's partition-key attribute, and each index's."""

    name: str
    partition_key: str
    index_partition_keys: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    """One authorization question a DynamoDB request asks."""

    action: str
    resource: str
    leading_keys: tuple[str, ...] | None = None


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
        return [reader.item(operation, body.get("TableName"), body.get(_ITEM_OPERATIONS[operation]))]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        return reader.transaction(body.get("TransactItems"))
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return reader.batch(operation, body.get("RequestItems"))
    if operation == "Query":
        return [reader.query(body)]
    # Everything else asks about the action on a resource, without keys (Scan,
    # DescribeTable, the Streams API...): no dynamodb:LeadingKeys in the context.
    return [Question(f"dynamodb:{operation}", _resource_of(operation, body, region))]


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

    def item(self, action: str, table: Any, item: Any) -> Question:
        self.keys_of(table)
        return Question(f"dynamodb:{action}", table_arn(self.region, table), (self.leading(table, item),))

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
            questions.append(self.item(_TRANSACT_ACTIONS[kind], spec.get("TableName"), item))
        return questions

    def batch(self, operation: str, request_items: Any) -> list[Question]:
        if not isinstance(request_items, Mapping) or not request_items:
            raise iam.NotUnderstood("RequestItems")
        questions = []
        for table, spec in request_items.items():
            if operation == "BatchGetItem":
                items = list(spec.get("Keys", [])) if isinstance(spec, Mapping) else []
            else:
                items = [_write_request_item(request) for request in spec]
            values = tuple(self.leading(table, item) for item in items)
            if not values:
                raise iam.NotUnderstood("empty batch")
            questions.append(Question(f"dynamodb:{operation}", table_arn(self.region, table), values))
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
        return Question("dynamodb:Query", resource, tuple(dict.fromkeys(values)))


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
        decision = session.decide(iam.Request(question.action, question.resource, context))
        if decision is not iam.Decision.ALLOW:
            return denial_message(session.arn, question.action, question.resource, decision)
    return None


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
            return _Response(*xml_denial(denial_message("anonymous", f"sts:{sts_action}", "*", None)))
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
        return _json_denial("AccessDeniedException", message) if target else _Response(*xml_denial(message))

    def _sts(self, environ: Environ, body: bytes, caller: Session | None) -> _Response | None:
        params = _query_params(environ, body)
        action = params.get("Action", "")
        caller_arn = caller.arn if caller is not None else f"arn:aws:iam::{ACCOUNT_ID}:root"
        if action in _REFUSED_STS_ACTIONS:
            return _Response(*xml_denial(denial_message(caller_arn, f"sts:{action}", "*", None)))
        if action != "AssumeRole":
            return None
        request = assume_role_request(params, caller_arn)
        if not isinstance(request, AssumeRoleRequest):
            return _Response(*request)
        message = authorize_assume_role(caller, request, self.roles)
        if message is not None:
            log.warning("denied: %s", message)
            return _Response(*xml_denial(message))
        response = self._forward(environ, body)
        if response.status.startswith("200"):
            access_key = ET.fromstring(response.body).find(f".//{_STS_NS}AccessKeyId")  # noqa: S314 - moto's own XML
            role = next(role for role in self.roles.values() if role.arn == request.role_arn)
            if access_key is None or not access_key.text:
                return _Response(*xml_denial("The emulator returned no credentials."))
            self.sessions.add(
                Session(access_key.text, role, request.session_name, dict(request.tags), request.session_policy)
            )
        return response


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
