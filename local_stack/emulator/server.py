"""The embedded AWS: moto in server mode on loopback, behind the IAM guard,
provisioned from `template.yaml`.

:meth:`Emulator.provision` creates what the stack's functions need, each from
its template definition: the table (with GSI1, its stream and TTL), every
SQS queue (the stream functions' on-failure queues), the user pool with its
``custom:tenant_id`` schema, app client and ``admin`` group, the identity pool
(served by :mod:`local_stack.cognito.identity_pool`: its provider, authenticated role
and principal tags), and every IAM role (trust policy, inline policies,
policies attached by ``AWS::IAM::Policy``, SAM's generated function roles).
The user pool signs ID tokens (RS256) with a key generated at every start
(:mod:`local_stack.cognito.user_pool`; moto's own key is public) and serves its public
half at ``/<pool id>/.well-known/jwks.json``.

The stack's own requests are signed with :data:`OPERATOR_CREDENTIALS` (the
emulated account's administrator, see :mod:`local_stack.iam.guard`), never with
credentials from your environment, and always go to the emulator's endpoint.
The guard verifies every signed request against the secrets the emulator
issued (:mod:`local_stack.iam.sigv4`): that pair, and the credentials of each role
session its STS and identity pool hand out.

:meth:`Emulator.deploy_dedicated` makes a dedicated tenant's table the same
way, from ``templates/dedicated-table.yaml`` (its key, with its policy for
the guard, and its table, tagged, encrypted under that key, with PITR and
deletion protection), read with the pool's exports; the guard then reads its
keys, and its ``TenantId`` tag is the table's ``aws:ResourceTag`` (read from
moto's table when a question is asked, :func:`moto_table_tags`); its key and
the key's state are what DynamoDB would use for each data request
(:func:`moto_table_key`).

The data perimeter has its own way in: a second listener,
:attr:`Emulator.endpoint_url`, stands for the stack's VPC endpoints: the
DynamoDB gateway endpoint and the KMS interface endpoint (webhook secrets).
Only the functions the template puts in its VPC are pointed at it
(:func:`local_stack.stack.lambda_environment`), and only DynamoDB and KMS's
``Encrypt`` (the KMS endpoint's policy) answer there. Requests that arrive
through it carry ``aws:SourceVpce`` = that endpoint's id
(:data:`local_stack.local_values.LOCAL_VPC_ENDPOINT_ID`, or
:data:`~local_stack.local_values.LOCAL_KMS_ENDPOINT_ID` for KMS) for the guard;
requests to the main listener carry none, like requests from anywhere but the VPC.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from local_stack.cognito import identity_pool
from local_stack.cognito import user_pool as cognito
from local_stack.emulator import moto_fixes
from local_stack.emulator.consumed_capacity import CapacityUnits
from local_stack.emulator.moto_fixes import MOTO_LOCK
from local_stack.iam.dynamodb_authorization import TableKeys, table_name
from local_stack.iam.guard import SOURCE_VPCE_ENVIRON, Guard
from local_stack.iam.kms_via_dynamodb import TableKey
from local_stack.iam.protocol_answers import json_error
from local_stack.iam.protocol_requests import json_object, read_body
from local_stack.iam.sessions import Session, Sessions
from local_stack.iam.sigv4 import Credentials
from local_stack.local_values import (
    LOCAL_KMS_ENDPOINT_ID,
    LOCAL_VPC_ENDPOINT_ID,
    QUEUE_ATTRIBUTES,
    local_values,
    queue_name,
)
from local_stack.running_stack import OPERATOR_CREDENTIALS, REGION, emulator_client
from stack_model.control_plane import (
    LOCAL_KINDS,
    LOCAL_STACK_NAME,
    control_plane_resources,
    control_plane_template,
    control_plane_values,
)
from stack_model.dedicated import dedicated_resources, dedicated_values
from stack_model.roles import RoleDefinition, roles_from_template
from stack_model.template import (
    ACCOUNT_ID,
    Values,
    resources,
    role_arn,
    table_arguments,
    table_definition,
    table_protections,
    translated,
)
from support_tickets.core.identity import ADMIN_GROUP

# How often an idle server's loop looks whether it was asked to stop: stop() waits up
# to this long for each server (socketserver's default, 0.5 s, made every stop ~1.5 s).
SHUTDOWN_POLL_S = 0.05

if TYPE_CHECKING:
    from mypy_boto3_cognito_identity import CognitoIdentityClient
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sts import STSClient

log = logging.getLogger("local_stack.emulator")

# Where a user pool publishes its keys, after /<pool id>.
JWKS_PATH = "/.well-known/jwks.json"
# KMS's JSON protocol target prefix (X-Amz-Target: TrentService.Encrypt).
KMS_TARGET_PREFIX = "TrentService."


Control = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes] | None]
# The requests that can add records to the table's stream (the stream pollers are told of each).
TABLE_WRITES = frozenset(
    f"DynamoDB_20120810.{operation}"
    for operation in (
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "ExecuteStatement",
        "BatchExecuteStatement",
        "ExecuteTransaction",
    )
)
# Where each table write names its tables (PartiQL's statements name theirs in their text).
_TRANSACT_WRITE_KINDS = ("Put", "Update", "Delete", "ConditionCheck")


def written_tables(target: str, body: bytes) -> frozenset[str] | None:
    """The tables a table write (TABLE_WRITES) names, by name; ``None`` when its
    body does not say (PartiQL, or a body DynamoDB itself would refuse): every
    table may have been written."""
    payload = json_object(body)
    if payload is None:
        return None
    operation = target.rpartition(".")[2]
    try:
        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            names = [payload["TableName"]]
        elif operation == "BatchWriteItem":
            names = list(payload["RequestItems"])
        elif operation == "TransactWriteItems":
            names = [
                action[kind]["TableName"]
                for action in payload["TransactItems"]
                for kind in _TRANSACT_WRITE_KINDS
                if kind in action
            ]
        else:
            return None
    except (KeyError, TypeError):
        return None
    if not all(isinstance(name, str) for name in names):
        return None
    return frozenset(table_name(name) for name in names)


# The requests that can make a queue's messages receivable (the SQS pollers are told of each).
QUEUE_WRITES = frozenset(
    f"AmazonSQS.{operation}"
    for operation in ("SendMessage", "SendMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch")
)


class _QuietHandler(MotoRequestHandler):
    """moto's request handler without werkzeug's per-request access log, over
    HTTP/1.1: the functions' botocore clients keep their connections (and this
    server its per-connection thread) instead of opening one per AWS call."""

    protocol_version = "HTTP/1.1"

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return


@dataclass(frozen=True)
class Provisioned:
    """What the emulator holds, as a deployed stack's outputs would name it."""

    table_name: str
    table_arn: str
    stream_arn: str
    user_pool_id: str
    user_pool_client_id: str
    user_pool_provider_name: str
    identity_pool_id: str
    admin_group: str
    failure_queue_url: str
    failure_queue_arn: str
    roles: dict[str, RoleDefinition]
    values: Values
    # The tiers' usage plans (tier -> plan id), in the emulator's API Gateway.
    usage_plans: dict[str, str]
    # Every queue of the template, by logical id: (URL, ARN).
    queues: dict[str, tuple[str, str]]

    def queue_url(self, arn: str) -> str:
        """The URL of the template's queue with this ARN."""
        (url,) = [url for url, queue_arn in self.queues.values() if queue_arn == arn]
        return url


@dataclass(frozen=True)
class ControlPlane:
    """What the cells' control plane's emulator holds, as its stack's outputs name it."""

    user_pool_id: str
    user_pool_client_id: str
    user_pool_provider_name: str
    admin_group: str
    directory_table: str


@dataclass(frozen=True)
class DedicatedTable:
    """A dedicated tenant's stack as the emulator holds it (what its outputs name)."""

    tenant_id: str
    table_name: str
    table_arn: str
    stream_arn: str
    key_arn: str
    # The dedicated template's reading for this tenant (its mappings resolve with it).
    values: Values

    def outputs(self) -> dict[str, str]:
        """As the tenant's stack's outputs name them."""
        return {
            "TableName": self.table_name,
            "TableArn": self.table_arn,
            "StreamArn": self.stream_arn,
            "KeyArn": self.key_arn,
        }


def moto_table_tags(resource: str) -> dict[str, str]:
    """The tags moto holds for a table ARN, read when asked (a tag change is
    the next question's). Reading moto's in-memory table is a dictionary lookup
    and a list of at most 50 tags, under the lock the guard already holds
    (measured: 5 us of a GetItem's 270 us authorization): a cache would cost
    about as much to check as this costs to read, and could only be wrong. A
    stream's own tags are not modelled (none here: nothing tags one)."""
    from moto.dynamodb.models import dynamodb_backends

    prefix = f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/"
    name = resource.removeprefix(prefix)
    if name == resource or "/" in name:
        return {}
    with MOTO_LOCK:
        table = dynamodb_backends[ACCOUNT_ID][REGION].tables.get(name)
        return {} if table is None else {str(tag["Key"]): str(tag["Value"]) for tag in table.tags}


def moto_table_key(resource: str) -> TableKey | None:
    """The KMS key moto's table of a table ARN is encrypted with, and its state,
    read when asked (a DisableKey is the next request's); ``None`` for a table
    with DynamoDB's own key, or none."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.kms.models import kms_backends

    name = resource.removeprefix(f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/")
    with MOTO_LOCK:
        table = dynamodb_backends[ACCOUNT_ID][REGION].tables.get(name)
        sse = table.sse_specification if table is not None else None
        key_id = sse.get("KMSMasterKeyId") if isinstance(sse, dict) and sse.get("Enabled") else None
        if not isinstance(key_id, str):
            return None
        key = kms_backends[ACCOUNT_ID][REGION].keys.get(key_id.rsplit("/", 1)[-1])
        return TableKey(key_id, "NotFound") if key is None else TableKey(key.arn, key.key_state)


def table_keys(definition: Mapping[str, Any]) -> TableKeys:
    """What the guard reads of a table's CreateTable arguments: its partition
    key and each index's."""
    return TableKeys(
        name=definition["TableName"],
        partition_key=_hash_key(definition["KeySchema"]),
        index_partition_keys={
            index["IndexName"]: _hash_key(index["KeySchema"]) for index in definition.get("GlobalSecondaryIndexes", [])
        },
    )


class Emulator:
    """moto server + guard on ``host:port`` (0: a free port)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        control: Control | None = None,
        endpoint_port: int = 0,
        *,
        capacity_model: bool = True,
        user_pool_url: str | None = None,
    ) -> None:
        self._host = host
        # The emulator holding the user pool the template's UserPoolId names (a cell's shared
        # pool): its JWKS is served from there, its tokens exchanged for this stack's credentials.
        self._user_pool_url = user_pool_url.rstrip("/") if user_pool_url else None
        self._capacity_model = capacity_model
        self._port = port
        self._endpoint_port = endpoint_port
        self._control = control
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._endpoint_server: BaseWSGIServer | None = None
        self._endpoint_thread: threading.Thread | None = None
        self.guard: Guard | None = None
        self.provisioned: Provisioned | None = None
        # The dedicated tenants' tables made so far, by tenant.
        self.dedicated: dict[str, DedicatedTable] = {}
        self._dedicated_lock = threading.Lock()
        # Called after every request that may have written a table (TABLE_WRITES), with
        # the tables it named (``None``: any of them).
        self.on_table_write: Callable[[frozenset[str] | None], None] | None = None
        # Called after every request that may have made a message receivable (QUEUE_WRITES).
        self.on_queue_write: Callable[[], None] | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        moto_fixes.apply()
        # The pool provisioned below signs with it: a token is this start's or forged.
        cognito.new_signing_key()
        definition = table_definition()
        tables = {definition["TableName"]: table_keys(definition)}
        operator = Credentials(OPERATOR_CREDENTIALS["aws_access_key_id"], OPERATOR_CREDENTIALS["aws_secret_access_key"])
        moto_app = DomainDispatcherApplication(create_backend_app)
        self.guard = Guard(
            # moto behind the capacity model: realistic ConsumedCapacity (local_stack.emulator.consumed_capacity),
            # unless turned off (moto's constant: the benchmark's measure of the asking alone).
            CapacityUnits(moto_app, definition["TableName"]) if self._capacity_model else moto_app,
            roles={},
            tables=tables,
            sessions=Sessions(operator=operator),
            resource_tags=moto_table_tags,
            table_key=moto_table_key,
        )
        self._server = make_server(self._host, self._port, self._app, threaded=True, request_handler=_QuietHandler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, name="emulator", daemon=True
        )
        self._thread.start()
        self._endpoint_server = make_server(
            self._host, self._endpoint_port, self._endpoint_app, threaded=True, request_handler=_QuietHandler
        )
        self._endpoint_thread = threading.Thread(
            target=self._endpoint_server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_S},
            name="emulator-vpc-endpoint",
            daemon=True,
        )
        self._endpoint_thread.start()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if self._user_pool_url is not None and environ.get("PATH_INFO", "").endswith(JWKS_PATH):
            return self._shared_pool_jwks(environ, start_response)
        if self._control is not None:
            handled = self._control(environ, start_response)
            if handled is not None:
                return handled
        assert self.guard is not None
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        tables: frozenset[str] | None = None
        if self.on_table_write is not None and target in TABLE_WRITES:
            # Only the written tables' pollers are told: each told poller reads its stream
            # at once, and a session's local stack holds many tables (the dedicated ones).
            body = read_body(environ)
            environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
            tables = written_tables(target, body)
        # moto's backends are not thread-safe: one request at a time.
        with MOTO_LOCK:
            answer = self.guard(environ, start_response)
        if self.on_table_write is not None and target in TABLE_WRITES:
            self.on_table_write(tables)
        if self.on_queue_write is not None and target in QUEUE_WRITES:
            self.on_queue_write()
        return answer

    def _shared_pool_jwks(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """``/<pool id>/.well-known/jwks.json`` of the shared pool, as its emulator serves it
        (this one holds no pool: the authorizer reads the keys where it reads everything)."""
        url = f"{self._user_pool_url}{environ.get('PATH_INFO', '')}"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - the local emulator's URL
                status, body = f"{answer.status} OK", answer.read()
        except urllib.error.HTTPError as refused:
            status, body = f"{refused.code} {refused.reason}", refused.read()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def _endpoint_app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The stack's VPC endpoints: DynamoDB (the gateway endpoint) and KMS
        (the interface endpoint, whose policy admits ``kms:Encrypt`` only),
        each with its endpoint's id for the guard."""
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target.startswith("DynamoDB_20120810."):
            environ[SOURCE_VPCE_ENVIRON] = LOCAL_VPC_ENDPOINT_ID
            return self._app(environ, start_response)
        if target.startswith(KMS_TARGET_PREFIX):
            if target != KMS_TARGET_PREFIX + "Encrypt":
                # The endpoint's policy: kms:Encrypt on the webhook key only (the
                # guard judges the key against the caller's role).
                status, headers, body = json_error(
                    "AccessDeniedException",
                    f"kms:{target.removeprefix(KMS_TARGET_PREFIX)} is not allowed by the KMS endpoint's policy.",
                )
                start_response(status, headers)
                return [body]
            environ[SOURCE_VPCE_ENVIRON] = LOCAL_KMS_ENDPOINT_ID
            return self._app(environ, start_response)
        # In AWS the VPC has no route to any other service: the call never arrives.
        status, headers, body = json_error(
            "UnreachableFromVpcException",
            "Only DynamoDB and KMS are reachable from the stack's VPC (its endpoints); nothing else has a route.",
        )
        start_response(status, headers)
        return [body]

    def stop(self) -> None:
        for server in (self._server, self._endpoint_server):
            if server is not None:
                server.shutdown()
                server.server_close()
        for thread in (self._thread, self._endpoint_thread):
            if thread is not None:
                thread.join(timeout=10)
        self._server = self._endpoint_server = None
        self._thread = self._endpoint_thread = None

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        return f"http://{self._url_host}:{self.port}"

    @property
    def endpoint_port(self) -> int:
        assert self._endpoint_server is not None, "start() first"
        return int(self._endpoint_server.server_port)

    @property
    def endpoint_url(self) -> str:
        """The stack's DynamoDB gateway endpoint: the VPC functions' only way out."""
        return f"http://{self._url_host}:{self.endpoint_port}"

    @property
    def _url_host(self) -> str:
        return "127.0.0.1" if self._host in ("0.0.0.0", "") else self._host  # noqa: S104 - a URL, not a bind

    # ------------------------------------------------------------ clients
    def client(self, service: str, **credentials: str) -> Any:
        """A client of the emulator, as the operator unless credentials are given."""
        return emulator_client(self.url, service, credentials or OPERATOR_CREDENTIALS)

    def assume(self, role: RoleDefinition, session_name: str, tags: dict[str, str] | None = None) -> dict[str, str]:
        """Credentials of ``role`` (as the operator would get them), as the
        ``AWS_*`` environment variables a Lambda function receives."""
        sts: STSClient = self.client("sts")
        kwargs: dict[str, Any] = {"RoleArn": role.arn, "RoleSessionName": session_name}
        if tags:
            kwargs["Tags"] = [{"Key": key, "Value": value} for key, value in tags.items()]
        credentials = sts.assume_role(**kwargs)["Credentials"]
        return {
            "AWS_ACCESS_KEY_ID": credentials["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": credentials["SecretAccessKey"],
            "AWS_SESSION_TOKEN": credentials["SessionToken"],
        }

    def session(self, access_key_id: str) -> Session | None:
        assert self.guard is not None
        return self.guard.sessions.get(access_key_id)

    def table_fingerprint(self, table_name: str, skip_pk_containing: Iterable[str] = ()) -> dict[str, Any]:
        """Every item of ``table_name`` (but those whose partition key contains
        one of ``skip_pk_containing``) as one SHA-256 and a count, read in moto's
        backend: what tests compare before and after an attempt to prove that
        nothing changed anywhere in the table (a full Scan over HTTP costs most
        of a second once a session has filled the table; this, milliseconds)."""
        from moto.dynamodb.models import dynamodb_backends

        skipped = tuple(skip_pk_containing)
        with MOTO_LOCK:
            table = dynamodb_backends[ACCOUNT_ID][REGION].get_table(table_name)
            items = sorted(
                json.dumps(attributes, sort_keys=True)
                for attributes in (item.to_json()["Attributes"] for item in table.all_items())
                if not any(mark in str(attributes.get("pk", {}).get("S", "")) for mark in skipped)
            )
        digest = hashlib.sha256("\n".join(items).encode()).hexdigest()
        return {"items": len(items), "sha256": digest}

    # ------------------------------------------------------------ provisioning
    def provision(self, parameters: Mapping[str, str] | None = None) -> Provisioned:
        """Create the template's resources the functions use, in an order where
        each names only resources made before it (``parameters`` override the
        template's defaults). Each kind's maker gets its resource's properties
        resolved and answers with what references to it stand for."""
        assert self.guard is not None, "start() first"
        values = local_values(parameters)
        makers: dict[str, Callable[[str, dict[str, Any]], tuple[str, dict[str, str]]]] = {
            "AWS::DynamoDB::Table": self._make_table,
            "AWS::SQS::Queue": self._make_queue,
            "AWS::KMS::Key": self._make_kms_key,
            "AWS::Cognito::UserPool": self._make_user_pool,
            "AWS::Cognito::UserPoolClient": self._make_user_pool_client,
            "AWS::Cognito::UserPoolGroup": self._make_group,
            "AWS::Cognito::IdentityPool": self._make_identity_pool,
            "AWS::IAM::Role": self._make_role,
            "AWS::ApiGateway::UsagePlan": self._make_usage_plan,
        }
        for kind, make in makers.items():
            for logical_id, resource in _creation_order(kind, resources(kind)):
                if values.holds(resource):
                    ref, attributes = make(logical_id, values.resolve(resource["Properties"]))
                    values.add(logical_id, ref, **attributes)
        roles = roles_from_template(values)
        self.guard.roles = roles
        self.guard.identity_pool = identity_pool.from_template(values, roles, self._user_pool_provider(values))
        ((table, _),) = resources("AWS::DynamoDB::Table").items()
        ((pool, _),) = resources("AWS::Cognito::IdentityPool").items()
        # The stack's own pool or the shared one its parameters name, as its outputs say.
        outputs = translated()["Outputs"]
        (provider_name,) = self.guard.identity_pool.providers
        queues = {name: (values.ref(name), values.get_att(f"{name}.Arn")) for name in resources("AWS::SQS::Queue")}
        self.provisioned = Provisioned(
            table_name=values.ref(table),
            table_arn=values.get_att(f"{table}.Arn"),
            stream_arn=values.get_att(f"{table}.StreamArn"),
            user_pool_id=str(values.resolve(outputs["UserPoolId"]["Value"])),
            user_pool_client_id=str(values.resolve(outputs["UserPoolClientId"]["Value"])),
            user_pool_provider_name=provider_name,
            identity_pool_id=values.ref(pool),
            admin_group=ADMIN_GROUP,
            failure_queue_url=queues["AggregateCountsFailureQueue"][0],
            failure_queue_arn=queues["AggregateCountsFailureQueue"][1],
            roles=roles,
            values=values,
            usage_plans={usage_plan_tier(name): values.ref(name) for name in resources("AWS::ApiGateway::UsagePlan")},
            queues=queues,
        )
        return self.provisioned

    def provision_control_plane(self, stack_name: str = LOCAL_STACK_NAME) -> ControlPlane:
        """What ``make dev CELLS=<n>``'s control plane holds, each made from its
        definition in ``templates/control-plane.yaml`` by the makers :meth:`provision`
        uses (the shared user pool is template.yaml's, setting for setting:
        tests/unit/test_control_plane_template.py): the user pool, its app client
        and admin group, and the directory table. Its outputs name them."""
        assert self.guard is not None, "start() first"
        values = control_plane_values(stack_name)
        makers: dict[str, Callable[[str, dict[str, Any]], tuple[str, dict[str, str]]]] = {
            "AWS::Cognito::UserPool": self._make_user_pool,
            "AWS::Cognito::UserPoolClient": self._make_user_pool_client,
            "AWS::Cognito::UserPoolGroup": self._make_group,
            "AWS::DynamoDB::Table": self._make_table,
        }
        for kind in LOCAL_KINDS:
            for logical_id, resource in control_plane_resources(kind).items():
                ref, attributes = makers[kind](logical_id, values.resolve(resource["Properties"]))
                values.add(logical_id, ref, **attributes)
        outputs = control_plane_template()["Outputs"]

        def output(name: str) -> str:
            return str(values.resolve(outputs[name]["Value"]))

        ((group, _),) = control_plane_resources("AWS::Cognito::UserPoolGroup").items()
        return ControlPlane(
            user_pool_id=output("UserPoolId"),
            user_pool_client_id=output("UserPoolClientId"),
            user_pool_provider_name=output("UserPoolProviderName"),
            admin_group=values.ref(group),
            directory_table=output("DirectoryTableName"),
        )

    def _user_pool_provider(self, values: Values) -> Callable[[str, str], identity_pool.Provider]:
        """Who stands for the pool the identity pool trusts: the stack's own user pool
        (this emulator's), or the shared one its parameters name (another emulator's)."""
        if all(values.holds(resource) for resource in resources("AWS::Cognito::UserPool").values()):
            return identity_pool.user_pool_provider
        if self._user_pool_url is None:
            raise ValueError("UserPoolId names a shared user pool: give the emulator that holds it (--user-pool-url)")
        return functools.partial(identity_pool.remote_user_pool_provider, endpoint_url=self._user_pool_url)

    def deploy_dedicated(self, tenant_id: str) -> DedicatedTable:
        """The tenant's dedicated table, made from ``templates/dedicated-table.yaml``
        as :meth:`provision` makes the pool's (its key, then its table), read with
        the pool stack's exports; the guard reads its keys from then on. Its
        alias and alarms have nothing to stand for here, and its stream's
        mappings are the local stack's pollers. Deployed again, the same table."""
        assert self.guard is not None, "start() first"
        assert self.provisioned is not None, "provision() first"
        with self._dedicated_lock:
            if tenant_id in self.dedicated:
                return self.dedicated[tenant_id]
            values = dedicated_values(tenant_id, self.provisioned.values)
            makers: dict[str, Callable[[str, dict[str, Any]], tuple[str, dict[str, str]]]] = {
                "AWS::KMS::Key": self._make_kms_key,
                "AWS::DynamoDB::Table": self._make_table,
            }
            for kind, make in makers.items():
                for logical_id, resource in dedicated_resources(kind).items():
                    ref, attributes = make(logical_id, values.resolve(resource["Properties"]))
                    values.add(logical_id, ref, **attributes)
            ((table, resource),) = dedicated_resources("AWS::DynamoDB::Table").items()
            ((key, _),) = dedicated_resources("AWS::KMS::Key").items()
            definition = table_arguments(values.resolve(resource["Properties"]))
            self.guard.tables = {**self.guard.tables, definition["TableName"]: table_keys(definition)}
            made = DedicatedTable(
                tenant_id=tenant_id,
                table_name=values.ref(table),
                table_arn=values.get_att(f"{table}.Arn"),
                stream_arn=values.get_att(f"{table}.StreamArn"),
                key_arn=values.get_att(f"{key}.Arn"),
                values=values,
            )
            self.dedicated[tenant_id] = made
            return made

    def remove_dedicated(self, tenant_id: str, waiting_days: int) -> dict[str, str] | None:
        """What offboarding does to the tenant's dedicated stack in AWS
        (``ops.dedicated_teardown``), to what :meth:`deploy_dedicated` made: the
        table's deletion protection off, the table deleted, its key's deletion
        scheduled in ``waiting_days`` (moto's KMS: ``PendingDeletion`` with its
        deletion date); the guard forgets the table. ``None`` if the tenant has
        none (never made, or removed already)."""
        assert self.guard is not None, "start() first"
        with self._dedicated_lock:
            made = self.dedicated.get(tenant_id)
            if made is None:
                return None
            dynamodb: DynamoDBClient = self.client("dynamodb")
            dynamodb.update_table(TableName=made.table_name, DeletionProtectionEnabled=False)
            dynamodb.delete_table(TableName=made.table_name)
            # By its id: moto's ScheduleKeyDeletion does not resolve an ARN (KMS takes either).
            key_id = made.key_arn.rsplit("/", 1)[-1]
            scheduled = self.client("kms").schedule_key_deletion(KeyId=key_id, PendingWindowInDays=waiting_days)
            self.guard.tables = {name: keys for name, keys in self.guard.tables.items() if name != made.table_name}
            del self.dedicated[tenant_id]
            return {
                "TableName": made.table_name,
                "KeyArn": made.key_arn,
                "KeyDeletionDate": scheduled["DeletionDate"].isoformat(timespec="seconds"),
            }

    def _make_table(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        """The table with its keys, indexes and stream, and what protects it: its
        tags, deletion protection, customer managed key, TTL and PITR."""
        dynamodb: DynamoDBClient = self.client("dynamodb")
        table = dynamodb.create_table(**table_arguments(props), **table_protections(props))["TableDescription"]
        if props.get("TimeToLiveSpecification"):
            dynamodb.update_time_to_live(
                TableName=table["TableName"], TimeToLiveSpecification=props["TimeToLiveSpecification"]
            )
        if props.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled"):
            dynamodb.update_continuous_backups(
                TableName=table["TableName"],
                PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
            )
        return table["TableName"], {"Arn": table["TableArn"], "StreamArn": table.get("LatestStreamArn", "")}

    def _make_queue(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        """The queue with the template's attributes (FIFO, visibility timeout,
        redrive policy...), named as written or after its logical id (a FIFO
        queue's name ends in ``.fifo``, as CloudFormation names it)."""
        sqs = self.client("sqs")
        attributes = {key: _queue_attribute(props[key]) for key in QUEUE_ATTRIBUTES if key in props}
        url = sqs.create_queue(QueueName=queue_name(logical_id, props), Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return url, {"Arn": arn}

    def _make_kms_key(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        tags = [{"TagKey": tag["Key"], "TagValue": tag["Value"]} for tag in props.get("Tags", [])]
        metadata = self.client("kms").create_key(Description=str(props.get("Description", logical_id)), Tags=tags)[
            "KeyMetadata"
        ]
        assert self.guard is not None
        if isinstance(props.get("KeyPolicy"), dict):  # the guard applies its Denies (moto does not)
            self.guard.key_policies = {**self.guard.key_policies, metadata["Arn"]: props["KeyPolicy"]}
        return metadata["KeyId"], {"Arn": metadata["Arn"]}

    def _make_user_pool(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        cognito_idp: CognitoIdentityProviderClient = self.client("cognito-idp")
        props["PoolName"] = props.pop("UserPoolName")
        pool_id = cognito_idp.create_user_pool(**props)["UserPool"]["Id"]
        return pool_id, {"ProviderName": f"cognito-idp.{REGION}.amazonaws.com/{pool_id}"}

    def _make_user_pool_client(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        cognito_idp: CognitoIdentityProviderClient = self.client("cognito-idp")
        return cognito_idp.create_user_pool_client(**props)["UserPoolClient"]["ClientId"], {}

    def _make_group(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        cognito_idp: CognitoIdentityProviderClient = self.client("cognito-idp")
        cognito_idp.create_group(**props)
        return props["GroupName"], {}

    def _make_identity_pool(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        """The identity pool in moto (so the operator can describe it); the
        guard answers its token exchanges (:mod:`local_stack.cognito.identity_pool`)."""
        client: CognitoIdentityClient = self.client("cognito-identity")
        created = client.create_identity_pool(
            IdentityPoolName=props["IdentityPoolName"],
            AllowUnauthenticatedIdentities=bool(props.get("AllowUnauthenticatedIdentities")),
            AllowClassicFlow=bool(props.get("AllowClassicFlow")),
            CognitoIdentityProviders=props.get("CognitoIdentityProviders", []),
        )
        return created["IdentityPoolId"], {}

    def _make_role(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        """The role in moto's IAM, named by its logical id (what the guard
        evaluates is :func:`stack_model.roles.roles_from_template`'s reading)."""
        iam_client = self.client("iam")
        iam_client.create_role(
            RoleName=logical_id, AssumeRolePolicyDocument=json.dumps(props["AssumeRolePolicyDocument"])
        )
        for policy in props.get("Policies", []):
            iam_client.put_role_policy(
                RoleName=logical_id,
                PolicyName=policy["PolicyName"],
                PolicyDocument=json.dumps(policy["PolicyDocument"]),
            )
        return logical_id, {"Arn": role_arn(logical_id)}

    def _make_usage_plan(self, logical_id: str, props: dict[str, Any]) -> tuple[str, dict[str, str]]:
        """A tier's usage plan (``UsagePlan<Tier>``), with the template's
        throttle and quota, in moto's API Gateway (without ``ApiStages``: the
        emulator holds no REST API; the local gateway is the API)."""
        client: Any = self.client("apigateway")
        throttle, quota = props.get("Throttle", {}), props.get("Quota", {})
        created = client.create_usage_plan(
            name=props.get("UsagePlanName", logical_id),
            description=props.get("Description", ""),
            throttle={"rateLimit": float(throttle["RateLimit"]), "burstLimit": int(throttle["BurstLimit"])},
            quota={"limit": int(quota["Limit"]), "period": quota.get("Period", "DAY")},
            tags={"tier": usage_plan_tier(logical_id)},
        )
        return created["id"], {}


USAGE_PLAN_PREFIX = "UsagePlan"


def _queue_attribute(value: Any) -> str:
    """A template's queue property as ``CreateQueue`` takes it: a string (a
    ``RedrivePolicy`` object as JSON, booleans in lower case)."""
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _creation_order(kind: str, found: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Resources of one kind in an order where each names only those made before
    it: queues with a ``RedrivePolicy`` after their dead-letter queues."""
    if kind != "AWS::SQS::Queue":
        return list(found.items())
    return sorted(found.items(), key=lambda item: "RedrivePolicy" in item[1].get("Properties", {}))


def usage_plan_tier(logical_id: str) -> str:
    """``UsagePlanPremium`` -> ``premium`` (the template names a tier's plan so)."""
    if not logical_id.startswith(USAGE_PLAN_PREFIX) or logical_id == USAGE_PLAN_PREFIX:
        raise ValueError(f"{logical_id}: usage plans are named UsagePlan<Tier>")
    return logical_id[len(USAGE_PLAN_PREFIX) :].lower()


def _hash_key(key_schema: list[dict[str, str]]) -> str:
    return next(key["AttributeName"] for key in key_schema if key["KeyType"] == "HASH")
